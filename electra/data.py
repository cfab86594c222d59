"""Pretraining data: corpora -> ELECTRA examples (cached as memory-mapped Arrow) -> padded, resumable batches.

`ExampleBuilder` is a port of the official example builder (google-research/electra,
build_pretraining_dataset.py). `build_corpus` streams one corpus (text files or a table of documents, read by
`electra.corpus`) through it: the corpus is cut into shards at document boundaries (byte ranges of big files,
groups of small files, row ranges of tables), each shard is built by one of `num_proc` processes with its own
builder and RNG seeded by (seed, corpus, shard) and written to its own Arrow file. Shards depend on the corpus
and `BuildSettings`, never on `num_proc`, so the examples are the same whatever the parallelism; memory per
process is one batch of documents, whatever the corpus size. The result is cached under a fingerprint of
everything that shapes it and verified before reuse.

`held_out_split` sets aside a deterministic evaluation slice; `pretraining_dataloader` serves full
[batch_size, max_length] batches whose content depends only on (seed, step), concatenating corpora or mixing
them with weights, so a resumed run sees exactly the batches an uninterrupted one would have.
"""
from __future__ import annotations

import ctypes
import dataclasses
import gc
import hashlib
import json
import logging
import math
import multiprocessing
import os
import queue
import random
import shutil
import signal
import socket
import sys
import time
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader

from .checkpoint import process_alive
from .config import ConfigError
from .corpus import (BuildSettings, CorpusSource, documents, read_head, resolve_corpus, resolve_format, resolve_split,
                     sniff, split_sentences, splitter, table_lines, text_lines, PARAGRAPH_CHARS)

__all__ = ['BUILDER_VERSION', 'BuildSettings', 'corpus_files', 'ExampleBuilder', 'build_corpus',
           'build_pretraining_dataset', 'build_summary', 'format_summary', 'held_out_split', 'pad_examples',
           'PretrainingBatches', 'pretraining_dataloader']

log = logging.getLogger(__name__)

BUILDER_VERSION = 2  # bump when a change to this module or electra.corpus changes the examples it builds
_MARKER = 'electra_build.json'  # written last: a dataset directory without it is incomplete
_BATCH_CHARS = 1 << 20          # text per batched sentence-splitter / tokenizer call
_WRITE_ROWS = 10_000            # examples per Arrow record batch
_CHECK_BLOCKS, _CHECK_BLOCK, _CHECK_END = 16, 1 << 16, 1 << 20   # what of each shard file the checksum covers
FEATURES = datasets.Features({'input_ids': datasets.List(datasets.Value('int32')),
                              'token_type_ids': datasets.List(datasets.Value('int8')),
                              'document': datasets.Value('int64')})  # (shard << 32) + document number in the shard
COUNTERS = ['bytes', 'documents', 'sentences', 'tokens', 'examples', 'empty_documents', 'undecodable_lines',
            'long_lines', 'long_sentences', 'short_lines']

Example = tuple[list[int], list[int]]  # (input_ids, token_type_ids), unpadded


def corpus_files(paths: list[str], cache_dir: Path) -> list[Path]:
    """The text files named by `paths`: text files, directories (every regular file inside, recursively,
    sorted, hidden ones skipped; binary, empty and non-UTF-8 ones skipped) or 'demo' (the built-in corpus,
    written under `cache_dir/demo`). Raises `ConfigError` naming the offending path for anything missing,
    or for a file named explicitly that is empty, binary or not UTF-8."""
    sources = resolve_corpus([p for p in paths if not p.startswith('hub:')], cache_dir)
    return [f for s in sources if s.kind == 'files' for f in s.files]


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


# ---------------------------------------------------------------- shards

