"""electra/pretraining/step.py: every preset family and option trains through `pretraining_step`, and one step of the
real Learner equals the plain reference step (electra/objective/reference.py's losses, their gradients, torch's
clipping and a plain loop of the official Adam) on the same batch, masks and noise."""
import dataclasses
from pathlib import Path

import pytest
import torch

import electra.pretraining.step as step_module
from tests.support import runners
from tests.support import baseline
from electra.config.cli import load_config
from electra.config.pretrain import PretrainConfig
from electra.objective.reference import reference_losses
from tests.support.tiny import TINY, batches, tiny_cfg, tiny_model

pytestmark = pytest.mark.usefixtures('one_thread')
PRESETS = Path(__file__).parents[2] / 'configs' / 'pretrain'
TINY_SIZE = {k: v for k, v in TINY.items() if k != 'generator_size'}


def preset(name: str, **kw) -> PretrainConfig:
    "The preset at the tests' tiny size (its own generator share), eager, no dropout and no warm-up."
    cfg = load_config(PretrainConfig, ['--config', name], preset_dir=PRESETS)
    return dataclasses.replace(cfg, **{**TINY_SIZE, 'compile': False, 'dropout': 0.0, 'warmup_steps': 0,
                                       'pad_vocab_multiple': 0, 'clip_grad': 0.05, **kw})


def reference_step(cfg, model, ids, tt, lr: float, micro_batches: int = 1, stage: int = 0):
    """The plain step on `model` (changed in place): the step's masks and noise from one generator seeded cfg.seed,
    `reference_losses` on the whole batch, `.backward()`, torch's clipping, a Python loop of the official Adam."""
    rng = torch.Generator().manual_seed(cfg.seed)
    m = step_module.MaskingSettings.for_tokenizer(baseline.BenchTokenizer(120), cfg.mask_unk)(ids, rng)
    noise = torch.cat([torch.rand(model.noise_shape(p), generator=rng) for p in m.positions.chunk(micro_batches)])
    total, gen, disc = reference_losses(model.generator, model.discriminator, m.input_ids, tt, m.positions, m.labels,
                                        noise, 0, cfg.gen_loss_weight, cfg.disc_loss_weight)
    (cfg.gen_loss_weight * gen if stage == 1 else total).backward()
    named = baseline.unique_named_parameters(model)
    torch.nn.utils.clip_grad_norm_([p for _, p in named], cfg.clip_grad)
    baseline.LoopAdam(named, lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps).step()
    return gen, disc


@pytest.mark.parametrize('name, change', [
    ('demo', {}), ('small', {}), ('base', {}),
    ('small', {'grad_accum_steps': 2}),
    ('two_stage', {'two_stage': 0.5, 'steps': 4}),
    ('small', {'precision': 'fp16'})])
