"""The paper's objective variants (electra/objective/model.py, loss.py, flops.py): each loss against a hand computation
on a small batch, what each variant builds and trains, and its FLOPs against torch's own FLOP counter."""
import math
import re

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from electra.config.cli import load_config
from electra.config.errors import ConfigError
from electra.config.objectives import OBJECTIVES, TIE_WEIGHTS
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_from_dict
from electra.objective.flops import pretrain_flops, pretrain_flops_to_step, pretrain_step_flops
from electra.objective.loss import ElectraLoss, loss_counts
from electra.objective.masking import MaskingSettings, max_predictions
from electra.objective.model import ElectraGeneratorDiscriminatorOutput, build_pretraining_model
from tests.support.tiny import TINY, tiny_cfg, token_ids

pytestmark = pytest.mark.usefixtures('one_thread')
V, PAD, CLS, SEP, MASK = 97, 0, 1, 2, 3
MASKING = MaskingSettings((CLS, SEP, MASK, PAD), PAD, MASK, V, mask_prob=0.3)


def run(objective='electra', seed=0, **kw):
    "A tiny model of `objective`, a masked batch of 3 rows (one padded) and the model's outputs on it."
    torch.manual_seed(seed)
    model = build_pretraining_model(tiny_cfg(dropout=0.0, objective=objective, **kw), token_ids(V, PAD, MASK))
    model.rng = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (3, 12), generator=torch.Generator().manual_seed(seed))
    ids[:, 0], ids[:, -1], ids[2, 8:] = CLS, SEP, PAD
    ids[2, 7] = SEP
    m = MASKING(ids, torch.Generator().manual_seed(seed + 1))
    return model, ids, m, model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)


def bce(logit: float, y: float) -> float:
    p = 1 / (1 + math.exp(-logit))
    return -(y * math.log(p) + (1 - y) * math.log(1 - p))


def test_electra_15_averages_the_discriminator_loss_over_the_masked_positions_only():
    model, ids, m, pred = run('electra_15')
    masked = {(b, int(p)) for b in range(3) for p, lab in zip(m.positions[b], m.labels[b]) if lab >= 0}
    logits, replaced = pred['disc_logits'].tolist(), pred['is_replaced'].tolist()
    by_hand = sum(bce(logits[b][p], replaced[b][p]) for b, p in masked) / len(masked)
    everywhere = [bce(logits[b][t], replaced[b][t]) for b in range(3) for t in range(12) if ids[b, t] != PAD]
    loss_fn = ElectraLoss(gen_weight=0.0, disc_weight=1.0)
    assert loss_fn(pred, m.labels).item() == pytest.approx(by_hand, rel=1e-5)
    assert by_hand != pytest.approx(sum(everywhere) / len(everywhere), rel=1e-3)  # the mask matters on this batch
    assert loss_fn.last[0].item() > 0  # weighted out here, but computed: the generator still trains
    assert ElectraLoss()(pred, m.labels).item() > 50 * by_hand


def test_all_tokens_mlm_loss_is_the_copy_mixture_over_every_real_token():
    model, ids, m, pred = run('all_tokens_mlm')
    inputs, gate = pred['mlm_inputs'], torch.sigmoid(pred['copy_logits'].double())
    probs = pred['mlm_logits'].double().softmax(-1)
    assert torch.equal(pred['mlm_targets'], ids)  # the targets are the uncorrupted ids, at every position
    assert (inputs != ids).any()  # some inputs are generator samples
    terms = []
    for b in range(3):
        for t in range(12):
            if ids[b, t] == PAD: continue
            x = int(ids[b, t])
            p = float(gate[b, t]) * (int(inputs[b, t]) == x) + (1 - float(gate[b, t])) * float(probs[b, t, x])
            terms.append(-math.log(p))
    assert len(terms) == 3 * 12 - 4
    loss = ElectraLoss(gen_weight=0.0, disc_weight=1.0, objective='all_tokens_mlm')
    assert loss(pred, m.labels).item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)


