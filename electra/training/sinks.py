"""The CSV files of metrics, and where else their rows go: one line per row in logs (the trackers are
`electra.training.trackers`)."""
from __future__ import annotations

import csv
import math
import shutil
import sys
from pathlib import Path
from typing import Callable

from electra.config.objectives import Objective


__all__ = ['CsvLog', 'prefixed_sink', 'metrics_line', 'print_sink', 'eval_line', 'print_eval_sink']


class CsvLog:
    """A metrics CSV with fixed columns (main process only): rows are appended as they come, numbers to 6 significant
    digits; a resumed run first drops the rows after its step, so the file reads as one uninterrupted run."""

    def __init__(self, path: str | Path, columns: list[str]): self.path, self.columns = Path(path), list(columns)

    def truncate_after(self, step: int) -> None:
        if not self.path.exists(): return
        with self.path.open(newline='') as f: rows = [r for r in csv.DictReader(f) if int(float(r['step'])) <= step]
        self._write(rows, 'w')

    def append(self, row: dict) -> None: self._write([{k: f'{v:.6g}' for k, v in row.items()}], 'a')

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
    frequent token, always "original"); what the model has not (a generator, a discriminator) is left out, and its
    losses are named as its objective's row says."""
    parts = []
    if not math.isnan(row['disc_auc']):
        parts.append(f"AUC {row['disc_auc']:.3f} (chance 0.5), {row['uniform_auc']:.3f} on random replacements")
    if not math.isnan(row['gen_accuracy_baseline']):
        parts.append(f"gen acc {row['gen_accuracy']:.3f} (most frequent token {row['gen_accuracy_baseline']:.3f})")
    if not math.isnan(row['disc_accuracy_baseline']):
        parts.append(f"disc acc {row['disc_accuracy']:.3f} (always \"original\" {row['disc_accuracy_baseline']:.3f}; "
                     f"{row['replaced_fraction']:.1%} replaced)")
    else: parts.append(f"{objective.reported.held_out_accuracy} {row['disc_accuracy']:.3f}")
    losses = ' '.join(f"{name} {row[key]:.3f}" for name, key in objective.reported.losses)
    return f"step {row['step']} held-out: {'; '.join(parts)}; loss {losses}"


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
