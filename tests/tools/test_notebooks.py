"""electra/tools/notebooks.py: the check of scripts against their notebooks, and the export."""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from electra.runtime.errors import friendly_errors
from electra.tools import notebooks
from tests.support import forked
from tests.support.notebook_runs import NOTEBOOKS, REPO
from tests.support.script_end import script_exit


def notebooks_cli(*args: str) -> subprocess.CompletedProcess:
    return forked.run([sys.executable, '-m', 'electra.tools.notebooks', *args], cwd=REPO, capture_output=True, text=True,
                      timeout=300)


def notebooks_in_process(capsys, *args: str) -> tuple[object, str, str]:
    """`python -m electra.tools.notebooks ARGS` run in this process, its `__main__` block as it is: the exit status,
    stdout and stderr. For an export that gets as far as checking a driver's imports (torch, transformers, fastai), which
    in a process of its own cost seconds; the command line's own wiring is tested by the tests that call
    `notebooks_cli`. No warning may come, as none would in stderr."""
    def script():
        friendly_errors()
        raise SystemExit(notebooks.main(list(args)))
    capsys.readouterr()
    status, caught = script_exit(script)
    assert caught == [], [str(w.message) for w in caught]
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    "The paired scripts and the notebooks, copied (the real ones are never edited)."
    for _, script in notebooks.PAIRS: shutil.copy(REPO / script, tmp_path / script)
    shutil.copytree(NOTEBOOKS, tmp_path / 'notebooks', ignore=shutil.ignore_patterns('.ipynb_checkpoints'))
    return tmp_path


def test_check_passes_on_the_repository():
    r = notebooks_cli('check')
    assert r.returncode == 0, r.stderr
    assert 'pretrain.py <- notebooks/Pretrain.ipynb' in r.stdout and 'finetune.py <- notebooks/Finetune_GLUE.ipynb' in r.stdout


@pytest.mark.parametrize('script', ['pretrain.py', 'finetune.py'])
def test_check_fails_on_an_edited_script_and_export_never_overwrites_it(repo_copy, script, capsys):
    """A driver edited by hand since its export: check names it, and export refuses to overwrite it (before: export put
    the notebook's version over the edit, which was lost), naming the file and how to bring the edit into the notebook;
    from-scripts does so, and the edit is then the notebook's."""
    nb_rel = dict(map(reversed, notebooks.PAIRS))[script]
    path = repo_copy / script
    path.write_text(path.read_text().replace('# %%\n', '# %%\nprint("edited by hand")\n', 1))
    edited = path.read_text()
    assert notebooks.main(['check', '--root', str(repo_copy)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f'{script}: differs from the export of notebooks/'), err
    assert 'changed by hand since its last export' in err[0] and 'from-scripts' in err[0], err
    status, out, err = notebooks_in_process(capsys, 'export', '--root', str(repo_copy))
    assert (status, out) == (2, ''), err
    assert err == (f'error: {script}: changed by hand since its last export from {nb_rel} (its code no longer has '
                        'the sha256 its header records), and export would overwrite the change: nothing was written. '
                        f'To keep the change, bring it into the notebook: `python -m electra.tools.notebooks '
                        f'from-scripts` (rewrites the notebooks from the scripts, then exports), or make the same edit '
                        f'in {nb_rel}. To drop it: `git checkout -- {script}` (or delete {script}), then export.\n')
    assert path.read_text() == edited  # the edit kept
    assert notebooks.main(['from-scripts', '--root', str(repo_copy)]) == 0
    assert 'print(\\"edited by hand\\")' in (repo_copy / nb_rel).read_text()  # the notebook's now
    assert path.read_text().split('\n', 12)[12] == edited.split('\n', 12)[12]  # the code below the record as edited
    assert notebooks.check(repo_copy) == []


def test_the_header_records_the_sha256_of_the_exported_code():
    "Each driver's header line records the sha256 of the code below it (what export compares a driver against)."
    for nb_rel, script in notebooks.PAIRS:
        text = (REPO / script).read_text()
        header, record, body = re.match(r'(# ---\n.*?\n# ---\n)([^\n]*\n)\n(.*)', text, re.S).groups()
        assert record == (f'# exported from {nb_rel} by `python -m electra.tools.notebooks export` (edit the notebook, '
                          f'not this file): sha256 {hashlib.sha256(body.encode()).hexdigest()}\n'), record


def test_export_replaces_a_driver_as_last_exported_when_its_notebook_changed(repo_copy, capsys):
    "The usual way: the notebook edited, the driver as last exported: export writes it, with its new record."
    path = repo_copy / 'notebooks' / 'Pretrain.ipynb'
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == 'markdown')
    cell.source += '\nA line added in the notebook.'
    nbformat.write(nb, str(path))
    assert notebooks.main(['export', '--root', str(repo_copy)]) == 0
    assert capsys.readouterr().out == 'wrote notebooks/Pretrain.ipynb\nwrote pretrain.py\n'
    assert '# A line added in the notebook.\n' in (repo_copy / 'pretrain.py').read_text()
    assert notebooks.check(repo_copy) == []


