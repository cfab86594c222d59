"""Raw text in, documents of sentences out: the reading side of the pretraining data pipeline.

A `corpus` entry is a text file, a directory of them, 'demo', a local table (.parquet/.jsonl/.json/.arrow,
or a directory of them) or a Hugging Face hub dataset `hub:<name>[:<config>]`. Text is read as:

- `lines`: the official ELECTRA layout, one sentence per line, a blank line between documents;
- `documents`: one document per file (blank lines are paragraph breaks), as the official OpenWebText build
  (google-research/electra, build_openwebtext_pretraining_dataset.py: `blanks_separate_docs=False`);
- `paragraphs`: one document per non-blank line (a dump with one article per line);
- `auto`: per file, from its first 64 KiB: `lines` when blank lines separate text, else `documents` for a
  file found in a directory and `paragraphs` for a file named by itself. Table rows are documents (their
  lines split at '\\n', as the fastai replication does), or lines of one stream when rows look like single
  sentences (BookCorpus).

Lines that are paragraphs, not sentences, are split into sentences by spaCy's rule-based sentencizer
(`spacy.blank(lang)` + `sentencizer`: no model download). `sentence_split: auto` splits raw documents and
tables, and `lines` files whose lines are paragraph-long (median over 200 characters); the official
layout (one sentence per line) is left as it is.

Bad input is skipped and counted, never fatal unless nothing usable is left: binary, empty or non-UTF-8
files inside a directory, lines that are not valid UTF-8 (mixed encodings), sentences longer than
`max_sentence_chars` (minified code, tables, encoded blobs), empty documents. A file named explicitly in
`corpus` that is not text at all is an error naming it: that is a mistake in the config, not noise.
"""
from __future__ import annotations

import codecs
import dataclasses
import hashlib
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

from electra.config.base import ConfigError, compressed
from electra.data.demo import write_demo_corpus
from electra.data.hub import hub_unreachable
from electra.runtime.files import writable_dir

__all__ = ['BuildSettings', 'CorpusSource', 'resolve_corpus', 'corpus_text_files', 'source_lines', 'skipped_in_words']

TABLE_SUFFIXES = {'.parquet': 'parquet', '.jsonl': 'json', '.json': 'json', '.arrow': 'arrow'}
HEAD_BYTES = 1 << 16        # what is read of each file up front to check it is text and pick its format
MAX_LINE_BYTES = 1 << 20    # a longer line is skipped unread (a 1 MiB "paragraph" is not prose)
PARAGRAPH_CHARS = 200       # median line length above which lines are paragraphs (English sentences: ~100-150)
_DOC_END = None             # in a line stream: a hard document boundary (end of a file, of a table row)


@dataclass(frozen=True)
class BuildSettings:
    """Every setting that changes the examples built from a corpus (all of it goes into the cache fingerprint)."""
    max_length: int = 128
    corpus_format: str = 'auto'
    sentence_split: str = 'auto'      # 'auto', 'none' or a spaCy language code
    min_line_chars: int = 0
    max_sentence_chars: int = 10_000
    remove_empty_parens: bool = False
    text_column: str = 'text'
    hub_split: str = 'train'
    shard_bytes: int = 0              # 0: from the corpus size (see `shard_target_bytes`); not num_proc

    @classmethod
    def from_config(cls, cfg) -> 'BuildSettings':
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: getattr(cfg, k) for k in names - {'shard_bytes'}})  # shard_bytes: not a job setting


@dataclass
class CorpusSource:
    """One `corpus` entry, resolved: text files (`kind='files'`) or a table of documents (`kind='table'`)."""
    entry: str
    kind: str
    files: list[Path] = field(default_factory=list)
    in_directory: bool = False          # files found in a directory ('auto' reads them as one document each)
    skipped: dict[str, int] = field(default_factory=dict)   # files left out up front, by reason
    dataset: object = None              # kind 'table': a memory-mapped `datasets.Dataset`
    text_column: str = 'text'

    def content_hash(self) -> str:
        """A hash of what the source reads: each file's path, size and mtime, or a table's rows, text column and
        data files. Streamed, so a folder of millions of files never becomes one big string."""
        h = hashlib.sha256(json.dumps([self.kind, self.text_column if self.kind == 'table' else None]).encode())
        files = self.files if self.kind == 'files' else [Path(c['filename']) for c in self.dataset.cache_files]
        if self.kind == 'table': h.update(f'{self.entry}\0{len(self.dataset)}\0'.encode())
        for f in files:
            st = f.stat()
            h.update(f'{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n'.encode())
        return h.hexdigest()

    def seed_key(self) -> str:
        """What seeds the source's shards besides the run's seed: its file names (relative to the directory) and
        sizes, or the table's name and rows. Not paths or mtimes, so a moved or touched corpus gives the same
        examples; different corpora of one run get different random streams."""
        h = hashlib.sha256()
        if self.kind == 'table': h.update(f'{self.entry}\0{len(self.dataset)}'.encode())
        root = Path(self.entry).expanduser() if self.in_directory else None
        for f in self.files:
            h.update(f'{f.relative_to(root) if root else f.name}\0{f.stat().st_size}\n'.encode())
        return h.hexdigest()[:16]

    def total_bytes(self) -> int:
        if self.kind == 'files': return sum(f.stat().st_size for f in self.files)
        return self.dataset.data.column(self.text_column).nbytes


