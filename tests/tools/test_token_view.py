"""electra/tools/token_view.py: the discriminator's view of a text, checked against transformers' own
ElectraForPreTraining and ElectraForMaskedLM run on the same tokens, and its renderings parsed back."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import transformers

import electra
from electra.config.errors import ConfigError
from electra.config.values import config_to_dict
from electra.data.tokenizer import tokenizer_state
from electra.finetuning.loading import load_pretrained
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model
from electra.pretrained.export import export_pretrained
from electra.runtime.files import atomic_save
from electra.tools.token_view import TokenView, detector_of, generator_of, view_generated, view_replaced, view_text
from electra.tools.walkthrough import ReplacedTokenDetection, detection_view
from electra.training.checkpoint import FORMAT
from tests.pretrained.test_electric_scores import MASK_PROB, electric_run
from tests.support.notebook_runs import tiny_pretraining
from tests.support.tiny import tiny_cfg

pytestmark = pytest.mark.usefixtures('one_thread')

WORDS = 'the a cow ship bread sails bakes eats good bad teacher reads books chalks in classroom'.split()


@pytest.fixture(scope='module')
def nets():
    "A tiny random discriminator and generator (transformers classes) over a word-level tokenizer."
    vocab = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.', *WORDS, '##s']
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    gen_cfg = transformers.ElectraConfig(**{**cfg.to_dict(), 'hidden_size': 16, 'intermediate_size': 32})
    return transformers.ElectraForPreTraining(cfg).eval(), transformers.ElectraForMaskedLM(gen_cfg).eval(), tok


def hf_p(disc, tok, tokens: list[str]) -> np.ndarray:
    "transformers' discriminator on these tokens: sigmoid of its logits."
    ids = torch.tensor([tok.convert_tokens_to_ids(tokens)])
    with torch.no_grad(): return torch.sigmoid(disc(input_ids=ids).logits)[0].numpy()


def hf_softmax(gen, tok, tokens: list[str], positions: list[int]) -> torch.Tensor:
    "transformers' generator with [MASK] at `positions`: its softmax there [P, V]."
    ids = torch.tensor([tok.convert_tokens_to_ids(tokens)])
    ids[0, positions] = tok.mask_token_id
    with torch.no_grad(): return torch.softmax(gen(input_ids=ids).logits[0, positions], -1)


def html_tokens(html: str) -> list[tuple[str, float, float]]:
    "Each token span of a view's HTML: (token, the opacity of its red, its data-p)."
    spans = re.findall(r'<span class="token" title="[^"]*" data-p="([\d.]+)" style="background-color: '
                       r'rgba\(214, 39, 40, ([\d.]+)\)[^"]*">([^<]*)', html)
    return [(t, float(a), float(p)) for p, a, t in spans]


def test_view_text_is_the_discriminators_probability_on_its_tokens(nets):
    disc, _, tok = nets
    view = view_text(disc, tok, 'the teacher reads books in the classroom .', threshold=0.5)
    assert view.tokens == ['[CLS]', 'the', 'teacher', 'reads', 'books', 'in', 'the', 'classroom', '.', '[SEP]']
    ref = hf_p(disc, tok, view.tokens)
    assert np.allclose(view.p_replaced, ref, atol=1e-6) and view.originals == [None] * 10
    # the HTML: every token, its red as opaque as its probability (3 decimals)
    spans = html_tokens(view.html())
    assert [s[0] for s in spans] == view.tokens
    assert np.allclose([s[1] for s in spans], ref, atol=5e-4) and np.allclose([s[2] for s in spans], ref, atol=1e-6)
    # plain marks: the tokens above a threshold starred with the probability, the others as they are
    view.threshold = float(np.median(ref))
    words = view.text().split(' ')
    starred = [i for i, w in enumerate(words) if w.startswith('*')]
    assert starred == np.flatnonzero(ref > view.threshold).tolist() and len(starred) == 5
    for i in starred: assert words[i] == f'*{view.tokens[i]}*{ref[i]:.2f}'


@pytest.mark.parametrize('blank', ['', '  ', '\u200b'])
def test_a_text_without_word_pieces_is_refused_naming_it(nets, blank):
    "R22a-3's kind on the token views: a blank text was shown as [CLS] [SEP] and their probabilities."
    disc, _, tok = nets
    with pytest.raises(ConfigError) as e:
        view_text(disc, tok, blank)
    assert str(e.value) == (f"text: {blank!r} has no word piece (empty, spaces, or only characters such as U+200B that "
                            "the tokenizer drops): the view would be of [CLS] and [SEP] alone. Give it its text.")


def test_view_replaced_marks_the_word_and_lists_the_generators_candidates(nets):
    disc, gen, tok = nets
    view = view_replaced(disc, tok, 'the teacher reads books in the classroom .', 'books', 'chalks', gen, k=3)
    assert view.tokens[4] == 'chalks' and view.originals == [None] * 4 + ['books'] + [None] * 5
    assert np.allclose(view.p_replaced, hf_p(disc, tok, view.tokens), atol=1e-6)
    probs = hf_softmax(gen, tok, view.tokens, [4])[0]
    top = probs.topk(3)
    assert [t for t, _ in view.candidates[4]] == tok.convert_ids_to_tokens(top.indices.tolist())
    assert np.allclose([q for _, q in view.candidates[4]], top.values.numpy(), atol=1e-6)
    assert view.text().split('\n')[0].split(' ')[4] in ('[chalks/books]', f'*[chalks/books]*{view.p_replaced[4]:.2f}')
    # a word of another length: the differing span, the text's own tokens joined
    longer = view_replaced(disc, tok, 'the cow eats bread .', 'cow', 'good teacher')
    assert longer.tokens[2:4] == ['good', 'teacher'] and longer.originals[1:5] == [None, 'cow', 'cow', None]
    with pytest.raises(ConfigError, match="'ship' is not a word of the text"):
        view_replaced(disc, tok, 'the cow eats bread .', 'ship', 'cow')
    # a replacement that replaces nothing (deleted, or the same tokens) would show a view with no token marked
    for same in ('', '  ', 'COW'):
        with pytest.raises(ConfigError, match='replace_with: .* no token of the text changes'):
            view_replaced(disc, tok, 'the cow eats bread .', 'cow', same)


def test_view_generated_samples_the_masked_words_and_the_discriminator_judges_them(nets):
    disc, gen, tok = nets
    text = 'the teacher reads books in the classroom .'
    view = view_generated(disc, gen, tok, text, ['reads', 'classroom'], k=4, seed=3)
    before = ['[CLS]', *text.split(), '[SEP]']
    assert sorted(view.candidates) == [3, 7]
    assert [t for i, t in enumerate(view.tokens) if i not in (3, 7)] == [t for i, t in enumerate(before) if i not in (3, 7)]
    assert view.originals == [before[i] if i in (3, 7) and view.tokens[i] != before[i] else None for i in range(10)]
    assert np.allclose(view.p_replaced, hf_p(disc, tok, view.tokens), atol=1e-6)
    probs = hf_softmax(gen, tok, before, [3, 7])
    for row, p in zip(probs, (3, 7)):
        assert np.allclose([q for _, q in view.candidates[p]], row.topk(4).values.numpy(), atol=1e-6)
    assert view_generated(disc, gen, tok, text, ['reads', 'classroom'], seed=3).tokens == view.tokens  # seeded
    # a generator sure of one token always samples it
    sure = transformers.ElectraForMaskedLM(gen.config).eval()
    sure.load_state_dict(gen.state_dict())
    with torch.no_grad(): sure.generator_lm_head.bias[tok.convert_tokens_to_ids('ship')] = 1e4
    ship = view_generated(disc, sure, tok, text, ['reads', 'classroom'], seed=3)
    assert ship.tokens[3] == ship.tokens[7] == 'ship' and ship.originals[3] == 'reads' and ship.originals[7] == 'classroom'
    with pytest.raises(ConfigError, match="none of \\['ship'\\] is in the text"):
        view_generated(disc, gen, tok, text, ['ship'])


def test_detection_view_of_a_pretraining_batch():
    "The walkthrough's verdict: real tokens only, the original where the sample replaced it, its marks."
    class Tok:
        def convert_ids_to_tokens(self, ids): return [f't{i}' for i in ids]
    t = lambda *rows: torch.tensor(rows)
    rtd = ReplacedTokenDetection(original=t([1, 2, 3, 0]), masked=t([1, 9, 3, 0]), corrupted=t([1, 7, 3, 0]),
                                 positions=t([1]), chosen=t([True]), sampled=t([7]), is_replaced=t([False, True, False, False]),
                                 p_replaced=t([0.1, 0.9, 0.6, 0.2]), real=t([True, True, True, False]))
    view = detection_view(rtd, Tok(), 0)
    assert view.tokens == ['t1', 't7', 't3'] and view.originals == [None, 't2', None]
    assert view.text() == 't1 *[t7/t2]*0.90 *t3*0.60'
    assert view.frame().to_dict('list') == {'position': [0, 1, 2], 'token': ['t1', 't7', 't3'],
                                            'original': ['t1', 't2', 't3'], 'replaced': [False, True, False],
                                            'p(replaced)': [0.1, 0.9, 0.6], 'flagged': [False, True, True]}


def test_figure_draws_each_token_on_its_red():
    view = TokenView(['[CLS]', 'a', 'b', '[SEP]'], np.array([0.1, 0.8, 0.3, 0.05]), [None, 'x', None, None],
                     {1: [('y', 0.5), ('x', 0.25)]})
    fig = view.figure()
    texts = {t.get_gid(): t for t in fig.axes[0].texts if t.get_gid()}
    assert [texts[f'token-{i}'].get_text() for i in range(4)] == ['[CLS]', 'a (x)', 'b', '[SEP]']
    assert [texts[f'token-{i}'].get_bbox_patch().get_facecolor()[3] for i in range(4)] == pytest.approx([0.1, 0.8, 0.3, 0.05])
    assert any(t.get_text() == '1 a: y 0.50, x 0.25' for t in fig.axes[0].texts)
    assert view._repr_png_().startswith(b'\x89PNG')


@pytest.fixture(scope='module')
def pretraining(tmp_path_factory):
    return tiny_pretraining(tmp_path_factory)


def test_generator_of_a_checkpoint_is_the_exported_generator(pretraining):
    """From the .pth, and from the exported discriminator folder: the very generator the run exported, in eval mode
    from either (R15a-3: from the .pth it came back in training mode, its dropout on)."""
    from pathlib import Path
    exported = transformers.ElectraForMaskedLM.from_pretrained(Path(pretraining['run_dir']) / 'generator').eval()
    tok = transformers.AutoTokenizer.from_pretrained(Path(pretraining['run_dir']) / 'generator')
    ids = torch.tensor([tok('the teacher reads three books .')['input_ids']])
    with torch.no_grad(): ref = exported(input_ids=ids).logits[..., :len(tok)]
    for source in (pretraining['checkpoint'], str(Path(pretraining['run_dir']) / 'discriminator')):
        gen = generator_of(source, tok)
        assert [name for name, m in gen.named_modules() if m.training] == [], source
        with torch.no_grad(): assert torch.allclose(gen(input_ids=ids).logits[..., :len(tok)], ref, atol=1e-5)
    assert generator_of(str(Path(pretraining['run_dir']).parent), tok) is None   # a folder with no generator beside


def test_a_generator_of_another_vocabulary_is_refused_naming_both(tmp_path, tiny):
    """Fresh eyes round 3, R3-1's kind on the Explore notebook's other model setting: `generator` naming a masked LM of
    another vocabulary was fed the discriminator's token ids (its candidates other words, or an IndexError). Refused
    in one line, as pretraining refuses such a frozen generator; one of the same vocabulary is taken."""
    _, tok = tiny
    other = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(
        ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'cow', 'ship'])})
    for folder, t in (('other', other), ('same', tok)):
        cfg = transformers.ElectraConfig(vocab_size=len(t), embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
        transformers.ElectraForMaskedLM(cfg).save_pretrained(tmp_path / folder)
        t.save_pretrained(tmp_path / folder)
    with pytest.raises(ConfigError, match=re.escape(f"generator: {tmp_path / 'other'}'s vocabulary (7 tokens) is not the "
                                                    f"discriminator's tokenizer's ({len(tok)} tokens; ") + r".*its "
                                                    r"candidates would be other words\. Give the generator trained "
                                                    r"with this discriminator, or leave `generator` empty\.$"):
        generator_of('unused', tok, str(tmp_path / 'other'))
    assert generator_of('unused', tok, str(tmp_path / 'same')).config.vocab_size == len(tok)


@pytest.fixture(scope='module')
def trained_at_12(nets):
    "The tiny discriminator of `nets` as pretrain.py exports one pretrained at 12 tokens (64 positions)."
    disc, gen, tok = nets
    cfg = transformers.ElectraConfig(**{**disc.config.to_dict(), 'pretraining_max_length': 12})
    short = transformers.ElectraForPreTraining(cfg).eval()
    short.load_state_dict(disc.state_dict())
    return short, gen, tok


SENTENCE = 'the teacher reads books in the classroom .'  # 8 tokens: [CLS] + 8 + [SEP] = 10 fit in 12


def test_a_text_past_the_pretraining_length_is_cut_there_with_one_warning_naming_the_tokens_past_it(trained_at_12):
    """R9-2: view_text on 110 tokens of a discriminator pretrained at 64 gave verdicts at positions 64-109, never
    trained, without a word (false alarms there, none on the same sentence before). As fine-tuning does for a
    max_length past `pretraining_max_length`, the view says so in one warning; it shows what the discriminator was
    pretrained to judge: the text's first 12 tokens, [SEP] last, as pretraining's examples end."""
    import warnings
    from electra.config.errors import RunWarning
    disc, _, tok = trained_at_12
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert len(view_text(disc, tok, SENTENCE).tokens) == 10                  # within it: nothing said
    text = f'{SENTENCE} {SENTENCE} {SENTENCE}'                                   # 26 tokens
    full = tok.convert_ids_to_tokens(tok(text)['input_ids'])
    assert len(full) == 26
    with pytest.warns(RunWarning) as said:
        view = view_text(disc, tok, text)
    assert [str(w.message) for w in said] == [
        "text: 26 tokens ([CLS] and [SEP] included), 14 of them past the 12 tokens the discriminator was pretrained "
        "at: positions 12 to 25 were never trained; the view shows the first 12 tokens, the text cut there as "
        "pretraining cut its examples."]
    assert view.tokens == full[:11] + ['[SEP]']
    assert np.allclose(view.p_replaced, hf_p(disc, tok, view.tokens), atol=1e-6)  # transformers on the cut text


def test_a_word_to_replace_or_generate_past_the_pretraining_length_is_refused_in_one_line(trained_at_12):
    "R9-2's views of a changed text: a change within the first 12 tokens is shown (one warning), one past them refused."
    from electra.config.errors import RunWarning
    disc, gen, tok = trained_at_12
    text = f'{SENTENCE} a cow eats bread .'                      # 15 tokens: 'cow' at position 10, 'bread' at 12
    with pytest.warns(RunWarning, match=r'^text: 15 tokens .*, 3 of them past the 12 tokens'):
        view = view_replaced(disc, tok, text, 'cow', 'ship', gen)
    assert view.tokens[10] == 'ship' and view.originals[10] == 'cow' and len(view.tokens) == 12
    assert np.allclose(view.p_replaced, hf_p(disc, tok, view.tokens), atol=1e-6)
    with pytest.raises(ConfigError) as e:
        view_replaced(disc, tok, text, 'bread', 'ship', gen)
    assert str(e.value) == ("replace: 'bread' lies past the first 12 tokens the discriminator was pretrained at, "
                            "which the view shows: put it earlier in the text, or shorten the text.")
    with pytest.warns(RunWarning, match=r'^text: 15 tokens'):
        assert list(view_generated(disc, gen, tok, text, ['cow', 'bread']).candidates) == [10]
    with pytest.raises(ConfigError) as e:
        view_generated(disc, gen, tok, text, ['bread'])
    assert str(e.value) == ("generate: ['bread'] lies past the first 12 tokens the discriminator was pretrained at, "
                            "which the view shows: put it earlier in the text, or shorten the text.")


def test_the_views_of_an_electric_discriminator_are_its_run_s_p_replaced_and_heads_that_detect_nothing_are_refused(
        tmp_path):
    """R12a-4 on the views: an Electric run's exported discriminator read as it is gives the energy alone; its view
    (`detector_of`: its cloze model beside) shows the run's p(replaced), `electra.electric_scores`'s; read without it,
    and a BERT or All-Tokens MLM discriminator (whose head is no replaced-token detector), it is refused in one line.
    Before, every view showed the sigmoid of the head as p(replaced)."""
    model, tok, paths = electric_run(tmp_path)
    source = str(paths['discriminator'])
    disc, _ = load_pretrained(source)
    detector = detector_of(source, disc)
    ckpt = tmp_path / 'electric_11081_100%.pth'  # its checkpoint: the discriminator read, the cloze model not beside it
    atomic_save({'format': FORMAT, 'config': config_to_dict(tiny_cfg(objective='electric', mask_prob=MASK_PROB)),
                 'tokenizer': tokenizer_state(tok), 'model': model.state_dict()}, ckpt)
    with pytest.raises(ConfigError, match=r"^model: .*electric_11081_100%\.pth is an Electric run's checkpoint: its "
                                          r"head gives Electric's energy alone.*Give its exported discriminator/ folder"):
        detector_of(str(ckpt), load_pretrained(str(ckpt))[0])
    text = 'w1 w2 w3 w4'
    [scores] = electra.electric_scores(source, [text])
    assert np.allclose(view_text(detector, tok, text).p_replaced, scores.p_replaced.numpy(), atol=1e-6)
    replaced = view_replaced(detector, tok, text, 'w2', 'w9')
    [by_hand] = electra.electric_scores(source, ['w1 w9 w3 w4'])
    assert np.allclose(replaced.p_replaced, by_hand.p_replaced.numpy(), atol=1e-6)
    with pytest.raises(ConfigError, match=r"^model: pretrained with objective 'electric': its head gives Electric's "
                                          r"energy alone.*read it with its cloze model: electra\.tools\.token_view\."
                                          r"detector_of"):
        view_text(disc, tok, text)
    for name, why in (('mlm', 'had no part in its loss'), ('all_tokens_mlm', 'is the copy gate')):
        exported = export_pretrained(build_pretraining_model(tiny_cfg(objective=name, tie_weights='none'),
                                                             MaskingSettings.for_tokenizer(tok)), tok, tmp_path / name)
        other, _ = load_pretrained(str(exported['discriminator']))
        assert detector_of(str(exported['discriminator']), other) is other
        with pytest.raises(ConfigError, match=rf"^model: pretrained with objective '{name}': its .*{why}.*give a "
                                              "discriminator pretrained by replaced-token detection"):
            view_text(other, tok, text)
