"""Electric (objective 'electric'): the official TF code's losses and outputs on one batch with fixed masks and
sampling noise (tests/fixtures/official_tf/electric, written by make_electric_fixture.py from a checkpoint the
official code trained 5 steps), reproduced by this library's model, its loss and its training step; the conversion of
that checkpoint; the two-tower generator's view of the input."""
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.support.baseline import Batches
from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig
from electra.convert.tf import convert_tf_checkpoint, electric_state
from electra.convert.tf_checkpoint import TFCheckpoint
from electra.objective.loss import ElectraLoss, batch_statistics
from electra.objective.masking import MaskedInputs, MaskingSettings, write_at_positions
from electra.objective.model import ElectraGeneratorDiscriminator, build_pretraining_model
import electra.pretraining.step as step_module
from tests.support.tiny import TINY, token_ids

pytestmark = pytest.mark.usefixtures('one_thread')
FIXTURE = Path(__file__).resolve().parents[1] / 'fixtures' / 'official_tf' / 'electric'
PAD, UNK, CLS, SEP, MASK, V = 0, 1, 2, 3, 4, 63  # the fixture's vocab.txt
SPECIAL = (CLS, SEP, MASK, PAD)  # what masking never chooses (mask_unk true, the official default)
# the fixture's hparams.json as this library's settings
SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, embedding_size=32,
             generator_size=0.5, max_position_embeddings=32, dropout=0.0, objective='electric', mask_prob=0.2,
             max_length=16, tie_weights='embeddings')


def official() -> dict[str, torch.Tensor]:
    z = np.load(FIXTURE / 'outputs.npz')
    return {k: torch.from_numpy(z[k].astype(np.int64) if z[k].dtype.kind == 'i' else z[k]) for k in z.files}


def official_model(**kw):
    "The library's Electric model holding the official checkpoint's weights."
    cfg = PretrainConfig(**{**TINY, **SIZES, **kw})
    model = build_pretraining_model(cfg, token_ids(V, PAD, MASK, SPECIAL))
    model.load_state_dict(electric_state(TFCheckpoint(FIXTURE)), strict=True)
    return cfg, model


def masked(rec) -> MaskedInputs:
    "The official masking's outputs as `mask_tokens` gives them: slots of weight 0 are unused (-100)."
    labels = rec['masked_lm_ids'].masked_fill(rec['masked_lm_weights'] == 0, -100)
    return MaskedInputs(rec['masked_input_ids'], rec['masked_lm_positions'], labels)


def test_the_model_gives_the_official_outputs_and_losses():
    rec, (_, model) = official(), official_model()
    m = masked(rec)
    with torch.no_grad():
        pred = model.eval()(m.input_ids, rec['segment_ids'], m.positions, m.labels, rec['noise_draws'])
    # the cloze logits at EVERY position, the padded row's included (its rtl padding queries see no key)
    torch.testing.assert_close(pred['gen_logits'], rec['cloze_logits'], atol=1e-5, rtol=0)
    torch.testing.assert_close(pred['disc_logits'], rec['disc_logits'], atol=1e-5, rtol=0)
    corrupted = write_at_positions(m.input_ids, m.positions, pred['sampled'], m.labels >= 0)
    assert torch.equal(corrupted, rec['fake_input_ids'])  # a position drawn twice: the floor of the samples' mean
    assert torch.equal(pred['is_replaced'].long(), rec['is_fake'])
    assert torch.equal(pred['gen_targets'] >= 0, rec['cloze_weights'] > 0)  # the official candidates, [UNK] included
    loss = ElectraLoss(1.0, 50.0)
    total = loss(pred, m.labels)
    torch.testing.assert_close(loss.last[0], rec['cloze_loss'], atol=1e-5, rtol=0)
    torch.testing.assert_close(loss.last[1], rec['disc_loss'], atol=1e-5, rtol=0)
    torch.testing.assert_close(total, rec['total_loss'], atol=1e-4, rtol=0)


def test_the_generators_accuracy_is_the_official_masked_lm_accuracy():
    """Official `masked_lm_accuracy` with `electric_objective`: the cloze logits gathered at the masked positions, their
    argmax against `masked_lm_ids`, weighted by `masked_lm_weights`; not every cloze candidate (those train the loss)."""
    rec, (_, model) = official(), official_model()
    m = masked(rec)
    with torch.no_grad():
        pred = model.eval()(m.input_ids, rec['segment_ids'], m.positions, m.labels, rec['noise_draws'])
    # by hand, from the official outputs: the cloze logits [B, L, V] at the masked positions [B, P]
    at_masked = rec['cloze_logits'].gather(1, rec['masked_lm_positions'][..., None].expand(-1, -1, V))   # [B, P, V]
    weights = rec['masked_lm_weights']                                                                   # [B, P]
    correct = ((at_masked.argmax(-1) == rec['masked_lm_ids']).float() * weights).sum()
    stats = batch_statistics(pred, m.labels, model.objective.head)
    assert (int(stats['gen_correct']), int(stats['gen_total'])) == (int(correct), int(weights.sum()))
    assert int(stats['gen_total']) < int((rec['cloze_weights'] > 0).sum())  # fewer than the candidates: it matters here
    # the cloze model made to predict the first masked token everywhere: right at its masked slots, counted once each
    token = int(m.labels[0, 0])
    with torch.no_grad():
        model.generator.output_bias[token] += 100.0
        pred = model(m.input_ids, rec['segment_ids'], m.positions, m.labels, rec['noise_draws'])
    hits = int(((m.labels == token).float() * weights).sum())
    stats = batch_statistics(pred, m.labels, model.objective.head)
    assert hits > 0 and (int(stats['gen_correct']), int(stats['gen_total'])) == (hits, int(weights.sum()))


