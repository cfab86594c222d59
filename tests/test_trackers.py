"""`--logger`: the trackers read back with their own readers equal the CSV files. A real MLflow tracking server on the
loopback address (SQLite, a local artifact folder) started and stopped here, read with MLflow's client; TensorBoard's
event files with TensorBoard's EventAccumulator; W&B's offline run files with wandb's datastore."""
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
import yaml

from electra.config.errors import ConfigError
from tests.support.pretrain import ROOT, TINY, pretrain

pytestmark = pytest.mark.usefixtures('one_thread')
SHORT = [a for a in TINY]  # 24 steps, a row every 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='module')
def mlflow_server(tmp_path_factory):
    "`mlflow server` on 127.0.0.1 (SQLite, artifacts under the test's folder), once for the module: its URI."
    root, port = tmp_path_factory.mktemp('mlflow'), free_port()
    env = {**os.environ, 'MLFLOW_SERVER_ENABLE_JOB_EXECUTION': 'false'}
    proc = subprocess.Popen([sys.executable, '-m', 'mlflow', 'server', '--backend-store-uri',
                             f'sqlite:///{root}/mlflow.db', '--artifacts-destination', str(root / 'artifacts'),
                             '--host', '127.0.0.1', '--port', str(port), '--workers', '1'],
                            stdout=open(root / 'server.log', 'wb'), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    uri = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f'{uri}/health', timeout=5)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (root / 'server.log').read_text()[-2000:]
                time.sleep(1)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.fixture
def trackers_env(monkeypatch, tmp_path, mlflow_server):
    monkeypatch.setenv('MLFLOW_TRACKING_URI', mlflow_server)
    monkeypatch.setenv('WANDB_MODE', 'offline')
    # W&B's offline files stand for its server here, read as the one run an online W&B resumes: the library's own
    # answer to an offline W&B, which cannot resume (a new run each start), is tested by itself below
    monkeypatch.setattr('electra.training.trackers._OFFLINE', {'neptune': ('NEPTUNE_MODE', ('offline',))})
    monkeypatch.setenv('WANDB_DIR', str(tmp_path))
    monkeypatch.setenv('WANDB_PROJECT', 'electra-tests')
    import wandb
    wandb.teardown()  # wandb reads WANDB_DIR once a process: this test's runs go to its own folder
    from mlflow import MlflowClient
    return MlflowClient(mlflow_server)


def csv_columns(path: Path) -> dict[str, list[tuple[int, str]]]:
    "Each column of a metrics CSV as (step, the value as written)."
    with path.open(newline='') as f: rows = list(csv.DictReader(f))
    return {k: [(int(float(r['step'])), r[k]) for r in rows] for k in rows[0] if k != 'step'}


def as_written(pairs) -> list[tuple[int, str]]:
    "(step, value) pairs with each value as the CSV files write it (6 significant digits)."
    return [(int(step), f'{float(v):.6g}') for step, v in pairs]


def mlflow_history(client, run_id: str, key: str):
    return as_written(sorted((m.step, m.value) for m in client.get_metric_history(run_id, key)))


