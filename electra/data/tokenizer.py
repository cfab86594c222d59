"""The WordPiece tokenizer: load one (a BERT `vocab.txt` or an HF tokenizer directory) or train one on the corpus.

A tokenizer is also stored inside checkpoints as a dict of its saved files (`tokenizer_state`), so a
checkpoint always carries the exact vocabulary it was trained with.

Special-token ids differ between vocabularies (a trained one has [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3,
[MASK]=4; BERT's `vocab.txt` has [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103): always read them
off the tokenizer.
"""
from __future__ import annotations

import collections
import copy
import hashlib
import json
import logging
import os
import shutil
import tempfile
import unicodedata
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from tokenizers import BertWordPieceTokenizer, pre_tokenizers
from tokenizers.models import WordPiece
from tokenizers.processors import TemplateProcessing
from transformers import AutoTokenizer, ElectraTokenizerFast, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from electra.config.errors import ConfigError, RunWarning
from electra.config.text_files import compressed, read_text, split_lines
from electra.data.corpus import CorpusSource, skipped_in_words, source_lines

__all__ = ['TOKENIZER_DIR', 'DROPPED', 'UNKNOWN_SHARE', 'UNKNOWN_SAMPLE', 'no_word_piece', 'SPECIAL_TOKENS', 'CaseSetting', 'LOWERCASE_KEY', 'FOLDER_SETTING', 'capitals_unknown', 'check_case', 'unreachable',
           'upper_entries', 'applied_case', 'vocab_entries', 'SavedTokenizer', 'load_tokenizer', 'train_tokenizer',
           'get_tokenizer', 'trained_tokenizer', 'tokenizer_state', 'tokenizer_from_state', 'tokenizer_fingerprint', 'first_difference',
           'vocabulary_mismatch', 'tokenizer_identity', 'tokenizer_difference', 'pad_token_id',
           'RUN_INPUTS', 'run_encoding', 'save_exported_tokenizer']

TOKENIZER_DIR = 'tokenizer'  # in a pretraining run's folder: the tokenizer trained for it

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
_TRAIN_MARKER = 'electra_tokenizer.json'  # settings of a tokenizer trained by `get_tokenizer`
_ALPHABET_LIMIT = 1000  # the `tokenizers` default: rarer characters become [UNK]
_UNCOVERED = 1e-4       # the share of a corpus's characters left to [UNK] when more than the 1000 are needed
# the longest word WordPiece reads, longer ones being one [UNK]: the official 200 (google-research/electra
# model/tokenization.py `WordpieceTokenizer.__init__`, max_input_chars_per_word=200); `tokenizers` builds WordPiece
# with 100, and transformers 5 rebuilds it with 100 from a tokenizer.json whatever the file says
OFFICIAL_WORD_CHARS = 200


def _official_word_length(tok: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    "`tok`, its WordPiece model (if it has one) reading words of up to `OFFICIAL_WORD_CHARS` characters."
    backend = getattr(tok, 'backend_tokenizer', None)  # None: a slow (Python) tokenizer
    if backend is not None and isinstance(backend.model, WordPiece):
        backend.model.max_input_chars_per_word = OFFICIAL_WORD_CHARS
    return tok


def _check_special_tokens(tok: PreTrainedTokenizerFast, where: str) -> PreTrainedTokenizerFast:
    "The model needs [CLS], [SEP], [MASK] and [PAD] as distinct tokens of the vocabulary."
    vocab = tok.get_vocab()
    names = ['cls_token', 'sep_token', 'mask_token', 'pad_token']
    missing = [n for n in names if getattr(tok, n) is None or getattr(tok, n) not in vocab]
    if missing:
        raise ConfigError(f"tokenizer {where} has no {', '.join(missing)}. ELECTRA needs [CLS], [SEP], [MASK] and "
                          "[PAD]: use a BERT-style WordPiece vocabulary, or leave `tokenizer` empty to train one.")
    ids = [vocab[getattr(tok, n)] for n in names]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"tokenizer {where}: {', '.join(names)} must be distinct tokens, got ids {ids}.")
    if not set(vocab) - set(tok.all_special_tokens):  # no word: the corpus all [UNK], a detector with nothing to see
        specials = sorted(vocab, key=vocab.get)
        raise ConfigError(f"tokenizer {where}: its vocabulary holds its {len(specials)} special tokens alone "
                          f"({', '.join(specials)}): every word would be [UNK]. Give a vocabulary of words, or leave "
                          "`tokenizer` empty to train one.")
    return tok


@dataclass(frozen=True)
class CaseSetting:
    """How a reader's setting of lower-casing is named in the refusals of `check_case`: its state on and off, each fix;
    and, where a key sets it, its stripping of accents on and the fix that keeps them (`_say_stripped_entries`)."""
    on: str
    off: str
    to_off: str
    to_on: str
    strips: str = ''
    to_keep_accents: str = ''


