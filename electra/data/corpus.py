"""Raw text in, documents of sentences out: the reading side of the pretraining data pipeline.

A `corpus` entry is a text file, a directory of them, 'demo', a local table (.parquet/.jsonl/.json/.csv/.tsv/.arrow,
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
layout (one sentence per line) is left as it is. Under `auto` a line written without spaces between words (Chinese,
Japanese) is split at its sentence-final punctuation by rule, the others by spaCy's English rules
(electra.data.sentences).

A text file's lines end in LF, CRLF or a CR alone (classic Mac line ends, told by its first bytes: `line_end`), read
as Python's universal newlines read them; a table's cells are split at LF, as the replication splits them.

A file that is not text, named in `corpus` or found in a directory, is refused before any work in one line naming
it and how to give its text: compressed, UTF-16/32, a binary format (a checkpoint, an image, a table, a NUL byte),
another encoding; under `corpus_format: auto`, also lines that are a table's rows (JSON lines, CSV, TSV), which a
declared `corpus_format` reads as text. Empty files in a directory are skipped and counted. Bad input inside a text
file is skipped and counted, never fatal unless nothing usable is left: lines that are not valid UTF-8 (mixed
encodings), sentences longer than `max_sentence_chars` (minified code, tables, encoded blobs), empty documents.
"""
from __future__ import annotations

import codecs
import csv
import dataclasses
import hashlib
import json
import os
import shutil
import statistics
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

from electra.config.errors import ConfigError, RunWarning
from electra.config.text_files import not_text
from electra.data.demo import write_demo_corpus
from electra.data.hub import hub_unreachable, shadowed_hub_name
from electra.runtime.files import file_state, writable_dir

__all__ = ['BuildSettings', 'CorpusSource', 'resolve_corpus', 'corpus_text_files', 'source_lines', 'skipped_in_words']

TABLE_SUFFIXES = {'.parquet': 'parquet', '.jsonl': 'json', '.json': 'json', '.arrow': 'arrow', '.csv': 'csv',
                  '.tsv': 'tsv'}
HEAD_BYTES = 1 << 16        # what is read of each file up front to check it is text and pick its format
MAX_LINE_BYTES = 1 << 20    # a longer line is skipped unread (a 1 MiB "paragraph" is not prose)
AUTO_SPLIT = 'auto'         # sentence_split's default: lines without spaces (Chinese, Japanese) by rule, others as English
PARAGRAPH_CHARS = 200       # median line length above which lines are paragraphs (English sentences: ~100-150)
_DOC_END = None             # in a line stream: a hard document boundary (end of a file, of a table row)
NEWLINE, CR, NUL = b'\n', b'\r', b'\0'


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
    deduplicate: bool = True          # a file or document whose text was read before is dropped (see `resolve_corpus`)

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
    duplicates: dict[str, int] = field(default_factory=dict)  # files read before, left out: 'links', 'copies'
    dataset: object = None              # kind 'table': a memory-mapped `datasets.Dataset`
    text_column: str = 'text'
    cr_files: int = 0                   # files of classic Mac line ends (CR alone), read as line breaks (`line_end`)

    def content_hash(self) -> str:
        """A hash of what the source reads: each file's `file_state` (path, size, mtime and ctime: an edit is seen
        without reading the files), or a table's rows, text column and data files. Streamed, so a folder of millions
        of files never becomes one big string."""
        h = hashlib.sha256(json.dumps([self.kind, self.text_column if self.kind == 'table' else None]).encode())
        files = self.files if self.kind == 'files' else [Path(c['filename']) for c in self.dataset.cache_files]
        if self.kind == 'table': h.update(f'{self.entry}\0{len(self.dataset)}\0'.encode())
        # earlier versions read a file of CR line ends as one line: a build of theirs is not this one
        if self.cr_files: h.update(b'CR line ends read as line breaks\0')
        for f in files: h.update(f'{file_state(f)}\n'.encode())
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
    rows: str = ''               # what its lines are when they are a table's rows ('JSON lines', ...), not text
    eol: bytes = NEWLINE         # what its lines end in (`line_end`)


def line_end(head: bytes) -> bytes:
    """What the lines of a file whose first bytes are `head` end in: CR for a file of classic Mac line ends (a CR and
    no LF), read as line breaks as Python's universal newlines and the vocab.txt reader read them; else LF (a CRLF
    line's CR is stripped with its spaces)."""
    return CR if CR in head and NEWLINE not in head else NEWLINE