def test_a_sample_equal_to_its_original_is_still_noise():
    "Official `_get_fake_data` with `electric_objective`: labels = every masked position, not where the sample differs."
    rec, (_, model) = official(), official_model()
    m = masked(rec)
    noise = rec['noise_draws'].clone()
    noise[0, 0, m.labels[0, 0]] = 1 - 1e-7  # Gumbel noise ~16 on the original token: the sample is the original
    with torch.no_grad():
        pred = model.eval()(m.input_ids, rec['segment_ids'], m.positions, m.labels, noise)
    position = int(m.positions[0, 0])
    assert pred['sampled'][0, 0] == m.labels[0, 0]
    assert pred['is_replaced'][0, position]
    assert torch.equal(pred['is_replaced'].long(), rec['is_fake'])


class FixtureTokenizer:
    "What `pretraining_learner` reads of a tokenizer: the fixture vocabulary's special ids and size."
    pad_token_id, unk_token_id, cls_token_id, sep_token_id, mask_token_id = PAD, UNK, CLS, SEP, MASK

    def __len__(self) -> int: return V


class FedMasking:
    "The step's masking settings, answering every batch with the official masking's fixed outputs."

    def __init__(self, settings: MaskingSettings, fixed: MaskedInputs):
        self.settings, self.fixed = settings, fixed

    def special_tensor(self, device): return self.settings.special_tensor(device)

    def __call__(self, input_ids, rng): return self.fixed


def test_the_training_step_takes_the_official_losses(monkeypatch):
    "One step of the real Learner, its masks and noise the fixture's: the step's losses are the official ones."
    rec, (cfg, model) = official(), official_model(warmup_steps=0, compile=False)
    from electra.pretraining.learner import pretraining_learner
    tokenizer = FixtureTokenizer()
    loader = Batches([(rec['input_ids'], rec['segment_ids'])])
    with tempfile.TemporaryDirectory() as run_dir:
        learn = pretraining_learner(cfg, model, tokenizer, loader, Path(run_dir), torch.device('cpu'), 'fp32')
        learn.metrics_logger.sinks = []
        step = learn.pretraining_step
        step.constants = dataclasses.replace(step.constants, masking=FedMasking(step.constants.masking, masked(rec)))
        monkeypatch.setattr(step_module, 'sampling_noise', lambda model, positions, rng: rec['noise_draws'])
        learn.fit(1)
    torch.testing.assert_close(step.sums[1].float(), rec['cloze_loss'], atol=1e-5, rtol=0)
    torch.testing.assert_close(step.sums[2].float(), rec['disc_loss'], atol=1e-5, rtol=0)