# a vocab.txt has no setting of its own: the job's `lowercase` key lower-cases its input or not
LOWERCASE_KEY = CaseSetting('lowercase is true (the text is lower-cased first)', 'lowercase is false',
                            'give --lowercase false', 'give --lowercase true', 'strip_accents: true',
                            'give --strip_accents false')


# a save_pretrained folder follows its own saved setting, do_lower_case of its tokenizer_config.json (a cased
# tokenizer trained on text without capitals is one: only its upper-case entries that no input reaches are refused)
FOLDER_SETTING = CaseSetting('its tokenizer_config.json lower-cases the text (do_lower_case: true)', '',
                             'set do_lower_case to false there', '')


# what a normalizer does to its input, tried on one letter each: the keys `lowercase` and `strip_accents`
_PROBES = {'lowercase': ('A', 'a'), 'strip_accents': ('\u00e9', 'e')}


def applied_case(tok) -> dict[str, bool]:
    """What `tok` does to its input, whatever its config says, as the keys `lowercase` and `strip_accents`: whether its
    normalizer lower-cases ('A' becomes 'a') and strips accents ('é' becomes 'e'); {} for a slow tokenizer (no
    normalizer to try)."""
    backend = getattr(tok, 'backend_tokenizer', None)
    if backend is None: return {}
    norm = backend.normalizer
    return {key: norm is not None and norm.normalize_str(given) == made for key, (given, made) in _PROBES.items()}


def _lowers(tok: PreTrainedTokenizerFast) -> bool:
    "Whether `tok` lower-cases its input: what its normalizer does, whatever its config says."
    return applied_case(tok).get('lowercase', False)


def _entries(tok: PreTrainedTokenizerFast) -> list[str]:
    "The vocabulary's entries by id, special tokens (`[CLS]`, `[unused0]`) aside."
    return [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
            if t not in tok.all_special_tokens and not (t.startswith('[') and t.endswith(']'))]


def upper_entries(upper: list[str]) -> str:
    "'3 upper-case entries ('The', 'Paris', 'I')', for a message."
    return (f"{len(upper)} upper-case entr{'y' if len(upper) == 1 else 'ies'} "
            f"({', '.join(repr(t) for t in upper[:3])}{', ...' if len(upper) > 3 else ''})")


def unreachable(tok: PreTrainedTokenizerFast) -> list[str]:
    "The upper-case entries of `tok`'s vocabulary that no input reaches, as it lower-cases its input."
    return [t for t in _entries(tok) if t != t.lower()] if _lowers(tok) else []


def capitals_unknown(tok: PreTrainedTokenizerFast) -> bool:
    """Whether `tok` keeps case on a vocabulary of letters that have case and no upper-case entry (an uncased one): a
    word with a capital letter is then [UNK]."""
    entries = _entries(tok)
    return not _lowers(tok) and not any(t != t.lower() for t in entries) and \
        any(c.lower() != c.upper() for t in entries for c in t)


def check_case(tok: PreTrainedTokenizerFast, where: str, setting: CaseSetting) -> PreTrainedTokenizerFast:
    """`tok`, unless its lower-casing and its vocabulary disagree (a cased BERT vocab.txt read uncased by default left
    'The' and 'Paris' unreachable, silently): upper-case entries that no input reaches, or, where `setting.to_on`,
    a vocabulary with letters of a cased script and none upper case read without lower-casing (a capital: [UNK]).
    Special tokens (`[CLS]`, `[unused0]`) aside. A ConfigError naming `where` and the setting's fix."""
    lowers, entries = _lowers(tok), _entries(tok)
    upper = [t for t in entries if t != t.lower()]
    if lowers and upper:
        raise ConfigError(f"{where}: the vocabulary holds {upper_entries(upper)}, which no input reaches while "
                          f"{setting.on}. For a cased vocabulary {setting.to_off}.")
    if setting.to_on and capitals_unknown(tok):
        raise ConfigError(f"{where}: no entry of the vocabulary is upper case (an uncased vocabulary), but "
                          f"{setting.off}: a word with a capital letter would be [UNK]. For an uncased vocabulary "
                          f"{setting.to_on}.")
    return tok