def tensorboard_scalars(folder: Path, key: str):
    "TensorBoard's own reading: its plugins' EventAccumulator, which drops the events a restart purges."
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util
    acc = EventAccumulator(str(folder), size_guidance={'tensors': 0})
    acc.Reload()
    return as_written((e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in acc.Tensors(key))


def wandb_records(wandb_dir: Path, run_id: str = ''):
    """Every record of the offline runs under `wandb_dir` (those of run `run_id` alone, given one), in the order they
    were written (a resume's run last)."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal import datastore
    records = []
    for path in sorted(p for p in wandb_dir.glob('wandb/offline-run-*/run-*.wandb') if run_id in p.parent.name):
        store = datastore.DataStore()
        store.open_for_scan(str(path))
        while (data := store.scan_data()) is not None:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            records.append(record)
    return records


def wandb_history(records, key: str):
    return as_written((r.history.step.num, json.loads(i.value_json)) for r in records
                      if r.WhichOneof('record_type') == 'history' for i in r.history.item
                      if '/'.join([i.key] if i.key else list(i.nested_key)) == key)


def tensorboard_config(folder: Path) -> dict[str, tuple[str, str]]:
    "The last `config` text of a TensorBoard folder: each key's (value as written, where it came from)."
    rows = [[c.strip() for c in line.strip('|').split('|')] for line in tensorboard_text(folder, 'config').splitlines()[2:]]
    return {k: (v.strip('`'), source) for k, v, source in rows}


def assert_tracked_config_is_the_resumed_one(client, run, run_dir: Path, tmp_path: Path):
    """After a resume with another steps and lr, each tracker holds the config the run has now, as config.yaml: MLflow
    (whose parameters keep their first value) a tag `resumed.<key>` over each parameter the resume changed and the
    start's whole config as `config_resumed_at_<step>.json`; TensorBoard a `config` text at the resume's step; W&B the
    resumed run's config. Before: MLflow and TensorBoard held the first start's steps 12 and lr 0.0005 alone."""
    now = yaml.safe_load((run_dir / 'config.yaml').read_text())
    assert (now['steps'], now['lr']) == (24, 0.00025)
    params, tags = run.data.params, run.data.tags
    assert (params['steps'], params['lr'], tags['resumed.steps'], tags['resumed.lr']) == ('12', '0.0005', '24', '0.00025')
    tracked = {**params, **{k[len('resumed.'):]: v for k, v in tags.items() if k.startswith('resumed.')}}
    assert {k: v for k, v in tracked.items() if k in now} == {k: str(v) for k, v in now.items()}
    at_12 = json.loads(Path(client.download_artifacts(run.info.run_id, 'config_resumed_at_12.json', str(tmp_path))).read_text())
    assert (at_12['steps'], at_12['lr']) == ({'value': 24, 'from': 'command line'}, {'value': 0.00025, 'from': 'command line'})
    assert {k: str(v['value']) for k, v in at_12.items() if k in now} == {k: str(v) for k, v in now.items()}
    tb = tensorboard_config(run_dir / 'tensorboard')
    assert (tb['steps'], tb['lr']) == (('24', 'command line'), ('0.00025', 'command line'))
    assert {k: tb[k][0] for k in now} == {k: repr(at_12[k]['value']) if not isinstance(at_12[k]['value'], list)
                                          else tb[k][0] for k in now}
    (resumed,) = [r for r in wandb_records(tmp_path) if r.WhichOneof('record_type') == 'run'][-1:]
    wb = {i.key: json.loads(i.value_json) for i in resumed.run.config.update}
    assert (wb['steps'], wb['lr']) == (24, 0.00025)


def test_pretraining_tracked_and_resumed_equals_the_csv_files(tmp_path, trackers_env):
    client = trackers_env
    common = ['--tracking_tags', 'variant=tiny,smoke', '--run_name', 'tracked', '--tracking_artifacts', 'true']
    # TensorBoard joins at the resume: it gets the rows before it from the CSV files (it held steps 18 and 24 alone)
    first = pretrain(tmp_path, *SHORT, *common, '--logger', 'mlflow,wandb', '--steps', '12', '--eval_examples', '16')
    run_dir = first['run_dir']
    (exp,) = [e for e in client.search_experiments() if e.name == 'tracked']
    (run,) = client.search_runs([exp.experiment_id])
    # the first start's config: config.yaml (before the resume rewrites it) and where each value came from
    saved = yaml.safe_load((run_dir / 'config.yaml').read_text())
    assert {k: v for k, v in run.data.params.items() if k in saved} == {k: str(v) for k, v in saved.items()}
    sources = json.loads(Path(client.download_artifacts(run.info.run_id, 'config.json', str(tmp_path))).read_text())
    preset = ROOT / 'configs/pretrain/demo.yaml'
    preset_lines = {line.split(':')[0]: n for n, line in enumerate(preset.read_text().splitlines(), 1)
                    if line and not line.startswith((' ', '#'))}
    assert sources['steps'] == {'value': 12, 'from': 'command line'}
    given = {a[2:] for a in [*SHORT, *common, '--logger', '--steps', '--eval_examples', '--output_dir', '--cache_dir']
             if a.startswith('--')}
    for key, line in preset_lines.items():
        if key not in given: assert sources[key]['from'] == f'configs/pretrain/demo.yaml: line {line}', key  # from ROOT
    assert sources['dropout']['from'] == 'default' and 'dropout' not in preset_lines
    # the resume gives no --tracking_tags: it goes on with the run's (W&B's resumed run took none, config.yaml said [])
    pretrain(tmp_path, *SHORT, *common[2:], '--logger', 'mlflow,tensorboard,wandb', '--steps', '24', '--lr', '2.5e-4',
             '--eval_examples', '16', '--resume')
    assert yaml.safe_load((run_dir / 'config.yaml').read_text())['tracking_tags'] == ['variant=tiny', 'smoke']
    run = client.get_run(run.info.run_id)
    assert_tracked_config_is_the_resumed_one(client, run, run_dir, tmp_path)
    assert len(client.search_runs([exp.experiment_id])) == 1 and run.info.status == 'FINISHED'
    assert run.info.run_name == 'tracked_11081' and run.data.tags['variant'] == 'tiny' and run.data.tags['smoke'] == 'true'
    wb = wandb_records(tmp_path)
    for name, prefix in (('metrics.csv', 'train/'), ('eval_metrics.csv', 'eval/')):
        for column, values in csv_columns(run_dir / name).items():
            assert [s for s, _ in values] == [6, 12, 18, 24]
            assert mlflow_history(client, run.info.run_id, prefix + column) == values, column
            assert tensorboard_scalars(run_dir / 'tensorboard', prefix + column) == values, column
            assert wandb_history(wb, prefix + column) == values, column
    names = {f.path for d in ('discriminator', 'generator') for f in client.list_artifacts(run.info.run_id, d)}
    assert {'discriminator/README.md', 'discriminator/model.safetensors', 'generator/README.md'} <= names
    wandb_runs = {r.run.run_id for r in wb if r.WhichOneof('record_type') == 'run'}
    assert len(wandb_runs) == 1 and {r.run.run_group for r in wb if r.WhichOneof('record_type') == 'run'} == {'tracked'}
    assert [list(r.run.tags) for r in wb if r.WhichOneof('record_type') == 'run'][-1] == ['variant=tiny', 'smoke']


def test_a_run_folder_copied_and_resumed_elsewhere_gets_tracked_runs_of_its_own(tmp_path, trackers_env):
    """The ids a checkpoint keeps go on in the same tracked runs only in the folder that started them: a copy resumed
    in another folder starts new ones (MLflow's tagged `continues` = the original's id; W&B another run id), and
    TensorBoard goes on in the copy's own events. Before: both folders' rows went to the one MLflow run (two values
    at each step)."""
    import shutil
    from electra.training.trackers import TrackedRun, start_trackers
    client, trackers = trackers_env, ['mlflow', 'tensorboard', 'wandb']
    run = lambda folder: TrackedRun('branch', 'branch', (), {'lr': 1e-3}, {'lr': 'default'}, folder / 'tensorboard')
    first = start_trackers(trackers, run(tmp_path / 'a'))
    first({'step': 1, 'loss': 0.5})
    first.end('killed')
    ids = first.ids
    shutil.copytree(tmp_path / 'a', tmp_path / 'copy')
    for folder, loss in (('copy', 0.25), ('a', 0.75)):  # each resumed from step 1
        again = start_trackers(trackers, run(tmp_path / folder), ids, 1)
        again({'step': 2, 'loss': loss})
        again.end()
        if folder == 'copy': copy = again.ids
    assert copy['mlflow'] != ids['mlflow'] and again.ids == ids
    assert mlflow_history(client, ids['mlflow'], 'loss') == [(1, '0.5'), (2, '0.75')]
    assert mlflow_history(client, copy['mlflow'], 'loss') == [(2, '0.25')]
    assert client.get_run(copy['mlflow']).data.tags['continues'] == ids['mlflow']
    assert tensorboard_scalars(tmp_path / 'copy/tensorboard', 'loss') == [(1, '0.5'), (2, '0.25')]
    assert tensorboard_scalars(tmp_path / 'a/tensorboard', 'loss') == [(1, '0.5'), (2, '0.75')]
    starts = [p.name.split('-')[3] for p in tmp_path.glob('wandb/offline-run-*')]  # offline-run-<time>-<id>[-<n>]
    assert sorted(starts) == sorted([ids['wandb'], copy['wandb'], ids['wandb']])
    runs = [r.run for r in wandb_records(tmp_path) if r.WhichOneof('record_type') == 'run']
    assert [list(r.tags) for r in runs if r.run_id == copy['wandb']][-1] == [f"continues={ids['wandb']}"]


def test_a_tracker_joining_a_run_at_a_resume_first_gets_the_rows_on_disk(tmp_path, trackers_env, capsys):
    """A tracker added at a resume (none in the checkpoint's ids) held only the rows after it; now the rows of the CSV
    files up to the resume's step go first, at their steps, so each tracked run holds every row. A TensorBoard
    folder with events of an earlier start (tracked then, not in the last checkpoint) holds each step once."""
    from electra.training.sinks import CsvLog
    from electra.training.trackers import TrackedRun, start_trackers
    client, trackers = trackers_env, ['mlflow', 'tensorboard', 'wandb']
    run = TrackedRun('joined', 'joined', (), {'lr': 1e-3}, {'lr': 'default'}, tmp_path / 'tensorboard')
    stale = start_trackers(['tensorboard'], run)  # an earlier start, whose later checkpoint kept no ids
    stale({'step': 1, 'train/loss': 9.0})
    stale.end('killed')
    train, held_out = CsvLog(tmp_path / 'metrics.csv', ['step', 'loss']), CsvLog(tmp_path / 'eval_metrics.csv', ['step', 'auc'])
    for step, loss in ((1, 0.75), (2, 0.5), (3, 0.3125)): train.append({'step': step, 'loss': loss})
    held_out.append({'step': 2, 'auc': 0.625})
    history = {'train/': tmp_path / 'metrics.csv', 'eval/': tmp_path / 'eval_metrics.csv'}
    joined = start_trackers(trackers, run, {}, 2, history)  # resumed at step 2: the row of step 3 is dropped
    said = lambda: [line for line in capsys.readouterr().out.splitlines() if line.startswith('trackers:')]
    assert said() == ['trackers: mlflow, tensorboard, wandb join this run at step 2: the rows written before it '
                      '(2 of metrics.csv, 1 of eval_metrics.csv) sent first, at their steps.']
    joined({'step': 3, 'train/loss': 0.25, 'eval/auc': 0.875})
    joined.end()
    import wandb
    wandb.teardown()  # its service has written the offline run's file (read at once, it may still be empty)
    ids, records = joined.ids, wandb_records(tmp_path)
    want = {'train/loss': [(1, '0.75'), (2, '0.5'), (3, '0.25')], 'eval/auc': [(2, '0.625'), (3, '0.875')]}
    for key, values in want.items():
        assert mlflow_history(client, ids['mlflow'], key) == values, key
        assert tensorboard_scalars(tmp_path / 'tensorboard', key) == values, key
        assert wandb_history(records, key) == values, key
    again = start_trackers(trackers, run, ids, 3, history)  # a later resume: every tracker goes on, nothing sent again
    again.end()
    assert said() == [] and mlflow_history(client, ids['mlflow'], 'train/loss') == want['train/loss']


def test_tags_and_a_group_given_at_a_resume_reach_every_tracker_or_are_said(tmp_path, trackers_env, capsys):
    """`--tracking_tags` and `--tracking_group` given at a resume: W&B took both, while MLflow kept only the tag
    `resumed.tracking_tags` (a string a tag filter cannot read) and its experiment, without a word. Now MLflow's run
    gets each new tag as at a first start (`corpus: demo2`), keeps those of earlier starts, and a group it cannot
    follow (a run never moves between experiments) is said in one line naming both; a resume that gives no tags
    changes none."""
    from electra.training.trackers import TrackedRun, start_trackers
    client, trackers = trackers_env, ['mlflow', 'wandb']
    run = lambda group, tags: TrackedRun('tagged', group, tags, {'lr': 1e-3, 'tracking_group': group,
                                                                 'tracking_tags': list(tags)}, {}, tmp_path / 'tb')
    first = start_trackers(trackers, run('g1', ('size=tiny',)))
    first.end('killed')
    ids = first.ids
    again = start_trackers(trackers, run('g2', ('corpus=demo2', 'size=tiny')), ids, 1)
    again.end('killed')
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith('trackers:')]
    assert said == [f"trackers: MLflow's run {ids['mlflow']} stays in its experiment 'g1', not tracking_group 'g2' "
                    "given now (MLflow moves no run between experiments; W&B's run follows the group): start the run "
                    "under another --run_name to have it in 'g2' there too."]
    tags = client.get_run(ids['mlflow']).data.tags
    assert (tags['corpus'], tags['size']) == ('demo2', 'tiny')
    assert [r.info.run_id for r in client.search_runs(
        [client.get_experiment_by_name('g1').experiment_id], "tags.corpus = 'demo2'")] == [ids['mlflow']]
    start_trackers(['mlflow'], run('g1', ()), ids, 1).end()  # no tags given: those it has are kept
    assert {k: v for k, v in client.get_run(ids['mlflow']).data.tags.items() if k in ('corpus', 'size')} == {
        'corpus': 'demo2', 'size': 'tiny'}
    import wandb
    wandb.teardown()
    runs = [r.run for r in wandb_records(tmp_path) if r.WhichOneof('record_type') == 'run']
    assert (runs[-1].run_group, list(runs[-1].tags)) == ('g2', ['corpus=demo2', 'size=tiny'])


def test_every_fine_tuning_run_tracked_equals_the_results_table(tmp_path, trackers_env, glue_dir, tiny):
    from electra.finetuning import sweep
    from electra.finetuning.tasks.glue.sources import open_source
    from tests.support.finetune import job
    client, (model, tok) = trackers_env, tiny
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=2, epochs=2, logger=['mlflow', 'tensorboard'],
              tracking_group='glue-tracked', tracking_tags=['sweep=one'], lr=1e-3)
    sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)
    with (tmp_path / 'ckpt/t/results.csv').open(newline='') as f: rows = list(csv.DictReader(f))
    (exp,) = [e for e in client.search_experiments() if e.name == 'glue-tracked']
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert sorted(runs) == ['t/RTE_0', 't/RTE_1'] and len(rows) == 2
    for row in rows:
        run = runs[f"t/RTE_{row['run']}"]
        assert run.info.status == 'FINISHED' and run.data.tags == {**run.data.tags, 'task': 'RTE', 'sweep': 'one'}
        assert (run.data.params['seed'], run.data.params['lr'], run.data.params['task']) == (row['seed'], '0.001', 'RTE')
        tb = tmp_path / 'ckpt/t/tensorboard' / f"RTE_{row['run']}"
        for column in ('score', 'accuracy', 'train_loss', 'steps'):
            written = [(2, row[column])]
            as_4 = lambda pairs: [(s, f'{float(v):.4f}' if '.' in row[column] else f'{float(v):g}') for s, v in pairs]
            assert as_4(mlflow_history(client, run.info.run_id, f'results/{column}')) == written, column
            assert as_4(tensorboard_scalars(tb, f'results/{column}')) == written, column
        dev = mlflow_history(client, run.info.run_id, 'dev/accuracy')
        assert [s for s, _ in dev] == [1, 2] and dev[-1][1] == mlflow_history(client, run.info.run_id, 'results/score')[0][1]
        # results/<column>: the row's numeric columns of results.csv and nothing else (before: a results/epoch, from 0)
        numeric = {c for c, v in row.items() if c not in ('run', 'seed') and v and v.lstrip('-').replace('.', '', 1).isdigit()}
        assert {k for k in run.data.metrics if k.startswith('results/')} == {f'results/{c}' for c in numeric}



def test_fine_tuning_artifacts_are_each_runs_weights_its_folder_and_the_model_card(tmp_path, trackers_env, glue_dir, tiny,
                                                                                  monkeypatch, capsys):
    """With tracking_artifacts, every run's tracked run holds its .pth and the group's model card (README.md), and the
    run picked for save_pretrained its transformers folder with the folder's own card, read back equal to the files.
    An offline Neptune, which cannot reopen a run, sends the files written after the runs to a new run each, tagged
    with the run it continues, said in one line (before: a run of its own each, linked to nothing, said nowhere)."""
    from electra.finetuning import sweep
    import dataclasses
    import shutil
    from electra.finetuning.runs import track_exports, transformers_folder
    from electra.finetuning.tasks.glue.sources import open_source
    from tests.support.finetune import job
    client, (model, tok) = trackers_env, tiny
    monkeypatch.chdir(tmp_path)  # Neptune's offline runs go to ./.neptune
    group = tmp_path / 'ckpt/t'
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=2, logger=['mlflow', 'neptune'], tracking_group='glue-artifacts',
              tracking_artifacts=True, save_pretrained='picked', predict=False)
    results = sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)
    capsys.readouterr()
    sweep.write_summary(cfg, results)
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith('trackers:')] == [
        "trackers: neptune offline (NEPTUNE_MODE=offline) cannot go on in an earlier start's offline run (each start's "
        "files sync as a run of their own): a new tracked run, tagged with the one it continues (W&B's tag "
        "continues=<id>, Neptune's field continues): for the model card and transformers folder of 2 fine-tuning runs."]
    ops = neptune_operations(tmp_path)
    ran = {torch.load(group / f'RTE_{i}.pth', weights_only=True)['trackers']['neptune'] for i in range(2)}
    links = [o['value'] for o in ops if o['path'] == ['continues']]
    cards = {o['run'] for o in ops if o['path'][:2] == ['artifacts', 'README.md']}
    assert sorted(links) == sorted(ran) and cards == {o['run'] for o in ops if o['path'] == ['continues']}
    (exp,) = [e for e in client.search_experiments() if e.name == 'glue-artifacts']
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert sorted(runs) == ['t/RTE_0', 't/RTE_1']
    folders = [i for i in range(2) if transformers_folder(group / f'RTE_{i}.pth').is_dir()]
    assert len(folders) == 1  # the run `select` picks
    for i in range(2):
        run_id = runs[f't/RTE_{i}'].info.run_id
        assert client.get_run(run_id).info.status == 'FINISHED'
        files = {f.path for f in client.list_artifacts(run_id)}
        expected = {'config.json', f'RTE_{i}.pth', 'README.md', *([f'RTE_{i}'] if i in folders else [])}
        assert files == expected, i
        local = [group / 'README.md', group / f'RTE_{i}.pth']
        if i in folders:
            inside = {f.path for f in client.list_artifacts(run_id, f'RTE_{i}')}
            assert inside == {f'RTE_{i}/{p.name}' for p in (group / f'RTE_{i}').iterdir()}
            assert {f'RTE_{i}/README.md', f'RTE_{i}/model.safetensors', f'RTE_{i}/config.json'} <= inside
            local.append(group / f'RTE_{i}' / 'README.md')
        for path in local:
            name = str(path.relative_to(group))
            got = Path(client.download_artifacts(run_id, name, str(tmp_path / f'got{i}')))
            assert got.read_bytes() == path.read_bytes(), name
    # a copy of the group: its runs' .pth name the tracked runs of the original's folder, which get nothing of the copy
    # (before: its card went to the original's runs); no tracked run is made for it either
    shutil.copytree(group, tmp_path / 'ckpt/tcopy')
    copied = dataclasses.replace(cfg, group='tcopy')
    rows = [{**r, 'checkpoint': str(tmp_path / f"ckpt/tcopy/RTE_{r['run']}.pth")} for r in results.df.to_dict('records')]
    (tmp_path / 'ckpt/tcopy/README.md').write_text('the copy')
    before = {r.info.run_id: [f.path for f in client.list_artifacts(r.info.run_id)] for r in runs.values()}
    track_exports(copied, rows, tmp_path / 'ckpt/tcopy/README.md')
    after = client.search_runs([exp.experiment_id])
    assert {r.info.run_id: [f.path for f in client.list_artifacts(r.info.run_id)] for r in after} == before
    # a tracker added since (W&B: no run of its in the .pth files) starts no tracked run holding the files alone, without
    # the runs' metrics (before: a W&B run per fine-tuning run, its card and folder and nothing else)
    track_exports(dataclasses.replace(cfg, logger=['mlflow', 'wandb']), results.df.to_dict('records'), group / 'README.md')
    import wandb
    wandb.teardown()
    assert [r for r in wandb_records(tmp_path) if r.WhichOneof('record_type') == 'run'] == []

def test_a_comparisons_runs_are_one_group_a_run_per_variant_and_seed(tmp_path, trackers_env):
    from electra.config.compare import CompareConfig
    from electra.config.values import config_from_dict
    from electra.experiments.compare import run_comparison
    from tests.support.pretrain import run_driver
    client = trackers_env
    tiny = {k: v for k, v in zip([a[2:] for a in TINY[::2]], TINY[1::2]) if k != 'threads'}  # the comparison's own
    cfg = config_from_dict(CompareConfig, dict(
        name='cmp-tracked', output_dir=str(tmp_path / 'out'), pretrain_config='demo', finetune=False, seeds=[1, 2],
        pretrain_overrides={**tiny, 'steps': 6, 'warmup_steps': 2, 'eval_examples': 0, 'cache_dir': str(tmp_path / 'cache')},
        variants={'electra': {'config': ''}, 'uniform': {'overrides': {'uniform_generator': True}}},
        logger=['mlflow'], threads=1))

    def in_process(cmd, log):  # the driver itself, as the launcher runs it, without an interpreter to start
        run_driver(Path(cmd[1]).name, cmd[2:])
        return 0
    run_comparison(cfg, launch=in_process, log=lambda s: None)
    (exp,) = [e for e in client.search_experiments() if e.name == 'cmp-tracked']
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in runs if 'variant' not in r.data.tags) == ['cmp-tracked']  # the table's
    runs = [r for r in runs if 'variant' in r.data.tags]
    assert sorted((r.data.tags['variant'], r.data.tags['seed'], r.info.run_name) for r in runs) == [
        ('electra', '1', 'cmp-tracked_electra_1'), ('electra', '2', 'cmp-tracked_electra_2'),
        ('uniform', '1', 'cmp-tracked_uniform_1'), ('uniform', '2', 'cmp-tracked_uniform_2')]
    assert {r.data.params['uniform_generator'] for r in runs if r.data.tags['variant'] == 'uniform'} == {'True'}
    # each value's source as the comparison had it (this config: 'config'), not the job's 'command line'
    (run,) = [r for r in runs if r.info.run_name == 'cmp-tracked_uniform_1']
    sources = json.loads(Path(client.download_artifacts(run.info.run_id, 'config.json', str(tmp_path))).read_text())
    assert {k: sources[k]['from'] for k in ('uniform_generator', 'steps', 'tracking_group')} == {
        'uniform_generator': 'config (through the comparison cmp-tracked)',
        'steps': 'the comparison cmp-tracked: its budget (flops)', 'tracking_group': 'the comparison cmp-tracked: its name'}



def tensorboard_text(folder: Path, tag: str) -> str:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util
    acc = EventAccumulator(str(folder), size_guidance={'tensors': 0})
    acc.Reload()
    return tensor_util.make_ndarray(acc.Tensors(f'{tag}/text_summary')[-1].tensor_proto).item().decode()


def test_a_comparisons_table_curve_and_plot_go_to_a_run_of_its_own_in_its_group(tmp_path, trackers_env):
    """The comparison's own run in its group (MLflow: its experiment) holds table.csv, curve.csv and plot.png as the
    comparison wrote them; TensorBoard each table as a markdown table of the CSV's cells and the plot as an image; W&B
    each table as a Table of the CSV's values and the plot as an Image; a second start (nothing left to launch) goes
    on in the same run."""
    from electra.experiments.compare import run_comparison
    from tests.experiments.test_compare import FakeCheckpointJobs, comparison
    client = trackers_env
    cfg = comparison(tmp_path, name='cmp-table', finetune_at=[0.5, 1.0], logger=['mlflow', 'tensorboard', 'wandb'],
                     tracking_tags=['sweep=b'])
    root = tmp_path / 'out' / 'cmp-table'
    for start in range(2):
        run_comparison(cfg, launch=FakeCheckpointJobs(), log=lambda s: None)  # the jobs are stand-ins: no runs of theirs
        (exp,) = [e for e in client.search_experiments() if e.name == 'cmp-table']
        (run,) = client.search_runs([exp.experiment_id])
        assert (run.info.run_name, run.info.status, run.data.tags['sweep']) == ('cmp-table', 'FINISHED', 'b')
        assert run.data.params['finetune_at'] == '[0.5, 1.0]'
        for name in ('table.csv', 'curve.csv', 'plot.png'):
            got = Path(client.download_artifacts(run.info.run_id, name, str(tmp_path / f'got{start}')))
            assert got.read_bytes() == (root / name).read_bytes(), name
        for name in ('table', 'curve'):
            with (root / f'{name}.csv').open(newline='') as f: cells = list(csv.reader(f))
            md = [line.strip('|').split('|') for line in tensorboard_text(root / 'tensorboard', name).splitlines()]
            assert [[c.strip() for c in row] for row in md[:1] + md[2:]] == cells, name
    import pandas as pd
    for name in ('table', 'curve'):  # W&B's Tables, one per start, as its offline run files hold them
        found = sorted(tmp_path.glob(f'wandb/offline-run-*/files/media/table/{name}_*.table.json'))
        assert len(found) == 2, name
        for path in found:
            table = json.loads(path.read_text())
            pd.testing.assert_frame_equal(pd.DataFrame(table['data'], columns=table['columns']),
                                          pd.read_csv(root / f'{name}.csv'), check_dtype=False)
    assert len(list(tmp_path.glob('wandb/offline-run-*/files/media/images/plot_*.png'))) == 2
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(root / 'tensorboard'), size_guidance={'images': 0})
    acc.Reload()
    import matplotlib.image
    image, (height, width, _) = acc.Images('plot')[-1], matplotlib.image.imread(root / 'plot.png').shape
    assert image.encoded_image_string[:4] == b'\x89PNG' and (image.height, image.width) == (height, width)


def neptune_operations(folder: Path) -> list[dict]:
    "Every operation of the Neptune offline runs under `folder`/.neptune, in order, each with its run's folder."
    return [{**json.loads(line)['obj'], 'run': log.parent} for log in sorted(folder.glob('.neptune/offline/*/data-*.log'))
            for line in log.read_text().splitlines() if line]


def test_a_comparisons_table_curve_and_plot_reach_its_neptune_offline_run(tmp_path, monkeypatch):
    """The comparison's summary in Neptune's offline run files (NEPTUNE_MODE=offline, as tests/conftest.py sets), read
    back as Neptune stores them: each file under summary/<name>, its bytes those the comparison wrote. Before: the run
    held only each file's path, read when the run is synced: a table rebuilt since, or a folder moved, was lost."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from electra.training.trackers import TrackedRun, start_trackers
    monkeypatch.chdir(tmp_path)  # Neptune's offline runs go to ./.neptune
    monkeypatch.setenv('NEPTUNE_MODE', 'offline')
    (tmp_path / 'table.csv').write_text('variant,steps,STS-B\nelectra,20,81.5\nuniform,31,71.0\n')
    (tmp_path / 'curve.csv').write_text('variant,fraction,step,STS-B\nelectra,0.5,10,70.25\nelectra,1.0,20,81.5\n')
    plt.plot([10, 20], [70.25, 81.5])
    plt.savefig(tmp_path / 'plot.png')
    plt.close()
    sent = {name: (tmp_path / name).read_bytes() for name in ('table.csv', 'curve.csv', 'plot.png')}
    tracked = start_trackers(['neptune'], TrackedRun('cmp', 'cmp', ('sweep=b',), {'seeds': [1]}, {'seeds': 'default'},
                                                     tmp_path / 'tensorboard'))
    tracked.summary([tmp_path / 'table.csv', tmp_path / 'curve.csv'], [tmp_path / 'plot.png'])
    tracked.end()
    for name in sent: (tmp_path / name).write_text('rebuilt since')  # a later start rewrites them
    ops = neptune_operations(tmp_path)
    assert [o['value'] for o in ops if o['path'] == ['sys', 'name']] == ['cmp']
    uploads = {o['path'][1]: o for o in ops if o['type'] == 'UploadFile' and o['path'][0] == 'summary'}
    assert sorted(uploads) == ['curve', 'plot', 'table']
    for name, data in sent.items():
        op = uploads[Path(name).stem]
        assert op['ext'] == Path(name).suffix[1:] and op['tmp_file_name'], op  # a copy the run holds, not a path
        assert (op['run'] / 'upload_path' / op['tmp_file_name']).read_bytes() == data, name


def test_a_resumed_neptune_run_holds_the_resumed_config_and_a_copy_resumed_elsewhere_is_a_run_of_its_own(tmp_path,
                                                                                                   monkeypatch):
    """Neptune's offline run files: a resume with another lr assigns config/lr again (before: only the first start's);
    each later start is another run (another custom run id, kept in the field custom_run_id, which offline files do
    not otherwise hold) whose field continues is the first's: the resume in its folder (an offline run cannot be
    resumed) and a copy of the folder resumed elsewhere."""
    from electra.training.trackers import TrackedRun, start_trackers
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('NEPTUNE_MODE', 'offline')
    run = lambda folder, lr: TrackedRun('r', 'g', (), {'lr': lr}, {'lr': 'command line'}, tmp_path / folder)
    first = start_trackers(['neptune'], run('a', 1e-3))
    first.end('killed')
    later = []
    for folder in ('a', 'copy'):
        later.append(start_trackers(['neptune'], run(folder, 5e-4), first.ids, 6))
        later[-1].end()
    assert len({first.ids['neptune'], *(t.ids['neptune'] for t in later)}) == 3
    ops = neptune_operations(tmp_path)  # an offline start is a folder of its own: its config/lr and continues
    field = lambda run, path: [o['value'] for o in ops if o['run'] == run and o['path'] == path]
    starts = [(field(run, ['custom_run_id']), field(run, ['config', 'lr']), field(run, ['continues']))
              for run in {o['run'] for o in ops}]
    one = first.ids['neptune']
    assert sorted(starts) == sorted([([one], ['0.001'], []), *(([t.ids['neptune']], ['0.0005'], [one]) for t in later)])


def test_an_offline_wandb_or_neptune_resume_is_a_new_run_that_holds_the_whole_run(tmp_path, monkeypatch, capsys):
    """W&B cannot resume an offline run (its folders under one id replace each other's history when synced) and
    Neptune's offline files keep no custom run id: a resume's second start was a second offline run holding only the
    steps after the resume, linked to nothing, and nothing said so. Now each is a new run, tagged with the one it
    continues, sent the rows on disk up to the resume's step first: the last start's run holds the whole run."""
    import wandb
    from electra.training.sinks import CsvLog
    from electra.training.trackers import TrackedRun, start_trackers
    monkeypatch.chdir(tmp_path)  # Neptune's offline runs go to ./.neptune
    for k, v in (('WANDB_MODE', 'offline'), ('WANDB_DIR', str(tmp_path)), ('WANDB_PROJECT', 'electra-tests'),
                 ('NEPTUNE_MODE', 'offline')): monkeypatch.setenv(k, v)
    wandb.teardown()
    run = TrackedRun('r', 'g', (), {'lr': 1e-3}, {'lr': 'default'}, tmp_path / 'tensorboard')
    train, held_out = CsvLog(tmp_path / 'metrics.csv', ['step', 'loss']), CsvLog(tmp_path / 'eval_metrics.csv', ['step', 'auc'])
    first = start_trackers(['wandb', 'neptune'], run)
    for step, loss in ((1, 0.75), (2, 0.5), (3, 0.3125)):  # the row of step 3, after the checkpoint, is dropped
        train.append({'step': step, 'loss': loss})
        first({'step': step, 'train/loss': loss, **({'eval/auc': 0.625} if step == 2 else {})})
    held_out.append({'step': 2, 'auc': 0.625})
    first.end('killed')
    capsys.readouterr()
    history = {'train/': tmp_path / 'metrics.csv', 'eval/': tmp_path / 'eval_metrics.csv'}
    again = start_trackers(['wandb', 'neptune'], run, first.ids, 2, history)
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith('trackers:')] == [
        "trackers: wandb, neptune offline (WANDB_MODE=offline, NEPTUNE_MODE=offline) cannot go on in an earlier "
        "start's offline run (each start's files sync as a run of their own): a new tracked run, tagged with the one "
        "it continues (W&B's tag continues=<id>, Neptune's field continues), the rows written before it (2 of "
        "metrics.csv, 1 of eval_metrics.csv) sent first, so that it holds the whole run."]
    again({'step': 3, 'train/loss': 0.25, 'eval/auc': 0.875})
    again.end()
    wandb.teardown()  # its service has written the offline run's file
    want = {'train/loss': [(1, '0.75'), (2, '0.5'), (3, '0.25')], 'eval/auc': [(2, '0.625'), (3, '0.875')]}
    records = wandb_records(tmp_path, again.ids['wandb'])
    assert again.ids['wandb'] != first.ids['wandb'] and again.ids['neptune'] != first.ids['neptune']
    assert {key: wandb_history(records, key) for key in want} == want
    assert [list(r.run.tags) for r in records if r.WhichOneof('record_type') == 'run'][-1] == [
        f"continues={first.ids['wandb']}"]
    ops = neptune_operations(tmp_path)
    (second,) = {o['run'] for o in ops if o['path'] == ['custom_run_id'] and o['value'] == again.ids['neptune']}
    logged = lambda key: as_written((v['step'], v['value']) for o in ops if o['run'] == second and o['type'] ==
                                    'LogFloats' and '/'.join(o['path']) == key for v in o['values'])
    assert {key: logged(key) for key in want} == want
    assert [o['value'] for o in ops if o['run'] == second and o['path'] == ['continues']] == [first.ids['neptune']]


def test_only_the_main_process_of_a_torchrun_job_tracks(tmp_path, monkeypatch):
    "Rank 1 of a two-process job starts no tracked run and writes nothing; rank 0 logs every row, read back."
    from electra.training.trackers import TrackedRun, start_trackers
    monkeypatch.setenv('WORLD_SIZE', '2')
    for rank in ('1', '0'):
        monkeypatch.setenv('RANK', rank)
        tracked = start_trackers(['tensorboard'], TrackedRun('r', 'g', (), {'steps': 2}, {'steps': 'default'},
                                                             tmp_path / f'rank{rank}'))
        for step, loss in ((1, 0.5), (2, 0.25)): tracked({'step': step, 'loss': loss})
        tracked.end()
        assert sorted(tracked.ids) == ([] if rank == '1' else ['folder', 'tensorboard'])
    assert not (tmp_path / 'rank1').exists()
    assert tensorboard_scalars(tmp_path / 'rank0', 'loss') == [(1, '0.5'), (2, '0.25')]


@pytest.mark.parametrize('tracker', ['mlflow', 'tensorboard', 'wandb'])
def test_a_tracker_not_installed_is_refused_before_any_work(tmp_path, monkeypatch, tracker):
    monkeypatch.setitem(sys.modules, tracker, None)  # what `import` does without the package: ImportError
    with pytest.raises(ConfigError, match=rf"^logger: {tracker} is not installed: pip install 'electra\[{tracker}\]', "
                                          rf"or drop {tracker} from --logger\.$"):
        pretrain(tmp_path, *TINY, '--logger', f'neptune,{tracker}')
    assert not (tmp_path / 'ckpt').exists() and not (tmp_path / 'cache').exists()


def test_an_mlflow_server_not_there_is_refused_before_any_work_naming_its_address(tmp_path, monkeypatch):
    uri = f'http://127.0.0.1:{free_port()}'  # nothing listens there
    monkeypatch.setenv('MLFLOW_TRACKING_URI', uri)
    for driver, argv in (('pretrain.py', ['--output_dir', str(tmp_path / 'ckpt'), '--cache_dir', str(tmp_path / 'cache')]),
                         ('finetune.py', ['--output_dir', str(tmp_path / 'ckpt'), '--cache_dir', str(tmp_path / 'cache'),
                                          '--data', 'demo', '--model', str(tmp_path / 'none.pth')])):
        from tests.support.pretrain import run_driver
        with pytest.raises(ConfigError, match=rf"^logger: mlflow: cannot reach the MLflow tracking server at {uri} "
                                              r"\(MlflowException\)\. Start it, set MLFLOW_TRACKING_URI"):
            run_driver(driver, [*argv, '--logger', 'mlflow'])
    assert list(tmp_path.iterdir()) == []


def test_an_mlflow_file_store_refused_by_mlflow_is_one_error_line_before_any_work(tmp_path, monkeypatch):
    """Before: MLflow 3's refusal of a file store (MLFLOW_TRACKING_URI=file://...) came as a traceback after the data
    build; now the preflight opens the store as it reaches a server, and names the URI and the fixes."""
    uri = f'file://{tmp_path}/mlruns'
    monkeypatch.setenv('MLFLOW_TRACKING_URI', uri)
    monkeypatch.delenv('MLFLOW_ALLOW_FILE_STORE', raising=False)
    from tests.support.pretrain import run_driver
    for driver, argv in (('pretrain.py', ['--output_dir', str(tmp_path / 'ckpt'), '--cache_dir', str(tmp_path / 'cache')]),
                         ('finetune.py', ['--output_dir', str(tmp_path / 'ckpt'), '--cache_dir', str(tmp_path / 'cache'),
                                          '--data', 'demo', '--model', str(tmp_path / 'none.pth')])):
        with pytest.raises(ConfigError) as e: run_driver(driver, [*argv, '--logger', 'mlflow'])
        assert '\n' not in str(e.value)
        assert str(e.value).startswith(f'logger: mlflow: cannot open the MLflow tracking store at {uri} (MlflowException: '
                                       'The filesystem tracking backend'), str(e.value)
        assert str(e.value).endswith('Set MLFLOW_ALLOW_FILE_STORE=true, or use a database store (e.g. '
                                     'MLFLOW_TRACKING_URI=sqlite:///mlflow.db), or drop mlflow from --logger.')
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')  # the opt-out MLflow names: the store opens, the check passes
    from electra.training.trackers import check_trackers
    check_trackers(['mlflow'])
    assert (tmp_path / 'mlruns').is_dir()


def test_a_neptune_run_without_a_token_is_one_line(monkeypatch, tmp_path):
    """Before: Neptune's 20-line banner (with colour codes) sat inside the error line, between the parentheses."""
    from electra.training.trackers import TrackedRun, start_trackers
    monkeypatch.chdir(tmp_path)
    for key in ('NEPTUNE_MODE', 'NEPTUNE_API_TOKEN', 'NEPTUNE_PROJECT'): monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigError) as e:
        start_trackers(['neptune'], TrackedRun('run', 'group', (), {}, {}, tmp_path, 'me/electra'))
    message = str(e.value)
    assert '\n' not in message and '\x1b' not in message, message
    assert message.startswith('logger: cannot start a Neptune run (NeptuneMissingApiTokenException')
    assert message.endswith('Set NEPTUNE_API_TOKEN and --neptune_project, or NEPTUNE_MODE=offline, or drop neptune '
                            'from --logger.')


