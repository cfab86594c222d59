"""electra/pretraining/learner.py: the real Learner's step: the baseline's loss, no host sync."""
import copy
from pathlib import Path

import pytest
import torch

from electra.objective.masking import mask_tokens
from tests.support import runners
from tests.support import baseline
from electra.training.speed import HostSyncCounter
from tests.support.tiny import V, batches, tiny_cfg, tiny_model

pytestmark = pytest.mark.usefixtures('one_thread')


def first_step_losses(cfg, precision: str):
    """The real Learner's (pretraining_learner) first (generator, discriminator) losses, and the fp32 baseline's on the
    same batch, masks and samples."""
    model = tiny_model(cfg)
    ref = copy.deepcopy(model)
    data = batches(cfg, n=1)
    runner = runners.LearnerRunner(precision, cfg, model, data, torch.device('cpu'), precision)
    runner.loader.n = 1
    runner.learn.fit(1)
    # the step: one generator seeded cfg.seed masks the batch, then samples
    rng = torch.Generator().manual_seed(cfg.seed)
    ids, tt = data[0]
    m = mask_tokens(ids, torch.tensor([101, 102, 103, 0]), 0, 103, V, cfg.mask_prob, cfg.mask_mode,
                    cfg.mask_token_prob, cfg.random_token_prob, rng)
    with torch.no_grad():
        _, gen, disc = baseline.baseline_pretrain_loss(ref.generator.train(), ref.discriminator.train(), cfg, m, tt, rng)
    return runner.learn.pretraining_step.sums[1:3].float(), (gen, disc)  # the step's sums: loss, gen_loss, disc_loss, ...


def test_real_learner_step_loss_equals_baseline():
    "The first step of the real Learner computes the baseline's loss on the same batch and masks."
    (fast_gen, fast_disc), (gen, disc) = first_step_losses(tiny_cfg(dropout=0.0), 'fp32')
    assert float(fast_gen) == pytest.approx(float(gen), rel=1e-5)
    assert float(fast_disc) == pytest.approx(float(disc), rel=1e-5)


def test_cpu_bf16_learner_step_loss_close_to_fp32_baseline():
    """bf16 autocast changes rounding only: the real step's first loss stays within 1% of the fp32 baseline's. The
    job offers bf16 on CPUs that multiply it natively; the numerics are the same where torch emulates it, so this
    runs on every CPU."""
    (fast_gen, fast_disc), (gen, disc) = first_step_losses(tiny_cfg(dropout=0.0), 'bf16')
    assert fast_gen.dtype == torch.float32 and float(fast_gen) == pytest.approx(float(gen), rel=1e-2)
    assert float(fast_disc) == pytest.approx(float(disc), rel=1e-2)


@pytest.mark.parametrize('mode', ['fixed', 'bernoulli'])
def test_real_step_makes_no_host_sync(mode):
    "Masking, model, loss, clipping, optimizer, schedule and metrics: nothing reads the device between log steps."
    cfg = tiny_cfg(mask_mode=mode, log_every=100)
    runner = runners.LearnerRunner('t', cfg, tiny_model(cfg), batches(cfg), torch.device('cpu'), 'fp32')
    runner.run(1)
    counter = runners.count_host_syncs(runner.learn, 3)
    assert counter.total == 0, dict(counter.counts)
    # ... while the detector does see what the plain HF baseline does (mask test, boolean-mask loss, .item())
    model = tiny_model(cfg)
    (ids, tt), _ = batches(cfg)
    m = mask_tokens(ids, torch.tensor([0, 101, 102, 103]), 0, 103, V)
    with HostSyncCounter() as c:
        loss, _, _ = baseline.baseline_pretrain_loss(model.generator, model.discriminator, cfg, m, tt, None)
        loss.item()
    assert c.counts['aten::_local_scalar_dense'] >= 3 and c.counts['aten::index (boolean mask)'] >= 1


def test_the_continue_command_drops_every_form_of_the_resume_flag():
    from electra.pretraining.learner import without_resume
    base = ['pretrain.py', '--config', 'small,bert', '--output_dir', 'out']
    for tail in (['--resume'], ['--resume', 'true'], ['--resume', 'False'], ['--resume=true']):
        assert without_resume(base + tail) == base
    assert without_resume(['pretrain.py', '--resume', '--steps', '10']) == ['pretrain.py', '--steps', '10']


def test_a_preset_named_like_a_folder_is_the_preset(tmp_path, monkeypatch):
    "From the repository root `electra` is the package folder and the preset: --config small,electra is the preset."
    from electra.config.cli import load_config
    from electra.config.pretrain import PretrainConfig
    (tmp_path / 'electra').mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = load_config(PretrainConfig, ['--config', 'small,electra'], preset_dir=Path(__file__).parents[2] / 'configs/pretrain')
    assert (cfg.objective, cfg.hidden_size) == ('electra', 256)