def shard_target_bytes(total: int) -> int:
    "About 64 shards per corpus, each 256 KiB to 64 MiB: enough to keep every process busy, few files."
    return min(64 << 20, max(256 << 10, total // 64))


def _next_boundary(f, pos: int, fmt: str, size: int) -> int:
    "The first document boundary (a line start; in `lines`, just after a blank line) at or after byte `pos`."
    f.seek(pos)
    line = f.readline(1 << 20)
    while line and not line.endswith(b'\n'): line = f.readline(1 << 20)  # the rest of the line `pos` falls in
    if fmt == 'paragraphs': return f.tell()
    while True:
        line = f.readline(1 << 20)
        if not line: return size
        if not line.strip(): return f.tell()
        while line and not line.endswith(b'\n'): line = f.readline(1 << 20)


def _plan_files(source: CorpusSource, settings: BuildSettings) -> list[list[tuple]]:
    """Shards of a text corpus: lists of pieces (path, start, end, format, language). Small files are grouped
    whole (format and language None: read off the file when it is built); a file bigger than a shard is cut at
    document boundaries into pieces of about a shard each (unless it is one document)."""
    target = settings.shard_bytes or shard_target_bytes(source.total_bytes())
    shards, group, group_bytes = [], [], 0
    for f in source.files:
        size = f.stat().st_size
        if size > target:
            head = sniff(*read_head(f))
            fmt = resolve_format(settings.corpus_format, head, source.in_directory)
            if fmt != 'documents':
                lang = resolve_split(settings.sentence_split, fmt, head.median_chars)
                if group: shards.append(group)
                group, group_bytes = [], 0
                cuts = [0]
                with open(f, 'rb') as fh:
                    while cuts[-1] + target < size:
                        cut = _next_boundary(fh, cuts[-1] + target, fmt, size)
                        if cut >= size: break
                        cuts.append(cut)
                shards += [[(str(f), a, b, fmt, lang)] for a, b in zip(cuts, cuts[1:] + [size])]
                continue
        group.append((str(f), 0, size, None, None))
        group_bytes += size
        if group_bytes >= target:
            shards.append(group)
            group, group_bytes = [], 0
    return shards + [group] if group else shards


def _plan_table(source: CorpusSource, settings: BuildSettings) -> list[list[tuple]]:
    "Shards of a table: row ranges (start, end, format, language) of about a shard's worth of text each."
    column = source.dataset.data.column(source.text_column)
    n = len(column)
    sample = [t or '' for t in column.slice(0, 1000).to_pylist()]
    lengths = sorted(len(t) for t in sample if t.strip()) or [0]
    median = lengths[len(lengths) // 2]
    fmt = settings.corpus_format
    if fmt == 'auto':  # rows that are single sentences (BookCorpus) are lines of one stream, not documents
        fmt = 'lines' if median <= PARAGRAPH_CHARS and not any('\n' in t.strip() for t in sample) else 'documents'
    lang = resolve_split(settings.sentence_split, fmt, median)
    total = max(1, source.total_bytes())
    rows = max(1, math.ceil(n * (settings.shard_bytes or shard_target_bytes(total)) / total))
    return [[(a, min(a + rows, n), fmt, lang)] for a in range(0, n, rows)]


def _languages(shards: list[list[tuple]], source: CorpusSource, settings: BuildSettings) -> set[str]:
    "The sentence-splitting languages a build will use, as far as the plan and the first whole file tell."
    langs = {piece[-1] for shard in shards for piece in shard if piece[-1]}
    whole = [piece for shard in shards for piece in shard if piece[-2] is None]
    if whole:
        head = sniff(*read_head(Path(whole[0][0])))
        fmt = resolve_format(settings.corpus_format, head, source.in_directory)
        langs.add(resolve_split(settings.sentence_split, fmt, head.median_chars))
    return langs - {None}


@dataclass
class _Job:
    "Everything a build process needs besides its shards."
    source: CorpusSource
    tokenizer: object          # a `tokenizers.Tokenizer` without truncation or padding
    settings: BuildSettings
    seed: int
    key: str                   # `CorpusSource.seed_key`: two corpora never share a shard seed
    cls_id: int
    sep_id: int


def _shard_streams(job: _Job, shard: list[tuple], stats: Counter) -> Iterator[tuple[str, Optional[str], Iterator]]:
    "(format, language, line stream) for each piece of a shard."
    s = job.settings
    if job.source.kind == 'table':
        (start, end, fmt, lang), = shard
        column = job.source.dataset.data.column(job.source.text_column).slice(start, end - start)

        def rows():
            for chunk in range(0, len(column), 1000):
                texts = column.slice(chunk, 1000).to_pylist()
                stats['bytes'] += sum(len(t) for t in texts if t)
                yield from texts
        yield fmt, lang, table_lines(rows(), fmt, stats)
        return
    for path, start, end, fmt, lang in shard:
        if fmt is None:  # a whole small file: its own head decides (see electra.corpus)
            head = sniff(*read_head(Path(path)))
            fmt = resolve_format(s.corpus_format, head, job.source.in_directory)
            lang = resolve_split(s.sentence_split, fmt, head.median_chars)
        yield fmt, lang, text_lines(path, start, end, stats)


def _doc_batches(docs: Iterator[tuple[list[str], bool]]) -> Iterator[list[tuple[list[str], bool]]]:
    "(document piece, ends) pairs in lists of about `_BATCH_CHARS` characters, for batched splitting and tokenizing."
    batch, chars = [], 0
    for doc in docs:
        batch.append(doc)
        chars += sum(map(len, doc[0]))
        if chars >= _BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch: yield batch


def _build_shard(index: int, shard: list[tuple], job: _Job, path: Path,
                 report: Callable[[int, int], None]) -> dict:
    """Build shard `index` into the Arrow file `path` (none when it gives no example); returns its counters.
    `report(bytes, examples)` is called after every batch, for the progress bar."""
    s, stats = job.settings, Counter()
    builder = ExampleBuilder(s.max_length, job.cls_id, job.sep_id, random.Random(f'{job.seed}:{job.key}:{index}'))
    columns, writer, n_doc = {name: [] for name in FEATURES}, None, 0
    reported = (0, 0)

    def flush():
        nonlocal writer
        if not columns['document']: return
        if writer is None: writer = pa.ipc.new_stream(str(path), FEATURES.arrow_schema)
        writer.write_table(pa.table({k: pa.array(v, type=FEATURES.arrow_schema.field(k).type)
                                     for k, v in columns.items()}, schema=FEATURES.arrow_schema))
        for v in columns.values(): v.clear()

    def emit(example):
        if example is None: return
        columns['input_ids'].append(example[0])
        columns['token_type_ids'].append(example[1])
        columns['document'].append((index << 32) + n_doc)
        stats['examples'] += 1
        if len(columns['document']) >= _WRITE_ROWS: flush()

    try:
        for fmt, lang, lines in _shard_streams(job, shard, stats):
            for batch in _doc_batches(documents(lines, fmt, s, stats, _BATCH_CHARS)):
                split = split_sentences([line for doc, _ in batch for line in doc], lang)
                doc_sentences, i = [], 0
                for doc, _ in batch:
                    sentences = [x for line in split[i:i + len(doc)] for x in line]
                    i += len(doc)
                    kept = [x for x in sentences if len(x) <= s.max_sentence_chars]
                    stats['long_sentences'] += len(sentences) - len(kept)
                    doc_sentences.append(kept)
                flat = [x for doc in doc_sentences for x in doc]
                ids = iter([e.ids for e in job.tokenizer.encode_batch_fast(flat, add_special_tokens=False)])
                stats['sentences'] += len(flat)
                for sentences, (_, ends) in zip(doc_sentences, batch):
                    for _ in sentences:
                        sentence = next(ids)
                        stats['tokens'] += len(sentence)
                        emit(builder.add_sentence(sentence))
                    if ends:
                        emit(builder.end_document())  # examples never span documents
                        n_doc += 1
                report(stats['bytes'] - reported[0], stats['examples'] - reported[1])
                reported = (stats['bytes'], stats['examples'])
        flush()
    finally:
        if writer is not None: writer.close()
    return dict(stats)


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this build process when `parent` dies, even by `kill -9` (Linux's PR_SET_PDEATHSIG):
    otherwise it would build its shards on into a directory nobody will read."""
    if sys.platform.startswith('linux'):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent: os._exit(1)  # the parent died before the request took effect


def _worker(job: _Job, out_dir: str, tasks, results, parent: int) -> None:
    "A build process: builds the shards it takes from `tasks`; reports progress, counters or an error."
    os.environ['TOKENIZERS_PARALLELISM'] = 'false'  # one Rust thread per process: the processes are the parallelism
    _die_with_parent(parent)
    while (task := tasks.get()) is not None:
        index, shard = task
        try:
            stats = _build_shard(index, shard, job, Path(out_dir) / f'shard-{index:05d}.arrow',
                                 lambda b, e: results.put(('progress', index, (b, e))))
            results.put(('done', index, stats))
        except ConfigError as e:
            results.put(('error', index, e))
        except BaseException:
            results.put(('error', index, RuntimeError(f'building shard {index} ({shard[0][:3]}) failed:\n'
                                                      f'{traceback.format_exc()}')))
            return


class _Progress:
    "A progress bar over the corpus bytes, with examples and examples/s."

    def __init__(self, total: int, desc: str, enabled: bool):
        from tqdm.auto import tqdm
        self.bar = tqdm(total=total, desc=desc, unit='B', unit_scale=True, unit_divisor=1024, disable=not enabled,
                        mininterval=0.5, dynamic_ncols=True)
        self.examples, self.t0 = 0, time.perf_counter()

    def __call__(self, n_bytes: int, n_examples: int):
        self.examples += n_examples
        rate = self.examples / max(time.perf_counter() - self.t0, 1e-9)
        self.bar.set_postfix_str(f'{self.examples:,} examples, {rate:,.0f} examples/s', refresh=False)
        self.bar.update(n_bytes)

    def close(self): self.bar.close()


def _run_shards(shards: list[list[tuple]], job: _Job, out_dir: Path, num_proc: int, progress: _Progress) -> list[dict]:
    "Build every shard, in this process or in `num_proc` worker processes; counters in shard order."
    if num_proc <= 1 or len(shards) <= 1:
        return [_build_shard(i, shard, job, out_dir / f'shard-{i:05d}.arrow', progress) for i, shard in enumerate(shards)]
    # fork shares the tokenizer and a memory-mapped table without pickling; elsewhere fork is unsafe
    ctx = multiprocessing.get_context('fork' if sys.platform.startswith('linux') else 'spawn')
    tasks, results = ctx.Queue(), ctx.Queue()
    for task in enumerate(shards): tasks.put(task)
    procs = min(num_proc, len(shards))
    for _ in range(procs): tasks.put(None)
    # with the variable set, `tokenizers` does not warn that it was forked after using its thread pool
    saved = os.environ.get('TOKENIZERS_PARALLELISM')
    os.environ['TOKENIZERS_PARALLELISM'] = 'false'
    workers = [ctx.Process(target=_worker, args=(job, str(out_dir), tasks, results, os.getpid()),
                           daemon=True) for _ in range(procs)]
    gc.freeze()  # the garbage collector of a forked child would touch (and so copy) every page of this process's heap
    try:
        for w in workers: w.start()
    finally:
        gc.unfreeze()
        if saved is None: os.environ.pop('TOKENIZERS_PARALLELISM')
        else: os.environ['TOKENIZERS_PARALLELISM'] = saved
    done: dict[int, dict] = {}
    try:
        while len(done) < len(shards):
            try: kind, index, payload = results.get(timeout=1.0)
            except queue.Empty:
                dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f'a build process died (exit code {dead[0]}), perhaps out of memory: '
                                       'lower num_proc') from None
                continue
            if kind == 'progress': progress(*payload)
            elif kind == 'done': done[index] = payload
            else: raise payload
    finally:
        for w in workers:
            if w.is_alive(): w.terminate()
            w.join()
    return [done[i] for i in range(len(shards))]


# ---------------------------------------------------------------- the cached dataset

def _tokenizer_hash(tokenizer) -> str:
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    for key in ('truncation', 'padding'): spec.pop(key, None)  # call-time settings, not part of the vocabulary
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _fingerprint(source: CorpusSource, tokenizer_hash: str, settings: BuildSettings, seed: int) -> str:
    key = {'version': BUILDER_VERSION, 'source': source.content_hash(), 'tokenizer': tokenizer_hash,
           'settings': dataclasses.asdict(settings), 'seed': seed}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def _checksum(path: Path) -> int:
    "CRC32 of a shard file's first and last MiB and 16 blocks spread between (the whole of a file up to 3 MiB)."
    size = path.stat().st_size
    crc = 0
    with open(path, 'rb') as f:
        if size <= 2 * _CHECK_END + _CHECK_BLOCKS * _CHECK_BLOCK:
            return zlib.crc32(f.read())
        spans = [(0, _CHECK_END), (size - _CHECK_END, _CHECK_END)]
        step = (size - 2 * _CHECK_END) // _CHECK_BLOCKS
        spans += [(_CHECK_END + i * step, _CHECK_BLOCK) for i in range(_CHECK_BLOCKS)]
        for start, n in spans:
            f.seek(start)
            crc = zlib.crc32(f.read(n), crc)
    return crc


def _load_verified(directory: Path, fingerprint: str) -> tuple[Optional[datasets.Dataset], Optional[dict], str]:
    """The dataset in `directory` and its build record when complete and intact for `fingerprint`; else
    (None, None, why not)."""
    try: info = json.loads((directory / _MARKER).read_text())
    except FileNotFoundError: return None, None, 'no build marker (an interrupted build)'
    except (OSError, ValueError) as e: return None, None, f'unreadable build marker ({e})'
    if info.get('fingerprint') != fingerprint: return None, None, 'build marker of another build'
    parts = []
    for name, rows, size, crc in info['shards']:
        path = directory / name
        if not path.is_file(): return None, None, f'{name} is missing'
        if path.stat().st_size != size: return None, None, f'{name} has {path.stat().st_size} bytes, not {size}'
        if _checksum(path) != crc: return None, None, f'{name} is corrupted (checksum mismatch)'
        try: part = datasets.Dataset.from_file(str(path))
        except Exception as e: return None, None, f'{name} is unreadable ({type(e).__name__}: {e})'  # pyarrow: many kinds
        if len(part) != rows: return None, None, f'{name} has {len(part)} rows, not {rows}'
        parts.append(part)
    if not parts: return None, None, 'no shard files'
    return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0], info, ''


def _remove_dead_builds(root: Path) -> None:
    """Remove the temporary directories (`.<fingerprint>.<pid>.<host>.tmp`) of builds whose process died on this
    host (killed, out of memory): they would otherwise stay in the cache for good. Live builds are left alone."""
    host = socket.gethostname()
    for tmp in root.glob('.*.tmp'):
        parts = tmp.name[1:-len('.tmp')].split('.', 2)  # a host name may hold dots; a fingerprint, a PID do not
        if len(parts) == 3 and parts[2] == host and parts[1].isdigit() and not process_alive(int(parts[1])):
            log.info(f'pretraining data: removing {tmp}, left by a build that was stopped')
            shutil.rmtree(tmp, ignore_errors=True)


def build_corpus(source: CorpusSource, tokenizer, settings: BuildSettings, cache_dir: Path, seed: int,
                 num_proc: int = 1, progress: bool = True) -> datasets.Dataset:
    """The pretraining examples of one corpus as an Arrow dataset (columns `input_ids`, `token_type_ids`:
    unpadded, [CLS] ... [SEP] included; `document`: which document of the corpus it came from), memory-mapped
    from `cache_dir/pretrain_data/<fingerprint>/shard-*.arrow`.

    Built once per fingerprint (the source's files with sizes and mtimes or the table's data files, the
    tokenizer, `settings`, seed and BUILDER_VERSION) and reused after, once its files check out against the
    build record (sizes, checksums, row counts); a partial or corrupted build is rebuilt. `num_proc` (0: one
    per CPU core) processes share the shards; the result does not depend on it. A build becomes visible
    atomically: it is written to a temporary directory, completed by the `electra_build.json` record, then
    renamed into place. Skipped input is counted in that record (see `build_summary`).
    """
    tokenizer_hash = _tokenizer_hash(tokenizer)
    fp = _fingerprint(source, tokenizer_hash, settings, seed)
    root = Path(cache_dir) / 'pretrain_data'
    final = root / fp
    if final.exists():
        ds, info, why = _load_verified(final, fp)
        if ds is not None:
            log.info(f"pretraining data: reusing {info['n_examples']:,} examples of {source.entry} from {final}")
            return ds
        log.warning(f"pretraining data: the cache {final} is not usable ({why}); rebuilding it")
    num_proc = num_proc or os.cpu_count() or 1
    start = time.time()
    shards = _plan_files(source, settings) if source.kind == 'files' else _plan_table(source, settings)
    for lang in _languages(shards, source, settings): splitter(lang)  # fails early on a bad language; forks inherit it
    backend = type(tokenizer.backend_tokenizer).from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()  # a transformers call with truncation=True leaves it switched on in the backend
    backend.no_padding()
    job = _Job(source, backend, settings, seed, source.seed_key(), tokenizer.cls_token_id,
               tokenizer.sep_token_id)
    _remove_dead_builds(root)
    tmp = root / f'.{fp}.{os.getpid()}.{socket.gethostname()}.tmp'
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    bar = _Progress(source.total_bytes(), f'examples of {Path(source.entry).name[:40] or source.entry}', progress)
    try:
        stats = _run_shards(shards, job, tmp, num_proc, bar)
        totals = Counter()
        for s in stats: totals.update(s)
        files = [(f'shard-{i:05d}.arrow', s['examples']) for i, s in enumerate(stats) if s.get('examples')]
        if not files:
            raise ConfigError(f"corpus {source.entry} gave no pretraining examples "
                              f"({format_counts(totals, source.skipped)}). Give text with words in it; see "
                              "`corpus_format` and `sentence_split` for how it is read.")
        seconds = time.time() - start
        info = {'fingerprint': fp, 'builder_version': BUILDER_VERSION, 'corpus': source.entry, 'kind': source.kind,
                'n_files': len(source.files), 'settings': dataclasses.asdict(settings), 'max_length': settings.max_length,
                'seed': seed, 'tokenizer_sha256': tokenizer_hash, 'n_examples': totals['examples'],
                'n_documents': totals['documents'], 'counts': {k: totals[k] for k in COUNTERS},
                'skipped_files': source.skipped, 'n_shards': len(shards), 'num_proc': min(num_proc, len(shards)),
                'seconds': round(seconds, 2), 'examples_per_s': round(totals['examples'] / max(seconds, 1e-9), 1),
                'mb_per_s': round(totals['bytes'] / 1e6 / max(seconds, 1e-9), 3),
                'shards': [(name, rows, (tmp / name).stat().st_size, _checksum(tmp / name)) for name, rows in files]}
        (tmp / _MARKER).write_text(json.dumps(info, indent=1))
        # another process may have finished the same build meanwhile: keep theirs; else replace what was there
        # (an interrupted or damaged build, checked above)
        if not final.exists() or _load_verified(final, fp)[0] is None:
            shutil.rmtree(final, ignore_errors=True)
            try: os.replace(tmp, final)
            except OSError:  # ... or finished it just now
                if _load_verified(final, fp)[0] is None: raise
    finally:
        bar.close()
        shutil.rmtree(tmp, ignore_errors=True)
    log.info(f"pretraining data: {format_summary(info)} -> {final}")
    return _load_verified(final, fp)[0]


def build_pretraining_dataset(files: list[Path], tokenizer, max_length: int, cache_dir: Path, seed: int,
                              num_proc: int = 1, settings: Optional[BuildSettings] = None,
                              progress: bool = False) -> datasets.Dataset:
    """`build_corpus` for a list of text files read as one corpus, with `settings` (default: `corpus_format`
    and `sentence_split` 'auto', so files in the official layout read as before)."""
    files = [Path(f) for f in files]
    source = CorpusSource(', '.join(map(str, files)), 'files', files)
    settings = dataclasses.replace(settings or BuildSettings(), max_length=max_length)
    return build_corpus(source, tokenizer, settings, cache_dir, seed, num_proc, progress)


def build_summary(dataset: datasets.Dataset) -> dict:
    "The build record (`electra_build.json`) of a dataset built by `build_corpus`: settings, counts, timing."
    directory = Path(dataset.cache_files[0]['filename']).parent
    return json.loads((directory / _MARKER).read_text())


def format_counts(counts: dict, skipped_files: dict) -> str:
    "What was read and what was skipped, in words."
    c = Counter(counts)
    said = [f"{c['documents']:,} documents", f"{c['sentences']:,} sentences", f"{c['tokens']:,} tokens"]
    skipped = [f'{n:,} {reason} file(s)' for reason, n in skipped_files.items() if n]
    skipped += [f'{c[k]:,} {label}' for k, label in [
        ('empty_documents', 'empty documents'), ('undecodable_lines', 'lines not UTF-8'),
        ('long_lines', 'lines over 1 MiB'), ('long_sentences', 'sentences over max_sentence_chars'),
        ('short_lines', 'lines under min_line_chars')] if c[k]]
    return ', '.join(said) + '; skipped: ' + (', '.join(skipped) or 'nothing')


def format_summary(info: dict) -> str:
    "One line about a build: what it made, from what, how fast, and what it skipped."
    return (f"{info['n_examples']:,} examples of {info['corpus']} ({format_counts(info['counts'], info['skipped_files'])}) "
            f"in {info['seconds']:.1f}s, {info['examples_per_s']:,.0f} examples/s, {info['mb_per_s']:.2f} MB/s "
            f"with {info['num_proc']} process(es)")


# ---------------------------------------------------------------- held-out examples

def _largest_remainder(total: int, weights: list[float]) -> list[int]:
    "`total` split in proportion to `weights` (integers summing to `total`)."
    exact = [total * w / sum(weights) for w in weights]
    out = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: out[i] - exact[i])[:total - sum(out)]: out[i] += 1
    return out


def held_out_split(parts: list[datasets.Dataset], n: int, seed: int, weights: Optional[list[float]] = None
                   ) -> tuple[list[datasets.Dataset], Optional[datasets.Dataset]]:
    """Set aside about `n` examples for evaluation: (the training part of each of `parts`, the held-out examples).

    Each part gives its share of `n` (in proportion to `weights`, else to its size; at most a tenth of it),
    as 16 contiguous blocks (or fewer), one at a seeded place in each sixteenth of the part, so the slice
    spans the whole corpus and only the documents at block edges are shared with training. The same
    (parts, n, seed) always give the same split; the training parts never contain a held-out example.
    """
    if n <= 0: return list(parts), None
    shares = _largest_remainder(n, weights or [len(p) for p in parts])
    train, held = [], []
    for k, (part, want) in enumerate(zip(parts, shares)):
        want = min(want, len(part) // 10)
        if want == 0:
            train.append(part)
            continue
        blocks = min(16, want)
        sizes = _largest_remainder(want, [1] * blocks)
        rng = np.random.default_rng([seed, k])
        bounds = np.linspace(0, len(part), blocks + 1).astype(int)
        spans = [(lo + int(rng.integers(0, hi - lo - size + 1)), size) for lo, hi, size in zip(bounds, bounds[1:], sizes)]
        pieces, at = [], 0
        for start, size in spans:
            if start > at: pieces.append(part.select(range(at, start)))  # contiguous: a slice, no index file
            held.append(part.select(range(start, start + size)))
            at = start + size
        if at < len(part): pieces.append(part.select(range(at, len(part))))
        train.append(datasets.concatenate_datasets(pieces))
    return train, datasets.concatenate_datasets(held) if held else None


# ---------------------------------------------------------------- batches

def pad_examples(table: pa.Table, max_length: int, pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    "Rows of an Arrow table of examples as int64 tensors [n, max_length]: input ids padded with `pad_token_id`, types with 0."
    return _pad(table['input_ids'], max_length, pad_token_id), _pad(table['token_type_ids'], max_length, 0)


def _pad(column, max_length: int, value: int) -> torch.Tensor:
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    if len(lengths) and lengths.max() > max_length:
        raise ValueError(f'an example has {lengths.max()} tokens, more than max_length {max_length}: '
                         'the dataset was built for another max_length')
    out = np.full((len(lengths), max_length), value, dtype=np.int64)
    out[np.arange(max_length) < lengths[:, None]] = lists.flatten().to_numpy(zero_copy_only=False)
    return torch.from_numpy(out)


class PretrainingBatches(torch.utils.data.Dataset):
    """Batches `start_step`, ..., `total_steps - 1` of an endless, seeded stream of examples; item i is batch
    `start_step + i` as `(input_ids, token_type_ids)`, int64 tensors of shape [batch_size, max_length] padded
    with `pad_token_id` and 0.

    The stream is pass 0, pass 1, ... over the dataset, pass k in the order of a permutation seeded by
    `seed + k`, cut into consecutive batches. A batch is therefore a pure function of (seed, step): starting
    at `start_step` gives exactly the batches an uninterrupted run sees from that step on, and a dataset
    smaller than one batch still fills full batches.

    With `weights`, the dataset is the concatenation of corpora of sizes `parts` mixed in proportion to the
    weights: a pass still has len(dataset) slots, corpus c getting round(w_c * len(dataset)) of them (its
    quota); slot j of corpus c in pass k takes example k * quota + j of that corpus's own stream, which is
    pass after pass over the corpus, each pass a permutation seeded by (seed, c, corpus pass). So a corpus
    weighted above its size is repeated, one below it is sampled without repetition, and a batch is still
    a pure function of (seed, step).
    """

    def __init__(self, dataset: datasets.Dataset, batch_size: int, max_length: int, pad_token_id: int, seed: int,
                 total_steps: int, start_step: int = 0, parts: Optional[list[int]] = None,
                 weights: Optional[list[float]] = None):
        if len(dataset) == 0: raise ValueError('the pretraining dataset is empty')
        if not 0 <= start_step <= total_steps:
            raise ValueError(f'start_step {start_step} must be between 0 and total_steps {total_steps}')
        self.data = dataset.with_format('arrow')
        self.batch_size, self.max_length, self.pad_token_id = batch_size, max_length, pad_token_id
        self.seed, self.total_steps, self.start_step = seed, total_steps, start_step
        self._perms: dict = {}
        self.weights = weights
        if weights is not None:
            parts = list(parts or [len(dataset)])
            if len(parts) != len(weights) or sum(parts) != len(dataset) or min(parts) <= 0 or min(weights) <= 0:
                raise ValueError(f'parts {parts} must be positive sizes adding up to the dataset ({len(dataset)}), '
                                 f'one per weight, and weights {weights} must be positive')
            self.parts = np.array(parts, dtype=np.int64)
            self.starts = np.concatenate([[0], np.cumsum(self.parts)[:-1]])
            self.quotas = np.maximum(1, np.array(_largest_remainder(len(dataset), weights), dtype=np.int64))
            self.slot_starts = np.concatenate([[0], np.cumsum(self.quotas)[:-1]])
            self.slots = int(self.quotas.sum())

    def __len__(self) -> int:
        return self.total_steps - self.start_step

    def _perm(self, key: tuple, n: int, seed) -> np.ndarray:
        if key not in self._perms:
            g = torch.Generator().manual_seed(seed)
            self._perms[key] = torch.randperm(n, generator=g, dtype=torch.int32).numpy()
        return self._perms[key]

    def rows(self, step: int) -> np.ndarray:
        "The dataset rows of batch `step`."
        pos = np.arange(step * self.batch_size, (step + 1) * self.batch_size, dtype=np.int64)
        n = len(self.data) if self.weights is None else self.slots
        passes, offsets = np.divmod(pos, n)
        needed = {('pass', k) for k in np.unique(passes).tolist()}
        out = np.empty_like(pos)
        for _, k in needed:
            out[passes == k] = self._perm(('pass', k), n, self.seed + k)[offsets[passes == k]]
        if self.weights is not None:  # `out` holds slots: map each to its corpus's own stream
            slots = out
            corpus = np.searchsorted(self.slot_starts, slots, side='right') - 1
            q = passes * self.quotas[corpus] + slots - self.slot_starts[corpus]   # position in that corpus's stream
            cpass, r = np.divmod(q, self.parts[corpus])
            out = np.empty_like(pos)
            for c, p in sorted(set(zip(corpus.tolist(), cpass.tolist()))):
                at = (corpus == c) & (cpass == p)
                seed = int(np.random.SeedSequence([self.seed, c, p]).generate_state(1)[0])
                out[at] = self.starts[c] + self._perm(('corpus', c, p), int(self.parts[c]), seed)[r[at]]
                needed.add(('corpus', c, p))
        # keep only the permutations this batch touches (usually one or two per stream): each holds one int32
        # per example
        self._perms = {k: v for k, v in self._perms.items() if k in needed}
        return out

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self): raise IndexError(i)
        return pad_examples(self.data[self.rows(self.start_step + i)], self.max_length, self.pad_token_id)


def pretraining_dataloader(dataset: datasets.Dataset, batch_size: int, max_length: int, pad_token_id: int,
                           seed: int, total_steps: int, start_step: int = 0, num_workers: int = 0,
                           parts: Optional[list[int]] = None, weights: Optional[list[float]] = None) -> DataLoader:
    """A DataLoader over `PretrainingBatches`: exactly `total_steps - start_step` full batches, in step order
    (corpora of sizes `parts` mixed by `weights` when given)."""
    batches = PretrainingBatches(dataset, batch_size, max_length, pad_token_id, seed, total_steps, start_step,
                                 parts, weights)
    # batch_size=None: each item already is a batch
    return DataLoader(batches, batch_size=None, shuffle=False, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available())
