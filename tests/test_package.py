"""The package (pyproject.toml, setup.py): the wheel `pip install .` builds, read back. It requires exactly
requirements.txt's runtime lines (test tools only with the `tests` extra), each `# extra:` group of requirements.txt is
an extra, it holds the library, the presets and the drivers' copies, and its console commands are the drivers. The
wheel installed and its commands run from another folder: .ci/package_check.sh."""
from __future__ import annotations

import email.parser
import importlib
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from electra.jobs import commands
from tests.support.config import expected_from_python, from_python

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ('pyproject.toml', 'setup.py', 'README.md', 'LICENSE', 'MANIFEST.in', 'electra', 'configs', 'pretrain.py',
           'finetune.py')  # what the build reads
DRIVERS = ('pretrain.py', 'finetune.py')
COMMANDS = {'electra-pretrain': 'pretrain', 'electra-finetune': 'finetune', 'electra-compare': 'compare',
            'electra-convert': 'convert'}


@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    "The wheel, built offline from a copy of the sources (a build leaves build/ and *.egg-info where it runs)."
    tmp = tmp_path_factory.mktemp('package')
    (tmp / 'src').mkdir()
    for name in SOURCES:
        if (ROOT / name).is_file(): shutil.copy(ROOT / name, tmp / 'src' / name)
        else: shutil.copytree(ROOT / name, tmp / 'src' / name, ignore=shutil.ignore_patterns('__pycache__'))
    r = subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index', '-q',
                        '-w', str(tmp / 'dist'), str(tmp / 'src')], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    [path] = (tmp / 'dist').glob('electra-*.whl')
    return zipfile.ZipFile(path)


def dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    [path] = [n for n in wheel.namelist() if re.fullmatch(rf'electra-[^/]+\.dist-info/{name}', n)]
    return wheel.read(path).decode('utf-8')


def requirement_groups(text: str) -> dict[str, set[str]]:
    "requirements.txt's lines by group: '' the runtime lines above the first `# extra: NAME` line, then each extra's."
    groups, group = {'': set()}, ''
    for line in text.splitlines():
        if m := re.match(r'#\s*extra:\s*(\w+)', line):
            group = m[1]
            groups[group] = set()
        elif line.split('#')[0].strip():
            r = Requirement(line.split('#')[0])
            groups[group].add(f'{r.name}{r.specifier}')
    return groups


def test_requirement_groups_are_read_as_written():
    assert requirement_groups('a>=1  # why\n# a comment\nb>=2\n# extra: x (what for)\nc>=3\n') == {
        '': {'a>=1', 'b>=2'}, 'x': {'c>=3'}}


def test_the_wheel_requires_the_runtime_lines_of_requirements_txt_and_its_extras_the_rest(wheel):
    meta = email.parser.Parser().parsestr(dist_info(wheel, 'METADATA'))
    found: dict[str, set[str]] = {'': set()}
    for line in meta.get_all('Requires-Dist'):
        r = Requirement(line)
        extra = re.fullmatch(r'extra == "(\w+)"', str(r.marker))[1] if r.marker else ''
        found.setdefault(extra, set()).add(f'{r.name}{r.specifier}')
    groups = requirement_groups((ROOT / 'requirements.txt').read_text())
    assert found == groups
    assert set(meta.get_all('Provides-Extra')) == set(groups) - {''} == {
        'neptune', 'tensorboard', 'mlflow', 'wandb', 'explore', 'notebooks', 'tests'}
    assert {'pytest', 'pytest-xdist'} <= {Requirement(x).name for x in groups['tests']}
    assert not {'pytest', 'pytest-xdist', 'jupytext', 'neptune', 'hnswlib', 'tensorboard', 'mlflow-skinny',
                'wandb'} & {Requirement(x).name for x in groups['']}
    assert meta['Requires-Python'] == '>=3.10' and meta['Version'] == importlib.import_module('electra').__version__


def test_the_wheel_states_the_apache_2_license_and_holds_its_text(wheel):
    meta = email.parser.Parser().parsestr(dist_info(wheel, 'METADATA'))
    assert meta['License-Expression'] == 'Apache-2.0' and meta.get_all('License-File') == ['LICENSE']
    assert dist_info(wheel, 'licenses/LICENSE') == (ROOT / 'LICENSE').read_text(encoding='utf-8')


def test_the_wheel_holds_the_library_its_presets_and_the_drivers(wheel):
    names = set(wheel.namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / 'electra').rglob('*.py')}
    drivers = {f'electra/jobs/{script}' for script in DRIVERS}  # put there by the build (setup.py), not in the repository
    assert {n for n in names if n.endswith('.py')} == modules | drivers  # every module, none left from an older build
    presets = sorted((ROOT / 'configs').rglob('*.yaml'))
    assert len(presets) > 20
    for preset in presets:
        assert wheel.read(f'electra/{preset.relative_to(ROOT).as_posix()}') == preset.read_bytes()
    for script in DRIVERS:
        assert wheel.read(f'electra/jobs/{script}') == (ROOT / script).read_bytes()
    assert {n.split('/')[0] for n in names} == {'electra', next(n.split('/')[0] for n in names if '.dist-info/' in n)}


def test_the_repository_holds_one_copy_of_each_driver():
    "The drivers at the root, the notebooks' export, and no other file of the repository with their code."
    tracked = subprocess.run(['git', 'ls-files', '-z', '*.py'], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [ROOT / p for p in tracked.stdout.split('\0') if p]
    for script in DRIVERS:
        code = (ROOT / script).read_bytes()
        assert [p.relative_to(ROOT).as_posix() for p in paths if p.is_file() and p.read_bytes() == code] == [script]


def test_the_console_commands_are_the_drivers(wheel):
    scripts = re.search(r'\[console_scripts\]\n(.*?)(?:\n\[|\Z)', dist_info(wheel, 'entry_points.txt'), re.S)[1]
    found = dict(re.findall(r'(\S+) = (\S+)', scripts))
    assert found == {name: f'electra.jobs.commands:{f}' for name, f in COMMANDS.items()}


def test_a_command_runs_its_driver_from_another_folder(tmp_path, monkeypatch, capsys):
    "`electra-pretrain --help` in an empty folder: the driver's own help, its presets found in the project."
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'argv', ['electra-pretrain', '--help'])
    with pytest.raises(SystemExit) as e: commands.pretrain()
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith('usage: pretrain.py [--config PRESET_OR_YAML')
    presets = ', '.join(sorted(p.stem for p in (ROOT / 'configs' / 'pretrain').glob('*.yaml')))
    assert f"Presets in {ROOT / 'configs' / 'pretrain'}: {presets}" in out
    assert sys.argv == ['electra-pretrain', '--help']  # runpy puts the command line back as it found it


def test_the_installed_package_finds_its_presets_from_python(wheel, tmp_path):
    """The wheel's files as an install lays them out (the package alone on the path, from another folder): the three
    jobs' presets found from Python by name, in electra/configs/, and a FinetuneConfig checked without importing
    electra.finetuning by hand."""
    site = tmp_path / 'site'
    wheel.extractall(site)
    (tmp_path / 'work').mkdir()
    assert from_python(tmp_path / 'work', PYTHONPATH=str(site)) == expected_from_python(site / 'electra' / 'configs')
