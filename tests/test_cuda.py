"""The CUDA paths, on a machine with an NVIDIA GPU (skipped elsewhere): the real Learner's step on the GPU computes the
baseline's loss in fp32 and within bf16 rounding in bf16, never waits for the host, compiles to the same training,
prefetches the same batches, and the pretraining and fine-tuning drivers run, resume and export there."""
import csv
import copy
import dataclasses

import pytest
import torch

from electra.objective.masking import mask_tokens
from tests.support import runners
from tests.support import baseline
from electra.training.speed import DevicePrefetcher
from tests.support.tiny import token_ids

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

CUDA = torch.device('cuda')
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, embedding_size=32,
            generator_size=0.5, batch_size=8, max_length=32, checkpoint_at=[], steps=1000, warmup_steps=10, lr=1e-3)
V = 200


def cfg_of(**kw):
    from electra.config.pretrain import PretrainConfig
    return PretrainConfig(**{**TINY, **kw})


def model_of(cfg, vocab=V):
    from electra.objective.model import build_pretraining_model
    torch.manual_seed(0)
    return build_pretraining_model(cfg, token_ids(vocab))


def data_of(cfg, n=2):
    return baseline.synthetic_batches(n, cfg.batch_size, cfg.max_length, V, seed=3)


def learner_losses(cfg, precision, steps=1, padded=False):
    """(gen, disc) losses of the real Learner's steps on CUDA, and the fp32 baseline's first-step pair computed from
    the same weights, batch, masks and samples (MaskingCallback's CUDA generator, seeded cfg.seed). `padded`: the
    model has `cfg.pad_vocab_multiple` rows holding the unpadded model's weights."""
    ref = model_of(dataclasses.replace(cfg, pad_vocab_multiple=0))
    model = baseline.padded_like(ref, cfg, V) if padded else copy.deepcopy(ref)
    ref = ref.to(CUDA)
    data = data_of(cfg)
    runner = runners.LearnerRunner(precision, cfg, model, data, CUDA, precision)
    losses = []
    runner.learn.add_cb(loss_log(losses))
    runner.loader.n = steps
    runner.learn.fit(1)
    rng = torch.Generator(device=CUDA).manual_seed(cfg.seed)
    ids, tt = (t.to(CUDA) for t in data[0])
    m = mask_tokens(ids, torch.tensor([101, 102, 103, 0], device=CUDA), 0, 103, V, cfg.mask_prob, cfg.mask_mode,
                    cfg.mask_token_prob, cfg.random_token_prob, rng)
    with torch.no_grad():
        _, gen, disc = baseline.baseline_pretrain_loss(ref.generator.train(), ref.discriminator.train(), cfg, m, tt, rng)
    return losses, (float(gen), float(disc)), runner


def loss_log(out):
    from fastai.callback.core import Callback

    class LossLog(Callback):
        "Keeps every step's (gen, disc) losses."
        order = 90

        def before_fit(self):  # the largest id the step's forward sampled (read at the end of a step, not inside it)
            self.sampled = torch.full((), -1, device=CUDA)
            self.model.register_forward_hook(lambda m, args, pred: self.sampled.copy_(
                torch.maximum(self.sampled, pred['sampled'].max())) if 'sampled' in pred else None)

        def after_batch(self):
            if not self.training: return
            out.append(tuple(float(x) for x in self.learn.pretraining_step.sums[1:3]))  # the step's gen_loss, disc_loss
            self.learn.max_sampled = int(self.sampled)
    return LossLog()


@pytest.mark.parametrize('mode', ['fixed', 'bernoulli'])
def test_cuda_fp32_learner_step_equals_baseline(mode):
    losses, (gen, disc), _ = learner_losses(cfg_of(dropout=0.0, mask_mode=mode), 'fp32')
    assert losses[0][0] == pytest.approx(gen, rel=1e-4) and losses[0][1] == pytest.approx(disc, rel=1e-4)


def test_cuda_bf16_learner_step_close_to_fp32_baseline():
    "bf16 autocast in the step changes rounding only."
    losses, (gen, disc), runner = learner_losses(cfg_of(dropout=0.0), 'bf16')
    assert losses[0][0] == pytest.approx(gen, rel=1e-2) and losses[0][1] == pytest.approx(disc, rel=2e-2)
    assert runner.learn.pretraining_step.sums.dtype == torch.float64  # summed from the fp32 losses