def test_a_fine_tuning_runs_tracked_task_overrides_are_the_jobs_with_their_preset_line():
    """Before: each run's tracked config said task_overrides {} 'from' task_overrides.MRPC (its task's config, which
    has applied them); now the job's mapping, from configs/finetune/demo.yaml's line of the key. A run's own values
    that the overrides set say task_overrides.<task> and the entry's line (R25b-3)."""
    from electra.config.cli import load_config
    from electra.config.finetune import FinetuneConfig
    from electra.finetuning.runs import _tracked_run
    cfg = load_config(FinetuneConfig, ['--tasks', 'MRPC,STS-B'], preset_dir='configs/finetune', default_preset='demo')
    lines = (ROOT / 'configs/finetune/demo.yaml').read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.startswith('task_overrides:'))
    for task, epochs, source in (('MRPC', 3, f'configs/finetune/demo.yaml: line {lines.index("epochs: 3") + 1}'),
                                 ('STS-B', 10, f'task_overrides.STS-B (configs/finetune/demo.yaml: line '
                                               f'{next(n for n, t in enumerate(lines, 1) if "STS-B:" in t)})')):
        run = _tracked_run(cfg, task, 0, 11081)
        assert run.config['task_overrides'] == {'RTE': {'epochs': 10}, 'STS-B': {'epochs': 10}}
        assert run.sources['task_overrides'] == f'configs/finetune/demo.yaml: line {line}'
        assert (run.config['epochs'], run.sources['epochs']) == (epochs, source)


def test_where_each_value_came_from_the_preset_line_the_command_line_the_overrides_the_default():
    from electra.config.cli import load_config
    from electra.config.pretrain import PretrainConfig
    from electra.config.values import value_sources
    cfg = load_config(PretrainConfig, ['--config', 'small', '--steps', '5', '--warmup_steps', '1'],
                      preset_dir='configs/pretrain', overrides={'lr': 1e-4})
    preset = ROOT / 'configs/pretrain/small.yaml'
    lines = {line.split(':')[0]: n for n, line in enumerate(preset.read_text().splitlines(), 1)
             if line and not line.startswith((' ', '#'))}
    sources = value_sources(cfg)
    assert sources['config'] == sources['steps'] == 'command line' and sources['lr'] == 'overrides'
    assert sources['dropout'] == 'default' and 'dropout' not in lines
    assert {k: sources[k] for k in lines if k not in ('steps', 'warmup_steps', 'lr')} == {
        k: f'configs/pretrain/small.yaml: line {n}' for k, n in lines.items() if k not in ('steps', 'warmup_steps', 'lr')}
