"""Paths in a config. A path key's value is written as people write paths (`path`, its type): `~` and `$VAR` are
expanded where it is read (`expand_path`). The folders a job writes are kept apart from the files and folders it reads,
checked when its config is read, before any work: an output folder inside an input folder (checkpoints written into the
corpus folder, read back as text by the next run; a cache inside a tokenizer or a model folder) and an input inside
what the job itself writes (a run's folder, its checkpoints, a sweep's group folder, which `--overwrite` empties or a
rerun replaces) are refused in one line naming both keys and the fix. Paths are compared as the operating system sees
them: relative to the current folder, `..` and symbolic links resolved.

What counts, for every job alike (docs/robustness.md):
- an input is a local file or folder the job reads that exists: a hub name, `demo` or `hub:...` is none;
- an output folder (`writes`) is one the job writes files in; it may not be, nor lie inside, an input folder, nor be an
  input file. Writing beside an input file (a task's CSV, a corpus file) is fine;
- what the job owns (`owns`) is what it alone writes and may empty: an input may not be it nor lie inside it. An input
  inside another job's output (a model pretraining exported under checkpoints/, read by fine-tuning that writes under
  checkpoints/ too) is fine, and so is an input under a cache folder, which jobs share by design.
"""
from __future__ import annotations

import os
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from electra.config.errors import ConfigError
from electra.config.file_names import how_names_differ, name_key

__all__ = ['path', 'expand_path', 'resolved', 'made_absolute', 'Owned', 'check_apart', 'check_case_apart', 'local_paths']


@dataclass(frozen=True)
class Owned:
    """What a job alone writes: `folder` and everything in it, or the files in `folder` whose names match `names`
    (`*` any characters: no name the library writes holds one); `key` places it, `other` is the flag that moves it
    besides `--key` ('' for none)."""
    key: str
    folder: str | Path
    other: str
    names: str = ''

    def holds(self, real: Path) -> bool:
        folder = Path(self.folder).resolve()
        if not self.names: return real.is_relative_to(folder)
        return real.parent == folder and re.fullmatch(re.escape(self.names).replace(r'\*', '.*'), real.name) is not None

    def shown(self) -> str:
        return str(Path(self.folder) / self.names)


def _location(given: str) -> Path:
    "Where `given` lies (its folders resolved, itself not: a symbolic link is where the link is)."
    at = Path(os.path.abspath(given))
    return at.parent.resolve() / at.name


def local_paths(key: str, values) -> list[tuple[str, str]]:
    "(key, value) for each of `values` that names a file or folder that exists here (hub names and `demo` do not)."
    return [(key, str(v)) for v in values if v and Path(v).exists()]


def check_apart(writes: list[tuple[str, str | Path]], owns: list[Owned], reads: list[tuple[str, str]]) -> None:
    """A ConfigError unless every folder of `writes` ((key, folder)) lies outside every input of `reads` ((key, path),
    `local_paths`) and no input lies inside what the job `owns`."""
    inputs = [(key, given, Path(given).resolve()) for key, given in reads]
    for key, folder in writes:
        out = Path(folder).resolve()
        for k, given, real in inputs:
            if out.is_relative_to(real):
                raise ConfigError(f"{key}: {folder} ({out}) is inside {k} '{given}' ({real}): the job would write "
                                  f"among what it reads. Give --{key} a folder outside it.")
    for own in owns:
        for k, given, real in inputs:
            if own.holds(real) or own.holds(_location(given)):  # a link held there, or what it points to
                where = 'is one of' if own.names else 'is inside'
                other = f' or {own.other}' if own.other else ''
                raise ConfigError(f"{k}: {given} ({real}) {where} {own.shown()}, which this job writes ({own.key}) and "
                                  f"may replace: copy it elsewhere and give that to {k}, or give another "
                                  f"--{own.key}{other}.")


# The type of a key whose value is a path (or a name that may be one: a model, a corpus, a task): written as people write
# paths, `~`, `~user`, `$VAR`, `${VAR}`, `${VAR:-default}` and `${VAR-default}` are expanded where the value is read, in
# a preset, a task file, the command line or a notebook's overrides alike, as bash expands them (a shell expands none
# of them in a YAML file, nor `~` after a comma). `--help` shows its type as `path`.
path = typing.NewType('path', str)


_NAME = re.compile(r'\w+')
_PARAMETER = re.compile(r'(\w+)(?:(:?-)(.*))?', re.S)  # ${VAR}, ${VAR:-word} (unset or empty), ${VAR-word} (unset)
_SUPPORTED = '$X, ${X}, ${X:-default} and ${X-default}'


def _closing(text: str, i: int) -> int | None:
    "The index of the `}` that closes a `${` whose body starts at `i` (a `${...}` inside it nested), or None."
    depth = 1
    while i < len(text):
        if text.startswith('${', i): depth, i = depth + 1, i + 2
        elif text[i] == '}':
            depth -= 1
            if depth == 0: return i
            i += 1
        else: i += 1
    return None


