"""electra/tools/notebooks.py: the check of scripts against their notebooks, and the export."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from electra.tools import notebooks
from tests.support.notebook_runs import NOTEBOOKS, REPO


def notebooks_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'electra.tools.notebooks', *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    "The paired scripts (and the package's copies of them) and the notebooks, copied (the real ones are never edited)."
    for path in (p for _, script in notebooks.PAIRS for p in notebooks.script_paths(script)):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    shutil.copytree(NOTEBOOKS, tmp_path / 'notebooks', ignore=shutil.ignore_patterns('.ipynb_checkpoints'))
    return tmp_path


def test_check_passes_on_the_repository():
    r = notebooks_cli('check')
    assert r.returncode == 0, r.stderr
    assert 'pretrain.py <- notebooks/Pretrain.ipynb' in r.stdout and 'finetune.py <- notebooks/Finetune_GLUE.ipynb' in r.stdout


@pytest.mark.parametrize('script', ['pretrain.py', 'finetune.py'])
def test_check_fails_on_an_edited_script(repo_copy, script, capsys):
    path = repo_copy / script
    path.write_text(path.read_text().replace('# %%\n', '# %%\nprint("edited by hand")\n', 1))
    assert notebooks.main(['check', '--root', str(repo_copy)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f'{script}: differs from the export of notebooks/'), err
    # the notebook is the source: exporting puts the script back as it was
    assert notebooks.main(['export', '--root', str(repo_copy)]) == 0
    assert capsys.readouterr().out == f'wrote {script}\n'
    assert path.read_text() == (REPO / script).read_text()
    assert notebooks.check(repo_copy) == []


@pytest.mark.parametrize('script', ['pretrain.py', 'finetune.py'])
def test_the_package_copy_of_a_script_is_checked_and_written_by_the_export(repo_copy, script, capsys):
    "The copy the installed package runs (`electra-pretrain`) is the driver byte for byte, or check names it."
    copy = repo_copy / notebooks.JOBS_DIR / script
    assert copy.read_bytes() == (REPO / script).read_bytes()
    copy.write_text(copy.read_text().replace('# %%\n', '# %%\nprint("edited by hand")\n', 1))
    assert [str(p) for p in notebooks.check(repo_copy)] == [
        f'electra/jobs/{script}: differs from the export of {dict(map(reversed, notebooks.PAIRS))[script]}, of which '
        'it is the package\'s copy: run `python -m electra.tools.notebooks export` (edit the notebook, never this copy)']
    copy.unlink()
    assert [str(p) for p in notebooks.check(repo_copy)] == [
        f'electra/jobs/{script}: missing: run `python -m electra.tools.notebooks export` to write it from '
        f'{dict(map(reversed, notebooks.PAIRS))[script]}']
    assert notebooks.main(['export', '--root', str(repo_copy)]) == 0
    assert capsys.readouterr().out == f'wrote electra/jobs/{script}\n'
    assert copy.read_bytes() == (REPO / script).read_bytes() and notebooks.check(repo_copy) == []


def test_check_fails_on_an_edited_script_from_the_command_line(repo_copy):
    path = repo_copy / 'finetune.py'
    path.write_text(path.read_text().replace('runs per task', 'runs for each task'))
    r = notebooks_cli('check', '--root', str(repo_copy))
    assert r.returncode == 1 and 'finetune.py: differs from the export of notebooks/Finetune_GLUE.ipynb' in r.stderr


def test_check_fails_on_outputs_and_export_strips_them(repo_copy):
    path = repo_copy / 'notebooks' / 'Explore.ipynb'
    nb = nbformat.read(str(path), as_version=4)
    code = next(c for c in nb.cells if c.cell_type == 'code')
    code.execution_count = 3
    code.outputs = [nbformat.v4.new_output('stream', name='stdout', text='hello\n')]
    code.metadata['execution'] = {'iopub.execute_input': '2024-01-01T00:00:00'}
    nbformat.write(nb, str(path))
    problems = [str(p) for p in notebooks.check(repo_copy)]
    assert any(p.startswith('notebooks/Explore.ipynb: stored with outputs') for p in problems)
    assert any(p.startswith('notebooks/Explore.ipynb: stored with execution counts') for p in problems)
    notebooks.export(repo_copy)
    assert notebooks.check(repo_copy) == []
    assert path.read_text() == (NOTEBOOKS / 'Explore.ipynb').read_text()


def test_check_fails_on_a_cell_id_a_tool_left_stale_and_export_restores_it(repo_copy):
    "A cell's text edited in the .ipynb by a tool, its id (derived from the text) left as it was: check says so."
    path = repo_copy / 'notebooks' / 'Pretrain.ipynb'
    text = path.read_text()
    path.write_text(text.replace('"id": "', '"id": "x', 1))  # the cells as they were, an id that is not its cell's
    assert [str(p) for p in notebooks.check(repo_copy)] == [
        'notebooks/Pretrain.ipynb: not stored as `export` stores it (cell ids follow the cells\' text); run '
        '`python -m electra.tools.notebooks export`']
    notebooks.export(repo_copy)
    assert notebooks.check(repo_copy) == [] and path.read_text() == text


def test_export_from_scripts_round_trip(repo_copy):
    "Scripts -> notebooks -> scripts gives the scripts back: the bootstrap `from-scripts` and `export` agree."
    for nb_rel, _ in notebooks.PAIRS: (repo_copy / nb_rel).unlink()
    notebooks.from_scripts(repo_copy)
    assert notebooks.check(repo_copy) == []
    for nb_rel, script in notebooks.PAIRS:
        assert (repo_copy / nb_rel).read_text() == (REPO / nb_rel).read_text()


@pytest.mark.parametrize('command', ['export', 'check'])
def test_a_notebook_that_is_not_json_is_one_line(repo_copy, command):
    "A notebook saved half-way or merged with conflict markers (N04 of the sweep). Before: nbformat's NotJSONError traceback."
    (repo_copy / 'notebooks' / 'Pretrain.ipynb').write_text('{"cells": [\n<<<<<<< HEAD\n')
    r = notebooks_cli(command, '--root', str(repo_copy))
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith('error: notebooks/Pretrain.ipynb: not a notebook (Notebook does not appear to be JSON')
    assert 'git checkout -- notebooks/Pretrain.ipynb' in r.stderr and 'from-scripts' in r.stderr
    assert (repo_copy / 'pretrain.py').read_text() == (REPO / 'pretrain.py').read_text()  # the script left as it was


def test_export_with_a_notebook_missing_is_one_line(repo_copy):
    "Before: a FileNotFoundError traceback (check already named it: N05 of the sweep)."
    (repo_copy / 'notebooks' / 'Finetune_GLUE.ipynb').unlink()
    r = notebooks_cli('export', '--root', str(repo_copy))
    assert (r.returncode, r.stderr) == (2, 'error: notebooks/Finetune_GLUE.ipynb: missing, cannot export finetune.py. '
                                           'Restore it with `git checkout -- notebooks/Finetune_GLUE.ipynb`, or write it '
                                           'from finetune.py with `python -m electra.tools.notebooks from-scripts`.\n')


def test_check_with_a_notebook_missing_says_how_to_get_it_back(repo_copy):
    "Before: 'missing: the notebook that finetune.py is exported from', and no fix (N05 of the sweep; status 1 is right)."
    (repo_copy / 'notebooks' / 'Finetune_GLUE.ipynb').unlink()
    r = notebooks_cli('check', '--root', str(repo_copy))
    assert (r.returncode, r.stderr) == (1, 'notebooks/Finetune_GLUE.ipynb: missing: the notebook that finetune.py is '
                                           'exported from. Restore it with `git checkout -- notebooks/Finetune_GLUE.ipynb`, '
                                           'or write it from finetune.py with `python -m electra.tools.notebooks '
                                           'from-scripts`\n')