def test_replace_mlm_input_holds_generator_samples_and_no_mask():
    seen = []
    model, _, _, _ = run('replace_mlm')
    # a generator that would sample [MASK] almost surely: the variant must still never write it
    with torch.no_grad(): model.generator.generator_lm_head.bias[MASK] = 100.0
    model.discriminator.electra.register_forward_hook(lambda mod, args, kwargs, out: seen.append(args[0]),
                                                      with_kwargs=True)
    ids = torch.randint(5, V, (3, 12), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = CLS, SEP
    m = MASKING(ids, torch.Generator().manual_seed(1))
    assert (m.input_ids == MASK).any()
    pred = model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)
    main_input = seen[0]
    assert not (main_input == MASK).any()
    chosen = m.labels >= 0
    assert torch.equal(main_input.gather(1, m.positions)[chosen], pred['sampled'][chosen])
    unchosen = torch.ones_like(ids, dtype=torch.bool).scatter(1, m.positions, ~chosen)
    assert torch.equal(main_input[unchosen], ids[unchosen])
    # the loss: the main network's cross-entropy at the chosen positions, their mean
    logp = pred['mlm_logits'].double().log_softmax(-1)
    ce = [-float(logp[b, j, int(m.labels[b, j])]) for b in range(3) for j in range(m.labels.shape[1]) if chosen[b, j]]
    loss = ElectraLoss(gen_weight=0.0, disc_weight=1.0, objective='replace_mlm')
    assert loss(pred, m.labels).item() == pytest.approx(sum(ce) / len(ce), rel=1e-5)


def test_bert_is_one_network_trained_by_mlm_on_the_masked_input():
    model, ids, m, pred = run('mlm')
    assert model.generator is None and 'gen_logits' not in pred and 'sampled' not in pred
    assert isinstance(pred, ElectraGeneratorDiscriminatorOutput) and pred.gen_logits is None and pred.sampled is None
    logp = pred['mlm_logits'].double().log_softmax(-1)
    chosen = m.labels >= 0
    ce = [-float(logp[b, j, int(m.labels[b, j])]) for b in range(3) for j in range(m.labels.shape[1]) if chosen[b, j]]
    loss = ElectraLoss(gen_weight=1.0, disc_weight=1.0, objective='mlm')
    assert loss(pred, m.labels).item() == pytest.approx(sum(ce) / len(ce), rel=1e-5)
    assert loss.last[0].item() == 0.0
    # the MLM head reads the network's own word embeddings
    assert model.mlm_head.projection.weight is model.discriminator.electra.embeddings.word_embeddings.weight


def test_uniform_generator_builds_no_generator_and_has_no_mlm_term():
    model, ids, m, pred = run('electra', uniform_generator=True)
    assert model.generator is None and not any(n.startswith('generator') for n, _ in model.named_parameters())
    assert 'gen_logits' not in pred
    loss_fn = ElectraLoss(gen_weight=1.0, disc_weight=50.0)
    total = loss_fn(pred, m.labels)
    real = ids != PAD
    terms = torch.nn.functional.binary_cross_entropy_with_logits(pred['disc_logits'][real], pred['is_replaced'][real].float())
    assert total.item() == pytest.approx(50 * terms.item(), rel=1e-5) and loss_fn.last[0].item() == 0.0
    # uniform over the vocabulary: 40 x 100 copies of the batch, every id's share within 4.5 standard errors of 1 / V
    counts = torch.zeros(V)
    for seed in range(40):
        model.rng = torch.Generator().manual_seed(seed)
        labels = m.labels.repeat(100, 1)
        s = model(m.input_ids.repeat(100, 1), torch.zeros(300, 12, dtype=torch.long), m.positions.repeat(100, 1),
                  labels)['sampled']
        counts += torch.bincount(s[labels >= 0], minlength=V)
    share, se = counts / counts.sum(), math.sqrt((1 / V) * (1 - 1 / V) / float(counts.sum()))
    assert float((share - 1 / V).abs().max()) < 4.5 * se


