"""Fine-tuning end to end with a tiny random ELECTRA: head, layer-wise learning rates reaching the optimizer, the
sweep on a tiny GLUE-layout directory for all tasks (11 files, resume), the ensemble, the real STS-B, the presets
and the `finetune.py` driver."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from electra.config.base import ConfigError, TrainingStopped, config_from_dict, load_config
from electra.config.finetune import FinetuneConfig
from electra.finetuning import classifier, learner, sweep
from electra.finetuning.results import ResultsTable
from electra.finetuning.tasks.glue.demo import write_demo_glue
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.submission import SUBMISSION_FILES
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.training.schedule import lr_at_step

pytestmark = pytest.mark.usefixtures('one_thread')

REPO = Path(__file__).resolve().parents[1]
REAL_GLUE = REPO.parent / 'shared' / 'data' / 'glue'
DEMO_CHECKPOINT = REPO / 'checkpoints' / 'pretrain' / 'demo_11081_100%.pth'


@pytest.fixture(scope='module')
def glue_dir(tmp_path_factory):
    "A tiny GLUE-layout directory for every task (written by the project's demo writer, read by the real readers)."
    return write_demo_glue(tmp_path_factory.mktemp('glue'), sizes={'train': 32, 'dev': 16, 'test': 12})


@pytest.fixture(scope='module')
def tiny_dir(tmp_path_factory, glue_dir):
    "`save_pretrained` directory of a tiny random discriminator (embedding 16 -> hidden 32, 2 layers) with its tokenizer."
    import transformers
    words = sorted({w for p in glue_dir.rglob('*.tsv') for w in re.findall(r'[a-z]+', p.read_text().lower())})
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.', ',', '?', '*', *words]
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    d = tmp_path_factory.mktemp('tiny') / 'discriminator'
    transformers.ElectraForPreTraining(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope='module')
def tiny(tiny_dir):
    return classifier.load_pretrained(str(tiny_dir))


def job(tmp_path, data, **kw) -> FinetuneConfig:
    values = dict(model='tiny', data=str(data), runs=1, epochs=1, group='t', output_dir=str(tmp_path / 'ckpt'),
                  test_output_dir=str(tmp_path / 'out'), cache_dir=str(tmp_path / 'cache'), task_overrides={},
                  device='cpu', max_length=64)
    return config_from_dict(FinetuneConfig, {**values, **kw})


def parse(path):
    with open(path, newline='', encoding='utf-8') as f: rows = list(csv.reader(f, delimiter='\t', quoting=csv.QUOTE_NONE))
    return rows[0], rows[1:]


# -- the pretrained model

def test_load_pretrained_bad_sources(tmp_path, tiny_dir, tiny):
    import transformers
    with pytest.raises(ConfigError, match=r'run `python pretrain.py` first'):
        classifier.load_pretrained(str(tmp_path / 'demo_11081_100%.pth'))
    model, tok = tiny
    gen = transformers.ElectraForMaskedLM(model.config)
    gen.save_pretrained(tmp_path / 'generator')  # a generator directory loads as a discriminator with a new head ...
    tok.save_pretrained(tmp_path / 'generator')
    with pytest.raises(ConfigError, match='holds a ElectraForMaskedLM .*, not an ELECTRA discriminator'):
        classifier.load_pretrained(str(tmp_path / 'generator'))  # ... but is still refused
    small = transformers.ElectraForPreTraining(transformers.ElectraConfig(vocab_size=20, hidden_size=32, num_hidden_layers=1,
                                                                          num_attention_heads=2, intermediate_size=32))
    small.save_pretrained(tmp_path / 'small')
    tok.save_pretrained(tmp_path / 'small')
    with pytest.raises(ConfigError, match=f'the tokenizer has {len(tok)} tokens but the model.s vocabulary only 20'):
        classifier.load_pretrained(str(tmp_path / 'small'))


def test_head_and_layer_groups(tiny):
    model, _ = tiny
    clf = classifier.ElectraClassifier(model.electra, 3, dropout=0.1).eval()
    # xavier-uniform (TF1's default): U(-a, a), a = sqrt(6 / (fan_in + fan_out)); torch's Linear default would be
    # U(-1/sqrt(32), 1/sqrt(32)), whose bound 0.18 is under half of a = 0.41. Of 96 draws, the largest exceeds 0.9 a
    # with probability 1 - 0.9^96, and their std is a / sqrt(3) within 20% (about 4 standard errors).
    bound, w = np.sqrt(6 / (32 + 3)), clf.classifier.weight.detach()
    assert 0.9 * bound < w.abs().max() <= bound
    assert float(w.std()) == pytest.approx(bound / np.sqrt(3), rel=0.2)
    assert torch.all(clf.classifier.bias == 0)
    ids = torch.tensor([[2, 20, 21, 3, 0]]); mask = torch.tensor([[1, 1, 1, 1, 0]]); types = torch.zeros_like(ids)
    h = model.electra(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state[:, 0]
    assert torch.allclose(clf(ids, mask, types), clf.classifier(h), atol=1e-6)  # [CLS] -> linear (no pooler, no tanh)
    groups, lrs = classifier.optimizer_groups(clf, 1e-3, 0.5, 'official')
    names = [n for g in groups for n in g['names']]
    assert sorted(names) == sorted(n for n, _ in clf.named_parameters())  # every parameter exactly once
    by_name = {n: (lr, g['no_decay']) for g, lr in zip(groups, lrs) for n in g['names']}
    # 2 layers, official: head 1e-3, layer 1 1e-3 * .5^2, layer 0 * .5^3, embeddings (and projection) * .5^4
    assert by_name['classifier.weight'] == (1e-3, False) and by_name['classifier.bias'] == (1e-3, True)
    assert by_name['electra.encoder.layer.1.output.dense.weight'][0] == pytest.approx(2.5e-4)
    assert by_name['electra.encoder.layer.0.attention.self.query.weight'][0] == pytest.approx(1.25e-4)
    assert by_name['electra.embeddings_project.weight'][0] == pytest.approx(6.25e-5)
    assert by_name['electra.embeddings.word_embeddings.weight'] == (pytest.approx(6.25e-5), False)
    assert by_name['electra.embeddings.LayerNorm.weight'][1] and by_name['electra.encoder.layer.0.output.LayerNorm.bias'][1]


# -- one run

def test_layerwise_schedule_reaches_the_optimizer(tmp_path, glue_dir, tiny):
    from fastai.callback.core import Callback
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, epochs=2, lr=1e-3, layer_lr_decay=0.5, batch_size=8, clip_grad=0.5)
    data = sweep.prepare_task(TASKS['RTE'], cfg, open_source(cfg.data), tok, cfg.cache_dir, False)

    class Spy(Callback):
        order = 99  # after ParamScheduler set this step's rates
        def before_fit(self): self.seen = []
        def before_step(self): self.seen.append([g['lr'] for g in self.opt.opt.param_groups])
    spy = Spy()
    _, history = learner.train_run(data, cfg, model.electra, 0, torch.device('cpu'), None, 0, extra_cbs=(spy,))
    clf = classifier.ElectraClassifier(model.electra, 2)
    _, peaks = classifier.optimizer_groups(clf, 1e-3, 0.5, 'official')
    total = 2 * 4  # 32 examples, batch 8, 2 epochs
    assert len(spy.seen) == total and len(history) == 2
    for t, lrs in enumerate(spy.seen):  # warm-up and decay together, per layer: lr(t) = peak_g * min(1, t/W) * (1 - t/T)
        assert np.allclose(lrs, lr_at_step(t, peaks, int(0.1 * total), total)), t


def test_runs_are_reproducible_from_the_seed(tmp_path, glue_dir, tiny):
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, epochs=1, batch_size=8)
    data = sweep.prepare_task(TASKS['STS-B'], cfg, open_source(cfg.data), tok, cfg.cache_dir, True)
    assert len(data.train) == 64  # double_unordered
    a, ha = learner.train_run(data, cfg, model.electra, 7, torch.device('cpu'), None, 0)
    b, hb = learner.train_run(data, cfg, model.electra, 7, torch.device('cpu'), None, 0)
    c, _ = learner.train_run(data, cfg, model.electra, 8, torch.device('cpu'), None, 0)
    assert ha == hb and torch.equal(a.classifier.weight, b.classifier.weight)
    assert not torch.equal(a.classifier.weight, c.classifier.weight)
    assert not torch.equal(a.electra.embeddings.word_embeddings.weight, model.electra.embeddings.word_embeddings.weight)



def test_precision_on_cpu(monkeypatch, tmp_path, glue_dir, tiny):
    cpu = torch.device('cpu')
    assert learner.device_and_autocast('cpu', 'auto') == (cpu, None)
    with pytest.raises(ConfigError, match='precision: fp16 mixed precision needs a GPU'):
        learner.device_and_autocast('cpu', 'fp16')
    monkeypatch.setattr('electra.training.device.cpu_bf16_supported', lambda: False)
    with pytest.raises(ConfigError, match='precision: bf16 .* native bf16'):
        learner.device_and_autocast('cpu', 'bf16')
    monkeypatch.setattr('electra.training.device.cpu_bf16_supported', lambda: True)
    assert learner.device_and_autocast('cpu', 'bf16') == (cpu, torch.bfloat16)
    # a bf16 run on this CPU autocasts the classifier's matmuls (a spy reads the dtype of the logits)
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, batch_size=8)
    data = sweep.prepare_task(TASKS['RTE'], cfg, open_source(cfg.data), tok, cfg.cache_dir, False)
    from fastai.callback.core import Callback

    class Spy(Callback):
        order = 5  # before MixedPrecision (10) casts the predictions back to fp32 in its own after_pred
        def before_fit(self): self.dtypes = set()
        def after_pred(self): self.dtypes.add(self.pred.dtype)
    spy = Spy()
    _, history = learner.train_run(data, cfg, model.electra, 0, cpu, torch.bfloat16, 0, extra_cbs=(spy,))
    assert spy.dtypes == {torch.bfloat16} and np.isfinite(history[-1]['train_loss'])


# -- the sweep

def test_sweep_all_tasks_gives_the_11_files_and_resumes(tmp_path, glue_dir, tiny):
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, runs=1, seed=5)
    src, lines = open_source(cfg.data), []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    df = results.df
    assert sorted(df['task']) == sorted(n for n in TASKS if n != 'AX') and set(df['seed']) == {5}
    table = (tmp_path / 'ckpt/t/results.csv').read_text().splitlines()
    assert len(table) == 10 and table[0].startswith('task,run,seed,score,mcc,accuracy,f1,pearson,spearman,accuracy_mm')
    for name in df['task']: assert (tmp_path / f'ckpt/t/{name}_0.pth').is_file()
    mnli = results.get('MNLI', 0)
    assert mnli['score'] == mnli['accuracy'] and 0 <= mnli['accuracy_mm'] <= 100
    assert any(l.startswith('QQP: 30 training examples') for l in lines)  # the two empty-question rows dropped
    assert any(l.startswith('MRPC: 64 training examples (both segment orders)') for l in lines)

    text = sweep.write_summary(cfg, results)
    assert '| CoLA | mcc | 1 |' in text and 'GLUE score (8 of 8 tasks)' in text
    assert (tmp_path / 'ckpt/t/summary.md').is_file() and (tmp_path / 'ckpt/t/summary.png').stat().st_size > 1000

    files = sweep.write_test_predictions(cfg, results, tok, src, log=lines.append)
    out = tmp_path / 'out/t'
    assert sorted(p.name for p in files) == sorted(SUBMISSION_FILES + ['glue_submission.zip'])
    for name in SUBMISSION_FILES:
        header, rows = parse(out / name)
        assert header == ['index', 'prediction'] and len(rows) == 12 and [int(r[0]) for r in rows] == list(range(12))
    assert {r[1] for r in parse(out / 'AX.tsv')[1]} <= {'entailment', 'neutral', 'contradiction'}
    assert all(0 <= float(r[1]) <= 5 for r in parse(out / 'STS-B.tsv')[1])
    with zipfile.ZipFile(out / 'glue_submission.zip') as z: assert sorted(z.namelist()) == sorted(SUBMISSION_FILES)

    # run again: every run is found finished, nothing is trained; changed settings are refused
    again = []
    sweep.run_sweep(cfg, model, tok, src, log=again.append)
    assert again == [f'{n}: all 1 runs finished before; skipped' for n in TASKS if n != 'AX']
    with pytest.raises(ConfigError, match='CoLA run 0 was made with other settings'):
        sweep.run_sweep(job(tmp_path, glue_dir, runs=1, seed=5, lr=1e-4), model, tok, src, log=again.append)


def test_interrupted_sweep_resumes_and_ensemble_averages_logits(tmp_path, glue_dir, tiny):
    model, tok = tiny
    src = open_source(str(glue_dir))
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], runs=1), model, tok, src, log=lambda s: None)
    first = (tmp_path / 'ckpt/t/RTE_0.pth').stat().st_mtime_ns
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=3, ensemble_k=2)  # more runs: only runs 1 and 2 are trained
    lines = []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert (tmp_path / 'ckpt/t/RTE_0.pth').stat().st_mtime_ns == first and '1 of 3 runs' not in lines[0]
    assert lines[0].endswith('2 of 3 runs to do') and results.task_rows('RTE')['run'].tolist() == [0, 1, 2]
    sweep.write_test_predictions(cfg, results, tok, src, log=lines.append)
    assert 'ensemble dev accuracy' in lines[-1]
    # reference: the mean of the two best runs' logits, argmax, as label strings
    top = results.task_rows('RTE').sort_values(['score', 'run'], ascending=[False, True]).head(2)
    from electra.finetuning.tasks.glue.encoding import encode, make_loader
    enc = encode(src.load(TASKS['RTE'], 'test'), tok, 64)
    logits = [learner.predict_outputs(classifier.load_finetuned(p), make_loader(enc, 5, False, 0)) for p in top['checkpoint']]
    expected = [TASKS['RTE'].labels[i] for i in np.mean(logits, axis=0).argmax(-1)]
    assert [r[1] for r in parse(tmp_path / 'out/t/RTE.tsv')[1]] == expected


def test_ctrl_c_in_a_sweep_keeps_the_finished_runs_and_says_how_to_go_on(tmp_path, glue_dir, tiny, monkeypatch):
    "A Ctrl-C in run 1 of RTE stops the sweep with one message; run 0 stays in the table and is not trained again."
    model, tok = tiny
    src, real, calls = open_source(str(glue_dir)), learner.train_run, []

    def interrupted_second_run(*args, **kwargs):
        calls.append(args[3])  # the seed
        if len(calls) == 2: raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(sweep, 'train_run', interrupted_second_run)
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=3)
    with pytest.raises(TrainingStopped, match=r'by Ctrl-C during RTE run 1; the 1 finished run\(s\) are kept in '
                                              rf'{re.escape(str(tmp_path / "ckpt/t/results.csv"))}\. Run the same'):
        sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    assert ResultsTable(tmp_path / 'ckpt/t/results.csv').df['run'].tolist() == [0]
    lines = []
    sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert lines[0].endswith('2 of 3 runs to do') and calls[2:] == cfg.seed_list[1:]


def test_neptune_logger_gets_params_and_metrics(tmp_path, glue_dir, tiny, monkeypatch):
    import collections
    import types
    model, tok = tiny
    runs = []

    class FakeRun:
        "Records `run[key] = value`, `run[key].append(value)` and `stop()`."
        def __init__(self, **kw):
            self.kw, self.values, self.series, self.stopped = kw, {}, collections.defaultdict(list), False
            runs.append(self)
        def __setitem__(self, key, value): self.values[key] = value
        def __getitem__(self, key): return types.SimpleNamespace(append=self.series[key].append)
        def stop(self): self.stopped = True
    monkeypatch.setitem(sys.modules, 'neptune', types.SimpleNamespace(init_run=FakeRun))
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=2, epochs=2, logger='neptune', neptune_project='me/glue')
    sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)
    assert [r.kw for r in runs] == [{'project': 'me/glue', 'name': f't/RTE_{i}', 'tags': ['t', 'RTE'], 'mode': 'offline'}
                                    for i in range(2)]
    assert all(r.stopped for r in runs)
    assert runs[1].values['parameters']['seed'] == 1 and runs[1].values['parameters']['lr'] == 3e-4
    assert len(runs[0].series['dev/accuracy']) == 2 and len(runs[0].series['train/loss']) == 2
    assert runs[0].values['final/accuracy'] == runs[0].series['dev/accuracy'][-1]


@pytest.mark.skipif(not (REAL_GLUE / 'STS-B' / 'test.tsv').is_file(), reason='../shared/data/glue/STS-B is absent')
def test_real_sts_b_two_short_runs(tmp_path, tiny_dir):
    "From the demo checkpoint when it exists (else the tiny model): 2 short runs on the real STS-B."
    source = str(DEMO_CHECKPOINT) if DEMO_CHECKPOINT.is_file() else str(tiny_dir)
    model, tok = classifier.load_pretrained(source)
    cfg = job(tmp_path, REAL_GLUE, tasks=['STS-B'], runs=2, max_train_samples=64, epochs=1, model=source, batch_size=16)
    src = open_source(cfg.data)
    results = sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    rows = results.task_rows('STS-B')
    assert rows['run'].tolist() == [0, 1] and rows['seed'].tolist() == [0, 1]
    assert (rows['score'] == rows['spearman']).all()
    # each reported score is the saved run's own: its dev predictions, scored by scipy, give the table's numbers
    import scipy.stats

    from electra.finetuning.tasks.glue.encoding import make_loader
    dev = sweep.prepare_task(TASKS['STS-B'], cfg.for_task('STS-B'), src, tok, cfg.cache_dir, True).dev['dev']
    for r in rows.to_dict('records'):
        pred = learner.predict_outputs(classifier.load_finetuned(r['checkpoint']), make_loader(dev, cfg.eval_batch_size, False, 0))
        assert r['spearman'] == pytest.approx(100 * scipy.stats.spearmanr(pred, dev.label)[0], rel=1e-4)
        assert r['pearson'] == pytest.approx(100 * scipy.stats.pearsonr(pred, dev.label)[0], rel=1e-4)
    summary = sweep.write_summary(cfg, results)
    assert '| STS-B | spearman | 2 |' in summary and (tmp_path / 'ckpt/t/summary.md').is_file()
    sweep.write_test_predictions(cfg, results, tok, src, log=lambda s: None)
    header, rows = parse(tmp_path / 'out/t/STS-B.tsv')
    test_index = [r[0] for r in parse(REAL_GLUE / 'STS-B' / 'test.tsv')[1]]
    assert header == ['index', 'prediction'] and len(rows) == 1379 and [r[0] for r in rows] == test_index
    assert all(0.0 <= float(r[1]) <= 5.0 for r in rows)


def test_demo_data_is_written_once_and_doubling_follows_the_overrides(tmp_path):
    src = sweep.resolve_data('demo', tmp_path)
    stamp = (tmp_path / 'demo_glue/CoLA/train.tsv').stat().st_mtime_ns
    assert src.description == f'GLUE TSV files in {tmp_path / "demo_glue"}'
    assert len(src.load(TASKS['MNLI'], 'train')) == 400 and len(src.load(TASKS['AX'], 'test')) == 100
    sweep.resolve_data('demo', tmp_path)
    assert (tmp_path / 'demo_glue/CoLA/train.tsv').stat().st_mtime_ns == stamp
    cfg = config_from_dict(FinetuneConfig, {'task_overrides': {'QQP': {'double_unordered': True}, 'STS-B': {'double_unordered': False}}})
    doubled = {n: sweep._doubled(TASKS[n], cfg, cfg.for_task(n)) for n in ('MRPC', 'STS-B', 'QQP', 'RTE')}
    assert doubled == {'MRPC': True, 'STS-B': False, 'QQP': True, 'RTE': False}
    off = config_from_dict(FinetuneConfig, {'double_unordered': False})
    assert not sweep._doubled(TASKS['MRPC'], off, off.for_task('MRPC'))


# -- presets and the driver

@pytest.mark.parametrize('preset, lr, decay', [('small', 3e-4, 0.8), ('base', 1e-4, 0.8), ('large', 5e-5, 0.9), ('demo', 1e-3, 0.8)])
def test_presets(preset, lr, decay):
    cfg = load_config(FinetuneConfig, ['--config', preset], preset_dir=REPO / 'configs/finetune')
    assert (cfg.lr, cfg.layer_lr_decay, cfg.batch_size, cfg.weight_decay, cfg.layer_lr_mode) == (lr, decay, 32, 0.0, 'official')
    assert cfg.for_task('RTE').epochs == cfg.for_task('STS-B').epochs == 10 and cfg.for_task('CoLA').epochs == 3
    assert cfg.tasks == list(TASKS) and cfg.select == 'best'


def test_task_overrides_are_validated():
    with pytest.raises(ConfigError, match="task_overrides.RTE: 'epoch' cannot be set per task. Did you mean 'epochs'"):
        config_from_dict(FinetuneConfig, {'task_overrides': {'RTE': {'epoch': 3}}})
    with pytest.raises(ConfigError, match="unknown GLUE task 'rte'. Did you mean 'RTE'"):
        config_from_dict(FinetuneConfig, {'task_overrides': {'rte': {'epochs': 3}}})
    with pytest.raises(ConfigError, match='task_overrides.MRPC: epochs: must be positive'):
        config_from_dict(FinetuneConfig, {'task_overrides': {'MRPC': {'epochs': 0}}})
    with pytest.raises(ConfigError, match='task_overrides.SST-2: double_unordered needs a sentence-pair task'):
        config_from_dict(FinetuneConfig, {'task_overrides': {'SST-2': {'double_unordered': True}}})
    with pytest.raises(ConfigError, match='AX is predicted with the MNLI model'):
        config_from_dict(FinetuneConfig, {'tasks': ['AX']})
    cfg = config_from_dict(FinetuneConfig, {'lr': 1e-4, 'task_overrides': {'CoLA': {'lr': 2e-4, 'layer_lr_mode': 'intended'}}})
    assert (cfg.for_task('CoLA').lr, cfg.for_task('CoLA').layer_lr_mode, cfg.for_task('SST-2').lr) == (2e-4, 'intended', 1e-4)


def run_cli(*args, cwd=REPO):
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1', 'PYTHONPATH': str(REPO)}
    return subprocess.run([sys.executable, str(REPO / 'finetune.py'), *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def test_driver_help_and_errors(tmp_path):
    r = run_cli('--help')
    assert r.returncode == 0 and '--layer_lr_mode' in r.stdout and 'Presets in configs/finetune: base, demo, large, small' in r.stdout
    r = run_cli('--model', str(tmp_path / 'missing.pth'), '--cache_dir', str(tmp_path / 'cache'))
    assert r.returncode == 2 and 'Traceback' not in r.stderr
    assert r.stderr.startswith('error: model: ') and 'run `python pretrain.py` first' in r.stderr


def test_driver_end_to_end(tmp_path, glue_dir, tiny_dir):
    preset = tmp_path / 'mine.yaml'
    preset.write_text(f'model: {tiny_dir}\ndata: {glue_dir}\ntasks: [WNLI]\nruns: 1\nepochs: 1\ngroup: cli\n'
                      f'output_dir: {tmp_path / "ckpt"}\ntest_output_dir: {tmp_path / "out"}\ncache_dir: {tmp_path / "cache"}\n')
    r = run_cli('--config', str(preset), '--device', 'cpu')
    assert r.returncode == 0, r.stderr
    assert '| WNLI | accuracy | 1 |' in r.stdout and (tmp_path / 'out/cli/WNLI.tsv').is_file()
    assert (tmp_path / 'ckpt/cli/results.csv').is_file() and (tmp_path / 'out/cli/glue_submission.zip').is_file()


def test_uncreatable_cache_dir_named():
    with pytest.raises(ConfigError, match=r"cache_dir: cannot write to '/proc/electra_cache'.*--cache_dir"):
        sweep.resolve_data('demo', '/proc/electra_cache')


@pytest.mark.parametrize('scale', [5.0, 1.0])
def test_sts_b_targets_learned_on_the_official_scale(tiny, tmp_path, scale):
    """stsb_scale 5 (official): the head learns score / 5 with MSE; predictions come back on the 0-5 scale, also
    from a saved run. 1: the raw scores (replication)."""
    model, _ = tiny
    clf = classifier.ElectraClassifier(model.electra, 1, dropout=0.0, target_scale=scale).eval()
    ids = torch.tensor([[2, 20, 21, 3, 0], [2, 22, 3, 0, 0]]); mask = (ids != 0).long(); types = torch.zeros_like(ids)
    y = torch.tensor([4.0, 1.5])
    with torch.no_grad(): raw = clf(ids, mask, types)
    cfg = config_from_dict(FinetuneConfig, {'stsb_scale': scale})
    loader = torch.utils.data.DataLoader(list(zip(ids, mask, types, y)), batch_size=2)  # one batch, in order
    learn = learner.finetuning_learner(clf, loader, [], cfg, True, torch.device('cpu'), None)
    assert float(learn.loss_func(raw, y)) == pytest.approx(float(((raw - y / scale) ** 2).mean()), rel=1e-6)
    assert np.allclose(learner.predict_outputs(clf, loader), scale * raw.numpy(), atol=1e-6)
    path = tmp_path / 'run.pth'
    torch.save({'format': 'electra-glue', 'n_outputs': 1, 'dropout': 0.0, 'target_scale': scale,
                'electra_config': model.electra.config.to_dict(), 'model': clf.state_dict()}, path)
    assert np.allclose(learner.predict_outputs(classifier.load_finetuned(path), loader), scale * raw.numpy(), atol=1e-6)
    assert FinetuneConfig().stsb_scale == 5.0


def saved_as_bert(tiny, path: Path) -> Path:
    "The tiny model and its tokenizer saved to `path`, with a config.json that says BERT."
    import json
    model, tok = tiny
    model.save_pretrained(path)
    tok.save_pretrained(path)
    cfg = json.loads((path / 'config.json').read_text())
    (path / 'config.json').write_text(json.dumps({**cfg, 'model_type': 'bert', 'architectures': ['BertModel']}))
    return path


def test_model_directories_that_cannot_work_are_refused(tiny, tmp_path):
    "No tokenizer files, no config.json, or a BERT model: each refused in one message naming the fix."
    import shutil
    model, tok = tiny
    good = tmp_path / 'good'
    model.save_pretrained(good)
    tok.save_pretrained(good)
    no_tok = tmp_path / 'no_tokenizer'
    model.save_pretrained(no_tok)
    with pytest.raises(ConfigError, match='no tokenizer files .neither tokenizer.json nor vocab.txt.'):
        classifier.load_pretrained(str(no_tok))
    no_config = tmp_path / 'no_config'
    shutil.copytree(good, no_config)
    (no_config / 'config.json').unlink()
    with pytest.raises(ConfigError, match='no config.json, so not a save_pretrained directory'):
        classifier.load_pretrained(str(no_config))
    with pytest.raises(ConfigError, match='a bert model, not ELECTRA'):
        classifier.load_pretrained(str(saved_as_bert(tiny, tmp_path / 'bert')))
    assert classifier.load_pretrained(str(good))[0].config.model_type == 'electra'


def test_driver_refuses_bad_model_directories_and_a_bad_dropout_in_one_line(tmp_path, tiny):
    "Through finetune.py: status 2 and stderr the one error line, for a model and for a setting."
    bert = saved_as_bert(tiny, tmp_path / 'bert')
    r = run_cli('--model', str(bert), '--data', 'demo', '--cache_dir', str(tmp_path / 'cache'), '--device', 'cpu')
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith(f'error: {bert}/config.json: a bert model, not ELECTRA. ')
    (bert / 'config.json').unlink()
    r = run_cli('--model', str(bert), '--data', 'demo', '--cache_dir', str(tmp_path / 'cache'), '--device', 'cpu')
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith(f'error: {bert}: no config.json, so not a save_pretrained directory')
    r = run_cli('--dropout', '1.5')
    assert (r.returncode, r.stderr) == (2, 'error: dropout: must be in [0, 1), got 1.5.\n')


def test_nan_predictions_never_reach_a_submission_file(tmp_path, glue_dir, tiny):
    model, tok = tiny
    src = open_source(str(glue_dir))
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=1)
    results = sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    ckpt_path = tmp_path / 'ckpt/t/RTE_0.pth'
    ckpt = torch.load(ckpt_path, weights_only=True)
    ckpt['model']['classifier.weight'][0, 0] = float('nan')   # a run that diverged
    torch.save(ckpt, ckpt_path)
    with pytest.raises(ConfigError, match=r'RTE.tsv: run 0 .* predict NaN or infinite outputs for \d+ of \d+ RTE test '
                                          r'examples; no file written\. Delete those runs. rows'):
        sweep.write_test_predictions(cfg, results, tok, src, log=lambda s: None)
    assert not (tmp_path / 'out/t/RTE.tsv').exists()