def readline(f, limit: int, eol: bytes) -> bytes:
    """`f.readline(limit)` of a binary file whose lines end in `eol`: LF as readline reads them, CR from what the
    file's buffer holds, a buffer at a time (a line is never read twice)."""
    if eol == NEWLINE: return f.readline(limit)
    parts, n = [], 0
    while n < limit and (chunk := f.peek(1)[:limit - n]):
        at = chunk.find(eol)
        parts.append(f.read(len(chunk) if at < 0 else at + 1))
        n += len(parts[-1])
        if at >= 0: break
    return b''.join(parts)


def _rows(lines: list[str]) -> str:
    """'' for lines of text; else what the first 20 non-blank lines are: JSON objects, a JSON document, or rows of one
    number of fields separated by tabs, or by commas under a header (fields short, none ending a sentence)."""
    sample = [line for line in lines if line][:20]
    if not sample: return ''
    if sample[0][0] in '{[':
        try:
            if all(isinstance(json.loads(line), dict) for line in sample): return 'JSON lines'
        except ValueError:
            if sample[0] in ('{', '[') or sample[0].startswith(('[{', '{"')): return 'a JSON document'
    if len(sample) < 2: return ''
    tabs = {line.count('\t') for line in sample}
    if len(tabs) == 1 and (k := tabs.pop()):
        return f'tab-separated rows ({k + 1} fields on each of its first {len(sample)} lines)'
    rows = list(csv.reader(sample))
    n = len(rows[0])
    header = all(0 < len(f.strip()) <= 40 and f.strip()[-1] not in '.!?' for f in rows[0])
    if n > 1 and header and all(len(r) == n for r in rows):
        return f'CSV rows ({n} fields on each of its first {len(sample)} lines, under a header)'
    return ''


def sniff(head: bytes, complete: bool) -> Head:
    "Check the start of a file (`complete`: the whole file) is text; read off its layout."
    if not head.strip(): return Head('empty')
    if b'\0' in head: return Head('binary')
    eol = line_end(head)
    raw = head.split(eol)
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
    return Head(None, blank, int(statistics.median(len(lines[i]) for i in text)), _rows(lines), eol)


def read_head(path: Path) -> tuple[bytes, bool]:
    try:
        with open(path, 'rb') as f: head = f.read(HEAD_BYTES + 1)
    except OSError as e: raise ConfigError(f"corpus file {path}: cannot read it ({e.strerror}).") from None
    return head[:HEAD_BYTES], len(head) <= HEAD_BYTES


def resolve_format(fmt: str, head: Head, in_directory: bool) -> str:
    if fmt != 'auto': return fmt
    if head.blank_lines: return 'lines'
    return 'documents' if in_directory else 'paragraphs'


def resolve_split(split: str, fmt: str, median_chars: int) -> Optional[str]:
    """The language to split lines with (a spaCy language, or `AUTO_SPLIT`: each line's own rules, electra.data.sentences),
    or None."""
    if split == 'none': return None
    if split != AUTO_SPLIT: return split
    return AUTO_SPLIT if fmt in ('documents', 'paragraphs') or median_chars > PARAGRAPH_CHARS else None


# ---------------------------------------------------------------- resolving `corpus` entries

def _visible_files(p: Path) -> Iterator[Path]:
    """The entries other than folders under directory `p` (files, links to files, links to nothing, ...), hidden ones
    (a name, or a folder on the way, starting with '.') left out. Linked folders are followed, except a link back up
    the tree (a loop); a file reached twice is listed twice (`resolve_corpus` reads it once)."""
    for root, dirs, names in os.walk(p, followlinks=True):
        above = {os.path.realpath(a) for a in Path(root).parents if a == p or p in a.parents}
        if os.path.realpath(root) in above:
            dirs.clear()
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
        yield from (Path(root) / name for name in names if not name.startswith('.'))


def _table_files(p: Path) -> list[Path]:
    if p.is_file(): return [p]
    return sorted(f for f in _visible_files(p) if f.suffix in TABLE_SUFFIXES)