def test_the_converted_discriminator_and_cloze_model_give_the_official_logits(tmp_path, capsys):
    """The official Electric checkpoint converts: its discriminator as ELECTRA's, and its two-tower cloze model to
    cloze/ as an Electric run's export writes it, whose cloze logits are the official ones and whose log q, added to
    the head's logit with log(p / (1 - p)) (`electric_logits`), is the official logit; its card says the head gives the
    energy alone (R12a-4: before, the generator was skipped and the card called the head replaced-token detection)."""
    from electra.convert.__main__ import main
    from electra.objective.model import electric_logits
    from electra.pretrained.export import load_cloze
    from transformers import ElectraForPreTraining
    assert main(['tf', str(FIXTURE), '--out', str(tmp_path)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert [line for line in said if line.startswith('generator')] == \
        ["generator: none: Electric's two-tower cloze generator, in cloze/: no transformers counterpart (a "
         "left-to-right and a right-to-left transformer whose shifted outputs are concatenated), written in the "
         "electra library's own files, which electra.electric_scores reads with the discriminator"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ['cloze', 'conversion.json', 'discriminator']
    report = json.loads((tmp_path / 'conversion.json').read_text())
    towers = {'generator_ltr', 'generator_rtl', 'cloze_predictions'}  # mapped now: only their optimizer slots skipped
    assert report['mask_prob'] == 0.2 and {why for n, why in report['skipped'].items() if n.split('/')[0] in towers} \
        == {'optimizer slot'}
    rec = official()
    disc = ElectraForPreTraining.from_pretrained(tmp_path / 'discriminator').eval()
    cloze, mask_prob = load_cloze(tmp_path / 'cloze', tmp_path / 'discriminator')
    assert disc.config.electra_objective == 'electric' and mask_prob == 0.2
    with torch.no_grad():
        head = disc(rec['fake_input_ids'], attention_mask=rec['input_mask'], token_type_ids=rec['segment_ids']).logits
        logits = cloze(rec['input_ids'], rec['input_mask'].bool(), rec['segment_ids'])
    torch.testing.assert_close(logits, rec['cloze_logits'], atol=1e-5, rtol=0)
    torch.testing.assert_close(electric_logits(head, logits, rec['fake_input_ids'], mask_prob), rec['disc_logits'],
                               atol=1e-5, rtol=0)
    card = (tmp_path / 'discriminator' / 'README.md').read_text()
    assert "is Electric's energy E(x)_t of each token" in card and 'electra.electric_scores' in card
    assert '(replaced-token detection)' not in card.replace('not replaced-token detection', '')
    assert 'No transformers class holds the two towers' in (tmp_path / 'cloze' / 'README.md').read_text()
    for role in ('discriminator', 'cloze'):  # Electric's paper cited beside ELECTRA's
        assert 'Energy-Based Cloze Models", EMNLP 2020' in (tmp_path / role / 'README.md').read_text().split('## Citation')[1]


def test_a_partial_electric_generator_is_refused(tmp_path):
    from tests.support.tf_bundle import write_bundle
    ckpt = TFCheckpoint(FIXTURE)
    tensors = {n: ckpt.read(n) for n in ckpt.entries if n != 'cloze_predictions/output_bias'}
    (tmp_path / 'ckpt').mkdir()
    write_bundle(tmp_path / 'ckpt' / 'model.ckpt-5', tensors)
    for f in ('vocab.txt', 'hparams.json'): (tmp_path / 'ckpt' / f).write_bytes((FIXTURE / f).read_bytes())
    with pytest.raises(ConfigError, match="an Electric checkpoint without the variable 'cloze_predictions/output_bias'"):
        convert_tf_checkpoint(tmp_path / 'ckpt', tmp_path / 'out')


def test_flops_of_a_step_by_hand_and_by_torchs_counter():
    """Two towers over the whole input and the cloze head at every position, 2 Hg wide: counted by hand for the
    fixture's sizes, and by torch's FLOP counter on the model itself."""
    from torch.utils.flop_counter import FlopCounterMode
    from electra.objective.flops import pretrain_flops
    rec, (cfg, model) = official(), official_model()
    B, L, P, H, Hg, E, F, Fg = 3, 16, 3, 64, 32, 32, 128, 128
    T = B * L

    def encoder(h, ffn, project):  # embeddings_project, then per layer QKV, output, scores, weighted sum, FFN
        return 2 * T * E * h * project + 2 * (2 * T * h * 3 * h + 2 * T * h * h + 2 * 2 * B * L * L * h + 2 * 2 * T * h * ffn)
    towers = 2 * encoder(Hg, Fg, project=0)               # the generator's hidden 32 = the embedding width: no projection
    cloze_head = 2 * T * (2 * Hg) * E + 2 * T * E * V     # dense 2 Hg -> E, then the vocabulary, at every position
    discriminator = encoder(H, F, project=1) + 2 * T * H * H + 2 * T * H
    fl = pretrain_flops(cfg, B, L, V, P)
    assert (fl['generator_encoder'], fl['generator_head']) == (towers, cloze_head)
    assert fl['forward'] == towers + cloze_head + discriminator and fl['train_step'] == 3 * fl['forward']
    for net in (model.generator.ltr, model.generator.rtl, model.discriminator): net.set_attn_implementation('eager')
    m = masked(rec)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(m.input_ids, rec['segment_ids'], m.positions, m.labels, rec['noise_draws'])
    assert counter.get_total_flops() == fl['forward']


@pytest.mark.parametrize('kw, message', [
    (dict(tie_weights='all'), r"tie_weights: 'all': Electric's two-tower cloze generator shares the embeddings"),
    (dict(tie_weights='gdes'), r"tie_weights: 'gdes': Electric's"),
    (dict(uniform_generator=True), r"uniform_generator: Electric's discriminator needs the cloze generator"),
    (dict(init_from='google/electra-small-discriminator'), r"init_from: Electric's two-tower cloze generator has no "
                                                           r"counterpart"),
])
def test_settings_electric_cannot_have_are_refused_in_one_line(kw, message):
    with pytest.raises(ConfigError, match=message):
        PretrainConfig(**{**TINY, 'objective': 'electric', **kw}).validate()


def test_the_model_needs_the_maskings_special_ids():
    built = build_pretraining_model(PretrainConfig(**{**TINY, **SIZES}), token_ids(V, PAD, MASK, SPECIAL))
    with pytest.raises(ValueError, match="objective 'electric' takes its cloze loss at the tokens masking may choose"):
        ElectraGeneratorDiscriminator(built.generator, built.discriminator, objective='electric', mask_token_id=MASK)
