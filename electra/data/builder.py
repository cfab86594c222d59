"""The sharded, parallel build of one corpus into Arrow files of examples (`electra.data.examples.ExampleBuilder`).

A corpus is cut into shards at document boundaries (byte ranges of big files, groups of small files, row ranges of
tables); each shard is built by one of `num_proc` processes with its own builder and RNG seeded by (seed, corpus,
shard) and written to its own Arrow file. Shards depend on the corpus and `BuildSettings`, never on `num_proc`, so
the examples are the same whatever the parallelism; memory per process is one batch of documents.
"""
from __future__ import annotations

import gc
import hashlib
import math
import multiprocessing
import os
import queue
import random
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from electra.config.errors import ConfigError
from electra.data.corpus import (
    PARAGRAPH_CHARS,
    BuildSettings,
    CorpusSource,
    documents,
    read_head,
    readline,
    resolve_format,
    resolve_split,
    sniff,
    table_lines,
    text_lines,
)
from electra.data.examples import ExampleBuilder
from electra.data.sentences import split_sentences, splitter
from electra.runtime.processes import die_with_parent

__all__ = ['BUILDER_VERSION', 'COUNTERS', 'DOCUMENTS', 'FEATURES', 'HASH', 'build_shards', 'encoding_backend',
           'read_batches']



BUILDER_VERSION = 5  # bump when a change to this module, corpus, sentences or examples changes the examples built
# (4: `sentence_split: auto` splits lines written without spaces by rule; the tokens cut off are counted)
_BATCH_CHARS = 1 << 20          # text per batched sentence-splitter / tokenizer call
_WRITE_ROWS = 10_000            # examples per Arrow record batch
FEATURES = datasets.Features({'input_ids': datasets.List(datasets.Value('int32')),
                              'token_type_ids': datasets.List(datasets.Value('int8')),
                              'document': datasets.Value('int64')})  # (shard << 32) + document number in the shard
# the counters a document has of its own: a repeated document's are taken off when it is dropped (`_drop_repeated`)
PER_DOCUMENT = ('sentences', 'tokens', 'cut_tokens', 'overlong_tokens', 'long_sentences', 'chars',
                'long_sentence_chars')
COUNTERS = ['bytes', 'documents', 'sentences', 'tokens', 'examples', 'empty_documents', 'undecodable_lines',
            'long_lines', 'long_sentences', 'short_lines', 'repeated_documents', 'cut_tokens',
            'overlong_tokens', 'chars', 'long_sentence_chars']
_DIGEST = 16                    # bytes of a document's hash: two documents of 10**9 taken as one with chance ~1e-21
HASH = np.dtype([('hi', '<u8'), ('lo', '<u8')])   # a document's hash, as numpy sorts and compares it
DOCUMENTS = 'documents.npy'     # beside the shards: each kept document's id (`document` column) and hash

# ---------------------------------------------------------------- shards

