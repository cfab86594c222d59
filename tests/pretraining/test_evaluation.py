"""electra/pretraining/evaluation.py: ROC AUC against scikit-learn and the held-out evaluation."""
import random
from collections import Counter
from types import SimpleNamespace

import datasets
import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from electra.objective.masking import MaskingSettings, mask_tokens
from electra.pretraining.evaluation import HeldOutEvaluation, eval_batches, held_out_seeds, roc_auc
from tests.support.tiny import token_ids


def test_roc_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score
    g = torch.Generator().manual_seed(0)
    for n in (10, 1000):
        labels = torch.rand(n, generator=g) < 0.3
        scores = torch.randn(n, generator=g) + labels * 0.8
        scores[::3] = scores[::3].round()  # ties
        assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()), abs=1e-12)
    assert np.isnan(roc_auc(torch.ones(5), torch.ones(5)))


MASKING = MaskingSettings((0, 1, 2, 3, 4), 0, 4, 120)


def evaluation(tmp_path, **cfg):
    "A tiny model (vocabulary 120, ids 0-4 special) and its evaluation on 37 held-out examples of 7 to 32 tokens."
    from electra.config.pretrain import PretrainConfig
    from electra.objective.model import build_pretraining_model
    cfg = PretrainConfig(**{**dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                   embedding_size=32, generator_size=0.5), **cfg})
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, token_ids(120, mask=4, special=(0, 1, 2, 3, 4)))
    model.rng = torch.Generator().manual_seed(5)
    rng = random.Random(0)
    data = datasets.Dataset.from_dict({'input_ids': [[2] + [rng.randrange(5, 120) for _ in range(rng.randint(5, 30))] + [3]
                                                     for _ in range(37)]})
    data = data.map(lambda r: {'token_type_ids': [0] * len(r['input_ids'])})
    batches = eval_batches(data, 16, 32, 0)
    cb = HeldOutEvaluation(batches, 10, 100, tmp_path / 'eval.csv', MASKING, seed=3)
    cb.learn = SimpleNamespace(model=model, train_iter=10)
    return model, batches, cb


def test_held_out_evaluation_is_fixed_and_leaves_training_state_alone(tmp_path):
    model, batches, cb = evaluation(tmp_path)
    assert [len(b[0]) for b in batches] == [16, 16, 5]
    state = model.rng.get_state()
    torch_state = torch.get_rng_state()
    first, second = dict(cb.evaluate()), dict(cb.evaluate())
    assert first == second  # the same masks and samples every time
    assert torch.equal(model.rng.get_state(), state) and torch.equal(torch.get_rng_state(), torch_state)
    assert model.training and first['examples'] == 37
    # the AUC over all real tokens, recomputed by hand with sklearn
    from sklearn.metrics import roc_auc_score
    model.eval()
    masks, noise, _ = held_out_seeds(3)  # the masks' stream; the sampling's its own
    device_rng = torch.Generator().manual_seed(masks)
    saved, model.rng = model.rng, torch.Generator().manual_seed(noise)
    scores, labels = [], []
    from electra.objective.masking import mask_tokens
    with torch.no_grad():
        for ids, types in batches:
            m = mask_tokens(ids, torch.tensor([0, 1, 2, 3, 4]), 0, 4, 120, 0.15, 'fixed', 0.85, 0.0, device_rng)
            out = model(m.input_ids, types, m.positions, m.labels)
            scores.append(out['disc_logits'][out['attention_mask']])
            labels.append(out['is_replaced'][out['attention_mask']])
    model.rng = saved
    assert first['disc_auc'] == pytest.approx(roc_auc_score(torch.cat(labels).numpy(), torch.cat(scores).numpy()), abs=1e-9)


