"""A config's values: each converted to its key's type and checked against the domain the key declares beside its
default (`config/fields.py`, with pydantic), and refused in one line that names where it came from (the file and line,
the command line), the key, the value, the domain and what the key means; then the job config's own `validate`, for
what relates several keys (max_length within max_position_embeddings, ...). `config_from_dict` builds a config from
saved values (a run's config.yaml, a checkpoint's), `config_to_dict` is its inverse and `value_sources` says where each
value came from. A config built in Python (`FinetuneConfig(lr=...)`, `dataclasses.replace`) is checked the same way,
where it is built (`CheckedConfig`, the base of every config class), its values recorded as given by 'Python'. A path
key's value is kept as the absolute path it names (config/paths.py `resolved`).
"""
from __future__ import annotations

import contextvars
import copy
import dataclasses
import functools
import re
import types
import typing
from typing import Any

import pydantic

from electra.config.errors import ConfigError, did_you_mean
from electra.config.fields import Domain
from electra.config.paths import expand_path, path, resolved
from electra.config.text_files import MAX_DIGITS
from electra.config.yaml_reader import load_yaml

__all__ = ['CheckedConfig', 'config_from_dict', 'config_to_dict', 'value_sources', 'entry_sources', 'typed_keys',
           'with_entries', 'with_entry_sources', 'located', 'typed_values', 'checked_config', 'key_types', 'resolved_entries', 'BOOL_WORDS',
           'RETIRED_KEYS', 'PYTHON']


@functools.lru_cache(maxsize=None)
def _adapter(tp, domain: Domain) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(domain.annotated(tp))


@functools.lru_cache(maxsize=None)
def key_types(cls) -> dict[str, Any]:
    "The type of each key of the config class `cls`, by name (read once: every config built asks)."
    return typing.get_type_hints(cls)


_TRUE, _FALSE = {'true', 'yes', '1', 'on'}, {'false', 'no', '0', 'off'}
BOOL_WORDS = _TRUE | _FALSE  # how a bool may be written on the command line


# a whole number YAML 1.1 reads in another base (`010` octal, `0x10`, `0b10`, `1:30` base 60) or Python in hexadecimal,
# octal or binary (`0o10`): one value on one surface and another (or none) on the next, so refused on all of them
_OTHER_BASE = re.compile(r'[-+]?(0[0-9_]+|0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*(:[0-9_]+)+)')


def _other_base(text: str, where: str) -> None:
    "A ConfigError naming the decimal to write when `text` is a whole number in a form of `_OTHER_BASE`."
    if not _OTHER_BASE.fullmatch(text.strip()): return
    sign, digits = ('-' if text.strip().startswith('-') else ''), text.strip().lstrip('+-').replace('_', '')
    if ':' in digits: meant, how = functools.reduce(lambda n, d: n * 60 + int(d or 0), digits.split(':'), 0), 'base 60'
    elif digits[1:2].isdigit() or len(digits) == 1: meant, how = int(digits), 'octal'
    else: meant, how = int(digits, 0), {'x': 'hexadecimal', 'o': 'octal', 'b': 'binary'}[digits[1].lower()]
    decimal = sign + str(meant) if len(digits) <= MAX_DIGITS else 'it'  # (no setting takes more digits: `MAX_DIGITS`)
    raise ConfigError(f"{where}: {text[:40]!r} is a whole number in a form that YAML 1.1 reads in {how} and a flag "
                      f"otherwise: write {decimal} in decimal digits without a leading zero, or quote it where text "
                      "is meant.")


_SPECIAL = re.compile(r'[-+]?\.(inf|Inf|INF|nan|NaN|NAN)')  # YAML's infinity and NaN: a number key's domain judges them


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
            _other_base(value, where)
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
            _other_base(value, where)
            try: return float(value.replace('.', '', 1) if _SPECIAL.fullmatch(value) else value)
            except ValueError: pass
        raise ConfigError(f"{where}: expected a number, got {value!r}.")
    if tp is path: return expand_path(_coerce(value, str, where), where)
    if tp is str:  # (a YAML fraction: `1.50` was read as 1.5, what was written is lost)
        if isinstance(value, float):
            raise ConfigError(f"{where}: expected a string, got the number {value!r} (YAML reads a fraction such as "
                              "1.50 as a number, 1.5): quote it to keep the characters written.")
        if isinstance(value, (str, int)) and not isinstance(value, bool): return str(value)
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
PYTHON = 'Python'  # the source of a value a config was given in Python: `FinetuneConfig(lr=1e-4)`, `dataclasses.replace`
# where a value typed for this invocation comes from: the command line, a notebook's overrides, Python (`typed_keys`)
_TYPED = ('command line', 'overrides', PYTHON)


