"""One explicit config object per job: dataclass defaults < YAML preset < `--key value` overrides.

Every key is typed and declares its domain beside its default (`field(..., gt=0)`, `choice_field`): when the config
is read, before any job starts, each value is converted to its key's type and checked against its domain (with
pydantic), and refused in one line that names where it came from (the file and line, the command line), the key, the
value, the domain and what the key means. `--help` lists every key with its value, its domain and its help text.
What relates several keys (max_length within max_position_embeddings, ...) is each job config's own `validate`.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
import re
import sys
import types
import typing
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence, Union

import pydantic
import yaml

from electra.config.version import version_line

__all__ = ['ConfigError', 'RunWarning', 'need', 'did_you_mean', 'NAME_BYTES', 'safe_name', 'read_text', 'load_yaml', 'config_help', 'load_config',
           'config_to_dict', 'config_from_dict', 'field', 'choice_field', 'Domain', 'yaml_key_lines', 'key_place', 'THREADS_HELP',
           'threads_field', 'threads_setting', 'TRACKERS', 'TRACKER_KEYS', 'tracker_keys', 'check_logger', 'value_sources',
           'compressed', 'COMPRESSED_SUFFIXES', 'not_text', 'path', 'expand_path', 'load_json', 'MAX_DIGITS']


# the characters str.splitlines breaks a line at: a message that quotes a file's text may hold any of them
_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in '\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'})


class ConfigError(ValueError):
    """A bad config key or value; the message names where it came from and how to fix it, always on one line (the
    drivers print it after `error: `): a line break it quotes from a file or a value is shown escaped."""
    def __init__(self, message: object = '', *args):
        super().__init__(str(message).translate(_LINE_BREAKS), *args)


class RunWarning(UserWarning):
    "Something in a job's settings or environment the user should know about; the job goes on."


INT64_MAX = 2 ** 63 - 1  # what torch and numpy hold of a whole number: the bound of every int key without its own
SEED_END = 2 ** 32        # numpy's seeds are below it (np.random.seed; fastai's set_seed takes them modulo it)
# torch.distributed waits until now + timeout on a clock of int64 nanoseconds: a timeout past 2**63 ns (about 9.2e9
# seconds, less the clock's time since boot) wraps around (1e10 s: the connection timed out at once)
DIST_TIMEOUT_MAX = 10 ** 9


@dataclasses.dataclass(frozen=True)
class Domain:
    """The values a config key takes, declared beside its default (`field`): the bounds of a number (of each element
    of a list), the choices of a string, a list's least length, and what 0 or an empty list means. A float is finite
    unless `finite=False`; a whole number is below 2**63 unless bounded lower."""
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    finite: bool = True
    choices: tuple = ()
    min_items: int = 0
    zero: str = ''   # what 0 means, where 0 is allowed and special
    empty: str = ''  # what an empty list means

    def words(self, tp, huge: bool = False) -> str:
        "The domain for a value of type `tp`, in words: 'a whole number >= 0', 'a list of numbers in (0, 1]', ..."
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (list, tuple):
            least = {0: '', 1: ' non-empty'}.get(self.min_items, f' (at least {self.min_items})')
            if self.choices: return f"a{least} list of {', '.join(map(str, self.choices))}"
            return f"a{least} list of {self._noun(args[0] if args else str, plural=True)}{self._range(huge)}"
        if origin in (typing.Union, types.UnionType):
            named = sorted((a for a in args if a is not type(None)), key=lambda a: a is not str)  # 'auto or ...'
            return ' or '.join(self.words(a, huge) for a in named)
        if self.choices and tp is str:
            return str(self.choices[0]) if len(self.choices) == 1 else f"one of {', '.join(map(str, self.choices))}"
        return f"{self._noun(tp)}{self._range(huge) if tp in (int, float) else ''}"

    def meanings(self) -> list[str]:
        "What the special values mean: ['0: off'], ['empty: all'] or none."
        return [f'{v}: {m}' for v, m in (('0', self.zero), ('empty', self.empty)) if m]

    def _noun(self, tp, plural: bool = False) -> str:
        bounded = self._lower() and self._upper()
        noun = {int: 'whole number', float: 'number' if bounded or not self.finite else 'finite number',
                bool: 'true or false', str: 'string'}.get(tp, getattr(tp, '__name__', str(tp)))
        if tp is bool: return noun
        return f'{noun}s' if plural else f'a {noun}'

    def _lower(self): return ('>', self.gt) if self.gt is not None else ('>=', self.ge) if self.ge is not None else None
    def _upper(self): return ('<', self.lt) if self.lt is not None else ('<=', self.le) if self.le is not None else None

    def _range(self, huge: bool = False) -> str:
        lower, upper = self._lower(), self._upper()
        if lower and upper:
            opening, closing = '(' if lower[0] == '>' else '[', ')' if upper[0] == '<' else ']'
            return f' in {opening}{_bound(lower[1])}, {_bound(upper[1])}{closing}'
        one = lower or upper
        return (f' {one[0]} {_bound(one[1])}' if one else '') + (' below 2**63' if huge and not upper else '')

    def annotated(self, tp):
        "`tp` with this domain as pydantic's constraints (`TypeAdapter` checks a value against them)."
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (list, tuple):
            return Annotated[list[self.annotated(args[0] if args else str)], pydantic.Field(min_length=self.min_items)]
        if origin in (typing.Union, types.UnionType):
            return Union[tuple(type(None) if a is type(None) else self.annotated(a) for a in args)]
        if tp is int:
            upper = {'lt': self.lt, 'le': self.le} if self._upper() else {'le': INT64_MAX}
            return Annotated[int, pydantic.Field(gt=self.gt, ge=self.ge, **upper)]
        if tp is float:
            return Annotated[float, pydantic.Field(gt=self.gt, ge=self.ge, lt=self.lt, le=self.le,
                                                   allow_inf_nan=not self.finite)]
        if tp is str and self.choices: return Literal[self.choices]
        return tp


def _bound(v) -> str:
    "A bound as --help and messages write it: 2**32 for a large power of two, 0.5, 1e-06."
    if isinstance(v, int) and v >= 2 ** 16 and v & (v - 1) == 0: return f'2**{v.bit_length() - 1}'
    return f'{v:g}' if isinstance(v, float) else str(v)


@functools.lru_cache(maxsize=None)
def _adapter(tp, domain: Domain) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(domain.annotated(tp))


def field(default, help: str = '', *, entries: Sequence[str] = (), **domain):
    """A config field with a help text shown by `--help` and its domain (`Domain`'s keywords: gt=0, ge=0, lt=1,
    le=..., finite, min_items, zero='off', empty='all'), checked when the config is read. `entries`: a mapping
    key (task_overrides) whose entries are mappings of these keys of the same config, each checked as that key."""
    metadata = {'help': help, **({'domain': Domain(**domain)} if domain else {}),
                **({'entries': tuple(entries)} if entries else {})}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def choice_field(default, choices: list, help: str = ''):
    "A config field whose value must be one of `choices` (checked when the config is read)."
    return dataclasses.field(default=default, metadata={'help': help, 'domain': Domain(choices=tuple(choices))})


def _keys_after(after: str, keys: dict[str, tuple[str, Any]]):
    "Class decorator, under `@dataclass`: `keys` (name -> (type, field)) inserted right after the key `after`."
    def add(cls):
        annotations = {}
        for name, tp in cls.__annotations__.items():
            annotations[name] = tp
            if name == after:
                for key, (key_type, value) in keys.items():
                    annotations[key] = key_type
                    setattr(cls, key, value)
        cls.__annotations__ = annotations
        return cls
    return add


def optimizer_keys(after: str, weight_decay: float, weight_decay_help: str):
    """Class decorator, under `@dataclass`: the optimizer's keys, the same in both jobs (model/optimization.py
    `create_optimizer`), inserted right after the key `after` (so `--help` lists them there); only weight decay's
    default and help differ between the jobs."""
    return _keys_after(after, {
        'schedule': ('str', choice_field('together', ['together', 'warmup_then_decay'], "'together' is the official "
                                         'schedule: warm-up and linear decay applied at once')),
        'decay_power': ('float', field(1.0, 'power of the polynomial decay', gt=0)),
        'weight_decay': ('float', field(weight_decay, weight_decay_help, ge=0)),
        'adam_beta1': ('float', field(0.9, 'Adam beta1', ge=0, lt=1)),
        'adam_beta2': ('float', field(0.999, 'Adam beta2', ge=0, lt=1)),
        'adam_eps': ('float', field(1e-6, 'Adam epsilon', gt=0)),
        'clip_grad': ('float', field(1.0, 'gradient clipping by global norm', ge=0, zero='no clipping'))})


# the `threads` key of every job (pretraining, fine-tuning, comparison); chosen by electra.training.device.cpu_threads
THREADS_HELP = ("CPU threads of the job on this machine, shared out among its processes (fine-tuning workers, a "
                "torchrun job's); auto (or 0): OMP_NUM_THREADS when set, else the cores this process may run on less "
                "those other processes keep busy (measured for a quarter of a second at the start), at least 1. "
                "A thread on a core another process keeps busy stalls every step: all cores with one of them busy run "
                "many times slower than one thread (BENCHMARKS.md)")


# the `logger` key of every job: trackers beside the CSV files, as transformers' `report_to`
# (electra.training.trackers); 'none' alone: the CSV files only, as before the key was a list
TRACKERS = ('tensorboard', 'mlflow', 'wandb', 'neptune')
TRACKER_KEYS = ('logger', 'neptune_project', 'tracking_group', 'tracking_tags', 'tracking_artifacts')


def tracker_keys(after: str, tensorboard: str, runs: str, group: str, tags: str, artifacts: str):
    """Class decorator, under `@dataclass`: the trackers' keys (`TRACKER_KEYS`), the same in every job, inserted right
    after the key `after` (so `--help` lists them there). Each job says what it tracks: `tensorboard` (where its event
    files go), `runs` (its tracked runs, '' for one), `group` (the group when tracking_group is empty), `tags` (the
    tags it adds to the user's) and `artifacts` (the files tracking_artifacts sends)."""
    logger = ("experiment trackers beside the CSV files, e.g. mlflow,tensorboard: tensorboard (event files in "
              f"{tensorboard}), mlflow (MLFLOW_TRACKING_URI, else MLflow's default store), wandb (WANDB_PROJECT; "
              "WANDB_MODE=offline works without an account), neptune (NEPTUNE_MODE=offline; its hosted service closed "
              "on 2026-03-05: offline mode and self-hosted installations remain); each needs its extra, e.g. pip "
              "install 'electra[mlflow]'" + (f'; {runs}' if runs else ''))
    return _keys_after(after, {
        'logger': ('list[str]', field([], logger, choices=('none', *TRACKERS), empty='the CSV files only')),
        'neptune_project': ('str', field('', 'Neptune project, e.g. me/electra (read from NEPTUNE_PROJECT when '
                                             'empty)')),
        'tracking_group': ('str', field('', f"the trackers' group (MLflow's experiment, W&B's group); empty: {group}")),
        'tracking_tags': ('list[str]', field([], f"the trackers' tags{tags}; MLflow's as key=value pairs (a bare tag: "
                                                 'tag=true)', empty='none')),
        'tracking_artifacts': ('bool', field(False, f'also send {artifacts} to the trackers that keep files (mlflow, '
                                                    'wandb, neptune)'))})


def check_logger(logger: list[str]) -> None:
    "A `logger` list names each tracker once, and 'none' only alone."
    need('none' not in logger or logger == ['none'], 'logger', f"'none' means the CSV files only: give it alone, or the "
                                                                f"trackers alone, got {','.join(logger)}.")
    need(len(set(logger)) == len(logger), 'logger', f"a tracker is listed twice: {','.join(logger)}.")


def threads_setting(value: int | str) -> int:
    "A `threads` value as a number, 0 for auto; a ConfigError for anything else that is not a whole number >= 0."
    if isinstance(value, str) and value.strip().lower() == 'auto': return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0: return value
    raise ConfigError(f"threads: {value!r} is not auto (or 0) or a number of threads.")


def threads_field(help: str = THREADS_HELP):
    "The `threads` key of a job: auto, or a number of threads (0 is auto too)."
    return field('auto', help, ge=0, choices=('auto',), zero='auto')


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def did_you_mean(name: str, valid: Sequence[str]) -> str:
    "\" Did you mean 'x'?\" for the closest of `valid` to a misspelt `name`, or ''."
    close = difflib.get_close_matches(name, valid, n=1)
    return f" Did you mean '{close[0]}'?" if close else ''


# A name's UTF-8 bytes at most: 255 per file name on ext4, APFS and NTFS, less room for what the library adds to it
# (`<run_name>_<seed>_<percent>.pth`, `<task>_<run>.pth`, `<task>-<split>-<key>.npz`, and `.<file>.<random>.tmp` while
# a file is written atomically).
NAME_BYTES = 200
_WINDOWS_RESERVED = '<>:"|?*'  # characters Windows refuses in a file name, besides the separators
_WINDOWS_DEVICES = {'CON', 'PRN', 'AUX', 'NUL', *(f'{d}{i}' for d in ('COM', 'LPT') for i in range(1, 10))}
# text direction overrides and isolates: a name that shows one way and is another ("Trojan Source", CVE-2021-42574)
_BIDI_CONTROLS = set('\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069')


def _name_problem(value: Any) -> str | None:
    "What makes `value` unsafe as one file or folder name, or None."
    if not isinstance(value, str): return f'is not text but {type(value).__name__}'
    if not value: return 'is empty'
    if value.startswith(('/', '\\')) or re.match(r'[A-Za-z]:[/\\]', value): return 'is an absolute path, not a name'
    if sep := next((c for c in value if c in '/\\'), None): return f"holds {sep!r}, which separates folders"
    if value in ('.', '..'): return 'names a folder itself or its parent'
    if value.startswith('-'): return "starts with '-', which commands read as an option"
    if value.startswith('.'): return "starts with '.': a hidden file, as the library's own temporary files are"
    odd = next((c for c in value if unicodedata.category(c) in ('Cc', 'Cs', 'Zl', 'Zp') or c in _BIDI_CONTROLS), None)
    if odd is not None: return f'holds the control character {odd!r}'
    if reserved := next((c for c in value if c in _WINDOWS_RESERVED), None):
        return f'holds {reserved!r}, which Windows does not allow in a file name'
    if value != value.strip() or value.endswith('.'):
        return "begins or ends with a space or ends with '.', which Windows drops"
    if value.split('.')[0].upper() in _WINDOWS_DEVICES: return 'is the name of a device on Windows'
    size = len(value.encode('utf-8'))
    if size > NAME_BYTES:
        return f'is {size} bytes long (UTF-8); at most {NAME_BYTES}: a file name has 255 and the library adds to it'
    return None


def safe_name(value: Any, key: str, where: str = '') -> str:
    """`value`, a user's name that becomes a file or folder name (a task, run, group or variant), as given, once it is
    safe as one on common file systems: one name, not a path (no separator, not `.` or `..`, not absolute), not
    hidden or read as an option (no leading `.` or `-`), no control character, none that Windows refuses, at most
    `NAME_BYTES` bytes. Letters and digits of any script are names. Otherwise a one-line ConfigError naming `where`
    (a file and line) and `key`, the value, what is wrong and the fix."""
    problem = _name_problem(value)
    if problem is None: return value
    shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else f'{value[:40]!r}... ({len(value)} characters)'
    raise ConfigError(f"{f'{where}: ' if where else ''}{key}: {shown} {problem}. It names files and folders: give one "
                      "name of letters, digits, spaces and _ - . + (any script), such as 'my_task_v2'.")


def need(ok: bool, key: str, msg: str) -> None:
    "A config check: `ConfigError('<key>: <msg>')` unless `ok`."
    if not ok: raise ConfigError(f"{key}: {msg}")


_TRUE, _FALSE = {'true', 'yes', '1', 'on'}, {'false', 'no', '0', 'off'}
BOOL_WORDS = _TRUE | _FALSE  # how a bool may be written on the command line


class _DuplicateKey(yaml.YAMLError):
    "A key given twice in one YAML mapping, on these lines (from 1)."
    def __init__(self, key, first: int, second: int): self.key, self.first, self.second = key, first, second


class _TooLong(yaml.MarkedYAMLError):
    "A whole number with more digits than any setting takes, at this mark."


# the digits of a whole number a reader takes at most: every key's bound is below 2**63 (19 digits); past Python's
# 4300-digit limit a number can be neither read nor shown in a message, so longer ones are refused where they are read
MAX_DIGITS = 100


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping, which PyYAML resolves silently (the last wins),
    and a whole number of more than `MAX_DIGITS` digits (in any base), naming its line."""

    def construct_yaml_int(self, node):
        digits = len(node.value.lstrip('+-').replace('_', ''))
        value = super().construct_yaml_int(node) if digits <= MAX_DIGITS * 4 else None  # (hex: 4 bits a digit)
        if value is None or abs(value).bit_length() > MAX_DIGITS * 10 // 3:
            raise _TooLong(None, None, f'a whole number of more than {MAX_DIGITS} digits, which no setting takes',
                           node.start_mark)
        return value

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == 'tag:yaml.org,2002:merge': continue  # a key beside `<<: *x` overrides it: YAML's rule
                key = self.construct_object(key_node, deep=True)
                try: first = seen.setdefault(key, key_node)
                except TypeError: continue  # an unhashable key: SafeLoader's own error follows
                if first is not key_node: raise _DuplicateKey(key, first.start_mark.line + 1, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep)


# The type of a key whose value is a path (or a name that may be one: a model, a corpus, a task): written as people write
# paths, `~`, `~user`, `$VAR` and `${VAR}` are expanded where the value is read, in a preset, a task file, the command
# line or a notebook's overrides alike, as a shell expands them (a shell expands none of them in a YAML file, nor `~`
# after a comma). `--help` shows its type as `path`.
path = typing.NewType('path', str)
_VARIABLE = re.compile(r'\$(\w+|\{([^}]*)\})')


def expand_path(value: str, where: str) -> str:
    """`value` with `~` and `~user` at the start of it or of any of its comma-separated parts (corpora, a generator and
    a discriminator) and every `$VAR` and `${VAR}` expanded; a variable that is not set, or a user without a home
    folder, is a ConfigError naming `where`: left as written it would name a folder `$SCRATCH` in the current one."""
    def variable(m: re.Match) -> str:
        name = m.group(2) if m.group(2) is not None else m.group(1)
        if name not in os.environ:
            raise ConfigError(f"{where}: {value!r} names the environment variable {name!r}, which is not set: set it "
                              f"(export {name}=...) or write the path out.")
        return os.environ[name]
    parts = []
    for part in _VARIABLE.sub(variable, value).split(','):
        head = part.strip()
        if head.startswith('~'):
            expanded = os.path.expanduser(head)
            if expanded.startswith('~'):
                raise ConfigError(f"{where}: {value!r}: there is no user {head[1:].split('/')[0]!r} whose home folder "
                                  f"`{head.split('/')[0]}` names. Write ~/ for yours, or the path out.")
            part = part[:len(part) - len(part.lstrip())] + expanded
        parts.append(part)
    return ','.join(parts)


_UniqueKeyLoader.add_constructor('tag:yaml.org,2002:int', _UniqueKeyLoader.construct_yaml_int)


def _yaml_problem(e: Exception) -> str:
    "What a YAML reader refused in a text, in one line: 'line L, column C: <the problem>' where it knows the place."
    if isinstance(e, RecursionError): return 'nested deeper than Python can read'
    if not isinstance(e, yaml.MarkedYAMLError): return ' '.join(str(e).split())
    mark = e.problem_mark or e.context_mark
    at = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark is not None else ''
    return at + ' '.join(f'{e.problem or ""} {f"({e.context})" if e.context and e.problem else e.context or ""}'.split())


def _key_lines(node, above: tuple = ()) -> dict[tuple, int]:
    "The line (from 1) of each key of a YAML mapping node, and of the mappings inside it, by its path of keys."
    lines = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines[(*above, key.value)] = key.start_mark.line + 1
                lines.update(_key_lines(value, (*above, key.value)))
    return lines


def load_yaml(text: str, where: str, lines: dict | None = None) -> Any:
    """YAML `text` (the contents of `where`: a file, or a command-line value) as SafeLoader reads it, or a one-line
    `ConfigError` naming `where`: a key given twice in one mapping (both lines), text that is not YAML, a whole
    number too long to be a setting, nesting deeper than Python's recursion (the place where the reader knows it).
    `lines`: filled with the line of each key (`_key_lines`), for messages that name it."""
    loader = None
    try:
        loader = _UniqueKeyLoader(text)  # (its reader refuses characters YAML does not allow, such as NUL, at once)
        node = loader.get_single_node()
        if lines is not None: lines.update(_key_lines(node))
        return None if node is None else loader.construct_document(node)
    except _DuplicateKey as e:
        where_lines = f', on lines {e.first} and {e.second}' if e.first != e.second else ''
        raise ConfigError(f"{where}: key {e.key!r} is given twice{where_lines}; the second would silently replace the "
                          "first. Keep one of them.") from None
    except _TooLong as e: raise ConfigError(f"{where}: {_yaml_problem(e)}.") from None
    except (yaml.YAMLError, RecursionError) as e:
        raise ConfigError(f"{where}: not valid YAML ({_yaml_problem(e)}).") from None
    finally:
        if loader is not None: loader.dispose()


def yaml_key_lines(path: str | Path) -> dict[tuple, int]:
    "The line of each key of a YAML file that was read without error before (a task file), by its path of keys."
    lines: dict[tuple, int] = {}
    load_yaml(read_text(path), str(path), lines)
    return lines


def key_place(path: str | Path, key: str) -> str:
    "'<path>: line N' for a top-level key of a YAML file, where it is written; '<path>' where no line is known."
    try: line = yaml_key_lines(path).get((key,))
    except ConfigError: line = None
    return f'{path}: line {line}' if line else str(path)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    "Convert `value` (a YAML value or a CLI string) to type `tp`, or raise a `ConfigError` naming `where`."
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ('none', 'null')):
            if type(None) in args: return None
        errors = []
        for a in (a for a in args if a is not type(None)):
            try: return _coerce(value, a, where)
            except ConfigError as e: errors.append(str(e))
        raise ConfigError(errors[0])
    if origin in (list, tuple):
        (inner,) = args[:1] or (str,)
        if isinstance(value, str) and value.strip().startswith('['):  # a YAML list, as a mapping is written: '[32, 64]'
            try: value = load_yaml(value, where)
            except ConfigError: pass  # left a string: refused below
        elif isinstance(value, str): value = [v.strip() for v in value.split(',') if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}. Use a YAML list or comma-separated values.")
        return [_coerce(v, inner, where) for v in value]
    if tp is bool:
        if isinstance(value, bool): return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE: return value.lower() in _TRUE
        raise ConfigError(f"{where}: expected true or false, got {value!r}.")
    if tp is int:
        if isinstance(value, bool): raise ConfigError(f"{where}: expected an integer, got {value!r}.")
        if isinstance(value, int): return value
        if isinstance(value, float) and value.is_integer(): return int(value)
        if isinstance(value, str):
            try: return int(value)
            except ValueError: pass
            try: number = float(value)  # '1e6' is a fine way to write a step count
            except ValueError: number = None
            if number is not None and number.is_integer(): return int(number)
        raise ConfigError(f"{where}: expected an integer, got {value!r}.")
    if tp is float:
        if isinstance(value, bool): raise ConfigError(f"{where}: expected a number, got {value!r}.")
        if isinstance(value, (int, float)): return float(value)
        if isinstance(value, str):
            try: return float(value)
            except ValueError: pass
        raise ConfigError(f"{where}: expected a number, got {value!r}.")
    if tp is path: return expand_path(_coerce(value, str, where), where)
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool): return str(value)
        raise ConfigError(f"{where}: expected a string, got {value!r}.")
    if tp is dict or origin is dict:
        if isinstance(value, str): value = load_yaml(value, where)  # a command-line mapping is YAML: '{RTE: {epochs: 10}}'
        if isinstance(value, dict): return value
        raise ConfigError(f"{where}: expected a mapping, got {value!r}. On the command line write it as YAML, "
                          "e.g. '{RTE: {epochs: 10}}'.")
    return value


# Keys that earlier versions wrote into presets, run configs and checkpoints and that nothing ever read: skipped in
# files, so those still load; typed on the command line they are unknown keys. ('size' named the preset.)
RETIRED_KEYS = ('size',)


def _located(source: str, lines: dict | None, path: tuple) -> str:
    "`source` with the line of the key at `path` (of the nearest mapping above it that has one), when known."
    for n in range(len(path), 0, -1):
        if lines and path[:n] in lines: return f'{source}: line {lines[path[:n]]}'
    return source


def _in_domain(f: dataclasses.Field, tp, value: Any, where: str) -> None:
    """`value` (of type `tp`) checked against the declared domain of the config field `f`; else a ConfigError:
    '<where>: <value> is not <domain> (<what 0 means>; <what the key is>)'."""
    domain = f.metadata.get('domain', Domain())
    try: _adapter(tp, domain).validate_python(value, strict=True)
    except pydantic.ValidationError as e:
        huge = any(err['type'] == 'less_than_equal' for err in e.errors()) and domain._upper() is None
        choices_only = domain.choices and tp is str  # the choices say what the key is
        what = '' if choices_only else f.metadata.get('help', '').split('; ')[0]
        about = [*domain.meanings(), *([what] if what else [])]
        raise ConfigError(f"{where}: {value!r} is not {domain.words(tp, huge)}"
                          + (f" ({'; '.join(about)})" if about else '')) from None


def _typed_values(cls, values: dict[str, Any], source: str, from_file: bool, lines: dict | None = None,
                  origins: dict | None = None) -> dict[str, Any]:
    """`values` with every key checked against `cls` and every value converted to its type; `source` names them in
    errors, with the line of each key when `lines` has it (`load_yaml`). `origins`: filled with each key's source and
    lines, for `_in_domains`."""
    hints, names, typed = _hints(cls), [f.name for f in dataclasses.fields(cls)], {}
    for key, value in values.items():
        if from_file and key in RETIRED_KEYS: continue
        where = _located(source, lines, (str(key),))
        if key not in hints:
            raise ConfigError(f"{where}: unknown key {str(key)!r}.{did_you_mean(str(key), names)} "
                              f"Run with --help for the list of keys.")
        typed[key] = _coerce(value, hints[key], f"{where}: key '{key}'")
        if origins is not None: origins[key] = (source, lines)
    return typed


def _in_domains(cls, values: dict[str, Any], origins: dict) -> None:
    """Each value of `values` that a file, the command line or overrides gave (`origins`: its source and lines) in its
    key's domain, and each entry of a key with `entries` (task_overrides) in the domain of its own key. Checked on the
    config's final values: a preset's value that a later preset or the command line replaces is not judged."""
    hints, fields = _hints(cls), {f.name: f for f in dataclasses.fields(cls)}
    for key, (source, lines) in origins.items():
        _in_domain(fields[key], hints[key], values[key], f"{_located(source, lines, (key,))}: key '{key}'")
        for name, entry in (values[key].items() if fields[key].metadata.get('entries') else ()):
            for k, v in (entry.items() if isinstance(entry, dict) else ()):  # (`validate` names a bad entry or key)
                if k in fields[key].metadata['entries']:
                    where = f"{_located(source, lines, (key, str(name), str(k)))}: key '{key}.{name}.{k}'"
                    _in_domain(fields[k], hints[k], _coerce(v, hints[k], where), where)


def _checked(cls, values: dict[str, Any], origins: dict, base=None):
    """The `cls` of `values` (typed), those given (`origins`) in their domains and its own `validate` checked: what
    reads files runs here, once. It keeps where each given value came from (`value_sources`), over `base`'s."""
    _in_domains(cls, values, origins)
    cfg = cls(**values)
    cfg._sources = {**getattr(base, '_sources', {}),
                    **{k: _located(source, lines, (k,)) for k, (source, lines) in origins.items()}}
    if hasattr(cfg, 'validate'): cfg.validate()
    return cfg


def config_from_dict(cls, values: dict[str, Any], source: str = 'config', base=None, from_file: bool = True,
                     lines: dict | None = None):
    """Build a `cls` from `values` (over `base` or the defaults), checking every key, type and domain. `from_file`:
    `values` were saved by a file or checkpoint, whose retired keys are skipped; `lines`: the line of each key in it."""
    current, origins = config_to_dict(base) if base is not None else {}, {}
    return _checked(cls, {**current, **_typed_values(cls, values, source, from_file, lines, origins)}, origins, base)


def config_to_dict(cfg) -> dict[str, Any]:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def value_sources(cfg) -> dict[str, str]:
    """Where each value of a config read by `load_config` or `config_from_dict` came from: a preset file and its line,
    'command line', 'overrides' (a notebook's), 'task_overrides.<task>'; 'default' for the dataclass default."""
    given = getattr(cfg, '_sources', {})
    return {f.name: given.get(f.name, 'default') for f in dataclasses.fields(cfg)}


# The first bytes of the compressed formats corpora and data sets are shipped in (gzip, bzip2 with its first block or
# end of stream, xz, zstd, zip), and the command that writes one out plain. Each holds bytes UTF-8 text cannot start
# with, so no text file is taken for one.
_COMPRESSED = ((re.compile(rb'\x1f\x8b'), 'gzip', 'gzip -dc'),
               (re.compile(rb'BZh[1-9](1AY&SY|\x17rE8P\x90)'), 'bzip2', 'bzip2 -dc'),
               (re.compile(rb'\xfd7zXZ\x00'), 'xz', 'xz -dc'), (re.compile(rb'\x28\xb5\x2f\xfd'), 'zstd', 'zstd -dc'),
               (re.compile(rb'PK\x03\x04'), 'zip', 'unzip -p'))
COMPRESSED_SUFFIXES = ('.gz', '.bz2', '.xz', '.zst', '.zip')
# A PyTorch checkpoint is a zip archive whose first member is its pickle, `<archive>/data.pkl` (torch.save): told apart
# from a zip of text files, which `unzip -p` would write out plain.
_TORCH = re.compile(rb'PK\x03\x04.{26}[^\x00]{0,256}?data\.pkl', re.S)
# Other formats of files found where text was meant, by their first bytes; none is how UTF-8 text can start.
_BINARY = ((_TORCH, 'a PyTorch checkpoint'), (re.compile(rb'\x89PNG\r\n\x1a\n'), 'a PNG image'),
           (re.compile(rb'\xff\xd8\xff'), 'a JPEG image'), (re.compile(rb'GIF8[79]a'), 'a GIF image'),
           (re.compile(rb'%PDF-'), 'a PDF document'), (re.compile(rb'PAR1'), 'a Parquet table'),
           (re.compile(rb'ARROW1'), 'an Arrow table'), (re.compile(rb'\x93NUMPY'), 'a NumPy array'),
           (re.compile(rb'\x80[\x02-\x05]'), 'a Python pickle'), (re.compile(rb'SQLite format 3\x00'), 'an SQLite database'))


def compressed(path: str | Path, head: bytes | None = None) -> str:
    """'' for a file that is not compressed (by its first bytes, `head` when already read); else what it is and how to
    write it out plain, as the end of a ConfigError's sentence that starts with the file: '<path> is gzip-compressed,
    ...'. The readers read plain text only (the corpus reader splits files by byte ranges for its parallel build)."""
    path = Path(path)
    if head is None:
        try:
            with open(path, 'rb') as f: head = f.read(512)
        except OSError: return ''
    if _TORCH.match(head): return ''
    for magic, name, command in _COMPRESSED:
        if magic.match(head):
            plain = path.with_suffix('') if path.suffix in COMPRESSED_SUFFIXES else path.with_name(f'plain_{path.name}')
            return (f"is {name}-compressed, not text: write it out plain first (`{command} {path} > {plain}`) and give "
                    f"the plain file")
    return ''


def _utf16(head: bytes) -> str:
    """The encoding (as iconv names it) of text in UTF-16 or UTF-32, by its byte-order mark or, without one, a NUL in
    every other byte (the high bytes of Latin-script UTF-16); else ''."""
    if head.startswith((b'\xff\xfe\x00\x00', b'\x00\x00\xfe\xff')): return 'UTF-32'
    if head.startswith((b'\xff\xfe', b'\xfe\xff')): return 'UTF-16'
    even, odd = head[:1024:2], head[1:1024:2]
    if len(odd) < 2: return ''
    zeros = even.count(0) / len(even), odd.count(0) / len(odd)
    if min(zeros) >= 0.1 or max(zeros) <= 0.5: return ''
    low = even if zeros[1] > 0.5 else odd  # the characters' low bytes: mostly printable, in text
    if sum(b >= 0x20 or b in b'\t\n\r' for b in low) < 0.9 * len(low): return ''
    return 'UTF-16LE' if zeros[1] > 0.5 else 'UTF-16BE'



def not_text(path: str | Path, head: bytes) -> str:
    """'' for a file whose first bytes `head` may be text; else, as `compressed` says it, what the file is and how to
    write its text out as UTF-8 where it holds text: compressed, UTF-16/32, or a binary format known by its first
    bytes (a PyTorch checkpoint, an image, a table, ...)."""
    if packed := compressed(path, head): return packed
    for magic, name in _BINARY:
        if magic.match(head): return f"is {name}, not text"
    if encoding := _utf16(head):
        return (f"is {encoding[:6]} text: write it as UTF-8 first (`iconv -f {encoding} -t UTF-8 {path} > "
                f"{Path(path).with_name(f'utf8_{Path(path).name}')}`) and give that file")
    return ''


def read_text(path: str | Path) -> str:
    """A UTF-8 text file (a byte-order mark dropped), or a ConfigError naming it and, for text in another encoding,
    the line of the first byte that is not UTF-8; for a compressed file, how to write it out plain."""
    try: raw = Path(path).read_bytes()
    except OSError as e: raise ConfigError(f"{path}: cannot read it ({e.strerror}).") from None
    try: return raw.decode('utf-8-sig')
    except UnicodeDecodeError as e:
        if packed := compressed(path, raw[:16]): raise ConfigError(f"{path} {packed}.") from None
        line = raw.count(b'\n', 0, e.start) + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8 text ({e.reason} at byte {e.start}: another encoding such as "
                          "latin-1 or UTF-16, or not text at all). Save it as UTF-8.") from None


def load_json(text: str, where: str) -> Any:
    """JSON `text` (the contents of `where`: a file, or a line of one) as json.loads reads it, or a one-line ConfigError
    naming `where`: text that is not JSON (with its line and column), a key given twice in one object (json.loads keeps
    the last silently), a whole number of more than `MAX_DIGITS` digits (past 4300 Python can neither read nor show
    one; past 308 no float holds it), nesting deeper than Python's recursion."""
    def unique(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f"{where}: key {key!r} is given twice in one object; the second would silently "
                                  "replace the first. Keep one of them.")
            out[key] = value
        return out

    def whole(digits: str) -> int:
        if len(digits.lstrip('-')) > MAX_DIGITS:
            raise ConfigError(f"{where}: a whole number of {len(digits.lstrip('-'))} digits; no value takes more than "
                              f"{MAX_DIGITS}. Fix the file.")
        return int(digits)
    try: return json.loads(text, object_pairs_hook=unique, parse_int=whole)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not JSON ({e.msg} at line {e.lineno}, column {e.colno}). Fix the file.") from None
    except RecursionError:
        raise ConfigError(f"{where}: not JSON that can be read: nested deeper than Python can read. Fix the file.") from None


def _read_yaml(path: Path, lines: dict) -> dict[str, Any]:
    "The mapping of a YAML config file; `lines` filled with the line of each key."
    text = read_text(path)
    data = load_yaml(text, str(path), lines) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of key: value at the top level.")
    return data


def project_dir(preset_dir: str | Path) -> Path:
    """A relative `preset_dir` as given if it exists from here, else inside this project, so a job runs from any folder:
    beside the package in a checkout (`configs/`), inside it once installed (pyproject.toml ships `configs/` as
    `electra/configs/`)."""
    path = Path(preset_dir)
    if path.is_absolute() or path.is_dir(): return path
    package = Path(__file__).resolve().parents[1]
    return (package if (package / path).is_dir() else package.parent) / path


def resolve_preset(name: str, preset_dir: Path) -> Path:
    """A preset name (`small`) in `preset_dir`, or a path to a YAML file: a file whatever its name ends with, a folder
    never (whatever its name ends with), unless a preset has its name (`electra` is a preset and the package)."""
    path = Path(expand_path(name, '--config'))
    if path.is_file(): return path
    if path.is_dir() and not (preset_dir / f'{name}.yaml').is_file():
        raise ConfigError(f"--config: '{name}' is a folder, not a YAML file: give a preset file in it, or a preset name.")
    if path.suffix in ('.yaml', '.yml'): raise ConfigError(f"--config: no such file '{name}'.")
    path = preset_dir / f'{name}.yaml'
    if not path.is_file():
        names = sorted(p.stem for p in preset_dir.glob('*.yaml'))
        raise ConfigError(f"--config: unknown preset '{name}'.{did_you_mean(name, names)} "
                          f"Choose one of {', '.join(names)} or give a path to a YAML file.")
    return path


def config_help(cls, prog: str, preset_dir: Path, cfg, preset: str, flags: bool = False) -> str:
    """Every key of `cls` with its value in `cfg` (what the job runs with: `preset`, then the command line's other
    flags when `flags`), its dataclass default beside it where that differs, its domain and its help text."""
    given = ' and the flags given' if flags else ''
    lines = [f"usage: {prog} [--config PRESET_OR_YAML[,PRESET ...]] [--key value ...] [--version]", '',
             f"Presets in {preset_dir}: {', '.join(sorted(p.stem for p in preset_dir.glob('*.yaml')))}", '',
             f'keys (their value with --config {preset}{given}; the default where it differs):']
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        tp = getattr(hints[f.name], '__name__', str(hints[f.name]).replace('typing.', ''))
        value, domain = getattr(cfg, f.name), f.metadata.get('domain')
        takes = f": {'; '.join([domain.words(hints[f.name]), *domain.meanings()])}" if domain else ''
        lines.append(f"  --{f.name} ({tp}, {value!r}{'' if value == default else f'; default {default!r}'}){takes}")
        if f.metadata.get('help'): lines.append(f"      {f.metadata['help']}")
    return '\n'.join(lines)


def parse_cli(argv: Sequence[str]) -> dict[str, str]:
    "`--key value` / `--key=value` pairs into a dict; a bare `--flag` means true."
    out, i, argv = {}, 0, list(argv)
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith('--'):
            raise ConfigError(f"unexpected argument {arg!r}: options are written --key value.")
        key = arg[2:]
        if '=' in key: key, value = key.split('=', 1)
        elif i + 1 < len(argv) and not argv[i + 1].startswith('--'): value, i = argv[i + 1], i + 1
        else: value = 'true'
        out[key.replace('-', '_')] = value
        i += 1
    return out


def load_config(cls, argv: Sequence[str] | None = None, preset_dir: str | Path = 'configs',
                default_preset: str = 'demo', prog: str = 'job', overrides: dict | None = None):
    """The job's config: `cls` defaults, then the presets named by `--config` (or `default_preset`; several, comma-separated,
    apply left to right), then the other
    flags in `argv`, then `overrides` (a dict, as a notebook's config cell gives). `--help` and `--version` print
    and exit."""
    preset_dir = project_dir(preset_dir)
    argv = sys.argv[1:] if argv is None else list(argv)
    if '--version' in argv:  # before the config is read: a broken preset still says which library it meets
        print(version_line(prog))
        raise SystemExit(0)
    wants_help = '--help' in argv or '-h' in argv
    cli = parse_cli([a for a in argv if a not in ('--help', '-h')])
    overrides = dict(overrides or {})
    named_by = 'command line' if 'config' in cli else 'overrides' if 'config' in overrides else None
    preset = cli.pop('config', None) or overrides.pop('config', None) or default_preset
    # 'small,bert': presets applied left to right, a size and then an objective variant; the whole config is checked
    # once, after the command line and `overrides`: a preset's task file replaced by --tasks is never read
    values: dict[str, Any] = {}
    origins: dict[str, tuple] = {}  # where each value came from (the last to set it), for the domains' messages
    for name in str(preset).split(','):
        path, lines = resolve_preset(name.strip(), preset_dir), {}
        values.update(_typed_values(cls, _read_yaml(path, lines), str(path), True, lines, origins))
    if 'config' in _hints(cls):
        values['config'] = str(preset)
        if named_by: origins['config'] = (named_by, None)
    given = {**_typed_values(cls, cli, 'command line', False, origins=origins),
             **_typed_values(cls, overrides, 'overrides', False, origins=origins)}
    values.update(given)
    if hasattr(cls, 'command_line_wins'): values = cls.command_line_wins(values, set(given))
    cfg = _checked(cls, values, origins)
    if wants_help:  # the values this very command would run with
        print(config_help(cls, prog, preset_dir, cfg, str(preset), flags=bool(cli or overrides)))
        raise SystemExit(0)
    if hasattr(cfg, 'check_folders'): cfg.check_folders()  # a job's outputs apart from its inputs (config/paths.py)
    return cfg
