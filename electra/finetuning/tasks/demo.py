"""The project's own demo data for the tasks beyond GLUE, with their task files, written on demand:

    python -m electra.finetuning.tasks.demo cache/demo_tasks     # then: python finetune.py --config demo_tasks

`reviews/`: a sentiment classification task from CSV files (string labels and ids; the demo GLUE's review
generator), described by `reviews.yaml`.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pandas as pd

from electra.finetuning.tasks.glue.demo import review_example

__all__ = ['write_demo_tasks']

SIZES = {'train': 400, 'dev': 100, 'test': 100}
REVIEWS_YAML = """# A task from files (see electra/finetuning/tasks/files.py): reviews and their sentiment, in CSV
name: reviews
kind: classification
train: reviews/train.csv
dev: reviews/dev.csv
test: reviews/test.csv
text: review
label: sentiment
id: review_id
metrics: [accuracy, f1]
"""


def _reviews(root: Path, sizes: dict[str, int], seed: int) -> Path:
    rng = random.Random(seed)
    (root / 'reviews').mkdir(parents=True, exist_ok=True)
    for split, n in sizes.items():
        rows = [review_example(rng) for _ in range(n)]
        df = pd.DataFrame({'review_id': [f'{split}-{i:04d}' for i in range(n)], 'review': [r[0] for r in rows],
                           'sentiment': ['positive' if r[1] else 'negative' for r in rows]})
        df.drop(columns=['sentiment'] if split == 'test' else []).to_csv(root / 'reviews' / f'{split}.csv', index=False)
    (root / 'reviews.yaml').write_text(REVIEWS_YAML, encoding='utf-8')
    return root / 'reviews.yaml'


def write_demo_tasks(root: str | Path, sizes: dict[str, int] | None = None, seed: int = 0) -> list[Path]:
    "Write every demo task's data and task file under `root`; returns the task files."
    return [_reviews(Path(root), {**SIZES, **(sizes or {})}, seed)]


if __name__ == '__main__':
    if len(sys.argv) != 2: sys.exit('usage: python -m electra.finetuning.tasks.demo DIR')
    for path in write_demo_tasks(sys.argv[1]): print(path)