def _tables_cache(cache_dir: Path, files: list[Path]) -> Path:
    """Where `datasets` keeps its Arrow copy of table files: a folder per `file_state` of them, since `datasets` tells
    a local file's edit by its mtime alone and would read the old rows of one edited with its mtime kept. The copies
    of the files' earlier states are removed: nothing reads them again."""
    names = hashlib.sha256('\0'.join(str(f.resolve()) for f in files).encode()).hexdigest()[:16]
    state = hashlib.sha256('\0'.join(map(file_state, files)).encode()).hexdigest()[:16]
    for old in (Path(cache_dir) / 'tables' / names).glob('*'):
        if old.name != state: shutil.rmtree(old, ignore_errors=True)
    return Path(cache_dir) / 'tables' / names / state


def _load_table(entry: str, settings: BuildSettings, cache_dir: Path):
    "A hub dataset or local table files as a memory-mapped `datasets.Dataset`."
    import datasets
    if entry.startswith('hub:'):
        name, _, config = entry[4:].partition(':')
        if shadow := shadowed_hub_name(name):
            raise ConfigError(f"corpus '{entry}': a hub dataset, but {shadow}. Give it as ./{name} to read the "
                              f"{'folder' if Path(name).is_dir() else 'file'}, or start the job from another folder to read the hub dataset.")
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
            raise ConfigError(f"corpus '{entry}': a table corpus needs files of one kind (.parquet, .jsonl/.json, "
                              f".csv, .tsv or .arrow), found {', '.join(sorted(kinds)) or 'none'}.")
        (kind,) = kinds
        try:
            if kind == 'arrow':
                ds = datasets.concatenate_datasets([datasets.Dataset.from_file(str(f)) for f in files])
            else:  # a .tsv is CSV with tabs
                options = {'delimiter': '\t'} if kind == 'tsv' else {}
                ds = datasets.load_dataset('csv' if kind == 'tsv' else kind, data_files=[str(f) for f in files],
                                           split='train', cache_dir=str(_tables_cache(cache_dir, files)), **options)
        except Exception as e:  # pyarrow and datasets raise many kinds for a malformed file
            raise ConfigError(f"corpus '{entry}': cannot read it as {kind} ({type(e).__name__}: {e}).") from None
    column = settings.text_column
    if column not in ds.column_names:
        strings = [c for c, f in ds.features.items() if _is_text(f)]
        if len(strings) != 1:
            raise ConfigError(f"corpus '{entry}': no text column '{column}' (columns: {', '.join(ds.column_names)}). "
                              f"Set `text_column`.")
        column = strings[0]
    _check_text_column(entry, ds, column)
    return ds, column


def _is_text(feature) -> bool:
    "Whether a `datasets` feature is a column of strings."
    return getattr(feature, 'dtype', None) in ('string', 'large_string')


def _first_not_text(ds, column: str) -> tuple[int, str]:
    "The first row (from 1) of `column` whose value is neither text nor null, and that value as JSON."
    encoded = type(ds.features[column]).__name__ == 'Json'  # `datasets` keeps a column of mixed kinds as JSON text
    row = 0
    for chunk in ds.data.column(column).chunks:
        for value in chunk.to_pylist():
            row += 1
            if value is None: continue
            value = json.loads(value) if encoded else value
            if value is not None and not isinstance(value, str): return row, json.dumps(value, ensure_ascii=False)
    return row, 'null'


def _check_text_column(entry: str, ds, column: str) -> None:
    """A table's text column holds text (or nulls), else refused naming a row: `datasets` reads a JSONL column of
    strings and one number as JSON, and each document's text would be trained on with its quotes. Rows of no text
    whose text is in a column that is empty wherever the text column is not (a key renamed partway) are said."""
    import pyarrow.compute as pc
    if not _is_text(ds.features[column]):
        row, shown = _first_not_text(ds, column)
        raise ConfigError(f"corpus '{entry}': column '{column}' is not all text: row {row} holds {shown} "
                          f"({str(ds.features[column]).split('(')[0]}). Write each document's text as one string (null "
                          f"or \"\" for none), or set `text_column` to the column that holds it.")
    missing = pc.is_null(ds.data.column(column))
    if not (n_missing := pc.sum(missing).as_py()): return
    for other, f in ds.features.items():
        if other == column or not _is_text(f): continue
        held = pc.invert(pc.is_null(ds.data.column(other)))
        if pc.any(pc.and_(held, pc.invert(missing))).as_py(): continue  # beside the text (a title): not a rename
        if n := pc.sum(pc.and_(held, missing)).as_py():
            warnings.warn(RunWarning(
                f"corpus '{entry}': {n_missing} of its {len(ds)} rows have no '{column}' (null, or no such key), and "
                f"{n} of them hold text in '{other}' instead: a column renamed partway? They are skipped as empty "
                f"documents; give every row its text under one key (or set `text_column`)."))
            return


