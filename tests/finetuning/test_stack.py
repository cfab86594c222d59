"""electra/finetuning/stack.py: stacked runs are the runs alone (dropout 0), their traps, their dropout masks apart."""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from electra.config.errors import ConfigError
from electra.finetuning import classifier, learner, stack, sweep
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.tasks import TASKS
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')
CPU = torch.device('cpu')
SEEDS = [3, 11, 5]


def no_dropout(body: nn.Module) -> nn.Module:
    "A copy of `body` without dropout: a stacked run draws other masks than the run alone, so exactness needs none."
    body = copy.deepcopy(body)
    body.config.hidden_dropout_prob = body.config.attention_probs_dropout_prob = 0.0
    for m in body.modules():
        if isinstance(m, nn.Dropout): m.p = 0.0
    return body


def classification(tmp_path, glue_dir, tok, name, **kw):
    "A tiny task's config (dropout 0 unless given) and data; STS-B (regression) on both segment orders."
    cfg = job(tmp_path, glue_dir, **{'dropout': 0.0, **kw})
    return cfg, ClassificationTask(TASKS[name], open_source(cfg.data)).prepare(cfg, tok, cfg.cache_dir, name == 'STS-B')


def step_spy():
    "A fastai callback that keeps each training step's loss of each of the R runs trained ([R]; R = 1 alone)."
    from fastai.callback.core import Callback

    class Spy(Callback):
        order = 99
        def before_fit(self): self.losses = []
        def after_batch(self):  # also after a compiled step, which skips fastai's own events
            if self.training: self.losses.append(self.loss_func.local_sum.detach().reshape(-1).clone())
    return Spy()


def runs_alone(cfg, data, body, seeds=SEEDS, device=CPU, autocast=None) -> list[tuple]:
    "Each seed's run alone (`train_run`): its model, history and per-step losses."
    alone = []
    for seed in seeds:
        spy = step_spy()
        model, history = learner.train_run(data, cfg, body, seed, device, autocast, 0, extra_cbs=(spy,))
        alone.append((model, history, torch.cat(spy.losses)))
    return alone


def alone_and_stacked(cfg, data, body, seeds=SEEDS, device=CPU, autocast=None):
    "Each seed's run alone (`train_run`) and all of them stacked (`train_stack`): models, histories, per-step losses."
    alone = runs_alone(cfg, data, body, seeds, device, autocast)
    spy = step_spy()
    stacked, one, histories = stack.train_stack(data, cfg, body, seeds, device, autocast, 0, extra_cbs=(spy,))
    return alone, (stacked, one, histories, torch.stack(spy.losses))  # losses [steps, R]


@torch.no_grad()
def outputs(model, loader) -> list:
    "The model's outputs (eval mode) for each batch of an evaluation loader: logits, scores, or QA's dict of them."
    device = next(model.parameters()).device
    return [model.eval()(*(x.to(device) for x in batch[:3])) for batch in loader]


def assert_runs_equal(alone, stacked_out, cfg, data, tol=1e-5, noise: tuple = ()):
    """Each run's loss at every step (relative: a batch's summed loss reaches ~70, where float32 resolves 4e-6), weights,
    dev outputs and history equal its run alone's within `tol`. A regression head's Pearson is compared through the predictions it is computed from: the tiny model's dev
    predictions lie within 0.01 of each other, so their 1e-6 rounding differences move it by ~1e-3 (in %). `noise`:
    parameters whose true gradient is 0, which Adam moves by rounding noise alone: not compared, and the run alone's
    values are copied in before the outputs are."""
    stacked, one, histories, losses = stacked_out
    for r, (model, history, run_losses) in enumerate(alone):
        torch.testing.assert_close(losses[:, r], run_losses, rtol=tol, atol=0)
        mine = dict(stacked.copy_run_to(r, one).named_parameters())
        for name, p in model.named_parameters():
            if name in noise: mine[name].data.copy_(p)
            torch.testing.assert_close(mine[name], p, rtol=0, atol=tol, msg=f'run {r} {name}')
        for split, enc in data.dev.items():
            loader = data.task.loader(enc, cfg, 0, False)
            for got, want in zip(outputs(one, loader), outputs(model, loader)):
                torch.testing.assert_close(got, want, rtol=tol, atol=tol)  # relative too: QA's log-probabilities reach -10
        assert [h.keys() for h in histories[r]] == [h.keys() for h in history]
        keys = ['train_loss'] + ([] if data.task.info.is_regression else list(history[-1].keys() - {'epoch', 'train_loss'}))
        np.testing.assert_allclose([[h[k] for k in keys] for h in histories[r]], [[h[k] for k in keys] for h in history],
                                   rtol=0, atol=tol)