def _variables(text: str, value: str, where: str) -> str:
    """`text` (part of `value`) with every `$VAR` and `${...}` of `_SUPPORTED` expanded as bash does; a variable that is
    not set and has no default, or a `${...}` bash would read otherwise (`${X:?}`, `${#X}`, ...), a ConfigError."""
    out, i = [], 0
    while i < len(text):
        if text[i] != '$':
            out.append(text[i])
            i += 1
            continue
        if not text.startswith('${', i):
            name = _NAME.match(text, i + 1)
            out.append(_variable(name.group(), value, where) if name else '$')
            i = name.end() if name else i + 1
            continue
        end = _closing(text, i + 2)
        m = _PARAMETER.fullmatch(text[i + 2:end]) if end is not None else None
        if m is None:
            shown = text[i:end + 1] if end is not None else text[i:]
            raise ConfigError(f"{where}: {value!r}: {shown} is a shell expansion this reader does not do: it expands "
                              f"{_SUPPORTED}; write the path out, or one of those (e.g. ${{X:-default}}).")
        name, op, word = m.groups()
        unset = name not in os.environ or (op == ':-' and not os.environ[name])
        out.append(_variables(word, value, where) if op and unset else _variable(name, value, where))
        i = end + 1
    return ''.join(out)


def _variable(name: str, value: str, where: str) -> str:
    "The environment variable `name`'s value; a ConfigError naming `where` when it is not set."
    if name not in os.environ:
        raise ConfigError(f"{where}: {value!r} names the environment variable {name!r}, which is not set: set it "
                          f"(export {name}=...), give a default (${{{name}:-default}}) or write the path out.")
    return os.environ[name]


def expand_path(value: str, where: str) -> str:
    """`value` with `~` and `~user` at the start of it or of any of its comma-separated parts (corpora, a generator and
    a discriminator) and every `$VAR`, `${VAR}`, `${VAR:-default}` and `${VAR-default}` expanded as bash does; a
    variable that is not set (without a default), a `${...}` bash reads otherwise, or a user without a home folder is a
    ConfigError naming `where`: left as written it would name a folder `$SCRATCH` in the current one."""
    parts = []
    for part in _variables(value, value, where).split(','):
        head = part.strip()
        if head.startswith('~'):
            expanded = os.path.expanduser(head)
            if expanded.startswith('~'):
                raise ConfigError(f"{where}: {value!r}: there is no user {head[1:].split('/')[0]!r} whose home folder "
                                  f"`{head.split('/')[0]}` names. Write ~/ for yours, or the path out.")
            part = part[:len(part) - len(part.lstrip())] + expanded
        parts.append(part)
    return ','.join(parts)

def _exists(value: str) -> bool:
    "Whether `value` names a file or folder here (a name too long for one, or holding a NUL, names none)."
    try: return Path(value).exists()
    except (OSError, ValueError): return False


def resolved(value: str, writes: bool = False, is_name: Callable[[str], bool] | None = None) -> str:
    """`value` of a path key as the absolute path the job reads or writes, so that a config saved and loaded from
    another folder names the same files (a run's config.yaml, its checkpoints, cards and rows): the current folder
    put before it, nothing else changed (a symbolic link stays the link, which the folder checks tell from its target:
    `check_apart`). A folder the job writes (`writes`) always, an input where it names a file or folder here, each part
    of a comma-separated pair (init_from's GENERATOR,DISCRIMINATOR) alike. A name the key takes
    (`is_name`: 'demo', 'hub:...', a GLUE task) is kept as written, as is a value naming nothing here: a hub name, as
    the readers tell one from a local folder (`Path.exists`, `pretrained.export.model_source`), or a path the job
    refuses naming it as it was written."""
    if not value or (is_name is not None and is_name(value)): return value
    if writes or _exists(value): return str(Path(value).absolute())
    if ',' in value: return ','.join(resolved(part.strip(), writes, is_name) for part in value.split(','))
    return value


def made_absolute(then, now) -> bool:
    """Whether a value a checkpoint or a record kept, `then`, is `now` as a config keeps its paths since (`resolved`): a
    path (or a list of them) an earlier version kept as typed, relative, which names from here what `now` names."""
    if isinstance(then, list) and isinstance(now, list):
        return len(then) == len(now) and all(a == b or made_absolute(a, b) for a, b in zip(then, now))
    return isinstance(then, str) and isinstance(now, str) and then != now and resolved(then) == now


def check_case_apart(key: str, parent: str | Path, folder: str, what: str, named: Callable[[str], str]) -> None:
    """A ConfigError when `parent` holds a folder whose name differs from `folder` only in case or Unicode form
    (`name_key`): on a case-insensitive file system (macOS, Windows), or on macOS for the form, the two are one, and the
    job would write into (resume, replace) the other's. `named`: the value of `key` that gives the folder there."""
    try: there = sorted(os.listdir(parent))
    except OSError: return  # not made yet (nothing to meet), or not readable: the writable check names it
    twin = next((n for n in there if n != folder and name_key(n) == name_key(folder)), None)
    if twin is not None:
        how, where = how_names_differ(folder, twin)
        raise ConfigError(f"{key}: the {what} folder {folder!r} differs {how} from {Path(parent) / twin}, there "
                          f"already: {where}, they are one folder. Give --{key} {named(twin)} to continue that {what}, "
                          "or another name.")
