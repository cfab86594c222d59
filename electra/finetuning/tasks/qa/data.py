"""Extractive question-answering data: the official SQuAD JSON (v1.1; v2.0 with `is_impossible` and
`plausible_answers`) and MRQA JSONL (a header line, then one context and its `qas` per line, answers located by
`detected_answers[*].char_spans`) read into `QAExample` records.

The official reader (google-research/electra, finetune/qa/qa_tasks.py, `QATask._add_examples`) keeps a training
question only when its first answer is found at its `answer_start`, and drops the rest with a log line. Here a bad
answer stops the read with a `ConfigError` naming the file and the question, unless `on_bad_answer` says otherwise:
'skip' drops the question (the official training behaviour), 'keep' keeps it as it is (for evaluation sets, where only
the answers' texts are scored, as the official evaluation scripts never look at offsets). Either says in one line how
many questions it skipped or kept, and which was the first; more than `MAX_BAD_SHARE` (10%) of a file's questions is
a broken file (offsets in bytes, answers of another context), not the rare answer the official reader cannot find
(about one in a thousand SQuAD training questions, odd characters), and stops the read.
"""
from __future__ import annotations

import gzip
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra.config.errors import ConfigError, RunWarning
from electra.config.text_files import load_json, read_text

__all__ = ['QAExample', 'is_official_whitespace', 'split_words', 'answer_found', 'squad_version', 'squad_json', 'read_squad', 'read_mrqa',
           'qa_format', 'gold_answers', 'BAD_ANSWER_MODES', 'MAX_BAD_SHARE']

BAD_ANSWER_MODES = ('error', 'skip', 'keep')


@dataclass(frozen=True)
class QAExample:
    """One question about one context. `answers`: (text, character offset in `context`) of each located answer;
    `answers[0]` is the one a training run learns (official: SQuAD `answers[0]`, MRQA `detected_answers[0]`'s first
    span). `gold_texts`: the strings the evaluation scores against (SQuAD: the answers' texts; MRQA: the question's
    `answers` list, which need not be spelt as in the context). An unanswerable SQuAD 2.0 question has no answers and
    `is_impossible`; its `plausible_answers` are kept for reference only."""
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...] = ()
    is_impossible: bool = False
    gold_texts: tuple[str, ...] = ()
    plausible_answers: tuple[tuple[str, int], ...] = ()


def is_official_whitespace(c: str) -> bool:
    "The official reader's whitespace (qa_tasks.py `is_whitespace`): space, tab, CR, LF and U+202F only."
    return c in ' \t\r\n' or ord(c) == 0x202F


def split_words(context: str) -> tuple[list[str], list[int]]:
    """The official whitespace split of a context into words, and each character's word: a whitespace character
    belongs to the word before it (-1 before the first word), as in `QATask._add_examples`."""
    words, char_to_word, prev_ws = [], [], True
    for c in context:
        if is_official_whitespace(c): prev_ws = True
        else:
            if prev_ws: words.append(c)
            else: words[-1] += c
            prev_ws = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def answer_found(context: str, text: str, start: int, split: tuple[list[str], list[int]] | None = None) -> bool:
    """Whether answer `text` is found at character `start` of `context`: exactly, or as the official reader checks it
    (the lower-cased words spanning the answer's characters contain the answer with its whitespace runs made single
    spaces). The exact test also accepts answers the official check misses, e.g. one holding a no-break space, which
    its word split keeps but the answer's `str.split` cleaning removes."""
    if not isinstance(text, str) or not text or isinstance(start, bool) or not isinstance(start, int): return False
    if start < 0 or start + len(text) > len(context): return False
    if context[start:start + len(text)] == text: return True
    words, char_to_word = split or split_words(context)
    first, last = char_to_word[start], char_to_word[start + len(text) - 1]
    if first < 0: return False
    return ' '.join(words[first:last + 1]).lower().find(' '.join(text.split()).lower()) != -1