def sync_errors(start: int):
    "A callback making any CUDA synchronisation an error from step `start` of a fit on (the steps before set up)."
    from fastai.callback.core import Callback

    class SyncErrors(Callback):
        "CUDA's sync detector set to 'error' from step `start` on."
        order = -100  # before every other callback's before_batch

        def before_fit(self): self.n = 0

        def before_batch(self):
            self.n += 1
            if self.n == start: torch.cuda.set_sync_debug_mode('error')

        def after_fit(self): torch.cuda.set_sync_debug_mode(0)
    return SyncErrors()


@pytest.mark.parametrize('mode, scope', [(None, 'model'), ('default', 'model'), ('reduce-overhead', 'model'),
                                         ('reduce-overhead', 'step')])
def test_cuda_real_step_never_waits_for_the_host(mode, scope):
    """Eager, compiled, CUDA-graphed, and the whole step as one CUDA graph: between log steps nothing in the step
    synchronises (CUDA's detector raises)."""
    cfg = cfg_of(log_every=1000, compile=mode is not None, compile_mode=mode or 'default', compile_scope=scope)
    from torch._dynamo.utils import counters
    counters.clear()
    runner = runners.LearnerRunner('t', cfg, model_of(cfg), data_of(cfg), CUDA, 'bf16')
    # CUDA graphs are recorded at the second and third calls (cudagraph trees warm up first): check the replays
    runner.learn.add_cb(sync_errors(5 if mode == 'reduce-overhead' else 2))
    try:
        runner.run(7)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert runner.compiled is (None if mode is None else True)
    if scope == 'step': assert not counters['inductor']['cudagraph_skips'], dict(counters['inductor'])  # one CUDA graph


def test_cuda_fp16_step_never_waits_for_the_host():
    """fp16's loss scaling inside the step: unscaling, the scale's update and an overflow's masked update stay on the
    device, so between log steps nothing synchronises (CUDA's detector raises)."""
    cfg = cfg_of(log_every=1000)
    runner = runners.LearnerRunner('t', cfg, model_of(cfg), data_of(cfg), CUDA, 'fp16')
    runner.learn.add_cb(sync_errors(2))
    try:
        runner.run(5)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert runner.learn.pretraining_step.scaler is not None


def test_cuda_compiled_training_equals_eager():
    "inductor on the GPU: the same losses step after step as eager (no dropout), and compiled really ran."
    eager, _, _ = learner_losses(cfg_of(dropout=0.0), 'fp32', steps=4)
    compiled, _, runner = learner_losses(cfg_of(dropout=0.0, compile=True, compile_scope='model'), 'fp32', steps=4)
    assert runner.compiled is True
    for (g1, d1), (g2, d2) in zip(eager, compiled):
        assert g2 == pytest.approx(g1, rel=1e-3) and d2 == pytest.approx(d1, rel=1e-3)


@pytest.mark.parametrize('mode', ['default', 'reduce-overhead'])
def test_cuda_one_graph_step_equals_the_eager_step(mode):
    """The whole step compiled as one graph (inductor; with reduce-overhead one CUDA graph per step): the eager
    step's losses step after step (no dropout), and compiled really ran."""
    eager, _, _ = learner_losses(cfg_of(dropout=0.0, clip_grad=0.05), 'fp32', steps=6)
    cfg = cfg_of(dropout=0.0, clip_grad=0.05, compile=True, compile_scope='step', compile_mode=mode, log_every=1000)
    one = []
    runner = runners.LearnerRunner('t', cfg, model_of(cfg), data_of(cfg), CUDA, 'fp32')
    runner.learn.add_cb(loss_log(one))
    runner.loader.n = 6
    runner.learn.fit(1)
    assert runner.compiled is True and len(one) == 6
    for (g1, d1), (g2, d2) in zip(eager, one):
        assert g2 == pytest.approx(g1, rel=1e-3) and d2 == pytest.approx(d1, rel=1e-3)


