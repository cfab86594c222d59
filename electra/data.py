"""Pretraining data: corpus files -> ELECTRA examples (cached as an Arrow dataset) -> padded, resumable batches.

The corpus uses the official ELECTRA layout: one sentence per line, a blank line between documents.
`ExampleBuilder` is a port of the official example builder (google-research/electra,
build_pretraining_dataset.py) and `build_pretraining_dataset` streams every file through it into an HF
`datasets` Arrow dataset, cached under a fingerprint of its inputs. `pretraining_dataloader` then serves
full [batch_size, max_length] batches whose content depends only on (seed, step), so a resumed run sees
exactly the batches an uninterrupted one would have.
"""
from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import random
import shutil
import time
from pathlib import Path
from typing import Iterator, Optional

import datasets
import numpy as np
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader

from .config import ConfigError
from .demo import write_demo_corpus

__all__ = ['BUILDER_VERSION', 'corpus_files', 'ExampleBuilder', 'build_pretraining_dataset', 'PretrainingBatches',
           'pretraining_dataloader']

log = logging.getLogger(__name__)

BUILDER_VERSION = 1  # bump when a change to this module changes the examples it builds
_MARKER = 'electra_build.json'  # written last: a dataset directory without it is incomplete
_SAMPLE_BYTES = 1 << 20  # how much of each corpus file is checked up front for being text
_LINES_PER_CALL = 1000  # lines per batched tokenizer call
_FEATURES = datasets.Features({'input_ids': datasets.List(datasets.Value('int32')),
                               'token_type_ids': datasets.List(datasets.Value('int8'))})

Example = tuple[list[int], list[int]]  # (input_ids, token_type_ids), unpadded


# ---------------------------------------------------------------- corpus files

def _has_text(path: Path) -> bool:
    "Check the start of a corpus file is UTF-8 text; whether it has a non-blank line there."
    with open(path, 'rb') as f: head = f.read(_SAMPLE_BYTES)
    if not head:
        raise ConfigError(f"corpus file {path} is empty. Remove it from `corpus` or put text in it "
                          "(one sentence per line, a blank line between documents).")
    if b'\0' in head:
        raise ConfigError(f"corpus file {path} is not text (it contains NUL bytes). "
                          "Remove it from `corpus` (or from the corpus directory).")
    try:  # an incremental decoder accepts a character cut in two at the end of the sample
        text = codecs.getincrementaldecoder('utf-8')().decode(head, final=len(head) < _SAMPLE_BYTES)
    except UnicodeDecodeError as e:
        raise ConfigError(f"corpus file {path} is not UTF-8 text (byte {e.start}: {e.reason}). "
                          "Convert it to UTF-8 or remove it from `corpus`.") from e
    return bool(text.strip())


def corpus_files(paths: list[str], cache_dir: Path) -> list[Path]:
    """The corpus files named by `paths`: text files, directories (every regular file inside, recursively,
    sorted, hidden ones skipped) or 'demo' (the built-in corpus, written under `cache_dir/demo`).
    Raises `ConfigError` naming the offending path for anything that is missing, empty or not UTF-8 text."""
    files = []
    for entry in paths:
        if entry == 'demo':
            files.append(write_demo_corpus(Path(cache_dir) / 'demo' / 'demo_corpus.txt'))
            continue
        p = Path(entry).expanduser()
        if p.is_dir():
            found = sorted(f for f in p.rglob('*')
                           if f.is_file() and not any(part.startswith('.') for part in f.relative_to(p).parts))
            if not found:
                raise ConfigError(f"corpus directory {p} has no (non-hidden) files. Put text files in it or "
                                  "remove it from `corpus`.")
            files += found
        elif p.is_file():
            files.append(p)
        elif p.exists():
            raise ConfigError(f"corpus path {p} is neither a regular file nor a directory. Give text files "
                              "or directories of them.")
        else:
            raise ConfigError(f"corpus path {p} does not exist. Check the path, or use 'demo' for the "
                              "built-in sample corpus.")
    if not any([_has_text(f) for f in files]):  # a list, so that every file gets checked
        raise ConfigError(f"corpus {', '.join(paths) or '(empty list)'} has no text: every line is blank. Give "
                          "files with one sentence per line and a blank line between documents.")
    return files


# ---------------------------------------------------------------- examples

