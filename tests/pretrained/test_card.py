"""electra/pretrained/card.py: the model card (README.md) of each exported network, parsed back: valid YAML metadata in
transformers' convention, the held-out metrics equal to the run's eval_metrics.csv, the settings equal to its
config.yaml, loadable with the Auto classes it names; an export without run files still gets a card."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from transformers import AutoModelForMaskedLM, AutoModelForPreTraining, AutoTokenizer

import electra
from electra.config.objectives import OBJECTIVES
from electra.data.tokenizer import load_tokenizer
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model
from electra.pretrained.export import export_holds, export_pretrained, model_fingerprint
from tests.support.notebook_runs import tiny_pretraining
from tests.support.tiny import V, tiny_cfg

pytestmark = pytest.mark.usefixtures('one_thread')

# the model-index metric names of each network and the eval_metrics.csv column each must equal
HELD_OUT = {'discriminator': {'AUC of replaced-token detection': 'disc_auc', 'AUC on random replacements': 'uniform_auc',
                              'accuracy of replaced-token detection': 'disc_accuracy', 'discriminator loss': 'disc_loss'},
            'generator': {'accuracy at the masked positions': 'gen_accuracy', 'generator MLM loss': 'gen_loss'}}


def metadata(text: str) -> dict:
    "The card's metadata block, parsed with a plain YAML parser (not the library that wrote it)."
    match = re.match(r'---\n(.*?)\n---\n', text, re.S)
    assert match, text[:200]
    return yaml.safe_load(match[1])


def last_csv_row(path: Path) -> dict[str, str]:
    with open(path, newline='') as f: return list(csv.DictReader(f))[-1]


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory) -> Path:
    "The demo preset cut to 20 steps, run by pretrain.py (shared with the notebook and explore tests)."
    return Path(tiny_pretraining(tmp_path_factory)['run_dir'])


@pytest.mark.parametrize('role', ['discriminator', 'generator'])
def test_the_card_of_a_demo_export_holds_the_run_s_numbers_and_settings(run_dir, role):
    folder = run_dir / role
    text = (folder / 'README.md').read_text(encoding='utf-8')
    meta = metadata(text)
    assert meta['library_name'] == 'transformers' and meta['language'] == 'en' and meta['license'] == 'apache-2.0'
    assert meta['electra_version'] == electra.__version__ and f'the electra library {electra.__version__}' in text
    assert json.loads((folder / 'config.json').read_text())['electra_version'] == electra.__version__
    [ckpt] = run_dir.parent.glob(f'{run_dir.name}_100%.pth')  # the run's checkpoint says which library wrote it too
    assert torch.load(ckpt, map_location='cpu', weights_only=True)['electra_version'] == electra.__version__
    assert meta['pipeline_tag'] == {'discriminator': 'feature-extraction', 'generator': 'fill-mask'}[role]
    assert {'electra', role, 'objective-electra'} <= set(meta['tags'])
    [model] = meta['model-index']
    [result] = model['results']
    assert model['name'] == f'tiny_11081 {role}' and result['dataset']['split'] == 'held-out'
    held_out = last_csv_row(run_dir / 'eval_metrics.csv')
    assert held_out['step'] == '20'
    assert {m['name']: m['value'] for m in result['metrics']} == {
        name: float(held_out[column]) for name, column in HELD_OUT[role].items()}
    # the same through huggingface_hub's own reader of cards
    assert {r.metric_name: r.metric_value for r in ModelCard.load(folder / 'README.md').data.eval_results} == {
        name: float(held_out[column]) for name, column in HELD_OUT[role].items()}
    trained = last_csv_row(run_dir / 'metrics.csv')
    assert f"| {' | '.join(trained[c] for c in ('step', 'loss', 'gen_loss', 'disc_loss'))} |" in text
    config = re.search(r'```yaml\n(.*?)\n```', text, re.S)[1]
    assert yaml.safe_load(config) == yaml.safe_load((run_dir / 'config.yaml').read_text())
    assert '20 steps of 8 examples of up to 64 tokens' in text and '@inproceedings{clark2020electra' in text
    auto = {'discriminator': AutoModelForPreTraining, 'generator': AutoModelForMaskedLM}[role]
    assert f"path = 'tiny_11081/{role}'  # this folder, wherever it lies\n" \
           f"model = {auto.__name__}.from_pretrained(path)" in text
    assert str(run_dir.parent) not in text.replace(config, '')  # nothing of where the run lies but its config
    assert type(auto.from_pretrained(folder)).__name__ == {'discriminator': 'ElectraForPreTraining',
                                                           'generator': 'ElectraForMaskedLM'}[role]
    assert len(AutoTokenizer.from_pretrained(folder)) == auto.from_pretrained(folder).config.vocab_size


def test_an_export_without_run_files_gets_a_card_and_editing_a_card_changes_no_fingerprint(tmp_path):
    "export_pretrained from code, into a folder that has no run: the card says what it can; the card is not the model."
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    torch.manual_seed(0)
    model = build_pretraining_model(tiny_cfg(objective='mlm'), MaskingSettings.for_tokenizer(tok))
    paths = export_pretrained(model, tok, tmp_path / 'run')
    assert sorted(paths) == ['discriminator']  # BERT: no generator, no generator card
    card = paths['discriminator'] / 'README.md'
    meta = metadata(card.read_text())
    assert 'model-index' not in meta and meta['library_name'] == 'transformers'
    assert "The run's settings were not found beside this export (no `config.yaml`)." in card.read_text()
    before = model_fingerprint(paths['discriminator'])
    card.write_text(card.read_text().replace('license: apache-2.0', 'license: mit'))
    assert model_fingerprint(paths['discriminator']) == before and export_holds(model, tok, tmp_path / 'run')
    card.unlink()  # an export cut short before its card is not whole: a finished run's resume writes it again
    assert not export_holds(model, tok, tmp_path / 'run')


@pytest.mark.parametrize('init_from', ['', 'runs/src_11081'])
@pytest.mark.parametrize('name', [n for n, o in OBJECTIVES.items() if o.generator not in ('frozen', 'two_tower')])
def test_the_discriminator_card_says_what_its_exported_head_is_for_each_objective(tmp_path, name, init_from):
    """The card says what the exported replaced-token-detection head (`discriminator_predictions`) is, as the model
    trains it: the objectives whose loss leaves it without gradient (BERT, Replace MLM) have it untrained, or with
    --init_from the source's, unchanged; their MLM head lives in the .pth alone. Before: every card said the
    discriminator learnt replaced-token detection."""
    tok = token_ids_tokenizer(tmp_path)
    cfg = tiny_cfg(objective=name, tie_weights=OBJECTIVES[name].tie_weights[0])
    model = build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok))
    trained = model.discriminator.discriminator_predictions.dense.weight.requires_grad  # the model's own answer
    run = tmp_path / f'{name}_11081'
    run.mkdir()
    (run / 'config.yaml').write_text(yaml.safe_dump({'objective': name, 'init_from': init_from, 'steps': 4}))
    (run / 'eval_metrics.csv').write_text('step,disc_loss,disc_accuracy,disc_auc,examples\n4,6.5,0.25,nan,32\n')
    exported = export_pretrained(model, tok, run)
    text = exported['discriminator'].joinpath('README.md').read_text()
    about = text.split('## Training')[0]
    assert ('(replaced-token detection)' in about) == (trained and not OBJECTIVES[name].mlm)
    assert ('untrained' in about) == (not trained and not init_from)
    assert (f'carried over unchanged from {init_from}' in about) == (not trained and bool(init_from))
    assert ('copy gate' in about) == (OBJECTIVES[name].head == 'copy')
    assert ('.pth' in about) == OBJECTIVES[name].mlm  # its MLM head, which the export leaves out
    # the held-out numbers are named for what the discriminator's loss head did: token prediction or detection
    [result] = metadata(text)['model-index'][0]['results']
    accuracy, loss = (("accuracy of the discriminator's token predictions", 'discriminator token-prediction loss')
                      if OBJECTIVES[name].mlm else ('accuracy of replaced-token detection', 'discriminator loss'))
    assert {m['name']: m['value'] for m in result['metrics']} == {accuracy: 0.25, loss: 6.5}
    assert result['task']['type'] == ('fill-mask' if OBJECTIVES[name].mlm else 'token-classification')
    if 'generator' in exported:
        assert ('learnt to detect' in exported['generator'].joinpath('README.md').read_text()) == (not OBJECTIVES[name].mlm)


@pytest.mark.parametrize('settings, said', [
    ({}, 'a small masked language model trained with the discriminator'),
    ({'generator_size': 1.0}, "a masked language model of the discriminator's size trained with the discriminator"),
    ({'two_stage': 0.5, 'generator_size': 1.0}, "a masked language model of the discriminator's size trained alone for "
                                                "the first 50% of the steps, then frozen while the discriminator trained "
                                                "on its samples")])
def test_the_generator_card_says_its_size_and_how_it_was_trained(tmp_path, settings, said):
    """R23a-4: every generator card said "a small masked language model trained with the discriminator", a
    two-stage run's (trained alone, then frozen) and one of the discriminator's size too. Said from the run's config."""
    tok = token_ids_tokenizer(tmp_path)
    model = build_pretraining_model(tiny_cfg(), MaskingSettings.for_tokenizer(tok))
    run = tmp_path / 'run_11081'
    run.mkdir()
    (run / 'config.yaml').write_text(yaml.safe_dump({'objective': 'electra', 'steps': 4, **settings}))
    text = export_pretrained(model, tok, run)['generator'].joinpath('README.md').read_text()
    assert f"(Clark et al. 2020), {said}, whose samples were the replacements the discriminator learnt to detect." in text


