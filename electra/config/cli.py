"""One explicit config object per job, read from the command line: dataclass defaults < YAML presets (`--config`, each
over the presets its own `config:` key names) < `--key value` flags < a notebook's overrides (`load_config`). `--help`
lists every key with the value this command would run with, its domain and its help text; `--version` names the
library. Every value is checked as `config/values.py` checks it, before any job starts."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from electra.config.errors import ConfigError, RunWarning, UnknownTask, did_you_mean
from electra.config.paths import expand_path
from electra.config.text_files import read_text
from electra.config.values import checked_config, key_types, located, typed_values, with_entry_sources
from electra.config.version import version_line
from electra.config.yaml_reader import load_yaml

__all__ = ['running_in_notebook', 'cli_args', 'load_config', 'parse_cli', 'config_help', 'project_dir', 'resolve_preset', 'preset_keys', 'SOURCES_VAR']

# set by the comparison for each job it launches: where each value it passes on the job's command line came from
SOURCES_VAR = 'ELECTRA_VALUE_SOURCES'


def _read_yaml(path: Path, lines: dict, named_by: str) -> dict[str, Any]:
    """The mapping of a YAML config file; `lines` filled with the line of each key. A file that sets no key (empty,
    comments only: a file not saved yet, most likely) is refused, naming where it was given (`named_by`): read, it
    would run the defaults in silence."""
    data = load_yaml(read_text(path), str(path), lines)
    if data is None or data == {}:
        raise ConfigError(f"{path}: sets no key (the file is empty or holds only comments): write the keys it sets in "
                          f"it, or leave it out of {named_by}.")
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


def _written_as_path(name: str) -> bool:
    "Whether `name` is written as a path: a folder in it, `.` or `~` or `$` at its start, or a YAML file's ending."
    return ('/' in name or os.sep in name or name.startswith(('.', '~', '$'))
            or Path(name).suffix.lower() in ('.yaml', '.yml'))


def resolve_preset(name: str, preset_dir: Path, where: str = '--config', beside: Path | None = None) -> Path:
    """The file `--config` names by `name`, by how it is written, never by what lies in the current folder: a bare name
    of a shipped preset (`small`, as the README spells it) is that preset, a file of that name here said in a warning
    (`./small` reads it); a value written as a path (`./bert`, `~/x`, `mine.yaml`) is that file, or an error naming it;
    another bare name is a file here if there is one (`mine`, YAML without an extension), else an unknown preset. A
    folder is never a preset file. `where` names the value in messages: `--config`, or a preset file's `config` key.
    `beside`: the folder a relative path is read from, that of the preset file whose `config` key gives `name` (as an
    include is, so a folder of presets means the same wherever a job starts), else the current folder."""
    shipped = preset_dir / f'{name}.yaml'
    local = lambda p: Path(p) if beside is None else beside / p  # (an absolute p stays itself)
    if not _written_as_path(name) and shipped.is_file():
        if local(name).is_file():  # warned, not refused: the README's commands run whatever else lies in the folder
            warnings.warn(f"{where}: '{name}' is the shipped preset {shipped}, which is read; a file {name} is also "
                          f"in {'this folder' if beside is None else beside} ({local(name).resolve()}), not read: give "
                          f"{'--config ' if where == '--config' else ''}./{name} to read that file instead.",
                          RunWarning, stacklevel=3)
        return shipped
    path = local(expand_path(name, where))
    if path.is_file(): return path
    if path.is_dir():
        raise ConfigError(f"{where}: '{name}' is a folder, not a YAML file: give a preset file in it, or a preset name.")
    if _written_as_path(name):
        yaml_there = [f'{name}{ext}' for ext in ('.yaml', '.yml') if Path(f'{path}{ext}').is_file()]
        there = f" ({yaml_there[0]} is there: give that)" if yaml_there else ''
        looked = '' if beside is None else f" (looked for in {beside}, the folder of the file that names it)"
        raise ConfigError(f"{where}: no such file '{name}'{there}{looked}.")
    names = sorted(p.stem for p in preset_dir.glob('*.yaml'))
    raise ConfigError(f"{where}: unknown preset '{name}'.{did_you_mean(name, names)} "
                      f"Choose one of {', '.join(names)} or give a path to a YAML file.")


def _preset_names(chain: str, where: str) -> list[str]:
    "The names of a preset chain, 'small,bert'; one left empty (a trailing or double comma) refused, naming `where`."
    names = [name.strip() for name in str(chain).split(',')]
    if '' in names:  # (an empty name would be the current folder's path)
        fix = f"give {','.join(n for n in names if n)!r}" if any(names) else 'give a preset name or a YAML file'
        raise ConfigError(f"{where}: {str(chain)!r} holds an empty preset name (a trailing or double comma): {fix}.")
    return names


def _preset_files(cls, names: list[str], preset_dir: Path, where: str = '--config',
                  under: tuple[Path, ...] = ()) -> Iterator[tuple[Path, dict, dict]]:
    """Each preset file of the chain `names` (given by `where`) as (path, its values, the line of each key), in the
    order they apply. A file's own `config` key names the presets it is layered over, read as `--config` reads them
    but for a relative path, read from the file's own folder (`config: demo` in ext.yaml is `--config demo,ext.yaml`;
    `config: ./base.yaml` is the base.yaml beside it): those come first, then the file's other keys. `under`:
    the files whose `config` key led here, so that a file layered under itself is refused."""
    for name in names:
        path, lines = resolve_preset(name, preset_dir, where, under[-1].parent if under else None), {}
        if any(path.resolve() == p.resolve() for p in under):
            raise ConfigError(f"{where}: {path} is layered under itself ({' -> '.join(map(str, (*under, path)))}): "
                              "remove the key 'config' that closes the cycle.")
        data = _read_yaml(path, lines, where)
        if 'config' in data and 'config' in key_types(cls):
            own = f"{path}: line {lines[('config',)]}: key 'config'"
            chain = data.pop('config')
            if isinstance(chain, list) and all(isinstance(c, str) for c in chain): chain = ','.join(chain)  # a YAML list
            chain = typed_values(cls, {'config': chain}, str(path), True, lines)['config']
            yield from _preset_files(cls, _preset_names(chain, own), preset_dir, own, (*under, path))
        yield path, data, lines


def preset_keys(cls, chain: str, where: str = '--config') -> list[str]:
    """The keys the presets of `chain` set (with those their own `config` keys layer under them), in their order;
    none for an empty chain. What reading the chain says (a file beside a shipped name) `load_config` says."""
    if not chain.strip(): return []
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RunWarning)
        files = _preset_files(cls, _preset_names(chain, where), project_dir(cls.PRESETS))
        return list(dict.fromkeys(k for _, data, _ in files for k in data))


def config_help(cls, prog: str, preset_dir: Path, cfg, preset: str, flags: bool = False) -> str:
    """Every key of `cls` with its value in `cfg` (what the job runs with: `preset`, then the command line's other
    flags when `flags`), its dataclass default beside it where that differs, its domain and its help text."""
    given = ' and the flags given' if flags else ''
    lines = [f"usage: {prog} [--config PRESET_OR_YAML[,PRESET ...]] [--key value ...] [--version]", '',
             f"Presets in {preset_dir}: {', '.join(sorted(p.stem for p in preset_dir.glob('*.yaml')))}", '',
             f'keys (their value with --config {preset}{given}; the default where it differs):']
    hints = key_types(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        tp = getattr(hints[f.name], '__name__', str(hints[f.name]).replace('typing.', ''))
        value, domain = getattr(cfg, f.name), f.metadata.get('domain')
        takes = f": {'; '.join([domain.words(hints[f.name]), *domain.meanings()])}" if domain else ''
        lines.append(f"  --{f.name} ({tp}, {value!r}{'' if value == default else f'; default {default!r}'}){takes}")
        if f.metadata.get('help'): lines.append(f"      {f.metadata['help']}")
    return '\n'.join(lines)


def parse_cli(argv: Sequence[str]) -> dict[str, str]:
    """`--key value` / `--key=value` pairs into a dict; a bare `--flag` means true. A key given twice takes the last,
    as argparse does (a wrapper script's flags, then the run's own), said in a warning naming both as typed."""
    out, typed, i, argv = {}, {}, 0, list(argv)
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith('--'):
            raise ConfigError(f"unexpected argument {arg!r}: options are written --key value.")
        key, as_typed = arg[2:], arg
        if '=' in key: key, value = key.split('=', 1)
        elif i + 1 < len(argv) and not argv[i + 1].startswith('--'):
            value, as_typed, i = argv[i + 1], f'{arg} {argv[i + 1]}', i + 1
        else: value = 'true'
        key = key.replace('-', '_')
        if key in out:
            warnings.warn(f"{key}: given twice on the command line ({typed[key]}, then {as_typed}): the last is "
                          "taken.", RunWarning, stacklevel=2)
        out[key], typed[key] = value, as_typed
        i += 1
    return out


def _handed_sources() -> dict[str, str]:
    """Where each value of this job's command line came from, as the comparison that launched it says (SOURCES_VAR, a
    JSON mapping of key to source); {} for a job started otherwise."""
    text = os.environ.get(SOURCES_VAR, '')
    try: handed = json.loads(text) if text else {}
    except ValueError: handed = None
    if not (isinstance(handed, dict) and all(isinstance(v, str) for v in handed.values())):
        raise ConfigError(f"environment: {SOURCES_VAR}={text[:80]!r} is not a JSON mapping of key to source (a "
                          "comparison sets it for each job it launches): unset it.")
    return handed


def running_in_notebook() -> bool:
    "True inside Jupyter (the driver then takes its notebook config cell, not the command line)."
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and 'IPKernelApp' in getattr(shell, 'config', {})


def cli_args() -> list[str]:
    "The command-line flags of a script; none inside a notebook, whose kernel has its own argv (`-f kernel.json`)."
    return [] if running_in_notebook() else sys.argv[1:]


def _preset_entry_refused(e: UnknownTask, place: str) -> ConfigError:
    "The refusal of a preset's task_overrides entry for a task the job does not run (`place`: the preset's line)."
    runs = f" (its task files: {', '.join(e.files)})" if e.files else ''
    return ConfigError(f"{place}: task_overrides: the preset's entry for the task '{e.name}', which this job does not "
                       f"run{runs}. Give --task_overrides '{{}}' to drop the preset's entries (and a key for every "
                       "task, such as --max_length 64, where one was meant), or a preset of your own.")


def load_config(cls, argv: Sequence[str] | None = None, preset_dir: str | Path | None = None,
                default_preset: str = 'demo', prog: str = 'job', overrides: dict | None = None):
    """The job's config: `cls` defaults, then the presets named by `--config` (or `default_preset`; several,
    comma-separated, apply left to right; each over those its own `config` key names), then the other flags in
    `argv` (None: the script's command line, none in a notebook: `cli_args`), then `overrides` (a dict, as a
    notebook's config cell gives). `preset_dir`: where bare names are looked up, the job's shipped presets
    (`cls.PRESETS`) unless given. `--help` and `--version` print and exit."""
    preset_dir = project_dir(cls.PRESETS if preset_dir is None else preset_dir)
    argv = cli_args() if argv is None else list(argv)
    if '--version' in argv:  # before the config is read: a broken preset still says which library it meets
        print(version_line(prog))
        raise SystemExit(0)
    wants_help = '--help' in argv or '-h' in argv
    cli = parse_cli([a for a in argv if a not in ('--help', '-h')])
    overrides = dict(overrides or {})
    if both := sorted(set(cli) & set(overrides)):  # the overrides would win, unsaid (a script exported with them)
        k = both[0]
        raise ConfigError(f"{k}: set on the command line (--{k} {cli[k]}) and in the overrides ({k}: {overrides[k]!r}), "
                          "which would win: give it in one of them (a script's overrides are for a notebook; as a "
                          "script, give the command line's alone).")
    named_by = 'command line' if 'config' in cli else 'overrides' if 'config' in overrides else None
    preset = cli.pop('config', None) or overrides.pop('config', None) or default_preset
    # 'small,bert': presets applied left to right, a size and then an objective variant; the whole config is checked
    # once, after the command line and `overrides`: a preset's task file replaced by --tasks is never read
    values: dict[str, Any] = {}
    origins: dict[str, tuple] = {}  # where each value came from (the last to set it), for the domains' messages
    for path, data, lines in _preset_files(cls, _preset_names(preset, '--config'), preset_dir):
        values.update(typed_values(cls, data, str(path), True, lines, origins))
    if 'config' in key_types(cls):  # the chain as given: a file's own `config` key is in the file, not repeated here
        values['config'] = str(preset)
        if named_by: origins['config'] = (named_by, None)
    from_presets, preset_origins = dict(values), dict(origins)
    given = {**typed_values(cls, cli, 'command line', False, origins=origins),
             **typed_values(cls, overrides, 'overrides', False, origins=origins)}
    values.update(given)
    if hasattr(cls, 'command_line_wins'):
        values = cls.command_line_wins(values, set(given), from_presets, {k: origins[k][0] for k in given})
    try: cfg = checked_config(cls, values, origins, handed=_handed_sources())
    except UnknownTask as e:  # a preset's per-task entry: named by its file and line, with the fix
        typed, ours = given.get('task_overrides'), from_presets.get('task_overrides')
        typed_it = isinstance(typed, dict) and e.name in typed  # (then the user's own entry: refused as it is)
        if e.key != 'task_overrides' or not isinstance(ours, dict) or e.name not in ours or typed_it: raise
        raise _preset_entry_refused(e, located(*preset_origins['task_overrides'], ('task_overrides', e.name))) from None
    if isinstance(given.get('task_overrides'), dict):  # merged over the preset's (`command_line_wins`): their sources
        kept = [e for e in cfg.task_overrides if e not in given['task_overrides']]
        origin = preset_origins.get('task_overrides')
        with_entry_sources(cfg, 'task_overrides', {e: located(*origin, ('task_overrides', e)) if origin else 'default'
                                                   for e in kept})
    if wants_help:  # the values this very command would run with
        print(config_help(cls, prog, preset_dir, cfg, str(preset), flags=bool(cli or overrides)))
        raise SystemExit(0)
    if hasattr(cfg, 'check_folders'): cfg.check_folders()  # a job's outputs apart from its inputs (config/paths.py)
    return cfg