# the fields each format's reader needs, as a missing one's message lists them (README, "Extractive QA")
FIELDS = {'squad': "the official SQuAD JSON's: {data: [{paragraphs: [{context, qas: [{id, question, answers: [{text, "
                   "answer_start}], is_impossible (2.0 only)}]}]}]}",
          'mrqa': "MRQA's JSONL: a line per context, {context, qas: [{qid, question, answers: [text, ...], "
                  "detected_answers: [{text, char_spans: [[start, end], ...]}]}]}"}


def _need(obj: Any, key: str, kind: type | tuple, path: Path, where: str, fmt: str = 'squad') -> Any:
    "obj[key], checked to be of `kind`; a missing or mistyped field stops the read naming file, place and the fields."
    if not isinstance(obj, dict) or key not in obj:
        raise ConfigError(f"{path}: {where}: the field {key!r} is missing. Give the fields of {FIELDS[fmt]}.")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{path}: {where}: the field {key!r} is {type(value).__name__}, expected "
                          f"{getattr(kind, '__name__', kind)}. Fix the file.")
    return value


MAX_BAD_SHARE = 0.1  # of a file's questions with a bad answer: more is a mistake in the file, not its rare quirks


@dataclass
class _AnswerCheck:
    """The answers of one file checked against their contexts, as `on_bad_answer` (`mode`) says; counts the questions
    checked and those with a bad answer, and keeps the first for the messages."""
    path: Path
    mode: str
    checked: int = 0
    bad: int = 0
    first: str = ''

    def keep(self, qid: str, context: str, answers: list[tuple[str, int]]) -> bool:
        "Whether to keep the question: a bad answer raises in mode 'error', drops it in 'skip', is kept in 'keep'."
        self.checked += 1
        split = split_words(context)
        for text, start in answers:
            if answer_found(context, text, start, split): continue
            got = context[start:start + len(text)] if start >= 0 else ''
            if self.mode == 'error':
                raise ConfigError(
                    f"{self.path}: question {qid!r}: the answer {text!r} is not found at its offset {start} (the context "
                    f"has {got!r} there). Fix its offset, or read with on_bad_answer='skip' to drop such questions (as "
                    "the official code drops them from training) or 'keep' for an evaluation set (only texts are scored).")
            self.bad += 1
            self.first = self.first or f"question {qid!r}: {text!r} expected at {start}, the context has {got!r} there"
            return self.mode == 'keep'
        return True

    def report(self) -> None:
        """One line on the questions with a bad answer, skipped or kept; more than `MAX_BAD_SHARE` of them is no longer
        the rare answer the official reader cannot find (SQuAD's few odd characters) but a broken file: refused."""
        if not self.bad: return
        what = f"{self.path}: {self.bad} of {self.checked} questions"
        if self.bad > MAX_BAD_SHARE * self.checked:
            raise ConfigError(f"{what} have an answer not found at its answer_start (first: {self.first}): more than "
                              f"{MAX_BAD_SHARE:.0%} is a mistake in the file (offsets counted in bytes rather than "
                              "characters, answers of another context), not the rare quirks the official reader skips. "
                              "Fix the offsets.")
        if self.mode == 'skip':
            warnings.warn(f"{what} skipped: an answer is not found at its answer_start (first: {self.first}), as the "
                          "official reader skips them from training.", RunWarning, stacklevel=3)
        else:
            warnings.warn(f"{what} have an answer not found at its answer_start (first: {self.first}); kept: only "
                          "answer texts are scored (the official evaluation never reads offsets).", RunWarning, stacklevel=3)


def _context(par: Any, path: Path, where: str, id_key: str) -> str:
    "A paragraph's context; an empty one stops the read naming its questions."
    context = _need(par, 'context', str, path, where, 'mrqa' if id_key == 'qid' else 'squad')
    if not split_words(context)[0]:
        qas = par.get('qas')
        ids = [qa.get(id_key) for qa in qas if isinstance(qa, dict)] if isinstance(qas, list) else []
        raise ConfigError(f"{path}: {where}: the context of questions {ids} is empty. Remove the paragraph or give "
                          "it its text.")
    return context