def located(source: str, lines: dict | None, path: tuple) -> str:
    "`source` with the line of the key at `path` (of the nearest mapping above it that has one), when known."
    for n in range(len(path), 0, -1):
        if lines and path[:n] in lines: return f'{source}: line {lines[path[:n]]}'
    return source


def _in_domain(f: dataclasses.Field, tp, value: Any, where: str) -> None:
    """`value` (of type `tp`) checked against the declared domain of the config field `f`; else a ConfigError:
    '<where>: <value> is not <domain> (<what 0 means>; <what the key is>)'."""
    domain = f.metadata.get('domain', Domain())
    if f.metadata.get('writes') and isinstance(value, str) and not value.strip():  # kept as '': the folder of the moment
        raise ConfigError(f"{where}: {value!r} names no folder (an empty value, or a $VARIABLE set to nothing): give "
                          "one ('.' for the current folder).")
    try: _adapter(tp, domain).validate_python(value, strict=True)
    except pydantic.ValidationError as e:
        huge = any(err['type'] == 'less_than_equal' for err in e.errors()) and domain._upper() is None
        choices_only = domain.choices and tp is str  # the choices say what the key is
        what = '' if choices_only else f.metadata.get('help', '').split('; ')[0]
        about = [*domain.meanings(), *([what] if what else [])]
        raise ConfigError(f"{where}: {value!r} is not {domain.words(tp, huge)}"
                          + (f" ({'; '.join(about)})" if about else '')) from None


# a config of more keys than this is pointed to by its class alone: its keys would make the line unreadable
_LISTED_KEYS = 20


def _keys_pointer(cls, source: str, names: list[str]) -> str:
    """Where the keys an unknown key is not among are listed, by where it was typed: a command line or a preset has
    its script's --help (the comparison's launcher names the script, `experiments.plan._keys_hint`); a notebook's
    `overrides` and Python have none, so the keys of its config class are named (the class alone for one of many keys,
    whose script's --help lists them)."""
    if source not in ('overrides', PYTHON): return 'Run with --help for the list of keys.'
    where = f'{cls.__module__}.{cls.__qualname__}'
    return f"The keys of {where}: {', '.join(names)}." if len(names) <= _LISTED_KEYS else f"{where} lists the keys."


def _unknown(cls, key, where: str, source: str):
    "The refusal of `key`, which `cls` has not, given by `source` (`where`: with its line)."
    names = [f.name for f in dataclasses.fields(cls)]
    raise ConfigError(f"{where}: unknown key {str(key)!r}.{did_you_mean(str(key), names)} "
                      f"{_keys_pointer(cls, source, names)}")


def typed_values(cls, values: dict[str, Any], source: str, from_file: bool, lines: dict | None = None,
                  origins: dict | None = None) -> dict[str, Any]:
    """`values` with every key checked against `cls` and every value converted to its type; `source` names them in
    errors, with the line of each key when `lines` has it (`load_yaml`). `origins`: filled with each key's source and
    lines, for `_in_domains`."""
    hints, typed = key_types(cls), {}
    for key, value in values.items():
        if from_file and key in RETIRED_KEYS: continue
        where = located(source, lines, (str(key),))
        if key not in hints: _unknown(cls, key, where, source)
        typed[key] = _coerce(value, hints[key], f"{where}: key '{key}'")
        if origins is not None: origins[key] = (source, lines)
    return typed