class ExampleBuilder:
    """Turns a stream of tokenized sentences into pretraining examples, as the official `ExampleBuilder`.

    Sentences are accumulated until their total length reaches the target length, then split into
    segments A and B: `[CLS] A [SEP] B [SEP]` with token types 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`
    (B may be empty: `[CLS] A [SEP]`). The end of a document emits what has been accumulated, so examples
    never span documents. Every random draw comes from `rng`, in the official order.
    """

    def __init__(self, max_length: int, cls_id: int, sep_id: int, rng: random.Random):
        self.max_length, self.cls_id, self.sep_id, self.rng = max_length, cls_id, sep_id, rng
        self.sentences: list[list[int]] = []
        self.length = 0
        self.target_length = max_length

    def add_sentence(self, ids: list[int]) -> Optional[Example]:
        "Add one sentence's token ids (no special tokens); return an example once the target length is reached."
        self.sentences.append(ids)
        self.length += len(ids)
        return self._create_example() if self.length >= self.target_length else None

    def end_document(self) -> Optional[Example]:
        "A blank line: emit the pending sentences, if any, as a (possibly short) example."
        return self._create_example() if self.length != 0 else None

    def _create_example(self) -> Example:
        # small chance of a single segment, as in classification tasks; -3 leaves room for [CLS] and two [SEP]
        first_target = 100000 if self.rng.random() < 0.1 else (self.target_length - 3) // 2
        a, b = [], []
        for s in self.sentences:
            # A takes the sentence if A is empty, if it fits under the target, or (only while B is empty and A is
            # under target) half the time when it pushes A over; `and`/`or` short-circuit exactly as the
            # official condition, so the coin is flipped only in that last case
            if not a or len(a) + len(s) < first_target or (not b and len(a) < first_target and self.rng.random() < 0.5):
                a += s
            else:
                b += s
        # trim to max_length, leaving room for [CLS] and one or two [SEP]
        a = a[:self.max_length - 2]
        b = b[:max(0, self.max_length - len(a) - 3)]
        self.sentences, self.length = [], 0
        # small chance of a shorter example, so the model also sees short inputs
        self.target_length = self.rng.randint(5, self.max_length) if self.rng.random() < 0.05 else self.max_length
        ids = [self.cls_id] + a + [self.sep_id]
        types = [0] * len(ids)
        if b:
            ids += b + [self.sep_id]
            types += [1] * (len(b) + 1)
        return ids, types


def _line_batches(lines, n: int) -> Iterator[list[str]]:
    "Stripped lines in lists of `n`."
    batch = []
    for line in lines:
        batch.append(line.strip())
        if len(batch) == n:
            yield batch
            batch = []
    if batch: yield batch


def _file_examples(path: Path, tokenizer, builder: ExampleBuilder, stats: dict) -> Iterator[Example]:
    "The examples of one corpus file; counts its documents in `stats`."
    in_document = False
    with open(path, encoding='utf-8') as f:
        try:
            for lines in _line_batches(f, _LINES_PER_CALL):
                texts = [line for line in lines if line]
                ids = iter(tokenizer(texts, add_special_tokens=False, return_attention_mask=False,
                                     return_token_type_ids=False)['input_ids'] if texts else [])
                for line in lines:
                    if line:
                        in_document = True
                        example = builder.add_sentence(next(ids))
                    else:
                        stats['documents'] += in_document
                        in_document = False
                        example = builder.end_document()
                    if example: yield example
        except UnicodeDecodeError as e:
            raise ConfigError(f"corpus file {path} is not UTF-8 text after its first MB ({e.reason}). "
                              "Convert it to UTF-8 or remove it from `corpus`.") from e
    # the official builder flushes at the end of every file too, so examples never span files
    stats['documents'] += in_document
    example = builder.end_document()
    if example: yield example


def _generate(shards: list[tuple[int, str]], tokenizer, max_length: int, seed: int, stats_dir: str):
    """`Dataset.from_generator` body: the examples of each (index, path) shard.

    Each file gets its own builder and RNG seeded by (seed, file index), so the dataset is the same whatever
    `num_proc` is. Document counts go to `stats_dir/<index>.json` and a bad file's error message to
    `stats_dir/<index>.error`: `datasets` wraps exceptions raised here, and across processes it loses them.
    """
    for index, path in shards:
        rng = random.Random(f'{seed}:{index}')
        builder = ExampleBuilder(max_length, tokenizer.cls_token_id, tokenizer.sep_token_id, rng)
        stats = {'documents': 0, 'examples': 0}
        try:
            for ids, types in _file_examples(Path(path), tokenizer, builder, stats):
                stats['examples'] += 1
                yield {'input_ids': ids, 'token_type_ids': types}
        except ConfigError as e:
            (Path(stats_dir) / f'{index}.error').write_text(str(e))
            return
        (Path(stats_dir) / f'{index}.json').write_text(json.dumps(stats))


