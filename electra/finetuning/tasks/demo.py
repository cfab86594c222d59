"""The project's own demo data for the tasks beyond GLUE, with their task files, written on demand:

    python -m electra.finetuning.tasks.demo cache/demo_tasks
    python finetune.py --config demo_tasks      # or demo_tagging, or demo_squad

`reviews/`: a sentiment classification task from CSV files (string labels and ids; the demo GLUE's review
generator), described by `reviews.yaml`; `ner/`: a named-entity set in CoNLL format (`tagging/demo.py`), its test
file without tags, described by `ner.yaml`; `squad/`: a SQuAD 2.0 set in the official JSON format (`qa/demo.py`),
described by `squad.yaml`.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pandas as pd

from electra.config.version import command_parser
from electra.finetuning.tasks.glue.demo import review_example
from electra.finetuning.tasks.qa.demo import write_demo_squad
from electra.finetuning.tasks.tagging.demo import write_demo_tagging
from electra.runtime.errors import friendly_errors

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


NER_YAML = """# A token tagging task (see electra/finetuning/tasks/tagging/task.py): CoNLL files, IOB2 tags
name: ner
kind: tagging
train: ner/train.txt
dev: ner/dev.txt
test: ner/test.txt        # words only: the predictions are written as a second column
scheme: IOB2
metrics: [f1, precision, recall, accuracy]
"""
SQUAD_YAML = """# Extractive QA (see electra/finetuning/tasks/qa/task.py): SQuAD 2.0 files in the official format
name: squad
kind: squad
train: squad/train.json
dev: squad/dev.json
max_answer_length: 8      # tokens; the answers have 1 to 4 words (official: 30, for Wikipedia's answers)
na_threshold: 0.0         # answer "" where the unanswerable logit is above 0: p(unanswerable) above 1/2. The official
                          # -2.75 answers only where a model is 94% sure; the demo model's answerability head learns
                          # little more than the share of unanswerable questions (a third), so it would answer none
"""


def _ner(root: Path, sizes: dict[str, int] | None, seed: int) -> Path:
    write_demo_tagging(root / 'ner', sizes=sizes, seed=seed)
    test = root / 'ner' / 'test.txt'  # a test file as users have them: words only
    test.write_text('\n'.join(line.split(' ')[0] for line in test.read_text(encoding='utf-8').split('\n')), encoding='utf-8')
    (root / 'ner.yaml').write_text(NER_YAML, encoding='utf-8')
    return root / 'ner.yaml'


def _squad(root: Path, sizes: dict[str, int] | None, seed: int) -> Path:
    write_demo_squad(root / 'squad', '2.0', sizes={k: v for k, v in (sizes or {}).items() if k != 'test'}, seed=seed)
    (root / 'squad.yaml').write_text(SQUAD_YAML, encoding='utf-8')
    return root / 'squad.yaml'


def write_demo_tasks(root: str | Path, sizes: dict[str, int] | None = None, seed: int = 0) -> list[Path]:
    """Write every demo task's data and task file under `root`; returns the task files (reviews, ner, squad).
    `sizes`: examples (sentences, questions) per split of each, instead of each demo's defaults (for tests)."""
    root = Path(root)
    return [_reviews(root, {**SIZES, **(sizes or {})}, seed), _ner(root, sizes, seed), _squad(root, sizes, seed)]


def main(argv: list[str] | None = None) -> int:
    "The command line: `python -m electra.finetuning.tasks.demo DIR` writes the demo tasks there; its exit status."
    parser = command_parser('python -m electra.finetuning.tasks.demo',
                            'Write the demo tasks (reviews, ner, squad) and their task files.')
    parser.add_argument('dir', metavar='DIR', help='the folder to write them in')
    for path in write_demo_tasks(parser.parse_args(argv).dir): print(path)
    return 0


if __name__ == '__main__':
    friendly_errors()  # a folder it cannot write: one `error: ...` line, status 2
    sys.exit(main())
