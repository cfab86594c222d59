"""The fine-tuning driver `finetune.py` end to end: --help, errors in one line, a run from a preset file."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from electra.config.errors import ConfigError
from electra.finetuning.made_by import MADE_BY
from electra.finetuning.sweep import GROUP_FILES
from electra.finetuning.tasks.glue.submission import SUBMISSION_ZIP
from tests.support import forked
from tests.support.finetune import finetune_in_process, saved_as_bert
from tests.support.script_end import script_exit

pytestmark = pytest.mark.usefixtures('one_thread')

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=REPO):
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1', 'PYTHONPATH': str(REPO)}
    return forked.run([sys.executable, str(REPO / 'finetune.py'), *args], cwd=cwd, capture_output=True, text=True,
                      env=env, timeout=300)


def test_driver_help_and_errors(tmp_path, capsys):
    "In this process (the one-line form of an error through the script is below): --help, a task file, a model."
    with pytest.raises(SystemExit) as e: finetune_in_process('--help')
    out = capsys.readouterr().out
    assert e.value.code == 0 and '--layer_lr_mode' in out and 'Presets in configs/finetune: base, demo, demo_squad, demo_tagging, demo_tasks, large, small' in out
    preset = tmp_path / 'tasks.yaml'  # a preset naming a task file not written yet
    preset.write_text(f"tasks: [{tmp_path / 'tasks' / 'reviews.yaml'}]\n")
    with pytest.raises(ConfigError) as e: finetune_in_process('--config', str(preset))
    assert str(e.value).startswith(f"{preset}: line 1: tasks: '{tmp_path / 'tasks' / 'reviews.yaml'}' is no task file")
    assert '`python -m electra.finetuning.tasks.demo cache/demo_tasks`' in str(e.value)
    with pytest.raises(ConfigError) as e:
        finetune_in_process('--model', str(tmp_path / 'missing.pth'), '--cache_dir', str(tmp_path / 'cache'))
    assert str(e.value).startswith('model: ') and 'run `python pretrain.py` first' in str(e.value)
    with pytest.raises(ConfigError, match=r"^command line: key 'dropout': 1\.5 is not a number in \[0, 1\) \(dropout on the "
                                          r"\[CLS\] vector before the output layer\)$"):
        finetune_in_process('--dropout', '1.5')


def test_driver_end_to_end(tmp_path, glue_dir, tiny_dir):
    preset = tmp_path / 'mine.yaml'
    preset.write_text(f'model: {tiny_dir}\ndata: {glue_dir}\ntasks: [WNLI]\nruns: 1\nepochs: 1\ngroup: cli\n'
                      f'output_dir: {tmp_path / "ckpt"}\ntest_output_dir: {tmp_path / "out"}\ncache_dir: {tmp_path / "cache"}\n')
    r = run_cli('--config', str(preset), '--device', 'cpu')
    assert r.returncode == 0, r.stderr
    assert '| WNLI | accuracy | 1 |' in r.stdout and (tmp_path / 'out/cli/WNLI.tsv').is_file()
    assert f'\ntask data: WNLI from GLUE TSV files in {glue_dir}\n' in r.stdout
    assert (tmp_path / 'ckpt/cli/results.csv').is_file() and (tmp_path / 'out/cli/glue_submission.zip').is_file()
    # every name the job wrote is one it checks before its first run (`check_outputs`): no folder found in its way later
    written = {p.name for p in (tmp_path / 'ckpt/cli').iterdir() if not p.name.startswith('.')}
    assert written == {*GROUP_FILES, 'WNLI_0.pth', 'WNLI_0'}
    assert {p.name for p in (tmp_path / 'out/cli').iterdir() if not p.name.startswith('.')} == {MADE_BY, SUBMISSION_ZIP,
                                                                                           'WNLI.tsv'}


def test_driver_refuses_bad_model_directories_in_one_line(tmp_path, tiny, capfd):
    "Through finetune.py: status 2 and stderr the one error line, nothing else (transformers' warnings included)."
    bert = saved_as_bert(tiny, tmp_path / 'bert')
    r = run_cli('--model', str(bert), '--data', 'demo', '--cache_dir', str(tmp_path / 'cache'), '--device', 'cpu')
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith(f'error: {bert}/config.json: a bert model, not ELECTRA. ')
    (bert / 'config.json').unlink()
    capfd.readouterr()
    with pytest.raises(ConfigError) as e:  # in this process
        finetune_in_process('--model', str(bert), '--data', 'demo', '--cache_dir', str(tmp_path / 'cache'), '--device', 'cpu')
    assert str(e.value).startswith(f'{bert}: no config.json, so not a save_pretrained directory')
    assert '\n' not in str(e.value) and capfd.readouterr().err == ''


def test_driver_spreads_runs_over_workers_or_trains_each_run_over_torchrun_processes(tmp_path, glue_dir, tiny_dir,
                                                                                     capfd):
    """The same sweep three ways: one process; two worker processes (the same table); a torchrun job of two processes.
    The first two drivers run in this process (a process to start costs seconds; the workers are processes of their
    own all the same), what it and its workers print read from its file descriptors."""
    import pandas as pd
    preset = tmp_path / 'mine.yaml'
    preset.write_text(f'model: {tiny_dir}\ndata: {glue_dir}\ntasks: [RTE, STS-B]\nruns: 2\nepochs: 1\ntask_overrides: {{}}\n'
                      f'test_output_dir: {tmp_path / "out"}\ncache_dir: {tmp_path / "cache"}\nthreads: 1\ndevice: cpu\n')
    tables = {}
    for group, launch in [('seq', None), ('workers', None),
                          ('ddp', [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2'])]:
        argv = ['--config', str(preset), '--group', group, '--output_dir', str(tmp_path / 'ckpt'),
                *(['--parallel_runs', '2'] if group == 'workers' else [])]
        if launch is None:  # the driver in this process
            capfd.readouterr()
            finetune_in_process(*argv)
            stdout = capfd.readouterr().out
        else:
            r = forked.run([*launch, str(REPO / 'finetune.py'), *argv], cwd=REPO, capture_output=True, text=True,
                           timeout=300, env={**os.environ, 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1'})
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
            stdout = r.stdout
        assert stdout.count(f'group: {group}\n') == 1 and stdout.count('| RTE | accuracy | 2 |') == 1  # said once
        written = sorted(p.name for p in (tmp_path / 'out' / group).iterdir() if not p.name.startswith('.'))  # a lock
        assert written == ['RTE.tsv', 'STS-B.tsv', 'glue_submission.zip', 'made_by.json']
        tables[group] = pd.read_csv(tmp_path / 'ckpt' / group / 'results.csv')
        assert list(tables[group]['task']) == ['STS-B', 'STS-B', 'RTE', 'RTE']  # GLUE's order
        assert ('4 runs on 2 worker processes' in stdout) == (group == 'workers')
    varying = ['seconds', 'finished_at', 'checkpoint']
    pd.testing.assert_frame_equal(tables['workers'].drop(columns=varying), tables['seq'].drop(columns=varying))
    # each run trained by both processes: its steps count global batches, as one process's
    assert list(tables['ddp']['steps']) == list(tables['seq']['steps']) and tables['ddp']['train_loss'].notna().all()


def test_driver_runs_a_task_of_each_kind_from_files_and_writes_its_predictions(tmp_path, tiny_dir, capfd, monkeypatch):
    """The demo's three task files (classification from CSV, NER from CoNLL, SQuAD 2.0) in one job through finetune.py,
    in this process (a process to start costs seconds; the script's own run is test_driver_end_to_end's): status 0,
    nothing on stderr and no warning."""
    from electra.finetuning.tasks.demo import write_demo_tasks
    files = write_demo_tasks(tmp_path / 'tasks', sizes={'train': 24, 'dev': 8, 'test': 6})
    preset = tmp_path / 'kinds.yaml'
    preset.write_text(f'model: {tiny_dir}\ntasks: [{", ".join(map(str, files))}]\nruns: 1\nepochs: 1\ngroup: kinds\n'
                      f'output_dir: {tmp_path / "ckpt"}\ntest_output_dir: {tmp_path / "out"}\ncache_dir: {tmp_path / "cache"}\n'
                      'task_overrides: {ner: {max_length: 64}, squad: {max_length: 128}}\n')
    monkeypatch.setenv('OMP_NUM_THREADS', '1')  # as `run_cli`
    capfd.readouterr()
    status, caught = script_exit(lambda: finetune_in_process('--config', str(preset), '--device', 'cpu'))
    stdout, stderr = capfd.readouterr()
    assert (status, caught) == (0, []), stderr
    for row in ('| reviews | accuracy | 1 |', '| ner | f1 | 1 |', '| squad | f1 | 1 |'): assert row in stdout
    assert f"\ntask data: the task files {', '.join(map(str, files))}\n" in stdout  # not the GLUE source (the hub)
    assert 'hub' not in stdout.replace('data: hub\n', '') and not stderr, stdout  # the config key's value aside
    out = tmp_path / 'out' / 'kinds'
    assert len((out / 'reviews.tsv').read_text().splitlines()) == 1 + 6
    assert len([ln for ln in (out / 'ner' / 'test.txt').read_text().splitlines() if len(ln.split()) == 2]) > 6 * 3
    import json
    preds = json.loads((out / 'squad' / 'dev' / 'predictions.json').read_text())
    odds = json.loads((out / 'squad' / 'dev' / 'null_odds.json').read_text())
    assert len(preds) == len(odds) == 8 and preds.keys() == odds.keys()


def test_the_readme_task_file_demo_chain_warns_of_nothing(tmp_path, capsys):
    """The README's task-file demo, its commands from one folder: `python pretrain.py` (the demo preset, 3 steps),
    `python -m electra.finetuning.tasks.demo cache/demo_tasks` (at its sizes: the vocabulary's cover is the data's),
    `python finetune.py --config demo_tasks` (1 run, 1 epoch). The demo vocabulary, trained on the demo corpus, has no
    ','; the reviews have one in most rows (560 of their 10,267 tokens): a mark, not text the vocabulary does not cover,
    so no [UNK] warning, nor any other."""
    from electra.finetuning.tasks.demo import write_demo_tasks
    from tests.support.pretrain import run_driver
    run_driver('pretrain.py', ['--steps', '3', '--warmup_steps', '1', '--threads', '1', '--log_every', '3',
                               '--device', 'cpu'], cwd=tmp_path)
    write_demo_tasks(tmp_path / 'cache' / 'demo_tasks')
    capsys.readouterr()
    run_driver('finetune.py', ['--config', 'demo_tasks', '--threads', '1', '--device', 'cpu', '--runs', '1',
                               '--epochs', '1'], cwd=tmp_path)
    out = capsys.readouterr()
    assert 'reviews: 400 training examples, 100 dev; 1 epoch,' in out.out, out.out
    assert 'warning' not in (out.out + out.err).lower(), out.out + out.err