def _say_stripped_entries(tok: PreTrainedTokenizerFast, where: str, setting: CaseSetting) -> None:
    """One warning line when `tok` strips accents (BERT's `_run_strip_accents`: NFD, then the marks dropped) and its
    vocabulary holds entries with them, which no input then reaches (a vocab.txt built on text with accents). A
    warning, not a refusal: a released vocabulary may hold a few such entries."""
    if not setting.strips or not applied_case(tok).get('strip_accents'): return
    marked = [t for t in _entries(tok) if any(unicodedata.category(c) == 'Mn' for c in unicodedata.normalize('NFD', t))]
    if marked:
        warnings.warn(f"{where}: {len(marked)} entr{'y' if len(marked) == 1 else 'ies'} of the vocabulary hold accents "
                      f"({', '.join(map(repr, marked[:3]))}{', ...' if len(marked) > 3 else ''}), which no input "
                      f"reaches while accents are stripped ({setting.strips}). For a vocabulary with accents "
                      f"{setting.to_keep_accents}.", RunWarning, stacklevel=3)


def _json_object(text: str) -> bool:
    "Whether `text` is a JSON object (a tokenizer.json), not lines of tokens (of which `{` may be one)."
    if not text.lstrip().startswith('{'): return False
    try: return isinstance(json.loads(text), dict)
    except ValueError: return False


_BOM = '\ufeff'
_REPEATED_FIX = 'Remove the repeated line, or give the vocab.txt the model was trained with.'


def _vocab_text(path: Path, where: str) -> str:
    "The file's text as it is (a byte-order mark kept, for `vocab_entries` to judge); not UTF-8: `read_text`'s line."
    try: return path.read_bytes().decode('utf-8')
    except OSError as e: raise ConfigError(f"{where}: cannot read it ({e.strerror}).") from None
    except UnicodeDecodeError:
        read_text(path)  # raises the one line naming the file and the line of the first byte that is not UTF-8
        raise


def vocab_entries(path: Path, where: str, fix: str = _REPEATED_FIX, bom: bool = True) -> list[str]:
    """The entries of the WordPiece vocabulary file `path`, line i being id i (the official tokenization.py
    `load_vocab`), its lines ending as transformers' `load_vocab` reads them (at \\n, \\r\\n or \\r). A byte-order mark
    (Windows editors write one) is dropped where `bom`, else refused (a folder's file, which transformers reads as it
    is: '\\ufeff[PAD]'). A repeated line is refused, naming `where` and `fix`: transformers keeps its last line, so
    the first line's id has no token, and the last's lies past a table sized to the vocabulary. Lines are compared as
    transformers reads them, their trailing whitespace dropped ('the ' is 'the')."""
    text = _vocab_text(path, where)
    if text.startswith(_BOM) and not bom:
        raise ConfigError(f"{where}: it starts with a byte-order mark (U+FEFF), which transformers reads as part of "
                          f"its first token ({text[:8].splitlines()[0]!r}): save it as UTF-8 without a byte-order "
                          "mark.")
    lines = split_lines(text.removeprefix(_BOM))
    if lines[-1] == '': lines.pop()  # the last line's end
    first = {}
    for i, line in enumerate(lines):
        if (j := first.setdefault(token := line.rstrip(), i)) != i:
            differ = [w for w in (lines[j], line) if w != token]
            written = f" (written {differ[0]!r}: transformers drops a line's trailing spaces)" if differ else ''
            raise ConfigError(f"{where}: line {i + 1} repeats the token {token!r} of line {j + 1}{written}: each line "
                              f"is one id, so id {j} would have no token. {fix}")
    return lines


def _load_vocab_txt(path: Path, lowercase: bool, strip_accents: bool | None) -> PreTrainedTokenizerFast:
    "An ElectraTokenizerFast from a WordPiece vocabulary file of any name (`strip_accents` None: BERT's rule)."
    if packed := compressed(path): raise ConfigError(f"tokenizer {path} {packed}.")
    if _json_object(_vocab_text(path, f'tokenizer {path}')):  # by content, whatever its name
        raise ConfigError(f"tokenizer {path}: it holds JSON (a tokenizer.json), not a WordPiece vocab.txt (a token a "
                          f"line): give the folder that holds it with its tokenizer_config.json ({path.parent}), or a "
                          "vocab.txt.")
    lines = vocab_entries(path, f'tokenizer {path}')
    missing = [t for t in ['[CLS]', '[SEP]', '[MASK]', '[PAD]'] if t not in lines]
    if missing:
        # transformers would silently add them as extra tokens, out of range of a model sized to the vocab
        raise ConfigError(f"tokenizer {path}: the vocabulary has no {', '.join(missing)} line. ELECTRA needs "
                          "[CLS], [SEP], [MASK] and [PAD]: use a BERT-style vocab.txt.")
    # Loading the directory form is the one spelling transformers 4 and 5 both accept (5 ignores `vocab_file=`); the
    # entries as read above (no byte-order mark, no \r), one a line
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / 'vocab.txt').write_text(''.join(t + '\n' for t in lines), encoding='utf-8')
        tok = ElectraTokenizerFast.from_pretrained(tmp, do_lower_case=lowercase, strip_accents=strip_accents)
        return _official_word_length(tok)