TABLES = ("a table is read as a `corpus` entry of its own, by its suffix (.jsonl, .json, .csv, .tsv, .parquet, "
          ".arrow) and `text_column`")


def _line_of(head: bytes, at: int) -> str:
    "Where byte `at` of a file's first bytes `head` is, in words."
    return f"line {head.count(line_end(head), 0, at) + 1} (byte {at})"


def _refusal(path: Path, head: bytes, complete: bool, fmt: str) -> str:
    """'' for a text file (or an empty one); else what it is instead and how to give its text, as the end of a
    sentence that starts with its path. Lines that are a table's rows are text only where `fmt` declares how text
    files are read (anything but 'auto')."""
    if what := not_text(path, head): return what
    if NUL in head:
        return (f"holds a NUL byte on {_line_of(head, head.index(NUL))}: it is not text (binary data, or text in "
                "UTF-32). Remove it, or write its text as UTF-8")
    found = sniff(head, complete)
    if found.problem == 'not UTF-8':
        try: at = len(codecs.getincrementaldecoder('utf-8')().decode(head, final=complete).encode())
        except UnicodeDecodeError as e: at = e.start
        return (f"is not UTF-8 text ({_line_of(head, at)}: another encoding, or not text): write it as UTF-8 (`iconv "
                f"-f ENCODING -t UTF-8 {path} > {path.with_name(f'utf8_{path.name}')}`, ENCODING its own: LATIN1, "
                "CP1252, SHIFT_JIS, GBK, ...) or remove it")
    if found.rows and fmt == 'auto':
        return (f"holds {found.rows}, not text: {TABLES}; or set `corpus_format` (lines, documents or paragraphs) "
                "to read its lines as text")
    return ''


def _directory(entry: str, p: Path, fmt: str) -> CorpusSource:
    "The text files of directory `p` (`entry`), empty ones skipped and counted; any other file is refused, naming it."
    found = sorted(_visible_files(p))
    if not found:
        raise ConfigError(f"corpus directory {p} has no (non-hidden) files. Put text files in it or remove it from "
                          "`corpus`.")
    source, refused = CorpusSource(entry, 'files', in_directory=True), []
    for f in found:
        if not f.is_file():  # text meant for the corpus that cannot be read as a file
            refused.append((f, f"is a link to {os.readlink(f)}, which does not exist" if f.is_symlink() and not
                            f.exists() else "is not a regular file (a pipe, a socket or a device)"))
            continue
        head, complete = read_head(f)
        if why := _refusal(f, head, complete, fmt): refused.append((f, why))
        elif sniff(head, complete).problem: source.skipped['empty'] = source.skipped.get('empty', 0) + 1
        else:
            source.files.append(f)
            source.cr_files += line_end(head) == CR
    if refused:  # its text would be read as something it is not, or left out unseen
        more = f" ({len(refused) - 1} other file(s) there are not text either)" if len(refused) > 1 else ''
        raise ConfigError(f"corpus directory {p}: {refused[0][0]} {refused[0][1]}.{more}")
    if not source.files:
        raise ConfigError(f"corpus directory {p} has no usable text file ({_counts(source.skipped)}). "
                          "Give UTF-8 text files.")
    return source


def _text_files(entry: str, cache_dir: Path, fmt: str) -> CorpusSource:
    if entry == 'demo':
        return CorpusSource(entry, 'files', [write_demo_corpus(Path(cache_dir) / 'demo' / 'demo_corpus.txt')])
    p = Path(entry).expanduser()
    if p.is_dir(): return _directory(entry, p, fmt)
    if p.is_file():
        head, complete = read_head(p)
        if why := _refusal(p, head, complete, fmt): raise ConfigError(f"corpus file {p} {why}.")
        if sniff(head, complete).problem:
            raise ConfigError(f"corpus file {p} is empty (or blank). Remove it from `corpus` or put text in it.")
        return CorpusSource(entry, 'files', [p], cr_files=int(line_end(head) == CR))
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


def _file_digest(path: Path) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    with open(path, 'rb') as f:
        while block := f.read(1 << 20): h.update(block)
    return h.digest()