def test_baselines_and_the_uniform_probe_against_a_hand_computation(tmp_path):
    """The generator's baseline is the share of the most frequent original token at the masked positions, the
    discriminator's the share of real tokens not replaced, and the probe's AUC that of the discriminator on the
    text with the masked positions replaced by uniform draws (Gumbel-max over equal logits: the argmax of the
    draws themselves) from the probe's generator, the masks and the samples from theirs (`held_out_seeds`): each
    recomputed here from the masks, with sklearn."""
    model, batches, cb = evaluation(tmp_path)
    row = cb.evaluate()
    model.eval()
    masks, noise, probe = held_out_seeds(3)
    mask_rng, probe_rng = torch.Generator().manual_seed(masks), torch.Generator().manual_seed(probe)
    saved, model.rng = model.rng, torch.Generator().manual_seed(noise)  # the sampling's stream, apart from the masks'
    labels, replaced, real, scores, targets = Counter(), 0, 0, [], []
    with torch.no_grad():
        for ids, types in batches:
            m = mask_tokens(ids, torch.tensor([0, 1, 2, 3, 4]), 0, 4, 120, 0.15, 'fixed', 0.85, 0.0, mask_rng)
            out = model(m.input_ids, types, m.positions, m.labels)  # its samples from model.rng, as evaluate()'s
            labels.update(m.labels[m.labels >= 0].tolist())
            replaced, real = replaced + int(out['is_replaced'].sum()), real + int((ids != 0).sum())
            draws = torch.rand((*m.positions.shape, 120), generator=probe_rng).argmax(-1)
            corrupted = ids.clone()
            for b, p in zip(*torch.nonzero(m.labels >= 0, as_tuple=True)):
                corrupted[b, m.positions[b, p]] = draws[b, p]
            logits = model.discriminator(corrupted, attention_mask=(ids != 0).long(), token_type_ids=types).logits
            scores.append(logits[ids != 0]), targets.append((corrupted != ids)[ids != 0])
    model.rng = saved
    assert row['gen_accuracy_baseline'] == pytest.approx(max(labels.values()) / sum(labels.values()), abs=1e-12)
    assert row['disc_accuracy_baseline'] == pytest.approx(1 - replaced / real, abs=1e-12)
    assert row['uniform_auc'] == pytest.approx(roc_auc_score(torch.cat(targets).numpy(), torch.cat(scores).numpy()),
                                               abs=1e-6)
    assert 0 < row['gen_accuracy_baseline'] < 0.2 and 0.8 < row['disc_accuracy_baseline'] < 0.95  # 115 tokens, 15%


def test_what_a_model_has_not_is_nan(tmp_path):
    "No generator network (uniform replacements): no generator baseline; BERT: no discriminator, no probe, no AUC."
    row = evaluation(tmp_path, uniform_generator=True)[2].evaluate()
    assert np.isnan(row['gen_accuracy_baseline']) and 0.8 < row['disc_accuracy_baseline'] < 0.95
    assert 0 <= row['uniform_auc'] <= 1
    row = evaluation(tmp_path, objective='mlm')[2].evaluate()
    assert all(np.isnan(row[k]) for k in ('disc_auc', 'uniform_auc', 'gen_accuracy_baseline'))


@pytest.mark.parametrize('objective', ['mlm', 'replace_mlm', 'all_tokens_mlm'])
def test_a_token_predicting_discriminator_s_baseline_against_a_hand_computation(tmp_path, objective):
    """R25a-3: the MLM objectives' held-out accuracy stood without a baseline (NaN), where a network that learnt nothing
    scores the share of the most frequent original token at the masked positions (the MLM head: BERT, Replace MLM) or
    the share of tokens left as they were over every token (the copy head of All-Tokens MLM: 1 - the share
    replaced), recomputed here from the held-out masks."""
    model, batches, cb = evaluation(tmp_path, objective=objective)
    row = cb.evaluate()
    mask_rng = torch.Generator().manual_seed(held_out_seeds(3)[0])
    labels = Counter()
    for ids, types in batches:
        m = mask_tokens(ids, torch.tensor([0, 1, 2, 3, 4]), 0, 4, 120, 0.15, 'fixed', 0.85, 0.0, mask_rng)
        labels.update(m.labels[m.labels >= 0].tolist())
    expected = (1 - row['replaced_fraction'] if objective == 'all_tokens_mlm' else
                max(labels.values()) / sum(labels.values()))
    assert row['disc_accuracy_baseline'] == pytest.approx(expected, abs=1e-12)
    assert 0 < row['disc_accuracy_baseline'] < 1 and np.isnan(row['disc_auc'])