class SavedTokenizer:
    """AutoTokenizer as the library reads a saved tokenizer (a `save_pretrained` folder, a hub name, a checkpoint's
    state), its WordPiece reading the official word length (`OFFICIAL_WORD_CHARS`); a folder whose tokenizer is its
    vocab.txt alone, which transformers reads as it is, is checked as `vocab_entries` checks a vocab.txt, a byte-order
    mark refused."""
    @staticmethod
    def from_pretrained(name: str | Path, **kwargs) -> PreTrainedTokenizerBase:
        vocab = Path(name) / 'vocab.txt'
        if vocab.is_file() and not (Path(name) / 'tokenizer.json').is_file():
            vocab_entries(vocab, f'tokenizer {vocab}', bom=False)
        return _official_word_length(AutoTokenizer.from_pretrained(name, **kwargs))


TOKENIZER_FILES = ('tokenizer.json', 'vocab.txt')  # what a save_pretrained directory needs, either one


def has_tokenizer_files(directory: Path) -> bool:
    return any((directory / name).is_file() for name in TOKENIZER_FILES)


def load_tokenizer(path: str, lowercase: bool = True, setting: CaseSetting = LOWERCASE_KEY,
                   strip_accents: bool | None = None) -> PreTrainedTokenizerFast:
    """Load a WordPiece `vocab.txt` (lowercasing input when `lowercase`, the key `setting` names; stripping accents
    when `strip_accents`, None: BERT's rule, stripped with lowercasing, google-research/bert tokenization.py) or a
    directory written by `save_pretrained` (its own settings apply). Raises `ConfigError` when it is missing or
    unusable, or when its lower-casing and its vocabulary disagree (`check_case`)."""
    p = Path(path).expanduser()
    if p.is_file():
        tok = check_case(_load_vocab_txt(p, lowercase, strip_accents), f'tokenizer {p}', setting)
        _say_stripped_entries(tok, f'tokenizer {p}', setting)
    elif p.is_dir():
        if not has_tokenizer_files(p):
            found = sorted(f.name for f in p.iterdir())[:8]
            raise ConfigError(f"tokenizer {p}: the directory holds no tokenizer files: neither tokenizer.json nor "
                              f"vocab.txt (it holds: {', '.join(found) or 'nothing'}). Give a directory written by "
                              "save_pretrained, a WordPiece vocab.txt, or leave `tokenizer` empty to train one.")
        try: tok = SavedTokenizer.from_pretrained(str(p))
        except ConfigError: raise
        except Exception as e:  # transformers raises many kinds (OSError, ValueError, KeyError on a bad json...)
            raise ConfigError(f"tokenizer {p}: not a loadable tokenizer directory ({type(e).__name__}: {e}). Give a "
                              "directory written by save_pretrained, a WordPiece vocab.txt, or leave `tokenizer` "
                              "empty to train one.") from e
        if not isinstance(tok, PreTrainedTokenizerFast):
            raise ConfigError(f"tokenizer {p}: loads as {type(tok).__name__}, a slow tokenizer; a fast "
                              "(`tokenizers`-backed) one is needed. Add its tokenizer.json to the directory.")
        check_case(tok, f'tokenizer {p}', FOLDER_SETTING)
        if capitals_unknown(tok):  # said, not refused: a run on lower-cased text may mean it
            warnings.warn(f"tokenizer {p}: its tokenizer_config.json keeps case (do_lower_case: false), but no entry "
                          "of its vocabulary is upper case: a word with a capital letter is [UNK]. For an uncased "
                          "vocabulary set do_lower_case to true there.", RunWarning, stacklevel=2)
    else:
        raise ConfigError(f"tokenizer {p} does not exist. Give a WordPiece vocab.txt or a tokenizer directory, "
                          "or leave `tokenizer` empty to train one on the corpus.")
    return _check_special_tokens(tok, str(p))


