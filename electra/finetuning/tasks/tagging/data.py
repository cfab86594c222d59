"""Tagged sentences (NER and similar) from CoNLL-style or JSONL files, checked, with what is needed to write
predictions back in the input's format.

CoNLL: one word per line, its tag in the last column; other columns are ignored (and kept for the write-back); a
blank line between sentences; `-DOCSTART-` lines are skipped. This is how the official reader reads its
`train.txt` / `dev.txt` / `test.txt` (google-research/electra, finetune/tagging/tagging_tasks.py,
`TaggingTask._get_labeled_sentences`: the word from the first column, the tag from the last). Columns are split on
spaces and tabs only, so a word such as a no-break space stays a word. JSONL: `{"tokens": [...], "tags": [...]}` per
line, an optional `id`; other fields are kept and written back.

Tag schemes: 'IOB2' (B- begins every entity, I- continues one of its own type), 'IOBES' (also S- for a one-word
entity and E- to end one), 'IOB1' (the original CoNLL-2003 files: I- may begin an entity, B- only where an entity
directly follows one of the same type) and 'plain' (token-level tags such as POS: no structure). 'auto' takes IOBES
when the training tags have E- or S-, IOB2 when all are O or B-/I-, plain when none has a prefix. A prefix may be
written with '_' (B_LOC, I_PER) as well as '-', and in lower case (b-LOC, i-PER), one way in a file; entities and
their types are the same. IOB1 is never
guessed (an I- after O is an error in IOB2): name it. The official code checks nothing and reads any tags through
its lenient span reader (tagging_utils.py, `get_span_labels`); here a malformed file stops at its first bad line.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from electra.config.errors import ConfigError, RunWarning
from electra.config.text_files import load_json, read_text, split_lines
from electra.finetuning.tasks.values import warn_case_twins

__all__ = ['SCHEMES', 'Sentence', 'TaggedFile', 'TaggingData', 'read_conll', 'read_jsonl', 'read_tagged',
           'detect_scheme', 'check_scheme', 'check_known_tags', 'read_tagging_files', 'entity_types', 'dashed']

SCHEMES = ('IOB2', 'IOBES', 'IOB1', 'plain')
# a prefix and its type, separated by '-' or by '_' (B_LOC, as several NER corpora and spreadsheet exports write it),
# the prefix in either case (b-LOC). seqeval reads neither as written: B_LOC is an entity of the type '_LOC', b-LOC no
# prefix at all (its default mode joins words by type alone, b-LOC b-LOC one entity; its strict mode fails on 'b'):
# `tagging_metrics` gives it the tag as `dashed` writes it, B-LOC
_PREFIXED = re.compile(r'([BIESbies])([-_])(.+)\Z', re.S)
_COLUMNS = re.compile(r'[^ \t\r]+')  # CoNLL columns: split on spaces and tabs only
DOCSTART = '-DOCSTART-'


@dataclass
class Sentence:
    "One tagged sentence; `line` and `word_lines` are 1-based line numbers in its file (for messages and write-back)."
    id: str                                   # JSONL: its `id` (as a string), else the sentence's index in the file
    words: list[str]
    tags: list[str]
    line: int                                 # the line of its first word (CoNLL) or of its record (JSONL)
    word_lines: list[int] | None = None       # CoNLL: each word's line; None for JSONL (all on `line`)
    record: dict | None = None                # JSONL: the record as read, written back with `pred_tags`

    def line_of(self, k: int) -> int: return self.word_lines[k] if self.word_lines is not None else self.line


@dataclass
class TaggedFile:
    "The sentences of one file, and for CoNLL every line of it (no line ends), to write back with a column added."
    path: str
    format: str                               # 'conll' or 'jsonl'
    sentences: list[Sentence]
    lines: list[str] = field(default_factory=list)
    labeled: bool = True                      # False: words only (a test file), every sentence's `tags` empty

    def where(self, s: Sentence, k: int | None = None) -> str:
        "'<path>:<line>' of word k of `s` (JSONL: with the token's position), or of the sentence."
        if k is None: return f'{self.path}:{s.line}'
        return f'{self.path}:{s.line_of(k)}' + ('' if s.word_lines is not None else f' (token {k + 1})')

    @property
    def tags(self) -> set[str]: return {t for s in self.sentences for t in s.tags}


# -- readers

def _read_text(path: str | Path) -> str:
    p = Path(path)
    if not p.is_file(): raise ConfigError(f"{p}: no such file.")
    return read_text(p)  # (a byte-order mark is dropped: it is not part of the first word)


def _all_or_none(path, kinds: dict[int, str], said: dict[str, str], rule: str) -> bool:
    """Whether a test file has tags, from the kind of each of its lines ('tags', 'none' or 'null'): on every line or
    on none. The first line unlike the first one (or a null) is refused, naming the line it differs from."""
    first = next(iter(kinds.values()), 'none')
    odd = (next((n for n, k in kinds.items() if k == 'null'), None)
           or next((n for n, k in kinds.items() if k != first), None))
    if odd is None: return first == 'tags'
    other = next((n for n, k in kinds.items() if k != kinds[odd]), None)
    but = f' but line {other} {said[kinds[other]]}' if other else ''
    raise ConfigError(f"{path}:{odd} {said[kinds[odd]]}{but}: {rule}.")


def _conll_labeled(path, lines: list[str], labeled: bool | None) -> bool:
    "Whether a CoNLL file has tags: as asked, or with None (a test file), on every word line (a second column) or none."
    if labeled is not None: return labeled
    kinds = {n: 'tags' if len(cols) > 1 else 'none'
             for n, cols in enumerate(map(_COLUMNS.findall, lines), 1) if cols and cols[0] != DOCSTART}
    return _all_or_none(path, kinds, {'tags': 'has a word and its tag', 'none': 'has a word alone'},
                        'a test file gives tags on every word line or on none')


def read_conll(path: str | Path, labeled: bool | None = True) -> TaggedFile:
    """A CoNLL-style file: a word and its tag per line (the tag last), blank lines between sentences. `labeled`
    False: words only (every column is kept for the write-back; the word is the first); None (a test file): tags when
    the word lines have two columns or more, on every one or on none (`_all_or_none`)."""
    lines = split_lines(_read_text(path))  # (not str.splitlines: \x1c, \x85 or \u2028 may be part of a word)
    labeled = _conll_labeled(path, lines, labeled)
    out = TaggedFile(str(path), 'conll', [], lines, labeled)
    words, tags, at = [], [], []

    def close():
        if words: out.sentences.append(Sentence(str(len(out.sentences)), words[:], tags[:], at[0], at[:]))
        words.clear(); tags.clear(); at.clear()

    for n, line in enumerate(lines, 1):
        cols = _COLUMNS.findall(line)
        if not cols: close(); continue
        if cols[0] == DOCSTART: continue  # as the official reader: skipped, even inside a sentence
        if labeled and len(cols) < 2:
            raise ConfigError(f"{path}:{n}: the word {cols[0]!r} has no tag (CoNLL lines are `word ... tag`, the tag "
                              "in the last column; a blank line ends a sentence).")
        words.append(cols[0]); at.append(n)
        if labeled: tags.append(cols[-1])
    close()
    return out


def _strings(rec: dict, key: str, where: str) -> list[str]:
    val = rec.get(key)
    if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
        raise ConfigError(f"{where}: `{key}` must be a list of strings (each record is "
                          '{"tokens": [...], "tags": [...]}, an optional "id").')
    return val


def _jsonl_records(path: str | Path) -> list[tuple[int, dict]]:
    out = []
    for n, line in enumerate(split_lines(_read_text(path)), 1):
        if not line.strip(): continue
        rec = load_json(line, f'{path}:{n}')
        if not isinstance(rec, dict): raise ConfigError(f"{path}:{n}: a record must be a JSON object.")
        out.append((n, rec))
    return out


def read_jsonl(path: str | Path, labeled: bool | None = True) -> TaggedFile:
    """A JSONL file: `{"tokens": [...], "tags": [...]}` per line, an optional `id`; blank lines are skipped.
    `labeled` False: tokens only (any `tags` ignored); None (a test file): tags on every record or on none."""
    records = _jsonl_records(path)
    if labeled is None:
        kinds = {n: ('null' if rec['tags'] is None else 'tags') if 'tags' in rec else 'none' for n, rec in records}
        labeled = _all_or_none(path, kinds, {'tags': 'has "tags"', 'none': 'has no "tags"', 'null': 'has "tags": null'},
                               'a test file gives tags (a list of strings) on every record or on none')
    out, seen = TaggedFile(str(path), 'jsonl', [], labeled=labeled), {}
    for n, rec in records:
        where = f'{path}:{n}'
        words = _strings(rec, 'tokens', where)
        tags = _strings(rec, 'tags', where) if labeled else list(words)
        if len(words) != len(tags):
            raise ConfigError(f"{where}: {len(words)} tokens but {len(tags)} tags.")
        if not words: raise ConfigError(f"{where}: a record without tokens.")
        if labeled and '' in tags: raise ConfigError(f"{where} (token {tags.index('') + 1}): an empty tag.")
        sid = str(rec['id']) if 'id' in rec else str(len(out.sentences))
        if sid in seen: raise ConfigError(f"{where}: id {sid!r} already used on line {seen[sid]}.")
        seen[sid] = n
        out.sentences.append(Sentence(sid, words, tags if labeled else [], n, None, rec))
    return out


def read_tagged(path: str | Path, labeled: bool | None = True) -> TaggedFile:
    """`read_jsonl` for a file whose first line opens a JSON object (`{"`), else `read_conll`, whatever its name (a
    CoNLL line whose word is `{` is no JSON); `labeled` as they take it."""
    first = next((line for line in split_lines(_read_text(path)) if line.strip()), '')
    return (read_jsonl if re.match(r'\s*\{\s*"', first) else read_conll)(path, labeled)


# -- schemes

def detect_scheme(f: TaggedFile) -> str:
    "'IOBES', 'IOB2' or 'plain' from the tags of `f` (see the module docstring); mixed tags name the first odd one."
    prefixes, first_plain, first_prefixed = set(), None, None
    for s in f.sentences:
        for k, t in enumerate(s.tags):
            if t == 'O': continue
            m = _PREFIXED.match(t)
            if m: prefixes.add(m[1].upper()); first_prefixed = first_prefixed or (t, f.where(s, k))
            else: first_plain = first_plain or (t, f.where(s, k))
    if first_plain and first_prefixed:
        raise ConfigError(f"{first_plain[1]}: tag {first_plain[0]!r} has no B-/I-/E-/S- prefix, but "
                          f"{first_prefixed[1]} has {first_prefixed[0]!r}: entity tags need a prefix, or none should (tags that are "
                          "no entities, such as POS tags with '_' in them: give scheme: plain).")
    if first_plain: return 'plain'
    return 'IOBES' if prefixes & {'E', 'S'} else 'IOB2'


def _warn_if_entities(f: TaggedFile) -> None:
    """One warning when tags without prefixes stand beside 'O' (PER, LOC and O: entities in the IO scheme, as
    WNUT-style files write them): `auto` reads them as plain, word accuracy alone. POS-like tags have no 'O'."""
    tags = list(dict.fromkeys(t for s in f.sentences for t in s.tags))
    if 'O' not in tags or len(tags) < 2: return
    shown = ', '.join([t for t in tags if t != 'O'][:5]) + (', ...' if len(tags) > 6 else '')
    warnings.warn(f"{f.path}: its tags {shown} beside 'O' have no B-/I- prefixes, so scheme auto reads them as plain: "
                  "each word's tag scored by accuracy, no entity F1. If they are entities (the IO scheme), write B- on "
                  "each entity's first word and I- on the rest (IOB2); give scheme: plain if they are no entities.",
                  RunWarning, stacklevel=4)


def _split(tag: str) -> tuple[str, str]:
    "(prefix, type) of a tag: ('O', '') for O; for a tag without a prefix, ('', tag)."
    if tag == 'O': return 'O', ''
    m = _PREFIXED.match(tag)
    return (m[1].upper(), m[3]) if m else ('', tag)


def dashed(tag: str) -> str:
    "A prefixed tag as seqeval reads it, an upper-case prefix and '-' (B_LOC, b-LOC -> B-LOC); others as they are."
    m = _PREFIXED.match(tag)
    return f'{m[1].upper()}-{m[3]}' if m else tag


def _one_way(f: TaggedFile) -> None:
    "A file writes its prefixes one way: B-PER beside B_PER or b-PER would be two labels of one kind of word."
    first: dict[tuple[bool, str], tuple[str, str]] = {}
    for s in f.sentences:
        for k, t in enumerate(s.tags):
            if (m := _PREFIXED.match(t)) and (way := (m[1].isupper(), m[2])) not in first:
                first[way] = (t, f.where(s, k))
            if len(first) == 2:
                (a, at), (b, bt) = first.values()
                if a[1] != b[1]:
                    raise ConfigError(f"{bt}: tag {b!r} writes its prefix with {b[1]!r}, but {at} has {a!r} with "
                                      f"{a[1]!r}: write every tag one way (B-LOC or B_LOC).")
                raise ConfigError(f"{bt}: tag {b!r} writes its prefix as {b[:2]!r}, but {at} has {a!r} as {a[:2]!r}: "
                                  "write every tag one way (B-LOC or b-LOC).")


def _tag_error(tags: Sequence[str], k: int, scheme: str) -> str | None:
    "Why tags[k] breaks `scheme` given the tag before it (k == len(tags): the sentence's end), or None."
    prev_p, prev_t = _split(tags[k - 1]) if k else ('O', '')
    if k == len(tags):
        return (f"the sentence ends inside the entity {tags[k - 1]!r} (IOBES closes every entity with E- or S-)"
                if scheme == 'IOBES' and prev_p in ('B', 'I') else None)
    p, t = _split(tags[k])
    allowed = ('B', 'I', 'E', 'S') if scheme == 'IOBES' else ('B', 'I')
    if p not in (*allowed, 'O'): return f"tag {tags[k]!r} is not O or {'/'.join(c + '-' for c in allowed)}<type>"
    after = f"after {tags[k - 1]!r}" if k else 'at the start of the sentence'
    if scheme == 'IOB2' and p == 'I' and not (prev_p in ('B', 'I') and prev_t == t):
        hint = ' (if the file is IOB1, as the original CoNLL-2003 files are, pass scheme IOB1)' if prev_p == 'O' else ''
        return f"tag {tags[k]!r} {after}: in IOB2 an I- tag continues an entity of its type (B-{t} or I-{t} before it){hint}"
    if scheme == 'IOB1' and p == 'B' and not (prev_p in ('B', 'I') and prev_t == t):
        return f"tag {tags[k]!r} {after}: in IOB1 a B- tag only begins an entity right after another of its type"
    if scheme == 'IOBES':
        open_ = prev_p in ('B', 'I')
        if p in ('I', 'E') and not (open_ and prev_t == t):
            return f"tag {tags[k]!r} {after}: in IOBES an {p}- tag follows B-{t} or I-{t}"
        if p in ('B', 'S', 'O') and open_:
            return f"tag {tags[k]!r} {after}: in IOBES the entity {tags[k - 1]!r} must end with E- first"
    return None


def check_scheme(f: TaggedFile, scheme: str) -> None:
    "A `ConfigError` naming the file and line of the first tag of `f` that breaks `scheme` (one of `SCHEMES`)."
    if scheme not in SCHEMES: raise ConfigError(f"scheme: {scheme!r} is not one of {', '.join(SCHEMES)} or 'auto'.")
    if scheme == 'plain': return
    _one_way(f)
    for s in f.sentences:
        for k in range(len(s.tags) + 1):
            if (why := _tag_error(s.tags, k, scheme)) is not None:
                raise ConfigError(f"{f.where(s, min(k, len(s.tags) - 1))}: {why}.")


def check_known_tags(f: TaggedFile, known: Iterable[str], train_path: str) -> None:
    "A `ConfigError` naming the file and line of the first tag of `f` that the training file never has."
    known = set(known)
    for s in f.sentences:
        for k, t in enumerate(s.tags):
            if t not in known:
                raise ConfigError(f"{f.where(s, k)}: tag {t!r} never occurs in the training file {train_path}; "
                                  "the model could never predict it.")


@dataclass
class TaggingData:
    "The files of a tagging task, checked: `labels` are the training tags, sorted (as official `_get_label_mapping`)."
    scheme: str
    labels: list[str]
    splits: dict[str, TaggedFile]             # 'train' first, then the other splits given


def _check_sentences(f: TaggedFile, split: str) -> None:
    """A file of no sentence (empty, or blank and -DOCSTART- lines alone) refused, whatever its split: there is nothing
    to train on, seqeval cannot score an empty dev file, and a test file of nothing gives nothing to tag."""
    what = {'train': 'train on', 'test': 'tag'}.get(split, 'score')
    if not f.sentences: raise ConfigError(f"{f.path}: no sentences to {what}.")


def read_tagging_files(train: str | Path, scheme: str = 'auto', **others: str | Path) -> TaggingData:
    """The training file and the others (`dev=...`, `test=...`), read and checked: each file's tags follow `scheme`
    ('auto': detected from the training file) and every tag of the others occurs in the training file. A `test`
    file may have no tags (words only, see `read_conll`); the others must."""
    splits = {'train': read_tagged(train)}
    warn_case_twins(str(train), [t for s in splits['train'].sentences for t in s.tags], 'tags', 'word')
    if scheme == 'auto':
        scheme = detect_scheme(splits['train'])
        if scheme == 'plain': _warn_if_entities(splits['train'])
    for name, path in others.items():
        if path is not None: splits[name] = read_tagged(path, None if name == 'test' else True)
    for name, f in splits.items():
        _check_sentences(f, name)
        check_scheme(f, scheme)
        if name != 'train': check_known_tags(f, splits['train'].tags, str(train))
    return TaggingData(scheme, sorted(splits['train'].tags), splits)


# -- entity spans and scheme conversion


def entity_types(tag_lists: Iterable[Sequence[str]]) -> list[str]:
    "The entity types of prefixed tags (B-PER -> PER), sorted."
    return sorted({_split(t)[1] for tags in tag_lists for t in tags if _split(t)[0] in ('B', 'I', 'E', 'S')})

