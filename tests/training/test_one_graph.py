"""The pretraining step function `learn_from` (electra/pretraining/step.py: forward, loss, backward, clipping, optimizer)
compiled as one graph (`compile_scope` step, electra/training/step.py's `StepCallback`) is the eager step."""
import pytest
import torch
from fastai.callback.core import Callback

from electra.config.errors import ConfigError, RunWarning
from tests.support import runners
from tests.support.baseline import BERT_IDS, BenchTokenizer
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model
from electra.pretraining.step import MicroBatch, learn_from
from electra.training.step import one_graph_supported
from tests.support.tiny import V, batches, tiny_cfg, tiny_model, token_ids

pytestmark = pytest.mark.usefixtures('one_thread')


class LossLog(Callback):
    "Keeps every step's (generator, discriminator) losses."
    order = 71

    def before_fit(self): self.losses = []

    def after_batch(self): self.losses.append(self.learn.pretraining_step.sums[1:3].tolist())  # gen_loss, disc_loss


class CountingBackend:
    "A torch.compile backend that counts the graphs it is given and runs them as aot_eager does."

    def __init__(self): self.graphs = 0

    def __call__(self, gm, inputs):
        from torch._dynamo.backends.debugging import aot_eager
        self.graphs += 1
        return aot_eager(gm, inputs)


def run_steps(cfg, precision='fp32', n=4, backend=None, compiled=None, model=tiny_model):
    """`n` steps of the real pretraining Learner on the tiny model (`model(cfg)`): eager (`cfg.compile` off) or the
    whole step (`compile_scope: step`), compiled with `backend` (None: eager). Returns (losses, weights)."""
    torch.manual_seed(1)  # dropout
    runner = runners.LearnerRunner('t', cfg, model(cfg), batches(cfg, n=n), torch.device('cpu'), precision)
    cb = runner.learn.pretraining_step
    if cb.scope == 'step':
        cb.scope, cb.backend = cb.scope if backend is not None else None, backend
        cb.one_graph = backend is not None
    log = LossLog()
    runner.learn.add_cb(log)
    runner.loader.n = n
    runner.learn.fit(1)
    assert cb.compiled is (compiled if compiled is not None else True if backend else None)
    return torch.tensor(log.losses), {k: v.clone() for k, v in runner.learn.model.state_dict().items()}


def assert_same_run(a, b, atol):
    (losses_a, weights_a), (losses_b, weights_b) = a, b
    assert losses_a.shape == (4, 2)
    torch.testing.assert_close(losses_a, losses_b, rtol=0, atol=atol)
    for k in weights_a: torch.testing.assert_close(weights_a[k], weights_b[k], rtol=0, atol=atol, msg=k)


@pytest.mark.skipif(not one_graph_supported(), reason='torch < 2.11 cannot trace the backward into a graph')
def test_the_compiled_whole_step_equals_the_eager_one():
    """Compiled as one graph (aot_eager: the graph's own ops, no code generation), 4 steps with dropout give the
    eager step's run (the backward reuses the forward's dropout masks), and the graph is compiled once though the
    warm-up changes the rate at every step."""
    cfg = tiny_cfg(clip_grad=0.05, lr=1e-3, compile=True, compile_scope='step')
    backend = CountingBackend()
    assert_same_run(run_steps(cfg), run_steps(cfg, backend=backend), atol=1e-6)
    assert backend.graphs == 1


@pytest.mark.skipif(not one_graph_supported(), reason='torch < 2.11 cannot trace the backward into a graph')
def test_the_whole_step_traces_as_one_graph_without_a_break():
    "dynamo finds one graph and no break in the whole step: forward, loss, backward, clipping, update."
    cfg = tiny_cfg(dropout=0.0, compile=True, compile_scope='step')
    runner = runners.LearnerRunner('t', cfg, tiny_model(cfg), batches(cfg), torch.device('cpu'), 'fp32')
    learn, cb = runner.learn, runner.learn.pretraining_step
    learn.create_opt()
    cb.learn, cb.compiled = learn, True
    cb.prepare()
    ids, tt = batches(cfg)[0]
    m = cb.constants.masking(ids, torch.Generator().manual_seed(0))
    noise = torch.rand(learn.model.noise_shape(m.positions))
    part = MicroBatch(m.input_ids, tt, m.positions, m.labels, noise, torch.tensor([3.0, 40.0]), None)
    with torch._dynamo.config.patch(trace_autograd_ops=True):
        explained = torch._dynamo.explain(learn_from)(learn.model, learn.loss_func, cb.constants, part, cb.update, None)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


