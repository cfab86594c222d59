"""electra/finetuning/tasks/tagging/model.py: the tagging head, its loss, predictions per window."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from electra.finetuning.layerwise import optimizer_groups
from electra.finetuning.tasks.tagging.encoding import IGNORE_INDEX, encode_tagging, make_tagging_loader
from electra.finetuning.tasks.tagging.model import ElectraTagger, TaggingLoss, predict_windows
from tests.support.distributed import as_if_in_a_job

pytestmark = pytest.mark.usefixtures('one_thread')


def tiny_body(vocab_size: int = 120):
    import transformers
    torch.manual_seed(0)
    return transformers.ElectraModel(transformers.ElectraConfig(
        vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64))


def batch(seed: int = 0, b: int = 4, t: int = 9, c: int = 5):
    g = torch.Generator().manual_seed(seed)
    out = torch.randn(b, t, c, generator=g)
    target = torch.randint(0, c, (b, t), generator=g)
    target[torch.rand(b, t, generator=g) < 0.4] = IGNORE_INDEX
    target[1] = IGNORE_INDEX  # a window with no labelled word (only context)
    return out, target


def hand_losses(out, target):
    "Per window, the sum of -log softmax at the labelled pieces, and their counts (plain loops)."
    sums, counts = [], []
    for r in range(out.shape[0]):
        s, n = 0.0, 0
        for j in range(out.shape[1]):
            if target[r, j] != IGNORE_INDEX:
                s -= float(torch.log_softmax(out[r, j].double(), -1)[target[r, j]]); n += 1
        sums.append(s); counts.append(n)
    return np.array(sums), np.array(counts)


def test_head_shapes_initialisation_and_layer_groups():
    body = tiny_body()
    model = ElectraTagger(body, 7)
    assert model.dropout.p == 0.0 and model.n_outputs == 7  # the official tagging head has no dropout
    assert torch.equal(model.classifier.bias, torch.zeros(7))
    bound = (6 / (32 + 7)) ** 0.5  # xavier-uniform
    assert model.classifier.weight.abs().max() <= bound and model.classifier.weight.abs().max() > 0.8 * bound
    ids = torch.randint(5, 120, (3, 11))
    assert model(ids, torch.ones_like(ids), torch.ones_like(ids)).shape == (3, 11, 7)
    groups, lrs = optimizer_groups(model, 1e-3, 0.8, 'official')  # the head gets the head's rate
    head = [lr for g, lr in zip(groups, lrs) if g['names'][0].startswith('classifier.')]
    assert head and all(lr == pytest.approx(1e-3) for lr in head)


@pytest.mark.parametrize('reduction', TaggingLoss.reductions)
def test_loss_equals_hand_computation(reduction, monkeypatch):
    out, target = batch()
    sums, counts = hand_losses(out, target)
    expect = {'sum': sums.sum(), 'mean': sums.mean(), 'token': sums.sum() / counts.sum()}[reduction]
    assert float(TaggingLoss(reduction)(out, target)) == pytest.approx(expect, rel=1e-5)
    w = torch.tensor([1.0, 1.0, 0.0, 1.0])  # a stand-in window of weight 0 adds nothing
    keep = w.numpy() > 0
    expect_w = {'sum': sums[keep].sum(), 'mean': sums[keep].mean(),
                'token': sums[keep].sum() / counts[keep].sum()}[reduction]
    loss = TaggingLoss(reduction)
    assert float(loss(out, target, w)) == pytest.approx(expect_w, rel=1e-5)
    assert float(loss.local_sum) == pytest.approx(sums[keep].sum(), rel=1e-5)
    as_if_in_a_job(monkeypatch, 2, others=float(loss.local_count))  # as if the other process had as many
    # under torchrun: 'sum' is twice this process's sum (the step averages the two), the others divide by the
    # global count over the 2 processes: this process's count
    expect_ddp = sums[keep].sum() * 2 if reduction == 'sum' else sums[keep].sum() / float(loss.local_count)
    assert float(loss(out, target, w)) == pytest.approx(expect_ddp, rel=1e-5)


def test_loss_gradient_reaches_only_labelled_pieces():
    out, target = batch(1)
    out.requires_grad_(True)
    TaggingLoss('token')(out, target).backward()
    ignored = target == IGNORE_INDEX
    assert (out.grad[ignored] == 0).all() and (out.grad[~ignored].abs().sum(-1) > 0).all()


def test_predict_windows_equals_each_window_alone(tokenizer):
    labels = ['B-PER', 'I-PER', 'O']
    words = [['anna', 'berlin', 'x' * (k % 7 + 1), 'os'] * (1 + k % 5) for k in range(13)]
    enc = encode_tagging(words, None, tokenizer, labels, max_length=24, stride=6)
    model = ElectraTagger(tiny_body(len(tokenizer)), len(labels))
    got = predict_windows(model, make_tagging_loader(enc, 4, False, tokenizer.pad_token_id))
    assert len(got) == len(enc) and model.training
    model.eval()
    for i in range(len(enc)):
        ids = torch.from_numpy(enc.ids[enc.window(i)].astype(np.int64))[None]
        alone = model(ids, torch.ones_like(ids), torch.ones_like(ids))[0].detach().numpy()
        assert got[i].shape == (len(ids[0]), 3) and np.allclose(got[i], alone, atol=1e-5)
