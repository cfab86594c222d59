"""Electric's export (electra/pretrained/export.py, electra/pretrained/electric.py): the discriminator stays a plain
`ElectraForPreTraining` whose head gives the energy E(x)_t alone; the two-tower cloze model is exported beside it
(`cloze/`), and `electra.electric_scores` gives the run's own probability that a token is noise, sigmoid(E + log q(x_t |
context) + log(mask_prob / (1 - mask_prob))) (official run_pretraining.py `_get_discriminator_output`): equal to the
model's own forward on the same input and to a hand computation of the formula. Before, the card called that head the
replaced-token detector, and its sigmoid gave 0.999 on every token of an unaltered sentence."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
import yaml
from transformers import AutoModel, AutoModelForPreTraining, ElectraForPreTraining

import electra
from electra.config.errors import ConfigError, RunWarning
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model
from electra.pretrained.export import export_holds, export_pretrained
from tests.pretrained.test_card import metadata, token_ids_tokenizer
from tests.support.tiny import V, tiny_cfg

pytestmark = pytest.mark.usefixtures('one_thread')
MASK_PROB = 0.2  # not the default, so that a constant read from elsewhere shows
TEXTS = ['w1 w2 w3 w4 w5', 'w7 w3', ('w8 w9', 'w10 w11 w12'), 'w20 w21 w22 w23 w24']  # two of one length: a batch


def electric_run(tmp_path, **kw):
    """A tiny Electric model with weights that show a lost piece (a zero bias would hide one), exported with its run's
    config.yaml beside: (model, tokenizer, exported folders)."""
    tok = token_ids_tokenizer(tmp_path)
    cfg = tiny_cfg(objective='electric', dropout=0.0, mask_prob=MASK_PROB, **kw)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok)).eval()
    with torch.no_grad():
        model.generator.output_bias.normal_()
        model.discriminator.discriminator_predictions.dense_prediction.bias.fill_(0.7)
    run = tmp_path / 'electric_11081'
    run.mkdir()
    (run / 'config.yaml').write_text(yaml.safe_dump({'objective': 'electric', 'mask_prob': MASK_PROB, 'steps': 4}))
    return model, tok, export_pretrained(model, tok, run)


def encoded(tok, text):
    return tok(*text, return_tensors='pt') if isinstance(text, tuple) else tok(text, return_tensors='pt')


@torch.no_grad()
def run_logits(model, enc) -> torch.Tensor:
    "The run's own discriminator logits [L] on the unaltered input: its forward with nothing masked."
    nothing = torch.zeros(1, 1, dtype=torch.long)
    pred = model(enc['input_ids'], enc['token_type_ids'], nothing, torch.full((1, 1), -100))
    assert not pred.is_replaced.any()
    return pred.disc_logits[0]


@pytest.mark.parametrize('kw', [{}, dict(pad_vocab_multiple=64), dict(tie_weights='none')])
def test_electric_scores_are_the_runs_own_and_the_formula_s(tmp_path, kw):
    model, tok, paths = electric_run(tmp_path, **kw)
    assert sorted(paths) == ['cloze', 'discriminator']
    scores = electra.electric_scores(paths['discriminator'], TEXTS)
    head = ElectraForPreTraining.from_pretrained(paths['discriminator']).eval()  # as its card says to load it
    for text, got in zip(TEXTS, scores, strict=True):
        enc = encoded(tok, text)
        ids = enc['input_ids'][0]
        assert got.tokens == tok.convert_ids_to_tokens(ids) and torch.equal(got.input_ids, ids)
        run = run_logits(model, enc)
        assert torch.allclose(got.logits, run, atol=1e-5) and torch.allclose(got.p_replaced, torch.sigmoid(run), atol=1e-6)
        # by hand, in float64: the head's logit + log q(x_t | context) + log(k / (1 - k)), the cloze model's logits
        # over the tokenizer's vocabulary only (a padded model's extra rows are not tokens)
        with torch.no_grad():
            energy = head(**enc).logits[0].double()
            cloze = model.generator(enc['input_ids'], enc['attention_mask'].bool(), enc['token_type_ids'])[0, :, :V]
        cloze = cloze.double()
        log_q = cloze[torch.arange(len(ids)), ids] - cloze.logsumexp(-1)
        by_hand = energy + log_q + math.log(MASK_PROB / (1 - MASK_PROB))
        assert torch.allclose(got.energy.double(), energy, atol=1e-6) and torch.allclose(got.log_q.double(), log_q, atol=1e-5)
        assert torch.allclose(got.logits.double(), by_hand, atol=1e-5)
        assert torch.allclose(got.p_replaced.double(), torch.sigmoid(by_hand), atol=1e-6)
        assert (torch.sigmoid(energy) - got.p_replaced).abs().max() > 0.05  # the head alone is not the score
    # the same through the scorer kept for many calls, the cloze folder named
    scorer = electra.ElectricScorer.from_export(paths['discriminator'], paths['cloze'])
    assert torch.equal(scorer(TEXTS[1])[0].p_replaced, scores[1].p_replaced)


def test_the_electric_export_stays_loadable_and_its_cards_say_what_each_part_gives(tmp_path):
    model, tok, paths = electric_run(tmp_path)
    assert type(AutoModelForPreTraining.from_pretrained(paths['discriminator'])) is ElectraForPreTraining
    with pytest.raises(ValueError, match='config.json'):  # no transformers class holds the two towers: no
        AutoModel.from_pretrained(paths['cloze'])         # config.json that would load them as another model
    card = (paths['discriminator'] / 'README.md').read_text()
    about = card.split('## Training')[0]
    assert "Electric's energy E(x)_t" in about and 'not the probability that a token was replaced' in about
    assert 'sigmoid(E + log q(x_t | context) + log(mask_prob / (1 - mask_prob)))' in about
    assert f'mask_prob {MASK_PROB}' in about and '`cloze/`' in about and 'electra.electric_scores' in card
    assert '(replaced-token detection)' not in about
    held_out = {m['name'] for r in metadata(card).get('model-index', [{}])[0].get('results', []) for m in r['metrics']}
    assert not {n for n in held_out if 'replaced-token detection' in n}
    cloze_card = (paths['cloze'] / 'README.md').read_text()
    assert metadata(cloze_card)['pipeline_tag'] == 'fill-mask' and 'electra.electric_scores' in cloze_card
    assert 'No transformers class holds the two towers' in cloze_card
    config = json.loads((paths['cloze'] / 'cloze_config.json').read_text())
    assert config['mask_prob'] == MASK_PROB and config['tower']['vocab_size'] == V
    assert export_holds(model, tok, paths['discriminator'].parent)
    (paths['cloze'] / 'README.md').unlink()  # the card is written last: an export without it is cut short
    assert not export_holds(model, tok, paths['discriminator'].parent)


def test_a_score_electric_cannot_give_is_refused_in_one_line(tmp_path):
    _, _, paths = electric_run(tmp_path, max_position_embeddings=24)
    with pytest.raises(ConfigError, match=r"^texts\[1\]: 25 tokens, more than the model's 24 positions: split it"):
        electra.electric_scores(paths['discriminator'], ['w1', ' '.join(['w2'] * 23)])
    with pytest.warns(RunWarning, match=r"^texts\[0\]: 20 tokens, past the 16 tokens the run was pretrained at: "
                                        r"positions 16 to 19 were never trained; split it"):
        [scores] = electra.electric_scores(paths['discriminator'], [' '.join(['w2'] * 18)])
    assert len(scores.p_replaced) == 20
    weights = paths['cloze'] / 'cloze.safetensors'
    whole = weights.read_bytes()
    weights.write_bytes(whole[:len(whole) // 2])  # an export killed while writing it
    with pytest.raises(ConfigError, match=rf"^cloze: {paths['cloze']}: its files are cut short or edited \(.*\)\. "
                                          r"Export it again: pretrain\.py --resume true"):
        electra.electric_scores(paths['discriminator'], TEXTS)
    weights.write_bytes(whole)
    edited = ElectraForPreTraining.from_pretrained(paths['discriminator'])  # other weights than the cloze model's pair
    with torch.no_grad(): edited.discriminator_predictions.dense_prediction.bias.fill_(-1.0)
    edited.save_pretrained(paths['discriminator'])
    with pytest.raises(ConfigError, match=rf"^cloze: {paths['cloze']} was exported beside another discriminator than "
                                          rf"{paths['discriminator']}.*give the discriminator/ folder exported with it"):
        electra.electric_scores(paths['discriminator'], TEXTS)
    shutil.rmtree(paths['cloze'])
    with pytest.raises(ConfigError, match=rf"^cloze: {paths['cloze']} holds no Electric cloze model \(no "
                                          r"cloze_config\.json\).*pretrain\.py --resume"):
        electra.electric_scores(paths['discriminator'], TEXTS)


def test_an_electric_run_exports_what_its_scores_need_and_a_resume_writes_a_missing_cloze_model(tmp_path, capsys):
    """pretrain.py with objective electric, to its end: `electric_scores` of its export equal its own model's logits
    on an unaltered text, where the exported head's sigmoid alone is another number; --resume of the finished run
    finds the export whole, and with `cloze/` removed (an export of before) writes it again, the same bytes."""
    from tests.support.pretrain import TINY, pretrain
    argv = [*TINY, '--steps', '8', '--run_name', 'electric', '--objective', 'electric', '--checkpoint_at', '1.0']
    run = pretrain(tmp_path, *argv)
    model, tok, run_dir = run['model'].eval(), run['tokenizer'], run['run_dir']
    text = 'the state of the union is strong'
    [scores] = electra.electric_scores(run_dir / 'discriminator', [text])
    enc = tok(text, return_tensors='pt')
    assert torch.allclose(scores.logits, run_logits(model, enc), atol=1e-5)
    head = ElectraForPreTraining.from_pretrained(run_dir / 'discriminator').eval()
    with torch.no_grad(): alone = torch.sigmoid(head(**enc).logits[0])
    assert (alone - scores.p_replaced).abs().max() > 0.05
    cloze = {p.name: p.read_bytes() for p in (run_dir / 'cloze').iterdir()}
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop: pretrain(tmp_path, *argv, '--resume')
    assert stop.value.code == 0 and 'nothing to do' in capsys.readouterr().out.splitlines()[-1]
    shutil.rmtree(run_dir / 'cloze')
    with pytest.raises(SystemExit) as stop: pretrain(tmp_path, *argv, '--resume')
    assert stop.value.code == 0 and 'was missing, incomplete' in capsys.readouterr().out.splitlines()[-1]
    assert {p.name: p.read_bytes() for p in (run_dir / 'cloze').iterdir()} == cloze


@pytest.mark.parametrize('blank', ['', '   ', '\u200b', '\n\t', ('', ' ')])
def test_a_text_without_word_pieces_is_refused_naming_it(tmp_path, blank):
    """R22a-3: an empty or blank text (a blank line of an n-best list) was scored as [CLS] [SEP] alone, a near-perfect
    score a re-ranker summing its tokens' scores would pick, where fine-tuning refuses the same input."""
    _, _, paths = electric_run(tmp_path)
    with pytest.raises(ConfigError) as e:
        electra.electric_scores(paths['discriminator'], ['w1 w2', blank])
    assert str(e.value) == (f"texts[1]: {blank!r} has no word piece (empty, spaces, or only characters such as U+200B "
                            "that the tokenizer drops): its scores would be those of [CLS] and [SEP] alone. Drop it, "
                            "or give it its text.")
    [pair] = electra.electric_scores(paths['discriminator'], [('w1 w2', '')])  # a pair of one text: [CLS] a [SEP]
    assert pair.tokens == ['[CLS]', 'w1', 'w2', '[SEP]']


def test_scores_compare_by_value_and_a_batch_equals_each_text_alone_to_rounding(tmp_path):
    """R22a-4: `==` of two scores raised "Boolean value of Tensor ... is ambiguous" (the dataclass's own); it is exact
    equality of every field. Texts of one length are scored together, as the docstring says: equal to each alone to
    float rounding, not bit for bit."""
    _, _, paths = electric_run(tmp_path)
    scorer = electra.ElectricScorer.from_export(paths['discriminator'])
    together = scorer(TEXTS)
    for text, got in zip(TEXTS, together, strict=True):
        [alone] = scorer(text)
        assert alone == scorer(text)[0] and (alone == got) == all(
            torch.equal(getattr(alone, k), getattr(got, k)) for k in ('input_ids', 'energy', 'log_q', 'logits', 'p_replaced'))
        assert torch.allclose(got.logits, alone.logits, atol=1e-5, rtol=0)
    changed = scorer(TEXTS[0])[0]
    changed.p_replaced[1] += 1e-3
    assert changed != together[0] and together[0] != 'w1' and together[0] != together[1]