def token_ids_tokenizer(tmp_path: Path):
    "A tokenizer of the tiny vocabulary (V tokens, the specials first)."
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    return load_tokenizer(str(vocab))


def _built(tok, name: str, **kw):
    "A tiny model of objective `name` (a frozen generator, an ElectraForMaskedLM of the vocabulary, where it needs one)."
    from transformers import ElectraConfig, ElectraForMaskedLM
    frozen_generator = {'generator': 'my/mlm'} if OBJECTIVES[name].generator == 'frozen' else {}  # (its name alone)
    cfg = tiny_cfg(objective=name, tie_weights=OBJECTIVES[name].tie_weights[0], dropout=0.0, **frozen_generator, **kw)
    frozen = ElectraForMaskedLM(ElectraConfig(vocab_size=V, embedding_size=16, hidden_size=16, num_hidden_layers=1,
                                              num_attention_heads=1, intermediate_size=32)) \
        if OBJECTIVES[name].generator == 'frozen' else None
    return build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok), frozen).eval()


@pytest.mark.parametrize('name, kw', [*((n, {}) for n in OBJECTIVES), ('electra', dict(uniform_generator=True))])
def test_the_card_says_whether_the_exported_head_gives_the_run_s_score(tmp_path, name, kw):
    """R12a-4 on every objective: the exported `ElectraForPreTraining`'s logits, on the very input the run's
    discriminator read (a text with two positions replaced by samples), are the run's own replaced-token-detection
    logits exactly where the card says the head is the run's replaced-token detection; otherwise the card says what
    they are instead: Electric's energy (its score needs the cloze model), the copy gate's D (the opposite sense), or no
    score of the run (the MLM heads). Before, the card called every RTD head the replaced-token detector."""
    from electra.objective.masking import write_at_positions
    from transformers import ElectraForPreTraining
    tok = token_ids_tokenizer(tmp_path)
    torch.manual_seed(0)
    model = _built(tok, name, **kw)
    run = tmp_path / f'{name}_11081'
    run.mkdir()
    cfg = {'objective': name, 'steps': 4, 'mask_prob': 0.15, 'generator': 'my/mlm' * (name == 'fast_electra'),
           'temperature_start': 2.0, 'temperature': 1.0, **kw}
    (run / 'config.yaml').write_text(yaml.safe_dump(cfg))
    paths = export_pretrained(model, tok, run)
    # the exported discriminator says which objective trained it, so that a reader of its head can tell what it gives
    assert json.loads((paths['discriminator'] / 'config.json').read_text())['electra_objective'] == name
    if 'generator' in paths: assert 'electra_objective' not in json.loads((paths['generator'] / 'config.json').read_text())
    enc = tok('w1 w2 w3 w4 w5', return_tensors='pt')
    ids, positions = enc['input_ids'], torch.tensor([[2, 4]])
    labels = ids.gather(1, positions)
    masked = write_at_positions(ids, positions, torch.full_like(labels, tok.mask_token_id), labels >= 0)
    with torch.no_grad():
        pred = model(masked, enc['token_type_ids'], positions, labels)
        read = masked if pred.sampled is None else write_at_positions(ids, positions, pred.sampled, labels >= 0)
        exported = ElectraForPreTraining.from_pretrained(paths['discriminator']).eval()(read, token_type_ids=enc[
            'token_type_ids']).logits
    run_score = pred.disc_logits if pred.disc_logits is not None else pred.copy_logits
    gives = run_score is not None and torch.allclose(exported, run_score, atol=1e-5)
    card = (paths['discriminator'] / 'README.md').read_text()
    head = card.split('## What the exported head gives\n\n')[1].split('\n\n## ')[0]
    assert ("is the run's replaced-token detection: its sigmoid is the probability that a token was replaced by" in
            head) == (gives and pred.disc_logits is not None)
    row = OBJECTIVES[name]
    assert ("is Electric's energy E(x)_t" in head and '`cloze/`' in head) == row.noise_log_prob == (
        pred.disc_logits is not None and not gives)
    assert ("is the copy gate's: its sigmoid D is the weight the run gave to keeping the input token" in head) == (
        gives and pred.copy_logits is not None)
    assert ('is no score of the run: that head had no part in its loss' in head) == (run_score is None)
    assert ('given that it was masked' in head) == (row.positions == 'chosen' and row.head == 'rtd')
    source = ('tokens drawn uniformly from the vocabulary' if kw else 'the frozen generator `my/mlm`, an existing '
              'masked LM that the run did not train and does not export, sampling at a temperature annealed from 2.0 '
              "to 1.0" if row.generator == 'frozen' else "the run's generator (exported beside this folder, `generator/`)")
    assert (source in head) == (gives and pred.disc_logits is not None)
    # the variants of their own papers cite them beside ELECTRA's, on every card of the run; ELECTRA's own do not
    papers = {'electric': '"Pre-Training Transformers as Energy-Based Cloze Models", EMNLP 2020',
              'fast_electra': '"Fast-ELECTRA for Efficient Pre-training", ICLR 2024'}
    for folder in paths.values():
        citation = (folder / 'README.md').read_text().split('## Citation\n\n')[1]
        assert '@inproceedings{clark2020electra,' in citation
        assert (papers[name] in citation) if name in papers else ('The objective' not in citation)


def test_a_card_of_a_run_continued_from_weights_says_how_far_its_position_rows_were_trained():
    "Past the run's max_length: the length of the weights it continued, or that they do not say; nothing otherwise."
    from electra.pretrained.card import _init_length
    base = {'init_from': 'src', 'max_length': 16}
    assert _init_length({**base, 'init_max_length': 32}) == (" Those weights were pretrained at 32 tokens, so its "
                                                             "position rows are trained up to 32 (`pretraining_max_length` in its config).")
    assert _init_length({**base, 'init_max_length': 0}) == (" Those weights do not record the length they were "
                                                            "pretrained at, so neither does its config: its position "
                                                            "rows past 16 may have been trained by them.")
    assert _init_length({**base, 'init_max_length': 8}) == _init_length({'max_length': 16}) == ''
