"""`compile` in fine-tuning: a run's or a stack's whole training step as one compiled graph (`finetuning_step` with each
run's clipping, run by `FinetuningStep`) is the plain fastai step, compiles once per length bucket without a graph break, and is refused where
it cannot run."""
from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from electra.config.errors import ConfigError, RunWarning
import electra.finetuning.step as step_module
from electra.finetuning import learner, stack
from electra.finetuning.step import FinetuningStep
from electra.training.step import one_graph_supported
from tests.finetuning.test_stack import SEEDS, assert_runs_equal, classification, no_dropout, runs_alone, step_spy
from tests.support.finetune import job

pytestmark = [pytest.mark.usefixtures('one_thread'),
              pytest.mark.skipif(not one_graph_supported(), reason='torch < 2.11 cannot trace the backward into a graph')]
CPU = torch.device('cpu')
BUCKETS = [22, 24, 26, 64]  # the tiny RTE's lengths are 19-26, STS-B's 25-28


class CountingBackend:
    "A torch.compile backend that keeps the input shapes of each graph it is given and runs it as aot_eager does."

    def __init__(self): self.shapes = []

    def __call__(self, gm, inputs):
        from torch._dynamo.backends.debugging import aot_eager
        ints = [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor) and x.dtype == torch.int64]
        self.shapes.append(sorted({s for s in ints if len(s) == max(map(len, ints))}))  # ids, mask, types: [(N,) B, L]
        return aot_eager(gm, inputs)


@pytest.fixture
def counting(monkeypatch):
    "Every torch.compile of this test on the counting aot_eager backend (the graph's own ops, no code generation)."
    backend, real = CountingBackend(), torch.compile
    monkeypatch.setattr(torch, 'compile', lambda fn, **kw: real(fn, **{**kw, 'backend': backend}))
    with warnings.catch_warnings():
        warnings.simplefilter('error', RunWarning)  # a failed compilation falls back with a warning: none here
        yield backend


@pytest.mark.parametrize('bucketing', [True, False])
def test_a_compiled_stack_is_each_run_alone_and_compiles_once_per_bucket(tmp_path, glue_dir, tiny, counting, bucketing):
    """RTE, 3 stacked runs, an epoch of batches of 12 (a short one: with random batches, the last step of every run),
    clipping that bites, dropout 0: each compiled run equals its plain run alone to 1e-5 (every step's
    loss, weights, dev outputs, history), so the graph clips each run by its own norm; every step is padded to 12 rows
    and one of the buckets' lengths, so the step compiles once per bucket the batches use, never for a short step.
    Compiled with fullgraph=True and no fallback (its warning is an error here): one graph a step, without a break."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'RTE', epochs=1, batch_size=12, lr=1e-3,
                               length_bucketing=bucketing, length_buckets=BUCKETS)
    alone = runs_alone(cfg, data, no_dropout(model.electra))
    compiled = stack.train_stack(data, dataclasses.replace(cfg, compile=True), no_dropout(model.electra), SEEDS, CPU, None, 0,
                                 extra_cbs=(spy := step_spy(),))
    assert_runs_equal(alone, (*compiled, torch.stack(spy.losses)), cfg, data)
    steps = list(stack.StackedLoader([data.task.loader(data.train, cfg, 0, True, s) for s in SEEDS], 0))
    used = {b[0].shape[-1] for b in steps}
    assert len(used) >= 2 if bucketing else steps[-1][0].shape[1] == 8  # unpadded, the last step would be 8 rows
    assert sorted(counting.shapes) == sorted([[(3, 12, n)] for n in used])


def test_a_compiled_run_alone_is_its_plain_run(tmp_path, glue_dir, tiny, counting):
    """One run compiled with global clipping, dropout on: the same losses and weights as the plain fastai step with the
    same seed (the compiled graph draws the same dropout masks); a run alone is not padded to full rows, so its short
    last batch compiles a graph of its own."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'RTE', epochs=1, batch_size=12, lr=1e-3, clip_grad=0.05,
                               dropout=0.1, length_buckets=BUCKETS)
    runs = {}
    for on in (False, True):
        runs[on] = learner.train_run(data, dataclasses.replace(cfg, compile=on), model.electra, 3, CPU, None, 0,
                                     extra_cbs=(spy := step_spy(),)) + (torch.cat(spy.losses),)
    (plain, history, losses), (mine, mine_history, mine_losses) = runs[False], runs[True]
    torch.testing.assert_close(mine_losses, losses, rtol=1e-5, atol=0)
    for (name, p), q in zip(plain.named_parameters(), mine.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-5, msg=name)
    assert [h['train_loss'] for h in mine_history] == pytest.approx([h['train_loss'] for h in history], rel=1e-5)
    assert 2 <= len(counting.shapes) <= 2 * len(BUCKETS) and any(s[0][0] < 12 for s in counting.shapes)


def test_compile_is_refused_where_it_cannot_run(tmp_path, monkeypatch):
    "Without length buckets, with fp16, or under torchrun: one line naming the key and what to do instead."
    with pytest.raises(ConfigError, match=r'^length_buckets: compile needs a few fixed lengths to pad batches to'):
        job(tmp_path, 'demo', compile=True)
    with pytest.raises(ConfigError, match=r"^precision: compile runs the step in one graph in fp32 or bf16.*--precision bf16"):
        job(tmp_path, 'demo', compile=True, length_buckets=[64], precision='fp16')
    FinetuningStep(1.0, 0, 'fp32', compile=True)
    with pytest.raises(ConfigError, match=r'^compile: the whole step as one graph runs bf16 or fp32'):
        FinetuningStep(1.0, 0, 'fp16', compile=True)  # precision 'auto' on a GPU without bf16
    monkeypatch.setattr(step_module, 'is_distributed', lambda: True)
    with pytest.raises(ConfigError, match=r'^compile: the step as one graph runs in one process; under torchrun'):
        FinetuningStep(1.0, 0, 'fp32', compile=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('mode', ['default', 'reduce-overhead'])
def test_cuda_compiled_stack_is_the_eager_stack(tmp_path, glue_dir, tiny, mode):
    """On a GPU, fp32, the stack's step compiled by inductor (and replayed as CUDA graphs with reduce-overhead) trains
    each run as the eager stacked step does, to inductor's rounding (its fused kernels sum in other orders)."""
    model, tok = tiny
    cfg, data = classification(tmp_path, glue_dir, tok, 'RTE', epochs=2, batch_size=12, lr=1e-3, length_bucketing=True,
                               length_buckets=BUCKETS)
    cuda, got = torch.device('cuda'), {}
    for on in (False, True):
        spy = step_spy()
        stacked, _, histories = stack.train_stack(data, dataclasses.replace(cfg, compile=on, compile_mode=mode),
                                                  no_dropout(model.electra), SEEDS, cuda, None, 0, extra_cbs=(spy,))
        got[on] = torch.stack(spy.losses).cpu(), {k: v.cpu() for k, v in stacked.state_dict().items()}
    torch.testing.assert_close(got[True][0], got[False][0], rtol=1e-4, atol=0)
    for k, v in got[False][1].items(): torch.testing.assert_close(got[True][1][k], v, rtol=0, atol=1e-4, msg=k)