# ---------------------------------------------------------------- checking files

@dataclass
class Head:
    "What the first `HEAD_BYTES` of a file say about it."
    problem: Optional[str]       # None, 'empty', 'binary' or 'not UTF-8'
    blank_lines: bool = False    # a blank line between non-blank ones
    median_chars: int = 0        # median length of its non-blank lines


def sniff(head: bytes, complete: bool) -> Head:
    "Check the start of a file (`complete`: the whole file) is text; read off its layout."
    if not head.strip(): return Head('empty')
    if b'\0' in head: return Head('binary')
    raw = head.split(b'\n')
    if not complete and len(raw) > 1: raw = raw[:-1]  # the last line may be cut anywhere
    lines, bad = [], 0
    for line in raw:
        try:  # a character cut in two at the end of a partial single line is fine
            lines.append(codecs.getincrementaldecoder('utf-8')().decode(line, final=complete or len(raw) > 1).strip())
        except UnicodeDecodeError:
            bad += 1
    if bad > len(lines): return Head('not UTF-8')  # mostly undecodable: another encoding, not a stray line
    text = [i for i, line in enumerate(lines) if line]
    if not text: return Head('empty')
    blank = any(not line for line in lines[text[0]:text[-1]])
    return Head(None, blank, int(statistics.median(len(lines[i]) for i in text)))


def read_head(path: Path) -> tuple[bytes, bool]:
    with open(path, 'rb') as f: head = f.read(HEAD_BYTES + 1)
    return head[:HEAD_BYTES], len(head) <= HEAD_BYTES


def resolve_format(fmt: str, head: Head, in_directory: bool) -> str:
    if fmt != 'auto': return fmt
    if head.blank_lines: return 'lines'
    return 'documents' if in_directory else 'paragraphs'


def resolve_split(split: str, fmt: str, median_chars: int) -> Optional[str]:
    "The spaCy language to split lines with, or None."
    if split == 'none': return None
    if split != 'auto': return split
    return 'en' if fmt in ('documents', 'paragraphs') or median_chars > PARAGRAPH_CHARS else None


# ---------------------------------------------------------------- resolving `corpus` entries

def _visible_files(p: Path) -> Iterator[Path]:
    "The files under directory `p`, hidden ones (a name, or a folder on the way, starting with '.') left out."
    return (f for f in p.rglob('*') if f.is_file() and not any(part.startswith('.') for part in f.relative_to(p).parts))


def _table_files(p: Path) -> list[Path]:
    if p.is_file(): return [p]
    return sorted(f for f in _visible_files(p) if f.suffix in TABLE_SUFFIXES)


def _load_table(entry: str, settings: BuildSettings, cache_dir: Path):
    "A hub dataset or local table files as a memory-mapped `datasets.Dataset`."
    import datasets
    if entry.startswith('hub:'):
        name, _, config = entry[4:].partition(':')
        try:
            if unreachable := hub_unreachable(): raise ConnectionError(unreachable)  # fail at once, not after retries
            ds = datasets.load_dataset(name, config or None, split=settings.hub_split)
        except Exception as e:  # datasets raises many kinds: ConnectionError, DatasetNotFoundError, ValueError, ...
            if isinstance(e, ConnectionError) or any(w in str(e).lower() for w in ('reach', 'offline', 'connection')):
                raise ConfigError(
                    f"corpus '{entry}': the Hugging Face hub cannot be reached ({e}). Download the dataset once where "
                    f"the hub is reachable (`datasets` keeps it in its cache, where HF_HUB_OFFLINE=1 finds it later), "
                    f"or point `corpus` at local files instead: the dataset's .parquet/.jsonl files (or their "
                    f"directory), or plain text files and directories.") from None
            raise ConfigError(f"corpus '{entry}': cannot load this hub dataset ({type(e).__name__}: {e}). Check the "
                              f"name, `hub_split`, and the config, written hub:<name>:<config> (e.g. "
                              f"hub:wikimedia/wikipedia:20231101.en).") from None
    else:
        files = _table_files(Path(entry).expanduser())
        kinds = {TABLE_SUFFIXES[f.suffix] for f in files}
        if len(kinds) != 1:
            raise ConfigError(f"corpus '{entry}': a table corpus needs files of one kind (.parquet, .jsonl/.json or "
                              f".arrow), found {', '.join(sorted(kinds)) or 'none'}.")
        (kind,) = kinds
        try:
            if kind == 'arrow':
                ds = datasets.concatenate_datasets([datasets.Dataset.from_file(str(f)) for f in files])
            else:
                ds = datasets.load_dataset(kind, data_files=[str(f) for f in files], split='train',
                                           cache_dir=str(Path(cache_dir) / 'tables'))
        except Exception as e:  # pyarrow and datasets raise many kinds for a malformed file
            raise ConfigError(f"corpus '{entry}': cannot read it as {kind} ({type(e).__name__}: {e}).") from None
    column = settings.text_column
    if column not in ds.column_names:
        strings = [c for c, f in ds.features.items() if getattr(f, 'dtype', None) in ('string', 'large_string')]
        if len(strings) != 1:
            raise ConfigError(f"corpus '{entry}': no text column '{column}' (columns: {', '.join(ds.column_names)}). "
                              f"Set `text_column`.")
        column = strings[0]
    return ds, column