# ---------------------------------------------------------------- the cached dataset

def _tokenizer_hash(tokenizer) -> str:
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    for key in ('truncation', 'padding'): spec.pop(key, None)  # call-time settings, not part of the vocabulary
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _fingerprint(files: list[Path], tokenizer, max_length: int, seed: int) -> str:
    stats = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    key = {'version': BUILDER_VERSION, 'files': stats, 'tokenizer': _tokenizer_hash(tokenizer),
           'max_length': max_length, 'seed': seed}
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:20]


def _read_marker(directory: Path, fingerprint: str) -> Optional[dict]:
    "The build record of a complete dataset directory for this fingerprint, else None."
    try: info = json.loads((directory / _MARKER).read_text())
    except (OSError, ValueError): return None
    return info if info.get('fingerprint') == fingerprint else None


def _shard_stats(stats_dir: Path) -> list[dict]:
    "What `_generate` reported for each file; raises the first bad file's ConfigError."
    errors = sorted(stats_dir.glob('*.error'))
    if errors: raise ConfigError(errors[0].read_text())
    return [json.loads(p.read_text()) for p in stats_dir.glob('*.json')]


def build_pretraining_dataset(files: list[Path], tokenizer, max_length: int, cache_dir: Path, seed: int,
                              num_proc: int = 1) -> datasets.Dataset:
    """The pretraining examples of `files` as an Arrow dataset (columns `input_ids`, `token_type_ids`:
    unpadded, [CLS] ... [SEP] included), memory-mapped from `cache_dir/pretrain_data/<fingerprint>`.

    Built once per fingerprint (the files' paths, sizes and mtimes, the tokenizer, max_length, seed and
    BUILDER_VERSION) and reused after. The build streams file by file (memory stays flat), uses up to
    `num_proc` processes (one file per task) and becomes visible atomically: it is written to a temporary
    directory, completed by the `electra_build.json` marker, then renamed into place.
    """
    files = [Path(f) for f in files]
    fp = _fingerprint(files, tokenizer, max_length, seed)
    root = Path(cache_dir) / 'pretrain_data'
    final = root / fp
    info = _read_marker(final, fp)
    if info:
        log.info(f"pretraining data: reusing {info['n_examples']:,} examples ({info['n_documents']:,} documents, "
                 f"max_length {max_length}) from {final}")
        return datasets.load_from_disk(str(final))

    start = time.time()
    tmp, work = root / f'.{fp}.{os.getpid()}.tmp', root / f'.{fp}.{os.getpid()}.work'
    for d in (tmp, work): shutil.rmtree(d, ignore_errors=True)
    (work / 'stats').mkdir(parents=True)
    procs = min(num_proc, len(files))  # `datasets` hands each process whole files
    try:
        try:  # the datasets library's own cache goes to `work` too, and is deleted with it
            ds = datasets.Dataset.from_generator(
                _generate, features=_FEATURES, cache_dir=str(work / 'hf_cache'), fingerprint=fp,
                num_proc=procs if procs > 1 else None,
                gen_kwargs={'shards': [(i, str(f)) for i, f in enumerate(files)], 'tokenizer': tokenizer,
                            'max_length': max_length, 'seed': seed, 'stats_dir': str(work / 'stats')})
        except ValueError:  # what `datasets` raises for an empty dataset, among other things
            if sum(s['examples'] for s in _shard_stats(work / 'stats')): raise
            raise ConfigError(f"corpus {', '.join(map(str, files))} gave no pretraining examples. Give files with "
                              "one sentence per line and a blank line between documents.") from None
        stats = _shard_stats(work / 'stats')
        ds.save_to_disk(str(tmp))
        info = {'fingerprint': fp, 'builder_version': BUILDER_VERSION, 'max_length': max_length, 'seed': seed,
                'tokenizer_sha256': _tokenizer_hash(tokenizer), 'n_examples': len(ds),
                'n_documents': sum(s['documents'] for s in stats), 'files': [str(f.resolve()) for f in files],
                'seconds': round(time.time() - start, 1)}
        (tmp / _MARKER).write_text(json.dumps(info, indent=1))
        if final.exists(): shutil.rmtree(final)  # no valid marker: an interrupted build
        try: os.replace(tmp, final)
        except OSError:  # another process built the same data meanwhile: use theirs
            if not _read_marker(final, fp): raise
    finally:
        for d in (tmp, work): shutil.rmtree(d, ignore_errors=True)
    log.info(f"pretraining data: built {info['n_examples']:,} examples from {info['n_documents']:,} documents in "
             f"{len(files)} file(s) in {info['seconds']:.1f}s -> {final}")
    return datasets.load_from_disk(str(final))