def shard_target_bytes(total: int) -> int:
    "About 64 shards per corpus, each 256 KiB to 64 MiB: enough to keep every process busy, few files."
    return min(64 << 20, max(256 << 10, total // 64))


def _next_boundary(f, pos: int, fmt: str, size: int, eol: bytes) -> int:
    """The first document boundary (a line start; in `lines`, just after a blank line) at or after byte `pos`, in a
    file whose lines end in `eol`."""
    f.seek(pos)
    line = readline(f, 1 << 20, eol)
    while line and not line.endswith(eol): line = readline(f, 1 << 20, eol)  # the rest of the line `pos` falls in
    if fmt == 'paragraphs': return f.tell()
    while True:
        line = readline(f, 1 << 20, eol)
        if not line: return size
        if not line.strip(): return f.tell()
        while line and not line.endswith(eol): line = readline(f, 1 << 20, eol)


def _plan_files(source: CorpusSource, settings: BuildSettings) -> list[list[tuple]]:
    """Shards of a text corpus: lists of pieces (path, start, end, line end, format, language; the last two where a
    table's pieces have them, `_languages`). Small files are grouped whole (line end, format and language None: read
    off the file when it is built); a file bigger than a shard is cut at
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
                        cut = _next_boundary(fh, cuts[-1] + target, fmt, size, head.eol)
                        if cut >= size: break
                        cuts.append(cut)
                shards += [[(str(f), a, b, head.eol, fmt, lang)] for a, b in zip(cuts, cuts[1:] + [size])]
                continue
        group.append((str(f), 0, size, None, None, None))
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


def _plan(source: CorpusSource, settings: BuildSettings) -> list[list[tuple]]:
    "The shards of `source`, a text corpus or a table."
    return _plan_files(source, settings) if source.kind == 'files' else _plan_table(source, settings)


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


def _shard_streams(source: CorpusSource, settings: BuildSettings, shard: list[tuple],
                  stats: Counter) -> Iterator[tuple[str, Optional[str], Iterator]]:
    "(format, language, line stream) for each piece of a shard."
    if source.kind == 'table':
        (start, end, fmt, lang), = shard
        column = source.dataset.data.column(source.text_column).slice(start, end - start)

        def rows():
            for chunk in range(0, len(column), 1000):
                texts = column.slice(chunk, 1000).to_pylist()
                stats['bytes'] += sum(len(t) for t in texts if t)
                yield from texts
        yield fmt, lang, table_lines(rows(), fmt, stats)
        return
    for path, start, end, eol, fmt, lang in shard:
        if fmt is None:  # a whole small file: its own head decides (see electra.data.corpus), its line ends too
            head = sniff(*read_head(Path(path)))
            eol, fmt = head.eol, resolve_format(settings.corpus_format, head, source.in_directory)
            lang = resolve_split(settings.sentence_split, fmt, head.median_chars)
        yield fmt, lang, text_lines(path, start, end, stats, eol)


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


def _shard_batches(source: CorpusSource, settings: BuildSettings, shard: list[tuple],
                   stats: Counter) -> Iterator[tuple[Optional[str], list[tuple[list[str], bool]]]]:
    "(sentence-splitting language, batch of (document piece, ends)) of a shard, in order: what a build splits."
    for fmt, lang, lines in _shard_streams(source, settings, shard, stats):
        for batch in _doc_batches(documents(lines, fmt, settings, stats, _BATCH_CHARS)): yield lang, batch


def read_batches(source: CorpusSource,
                 settings: BuildSettings) -> Iterator[tuple[Optional[str], list[tuple[list[str], bool]]]]:
    """Every shard's batches of document pieces with their sentence-splitting language, in build order: the build's
    reading alone (benchmarks/data_bench.py times its parts with it)."""
    for shard in _plan(source, settings): yield from _shard_batches(source, settings, shard, Counter())


def _split_batch(batch: list[tuple[list[str], bool]], lang: Optional[str],
                 settings: BuildSettings) -> list[tuple[list[str], Counter]]:
    """The sentences of each document piece of `batch`, and its counts of characters: of every sentence (`chars`), and
    of those over `max_sentence_chars`, skipped (`long_sentences` of them, `long_sentence_chars`)."""
    split = split_sentences([line for doc, _ in batch for line in doc], lang)
    doc_sentences, i = [], 0
    for doc, _ in batch:
        sentences = [x for line in split[i:i + len(doc)] for x in line]
        i += len(doc)
        kept = [x for x in sentences if len(x) <= settings.max_sentence_chars]
        long = [len(x) for x in sentences if len(x) > settings.max_sentence_chars]
        doc_sentences.append((kept, Counter(chars=sum(map(len, sentences)), long_sentences=len(long),
                                            long_sentence_chars=sum(long))))
    return doc_sentences


def _build_shard(index: int, shard: list[tuple], job: _Job, path: Path,
                 report: Callable[[int, int], None]) -> tuple[dict, bytes, np.ndarray]:
    """Build shard `index` into the Arrow file `path` (none when it gives no example); returns its counters, the
    hash of each of its documents' token ids (of its cleaned lines where it has none), `_DIGEST` bytes each, in
    document order, and each
    document's own counts of `PER_DOCUMENT` [documents, len(PER_DOCUMENT)] (a repeated one's are taken off when it is
    dropped: `_drop_repeated`). `report(bytes, examples)` is called after every batch, for the progress bar."""
    s, stats, hashes, per_doc = job.settings, Counter(), [], []
    builder = ExampleBuilder(s.max_length, job.cls_id, job.sep_id, random.Random(f'{job.seed}:{job.key}:{index}'))
    columns, writer, n_doc = {name: [] for name in FEATURES}, None, 0
    # a document is the text the model reads: its token ids (case folded by an uncased tokenizer, ...), in order
    digest, text = hashlib.blake2b(digest_size=_DIGEST), hashlib.blake2b(digest_size=_DIGEST)
    doc, reported = Counter(), (0, 0)  # the counts of the document being built (it may come in pieces)

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

    def add_piece(sentences, skipped, ids, ends):
        nonlocal n_doc, digest, text, doc
        cut = builder.cut_tokens, builder.overlong_tokens
        doc.update(skipped, sentences=len(sentences))
        for _ in sentences:
            sentence = next(ids)
            doc['tokens'] += len(sentence)
            digest.update(np.asarray(sentence, np.int32).tobytes())
            emit(builder.add_sentence(sentence))
        if ends: emit(builder.end_document())  # examples never span documents
        doc.update(cut_tokens=builder.cut_tokens - cut[0], overlong_tokens=builder.overlong_tokens - cut[1])
        if not ends: return
        n_doc += 1
        hashes.append((digest if doc['tokens'] else text).digest())  # one of no tokens gives no example: by its text
        per_doc.append([doc[k] for k in PER_DOCUMENT])
        stats.update(doc)
        digest, text, doc = hashlib.blake2b(digest_size=_DIGEST), hashlib.blake2b(digest_size=_DIGEST), Counter()

    try:
        for lang, batch in _shard_batches(job.source, s, shard, stats):
            doc_sentences = _split_batch(batch, lang, s)
            flat = [x for kept, _ in doc_sentences for x in kept]
            ids = iter([e.ids for e in job.tokenizer.encode_batch_fast(flat, add_special_tokens=False)])
            for (sentences, skipped), (lines, ends) in zip(doc_sentences, batch):
                text.update('\n'.join(lines).encode() + b'\n')  # a long document comes in pieces
                add_piece(sentences, skipped, ids, ends)
            report(stats['bytes'] - reported[0], stats['examples'] - reported[1])
            reported = (stats['bytes'], stats['examples'])
        flush()
    finally:
        if writer is not None: writer.close()
    stats.update(doc)  # (a last piece without its document's end: none in a shard of whole documents)
    return dict(stats), b''.join(hashes), np.array(per_doc, dtype=np.int64).reshape(-1, len(PER_DOCUMENT))


def _drop_documents(path: Path, documents: np.ndarray) -> int:
    "Write shard file `path` again without the examples of `documents` (ids of its `document` column); rows left."
    with pa.ipc.open_stream(str(path)) as reader: table = reader.read_all()
    table = table.filter(pc.invert(pc.is_in(table['document'], pa.array(documents, pa.int64()))))
    path.unlink()
    if table.num_rows:
        with pa.ipc.new_stream(str(path), FEATURES.arrow_schema) as writer: writer.write_table(table)
    return table.num_rows


def _drop_repeated(built: list[tuple[dict, bytes, np.ndarray]], out_dir: Path, drop: bool) -> list[dict]:
    """Each shard's counters; with `drop`, once the examples of every document whose text repeats an earlier one's (in
    shard order, so the first is kept wherever it lies: in the same shard or another) are dropped from the shard
    files and counted as its 'repeated_documents', their own counts (`PER_DOCUMENT`) taken off the shard's. Examples
    are built before, so the kept ones are those of a build without de-duplication. The kept documents' ids and
    hashes are saved as `DOCUMENTS`, for `drop_repeated_across`."""
    hashes = np.frombuffer(b''.join(h for _, h, _ in built), dtype=HASH)
    ids = np.concatenate([(i << 32) + np.arange(len(h) // _DIGEST, dtype=np.int64) for i, (_, h, _) in enumerate(built)])
    repeated = np.zeros(len(hashes), bool)
    if drop:
        repeated[:] = True
        repeated[np.unique(hashes, return_index=True)[1]] = False  # the index of each text's first occurrence
    out, start = [], 0
    for index, (stats, h, per_doc) in enumerate(built):
        docs = np.flatnonzero(repeated[start:start + len(h) // _DIGEST])
        start += len(h) // _DIGEST
        dropped = dict(zip(PER_DOCUMENT, per_doc[docs].sum(axis=0).tolist()))
        stats = {**stats, **{k: stats.get(k, 0) - n for k, n in dropped.items()}, 'repeated_documents': len(docs),
                 'documents': stats.get('documents', 0) - len(docs)}
        if len(docs) and stats.get('examples'):
            stats['examples'] = _drop_documents(out_dir / f'shard-{index:05d}.arrow', (index << 32) + docs)
        out.append(stats)
    table = np.empty((~repeated).sum(), dtype=[('document', '<i8'), ('hi', '<u8'), ('lo', '<u8')])
    table['document'], table['hi'], table['lo'] = ids[~repeated], hashes['hi'][~repeated], hashes['lo'][~repeated]
    np.save(out_dir / DOCUMENTS, table)
    return out


def _worker(job: _Job, out_dir: str, tasks, results, parent: int) -> None:
    "A build process: builds the shards it takes from `tasks`; reports progress, counters or an error."
    os.environ['TOKENIZERS_PARALLELISM'] = 'false'  # one Rust thread per process: the processes are the parallelism
    die_with_parent(parent)  # a build nobody waits for any more would go on into a directory nobody reads
    while (task := tasks.get()) is not None:
        index, shard = task
        try:
            built = _build_shard(index, shard, job, Path(out_dir) / f'shard-{index:05d}.arrow',
                                 lambda b, e: results.put(('progress', index, (b, e))))
            results.put(('done', index, built))
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


def _run_shards(shards: list[list[tuple]], job: _Job, out_dir: Path, num_proc: int,
                progress: _Progress) -> list[tuple[dict, bytes, np.ndarray]]:
    "Build every shard, in this process or in `num_proc` worker processes; `_build_shard`'s results in shard order."
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
    done: dict[int, tuple[dict, bytes]] = {}
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


def encoding_backend(tokenizer):
    "A copy of a transformers tokenizer's `tokenizers.Tokenizer` without truncation or padding (what builds encode)."
    backend = type(tokenizer.backend_tokenizer).from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()  # a transformers call with truncation=True leaves it switched on in the backend
    backend.no_padding()
    return backend


def build_shards(source: CorpusSource, tokenizer, settings: BuildSettings, seed: int, out_dir: Path, num_proc: int,
                 progress: bool = True) -> list[dict]:
    """Cut `source` into shards and build each into `out_dir/shard-<i>.arrow`, in `num_proc` processes, the examples of
    repeated documents dropped (`settings.deduplicate`); each shard's counters (`COUNTERS`), in shard order."""
    shards = _plan(source, settings)
    for lang in _languages(shards, source, settings): splitter(lang)  # fails early on a bad language; forks inherit it
    job = _Job(source, encoding_backend(tokenizer), settings, seed, source.seed_key(), tokenizer.cls_token_id,
               tokenizer.sep_token_id)
    bar = _Progress(source.total_bytes(), f'examples of {Path(source.entry).name[:40] or source.entry}', progress)
    try: built = _run_shards(shards, job, out_dir, num_proc, bar)
    finally: bar.close()
    return _drop_repeated(built, out_dir, settings.deduplicate)