def code_cell(nb_path: Path, contains: str) -> tuple[object, int]:
    "The notebook and the 1-based position (among all its cells) of its code cell holding `contains`."
    nb = nbformat.read(str(nb_path), as_version=4)
    [number] = [i + 1 for i, c in enumerate(nb.cells) if c.cell_type == 'code' and contains in c.source]
    return nb, number


def test_export_refuses_a_notebook_whose_code_does_not_parse(repo_copy):
    "A cell that is not Python (a half-typed edit): refused naming the notebook and the cell; no driver written."
    path = repo_copy / 'notebooks' / 'Pretrain.ipynb'
    nb, number = code_cell(path, 'device = resolve_device(cfg.device)')
    cell = nb.cells[number - 1]
    cell.source = cell.source.replace('device = resolve_device(cfg.device)', 'device = resolve_device(cfg.device')
    nbformat.write(nb, str(path))
    line = cell.source.splitlines().index('device = resolve_device(cfg.device') + 1
    before = (repo_copy / 'pretrain.py').read_text()
    r = notebooks_cli('export', '--root', str(repo_copy))
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith(f'error: notebooks/Pretrain.ipynb: cell {number}: its code does not parse ('), r.stderr
    assert f'line {line} of the cell' in r.stderr and 'pretrain.py was not written' in r.stderr, r.stderr
    assert (repo_copy / 'pretrain.py').read_text() == before and r.stdout == ''


@pytest.mark.parametrize('statement, edited, error', [
    ('from electra.training.checkpoint import check_resume_compatible', 'check_resume_compatibel',
     "cannot import name 'check_resume_compatibel' from 'electra.training.checkpoint'"),
    ('import torch\n', 'torhc', "No module named 'torhc'")])
def test_export_refuses_a_driver_whose_imports_fail(repo_copy, statement, edited, error, capsys):
    "A name or module misspelt in a cell: the driver would fail at its first run; refused, naming notebook and cell."
    path = repo_copy / 'notebooks' / 'Pretrain.ipynb'
    nb, number = code_cell(path, statement)
    old = statement.split()[-1]
    cell = nb.cells[number - 1]
    cell.source = cell.source.replace(statement, statement.replace(old, edited), 1)
    nbformat.write(nb, str(path))
    before = (repo_copy / 'pretrain.py').read_text()
    status, _, err = notebooks_in_process(capsys, 'export', '--root', str(repo_copy))
    assert status == 2 and err.count('\n') == 1, err
    assert err.startswith(f'error: notebooks/Pretrain.ipynb: cell {number}: ') and error in err, err
    assert edited in err and 'pretrain.py was not written' in err, err
    assert (repo_copy / 'pretrain.py').read_text() == before


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


def test_export_with_a_notebook_missing_is_one_line(repo_copy, capsys):
    "Before: a FileNotFoundError traceback (check already named it: N05 of the sweep)."
    (repo_copy / 'notebooks' / 'Finetune_GLUE.ipynb').unlink()
    status, _, err = notebooks_in_process(capsys, 'export', '--root', str(repo_copy))
    assert (status, err) == (2, 'error: notebooks/Finetune_GLUE.ipynb: missing, cannot export finetune.py. '
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


@pytest.mark.parametrize('nb_rel, script', notebooks.PAIRS)
def test_a_notebook_s_overrides_stay_the_notebook_s_and_the_script_takes_its_command_line(repo_copy, capsys, nb_rel,
                                                                                         script):
    """R25b-1: a notebook's overrides cell edited ({'steps': 30}) was exported into the driver, whose overrides then
    silently beat its command line (`--steps 50` ran 30 steps, config.yaml saying 30). The export writes the script's
    overrides as {} (a script takes its settings from the command line, as the README says), keeps the notebook's
    cell as edited, and says so; check passes."""
    path = repo_copy / nb_rel
    nb = nbformat.read(str(path), as_version=4)
    [cell] = [c for c in nb.cells if 'parameters' in c.metadata.get('tags', [])]
    before = (repo_copy / script).read_text()
    cell.source = cell.source.replace('overrides = {}', "overrides = {'steps': 30,\n             'log_every': 10}")
    nbformat.write(nb, str(path))
    assert notebooks.main(['export', '--root', str(repo_copy)]) == 0
    assert capsys.readouterr().out == (
        f"{nb_rel}: its overrides ({{'steps': 30, 'log_every': 10}}) stay the notebook's; {script} is written with "
        "overrides = {}, as a script takes its settings from the command line\nwrote " + nb_rel + '\n')
    assert (repo_copy / script).read_text() == before and notebooks.check(repo_copy) == []
    assert "'log_every': 10}" in nbformat.read(str(path), as_version=4).cells[nb.cells.index(cell)].source