def _drop_duplicate_files(sources: list[CorpusSource]) -> None:
    """Each text file of `sources` read once: a file reached again (a link to it, an entry or a linked folder naming
    it again: the same resolved path) or a copy of one (the same bytes) is dropped where found after the first, and
    counted in its source's `duplicates`. Only files of a size that occurs twice are read to compare them."""
    seen, kept = set(), []
    for source in (s for s in sources if s.kind == 'files'):
        for f in source.files:
            if (real := f.resolve()) in seen: source.duplicates['links'] = source.duplicates.get('links', 0) + 1
            else: kept.append((source, f))
            seen.add(real)
    sizes = Counter(f.stat().st_size for _, f in kept)
    digests, files = set(), {id(s): [] for s in sources}
    for source, f in kept:
        if sizes[f.stat().st_size] > 1 and (digest := _file_digest(f)) in digests:
            source.duplicates['copies'] = source.duplicates.get('copies', 0) + 1
            continue
        if sizes[f.stat().st_size] > 1: digests.add(digest)
        files[id(source)].append(f)
    for source in (s for s in sources if s.kind == 'files'):
        if not files[id(source)]:
            raise ConfigError(f"corpus '{source.entry}': every file of it is read already, through an earlier `corpus` "
                              "entry (the same files, links to them or copies): give each text once.")
        source.files = files[id(source)]


def resolve_corpus(entries: list[str], cache_dir: Path, settings: BuildSettings = BuildSettings()) -> list[CorpusSource]:
    """One `CorpusSource` per `corpus` entry (see the module docstring), checked up front: a file that is not text or
    an entry with nothing usable is a `ConfigError` naming it, empty files inside directories are skipped and counted.
    With `settings.deduplicate`, a text file read before (linked, named again or copied) is dropped and counted.
    Hub datasets are downloaded (or found in the `datasets` cache) here."""
    writable_dir(cache_dir, 'cache_dir')  # before any corpus is read: a bad cache_dir fails in seconds, not after a build
    sources = []
    for entry in entries:
        if entry.startswith('hub:') or _is_table(entry):
            ds, column = _load_table(entry, settings, cache_dir)
            sources.append(CorpusSource(entry, 'table', dataset=ds, text_column=column))
        else:
            sources.append(_text_files(entry, cache_dir, settings.corpus_format))
    if settings.deduplicate: _drop_duplicate_files(sources)
    return sources


def corpus_text_files(sources: list[CorpusSource]) -> list[Path]:
    "The text files of `sources` (what a tokenizer is trained on)."
    return [f for s in sources if s.kind == 'files' for f in s.files]


def _counts(counts: dict[str, int]) -> str:
    return ', '.join(f'{n:,} {reason}' for reason, n in counts.items()) or 'none'


# ---------------------------------------------------------------- reading lines and documents

def _raw_lines(f, end: int, stats: dict, eol: bytes) -> Iterator[bytes]:
    "Lines (ending in `eol`) of binary file `f` from its position up to byte `end`; over-long ones skipped."
    while f.tell() < end:
        line = readline(f, MAX_LINE_BYTES + 1, eol)
        if not line: return
        stats['bytes'] += len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith(eol):
            while line and not line.endswith(eol):  # the rest of the line, a MiB at a time, never held whole
                line = readline(f, MAX_LINE_BYTES, eol)
                stats['bytes'] += len(line)
            stats['long_lines'] += 1
            continue
        yield line


def text_lines(path: str, start: int, end: int, stats: dict, eol: bytes = NEWLINE) -> Iterator[Optional[str]]:
    """Stripped lines ('' for blank) of bytes [start, end) of a file whose lines end in `eol` (`line_end`), then
    `_DOC_END`. Lines that are not UTF-8 or hold NUL bytes are skipped and counted."""
    with open(path, 'rb') as f:
        f.seek(start)
        for raw in _raw_lines(f, end, stats, eol):
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
SKIPPED_IN_WORDS = {'repeated_documents': 'repeated documents', 'empty_documents': 'empty documents', 'undecodable_lines': 'lines not UTF-8',
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
                eol = line_end(read_head(f)[0])
                yield from (line for line in text_lines(str(f), 0, f.stat().st_size, stats, eol) if line)
        else:
            column = source.dataset.data.column(source.text_column)
            for start in range(0, len(column), 1000):
                yield from (line.strip() for text in column.slice(start, 1000).to_pylist()
                            for line in (text or '').split('\n') if line.strip())
