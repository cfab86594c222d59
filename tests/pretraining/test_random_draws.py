"""`random_draws: counter` through the real pretraining Learner (electra/pretraining/step.py `PretrainingStep`): the masking
and the sampling noise computed inside the compiled step equal the eager step's, no noise is copied into the step's
graph, a run resumed from its checkpoint is the uninterrupted run bit for bit, and each micro-batch and each torchrun
rank draws its own numbers."""
import csv
import dataclasses
from pathlib import Path

import pytest
import torch
from fastai.callback.core import Callback

from tests.support.baseline import BenchTokenizer, Batches
from electra.config.errors import RunWarning
from electra.objective.draws import STREAMS, CounterDraws
from electra.objective.masking import MaskingSettings, max_predictions
from electra.pretraining.learner import pretraining_learner
from electra.training.distributed import rank_seed
from electra.training.step import one_graph_supported
from tests.support.tiny import V, batches, tiny_cfg, tiny_model

pytestmark = pytest.mark.usefixtures('one_thread')


class Record(Callback):
    "Keeps every step's (generator, discriminator) losses."
    order = 71

    def before_fit(self): self.losses = []

    def after_batch(self): self.losses.append(self.learn.pretraining_step.sums[1:3].tolist())


def learner(cfg, loader, run_dir: Path, resume=None, model=None):
    learn = pretraining_learner(cfg, model or tiny_model(cfg), BenchTokenizer(V), loader, run_dir, torch.device('cpu'),
                                'fp32', resume)
    learn.metrics_logger.sinks = []
    learn.add_cb(Record())
    return learn


def fit(cfg, run_dir, n=4, backend=None, resume=None, start=0):
    "`n` steps of the real Learner on batches `start`..; `backend`: the one-graph step compiled with it (None: eager)."
    torch.manual_seed(1)  # dropout
    learn = learner(cfg, Batches(batches(cfg, n=start + n)[start:], n), run_dir, resume)
    step = learn.pretraining_step
    if backend is not None: step.backend = backend
    else: step.scope, step.one_graph = None, False
    learn.fit(1)
    return learn, torch.tensor(learn.record.losses), {k: v.clone() for k, v in learn.model.state_dict().items()}


class Graphs:
    "A torch.compile backend that keeps the shapes of each graph's inputs and runs the graph as aot_eager does."

    def __init__(self): self.inputs = []

    def __call__(self, gm, inputs):
        from torch._dynamo.backends.debugging import aot_eager
        self.inputs.append([tuple(t.shape) for t in inputs if isinstance(t, torch.Tensor)])
        return aot_eager(gm, inputs)


@pytest.mark.skipif(not one_graph_supported(), reason='torch < 2.11 cannot trace the backward into a graph')
def test_the_compiled_step_with_counter_draws_is_the_eager_one_and_takes_no_noise_in(tmp_path):
    """compile_scope step, 4 steps with dropout: the eager step's losses and weights with the same counter draws (to the
    rounding of the update's foreach calls), from two graphs compiled once (the masking, then forward, backward and update with the Gumbel noise
    computed inside: the step number their only new input), neither given a tensor of the noise's shape."""
    cfg = tiny_cfg(clip_grad=0.05, lr=1e-3, compile=True, compile_scope='step', random_draws='counter')
    _, eager_losses, eager = fit(cfg, tmp_path / 'eager')
    graphs = Graphs()
    learn, losses, weights = fit(cfg, tmp_path / 'graph', backend=graphs)
    assert learn.pretraining_step.compiled is True and len(graphs.inputs) == 2
    torch.testing.assert_close(losses, eager_losses, rtol=0, atol=1e-6)
    for k in eager: torch.testing.assert_close(weights[k], eager[k], rtol=0, atol=1e-6, msg=k)
    b, L = cfg.batch_size, cfg.max_length
    noise_shape = (b, max_predictions(cfg.mask_prob, L), V)
    assert not any(shape == noise_shape for shapes in graphs.inputs for shape in shapes)
    assert (b, L) in graphs.inputs[0]  # the masking's graph takes the batch itself


def test_inductors_masking_with_counter_draws_is_the_eager_masking():
    "The masking's graph as inductor compiles it (its CPU code), at three steps: the eager masks, bit for bit."
    cfg = tiny_cfg(random_draws='counter', mask_token_prob=0.8, random_token_prob=0.1)
    masking = MaskingSettings.from_config(cfg, BenchTokenizer(V))
    ids, step = batches(cfg)[0][0], torch.zeros((), dtype=torch.int64)
    masking.special_tensor(ids.device)
    compiled = torch.compile(masking.__call__, fullgraph=True, dynamic=False)
    for t in (0, 1, 2**32 + 5):
        assert all(torch.equal(a, b) for a, b in zip(compiled(ids, CounterDraws(3, step.fill_(t))), masking(ids, CounterDraws(3, t))))


