"""The CSV files of metrics, and where else their rows go: one line per row in logs (the trackers are
`electra.training.trackers`)."""
from __future__ import annotations

import csv
import math
import shutil
import sys
from pathlib import Path
from typing import Callable

from electra.config.objectives import LEARNT_NOTHING, Objective


__all__ = ['MIN_AUC_CLASS', 'CsvLog', 'prefixed_sink', 'metrics_line', 'print_sink', 'eval_line', 'print_eval_sink']

# the fewest tokens of each class (replaced, original) a held-out AUC is given over (pretraining/evaluation.py
# `held_out_auc`), here where the line that says it reads it: the standard error of an AUC near chance over n tokens
# of one class and many of the other is about sqrt(1 / (12 n)) (Hanley & McNeil 1982), 0.05 at 30, 0.29 at one.
# Below it the AUC is undefined (NaN): ELECTRA 15%'s masked positions hold few originals
MIN_AUC_CLASS = 30
# where a number is taken, by the row's `positions` (config/objectives.py): every real token, or the masked ones
_WHERE = {'tokens': 'over every token', 'chosen': 'at the masked positions', 'slots': 'at the masked positions'}


class CsvLog:
    """A metrics CSV with fixed columns (main process only): rows are appended as they come, numbers to 6 significant
    digits, NaN (undefined, or not measured) as an empty cell, as results.csv writes an undefined score; a resumed
    run first drops the rows after its step, so the file reads as one uninterrupted run."""

    def __init__(self, path: str | Path, columns: list[str]): self.path, self.columns = Path(path), list(columns)

    def truncate_after(self, step: int) -> None:
        if not self.path.exists(): return
        with self.path.open(newline='') as f: rows = [r for r in csv.DictReader(f) if int(float(r['step'])) <= step]
        self._write(rows, 'w')

    def append(self, row: dict) -> None:
        self._write([{k: '' if isinstance(v, float) and math.isnan(v) else f'{v:.6g}' for k, v in row.items()}], 'a')

    def _write(self, rows: list[dict], mode: str) -> None:
        new = mode == 'w' or not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open(mode, newline='') as f:
            w = csv.DictWriter(f, self.columns)
            if new: w.writeheader()
            w.writerows(rows)


def metrics_line(row: dict, objective: Objective) -> str:
    """One logging interval's line, naming what the run has as its objective's row says (`Objective.reported`): the
    total loss and each loss beside it, the accuracies, replaced P/R where it detects replaced tokens, the rate, the speed."""
    said = objective.reported
    losses = ', '.join(f"{name} {row[key]:.4f}" for name, key in said.losses)
    accuracies = ' '.join(f"{name} {row[key]:.4f}" for name, key in said.accuracies)
    detection = (f" replaced P/R {row['replaced_precision']:.3f}/{row['replaced_recall']:.3f}"
                 if said.detection else '')
    skipped = f" ({row['skipped_steps']} fp16 overflow steps skipped)" if row.get('skipped_steps') else ''
    return (f"step {row['step']}: loss {row['loss']:.4f} ({losses}) {accuracies}{detection} lr {row['lr']:.3g} "
            f"{row['steps_per_s']:.1f} steps/s{skipped}")


def print_sink(objective: Objective) -> Callable[[dict], None]:
    "A metrics sink printing one line per logging interval (for logs, where a live bar would print every step)."
    return lambda row: print(metrics_line(row, objective), flush=True)


def eval_line(row: dict, objective: Objective) -> str:
    """One held-out evaluation, each number beside what a model that learnt nothing scores (chance, always the most
    frequent token, always "original") and where both are taken: the discriminator's over the positions of its loss
    (the row's `positions`), the probe on random replacements over every token, the generator's at the masked
    positions; an AUC over too few tokens of a class is `undefined`. What the model has not (a generator, a
    discriminator, or one not yet run: two-stage training's first stage) is left out, and its losses are named as
    its objective's row says."""
    said, where, parts = objective.reported, _WHERE[objective.positions], []
    ran = not math.isnan(row['disc_accuracy'])  # the discriminator was evaluated
    if said.detection and ran:
        auc = (f"AUC {row['disc_auc']:.3f} {where} (chance 0.5)" if not math.isnan(row['disc_auc']) else
               f'AUC undefined {where} (fewer than {MIN_AUC_CLASS} "original" or replaced)')
        parts.append(f"{auc}, {_number(row['uniform_auc'])} on random replacements over every token")
    if not math.isnan(row['gen_accuracy_baseline']):
        parts.append(f"gen acc {row['gen_accuracy']:.3f} at the masked positions (most frequent token "
                     f"{row['gen_accuracy_baseline']:.3f})")
    if said.detection and ran:
        parts.append(f"disc acc {row['disc_accuracy']:.3f} {where} ({LEARNT_NOTHING[objective.head]} "
                     f"{row['disc_accuracy_baseline']:.3f}); {row['replaced_fraction']:.1%} of the tokens replaced")
    elif ran: parts.append(f"{said.held_out_accuracy} {row['disc_accuracy']:.3f} {where} "
                           f"({LEARNT_NOTHING[objective.head]} {row['disc_accuracy_baseline']:.3f})")
    losses = ' '.join(f"{name} {row[key]:.3f}" for name, key in said.losses)
    return f"step {row['step']} held-out: {'; '.join(parts)}; loss {losses}"


def _number(value: float) -> str:
    "A held-out AUC as the line shows it: three decimals, or 'undefined' for NaN (as fine-tuning shows a score)."
    return 'undefined' if math.isnan(value) else f'{value:.3f}'


def print_eval_sink(objective: Objective) -> Callable[[dict], None]:
    """A sink printing one line per evaluation. In a terminal it goes above the live progress bar: it overwrites the
    bar's line, which the bar draws again below it at its next update."""
    def sink(row: dict) -> None:
        line = eval_line(row, objective)
        if sys.stdout.isatty(): line = '\r' + line.ljust(shutil.get_terminal_size().columns - 1)
        print(line, flush=True)
    return sink


def prefixed_sink(sink: Callable[[dict], None], prefix: str) -> Callable[[dict], None]:
    "`sink` receiving every metric but `step` under `prefix` (e.g. 'eval/gen_accuracy'), beside the training ones."
    return lambda row: sink({'step': row['step'], **{f'{prefix}{k}': v for k, v in row.items() if k != 'step'}})