@pytest.mark.usefixtures('one_thread')
def test_padding_the_vocabulary_leaves_the_held_out_evaluation_of_the_same_weights_unchanged(tmp_path):
    """`pad_vocab_multiple` is a speed setting: the same weights padded to 128 rows (vocabulary 120) evaluate exactly as
    unpadded. The sampling noise was drawn over the padded rows, so every later batch's masks (and the probe's draws)
    moved: the most-frequent-token baseline, which reads no weights, changed with the padding."""
    import dataclasses
    from electra.config.pretrain import PretrainConfig
    from tests.support import baseline
    model, _, cb = evaluation(tmp_path)
    cfg = PretrainConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         embedding_size=32, generator_size=0.5, pad_vocab_multiple=64)
    padded = baseline.padded_like(model, cfg, 120)
    assert padded.discriminator.config.vocab_size == 128
    plain = dict(cb.evaluate())
    cb.learn = SimpleNamespace(model=padded, train_iter=10)
    assert dict(cb.evaluate()) == plain


def recorded_masks(cb: HeldOutEvaluation) -> list:
    "The masked batches `cb` evaluates on, kept as its masking makes them."
    seen, masking = [], cb.masking
    cb.masking = lambda ids, rng: seen.append(masking(ids, rng)) or seen[-1]
    return seen


@pytest.mark.usefixtures('one_thread')
def test_the_held_out_masks_are_a_function_of_the_held_out_set_and_the_seed_alone(tmp_path):
    """Every held-out batch is masked as `mask_tokens` masks the batches one after another from a generator seeded
    `seed`, whatever the objective samples and in both stages of two-stage training: the sampling's noise came next in
    the masks' stream, so BERT and the first stage (which sample nothing) and the sampling objectives masked the
    later batches at other positions, and the frozen generator's accuracy moved at the switch with its weights
    unchanged. The most-frequent-token baseline, which reads no weights, is then one number for all of them, the
    share of the most frequent original token at the reference masks."""
    _, batches, _ = evaluation(tmp_path)
    rng, reference = torch.Generator().manual_seed(held_out_seeds(3)[0]), []
    for ids, _ in batches: reference.append(MASKING(ids, rng))
    labels = Counter(t for m in reference for t in m.labels[m.labels >= 0].tolist())
    runs = {name: dict(objective=name) for name in ('mlm', 'electra', 'electra_15', 'replace_mlm', 'all_tokens_mlm')}
    runs.update(electric=dict(objective='electric', tie_weights='none'), uniform=dict(uniform_generator=True),
                stage_1=dict(two_stage=0.5, generator_size=1.0, tie_weights='none'),
                stage_2=dict(two_stage=0.5, generator_size=1.0, tie_weights='none'))
    for name, cfg in runs.items():
        model, _, cb = evaluation(tmp_path, **cfg)
        if name.startswith('stage'): model.stage = int(name[-1])
        seen = recorded_masks(cb)
        row = cb.evaluate()
        assert len(seen) == len(reference) == 3, name
        for m, r in zip(seen, reference):
            for key in ('input_ids', 'positions', 'labels'):
                assert torch.equal(getattr(m, key), getattr(r, key)), (name, key)
        if name not in ('mlm', 'uniform'):  # a generator network: its baseline
            assert row['gen_accuracy_baseline'] == max(labels.values()) / sum(labels.values()), name


@pytest.mark.usefixtures('one_thread')
def test_the_held_out_draws_are_none_of_the_training_streams(tmp_path):
    """The held-out masks were drawn from a generator seeded `seed`, as the training step's own stream on rank 0
    (`rank_seed(seed, 0)` is `seed`): each held-out batch was masked at the positions of the training step of its
    number, and the uniform generator's replacements, drawn after them, were the training's own, tokens the
    discriminator had just been trained to flag at those positions (held-out AUC 0.934 beside 0.897 on the probe's
    fresh draws). Now none of the held-out streams is a training stream of any rank, nor another seed's."""
    from electra.training.distributed import rank_seed
    model, batches, cb = evaluation(tmp_path, uniform_generator=True)
    seen = recorded_masks(cb)
    cb.evaluate()
    for seed in (rank_seed(3, 0), rank_seed(3, 1), 4, 5):  # a training stream of this run's ranks, or another run's
        rng = torch.Generator().manual_seed(seed)
        trained = [MASKING(ids, rng) for ids, _ in batches]
        assert not any(torch.equal(m.positions, t.positions) for m, t in zip(seen, trained)), seed