def test_gdes_sends_no_discriminator_gradient_into_the_shared_embeddings():
    model, ids, m, pred = run('electra', tie_weights='gdes')
    shared = model.generator.electra.embeddings.word_embeddings
    residual = model.discriminator.electra.embeddings.word_embeddings
    assert residual.weight is not shared.weight and float(residual.weight.abs().max()) == 0.0  # starts at zero
    ElectraLoss(gen_weight=0.0, disc_weight=1.0)(pred, m.labels).backward()
    assert shared.weight.grad is None or float(shared.weight.grad.abs().max()) == 0.0
    assert float(residual.weight.grad.abs().max()) > 0
    model.zero_grad()
    pred = model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)
    ElectraLoss(gen_weight=1.0, disc_weight=0.0)(pred, m.labels).backward()
    assert float(shared.weight.grad.abs().max()) > 0 and float(residual.weight.grad.abs().max()) == 0.0
    # the discriminator reads shared + residual: moving the residual moves its output
    with torch.no_grad(): residual.weight.add_(0.5)
    again = model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)
    assert not torch.allclose(again['disc_logits'], pred['disc_logits'])


@pytest.mark.parametrize('objective', ['electra', 'electra_15', 'mlm', 'replace_mlm', 'all_tokens_mlm'])
def test_loss_counts_before_the_forward_match_the_losses_masks(objective):
    "Gradient accumulation divides every micro-batch by counts taken from the whole batch before any forward."
    masking = MaskingSettings((CLS, SEP, MASK, PAD), PAD, MASK, V, mask_prob=0.3, mode='with_replacement')
    model, ids, _, _ = run(objective)
    m = masking(ids, torch.Generator().manual_seed(5))
    assert any(len(set(r.tolist())) < len(r) for r in m.positions)  # a position drawn twice: counted once
    pred = model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)
    counts = loss_counts(OBJECTIVES[objective], m.input_ids, m.positions, m.labels, PAD)
    assert counts.tolist() == [float((m.labels >= 0).sum()), float(pred['disc_mask'].sum())]


@pytest.mark.parametrize('kw', [dict(objective='electra'), dict(objective='electra_15'), dict(objective='mlm'),
                                dict(objective='replace_mlm'), dict(objective='all_tokens_mlm'),
                                dict(uniform_generator=True), dict(tie_weights='gdes'),
                                dict(generator_size=1.0, tie_weights='none', two_stage=0.5)])
def test_flops_of_every_variant_match_torchs_flop_counter(kw):
    model, ids, m, _ = run(**kw)
    nets = [n for n in (model.generator, model.discriminator) if n is not None]
    for net in nets: net.set_attn_implementation('eager')  # explicit attention matmuls, counted by torch
    with FlopCounterMode(display=False) as counter:
        model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)
    fl = pretrain_flops(tiny_cfg(**kw), 3, 12, V, m.positions.shape[1])
    assert counter.get_total_flops() == fl['forward']
    gen = fl['generator_encoder'] + fl['generator_head']
    main = fl['discriminator_encoder'] + fl['discriminator_head']
    expected = 3 * (gen + main) if 'two_stage' not in kw else 0.5 * 3 * gen + 0.5 * (gen + 3 * main)
    assert fl['train_step'] == pytest.approx(expected)
    assert (gen == 0) == (kw.get('objective') == 'mlm' or 'uniform_generator' in kw)


def test_flops_to_a_step_count_each_stage_of_two_stage_training_at_its_own_cost():
    "The x of a checkpoint on the compute curves: steps x the step's FLOPs, stage by stage for two-stage training."
    joint = tiny_cfg(steps=10)
    assert pretrain_flops_to_step(joint, V, 7) == 7 * pretrain_step_flops(joint, V)
    cfg = tiny_cfg(generator_size=1.0, tie_weights='none', two_stage=0.3, steps=10)  # the switch after step 3
    assert cfg.mask_mode != 'bernoulli'  # the generator's head runs at the max_predictions masked positions
    parts = pretrain_flops(cfg, cfg.batch_size, cfg.max_length, V, min(max_predictions(cfg.mask_prob, cfg.max_length),
                                                                         cfg.max_length))
    gen, main = parts['generator_encoder'] + parts['generator_head'], parts['discriminator_encoder'] + parts['discriminator_head']
    assert [pretrain_flops_to_step(cfg, V, s) for s in (1, 3, 4, 10)] == pytest.approx(
        [3 * gen, 9 * gen, 9 * gen + gen + 3 * main, 9 * gen + 7 * (gen + 3 * main)])
    assert pretrain_flops_to_step(cfg, V, 10) == pytest.approx(10 * pretrain_step_flops(cfg, V))  # the mean, when exact


