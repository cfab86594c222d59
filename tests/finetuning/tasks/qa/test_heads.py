"""electra/finetuning/tasks/qa/heads.py: the QA head, its loss, and decoding, against brute force and hand computations."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from electra.finetuning.tasks.qa.data import QAExample
from electra.finetuning.tasks.qa.features import Window
from electra.finetuning.tasks.qa.heads import (ElectraQA, QAHead, QALoss, answer_mask, best_indexes, decode,
                                               decode_question, window_rows)

pytestmark = pytest.mark.usefixtures('one_thread')

Q = 3                                                # question tokens: [CLS] q q q [SEP] at positions 0-4
CONTEXT = ''.join(chr(0x4E00 + i) for i in range(64))  # one distinct character per token: a span's text names it


def _window(n: int, max_context: np.ndarray) -> Window:
    "A window of n real tokens: [CLS], Q question tokens, [SEP], context tokens 5..n-2 (character i for token i), [SEP]."
    types = (np.arange(n) >= Q + 2).astype(np.int64)
    chars = np.full((n, 2), -1, dtype=np.int64)
    ctx = np.arange(Q + 2, n - 1)
    chars[ctx, 0], chars[ctx, 1] = ctx, ctx + 1
    flags = np.zeros(n, dtype=bool)
    flags[ctx] = max_context[ctx]
    return Window(0, 0, np.zeros(n, dtype=np.int64), types, chars, flags)


def _batch(B: int, L: int, lengths: list[int], seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, L, 8, generator=g)
    mask = (torch.arange(L)[None] < torch.tensor(lengths)[:, None]).long()
    types = ((torch.arange(L)[None] >= Q + 2).long() * mask)
    flags = torch.rand(B, L, generator=g).numpy() > 0.3
    return h, mask, types, [_window(n, flags[b]) for b, n in enumerate(lengths)]


def _valid_spans(win: Window, max_len: int) -> list[tuple[int, int]]:
    "Every (start, end) the decoding may answer, enumerated directly."
    ctx = [i for i in range(len(win)) if win.char_spans[i, 0] >= 0]
    return [(s, e) for s in ctx if win.max_context[s] for e in ctx if s <= e < s + max_len]


def _official_end_log_probs(head: QAHead, h: torch.Tensor, s: int, bias: torch.Tensor) -> torch.Tensor:
    "[L]: the official formula written out: dense(gelu(dense(concat(h[s], h[j])))) + mask, log-softmax over j."
    rep = torch.cat([h[s].expand(h.shape[0], -1), h], -1)  # [L, 2H]
    hid = F.gelu(rep @ head.end_hidden.weight.T + head.end_hidden.bias)
    return (hid @ head.end.weight.T + head.end.bias).squeeze(-1).add(bias).log_softmax(-1)


@pytest.mark.parametrize('beam', [20, 4])
def test_joint_beam_returns_the_best_scoring_valid_span(beam):
    torch.manual_seed(0)
    L, max_len = 14, 4
    head = QAHead(8, joint_prediction=True, beam_size=beam).eval()
    h, mask, types, wins = _batch(3, L, [14, 11, 9])
    with torch.no_grad():
        rows = window_rows(head(h, mask, types))
        for b, win in enumerate(wins):
            bias = 1000.0 * ((mask[b] * types[b]).float() + F.one_hot(torch.tensor(0), L) - 1)
            start_lp = (h[b] @ head.start.weight.T + head.start.bias).squeeze(-1).add(bias).log_softmax(-1)
            starts = set(best_indexes(start_lp.numpy(), beam))  # all positions when beam >= L: brute force
            end_lp = {s: _official_end_log_probs(head, h[b], s, bias) for s in range(L)}
            ends = {s: set(best_indexes(end_lp[s].numpy(), beam)) for s in range(L)}
            scores = {(s, e): float(start_lp[s] + end_lp[s][e]) for s, e in _valid_spans(win, max_len)
                      if s in starts and e in ends[s]}
            s, e = max(scores, key=scores.get)
            pred = decode_question(CONTEXT, [win], [rows[b]], n_best_size=20, max_answer_length=max_len)
            assert pred.text == CONTEXT[s:e + 1]
            best = pred.nbest[0]
            assert best['start_logit'] + best['end_logit'] == pytest.approx(scores[s, e], abs=1e-4)
            assert [d['text'] for d in pred.nbest] == [CONTEXT[a:z + 1] for a, z in
                                                       sorted(scores, key=scores.get, reverse=True)[:20]]


@pytest.mark.parametrize('n_best', [40, 3])
def test_independent_start_end_decoding_matches_brute_force(n_best):
    rng = np.random.default_rng(1)
    for n in (14, 10, 8):
        win = _window(n, rng.random(n) > 0.3)
        row = dict(start_logits=rng.normal(size=16).astype(np.float32), end_logits=rng.normal(size=16).astype(np.float32))
        starts, ends = set(best_indexes(row['start_logits'], n_best)), set(best_indexes(row['end_logits'], n_best))
        scores = {(s, e): row['start_logits'][s] + row['end_logits'][e] for s, e in _valid_spans(win, 3)
                  if s in starts and e in ends}
        pred = decode_question(CONTEXT, [win], [row], n_best_size=n_best, max_answer_length=3, joint_prediction=False)
        if not scores:
            assert pred.text == 'empty'  # official placeholder
            continue
        s, e = max(scores, key=scores.get)
        assert pred.text == CONTEXT[s:e + 1]
        assert sum(d['probability'] for d in pred.nbest) == pytest.approx(1.0)


def test_answer_mask_and_training_end_logits():
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    types = torch.tensor([[0, 0, 0, 1, 1, 0]])
    assert answer_mask(mask, types).tolist() == [[1, 0, 0, 1, 1, 0]]
    torch.manual_seed(0)
    head = QAHead(8, joint_prediction=True)
    h, mask, types, _ = _batch(2, 10, [10, 8])
    out = head(h, mask, types, start_positions=torch.tensor([6, 7]))
    for b, s in enumerate([6, 7]):
        bias = 1000.0 * (answer_mask(mask, types)[b] - 1)
        want = _official_end_log_probs(head, h[b], s, bias)
        assert torch.allclose(out['end_logits'][b].log_softmax(-1), want, atol=1e-5)
    assert out['start_logits'][1, 8:].max() < -900 and out['start_logits'][0, 1:5].max() < -900  # masked


def test_answerable_logit_written_out():
    torch.manual_seed(0)
    head = QAHead(8, joint_prediction=False, answerable_uses_start_logits=True)
    h, mask, types, _ = _batch(2, 9, [9, 7])
    out = head(h, mask, types)
    p = out['start_logits'].softmax(-1)  # [B, L]
    rep = torch.cat([h[:, 0], (p[..., None] * h).sum(1)], -1)
    x = rep @ head.answerable_hidden.weight.T + head.answerable_hidden.bias
    hid = x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))  # exact GELU
    want = (hid @ head.answerable.weight.T + head.answerable.bias).squeeze(-1)
    assert torch.allclose(out['answerable_logit'], want, atol=1e-5)
    plain = QAHead(8, joint_prediction=False, answerable_uses_start_logits=False)
    assert torch.allclose(plain(h, mask, types)['answerable_logit'], (h[:, 0] @ plain.answerable.weight.T).squeeze(-1) +
                          plain.answerable.bias)
    none = QAHead(8, joint_prediction=False, answerable_classifier=False)
    assert none(h, mask, types)['answerable_logit'].tolist() == [0.0, 0.0]


def test_loss_hand_computed():
    out = {'start_logits': torch.tensor([[0.0, 1.0, 2.0, -1000.0]]), 'end_logits': torch.tensor([[1.0, 0.0, 0.0, 0.0]]),
           'answerable_logit': torch.tensor([0.5])}
    lse_s, lse_e = math.log(1 + math.e + math.e ** 2), math.log(math.e + 3)
    span = ((lse_s - 2.0) + (lse_e - 0.0)) / 2  # start 2, end 3
    bce = math.log(1 + math.exp(-0.5))  # target 1 (unanswerable): -log sigmoid(0.5)
    args = (torch.tensor([2]), torch.tensor([3]), torch.tensor([1.0]))
    assert QALoss(True, 0.5)(out, *args).item() == pytest.approx(span + 0.5 * bce, rel=1e-6)  # one window: sum = mean
    assert QALoss(False)(out, *args).item() == pytest.approx(span, rel=1e-6)
    two = {k: torch.cat([v, v]) for k, v in out.items()}
    per = QALoss(True, 0.5).losses(two, torch.tensor([2, 0]), torch.tensor([3, 0]), torch.tensor([1.0, 0.0]))
    assert per[1].item() == pytest.approx(((lse_s - 0.0) + (lse_e - 1.0)) / 2 + 0.5 * math.log(1 + math.exp(0.5)), rel=1e-6)


def test_null_odds_hand_computed():
    n = 9
    wins = [_window(n, np.ones(n, dtype=bool)), _window(n, np.ones(n, dtype=bool))]
    rows = []
    for k, (cls_s, cls_e, ans) in enumerate([(1.0, 0.5, 0.3), (0.2, 0.1, -0.4)]):
        s, e = np.full(n, -3.0, np.float32), np.full(n, -3.0, np.float32)
        s[0], e[0] = cls_s, cls_e
        if k == 0: s[5], e[6] = 2.0, 1.5   # best span: tokens 5-6, score 3.5
        rows.append(dict(start_logits=s, end_logits=e, answerable_logit=np.float32(ans)))
    p = decode_question(CONTEXT, wins, rows, joint_prediction=False, v2=True, answerable_classifier=True)
    assert p.text == CONTEXT[5:7] and p.null_odds == pytest.approx(-0.4)  # the least answerable logit
    p = decode_question(CONTEXT, wins, rows, joint_prediction=False, v2=True, answerable_classifier=False)
    assert p.null_odds == pytest.approx(0.3 - 3.5)  # least [CLS] score (0.2 + 0.1) minus the best span's
    ex = [QAExample('x', 'q', CONTEXT)]
    preds, odds, nbest = decode(ex, wins, rows, joint_prediction=False, v2=True, answerable_classifier=False)
    assert preds == {'x': CONTEXT[5:7]} and odds['x'] == pytest.approx(-3.2) and nbest['x'][0]['start_char'] == 5


def test_head_init_and_electra_qa_layer_groups():
    import transformers

    from electra.finetuning.layerwise import layer_groups
    cfg = transformers.ElectraConfig(vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    model = ElectraQA(transformers.ElectraModel(cfg))
    head = model.classifier
    bound = math.sqrt(6 / (2 * 32 + 512))
    assert head.end_hidden.weight.abs().max() <= bound and head.end_hidden.bias.abs().sum() == 0
    groups = layer_groups(model)
    assert sum(map(len, groups)) == len(list(model.parameters())) and all(n.startswith('classifier.') for n in groups[-1])
    ids = torch.randint(5, 50, (2, 12))
    mask, types = torch.ones_like(ids), (torch.arange(12) >= 4).long().expand(2, -1)
    out = model(ids, mask, types, torch.tensor([5, 0]))
    QALoss()(out, torch.tensor([5, 0]), torch.tensor([7, 0]), torch.tensor([0.0, 1.0])).backward()
    assert model.electra.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    model.eval()
    out = model(ids, mask, types)
    assert out['start_top_index'].shape == (2, 12) and out['end_top_log_probs'].shape == (2, 12, 12)
