"""The classification model: the ELECTRA body with the official classification/regression head (`ElectraClassifier`),
the STS-B target scaling, and its loss (`ClassifierLoss`); `tf_dense`, the official heads' output layer, which the
other task kinds' heads use too. Layer-wise learning rates are in `layerwise.py`, loading models in `loading.py`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from electra.finetuning.loss import FinetuningLoss

__all__ = ['tf_dense', 'ElectraClassifier', 'ClassifierLoss']


def tf_dense(n_in: int, n_out: int) -> nn.Linear:
    "A linear layer initialised as TF1's `tf.layers.dense` default, the official heads': xavier-uniform weights, zero bias."
    lin = nn.Linear(n_in, n_out)
    nn.init.xavier_uniform_(lin.weight)
    nn.init.zeros_(lin.bias)
    return lin


class ElectraClassifier(nn.Module):
    """The ELECTRA body and the official GLUE head: the final hidden state of [CLS] -> dropout -> linear, no pooler
    and no tanh. The output layer starts as TF1's default initialisation: xavier-uniform weights, zero bias.
    `target_scale`: the task's scale over the outputs'. A regression head trains on targets divided by it (official
    STS-B: 5, so [0, 1]; google-research/electra, finetune/classification/classification_tasks.py `RegressionTask`
    `_add_features` divides the label by its max value), and `electra.finetuning.learner.predict_outputs` multiplies
    the outputs back, so the dev scores are on the task's own scale. A run read back (`load_finetuned`) is
    `on_task_scale`: its outputs are the task's scores, `target_scale` 1."""

    def __init__(self, electra: nn.Module, n_outputs: int, dropout: float = 0.1, target_scale: float = 1.0):
        super().__init__()
        self.electra, self.n_outputs, self.target_scale = electra, n_outputs, target_scale
        self.dropout = nn.Dropout(dropout)
        self.classifier = tf_dense(electra.config.hidden_size, n_outputs)

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.electra(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        out = self.classifier(self.dropout(h[:, 0]))
        return out.squeeze(-1) if self.n_outputs == 1 else out

    @torch.no_grad()
    def on_task_scale(self) -> ElectraClassifier:
        """This model with `target_scale` folded into its output layer (weights and bias times it, `target_scale` then
        1), in place: its forward gives a regression's scores on the task's own scale, as the run's transformers
        folder and test files do. Training keeps the head on the training scale, where its loss compares it with the
        targets divided by `target_scale` (`ClassifierLoss`); a classification's scale is 1, its logits unchanged."""
        self.classifier.weight.mul_(self.target_scale), self.classifier.bias.mul_(self.target_scale)
        self.target_scale = 1.0
        return self


class ClassifierLoss(FinetuningLoss):
    """The loss of a classification, regression or multi-label run: each example's cross-entropy over classes, squared
    error against the target / `scale` (official STS-B: scores 0-5 learned as 0-1), or mean binary cross-entropy over
    labels, reduced over the batch as `FinetuningLoss` describes (`reduction`: 'sum', the official, or 'mean')."""

    def __init__(self, regression: bool, scale: float = 1.0, multilabel: bool = False, reduction: str = 'sum'):
        super().__init__(reduction)
        self.regression, self.scale, self.multilabel = regression, scale, multilabel

    def per_example(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        "Each example's float32 loss [b]; multi-label: the mean over labels of the binary cross-entropy of out [b, labels]."
        if self.regression: return (out.float() - target / self.scale) ** 2
        if self.multilabel: return F.binary_cross_entropy_with_logits(out.float(), target.float(), reduction='none').mean(-1)
        return F.cross_entropy(out.float(), target, reduction='none')

    def __call__(self, out: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        return self.reduce(self.per_example(out, target), weight)