@pytest.mark.parametrize('name', ['RTE', 'STS-B'])
def test_stacked_runs_are_the_runs_alone(tmp_path, glue_dir, tiny, name):
    """Classification and regression, 2 epochs of batches of 12 (a short batch each epoch): each stacked run's loss at
    every step, weights, dev predictions and dev metrics after each epoch equal its run alone (same seed), with
    clipping on (it bites: the summed loss's gradient is far above 1)."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, name, epochs=2, batch_size=12, lr=1e-3)
    alone, stacked = alone_and_stacked(cfg, data, no_dropout(model.electra))
    assert stacked[3].shape == (2 * -(-len(data.train) // 12), 3)  # [steps, runs]: 2 epochs of 3 steps (STS-B 6)
    assert_runs_equal(alone, stacked, cfg, data)


def test_uneven_batches_are_padded_with_rows_of_weight_0(tmp_path, glue_dir, tiny):
    """Length bucketing puts each run's short batch at its own step, so a step's batches differ in rows (and lengths):
    the padding rows weigh 0 and the runs stay their runs alone. Given weight, they would train run r on copies of its
    first row (the test fails so)."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'RTE', epochs=2, batch_size=12, lr=1e-3, length_bucketing=True)
    loader = stack.StackedLoader([data.task.loader(data.train, cfg, 0, True, s) for s in SEEDS], 0)
    weights = torch.stack([b[-1] for b in loader])  # [steps, runs, rows]: one epoch's
    assert (weights == 0).any(dim=2).sum() == 3 and weights[:, 0].sum(1).tolist() != [12, 12, 8]  # the trap is met
    assert weights.sum((0, 2)).tolist() == [32.0] * 3  # each run's 32 examples once, no padding row weighs
    alone, stacked = alone_and_stacked(cfg, data, no_dropout(model.electra))
    assert_runs_equal(alone, stacked, cfg, data)


def test_each_run_is_clipped_by_its_own_norm(tiny):
    "Run r's gradient is clipped as `clip_grad_norm_` clips it alone, whatever the other runs' norms (here 100 x apart)."
    model, _ = tiny
    clf = [classifier.ElectraClassifier(copy.deepcopy(model.electra), 2) for _ in range(3)]
    stacked = stack.StackedRuns(clf)
    torch.manual_seed(0)
    for p in stacked.parameters(): p.grad = torch.randn_like(p) * torch.tensor([0.001, 1.0, 0.1]).view(-1, *[1] * (p.dim() - 1))
    want = []
    for r in range(3):
        alone = [torch.zeros_like(p[r]) for p in stacked.parameters()]  # run r's parameters alone, its gradient theirs
        for a, p in zip(alone, stacked.parameters()): a.grad = p.grad[r].clone()
        torch.nn.utils.clip_grad_norm_(alone, 0.5)
        want.append([a.grad for a in alone])
    stack.clip_runs_by_norm_([p.grad for p in stacked.parameters()], 0.5)
    norms = [float(torch.stack([p.grad[r].norm() for p in stacked.parameters()]).norm()) for r in range(3)]
    assert norms[0] < 0.5 and norms[1] == pytest.approx(0.5) and norms[2] == pytest.approx(0.5)  # run 0 untouched
    for r in range(3):
        for p, g in zip(stacked.parameters(), want[r]): torch.testing.assert_close(p.grad[r], g, rtol=1e-6, atol=0)


def test_dropout_masks_differ_between_runs(tiny):
    "Three stacked copies of one model (dropout 0.1 in body and head) given one batch: in training their outputs differ, in eval they are the model's."
    model, _ = tiny
    torch.manual_seed(0)
    clf = classifier.ElectraClassifier(copy.deepcopy(model.electra), 2, 0.1)
    stacked = stack.StackedRuns([clf] * 3)
    ids = torch.randint(5, model.config.vocab_size, (4, 10))
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    mask[1, 6:] = 0
    batch = [x.expand(3, -1, -1) for x in (ids, mask, types)]  # [runs, B, L]: the same batch for every run
    out = stacked.train()(*batch)  # [3, 4, 2]
    assert not torch.allclose(out[0], out[1]) and not torch.allclose(out[1], out[2]) and not torch.allclose(out[0], out[2])
    out, alone = stacked.eval()(*batch), clf.eval()(ids, mask, types)
    for r in range(3): torch.testing.assert_close(out[r], alone, rtol=0, atol=1e-6)