def _span_list(items: Any, path: Path, where: str, spans: str) -> list[tuple[str, int]]:
    "(text, start) of SQuAD answers (`spans` 'answer_start') or of MRQA detected answers (every char span)."
    if not isinstance(items, list): raise ConfigError(f"{path}: {where}: answers must be a list. Fix the file.")
    out, fmt = [], 'squad' if spans == 'answer_start' else 'mrqa'
    for a in items:
        text = _need(a, 'text', str, path, where, fmt)
        if spans == 'answer_start': out.append((text, _need(a, 'answer_start', int, path, where)))
        else:
            for s in _need(a, 'char_spans', list, path, where, fmt):
                if not (isinstance(s, list) and len(s) == 2 and all(isinstance(v, int) for v in s)):
                    raise ConfigError(f"{path}: {where}: a char span must be [start, end]. Fix the file.")
                out.append((text, s[0]))
    return out


def _squad_question(qa: Any, context: str, path: Path, where: str, v2: bool, labeled: bool,
                    check: _AnswerCheck) -> QAExample | None:
    "One SQuAD question; None when its answer is bad and `check` skips it."
    qid = _need(qa, 'id', str, path, where)
    where = f'question {qid!r}'
    question = _need(qa, 'question', str, path, where)
    if not labeled: return QAExample(qid, question, context)
    impossible = _need(qa, 'is_impossible', bool, path, where) if v2 else False
    answers = _span_list(_need(qa, 'answers', list, path, where), path, where, 'answer_start')
    plausible = _span_list(qa.get('plausible_answers', []), path, where, 'answer_start')
    if impossible and answers:
        raise ConfigError(f"{path}: {where}: is_impossible is true but it has answers. Empty its `answers` (keep "
                          "them as `plausible_answers`) or set is_impossible to false.")
    if not impossible and not answers:
        raise ConfigError(f"{path}: {where}: no answer. Give it one" + (", or set is_impossible to true."
                          if v2 else " (SQuAD 1.1 has no unanswerable questions; use the 2.0 format for those)."))
    if not check.keep(qid, context, answers): return None
    return QAExample(qid, question, context, tuple(answers), impossible, tuple(t for t, _ in answers), tuple(plausible))


def squad_version(data: dict, articles: list) -> tuple[bool, str]:
    """Whether a SQuAD file (`data`, its `data` list `articles`) is 2.0, and what says so: its `version` ('v2.0'), or,
    without one, questions that carry `is_impossible`; '' when nothing does (1.1)."""
    version = str(data.get('version', ''))
    if version: return version.lstrip('v').startswith('2'), f'version {version!r}'
    marked = any(isinstance(qa, dict) and 'is_impossible' in qa for a in articles if isinstance(a, dict)
                 for p in a.get('paragraphs', []) if isinstance(p, dict) for qa in p.get('qas', []))
    return marked, 'questions with is_impossible' if marked else ''


def _add(out: list[QAExample], seen: set[str], ex: QAExample | None, path: Path) -> None:
    "Appends `ex` (unless None: skipped); ids must be unique, as the prediction files are keyed by them."
    if ex is None: return
    if ex.id in seen:
        raise ConfigError(f"{path}: question {ex.id!r} appears twice. Ids must be unique: predictions.json is keyed "
                          "by them; rename one.")
    seen.add(ex.id)
    out.append(ex)


def _check_mode(on_bad_answer: str) -> None:
    if on_bad_answer not in BAD_ANSWER_MODES:
        raise ConfigError(f"on_bad_answer: {on_bad_answer!r} is not one of {', '.join(BAD_ANSWER_MODES)}.")


def squad_json(path: Path) -> Any:
    "A SQuAD file's JSON; a ConfigError naming it when it is not UTF-8 JSON text (a compressed one: how to unpack it)."
    return load_json(read_text(path), str(path))


def read_squad(path: str | Path, on_bad_answer: str = 'error', labeled: bool = True,
               v2: bool | None = None) -> list[QAExample]:
    """The questions of an official SQuAD JSON file, in file order. `v2` None: from the file's `version`.
    `labeled` False reads a file without answers (a test set). See the module doc for `on_bad_answer`."""
    path = Path(path)
    _check_mode(on_bad_answer)
    check = _AnswerCheck(path, on_bad_answer)
    data = squad_json(path)
    articles = _need(data, 'data', list, path, 'top level')
    v2 = squad_version(data, articles)[0] if v2 is None else v2
    out, seen = [], set()
    for a, art in enumerate(articles):
        for p, par in enumerate(_need(art, 'paragraphs', list, path, f'article {a}')):
            where = f'article {a}, paragraph {p}'
            context = _context(par, path, where, 'id')
            for q, qa in enumerate(_need(par, 'qas', list, path, where)):
                _add(out, seen, _squad_question(qa, context, path, f'{where}, question {q}', v2, labeled, check), path)
    check.report()
    return out


