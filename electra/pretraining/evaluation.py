"""Pretraining evaluation on held-out examples (`held_out_split`): generator MLM accuracy, discriminator
accuracy and ROC AUC, every `log_every` steps, each beside what a model that learnt nothing scores: always the most
frequent token at the masked positions, always "original", AUC 0.5; the discriminator's over the positions of its
loss (every real token; ELECTRA 15%'s the masked ones). And a probe of fixed difficulty: the AUC of the
discriminator on the same text with the masked positions replaced uniformly at random (as the uniform generator
replaces them), over every real token whatever the objective, which does not move with the generator, so runs of any
setting compare on it. An AUC over fewer than `MIN_AUC_CLASS` tokens of either class is undefined (NaN).

Every evaluation masks and samples the same held-out batches with generators re-seeded each time, so the
numbers are comparable from one evaluation to the next and move only because the model does. The masks have a stream
of their own, apart from the sampling's noise and the probe's draws (`held_out_seeds`): they are a
function of the held-out examples and the seed alone, the same positions and tokens for every objective, in both
stages of two-stage training, with or without padding of the vocabulary. It touches
none of the training random streams (masking, sampling, dropout), nor draws what they draw, so a run with evaluation trains exactly
as one without, and a resumed run exactly as an uninterrupted one. (The official ELECTRA evaluates on its
training files; these examples are never trained on.)
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import torch
from fastai.callback.core import Callback

from electra.data.batches import pad_examples
from electra.objective.loss import batch_statistics, disc_loss_terms, generator_loss_sum
from electra.objective.masking import MaskingSettings
from electra.objective.model import ElectraGeneratorDiscriminatorOutput
from electra.pretraining.callbacks import mean
from electra.runtime.processes import is_main_process
from electra.training.device import AUTOCAST_DTYPES
from electra.training.sinks import MIN_AUC_CLASS, CsvLog

__all__ = ['EVAL_METRIC_NAMES', 'MIN_AUC_CLASS', 'held_out_seeds', 'roc_auc', 'held_out_auc', 'most_frequent_share', 'eval_batches',
           'HeldOutEvaluation']

# *_baseline: the accuracy of always the most frequent token at the masked positions (generator) and of a
# discriminator that learnt nothing, over the positions of its loss as its accuracy and `disc_auc` (always "original";
# an MLM head's, always the most frequent token; a copy head's, always the input token); uniform_auc: the AUC on
# uniform replacements, over every real token; replaced_fraction: of the real tokens. NaN where the model has no such
# network, and an AUC over fewer than MIN_AUC_CLASS tokens of a class (undefined; written empty).
EVAL_METRIC_NAMES = ['step', 'gen_loss', 'disc_loss', 'gen_accuracy', 'disc_accuracy', 'disc_auc', 'replaced_fraction',
                     'gen_accuracy_baseline', 'disc_accuracy_baseline', 'uniform_auc', 'examples']


def held_out_seeds(seed: int) -> tuple[int, int, int]:
    """The seeds of the held-out masks, the sampling's noise and the probe's draws: derived from the run's `seed` apart
    from every training stream (`rank_seed(seed, rank)`, rank 0's is `seed` itself) and from other seeds' runs. Seeded
    `seed`, the held-out masks were the training step's of the same number, and the uniform generator's replacements
    the very tokens the discriminator had been trained on at those positions."""
    import numpy as np
    return tuple(int(s) for s in np.random.SeedSequence([seed, 2 ** 32]).generate_state(3))  # (no rank is 2 ** 32)


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve of `scores` for binary `labels` (1-D): the Mann-Whitney statistic, ties
    counted half, as sklearn's `roc_auc_score`. NaN when only one class is present."""
    scores, labels = scores.double().flatten(), labels.bool().flatten()
    n_pos = int(labels.sum())
    n_neg = labels.numel() - n_pos
    if n_pos == 0 or n_neg == 0: return float('nan')
    values, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    ranks = (ends - (counts.double() - 1) / 2)[inverse]  # 1-based ranks, tied scores sharing their mean rank
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def held_out_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    "`roc_auc` where each class of `labels` has at least `MIN_AUC_CLASS` tokens; NaN (undefined) where not."
    n_pos = int(labels.bool().sum())
    if min(n_pos, labels.numel() - n_pos) < MIN_AUC_CLASS: return float('nan')
    return roc_auc(scores, labels)


def most_frequent_share(ids: torch.Tensor) -> float:
    "The share of `ids` (1-D) equal to the most frequent one: the accuracy of always guessing it. NaN when empty."
    if not ids.numel(): return float('nan')
    return float(torch.bincount(ids).max()) / ids.numel()


def eval_batches(dataset, batch_size: int, max_length: int, pad_token_id: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    "The held-out examples as padded (input_ids, token_type_ids) batches, in dataset order (the last one may be short)."
    table = dataset.with_format('arrow')
    return [pad_examples(table[i:i + batch_size], max_length, pad_token_id) for i in range(0, len(dataset), batch_size)]


class HeldOutEvaluation(Callback):
    """Every `every` steps, evaluates on held-out batches with fixed masking; writes `path` (CSV) and calls `sinks`.
    With `at_start`, also before the first step (step 0): a run that starts from existing weights shows where it
    starts (the source run's last evaluation, for the same held-out examples and seed)."""
    order, run_valid = 72, False  # after MetricsLogger (64): the step's training row is logged first

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]], every: int, total_steps: int, path: str | Path,
                 masking: MaskingSettings, seed: int, precision: str = 'fp32', sinks: list[Callable[[dict], None]] = (),
                 at_start: bool = False):
        self.batches, self.every, self.total_steps, self.at_start = batches, every, total_steps, at_start
        self.csv = CsvLog(path, EVAL_METRIC_NAMES)
        self.masking, self.seed, self.precision, self.sinks = masking, seed, precision, list(sinks)
        self.last_row: dict | None = None

    def before_fit(self):
        if is_main_process(): self.csv.truncate_after(self.train_iter)
        if self.at_start and self.train_iter == 0: self._log(self.evaluate())

    def after_batch(self):
        if self.train_iter % self.every == 0 or self.train_iter == self.total_steps: self._log(self.evaluate())

    def _log(self, row: dict) -> None:
        if not is_main_process(): return
        self.csv.append(row)
        for sink in self.sinks: sink(row)

    @torch.no_grad()
    def evaluate(self) -> dict:
        "The metrics of the current model on the held-out batches (also kept in `last_row`)."
        model = self.model
        device = next(model.parameters()).device
        # re-seeded every time: the same masks and the same sampling noise at every evaluation, each from a stream of
        # its own, so that the masks are a function of the held-out batches and the seed alone: drawn after the
        # noise in one stream, they moved with what the objective or the stage samples (BERT and two-stage
        # training's first stage nothing, the others [B, P, V] draws a batch)
        mask_rng, noise_rng, probe_rng = (torch.Generator(device=device).manual_seed(k) for k in held_out_seeds(self.seed))
        was_training = model.training
        model.eval()
        dtype = AUTOCAST_DTYPES[self.precision]
        autocast = torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        sums, seen = {}, {'auc': [], 'uniform': [], 'labels': [], 'generator': False}
        try:
            for input_ids, token_type_ids in self.batches:
                input_ids, token_type_ids = input_ids.to(device), token_type_ids.to(device)
                m = self.masking(input_ids, mask_rng)
                # the sampling noise; none in two-stage training's first stage, whose forward samples nothing
                shape = model.noise_shape(m.positions) if model.stage != 1 else None
                noise = None if shape is None else torch.rand(shape, device=device, generator=noise_rng)
                # `forward`: a model compiled for training evaluates eagerly, with no graphs to compile for eval mode
                with autocast: pred = model.forward(m.input_ids, token_type_ids, m.positions, m.labels, noise)
                for k, v in _losses_and_counts(pred, m.labels, model.objective.head).items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                seen['labels'].append(m.labels[m.labels >= 0])  # the original tokens at the masked positions
                seen['generator'] = seen['generator'] or pred.gen_preds is not None  # it predicts them
                if pred.disc_logits is None: continue
                seen['auc'].append(_detection(pred, pred.disc_mask))  # over the positions of its loss
                with autocast:
                    probe = model.detect_uniform_replacements(m.input_ids, token_type_ids, m.positions, m.labels,
                                                              probe_rng)
                # over every real token whatever the objective, so that runs of any setting compare on it
                seen['uniform'].append(_detection(probe, probe.attention_mask))
        finally:
            model.train(was_training)
        self.last_row = self._row(sums, seen)
        return self.last_row

    def _row(self, sums: dict[str, float], seen: dict[str, list]) -> dict:
        auc = {k: held_out_auc(*map(torch.cat, zip(*seen[k]))) if seen[k] else float('nan') for k in ('auc', 'uniform')}
        # each a mean where it exists, NaN where not measured (a frozen generator's loss, a network not there)
        gen_loss = mean(sums['gen_loss'], sums['gen_targets'])  # the mean over its targets (the cloze model's: more)
        frequent = most_frequent_share(torch.cat(seen['labels'])) if seen['labels'] else float('nan')
        return {'step': self.train_iter, 'gen_loss': gen_loss, 'disc_loss': mean(sums['disc_loss'], sums['disc_total']),
                'gen_accuracy': mean(sums['gen_correct'], sums['gen_total']),
                'disc_accuracy': mean(sums['disc_correct'], sums['disc_total']),
                'disc_auc': auc['auc'], 'replaced_fraction': sums['replaced'] / max(sums['real'], 1),
                'gen_accuracy_baseline': frequent if seen['generator'] else float('nan'),
                'disc_accuracy_baseline': self._disc_baseline(sums, seen, frequent) if sums['disc_total'] else float('nan'),
                'uniform_auc': auc['uniform'], 'examples': sum(len(b[0]) for b in self.batches)}

    def _disc_baseline(self, sums: dict[str, float], seen: dict[str, list], frequent: float) -> float:
        """What a discriminator that learnt nothing scores over the positions of its loss, by its head: always
        "original" (replaced-token detection), always the most frequent original token at the masked positions (an
        MLM head: BERT, Replace MLM), always the input token over every token (All-Tokens MLM's copy head)."""
        head = self.learn.model.objective.head
        if head == 'mlm': return frequent
        if head == 'copy': return 1 - sums['replaced'] / max(sums['real'], 1)
        return 1 - (sums['tp'] + sums['fn']) / sums['disc_total'] if seen['auc'] else float('nan')  # (counted: > 0)


def _detection(pred: ElectraGeneratorDiscriminatorOutput, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    "(the discriminator's logits, whether replaced) at the positions of `mask` [B, L], for the AUC."
    return pred.disc_logits.float()[mask], pred.is_replaced[mask]


def _losses_and_counts(pred: ElectraGeneratorDiscriminatorOutput, labels: torch.Tensor,
                       head: str) -> dict[str, torch.Tensor]:
    """`batch_statistics` with the sums of the generator's and the discriminator's losses (0 for a network not there)
    and the count of the generator's targets (`gen_targets`)."""
    out = batch_statistics(pred, labels, head)
    trained = pred.gen_logits is not None
    out['gen_loss'] = generator_loss_sum(pred) if trained else torch.zeros(())
    out['gen_targets'] = (pred.gen_targets >= 0).sum() if trained else torch.zeros(())
    out['disc_loss'] = disc_loss_terms(pred, head).sum() if pred.disc_mask is not None else torch.zeros(())
    return out
