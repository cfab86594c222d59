"""The token-classification model of the official tagging task: the ELECTRA body, a linear layer on every
position's final hidden state, and cross-entropy over each word's first piece.

Official `TaggingTask.get_prediction_module` (google-research/electra, finetune/tagging/tagging_tasks.py) gathers the
sequence output at the labelled positions and applies `tf.layers.dense` (no dropout, unlike the classification
head); here the layer is applied at every position and the loss reads only the labelled ones (labels != -100), which
gives the same logits there. The per-sentence loss is the sum of its words' cross-entropies (`losses *=
labels_mask; reduce_sum(losses, axis=-1)`), and `FinetuningModel` (run_finetuning.py) sums those over the batch.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra.finetuning.classifier import tf_dense
from electra.finetuning.learner import predict_examples
from electra.finetuning.loading import HEAD_MODELS
from electra.finetuning.loss import LOSS_REDUCTIONS, FinetuningLoss
from electra.finetuning.tasks.tagging.encoding import IGNORE_INDEX

__all__ = ['ElectraTagger', 'TaggingLoss', 'one_token_type', 'predict_windows']

TOKEN_TYPES = 'electra.embeddings.token_type_embeddings.weight'  # [2, H]


class ElectraTagger(nn.Module):
    """The ELECTRA body (an HF `ElectraModel`, as `ElectraClassifier` takes) and the official tagging head: final
    hidden states [B, T, H] -> (dropout, none by default as the official head) -> linear -> logits [B, T, n_labels].
    The layer starts as TF1's dense default, xavier-uniform weights and zero bias, and is named `classifier` so that
    `electra.finetuning.layerwise.optimizer_groups` gives it the head's layer-wise rate."""

    def __init__(self, electra: nn.Module, n_labels: int, dropout: float = 0.0):
        super().__init__()
        self.electra, self.n_labels, self.n_outputs = electra, n_labels, n_labels
        self.dropout = nn.Dropout(dropout)
        self.classifier = tf_dense(electra.config.hidden_size, n_labels)

    def forward(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        h = self.electra(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        return self.classifier(self.dropout(h))  # [B, T, n_labels]


class TaggingLoss(FinetuningLoss):
    """Cross-entropy of the logits [B, T, C] at the labelled pieces of `target` [B, T] (-100 elsewhere); each window's
    loss is the sum over its labelled words, as the official per-sentence loss (module docstring). `reduction`, as
    `FinetuningLoss`: 'sum' (default) over the batch's windows, as the official code trains; 'mean' over the windows;
    'token' over the batch's labelled words. `weight` [B]: each window's weight."""

    reductions = LOSS_REDUCTIONS

    def __call__(self, out: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        b, t, c = out.shape
        per = F.cross_entropy(out.float().reshape(b * t, c), target.reshape(b * t), reduction='none',
                              ignore_index=IGNORE_INDEX).view(b, t)  # 0 where ignored
        return self.reduce(per.sum(1), weight, counts=(target != IGNORE_INDEX).sum(1))


def one_token_type(state: dict) -> dict:
    """An `ElectraTagger`'s weights `state` with every token-type row [2, H] set to type 1's, the only type a tagging
    run is trained and scored with (official inputs: type 1 on every token, `encoding.py`); type 0's row never gets a
    gradient. Saved so, the run gives its own logits whatever types a caller passes: transformers' tokenizer and
    token-classification pipeline give one text type 0, whose pretrained row gave other tags than the job's."""
    rows = state[TOKEN_TYPES]
    return {**state, TOKEN_TYPES: rows[1:2].expand_as(rows).clone()}


def predict_windows(model: ElectraTagger, loader, autocast: torch.dtype | None = None) -> list[np.ndarray]:
    """Logits [L_i, C] of every window i of an evaluation loader (`make_tagging_loader(shuffle=False)`), in window
    order, for `word_predictions` (`predict_examples`: a torchrun job's processes share the batches)."""

    def rows(out, batch):
        logits, lengths = out.float().cpu().numpy(), batch[1].sum(1).tolist()  # [B, T, C]; each window's length
        return [logits[r, :n] for r, n in enumerate(lengths)]
    return predict_examples(model, loader, rows, autocast)


HEAD_MODELS['tagging'] = ElectraTagger