def test_a_schedule_restarted_at_the_switch_against_hand_values():
    from electra.training.schedule import warmup_decay_sched
    sched = warmup_decay_sched(1.0, 2, 10, restart_at=4)  # steps 0-3: a 4-step run; 4-9: a 6-step run; warm-up 2
    got = [sched(t / 10) for t in (0, 1, 3, 4, 5, 9)]
    assert got == pytest.approx([0.0, 0.5 * 0.75, 0.25, 0.0, 0.5 * 5 / 6, 1 / 6])
    assert warmup_decay_sched(1.0, 2, 10)(0.5) == pytest.approx(0.5)  # no restart: one run of 10


def test_variant_presets_layer_over_a_size_and_invalid_combinations_fail_early():
    cfg = load_config(PretrainConfig, ['--config', 'small,bert'], preset_dir='configs/pretrain')
    assert (cfg.hidden_size, cfg.objective, cfg.disc_loss_weight, cfg.config) == (256, 'mlm', 1.0, 'small,bert')
    two = load_config(PretrainConfig, ['--config', 'small,two_stage'], preset_dir='configs/pretrain')
    assert (two.two_stage, two.generator_size, two.tie_weights) == (0.5, 1.0, 'none')
    checked = lambda **kw: config_from_dict(PretrainConfig, {**TINY, **kw}, from_file=False)  # noqa: E731
    with pytest.raises(ConfigError, match="two_stage.*generator_size 1.0 and tie_weights none"):
        checked(two_stage=0.5)
    with pytest.raises(ConfigError, match="'mlm' objective.*no generator"):
        checked(objective='mlm', uniform_generator=True)
    with pytest.raises(ConfigError, match="'gdes' shares the generator's weights"):
        checked(uniform_generator=True, tie_weights='gdes')
    with pytest.raises(ConfigError, match='two-stage training.*electra or electra_15'):
        checked(objective='replace_mlm', two_stage=0.5, generator_size=1.0, tie_weights='none')
    two_stage = dict(two_stage=0.5, generator_size=1.0, tie_weights='none')
    with pytest.raises(ConfigError, match="two_stage_schedule: 'per_stage' schedules the stages.*set two_stage"):
        checked(two_stage_schedule='per_stage')
    with pytest.raises(ConfigError, match=r'warmup_steps: each stage warms up for warmup_steps \(10\) but the shorter '
                                          r'stage has 10 steps'):
        checked(**two_stage, steps=20, warmup_steps=10, two_stage_schedule='per_stage')
    with pytest.raises(ConfigError, match='two_stage: 0.01 of 20 steps leaves a stage without steps'):
        checked(**{**two_stage, 'two_stage': 0.01}, steps=20, warmup_steps=1)