def test_a_run_with_counter_draws_resumed_from_its_checkpoint_is_the_uninterrupted_run(tmp_path):
    """6 steps straight, and the same run interrupted after its 50% checkpoint and resumed from it (a fresh Learner and
    model, the batches from step 3): the same losses and weights, bit for bit. The checkpoint holds no masking
    generator's state: the counter's draws follow from the seed and the step alone. The generator's run differs."""
    cfg = tiny_cfg(steps=6, checkpoint_at=[0.5, 1.0], random_draws='counter', output_dir=str(tmp_path / 'ckpt'))
    _, straight_losses, straight = fit(cfg, tmp_path / 'straight', n=6)
    ckpt = torch.load(tmp_path / 'ckpt' / f'{cfg.run_name}_{cfg.seed}_50%.pth', weights_only=True)  # as the driver reads it
    assert ckpt['step'] == 3 and ckpt['rng']['masking'] is None
    _, tail_losses, resumed = fit(cfg, tmp_path / 'resumed', n=3, resume=ckpt, start=3)
    assert torch.equal(tail_losses, straight_losses[3:])
    for k in straight: assert torch.equal(resumed[k], straight[k]), k
    _, generator_losses, _ = fit(dataclasses.replace(cfg, random_draws='generator', output_dir=str(tmp_path / 'g')),
                                 tmp_path / 'generator', n=6)
    assert not torch.equal(generator_losses, straight_losses)


class Noise(Callback):
    "Keeps the noise source each micro-batch of the first step hands to the step function."
    order = 70

    def before_fit(self):
        self.sources, step = [], self.learn.pretraining_step
        plain = step.step_function
        step.step_function = lambda model, loss_func, c, part, *rest, **kw: (self.sources.append(part.noise),
                                                                             plain(model, loss_func, c, part, *rest, **kw))[1]


def test_micro_batches_and_ranks_draw_their_own_numbers(tmp_path, monkeypatch):
    """grad_accum_steps 2: each micro-batch's sampling noise is drawn from a stream of its own (part 0, part 1), the
    same on a rerun; each torchrun rank (its `rank_seed`) masks the same batch at the same step otherwise, and the same
    rank always alike."""
    cfg = tiny_cfg(grad_accum_steps=2, random_draws='counter')
    learn = learner(cfg, Batches(batches(cfg), 1), tmp_path)
    learn.add_cb(Noise())
    learn.fit(1)
    sources = learn.noise.sources
    assert [s.part for s in sources] == [0, 1] and all(isinstance(s, CounterDraws) for s in sources)
    shape = (2, 2, V)
    u = [s.uniform(shape, 'cpu', STREAMS['sampling_noise']) for s in sources]
    assert (u[0] == u[1]).float().mean() < 0.01
    assert torch.equal(u[1], CounterDraws(cfg.seed, 0, 1).uniform(shape, 'cpu', STREAMS['sampling_noise']))
    by_rank = [masks_of_rank(cfg, r, tmp_path / f'{i}', monkeypatch) for i, r in enumerate((0, 1, 1))]
    assert not torch.equal(by_rank[0].positions, by_rank[1].positions)
    assert all(torch.equal(a, b) for a, b in zip(by_rank[1], by_rank[2]))


def masks_of_rank(cfg, rank, run_dir, monkeypatch):
    "The masks of the first batch at step 5 by the training step of rank `rank` of a torchrun job of 2 processes."
    monkeypatch.setenv('RANK', str(rank))
    monkeypatch.setenv('WORLD_SIZE', '2')
    learn = learner(cfg, Batches(batches(cfg), 1), run_dir)
    assert learn.pretraining_step.seed == rank_seed(cfg.seed, rank)
    learn.train_iter = 5
    return learn.pretraining_step.mask(batches(cfg)[0][0])


def test_a_failed_compilation_with_counter_draws_runs_the_eager_step_untouched(tmp_path):
    "A compiler that fails (on the masking's graph, the first it meets): one line, then the eager run, bit for bit."
    def broken(gm, inputs): raise RuntimeError('simulated compiler failure')
    cfg = tiny_cfg(clip_grad=0.05, lr=1e-3, compile=True, compile_scope='step', random_draws='counter')
    _, eager_losses, eager = fit(cfg, tmp_path / 'eager')
    with pytest.warns(RunWarning, match=r'^compile_scope step: torch.compile of the whole step failed \(.*simulated'):
        learn, losses, weights = fit(cfg, tmp_path / 'failed', backend=broken)
    assert learn.pretraining_step.compiled is False and torch.equal(losses, eager_losses)
    for k in eager: assert torch.equal(weights[k], eager[k]), k


def test_the_first_row_after_a_resume_averages_the_whole_window_as_the_uninterrupted_run(tmp_path):
    """log_every 4, a checkpoint after step 2: the resumed run's row at step 4 averages steps 1-4 (the window's partial
    sums and its count come back from the checkpoint), equal to the uninterrupted run's rows, not steps 3-4 alone."""
    cfg = tiny_cfg(steps=8, log_every=4, checkpoint_at=[0.25, 1.0], random_draws='counter',
                   output_dir=str(tmp_path / 'ckpt'))
    straight, straight_losses, _ = fit(cfg, tmp_path / 'straight', n=8)
    ckpt = torch.load(tmp_path / 'ckpt' / f'{cfg.run_name}_{cfg.seed}_25%.pth', weights_only=True)
    assert ckpt['step'] == 2
    resumed, _, _ = fit(cfg, tmp_path / 'resumed', n=6, resume=ckpt, start=2)
    rows = [list(csv.DictReader((learn.path / 'metrics.csv').open())) for learn in (straight, resumed)]
    assert [r['step'] for r in rows[1]] == ['4', '8']
    # the row at step 4 by hand: the mean of the uninterrupted run's (generator, discriminator) losses of steps 1-4
    assert float(rows[1][0]['gen_loss']) == pytest.approx(straight_losses[:4, 0].mean().item(), rel=1e-5)
    for key in ('loss', 'gen_loss', 'disc_loss', 'gen_accuracy', 'disc_accuracy', 'replaced_fraction'):
        assert [float(r[key]) for r in rows[1]] == [float(r[key]) for r in rows[0]], key