def test_a_stack_scores_each_dev_batch_once_for_all_its_runs(tmp_path, glue_dir, tiny, monkeypatch):
    """MNLI (two dev sets), 3 stacked runs, 2 epochs: the model's forward runs once per training step and once per dev
    batch each epoch, for all runs together, where scoring run by run would run it 3 times per dev batch; the runs'
    dev metrics are still those of the runs alone (`test_stacked_runs_are_the_runs_alone`)."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'MNLI', epochs=2, batch_size=12, eval_batch_size=6)
    calls = []
    plain = classifier.ElectraClassifier.forward
    monkeypatch.setattr(classifier.ElectraClassifier, 'forward', lambda m, *a, **k: calls.append(m.training) or plain(m, *a, **k))
    stack.train_stack(data, cfg, model.electra, SEEDS, CPU, None, 0)
    steps, dev_batches = -(-len(data.train) // 12), sum(-(-len(e) // 6) for e in data.dev.values())
    assert len(data.dev) == 2 and dev_batches > 2 and calls == ([True] * steps + [False] * dev_batches) * 2


def test_a_replayed_run_is_its_runs_outputs_and_refuses_other_batches(tmp_path, glue_dir, tiny):
    """`ReplayedRun` gives the task's evaluation run r's own outputs (those of its model alone), batch by batch; a batch
    read in another order, or one more than the stack scored, stops the evaluation."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'RTE', eval_batch_size=6)
    torch.manual_seed(0)
    runs = [classifier.ElectraClassifier(copy.deepcopy(model.electra), 2) for _ in range(3)]
    dls = {'dev': data.task.loader(data.dev['dev'], cfg, 0, False)}
    outs = stack.stacked_dev_outputs(stack.StackedRuns(runs), dls, None)
    for r in range(3):
        got = learner.predict_outputs(stack.ReplayedRun(runs[r], outs[r]), dls['dev'])
        torch.testing.assert_close(got, learner.predict_outputs(runs[r], dls['dev']), rtol=0, atol=1e-6)
    replay, batches = stack.ReplayedRun(runs[0], outs[0]), [b[:3] for b in dls['dev']]
    with pytest.raises(RuntimeError, match='read a batch the stack did not score, or in another order'):
        replay(*batches[1])
    replay = stack.ReplayedRun(runs[0], outs[0])
    for b in batches: replay(*b)
    with pytest.raises(RuntimeError, match='read a batch the stack did not score'): replay(*batches[0])


def test_stacked_sweep_rows_equal_a_sequential_sweeps(tmp_path, glue_dir, tiny):
    """`stack_runs: 3` and `stack_runs: 1` sweeps of RTE and STS-B, 3 runs each (dropout 0): the same rows, but for the
    stacked runs' shared time; STS-B's Pearson (not its score, Spearman's ranks) as far as its near-equal predictions allow
    (see `assert_runs_equal`; 0.003 apart in % here)."""
    model, tok = tiny
    pretrained = copy.deepcopy(model)
    pretrained.electra = no_dropout(model.electra)
    lines, tables = [], {}
    for n in (3, 1):
        cfg = job(tmp_path / str(n), glue_dir, runs=3, tasks=['RTE', 'STS-B'], epochs=2, batch_size=12, lr=1e-3,
                  dropout=0.0, predict=False, stack_runs=n, length_bucketing=True)
        tables[n] = sweep.run_sweep(cfg, pretrained, tok, open_source(cfg.data), log=lines.append).df
    assert 'RTE: 3 runs at a time, stacked' in lines and 'STS-B: 3 runs at a time, stacked' in lines
    stacked, alone = (tables[n].drop(columns=['seconds', 'checkpoint', 'finished_at']) for n in (3, 1))
    pd.testing.assert_frame_equal(stacked.drop(columns=['pearson', 'score', 'train_loss']),
                                  alone.drop(columns=['pearson', 'score', 'train_loss']))
    np.testing.assert_allclose(stacked['train_loss'], alone['train_loss'], rtol=1e-5)
    rte, sts = stacked['task'] == 'RTE', stacked['task'] == 'STS-B'
    np.testing.assert_allclose(stacked.loc[rte, 'score'], alone.loc[rte, 'score'], rtol=0, atol=1e-5)
    np.testing.assert_allclose(stacked.loc[sts, ['pearson', 'score']], alone.loc[sts, ['pearson', 'score']], rtol=0, atol=1e-2)