def _jsonl_lines(path: Path) -> Iterator[tuple[int, Any]]:
    "(line number from 1, parsed object) of a JSONL file, plain or gzipped (by content); blank lines are skipped."
    opener = gzip.open if _gzipped(path) else open
    try:
        with opener(path, 'rt', encoding='utf-8') as f:
            for n, line in enumerate(f, 1):
                if not line.strip(): continue
                yield n, load_json(line, f'{path}: line {n}')
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise ConfigError(f"{path}: cannot read it as MRQA JSONL ({e}). Give the official .jsonl(.gz) file.") from e


def _mrqa_question(qa: Any, context: str, path: Path, where: str, labeled: bool,
                   check: _AnswerCheck) -> QAExample | None:
    qid = _need(qa, 'qid', str, path, where, 'mrqa')
    where = f'{where}, question {qid!r}'
    question = _need(qa, 'question', str, path, where, 'mrqa')
    if not labeled: return QAExample(qid, question, context)
    detected = _span_list(_need(qa, 'detected_answers', list, path, where, 'mrqa'), path, where, 'char_spans')
    gold = _need(qa, 'answers', list, path, where, 'mrqa')
    if not detected or not gold or not all(isinstance(t, str) for t in gold):
        raise ConfigError(f"{path}: {where}: needs at least one detected answer and a list of answer strings. "
                          "MRQA has no unanswerable questions; remove it or give its answers.")
    if not check.keep(qid, context, detected): return None
    return QAExample(qid, question, context, tuple(detected), False, tuple(gold))


def read_mrqa(path: str | Path, on_bad_answer: str = 'error', labeled: bool = True) -> list[QAExample]:
    """The questions of an MRQA JSONL file (.jsonl or .jsonl.gz; NewsQA, TriviaQA, ...), in file order. A line with
    a `header` is skipped, as the official reader does. Ids are the questions' `qid`s (official: MRQA predictions are
    keyed by `qid`)."""
    path, out, seen = Path(path), [], set()
    _check_mode(on_bad_answer)
    check = _AnswerCheck(path, on_bad_answer)
    for n, par in _jsonl_lines(path):
        if isinstance(par, dict) and 'header' in par: continue
        context = _context(par, path, f'line {n}', 'qid')
        for qa in _need(par, 'qas', list, path, f'line {n}', 'mrqa'):
            _add(out, seen, _mrqa_question(qa, context, path, f'line {n}', labeled, check), path)
    check.report()
    return out


def _gzipped(path: Path) -> bool:
    "Whether a file is gzip-compressed, by its first bytes, whatever its name."
    try:
        with open(path, 'rb') as f: return f.read(2) == b'\x1f\x8b'
    except OSError: return False


def qa_format(path: Path) -> str | None:
    """'squad' or 'mrqa': what a QA file holds, by its first bytes (unpacked if gzip), whatever its name: a JSON object
    whose first key is SQuAD's (`data`, `version`) is the official SQuAD JSON, any other MRQA's JSON lines (a
    `header`, a `context`); None when it opens no JSON object (the readers say what is wrong)."""
    try:
        with (gzip.open if _gzipped(path) else open)(path, 'rb') as f: head = f.read(4096)
    except (OSError, EOFError): return None
    first = re.match(rb'\s*\{\s*"([^"]*)"', head.removeprefix(b'\xef\xbb\xbf'))
    if first is None: return None
    return 'squad' if first.group(1) in (b'data', b'version') else 'mrqa'


def gold_answers(examples: list[QAExample]) -> dict[str, list[str]]:
    "Each question's gold answer strings by id, for the evaluation (empty for an unanswerable question)."
    return {ex.id: list(ex.gold_texts) for ex in examples}