def _in_domains(cls, values: dict[str, Any], origins: dict) -> None:
    """Each value of `values` that a file, the command line or overrides gave (`origins`: its source and lines) in its
    key's domain, and each entry of a key with `entries` (task_overrides) in the domain of its own key. Checked on the
    config's final values: a preset's value that a later preset or the command line replaces is not judged."""
    hints, fields = key_types(cls), {f.name: f for f in dataclasses.fields(cls)}
    for key, (source, lines) in origins.items():
        _in_domain(fields[key], hints[key], values[key], f"{located(source, lines, (key,))}: key '{key}'")
        for name, entry in (values[key].items() if fields[key].metadata.get('entries') else ()):
            for k, v in (entry.items() if isinstance(entry, dict) else ()):  # (`validate` names a bad entry or key)
                if k in fields[key].metadata['entries']:
                    where = f"{located(source, lines, (key, str(name), str(k)))}: key '{key}.{name}.{k}'"
                    _in_domain(fields[k], hints[k], _coerce(v, hints[k], where), where)


def checked_config(cls, values: dict[str, Any], origins: dict, base=None, handed: dict | None = None):
    """The `cls` of `values` (typed), those given (`origins`) in their domains and its own `validate` checked, as
    `CheckedConfig` checks every config: what reads files runs here, once. It keeps where each given value came from
    (`value_sources`), over `base`'s, and which this invocation typed (`typed_keys`). `handed`: for a job a comparison
    launched, where each value its command line got came from (the comparison's preset line, its command line),
    recorded instead of 'command line'."""
    if not issubclass(cls, CheckedConfig): raise TypeError(f'{cls.__qualname__} is not a CheckedConfig')
    typed = {k for k, (source, _) in origins.items() if source in _TYPED}
    origins = {k: (handed[k], None) if source == 'command line' and k in (handed or {}) else (source, lines)
               for k, (source, lines) in origins.items()}
    token = _BUILDING.set((origins, typed, base))
    try: return cls(**values)
    finally: _BUILDING.reset(token)


# what `checked_config` knows of the values of the config it builds (their sources, the keys typed, the config they
# were merged over), for `CheckedConfig.__post_init__`; None for a config built in Python
_BUILDING: contextvars.ContextVar = contextvars.ContextVar('electra_config_building', default=None)


class CheckedConfig:
    """The base of every config class (a dataclass of `field`s): however it is built, from a preset, the command line,
    a notebook's overrides (`checked_config`) or in Python (`FinetuneConfig(lr=-1)`, `dataclasses.replace`, `cfg.lr = -1`
    on a built config: `__setattr__`), each
    value given is converted to its key's type and checked against its domain, and the config's `validate` checks
    the rules between keys, by the same code, before anything uses it: a bad value is refused in one line naming the
    key, never taken to fail deep inside a job (ElectraAdam's lr, a task list read by characters). A value given in
    Python is read as the command line reads one (`~` and `$VAR` of a path, '3' for 3), copied (the caller's list
    changed afterwards is not the config's), and recorded as given by 'Python' (`value_sources`); a path key's value
    is the absolute path it names (config/paths.py `resolved`)."""

    def __new__(cls, *args, **kwargs):
        # an unknown keyword is refused as an unknown key is on the other surfaces, not as Python's TypeError
        keys = [f.name for f in dataclasses.fields(cls) if f.init]
        for key in (k for k in kwargs if k not in keys): _unknown(cls, key, PYTHON, PYTHON)
        cfg = super().__new__(cls)
        if args or kwargs: cfg._given = frozenset(keys[:len(args)]) | frozenset(kwargs)  # (a copy, unpickled: none)
        return cfg

    def __post_init__(self) -> None:
        building = _BUILDING.get()
        _BUILDING.set(None)  # (a config that `validate` builds in its turn is built by a call of its own)
        given = self.__dict__.pop('_given', frozenset())  # the keys its constructor was called with (`__new__`)
        origins, typed, base = building if building is not None else _given_in_python(self, given)
        _in_domains(type(self), config_to_dict(self), origins)
        hints = key_types(type(self))
        for f in dataclasses.fields(self):
            setattr(self, f.name, _resolved_paths(f, hints[f.name], getattr(self, f.name)))
        self._typed = (getattr(base, '_typed', frozenset()) - origins.keys()) | typed
        self._sources = {**getattr(base, '_sources', {}),
                         **{k: located(source, lines, (k,)) for k, (source, lines) in origins.items()}}
        # each entry of a mapping given (its own line in a file), for `with_entries` to keep when it merges others in
        self._entry_sources = {**getattr(base, '_entry_sources', {}),
                               **{k: {e: located(source, lines, (k, e)) for e in getattr(self, k)}
                                  for k, (source, lines) in origins.items() if isinstance(getattr(self, k), dict)}}
        if hasattr(self, 'validate'): self.validate()
        self.__dict__['_built'] = True

    def _set_recorded(self, key: str, value: Any, source: str | None = None) -> None:
        """`key` set to `value` by the library itself (what the run's tokenizer or checkpoint says), sourced to `source`
        (None: its source kept): not a value given, so neither checked as one nor typed (`__setattr__`)."""
        self.__dict__[key] = value
        if source is not None: self._sources = {**getattr(self, '_sources', {}), key: source}

    def __setattr__(self, name: str, value: Any) -> None:
        # a key set on a built config (`cfg.lr = -1` in a notebook) is checked as one given in Python, with the rules
        # between keys: a config of the new value is built over this one and taken whole, or refused in one line and
        # this one left as it was (task_overrides keep their per-task values, as `FinetuneConfig(epochs=2, ...)` does).
        # While it is built (the dataclass's __init__, `__post_init__`) a value is just set.
        # A name that is no key is refused as the constructor refuses it (`cfg.max_len = 32` for max_length set an
        # attribute no job reads); the library's own (a leading `_`) and the class's attributes are set as they are.
        if not self.__dict__.get('_built'): return super().__setattr__(name, value)
        keys = [f.name for f in dataclasses.fields(self) if f.init]
        if name not in keys:
            if not (name.startswith('_') or hasattr(type(self), name)): _unknown(type(self), name, PYTHON, PYTHON)
            return super().__setattr__(name, value)
        if name == 'config': _refuse_preset(type(self), value)
        values = {k: getattr(self, k) for k in keys} | {name: _python_value(type(self), name, value)}
        self.__dict__.update(vars(checked_config(type(self), values, {name: (PYTHON, None)}, base=self)))