def test_every_preset_trains_through_the_step_and_its_step_is_the_reference_step(monkeypatch, name, change):
    precision = change.pop('precision', 'fp32')
    cfg = preset(name, **change)
    real, calls = step_module.pretraining_step, []

    def spy(*args):
        calls.append(1)
        return real(*args)
    monkeypatch.setattr(step_module, 'pretraining_step', spy)
    model, data = tiny_model(cfg), batches(cfg, n=1)
    ref = tiny_model(cfg)
    runner = runners.LearnerRunner('t', cfg, model, data, torch.device('cpu'), precision)
    if precision == 'fp16':  # a scale that overflows nothing: torch's default 2^16 skips the first steps here
        runner.learn.pretraining_step.scaler = torch.amp.GradScaler('cpu', init_scale=16.0)
    runner.loader.n = 1
    runner.learn.fit(1)
    assert calls == [1]  # the one step ran through `pretraining_step`
    lr = runner.learn.opt.hypers[0]['lr']
    gen, disc = reference_step(cfg, ref.train(), *data[0], lr, cfg.grad_accum_steps, stage=1 if cfg.two_stage else 0)
    sums = runner.learn.pretraining_step.sums
    tol = dict(rtol=1e-2, atol=1e-3) if precision == 'fp16' else dict(rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(sums[1].float(), gen.detach(), **tol)
    if not cfg.two_stage: torch.testing.assert_close(sums[2].float(), disc.detach(), **tol)
    weights = dict(ref.named_parameters())
    for k, p in model.named_parameters():
        torch.testing.assert_close(p, weights[k], **(tol if precision == 'fp16' else dict(rtol=0, atol=2e-6)), msg=k)



def test_an_fp16_overflow_changes_nothing_halves_the_scale_and_reads_nothing_to_the_host():
    """fp16 on the CPU, two steps, the second's loss scale 2^120 (its gradients overflow): that step leaves every weight
    and Adam moment bit for bit as the first left them, halves the scale and counts as skipped, and neither step reads
    a value to the host (the overflow is handled on the device: no `.item()` a GPU would wait for)."""
    from fastai.callback.core import Callback
    from electra.training.speed import HostSyncCounter
    cfg = preset('small')
    runner = runners.LearnerRunner('t', cfg, tiny_model(cfg), batches(cfg, n=2), torch.device('cpu'), 'fp16')
    step, reads = runner.learn.pretraining_step, []
    step.scaler = torch.amp.GradScaler('cpu', init_scale=16.0)

    def counted(*args, **kwargs):
        with HostSyncCounter() as c:
            out = step_module.learn_from(*args, **kwargs)
        reads.append(dict(c.counts))
        return out
    step.step_function = counted

    class Overflow(Callback):
        "Before the second step: the state the first left, and a loss scale its gradients overflow at."
        order = 64
        def before_batch(self):
            if self.train_iter != 1: return
            self.weights = {k: v.clone() for k, v in self.model.state_dict().items()}
            self.moments = [t.clone() for st in self.opt.opt.state.values() for t in st.values()]
            step.scaler._scale.fill_(2.0 ** 120)
    over = Overflow()
    runner.learn.add_cb(over)
    runner.loader.n = 2
    runner.learn.fit(1)
    assert reads == [{}, {}]
    assert step.sums[-1].item() == 1 and step.scaler.get_scale() == 2.0 ** 119
    assert over.moments and all(torch.equal(a, b) for a, b in
                                zip(over.moments, [t for st in runner.learn.opt.opt.state.values() for t in st.values()]))
    for k, v in runner.learn.model.state_dict().items(): assert torch.equal(v, over.weights[k]), k


def test_two_stage_resumed_at_or_after_the_switch_ends_as_the_straight_run(tmp_path):
    """Two-stage training (4 steps of the generator alone, then 4 of the discriminator from its weights) resumed from
    its checkpoint at the switch (the discriminator's start still to come) and from one past it (the generator frozen
    already): the step's stage comes back from the step count, and each run ends as the straight one, bit for bit,
    its held-out rows too. Those rows are masked alike in both stages: the most-frequent-token baseline, which reads
    no weights, is one number along the run (the masks moved at the switch, when the sampling began)."""
    import csv
    import datasets
    from electra.pretraining.learner import pretraining_learner
    cfg = tiny_cfg(dropout=0.0, generator_size=1.0, tie_weights='none', two_stage=0.5, steps=8, warmup_steps=1,
                   log_every=2, batch_size=2, checkpoint_at=[0.5, 0.75, 1.0], output_dir=str(tmp_path), run_name='st')
    data = batches(cfg, n=8)
    # 96 examples of 6 words of unequal frequency: the share of the most frequent moves with the masked positions
    words = 104 + torch.multinomial(torch.tensor([6., 5, 4, 3, 2, 1]), 96 * 14, replacement=True,
                                    generator=torch.Generator().manual_seed(1)).view(96, 14)
    held_out = datasets.Dataset.from_dict({'input_ids': [[101, *w, 102] for w in words.tolist()],
                                           'token_type_ids': [[0] * 16] * 96})

    def fit(name: str, start: int = 0, resume: dict | None = None):
        """The run from step `start` (the checkpoint `resume`): its weights and the rows of metrics.csv and
        eval_metrics.csv (steps_per_s aside)."""
        model, run_dir = tiny_model(cfg), tmp_path / name
        learn = pretraining_learner(cfg, model, baseline.BenchTokenizer(model.vocab_size),
                                    baseline.Batches(data[start:], n=8 - start), run_dir, torch.device('cpu'), 'fp32',
                                    resume, held_out=held_out)
        learn.metrics_logger.sinks = []
        next(cb for cb in learn.cbs if type(cb).__name__ == 'HeldOutEvaluation').sinks = []
        learn.fit(1)
        rows = [{k: v for k, v in r.items() if k != 'steps_per_s'} for r in csv.DictReader((run_dir / 'metrics.csv').open())]
        return model.state_dict(), rows, list(csv.DictReader((run_dir / 'eval_metrics.csv').open()))
    weights, rows, eval_rows = fit('straight')
    assert [int(r['step']) for r in eval_rows] == [2, 4, 6, 8]
    assert len({r['gen_accuracy_baseline'] for r in eval_rows}) == 1  # the masks alike in both stages
    assert len({r['gen_accuracy'] for r in eval_rows[1:]}) == 1  # the generator of step 4, frozen after it
    saved = {cut: torch.load(tmp_path / f'st_{cfg.seed}_{cut}%.pth', weights_only=False) for cut in ('50', '75')}
    for cut, start in (('50', 4), ('75', 6)):
        assert saved[cut]['step'] == start
        resumed, resumed_rows, resumed_eval = fit(cut, start, saved[cut])
        for k, v in weights.items(): assert torch.equal(resumed[k], v), (cut, k)
        assert resumed_rows == rows[start // 2:] and len(rows) == 4
        assert resumed_eval == eval_rows[start // 2:]


@pytest.mark.parametrize('draws', ['generator', 'counter'])
def test_padding_the_vocabulary_leaves_a_step_s_masks_and_samples_unchanged(draws):
    """The same weights padded to 128 rows (vocabulary 120) mask and sample exactly as unpadded, batch after batch:
    the sampling noise covers the tokenizer's vocabulary, not the padded rows (a generator's draws over the padded rows
    moved the next batch's masks; counter draws hashed by the flat index over the padded width sampled otherwise)."""
    cfg = tiny_cfg(dropout=0.0)
    plain = tiny_model(cfg).eval()
    padded = baseline.padded_like(plain, dataclasses.replace(cfg, pad_vocab_multiple=64), 120).eval()
    masking = step_module.MaskingSettings.for_tokenizer(baseline.BenchTokenizer(120))
    seen = []
    for model in (plain, padded):
        rng, out = torch.Generator().manual_seed(cfg.seed), []
        for step, (ids, tt) in enumerate(batches(cfg, n=3)):
            source = rng if draws == 'generator' else step_module.CounterDraws(cfg.seed, step)
            m = masking(ids, source)
            noise = step_module.sampling_noise(model, m.positions, source)
            with torch.no_grad(): pred = model(m.input_ids, tt, m.positions, m.labels, noise)
            out.append((m.input_ids, m.positions, m.labels, pred.sampled))
        seen.append(out)
    for a, b in zip(*seen):
        for x, y in zip(a, b): assert torch.equal(x, y)