def _text_files(entry: str, cache_dir: Path) -> CorpusSource:
    if entry == 'demo':
        return CorpusSource(entry, 'files', [write_demo_corpus(Path(cache_dir) / 'demo' / 'demo_corpus.txt')])
    p = Path(entry).expanduser()
    if p.is_dir():
        found = sorted(_visible_files(p))
        if not found:
            raise ConfigError(f"corpus directory {p} has no (non-hidden) files. Put text files in it or "
                              "remove it from `corpus`.")
        source, packed = CorpusSource(entry, 'files', in_directory=True), []
        for f in found:  # files in a directory that are not text are skipped and counted, not fatal
            head, complete = read_head(f)
            if compressed(f, head[:16]): packed.append(f)
            elif problem := sniff(head, complete).problem: source.skipped[problem] = source.skipped.get(problem, 0) + 1
            else: source.files.append(f)
        if packed:  # text meant for the corpus, which skipping as binary would leave out unseen
            raise ConfigError(f"corpus directory {p} holds {len(packed)} compressed file{'s' * (len(packed) > 1)} (the "
                              f"first: {packed[0]} {compressed(packed[0])}). Keep only plain text files in the "
                              "directory.")
        if not source.files:
            raise ConfigError(f"corpus directory {p} has no usable text file ({_counts(source.skipped)}). "
                              "Give UTF-8 text files.")
        return source
    if p.is_file():
        head, complete = read_head(p)
        if packed := compressed(p, head[:16]): raise ConfigError(f"corpus file {p} {packed}.")
        problem = sniff(head, complete).problem
        if problem == 'empty':
            raise ConfigError(f"corpus file {p} is empty (or blank). Remove it from `corpus` or put text in it.")
        if problem == 'binary':
            raise ConfigError(f"corpus file {p} is not text (it contains NUL bytes: binary, or UTF-16/32). Remove it "
                              "from `corpus` or convert it to UTF-8.")
        if problem:
            raise ConfigError(f"corpus file {p} is not UTF-8 text. Convert it to UTF-8 or remove it from `corpus`.")
        return CorpusSource(entry, 'files', [p])
    if p.exists():
        raise ConfigError(f"corpus path {p} is neither a regular file nor a directory. Give text files "
                          "or directories of them.")
    raise ConfigError(f"corpus path {p} does not exist. Check the path, use 'demo' for the built-in sample corpus, "
                      "or hub:<name>[:<config>] for a Hugging Face dataset.")


def _is_table(entry: str) -> bool:
    "A table file, or a directory of table files (and perhaps a README): a hub dataset's files downloaded."
    p = Path(entry).expanduser()
    if p.is_file(): return p.suffix in TABLE_SUFFIXES
    if not p.is_dir(): return False
    tables = False
    for f in _visible_files(p):  # stops at the first other file: a folder of millions of text files is not listed here
        if f.suffix not in TABLE_SUFFIXES and f.suffix != '.md': return False
        tables = True
    return tables


def resolve_corpus(entries: list[str], cache_dir: Path, settings: BuildSettings = BuildSettings()) -> list[CorpusSource]:
    """One `CorpusSource` per `corpus` entry (see the module docstring), checked up front: bad files inside
    directories are skipped and counted, a bad file named explicitly or an entry with nothing usable is a
    `ConfigError` naming it. Hub datasets are downloaded (or found in the `datasets` cache) here."""
    writable_dir(cache_dir, 'cache_dir')  # before any corpus is read: a bad cache_dir fails in seconds, not after a build
    sources = []
    for entry in entries:
        if entry.startswith('hub:') or _is_table(entry):
            ds, column = _load_table(entry, settings, cache_dir)
            sources.append(CorpusSource(entry, 'table', dataset=ds, text_column=column))
        else:
            sources.append(_text_files(entry, cache_dir))
    return sources


