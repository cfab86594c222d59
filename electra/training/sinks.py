"""The CSV files of metrics, and where else their rows go: one line per row in logs (the trackers are
`electra.training.trackers`)."""
from __future__ import annotations

import csv
import math
import shutil
import sys
from pathlib import Path
from typing import Callable


__all__ = ['CsvLog', 'prefixed_sink', 'print_sink', 'eval_line', 'print_eval_sink']


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


def print_sink(row: dict) -> None:
    "A metrics sink printing one line per logging interval (for logs, where a live bar would print every step)."
    print(f"step {row['step']}: loss {row['loss']:.4f} (gen {row['gen_loss']:.4f}, disc {row['disc_loss']:.4f}) "
          f"gen_acc {row['gen_accuracy']:.4f} disc_acc {row['disc_accuracy']:.4f} "
          f"replaced P/R {row['replaced_precision']:.3f}/{row['replaced_recall']:.3f} lr {row['lr']:.3g} "
          f"{row['steps_per_s']:.1f} steps/s" + (f" ({row['skipped_steps']} fp16 overflow steps skipped)"
                                                 if row.get('skipped_steps') else ''), flush=True)


def eval_line(row: dict) -> str:
    """One held-out evaluation, each number beside what a model that learnt nothing scores (chance, always the most
    frequent token, always "original"); what the model has not (a generator, a discriminator) is left out."""
    parts = []
    if not math.isnan(row['disc_auc']):
        parts.append(f"AUC {row['disc_auc']:.3f} (chance 0.5), {row['uniform_auc']:.3f} on random replacements")
    if not math.isnan(row['gen_accuracy_baseline']):
        parts.append(f"gen acc {row['gen_accuracy']:.3f} (most frequent token {row['gen_accuracy_baseline']:.3f})")
    if not math.isnan(row['disc_accuracy_baseline']):
        parts.append(f"disc acc {row['disc_accuracy']:.3f} (always \"original\" {row['disc_accuracy_baseline']:.3f}; "
                     f"{row['replaced_fraction']:.1%} replaced)")
    else: parts.append(f"main acc {row['disc_accuracy']:.3f}")
    return f"step {row['step']} held-out: {'; '.join(parts)}; loss gen {row['gen_loss']:.3f} disc {row['disc_loss']:.3f}"


def print_eval_sink(row: dict) -> None:
    """One line per evaluation. In a terminal it goes above the live progress bar: it overwrites the bar's line,
    which the bar draws again below it at its next update."""
    line = eval_line(row)
    if sys.stdout.isatty(): line = '\r' + line.ljust(shutil.get_terminal_size().columns - 1)
    print(line, flush=True)


def prefixed_sink(sink: Callable[[dict], None], prefix: str) -> Callable[[dict], None]:
    "`sink` receiving every metric but `step` under `prefix` (e.g. 'eval/gen_accuracy'), beside the training ones."
    return lambda row: sink({'step': row['step'], **{f'{prefix}{k}': v for k, v in row.items() if k != 'step'}})