def test_cuda_padded_vocab_step_equals_unpadded():
    """Padding rows change no generator loss; the sampling noise has one draw per row, so the samples (and the
    discriminator's loss) follow another random stream of the same distribution."""
    cfg = cfg_of(dropout=0.0)
    base, _, _ = learner_losses(cfg, 'fp32', steps=3)
    padded, _, runner = learner_losses(dataclasses.replace(cfg, pad_vocab_multiple=64), 'fp32', steps=3, padded=True)
    assert padded[0][0] == pytest.approx(base[0][0], rel=1e-5)
    for (_, d1), (_, d2) in zip(base, padded): assert d2 == pytest.approx(d1, rel=2e-2)
    assert 0 <= runner.learn.max_sampled < V  # padded ids are never sampled


def test_cuda_prefetcher_yields_the_same_batches_on_the_device():
    data = [(torch.arange(6) * i, torch.ones(2, 3) * i) for i in range(4)]
    out = list(DevicePrefetcher(data, CUDA))
    assert len(out) == 4 and all(t.device.type == 'cuda' for b in out for t in b)
    for (a, b), (x, y) in zip(data, out):
        assert torch.equal(a, x.cpu()) and torch.equal(b, y.cpu())


def test_cuda_pretrain_driver_resume_and_export(tmp_path):
    "pretrain.py on the GPU: half a run, then --resume, ends where the straight run ends; exports load on the CPU."
    from tests.support.pretrain import TINY as DRIVER_TINY, pretrain
    from transformers import ElectraForPreTraining
    argv = [a if a != 'cpu' else 'cuda' for a in DRIVER_TINY] + ['--run_name', 'gpu', '--checkpoint_at', '0.5,1.0']
    straight = pretrain(tmp_path / 'a', *argv)
    pretrain(tmp_path / 'b', *argv)
    (tmp_path / 'b' / 'ckpt' / 'gpu_11081_100%.pth').unlink()
    resumed = pretrain(tmp_path / 'b', *argv, '--resume')
    assert resumed['start_step'] == 12 and str(resumed['device']) == 'cuda'
    final = resumed['model'].state_dict()
    for k, v in straight['model'].state_dict().items():  # CUDA scatter-add backward is not bitwise deterministic
        assert torch.allclose(final[k], v, rtol=0, atol=1e-5), k
    run = tmp_path / 'a' / 'ckpt' / 'gpu_11081'
    rows = list(csv.DictReader((run / 'metrics.csv').open()))
    assert [int(r['step']) for r in rows] == [6, 12, 18, 24]
    disc = ElectraForPreTraining.from_pretrained(run / 'discriminator').eval()
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    with torch.no_grad():
        ours = straight['model'].discriminator.eval()(ids.to(CUDA)).logits.cpu()
        assert torch.allclose(disc(ids).logits, ours, atol=1e-4)


def test_cuda_counter_draws_are_the_cpus_bits_eager_and_compiled():
    """`random_draws: counter` on the GPU: the counter's U(0, 1) and integer draws, eager and as inductor's Triton code
    compiles them (the step a 0-d tensor), and the masking of a batch with them, are the CPU's bit for bit."""
    from electra.objective.draws import STREAMS, CounterDraws
    shape, noise = (64, 19, 30522), STREAMS['sampling_noise']
    step = torch.zeros((), dtype=torch.int64, device=CUDA)
    fn = torch.compile(lambda s: CounterDraws(11081, s, 1).uniform(shape, CUDA, noise), fullgraph=True, dynamic=False)
    for t in (0, 7, 2**32 + 3):
        cpu = CounterDraws(11081, t, 1).uniform(shape, 'cpu', noise)
        assert torch.equal(CounterDraws(11081, t, 1).uniform(shape, CUDA, noise).cpu(), cpu)
        assert torch.equal(fn(step.fill_(t)).cpu(), cpu)
    k = CounterDraws(3, 5).integers(30522, (4096,), CUDA, STREAMS['mask_tokens'])
    assert torch.equal(k.cpu(), CounterDraws(3, 5).integers(30522, (4096,), 'cpu', STREAMS['mask_tokens']))
    ids = baseline.synthetic_batches(1, 128, 128, 30522, seed=2)[0][0]
    special = torch.tensor([101, 102, 103, 0])
    on = mask_tokens(ids.to(CUDA), special.to(CUDA), 0, 103, 30522, draws=CounterDraws(11081, 9))
    assert all(torch.equal(a.cpu(), b) for a, b in zip(on, mask_tokens(ids, special, 0, 103, 30522, draws=CounterDraws(11081, 9))))