def _alphabet(lines: Iterable[str], normalizer, vocab_size: int) -> list[str]:
    """The characters the trainer keeps, the rest becoming [UNK]: the most frequent after normalisation (ties broken by
    the character), at least the `tokenizers` default 1000, more while they are needed to cover all but a ten-thousandth
    of the text (a script of thousands of characters: Chinese, Japanese kanji), up to a quarter of the vocabulary."""
    counts = collections.Counter()
    for line in lines: counts.update(normalizer.normalize_str(line))
    chars = sorted((c for c in counts if not c.isspace()), key=lambda c: (-counts[c], c))
    total, covered, needed = sum(counts[c] for c in chars), 0, 0
    while needed < len(chars) and covered < total * (1 - _UNCOVERED):
        covered, needed = covered + counts[chars[needed]], needed + 1
    return sorted(chars[:min(max(needed, _ALPHABET_LIMIT), max(vocab_size // 4, _ALPHABET_LIMIT))])


def _continuations(alphabet: list[str], normalizer) -> list[str]:
    "'##c' for each character that can continue a word: not the ideographs BERT's normalizer makes words of their own."
    return ['##' + c for c in alphabet if normalizer.normalize_str(c) == c]


def train_tokenizer(files: list[Path], vocab_size: int, lowercase: bool, save_dir: Path,
                    sources: Optional[list[CorpusSource]] = None, strip_accents: bool = False) -> PreTrainedTokenizerFast:
    """Train a BERT WordPiece vocabulary on `files` (or on every corpus of `sources`, tables included), save it
    to `save_dir` with `save_pretrained` and return it. Lines the pretraining build skips as unreadable (not
    UTF-8, over 1 MiB) are skipped here too.

    `lowercase` folds case; combining marks are kept unless `strip_accents`. BERT's uncased rule strips them with
    lowercasing (google-research/bert tokenization.py `_run_strip_accents`: NFD, category Mn dropped): harmless for
    English, but in other scripts the marks are letters, vowels or voicing (Devanagari vowel signs and virama,
    Japanese dakuten, Arabic hamza) and stripping them merges words (かがみ and かかみ). Stripping Latin accents alone
    would need a normalizer of our own, which transformers' tokenizer drops when the export is loaded with
    AutoTokenizer (it rebuilds its normalizer from these flags). A vocab.txt given as `tokenizer` keeps BERT's rule.

    The result is deterministic. The `tokenizers` trainer alone is not (a known behaviour of its trainer):
    it gives the '##x' continuation tokens ids in hash-map order, and those ids break ties between merges of
    equal count. Listing every '##x' that can occur up front (as special tokens, so they get ids in a fixed
    order) and fixing the alphabet ourselves removes all hash-order dependence; the vocabulary is then re-read
    from vocab.txt so those tokens end up as ordinary entries.
    """
    sources = sources or [CorpusSource(', '.join(map(str, files)), 'files', [Path(f) for f in files])]
    wp = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=strip_accents)
    skipped = collections.Counter()
    alphabet = _alphabet(source_lines(sources, skipped), wp.normalizer, vocab_size)
    if not alphabet:
        said = ', '.join(skipped_in_words(skipped))  # why a corpus can look empty
        raise ConfigError(f"no text to train a tokenizer on in {', '.join(s.entry for s in sources)}"
                          f"{f' (skipped {said})' if said else ''}. Give a corpus with readable lines of text, or a "
                          "`tokenizer`.")
    # from an iterator rather than the files: the same vocabulary, but a bad line is skipped instead of fatal
    wp.train_from_iterator(source_lines(sources), vocab_size=vocab_size, min_frequency=2, show_progress=False,
                           limit_alphabet=len(alphabet), initial_alphabet=alphabet,
                           special_tokens=SPECIAL_TOKENS + _continuations(alphabet, wp.normalizer))
    vocab = sorted(wp.get_vocab().items(), key=lambda kv: kv[1])
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / 'vocab.txt').write_text(''.join(w + '\n' for w, _ in vocab), encoding='utf-8')
        tok = _official_word_length(ElectraTokenizerFast.from_pretrained(tmp, do_lower_case=lowercase,
                                                                         strip_accents=strip_accents))
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(save_dir))
    return tok


def _settings_change(then: dict, now: dict) -> str:
    "What differs between the settings a tokenizer was trained with (`then`) and those of now, key by key."
    said = []
    for key in dict.fromkeys([*then, *now]):
        if then.get(key) == now.get(key): continue
        if key == 'files' and isinstance(then.get(key), list) and isinstance(now.get(key), list):
            added, gone = [f for f in now[key] if f not in then[key]], [f for f in then[key] if f not in now[key]]
            parts = [f"{', '.join(names)} {what} since" for names, what in ((added, 'added'), (gone, 'gone')) if names]
            said.append(f"files: {'; '.join(parts) or 'reordered'}")
        else: said.append(f'{key}: {then.get(key)} then, {now.get(key)} now')
    return '; '.join(said)


def get_tokenizer(tokenizer: str, files: list[Path], vocab_size: int, lowercase: bool, run_dir: Path,
                  sources: Optional[list[CorpusSource]] = None,
                  strip_accents: bool | None = None) -> PreTrainedTokenizerFast:
    """The run's tokenizer: `tokenizer` when given (a vocab.txt read with `lowercase` and `strip_accents`, None:
    BERT's rule; a trained one strips with `strip_accents` true only); else the one trained earlier in
    `run_dir/tokenizer` (kept so a resumed run tokenizes exactly as before); else train one on `files` (or on
    `sources`, which may include tables) and save it there."""
    if tokenizer: return load_tokenizer(tokenizer, lowercase, strip_accents=strip_accents)
    strip_accents = bool(strip_accents)
    save_dir = Path(run_dir) / TOKENIZER_DIR
    settings = {'files': [str(Path(f).resolve()) for f in files], 'vocab_size': vocab_size, 'lowercase': lowercase,
                'strip_accents': strip_accents}
    if sources and any(s.kind == 'table' for s in sources): settings['corpus'] = [s.entry for s in sources]
    marker = save_dir / _TRAIN_MARKER
    if marker.is_file():
        if (then := json.loads(marker.read_text())) != settings:
            log.warning(f"reusing the tokenizer in {save_dir}, trained with other settings than now "
                        f"({_settings_change(then, settings)}); delete that directory to train a new one.")
        return load_tokenizer(str(save_dir))
    # train into a temporary directory and move it into place, so an interrupted run leaves no half tokenizer
    tmp = save_dir.with_name(f'.{save_dir.name}.{os.getpid()}.tmp')
    shutil.rmtree(tmp, ignore_errors=True)
    tok = train_tokenizer(files, vocab_size, lowercase, tmp, sources, strip_accents)
    (tmp / _TRAIN_MARKER).write_text(json.dumps(settings, indent=1))
    shutil.rmtree(save_dir, ignore_errors=True)  # a directory without marker is an interrupted attempt
    os.replace(tmp, save_dir)
    log.info(f"trained a WordPiece tokenizer of {len(tok)} tokens on {len(files)} file(s); saved to {save_dir}")
    return tok


def trained_tokenizer(run_dir: str | Path) -> PreTrainedTokenizerFast | None:
    "The tokenizer `get_tokenizer` trained for the run in `run_dir` (which a resumed run reuses), None before it is."
    save_dir = Path(run_dir) / TOKENIZER_DIR
    return load_tokenizer(str(save_dir)) if (save_dir / _TRAIN_MARKER).is_file() else None


def tokenizer_state(tok: PreTrainedTokenizerFast) -> dict[str, str]:
    "The files `save_pretrained` writes, as {filename: text}, for storing the tokenizer inside a checkpoint."
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        return {p.name: p.read_text(encoding='utf-8') for p in sorted(Path(tmp).iterdir()) if p.is_file()}


def tokenizer_from_state(state: dict[str, str]) -> PreTrainedTokenizerFast:
    "The tokenizer saved by `tokenizer_state`."
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in state.items(): (Path(tmp) / name).write_text(text, encoding='utf-8')
        return SavedTokenizer.from_pretrained(tmp)


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of a tokenizer's whole definition (vocabulary, normalizer, special tokens), without the call-time
    truncation and padding settings: the key of every cache built with it."""
    backend = getattr(tokenizer, 'backend_tokenizer', None)  # None: a slow (Python) tokenizer
    if backend is None: text = json.dumps(sorted(tokenizer.get_vocab().items()))
    else:
        spec = json.loads(backend.to_str())
        for key in ('truncation', 'padding'): spec.pop(key, None)
        text = json.dumps(spec, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def first_difference(theirs: dict[str, int], ours: dict[str, int]) -> str:
    "The first token (in sorted order) whose id differs between two vocabularies, ours searched first."
    return next((t for t in sorted(ours) if theirs.get(t) != ours[t]), None) or \
        next(t for t in sorted(theirs) if theirs[t] != ours.get(t))


def vocabulary_mismatch(theirs: PreTrainedTokenizerBase, ours: PreTrainedTokenizerBase, whose: str) -> str | None:
    """None where two tokenizers give every token the same id; else, for a refusal, "(N tokens) is not `whose` (M
    tokens; 'x' is i there, j here)", naming the first token that differs (`first_difference`)."""
    theirs, ours = theirs.get_vocab(), ours.get_vocab()
    if theirs == ours: return None
    diff = first_difference(theirs, ours)
    return (f"({len(theirs)} tokens) is not {whose} ({len(ours)} tokens; {diff!r} is {theirs.get(diff)} there, "
            f"{ours.get(diff)} here)")


