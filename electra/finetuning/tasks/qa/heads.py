"""The official ELECTRA QA head and loss (google-research/electra, finetune/qa/qa_tasks.py,
`QATask.get_prediction_module`) and the decoding of its outputs into answers (finetune/qa/qa_metrics.py,
`SpanBasedQAScorer.write_predictions`), with the official options and defaults (configure_finetuning.py):

- `joint_prediction` (default on): the end is predicted given the start. Training conditions the end on the gold
  start; inference keeps the `beam_size` most likely starts and, for each, the `beam_size` most likely ends.
  Without it, start and end are two independent linear outputs.
- `answerable_classifier` (default on; SQuAD 2.0): a logit that the question is unanswerable, from the [CLS] state
  and, with `answerable_uses_start_logits`, the start-probability-weighted average of the states; its sigmoid
  cross-entropy joins the loss with weight `answerable_weight` (0.5).

Start and end may only point at context tokens, the final [SEP] or [CLS] (position 0): other logits get -1000.
The head has no dropout (the official one has none); its dense layers start as TF1's default (xavier-uniform, zero
bias), the hidden ones are 512 wide with exact (erf) GELU.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra.finetuning.classifier import tf_dense
from electra.finetuning.loading import HEAD_MODELS
from electra.finetuning.loss import FinetuningLoss
from electra.finetuning.tasks.qa.data import QAExample
from electra.finetuning.tasks.qa.features import Window

__all__ = ['QAHead', 'ElectraQA', 'QALoss', 'answer_mask', 'best_indexes', 'window_rows', 'QAPrediction',
           'decode_question', 'decode']


def answer_mask(attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
    "float [B, L]: 1 where an answer may start or end (real tokens of token type 1, and [CLS] at 0), else 0."
    m = (attention_mask * token_type_ids).float()
    m[:, 0] += 1.0
    return m


class QAHead(nn.Module):
    """The QA head on an ELECTRA body's sequence output `h` [B, L, H]. `forward` returns a dict of float32 tensors:
    `start_logits`, `end_logits` [B, L] and `answerable_logit` [B] (zeros without the classifier). With
    `joint_prediction`, the end logits are those given `start_positions` [B] when they are passed (training);
    without them (inference) the beam: `start_top_log_probs`, `start_top_index` [B, K], `end_top_log_probs`,
    `end_top_index` [B, K, K] (K = min(beam_size, L)), and `end_logits` zeros, as the official eval outputs."""

    def __init__(self, hidden_size: int, joint_prediction: bool = True, beam_size: int = 20,
                 answerable_classifier: bool = True, answerable_uses_start_logits: bool = True, inner: int = 512):
        super().__init__()
        self.joint, self.beam_size, self.answerable_classifier = joint_prediction, beam_size, answerable_classifier
        self.uses_start = answerable_uses_start_logits
        self.start = tf_dense(hidden_size, 1)
        if joint_prediction:
            # official: dense(512, gelu) over concat(start state, end state), then dense(1)
            self.end_hidden, self.end = tf_dense(2 * hidden_size, inner), tf_dense(inner, 1)
        else: self.end = tf_dense(hidden_size, 1)
        if answerable_classifier:
            if answerable_uses_start_logits: self.answerable_hidden = tf_dense(2 * hidden_size, inner)
            self.answerable = tf_dense(inner if answerable_uses_start_logits else hidden_size, 1)

    def end_logits_given(self, h: torch.Tensor, start_states: torch.Tensor) -> torch.Tensor:
        """float32 [B, K, L]: unmasked end logits of every position given each of K start states [B, K, H]. The
        official code tiles concat(start, end) to [B, K, L, 2H]; splitting the first dense layer's weight into its
        start and end halves gives the same sums at [B, K, L, 512] without building that tensor."""
        w_s, w_e = self.end_hidden.weight.split(h.shape[-1], dim=1)  # [512, H] each
        from_start = F.linear(start_states, w_s, self.end_hidden.bias)  # [B, K, 512]
        from_end = F.linear(h, w_e)  # [B, L, 512]
        hid = F.gelu(from_start[:, :, None] + from_end[:, None])  # [B, K, L, 512]
        return self.end(hid).squeeze(-1).float()

    def _answerable(self, h: torch.Tensor, start_logits: torch.Tensor) -> torch.Tensor:
        "float32 [B]: the unanswerable logit from [CLS] (and the start-probability-weighted states)."
        rep = h[:, 0]  # [B, H]
        if self.uses_start:
            p = start_logits.softmax(-1).to(h.dtype)  # [B, L]
            rep = F.gelu(self.answerable_hidden(torch.cat([rep, torch.einsum('bl,blh->bh', p, h)], -1)))
        return self.answerable(rep).squeeze(-1).float()

    def _beam(self, h: torch.Tensor, start_logits: torch.Tensor, bias: torch.Tensor) -> dict[str, torch.Tensor]:
        "The inference beam: top-K starts by log-probability, then top-K ends given each of them."
        k = min(self.beam_size, h.shape[1])
        top_lp, top_i = start_logits.log_softmax(-1).topk(k, dim=-1)  # [B, K]
        states = h.gather(1, top_i[..., None].expand(-1, -1, h.shape[-1]))  # [B, K, H]
        end_lp = (self.end_logits_given(h, states) + bias[:, None]).log_softmax(-1)  # [B, K, L]
        end_top_lp, end_top_i = end_lp.topk(k, dim=-1)  # [B, K, K]
        return dict(start_top_log_probs=top_lp, start_top_index=top_i, end_top_log_probs=end_top_lp,
                    end_top_index=end_top_i, end_logits=torch.zeros_like(start_logits))

    def forward(self, h: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                start_positions: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        bias = 1000.0 * (answer_mask(attention_mask, token_type_ids) - 1.0)  # [B, L]: 0 or -1000
        start_logits = self.start(h).squeeze(-1).float() + bias  # [B, L]
        out = dict(start_logits=start_logits)
        if not self.joint: out['end_logits'] = self.end(h).squeeze(-1).float() + bias
        elif start_positions is not None:
            states = h[torch.arange(h.shape[0], device=h.device), start_positions][:, None]  # [B, 1, H]
            out['end_logits'] = self.end_logits_given(h, states)[:, 0] + bias
        else: out.update(self._beam(h, start_logits, bias))
        out['answerable_logit'] = (self._answerable(h, start_logits) if self.answerable_classifier
                                   else start_logits.new_zeros(h.shape[0]))
        return out


class ElectraQA(nn.Module):
    """The ELECTRA body (an HF `ElectraModel`) and the QA head. The head is named `classifier`, so
    `electra.finetuning.layerwise.layer_groups` / `optimizer_groups` give it the head's layer-wise rate."""

    def __init__(self, electra: nn.Module, **head_options):
        super().__init__()
        self.electra = electra
        self.classifier = QAHead(electra.config.hidden_size, **head_options)

    def forward(self, input_ids, attention_mask, token_type_ids, start_positions=None) -> dict[str, torch.Tensor]:
        h = self.electra(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        return self.classifier(h, attention_mask, token_type_ids, start_positions)


class QALoss(FinetuningLoss):
    """The official QA loss of each window: the mean of the start and end cross-entropies, plus `answerable_weight`
    times the sigmoid cross-entropy of the unanswerable logit against `is_impossible` when the classifier is on (the
    official code adds it whenever `answerable_classifier` is set, SQuAD 1.1 included, where every target is 0).
    The windows' losses are reduced over the batch as `FinetuningLoss` describes (`reduction`: 'sum', the official
    `FinetuningModel`'s, or 'mean'); `weight` [B] is each window's weight."""

    def __init__(self, answerable_classifier: bool = True, answerable_weight: float = 0.5, reduction: str = 'sum'):
        super().__init__(reduction)
        self.answerable_classifier, self.answerable_weight = answerable_classifier, answerable_weight

    def losses(self, out: dict, start_positions: torch.Tensor, end_positions: torch.Tensor,
               is_impossible: torch.Tensor) -> torch.Tensor:
        "float32 [B]: each window's loss."
        loss = (F.cross_entropy(out['start_logits'].float(), start_positions, reduction='none') +
                F.cross_entropy(out['end_logits'].float(), end_positions, reduction='none')) / 2.0
        if self.answerable_classifier:
            loss = loss + self.answerable_weight * F.binary_cross_entropy_with_logits(
                out['answerable_logit'].float(), is_impossible.float(), reduction='none')
        return loss

    def __call__(self, out: dict, start_positions, end_positions, is_impossible,
                 weight: torch.Tensor | None = None) -> torch.Tensor:
        return self.reduce(self.losses(out, start_positions, end_positions, is_impossible), weight)


# -- decoding (official qa_metrics.py, `SpanBasedQAScorer.write_predictions`)

def best_indexes(logits: np.ndarray, n: int) -> list[int]:
    "Positions of the `n` largest logits, largest first, the lower position first on a tie (official `_get_best_indexes`)."
    return np.argsort(-np.asarray(logits), kind='stable')[:n].tolist()


def window_rows(out: dict[str, torch.Tensor]) -> list[dict[str, np.ndarray]]:
    "A batch's head outputs as one dict of numpy arrays per window (row), for `decode`."
    arrays = {k: v.detach().float().cpu().numpy() if v.is_floating_point() else v.detach().cpu().numpy()
              for k, v in out.items()}
    n = len(next(iter(arrays.values())))
    return [{k: a[i] for k, a in arrays.items()} for i in range(n)]


@dataclass
class QAPrediction:
    "A question's answer, its n-best list and, for SQuAD 2.0, its null odds (higher: more likely unanswerable)."
    text: str
    nbest: list[dict]
    null_odds: float | None = None


def _pairs(row: dict, joint: bool, n_best_size: int):
    "(start, end, start score, end score) of every candidate span of a window, in the official order."
    if joint:
        for i, s in enumerate(row['start_top_index'].tolist()):
            for j, e in enumerate(row['end_top_index'][i].tolist()):
                yield s, e, row['start_top_log_probs'][i], row['end_top_log_probs'][i, j]
        return
    ends = best_indexes(row['end_logits'], n_best_size)
    for s in best_indexes(row['start_logits'], n_best_size):
        for e in ends: yield s, e, row['start_logits'][s], row['end_logits'][e]


def _valid(win: Window, s: int, e: int, max_answer_length: int) -> bool:
    "A span inside the context (not [CLS], question, [SEP] or padding), starting where its start has most context."
    n = len(win)
    if s >= n or e >= n or s == 0: return False
    if win.char_spans[s, 0] < 0 or win.char_spans[e, 0] < 0 or not win.max_context[s]: return False
    return s <= e and e - s + 1 <= max_answer_length


def _null_score(row: dict, answerable_classifier: bool) -> float:
    "A window's no-answer score: the unanswerable logit, or the [CLS] start + end logits (zeros for a joint end)."
    if answerable_classifier: return float(row['answerable_logit'])
    return float(np.float32(row['start_logits'][0]) + np.float32(row['end_logits'][0]))


def _nbest(context: str, cands: list[tuple], windows: list[Window], n_best_size: int) -> list[dict]:
    """The first `n_best_size` distinct answer texts of the candidates sorted by score (stable), each text the exact
    context characters from its start token's first to its end token's last, with the softmax of the scores."""
    nbest, seen = [], set()
    for score, w, s, e, sl, el in sorted(cands, key=lambda c: c[0], reverse=True):
        if len(nbest) >= n_best_size: break
        a, b = int(windows[w].char_spans[s, 0]), int(windows[w].char_spans[e, 1])
        if context[a:b] in seen: continue
        seen.add(context[a:b])
        nbest.append(dict(text=context[a:b], start_logit=float(sl), end_logit=float(el), start_char=a, end_char=b))
    if not nbest:  # official: a placeholder answer when no span is valid
        nbest.append(dict(text='empty', start_logit=0.0, end_logit=0.0, start_char=-1, end_char=-1))
    scores = np.array([d['start_logit'] + d['end_logit'] for d in nbest], dtype=np.float64)
    probs = np.exp(scores - scores.max())
    for d, p in zip(nbest, probs / probs.sum()): d['probability'] = float(p)
    return nbest


def decode_question(context: str, windows: list[Window], rows: list[dict], n_best_size: int = 20,
                    max_answer_length: int = 30, joint_prediction: bool = True, v2: bool = False,
                    answerable_classifier: bool = True) -> QAPrediction:
    """The answer of one question from its windows and their head outputs (`window_rows`). Candidates: the joint
    head's beam (start, end) pairs, or the `n_best_size` best starts times best ends; those not `_valid` are dropped.
    The best-scoring one (start + end logits or log-probabilities) is the answer. SQuAD 2.0: null odds = the least
    no-answer score over the windows, minus the best answer's score unless the answerable classifier gives it."""
    cands = []
    for w, (win, row) in enumerate(zip(windows, rows)):
        for s, e, sl, el in _pairs(row, joint_prediction, n_best_size):
            if _valid(win, s, e, max_answer_length):
                cands.append((float(np.float32(sl) + np.float32(el)), w, s, e, sl, el))
    nbest = _nbest(context, cands, windows, n_best_size)
    if not v2: return QAPrediction(nbest[0]['text'], nbest)
    null = min(_null_score(r, answerable_classifier) for r in rows)
    best = next(d for d in nbest if d['text'])
    odds = null if answerable_classifier else null - best['start_logit'] - best['end_logit']
    return QAPrediction(best['text'], nbest, float(odds))


def decode(examples: list[QAExample], windows: list[Window], rows: list[dict],
           **options) -> tuple[dict[str, str], dict[str, float], dict[str, list[dict]]]:
    """Answers of all questions: (predictions, null odds (SQuAD 2.0 only, else empty), n-best lists), each keyed by
    question id. `windows` as `featurize` made them, `rows[i]` the outputs of `windows[i]`; `options` as
    `decode_question`."""
    if len(rows) != len(windows):
        raise ValueError(f'decode: {len(rows)} output rows for {len(windows)} windows; give one row per window')
    by_ex: dict[int, list[int]] = {}
    for i, win in enumerate(windows): by_ex.setdefault(win.example, []).append(i)
    preds, odds, nbest = {}, {}, {}
    for k, ex in enumerate(examples):
        idx = by_ex.get(k, [])
        if not idx: raise ValueError(f'decode: question {ex.id!r} has no windows; featurize all examples together')
        p = decode_question(ex.context, [windows[i] for i in idx], [rows[i] for i in idx], **options)
        preds[ex.id], nbest[ex.id] = p.text, p.nbest
        if p.null_odds is not None: odds[ex.id] = p.null_odds
    return preds, odds, nbest


HEAD_MODELS['qa'] = ElectraQA