@pytest.mark.parametrize('schedule', ['run', 'per_stage'])
def test_two_stage_trains_the_generator_then_the_discriminator_from_it_with_the_generator_frozen(schedule):
    """8 steps, switching after 4: snapshots of both networks and the learning rate after every step, through the real
    pretraining Learner; 'per_stage' restarts the warm-up and decay at the switch."""
    from fastai.callback.core import Callback

    from tests.support import runners
    from tests.support import baseline
    from electra.training.schedule import lr_at_step
    cfg = tiny_cfg(dropout=0.0, generator_size=1.0, tie_weights='none', two_stage=0.5, steps=8, warmup_steps=1,
                   log_every=4, batch_size=2, two_stage_schedule=schedule)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, token_ids(120))
    runner = runners.LearnerRunner('t', cfg, model, baseline.synthetic_batches(2, 2, 16, 120), torch.device('cpu'), 'fp32')
    snap = lambda net: {k: v.clone() for k, v in net.state_dict().items()}  # noqa: E731
    seen, lrs = {0: (snap(model.generator), snap(model.discriminator))}, []

    class Snapshots(Callback):
        order = 100

        def after_batch(self):
            seen[self.train_iter] = (snap(model.generator), snap(model.discriminator))
            lrs.append(self.opt.hypers[0]['lr'])
    runner.learn.add_cb(Snapshots())
    rows = []
    runner.learn.metrics_logger.sinks = [rows.append]
    runner.loader.n = 8
    runner.learn.fit(1)
    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)  # noqa: E731
    encoder = lambda state: {k: v for k, v in state.items() if k.startswith('electra.')}  # noqa: E731
    # stage 1 (steps 1-4): the generator moves every step (but the first, at learning rate 0), the discriminator not
    for step in range(1, 5):
        assert same(seen[step][0], seen[step - 1][0]) == (step == 1) and same(seen[step][1], seen[0][1])
    # step 5 starts from the generator's encoder; from then on the generator is frozen and the discriminator trains
    gen_at_switch = seen[4][0]
    for step in range(5, 9):
        assert same(seen[step][0], gen_at_switch) and not same(seen[step][1], seen[step - 1][1])
    moved = max(float((seen[5][1][k] - gen_at_switch[k]).abs().max()) for k in encoder(gen_at_switch))
    if schedule == 'run':  # one small step away from the generator's weights, not from the discriminator's init
        assert 0 < moved < 0.01 and lrs == pytest.approx([lr_at_step(t, cfg.lr, 1, 8) for t in range(8)])
    else:  # the discriminator's first step is a run's first: learning rate 0, then warm-up and decay over 4 steps
        stage = [lr_at_step(t, cfg.lr, 1, 4) for t in range(4)]
        assert moved == 0 and lrs == pytest.approx(stage + stage) and stage[0] == 0 < stage[1]
    assert math.isnan(rows[0]['disc_loss']) and rows[0]['gen_loss'] > 0 and math.isnan(rows[1]['gen_loss'])
    assert rows[1]['disc_loss'] > 0  # each loss a mean over its own stage's steps: NaN in the other's rows


def test_the_configs_objectives_are_the_registrys_rows():
    "The config offers the registry's rows, in its order, each with the row's phrase in `--help`."
    domain = PretrainConfig.__dataclass_fields__['objective'].metadata['domain'].choices
    assert list(domain) == list(OBJECTIVES) == ['electra', 'electra_15', 'mlm', 'replace_mlm', 'all_tokens_mlm',
                                                'electric', 'fast_electra']
    help = PretrainConfig.__dataclass_fields__['objective'].metadata['help']
    assert all(f"'{o.name}': {o.summary}" in help for o in OBJECTIVES.values())


@pytest.mark.parametrize('name', list(OBJECTIVES))
def test_the_config_refuses_what_the_objectives_row_refuses(name):
    "Each row's allowed `tie_weights`, uniform generator and `init_from`, checked by the config in one line each."
    row = OBJECTIVES[name]
    given = {'objective': name, 'tie_weights': row.tie_weights[0], 'generator_size': 1.0}  # 1.0: 'all' may tie
    if row.generator == 'frozen': given['generator'] = 'google/electra-small-generator'
    checked = lambda **kw: config_from_dict(PretrainConfig, {**TINY, **given, **kw}, from_file=False)  # noqa: E731
    assert checked().objective == name
    for tie in TIE_WEIGHTS:
        if tie in row.tie_weights: assert checked(tie_weights=tie).tie_weights == tie
        else:
            with pytest.raises(ConfigError, match=rf"^tie_weights: '{tie}'"): checked(tie_weights=tie)
    if row.uniform_generator:
        with pytest.raises(ConfigError, match=rf'^uniform_generator: {re.escape(row.uniform_generator)}'):
            checked(uniform_generator=True)
    else: assert checked(uniform_generator=True).uniform_generator
    if row.init_from:
        with pytest.raises(ConfigError, match=rf'^init_from: {re.escape(row.init_from)}'):
            checked(init_from='google/electra-small-discriminator')
    else: assert checked(init_from='google/electra-small-discriminator').init_from