_SPECIAL = ('cls_token', 'sep_token', 'pad_token', 'mask_token', 'unk_token')
# what a tokenizer does to its input (`applied_case`), as a refusal says it: (done, not done)
_DOES = {'lowercase': ('lower-cases its input', 'keeps its case'), 'strip_accents': ('strips accents', 'keeps accents')}


def tokenizer_identity(tokenizer) -> str:
    """What a model's ids mean, by content, as 16 hex digits: its tokenizer's tokens by id, the ids of its special
    tokens and what it does to its input (`applied_case`). One vocabulary however it was read (its folder, a
    checkpoint's state, transformers' AutoTokenizer, whose WordPiece reads words of 100 characters where the library's
    readers take the official 200): whether a tokenizer is a model's own (`tokenizer_difference`), and what a
    fine-tuning run records of the one it read (`finetuning.inputs`)."""
    spec = {'vocab': sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0])),
            'special': {n: getattr(tokenizer, f'{n}_id', None) for n in _SPECIAL}, 'case': applied_case(tokenizer)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def tokenizer_difference(theirs: PreTrainedTokenizerBase, ours: PreTrainedTokenizerBase, whose: str) -> str | None:
    """None where two tokenizers are one (`tokenizer_identity`); else, for a refusal, what `theirs` does otherwise
    than `whose` (`ours`, e.g. "the model's tokenizer"): its vocabulary (`vocabulary_mismatch`), what it does to its
    input, or the id of a special token."""
    if tokenizer_identity(theirs) == tokenizer_identity(ours): return None
    if differs := vocabulary_mismatch(theirs, ours, f'that of {whose}'): return f'its vocabulary {differs}'
    case, own = applied_case(theirs), applied_case(ours)
    for key, (done, kept) in _DOES.items():
        if case.get(key, False) != own.get(key, False):
            return f"it {done if case.get(key) else kept}, where {whose} {done if own.get(key) else kept}"
    name = next(n for n in _SPECIAL if getattr(theirs, f'{n}_id', None) != getattr(ours, f'{n}_id', None))
    return (f"its {name} is {getattr(theirs, name, None)!r} (id {getattr(theirs, f'{name}_id', None)}), that of "
            f"{whose} {getattr(ours, name, None)!r} (id {getattr(ours, f'{name}_id', None)})")


