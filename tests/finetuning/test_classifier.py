"""electra/finetuning/loading.py (the pretrained model, a fine-tuned run read back), classifier.py (the head),
layerwise.py (layer-wise learning rates)."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from electra.config.errors import ConfigError
from electra.finetuning import classifier, layerwise, loading


@pytest.mark.usefixtures('one_thread')
def test_load_pretrained_bad_sources(tmp_path, tiny_dir, tiny, monkeypatch):
    import transformers
    with pytest.raises(ConfigError, match=r'run `python pretrain.py` first'):
        loading.load_pretrained(str(tmp_path / 'demo_11081_100%.pth'))
    model, tok = tiny
    gen = transformers.ElectraForMaskedLM(model.config)
    gen.save_pretrained(tmp_path / 'generator')  # a generator directory loads as a discriminator with a new head ...
    tok.save_pretrained(tmp_path / 'generator')
    with monkeypatch.context() as m:  # from its config.json, before transformers' report of a head made afresh
        m.setattr(transformers.ElectraForPreTraining, 'from_pretrained', lambda *a, **k: pytest.fail('weights loaded'))
        with pytest.raises(ConfigError, match='holds a ElectraForMaskedLM .*, not an ELECTRA discriminator'):
            loading.load_pretrained(str(tmp_path / 'generator'))  # ... but is still refused
    small = transformers.ElectraForPreTraining(transformers.ElectraConfig(vocab_size=20, hidden_size=32, num_hidden_layers=1,
                                                                          num_attention_heads=2, intermediate_size=32))
    small.save_pretrained(tmp_path / 'small')
    tok.save_pretrained(tmp_path / 'small')
    with pytest.raises(ConfigError, match=f'the tokenizer has {len(tok)} tokens but the model.s vocabulary only 20'):
        loading.load_pretrained(str(tmp_path / 'small'))


@pytest.mark.usefixtures('one_thread')
def test_head_and_layer_groups(tiny):
    model, _ = tiny
    clf = classifier.ElectraClassifier(model.electra, 3, dropout=0.1).eval()
    # xavier-uniform (TF1's default): U(-a, a), a = sqrt(6 / (fan_in + fan_out)); torch's Linear default would be
    # U(-1/sqrt(32), 1/sqrt(32)), whose bound 0.18 is under half of a = 0.41. Of 96 draws, the largest exceeds 0.9 a
    # with probability 1 - 0.9^96, and their std is a / sqrt(3) within 20% (about 4 standard errors).
    bound, w = np.sqrt(6 / (32 + 3)), clf.classifier.weight.detach()
    assert 0.9 * bound < w.abs().max() <= bound
    assert float(w.std()) == pytest.approx(bound / np.sqrt(3), rel=0.2)
    assert torch.all(clf.classifier.bias == 0)
    ids = torch.tensor([[2, 20, 21, 3, 0]]); mask = torch.tensor([[1, 1, 1, 1, 0]]); types = torch.zeros_like(ids)
    h = model.electra(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state[:, 0]
    assert torch.allclose(clf(ids, mask, types), clf.classifier(h), atol=1e-6)  # [CLS] -> linear (no pooler, no tanh)
    groups, lrs = layerwise.optimizer_groups(clf, 1e-3, 0.5, 'official')
    names = [n for g in groups for n in g['names']]
    assert sorted(names) == sorted(n for n, _ in clf.named_parameters())  # every parameter exactly once
    by_name = {n: (lr, g['no_decay']) for g, lr in zip(groups, lrs) for n in g['names']}
    # 2 layers, official: head 1e-3, layer 1 1e-3 * .5^2, layer 0 * .5^3, embeddings (and projection) * .5^4
    assert by_name['classifier.weight'] == (1e-3, False) and by_name['classifier.bias'] == (1e-3, True)
    assert by_name['electra.encoder.layer.1.output.dense.weight'][0] == pytest.approx(2.5e-4)
    assert by_name['electra.encoder.layer.0.attention.self.query.weight'][0] == pytest.approx(1.25e-4)
    assert by_name['electra.embeddings_project.weight'][0] == pytest.approx(6.25e-5)
    assert by_name['electra.embeddings.word_embeddings.weight'] == (pytest.approx(6.25e-5), False)
    assert by_name['electra.embeddings.LayerNorm.weight'][1] and by_name['electra.encoder.layer.0.output.LayerNorm.bias'][1]


def official_layer_lrs(learning_rate, layer_decay, n_layers):
    "A line-by-line port of `_get_layer_lrs` (google-research/electra, model/optimization.py)."
    key_to_depths = collections.OrderedDict({'/embeddings/': 0, '/embeddings_project/': 0, 'task_specific/': n_layers + 2})
    for layer in range(n_layers):
        key_to_depths['encoder/layer_' + str(layer) + '/'] = layer + 1
    return {key: learning_rate * (layer_decay ** (n_layers + 2 - depth)) for key, depth in key_to_depths.items()}


@pytest.mark.parametrize('n_layers, lr, d', [(12, 3e-4, 0.8), (12, 1e-4, 0.8), (24, 5e-5, 0.9)])
def test_layer_lrs_official_mode_matches_the_official_code(n_layers, lr, d):
    from electra.finetuning.layerwise import layer_lrs
    got = layer_lrs(lr, d, n_layers, 'official')
    ref = official_layer_lrs(lr, d, n_layers)
    assert len(got) == n_layers + 2
    assert got[0] == pytest.approx(ref['/embeddings/']) == pytest.approx(ref['/embeddings_project/'])
    for i in range(n_layers): assert got[1 + i] == pytest.approx(ref[f'encoder/layer_{i}/'])
    assert got[-1] == pytest.approx(ref['task_specific/']) == pytest.approx(lr)
    # by hand: the top layer gets d^2 (the official `_get_layer_lrs`), layer 0 gets d^(L + 1), the embeddings d^(L + 2)
    assert got[n_layers] == pytest.approx(lr * d * d)
    assert got[1] == pytest.approx(lr * d ** (n_layers + 1)) and got[0] == pytest.approx(lr * d ** (n_layers + 2))


def test_layer_lrs_by_hand_for_12_and_24_layers():
    from electra.finetuning.layerwise import layer_lrs
    off12, int12 = layer_lrs(3e-4, 0.8, 12, 'official'), layer_lrs(3e-4, 0.8, 12, 'intended')
    assert off12[-1] == pytest.approx(3e-4) and int12[-1] == pytest.approx(3e-4)
    assert off12[12] == pytest.approx(1.92e-4) and int12[12] == pytest.approx(2.4e-4)   # top layer: 3e-4 * .8^2 / * .8
    assert off12[11] == pytest.approx(1.536e-4) and int12[11] == pytest.approx(1.92e-4)
    assert off12[1] == pytest.approx(3e-4 * 0.8 ** 13) and int12[1] == pytest.approx(3e-4 * 0.8 ** 12)
    assert off12[0] == pytest.approx(1.3194139533312e-05) and int12[0] == pytest.approx(1.649267441664e-05)  # .8^14, .8^13
    off24, int24 = layer_lrs(5e-5, 0.9, 24, 'official'), layer_lrs(5e-5, 0.9, 24, 'intended')
    assert off24[24] == pytest.approx(4.05e-5) and int24[24] == pytest.approx(4.5e-5)
    assert off24[1] == pytest.approx(5e-5 * 0.9 ** 25) and int24[1] == pytest.approx(5e-5 * 0.9 ** 24)
    assert off24[0] == pytest.approx(5e-5 * 0.9 ** 26) and int24[0] == pytest.approx(5e-5 * 0.9 ** 25)
    assert np.allclose(off24[:-1] / int24[:-1], 0.9)  # official = intended * d below the head
    with pytest.raises(ValueError): layer_lrs(1e-4, 0.8, 12, 'paper')


@pytest.mark.parametrize('data', [b'hello\n', None], ids=['text', 'truncated'])
def test_a_damaged_finetuned_run_is_named_with_the_fix(tmp_path, tiny, data):
    "Before: a KeyError or an OSError from torch.load when the test predictions read the selected run."
    path = tmp_path / 'RTE_0.pth'
    torch.save({'format': 'electra-finetuned', 'model': classifier.ElectraClassifier(tiny[0].electra, 2).state_dict()}, path)
    path.write_bytes(data if data is not None else path.read_bytes()[:5000])
    with pytest.raises(ConfigError, match=r'RTE_0.pth: cannot read this fine-tuned run \(.*\)\. Delete it and its row in '
                                          r'results.csv, and run the same command again to redo the run'):
        loading.read_finetuned(path)


def test_a_pretraining_checkpoint_read_as_a_fine_tuned_run_is_named_for_what_it_is(tmp_path):
    """R9-1: the Explore notebook's `finetuned` set to pretrain.py's .pth (both .pth files; the notebook has `model` for
    it) said "not a fine-tuned checkpoint of finetune.py; delete it and its results row": followed, the pretraining
    run's checkpoint is lost. A checkpoint's kind is told by its content (`checkpoint_kind`); the delete advice is
    kept for a fine-tuned run that cannot be read (test above)."""
    path = tmp_path / 'demo_11081_100%.pth'
    torch.save({'format': 'electra-pretrain', 'step': 40, 'model': {}}, path)
    with pytest.raises(ConfigError) as e:
        loading.read_finetuned(path)
    assert str(e.value) == (f"{path}: a pretraining checkpoint of pretrain.py (step 40), not a fine-tuned run of "
                            "finetune.py: it is the model to fine-tune or explore (finetune.py's --model, the Explore "
                            "notebook's `model`); a fine-tuned run is finetune.py's <output_dir>/<group>/<task>_<i>.pth.")
    torch.save({'weights': torch.zeros(2)}, path)
    with pytest.raises(ConfigError) as e:
        loading.read_finetuned(path)
    assert str(e.value) == (f"{path}: not a fine-tuned run of finetune.py (a torch file of another kind): give a run "
                            "of finetune.py, <output_dir>/<group>/<task>_<i>.pth.")