def _is_default(f: dataclasses.Field, value: Any) -> bool:
    "Whether `value` of the field `f` is its default, of the same type (True is not a default 1)."
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return type(value) is type(default) and value == default


def _given_in_python(cfg, given: frozenset) -> tuple[dict, set, None]:
    """The keys `cfg`'s constructor was `given` in Python, each value converted to its key's type as the command line's
    value is (`_coerce`) and copied, set on `cfg`; their origins ('Python'), the keys typed (they win as the command
    line's do: `FinetuneConfig.for_task`), no base config. `dataclasses.replace` gives every key, those it was not asked
    to change too: a key is then given where its value is not its default (the others keep the rules a default has, a
    task kind's own max_length over it)."""
    fields = [f for f in dataclasses.fields(cfg) if f.init]
    if given == {f.name for f in fields}: given = {f.name for f in fields if not _is_default(f, getattr(cfg, f.name))}
    elif 'config' in given: _refuse_preset(type(cfg), getattr(cfg, 'config'))  # (replace keeps load_config's preset)
    origins = {}
    for f in (f for f in fields if f.name in given):
        setattr(cfg, f.name, _python_value(type(cfg), f.name, getattr(cfg, f.name)))
        origins[f.name] = (PYTHON, None)
    return origins, set(origins), None


def _refuse_preset(cls, preset: Any) -> None:
    "A preset named in Python (`config`): a config class does not read presets; `load_config` does, so it is refused."
    raise ConfigError(f"{PYTHON}: key 'config': {cls.__name__}(config=...) names a preset but does not apply it (its "
                      f"values would stay the class's defaults). Build the config with electra.load_config("
                      f"{cls.__name__}, [], overrides={{'config': {str(preset)!r}, ...}}), which applies the preset, "
                      "then your values.")


def _python_value(cls, key: str, value: Any) -> Any:
    "A `value` given in Python for `key` of `cls`, converted to its type as the command line's is (`_coerce`), copied."
    return _coerce(copy.deepcopy(value), key_types(cls)[key], f"{PYTHON}: key '{key}'")