UNKNOWN_SHARE = 0.05  # a corpus or a fine-tuning split of more [UNK] tokens than this is said
UNKNOWN_SAMPLE = 2000  # the examples or texts counted for it, evenly spread (the same each time)

# what a text of no word piece is, as refusals of one say it
DROPPED = 'empty, spaces, or only characters such as U+200B that the tokenizer drops'


def no_word_piece(tokenizer, *texts: str) -> bool:
    """True when no text of `texts` gives `tokenizer` a token (the model would see its special tokens alone); the
    tokenizer decides, not `str.strip`, which keeps U+200B."""
    return not any(tokenizer(list(texts), add_special_tokens=False, verbose=False)['input_ids'])


def pad_token_id(tokenizer) -> int:
    "The id batches are padded with: the tokenizer's [PAD], or 0 (BERT's [PAD]) for a tokenizer without one."
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


# what a run feeds its model, as transformers' Auto classes and pipelines read them off tokenizer_config.json
# (`model_input_names`; `TokenizersBackend`, the class of a tokenizer.json of its own, has no token_type_ids)
RUN_INPUTS = ['input_ids', 'token_type_ids', 'attention_mask']
_PROBE_PAIR = ('A first text, to probe the encoding.', 'And a second one')
_AS_SAVED = 'TokenizersBackend'  # transformers' class that reads a tokenizer.json as it is, rebuilding nothing


def run_encoding(tok: PreTrainedTokenizerBase, a: str, b: str | None = None,
                 words: bool = False) -> dict[str, list[int]]:
    """The run's featurisation of the text `a` (and `b`), uncut: `[CLS] A [SEP] (B [SEP])` of `tok`'s own [CLS] and
    [SEP], token type 0 up to the first [SEP] and 1 after (the official `featurize`, google-research/electra
    finetune/classification/classification_tasks.py; pretraining's `ExampleBuilder`), whatever `tok`'s own
    post-processor adds. `words`: a tagging run's ids of the sentence `a`, its words (split at spaces) cut into pieces
    each on its own (`tasks/tagging/encoding.py` `word_pieces`, as the official `tokenize_and_align`)."""
    def ids(text):  # (verbose=False: uncut on purpose, never fed whole to a model of a shorter model_max_length)
        return tok(text.split() if words else text, is_split_into_words=words, add_special_tokens=False,
                   verbose=False)['input_ids']
    first = [tok.cls_token_id, *ids(a), tok.sep_token_id]
    b_ids = ids(b) if b is not None else []  # a second text of no tokens is none, as the run encodes it
    second = [*b_ids, tok.sep_token_id] if b_ids else []
    return {'input_ids': first + second, 'token_type_ids': [0] * len(first) + [1] * len(second),
            'attention_mask': [1] * (len(first) + len(second))}