def test_stacked_tagging_runs_are_the_runs_alone(tmp_path, tiny):
    """Token tagging (labels [B, T], the padded positions' labels ignored), windows of 24 tokens, 2 epochs, length
    bucketing (uneven batches): each stacked run equals its run alone, as for classification."""
    from electra.finetuning.tasks.files import read_task_file
    from electra.finetuning.tasks.tagging.task import TaggingTask
    from tests.finetuning.tasks.tagging.test_task import demo_task
    model, tok = tiny
    spec = demo_task(tmp_path, 'scheme: IOB2\nmax_length: 24\n')
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], epochs=2, batch_size=12, lr=1e-3, length_bucketing=True).for_task('ner')
    task = TaggingTask(read_task_file(spec))
    data = task.prepare(cfg, tok, cfg.cache_dir, False)
    alone, stacked = alone_and_stacked(cfg, data, no_dropout(model.electra))
    assert_runs_equal(alone, stacked, cfg, data)


def test_worker_processes_train_the_stacks_of_one_process(tmp_path, glue_dir, tiny):
    """`parallel_runs: 2`, 4 runs of RTE in stacks of 2 (dropout on): each worker trains a stack, and the table and the
    weights are those of the same stacks trained in this process (a stack's dropout masks follow from its seeds)."""
    tables, lines = {}, []
    for n in (1, 2):
        cfg = job(tmp_path / str(n), glue_dir, tasks=['RTE'], runs=4, stack_runs=2, parallel_runs=n, threads=1, predict=False)
        tables[n] = sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=lines.append).df
    assert lines.count('RTE: 2 runs at a time, stacked') == 2 and '4 runs on 2 worker processes' not in lines
    assert any(l.startswith('2 stacks of runs on 2 worker processes') for l in lines), lines
    varying = ['seconds', 'finished_at', 'checkpoint']
    pd.testing.assert_frame_equal(tables[2].drop(columns=varying), tables[1].drop(columns=varying))
    for mine, theirs in zip(tables[2]['checkpoint'], tables[1]['checkpoint']):
        mine, theirs = (torch.load(p, weights_only=False)['model'] for p in (mine, theirs))
        for k, v in theirs.items(): assert torch.equal(mine[k], v), k


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_cuda_stacked_runs_are_the_runs_alone_and_run_in_bf16(tmp_path, glue_dir, tiny):
    """On a GPU, in fp32, each stacked run equals its run alone as on the CPU (uneven batches, clipping); in bf16 a
    stack trains and its runs' losses stay within bf16 rounding of fp32's first step."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'RTE', epochs=2, batch_size=12, lr=1e-3, length_bucketing=True)
    cuda = torch.device('cuda')
    alone, stacked = alone_and_stacked(cfg, data, no_dropout(model.electra), device=cuda)
    assert_runs_equal([(m, h, l.cpu()) for m, h, l in alone], (*stacked[:3], stacked[3].cpu()), cfg, data)
    _, bf16 = alone_and_stacked(cfg, data, no_dropout(model.electra), seeds=SEEDS[:2], device=cuda, autocast=torch.bfloat16)
    torch.testing.assert_close(bf16[3][0].cpu(), stacked[3][0, :2].cpu(), rtol=2e-2, atol=0)


def test_stack_size_by_flag_device_memory_and_torchrun(monkeypatch, tmp_path, tiny):
    """How many runs a stack takes: `stack_runs` (at most the runs to do); with 0, one on the CPU and on a GPU as many
    as 80% of its free memory holds (a worker's share of it); under torchrun one, and a `stack_runs` above 1 refused
    with the way to get it."""
    body = tiny[0].electra
    cfg = lambda **kw: job(tmp_path, 'demo', **kw)  # noqa: E731
    size = lambda c, device='cpu', todo=10, share=1: stack.stack_size(c, c, body, torch.device(device), None, todo, share)  # noqa: E731
    assert (size(cfg(stack_runs=4)), size(cfg(stack_runs=4), todo=3), size(cfg()), size(cfg(stack_runs=1))) == (4, 3, 1, 1)
    one = stack.run_bytes(body, cfg(), None)
    monkeypatch.setattr(torch.cuda, 'mem_get_info', lambda device: (int(7.5 * one / 0.8), 0))  # room for 7.5 runs
    assert (size(cfg(), 'cuda'), size(cfg(), 'cuda', todo=5), size(cfg(), 'cuda', share=2)) == (7, 5, 3)
    assert size(cfg(stack_runs=2), 'cuda') == 2
    monkeypatch.setenv('RANK', '0'), monkeypatch.setenv('WORLD_SIZE', '2')  # under torchrun: each run over all processes
    assert (size(cfg(), 'cuda'), size(cfg(stack_runs=1))) == (1, 1)
    with pytest.raises(ConfigError, match=r'stack_runs: 3 under torchrun, whose processes train every run together '
                                          r'\(data-parallel\)\. Run `python finetune.py --stack_runs 3` without torchrun'):
        size(cfg(stack_runs=3))
