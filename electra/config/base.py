"""One explicit config object per job: dataclass defaults < YAML preset < `--key value` overrides.

Every key is typed and declares its domain beside its default (`field(..., gt=0)`, `choice_field`): when the config
is read, before any job starts, each value is converted to its key's type and checked against its domain (with
pydantic), and refused in one line that names where it came from (the file and line, the command line), the key, the
value, the domain and what the key means. `--help` lists every key with its value, its domain and its help text.
What relates several keys (max_length within max_position_embeddings, ...) is each job config's own `validate`.
"""
from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from pathlib import Path
from typing import Any, Sequence

import pydantic

from electra.config.errors import ConfigError, did_you_mean
from electra.config.fields import Domain
from electra.config.paths import expand_path, path
from electra.config.text_files import read_text
from electra.config.version import version_line
from electra.config.yaml_reader import load_yaml

__all__ = ['config_help', 'load_config', 'config_to_dict', 'config_from_dict', 'value_sources']


@functools.lru_cache(maxsize=None)
def _adapter(tp, domain: Domain) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(domain.annotated(tp))


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


_TRUE, _FALSE = {'true', 'yes', '1', 'on'}, {'false', 'no', '0', 'off'}
BOOL_WORDS = _TRUE | _FALSE  # how a bool may be written on the command line


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