def _encoding_differs(folder: Path, tok: PreTrainedTokenizerBase, words: bool) -> str:
    """How AutoTokenizer of `folder` encodes a text or a pair otherwise than the run (`run_encoding` of `tok`; with
    `words`, a sentence as a tagging run, which feeds no pairs; its types, 1 in the run, are a text's, as a tagging
    folder's rows of both types are one, `tasks/tagging/model.py` `one_token_type`), or ''."""
    saved, (a, b) = AutoTokenizer.from_pretrained(folder), _PROBE_PAIR
    for args in [(a,)] if words else [(a,), (a, b)]:
        want = run_encoding(tok, *args, words=words)
        if (got := dict(saved(*args, verbose=False))) != want:
            return (f"it encodes {'a pair' if len(args) == 2 else 'a text'} as {_shown(saved, got)}, the run as "
                    f"{_shown(tok, want)}")
    return ''


def _shown(tok: PreTrainedTokenizerBase, enc: dict[str, list[int]]) -> str:
    "'<s> A </s> (input_ids, token_type_ids 000, attention_mask)': an encoding's tokens, inputs and types, to show."
    types = ''.join(map(str, enc.get('token_type_ids', [])))
    inputs = ', '.join(f'{k} {types}' if k == 'token_type_ids' else k for k in enc)
    return f"{' '.join(tok.convert_ids_to_tokens(enc['input_ids']))} ({inputs})"


def _run_template(tok: PreTrainedTokenizerFast) -> TemplateProcessing:
    "`run_encoding`'s special tokens and types as a `tokenizers` post-processor (BERT's template, of `tok`'s tokens)."
    cls, sep = tok.cls_token, tok.sep_token
    return TemplateProcessing(single=f'{cls}:0 $A:0 {sep}:0', pair=f'{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1',
                              special_tokens=[(cls, tok.cls_token_id), (sep, tok.sep_token_id)])


def _as_run(tok: PreTrainedTokenizerFast, words: bool) -> PreTrainedTokenizerFast:
    """A copy of `tok` with the run's template (`_run_template`); with `words`, where a text's pieces are not its
    words' (a byte-level BPE without a prefix space: 'rejects' in a sentence is 'Ġrejects', as a word 'rej' 'ects'),
    cutting a text at spaces before its own pre-tokenizer, so that each word is cut as the tagging run cut it."""
    fixed = copy.deepcopy(tok)
    backend = fixed.backend_tokenizer
    backend.post_processor = _run_template(tok)
    a = _PROBE_PAIR[0]
    if words and run_encoding(tok, a) != run_encoding(tok, a, words=True):
        split = pre_tokenizers.WhitespaceSplit()
        backend.pre_tokenizer = split if backend.pre_tokenizer is None else \
            pre_tokenizers.Sequence([split, backend.pre_tokenizer])
    return fixed


def _set_run_inputs(folder: Path) -> None:
    "`folder`'s tokenizer_config.json read by the class that keeps its tokenizer.json as it is, with `RUN_INPUTS`."
    path = folder / 'tokenizer_config.json'
    config = json.loads(path.read_text(encoding='utf-8'))
    config.update(tokenizer_class=_AS_SAVED, model_input_names=RUN_INPUTS)
    path.write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + '\n', encoding='utf-8')


def save_exported_tokenizer(tok: PreTrainedTokenizerBase, folder: str | Path, name: str | Path | None = None,
                            words: bool = False) -> str:
    """Write `tok` to the transformers folder `folder` (every export of the library goes through here) so that
    AutoTokenizer, and so `pipeline(...)`, encodes a text and a pair exactly as the run did (`run_encoding`; `words`:
    a tagging run's, which cut each word of a sentence on its own). A tokenizer that does (BERT's WordPiece, the
    library's own) is saved as it is. Another (a RoBERTa post-processor's `<s> A </s></s> B </s>`, no post-processor at
    all, no token_type_ids among its inputs) is saved as `_as_run` makes it, read as its tokenizer.json is, with
    token_type_ids an input; the run's pieces of a text are unchanged. Where that still differs (a slow tokenizer), one
    warning line naming the folder `name` (default `folder`), and the returned line for the card."""
    folder = Path(folder)
    tok.save_pretrained(folder)
    if not (why := _encoding_differs(folder, tok, words)): return ''
    if getattr(tok, 'backend_tokenizer', None) is not None:
        _as_run(tok, words).save_pretrained(folder)
        _set_run_inputs(folder)
        if not (why := _encoding_differs(folder, tok, words)): return ''
    note = (f"Its tokenizer does not encode as the run did: {why}; give the model the run's encoding, "
            "`[CLS] A [SEP] B [SEP]` with token types 0 up to the first [SEP] and 1 after.")
    warnings.warn(f'{name or folder}: {note}', RunWarning, stacklevel=2)
    return note