def _is_path(tp) -> bool:
    "Whether a key of type `tp` holds a path or a list of them."
    return tp is path or (typing.get_origin(tp) is list and typing.get_args(tp) == (path,))


def _resolved_paths(f: dataclasses.Field, tp, value: Any) -> Any:
    "`value` (of type `tp`) of the field `f`, a path key's (or a list of them's) as the absolute paths it names."
    resolve = functools.partial(resolved, writes=f.metadata.get('writes', False), is_name=f.metadata.get('names'))
    if tp is path: return resolve(value)
    return [resolve(v) for v in value] if _is_path(tp) else value


def resolved_entries(cls, values: dict) -> dict:
    """`values`, keys of the config class `cls` (a comparison's overrides for its jobs), with each path key's value as
    `cls` keeps it, its local paths absolute (`resolved`); a value its key's type cannot read, and every other key's,
    left as it is (the job reading them refuses what it must, naming it)."""
    hints, fields, out = key_types(cls), {f.name: f for f in dataclasses.fields(cls)}, dict(values)
    for key, value in values.items():
        if key not in hints or not _is_path(hints[key]): continue
        try: out[key] = _resolved_paths(fields[key], hints[key], _coerce(value, hints[key], key))
        except ConfigError: pass
    return out


def with_entries(cfg, key: str, entries: dict, source: str):
    """`cfg` with `entries` (given by `source`) merged into its mapping `key`, checked; each entry keeps where it came
    from, and `value_sources` gives the key's entries each with its own source when they came from several places."""
    was = entry_sources(cfg, key)
    out = config_from_dict(type(cfg), {key: {**getattr(cfg, key), **entries}}, source=source, base=cfg, from_file=False)
    return with_entry_sources(out, key, {e: source if e in entries else was[e] for e in getattr(out, key)})


def with_entry_sources(cfg, key: str, each: dict[str, str]):
    """`cfg`, its mapping `key`'s entries of `each` recorded as coming from where `each` says (the others keep
    theirs); `value_sources` gives each entry with its source when they came from several places."""
    cfg._entry_sources[key] = each = {**entry_sources(cfg, key), **each}
    if len(set(each.values())) > 1: cfg._sources[key] = '; '.join(f'{e}: {where}' for e, where in each.items())
    return cfg


def entry_sources(cfg, key: str) -> dict[str, str]:
    "Where each entry of the mapping `key` of `cfg` came from: its own line in a file, else the key's source."
    own, whole = getattr(cfg, '_entry_sources', {}).get(key, {}), value_sources(cfg)[key]
    return {e: own.get(e, whole) for e in getattr(cfg, key)}


def typed_keys(cfg) -> frozenset[str]:
    """The keys of `cfg` this invocation typed (the command line, a notebook's overrides; a comparison's job: what the
    comparison passed, whatever source it records): they win over a task file's own values (`for_task`)."""
    return getattr(cfg, '_typed', frozenset())


def config_from_dict(cls, values: dict[str, Any], source: str = 'config', base=None, from_file: bool = True,
                     lines: dict | None = None):
    """Build a `cls` from `values` (over `base` or the defaults), checking every key, type and domain. `from_file`:
    `values` were saved by a file or checkpoint, whose retired keys are skipped; `lines`: the line of each key in it."""
    current, origins = config_to_dict(base) if base is not None else {}, {}
    return checked_config(cls, {**current, **typed_values(cls, values, source, from_file, lines, origins)}, origins, base)


def config_to_dict(cfg) -> dict[str, Any]:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def value_sources(cfg) -> dict[str, str]:
    """Where each value of a config read by `load_config` or `config_from_dict` came from: a preset file and its line,
    'command line', 'overrides' (a notebook's), 'task_overrides.<task>'; 'default' for the dataclass default; a mapping
    merged from several places (`with_entries`) 'entry: source; ...'; in a job a comparison launched, what the comparison
    passed as the comparison says (`checked_config`'s `handed`: 'configs/compare/demo.yaml: line 8 (through the
    comparison demo)', 'the comparison demo: its budget (flops)')."""
    given = getattr(cfg, '_sources', {})
    return {f.name: given.get(f.name, 'default') for f in dataclasses.fields(cfg)}