def corpus_text_files(sources: list[CorpusSource]) -> list[Path]:
    "The text files of `sources` (what a tokenizer is trained on)."
    return [f for s in sources if s.kind == 'files' for f in s.files]


def _counts(counts: dict[str, int]) -> str:
    return ', '.join(f'{n:,} {reason}' for reason, n in counts.items()) or 'none'


# ---------------------------------------------------------------- reading lines and documents

def _raw_lines(f, end: int, stats: dict) -> Iterator[bytes]:
    "Lines of binary file `f` from its position up to byte `end`, newline stripped; over-long ones skipped."
    while f.tell() < end:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line: return
        stats['bytes'] += len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith(b'\n'):
            while line and not line.endswith(b'\n'):  # the rest of the line, a MiB at a time, never held whole
                line = f.readline(MAX_LINE_BYTES)
                stats['bytes'] += len(line)
            stats['long_lines'] += 1
            continue
        yield line


def text_lines(path: str, start: int, end: int, stats: dict) -> Iterator[Optional[str]]:
    """Stripped lines ('' for blank) of bytes [start, end) of a file, then `_DOC_END`. Lines that are not
    UTF-8 or hold NUL bytes are skipped and counted."""
    with open(path, 'rb') as f:
        f.seek(start)
        for raw in _raw_lines(f, end, stats):
            try:
                if b'\0' in raw: raise UnicodeDecodeError('utf-8', raw, 0, 1, 'NUL byte')
                yield raw.decode('utf-8').strip()
            except UnicodeDecodeError:
                stats['undecodable_lines'] += 1
    yield _DOC_END


def table_lines(column, fmt: str, stats: dict) -> Iterator[Optional[str]]:
    "Stripped lines of a table's text column: each row's lines then `_DOC_END`, or (`lines`) one stream."
    for text in column:
        if fmt != 'lines' and not (text or '').strip():
            stats['empty_documents'] += 1
            continue
        for line in (text or '').split('\n'): yield line.strip()
        if fmt != 'lines': yield _DOC_END
    yield _DOC_END


def documents(lines: Iterable[Optional[str]], fmt: str, settings: BuildSettings, stats: dict,
              chunk_chars: int = 1 << 20) -> Iterator[tuple[list[str], bool]]:
    """Documents of a line stream, as (cleaned lines, whether the document ends there): a document longer than
    `chunk_chars` comes in several pieces, so a book-length one is never held whole. `lines`: a blank line or
    `_DOC_END` ends a document; `documents`: only `_DOC_END`; `paragraphs`: every non-blank line is one. A
    document left without a line after cleaning is counted as empty, not yielded."""
    doc, raw, chars, sent = [], 0, 0, False
    for line in lines:
        end = line is _DOC_END or (fmt == 'lines' and not line)
        if line:
            raw += 1
            if settings.remove_empty_parens: line = line.replace('()', '').strip()  # left where links were (replication)
            if len(line) < settings.min_line_chars: stats['short_lines'] += 1
            elif line:
                doc.append(line)
                chars += len(line)
            end = fmt == 'paragraphs'
            if not end and chars >= chunk_chars:
                yield doc, False
                doc, chars, sent = [], 0, True
        if not end: continue
        if doc or sent:
            stats['documents'] += 1
            yield doc, True
        elif raw:
            stats['empty_documents'] += 1
        doc, raw, chars, sent = [], 0, 0, False


# what the readers count as skipped (keys of their `stats`), in words, in the order they are reported
SKIPPED_IN_WORDS = {'empty_documents': 'empty documents', 'undecodable_lines': 'lines not UTF-8',
                    'long_lines': 'lines over 1 MiB', 'long_sentences': 'sentences over max_sentence_chars',
                    'short_lines': 'lines under min_line_chars'}


def skipped_in_words(stats: dict) -> list[str]:
    "What the readers skipped, as '<count> <what>' phrases; nothing for a count of 0."
    return [f'{stats[k]:,} {label}' for k, label in SKIPPED_IN_WORDS.items() if stats.get(k)]


def source_lines(sources: list[CorpusSource], stats: Optional[Counter] = None) -> Iterator[str]:
    """Every non-blank line of `sources` (text files, then each table's text column), skipping what the build
    skips as unreadable (counted in `stats`): what a tokenizer is trained on."""
    stats = Counter() if stats is None else stats
    for source in sources:
        if source.kind == 'files':
            for f in source.files:
                yield from (line for line in text_lines(str(f), 0, f.stat().st_size, stats) if line)
        else:
            column = source.dataset.data.column(source.text_column)
            for start in range(0, len(column), 1000):
                yield from (line.strip() for text in column.slice(start, 1000).to_pylist()
                            for line in (text or '').split('\n') if line.strip())