# ---------------------------------------------------------------- batches

class PretrainingBatches(torch.utils.data.Dataset):
    """Batches `start_step`, ..., `total_steps - 1` of an endless, seeded stream of examples; item i is batch
    `start_step + i` as `(input_ids, token_type_ids)`, int64 tensors of shape [batch_size, max_length] padded
    with `pad_token_id` and 0.

    The stream is pass 0, pass 1, ... over the dataset, pass k in the order of a permutation seeded by
    `seed + k`, cut into consecutive batches. A batch is therefore a pure function of (seed, step): starting
    at `start_step` gives exactly the batches an uninterrupted run sees from that step on, and a dataset
    smaller than one batch still fills full batches.
    """

    def __init__(self, dataset: datasets.Dataset, batch_size: int, max_length: int, pad_token_id: int, seed: int,
                 total_steps: int, start_step: int = 0):
        if len(dataset) == 0: raise ValueError('the pretraining dataset is empty')
        if not 0 <= start_step <= total_steps:
            raise ValueError(f'start_step {start_step} must be between 0 and total_steps {total_steps}')
        self.data = dataset.with_format('arrow')
        self.batch_size, self.max_length, self.pad_token_id = batch_size, max_length, pad_token_id
        self.seed, self.total_steps, self.start_step = seed, total_steps, start_step
        self._perms: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.total_steps - self.start_step

    def rows(self, step: int) -> np.ndarray:
        "The dataset rows of batch `step`."
        pos = np.arange(step * self.batch_size, (step + 1) * self.batch_size, dtype=np.int64)
        passes, offsets = np.divmod(pos, len(self.data))
        needed = np.unique(passes).tolist()
        # keep only the permutations of the passes this batch touches (usually one or two): each holds
        # one int32 per example
        self._perms = {k: p for k, p in self._perms.items() if k in needed}
        out = np.empty_like(pos)
        for k in needed:
            if k not in self._perms:
                g = torch.Generator().manual_seed(self.seed + k)
                self._perms[k] = torch.randperm(len(self.data), generator=g, dtype=torch.int32).numpy()
            out[passes == k] = self._perms[k][offsets[passes == k]]
        return out

    def _pad(self, column, value: int) -> torch.Tensor:
        lists = column.combine_chunks()
        lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
        if lengths.max() > self.max_length:
            raise ValueError(f'an example has {lengths.max()} tokens, more than max_length {self.max_length}: '
                             'the dataset was built for another max_length')
        out = np.full((len(lengths), self.max_length), value, dtype=np.int64)
        out[np.arange(self.max_length) < lengths[:, None]] = lists.flatten().to_numpy(zero_copy_only=False)
        return torch.from_numpy(out)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self): raise IndexError(i)
        table = self.data[self.rows(self.start_step + i)]
        return self._pad(table['input_ids'], self.pad_token_id), self._pad(table['token_type_ids'], 0)


def pretraining_dataloader(dataset: datasets.Dataset, batch_size: int, max_length: int, pad_token_id: int,
                           seed: int, total_steps: int, start_step: int = 0, num_workers: int = 0) -> DataLoader:
    "A DataLoader over `PretrainingBatches`: exactly `total_steps - start_step` full batches, in step order."
    batches = PretrainingBatches(dataset, batch_size, max_length, pad_token_id, seed, total_steps, start_step)
    # batch_size=None: each item already is a batch
    return DataLoader(batches, batch_size=None, shuffle=False, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available())
