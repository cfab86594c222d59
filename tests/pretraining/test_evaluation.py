"""electra/pretraining/evaluation.py: ROC AUC against scikit-learn and the held-out evaluation."""
import random
from types import SimpleNamespace

import datasets
import numpy as np
import pytest
import torch

from electra.objective.masking import MaskingSettings
from electra.pretraining.evaluation import HeldOutEvaluation, eval_batches, roc_auc


def test_roc_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score
    g = torch.Generator().manual_seed(0)
    for n in (10, 1000):
        labels = torch.rand(n, generator=g) < 0.3
        scores = torch.randn(n, generator=g) + labels * 0.8
        scores[::3] = scores[::3].round()  # ties
        assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()), abs=1e-12)
    assert np.isnan(roc_auc(torch.ones(5), torch.ones(5)))


def test_held_out_evaluation_is_fixed_and_leaves_training_state_alone(tmp_path):
    from electra.config.pretrain import PretrainConfig
    from electra.objective.model import build_pretraining_model
    cfg = PretrainConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         embedding_size=32, generator_size=0.5)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, 120, 0)
    model.rng = torch.Generator().manual_seed(5)
    rng = random.Random(0)
    data = datasets.Dataset.from_dict({'input_ids': [[2] + [rng.randrange(5, 120) for _ in range(rng.randint(5, 30))] + [3]
                                                     for _ in range(37)]})
    data = data.map(lambda r: {'token_type_ids': [0] * len(r['input_ids'])})
    batches = eval_batches(data, 16, 32, 0)
    assert [len(b[0]) for b in batches] == [16, 16, 5]
    cb = HeldOutEvaluation(batches, 10, 100, tmp_path / 'eval.csv', MaskingSettings((0, 1, 2, 3, 4), 0, 4, 120), seed=3)
    cb.learn = SimpleNamespace(model=model, train_iter=10)
    state = model.rng.get_state()
    torch_state = torch.get_rng_state()
    first, second = dict(cb.evaluate()), dict(cb.evaluate())
    assert first == second  # the same masks and samples every time
    assert torch.equal(model.rng.get_state(), state) and torch.equal(torch.get_rng_state(), torch_state)
    assert model.training and first['examples'] == 37
    # the AUC over all real tokens, recomputed by hand with sklearn
    from sklearn.metrics import roc_auc_score
    model.eval()
    device_rng = torch.Generator().manual_seed(3)
    saved, model.rng = model.rng, device_rng
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