def test_an_auc_over_fewer_than_30_of_either_class_is_undefined():
    """`held_out_auc` is sklearn's ROC AUC where each class has at least `MIN_AUC_CLASS` (30) tokens, NaN (undefined)
    below: ELECTRA 15%'s AUC at the masked positions rested on 1 to 4 "original" tokens among ~440."""
    from electra.pretraining.evaluation import MIN_AUC_CLASS, held_out_auc
    assert MIN_AUC_CLASS == 30
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(400, generator=g)
    for negatives in (1, 29, 30, 31):
        labels = torch.arange(400) >= negatives  # `negatives` originals, the rest replaced
        got = held_out_auc(scores, labels)
        if negatives < 30: assert np.isnan(got) and np.isnan(held_out_auc(scores, ~labels))
        else: assert got == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()), abs=1e-12)


@pytest.mark.usefixtures('one_thread')
def test_electra_15_s_auc_rests_on_its_masked_positions_and_its_probe_on_every_token(tmp_path):
    """ELECTRA 15% (the discriminator's loss at the masked positions): its `disc_auc` and accuracy are over the masked
    positions, where a sample equal to the original is rare: here fewer than 30 "original", so the AUC is undefined
    (NaN) rather than the rank of a handful of tokens; its always-"original" baseline is over the same positions. The
    probe on uniform replacements is over every real token, as for every objective: sklearn's AUC there, and the same
    number as ELECTRA's for the same weights (it was over the masked positions, where it rested on no "original")."""
    model, batches, cb = evaluation(tmp_path, objective='electra_15')
    electra_model, _, electra_cb = evaluation(tmp_path, objective='electra')
    for k, v in electra_model.state_dict().items(): assert torch.equal(model.state_dict()[k], v), k  # the same weights
    row = cb.evaluate()
    model.eval()
    masks, noise, probe = held_out_seeds(3)
    mask_rng, probe_rng = torch.Generator().manual_seed(masks), torch.Generator().manual_seed(probe)
    saved, model.rng = model.rng, torch.Generator().manual_seed(noise)
    originals = masked = 0
    scores, targets = [], []
    with torch.no_grad():
        for ids, types in batches:
            m = mask_tokens(ids, torch.tensor([0, 1, 2, 3, 4]), 0, 4, 120, 0.15, 'fixed', 0.85, 0.0, mask_rng)
            out = model(m.input_ids, types, m.positions, m.labels)
            at = torch.zeros_like(ids, dtype=torch.bool)
            for b, p in zip(*torch.nonzero(m.labels >= 0, as_tuple=True)): at[b, m.positions[b, p]] = True
            masked, originals = masked + int(at.sum()), originals + int((~out['is_replaced'] & at).sum())
            draws = torch.rand((*m.positions.shape, 120), generator=probe_rng).argmax(-1)
            corrupted = ids.clone()
            for b, p in zip(*torch.nonzero(m.labels >= 0, as_tuple=True)): corrupted[b, m.positions[b, p]] = draws[b, p]
            logits = model.discriminator(corrupted, attention_mask=(ids != 0).long(), token_type_ids=types).logits
            scores.append(logits[ids != 0]), targets.append((corrupted != ids)[ids != 0])
    model.rng = saved
    assert originals < 30 < masked and np.isnan(row['disc_auc'])
    assert row['disc_accuracy_baseline'] == pytest.approx(originals / masked, abs=1e-12)
    assert row['uniform_auc'] == pytest.approx(roc_auc_score(torch.cat(targets).numpy(), torch.cat(scores).numpy()),
                                               abs=1e-6)
    assert row['uniform_auc'] == electra_cb.evaluate()['uniform_auc']