@pytest.mark.parametrize('change, key', [(dict(precision='fp16'), 'compile_scope'),
                                         (dict(grad_accum_steps=2), 'compile_scope'),
                                         (dict(two_stage=0.5, generator_size=1.0, tie_weights='none'), 'compile_scope')])
def test_what_the_one_graph_step_cannot_run_is_refused_up_front(change, key):
    with pytest.raises(ConfigError, match=f'^{key}: '):
        tiny_cfg(compile=True, compile_scope='step', **change).validate()
    tiny_cfg(compile=False, compile_scope='step', **change).validate()  # the scope applies to a compiled step only
    tiny_cfg(compile=True, compile_scope='auto', **change).validate()   # auto: the model scope where 'step' cannot run


def test_auto_scope_is_the_whole_step_where_it_can_run_else_the_model():
    "compile_scope auto compiles the whole step in one process in fp32/bf16, the model alone else."
    from electra.pretraining.learner import _compile_scope
    cfg = tiny_cfg(compile=True)
    assert _compile_scope(cfg, 'bf16') == ('step' if one_graph_supported() else 'model')
    assert _compile_scope(cfg, 'fp16') == 'model'
    assert _compile_scope(tiny_cfg(compile=True, grad_accum_steps=2), 'fp32') == 'model'
    assert _compile_scope(tiny_cfg(compile=True, compile_scope='model'), 'fp32') == 'model'
    assert _compile_scope(tiny_cfg(compile=False), 'fp32') is None


def test_the_run_s_first_line_says_what_is_compiled_and_that_dropout_is_inductor_s_draw():
    """R22a-2: a compiled run said nothing of it in its output, and with dropout on it is another draw of the run
    (inductor's own dropout stream, on the CPU as on a GPU), which docs/fidelity.md said only of a GPU."""
    from electra.pretraining.learner import compile_description
    assert compile_description(tiny_cfg(compile=False), 'fp32') == ''
    step = 'the whole step' if one_graph_supported() else 'the model'
    assert compile_description(tiny_cfg(compile=True, dropout=0.1), 'fp32') == (
        f"; torch.compile of {step} (inductor, mode default): dropout is inductor's draw, another draw of the run")
    assert compile_description(tiny_cfg(compile=True, compile_scope='model', compile_mode='max-autotune', dropout=0.0),
                               'fp32') == '; torch.compile of the model (inductor, mode max-autotune)'


def test_a_failed_compilation_warns_once_and_runs_the_step_eagerly():
    "A compiler that fails: one line saying so, and the run is the eager whole step's, untouched by the attempt."
    def broken(gm, inputs): raise RuntimeError('simulated compiler failure')
    cfg = tiny_cfg(clip_grad=0.05, lr=1e-3, compile=True, compile_scope='step')
    with pytest.warns(RunWarning, match=r'^compile_scope step: torch.compile of the whole step failed \(.*simulated'):
        failed = run_steps(cfg, backend=broken, compiled=False)
    assert_same_run(run_steps(cfg), failed, atol=0)


@pytest.mark.skipif(not one_graph_supported(), reason='torch < 2.11 cannot trace the backward into a graph')
def test_electrics_whole_step_compiles_as_one_graph_and_equals_the_eager_one():
    """Electric's step (two-tower cloze generator, the cloze loss's divisor from the special ids, the corrected
    discriminator logit) as one graph, 4 steps with dropout: the eager run, compiled once."""
    cfg = tiny_cfg(clip_grad=0.05, lr=1e-3, compile=True, compile_scope='step', objective='electric')
    special = MaskingSettings.from_config(cfg, BenchTokenizer(V)).special_ids

    def electric_model(cfg):
        torch.manual_seed(0)
        return build_pretraining_model(cfg, token_ids(V, mask=BERT_IDS['mask'], special=special))
    backend = CountingBackend()
    assert_same_run(run_steps(cfg, model=electric_model), run_steps(cfg, backend=backend, model=electric_model), atol=1e-6)
    assert backend.graphs == 1
