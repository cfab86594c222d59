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
from electra.finetuning.tasks.tagging.encoding import IGNORE_INDEX
from electra.training.distributed import gather_objects, is_distributed, world

__all__ = ['ElectraTagger', 'TaggingLoss', 'predict_windows']


class ElectraTagger(nn.Module):
    """The ELECTRA body (an HF `ElectraModel`, as `ElectraClassifier` takes) and the official tagging head: final
    hidden states [B, T, H] -> (dropout, none by default as the official head) -> linear -> logits [B, T, n_labels].
    The layer starts as TF1's dense default, xavier-uniform weights and zero bias, and is named `classifier` so that
    `electra.finetuning.classifier.optimizer_groups` gives it the head's layer-wise rate."""

    def __init__(self, electra: nn.Module, n_labels: int, dropout: float = 0.0):
        super().__init__()
        self.electra, self.n_labels, self.n_outputs = electra, n_labels, n_labels
        self.dropout = nn.Dropout(dropout)
        self.classifier = tf_dense(electra.config.hidden_size, n_labels)

    def forward(self, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
        h = self.electra(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        return self.classifier(self.dropout(h))  # [B, T, n_labels]


class TaggingLoss:
    """Cross-entropy of the logits [B, T, C] at the labelled pieces of `target` [B, T] (-100 elsewhere). `reduction`:

    - 'official': the sum over every labelled word of the batch, as the official code trains (module docstring);
    - 'example' (default): each window's sum averaged over the batch's windows: the official per-example loss
      averaged, as `ClassifierLoss` does for GLUE (docs/fidelity.md, "fine-tuning loss");
    - 'token': the mean over the batch's labelled words.

    `weight` [B]: each window's weight (0 for a stand-in row of `ShardedBatchSampler`). In a torchrun job
    (`global_divisors` set by `DataParallel`), this process's sum divided by the global batch's count, so that DDP's
    average of the gradients is the whole batch's; `local_sum` and `local_count` keep this process's share."""

    REDUCTIONS = ('official', 'example', 'token')

    def __init__(self, reduction: str = 'example'):
        if reduction not in self.REDUCTIONS: raise ValueError(f"reduction: {reduction!r} is not one of {self.REDUCTIONS}")
        self.reduction, self.global_divisors = reduction, None

    def __call__(self, out: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        b, t, c = out.shape
        per = F.cross_entropy(out.float().reshape(b * t, c), target.reshape(b * t), reduction='none',
                              ignore_index=IGNORE_INDEX).view(b, t)  # 0 where ignored
        w = torch.ones(b, device=out.device) if weight is None else weight.to(out.device, torch.float32)
        self.local_sum = (per.sum(1) * w).sum()
        if self.reduction == 'token': count = ((target != IGNORE_INDEX).sum(1) * w).sum()
        elif self.reduction == 'example': count = w.sum()
        else:  # a sum: under DDP's mean over W processes each process counts 1/W, so the divisor comes out 1/W
            count = torch.tensor(1.0 / (world().size if is_distributed() else 1), device=out.device)
        self.local_count = count.detach().float().reshape(())  # a scalar, as ClassifierLoss's (summed per epoch)
        if self.global_divisors is not None: return self.local_sum / self.global_divisors(self.local_count.reshape(1))[0]
        if self.reduction == 'official': return self.local_sum
        return self.local_sum / self.local_count.clamp(min=1e-6)


@torch.no_grad()
def predict_windows(model: ElectraTagger, loader, autocast: torch.dtype | None = None) -> list[np.ndarray]:
    """Logits [L_i, C] of every window i of an evaluation loader (`make_tagging_loader(shuffle=False)`), in window
    order, for `word_predictions`. In a torchrun job each process predicts its share (`shard=`) and all get the whole."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    got: list[tuple[int, np.ndarray]] = []
    for batch, picks in zip(loader, loader.batch_sampler):
        ids, mask, types = (x.to(device, non_blocking=True) for x in batch[:3])
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            logits = model(ids, mask, types).float().cpu().numpy()  # [B, T, C]
        lengths = batch[1].sum(1).numpy()
        got += [(int(i), logits[r, :lengths[r]]) for r, i in enumerate(picks)]
    model.train(was_training)
    result: list = [None] * len(loader.dataset)
    for part in gather_objects(got):  # one part in one process
        for i, x in part: result[i] = x
    return result
