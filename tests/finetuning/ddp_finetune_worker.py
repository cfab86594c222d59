"""Fine-tuning runs of a tiny model, as one process or as one rank of a torchrun job, for `test_parallel_run.py`:
synthetic GLUE-like tasks (33 training examples of uneven lengths, so the last batch of 8 holds one example and one
process gets a stand-in row) and task files, no dropout, so any number of processes must give the same parameters.
Rank 0 saves each run's model state and history (train loss and dev metrics per epoch) to OUT/<i>.pt, i the task's
place on the command line; one launch trains them all, as a sweep does.

    python ddp_finetune_worker.py OUT MNLI STS-B path/to/tagging.yaml             # one process (`tagging_files`)
    python -m torch.distributed.run --nproc_per_node 2 ddp_finetune_worker.py ...  # two
"""
import random
import sys
from pathlib import Path

import numpy as np
import torch
import transformers

from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.finetuning.learner import train_run
from electra.finetuning.tasks.base import TaskData
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.encoding import Encoded
from electra.finetuning.tasks.files import make_task, read_task_file
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.training.distributed import finish_distributed, init_distributed

VOCAB = 60


def encoded(n: int, regression: bool, seed: int) -> Encoded:
    "`n` examples `[CLS] a [SEP] b [SEP]` of 5 to 20 tokens whose label depends on their first token."
    rng = np.random.default_rng(seed)
    rows = [[2, *rng.integers(5, VOCAB, int(k) - 3).tolist(), 3] for k in rng.integers(4, 19, n)]
    rows = [[*r[:3], 3, *r[3:]] for r in rows]  # a second segment from the 4th token on
    first = np.array([r[1] for r in rows])
    label = (first % 5).astype(np.float32) if regression else (first % 2).astype(np.int64)
    lengths = np.array([len(r) for r in rows])
    return Encoded(np.concatenate(rows).astype(np.int32), np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                   np.full(n, 4, dtype=np.int32), label, np.arange(n, dtype=np.int64))


def tagging_files(root: Path) -> Path:
    """A tagging task whose tags follow from the words (one word piece each, in `vocab.txt`): 33 training sentences
    of uneven lengths, some longer than a window of 16 (several windows), and 13 dev sentences."""
    words = [a + b for a in 'abcdefg' for b in 'hijklmn'][:VOCAB - 5]
    root.mkdir(parents=True, exist_ok=True)
    (root / 'vocab.txt').write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', *words]) + '\n')
    rng = random.Random(0)
    for split, n in (('train', 33), ('dev', 13)):
        lines = []
        for _ in range(n):
            for _ in range(rng.randint(2, 24)):
                k = rng.randrange(len(words))
                lines.append(f"{words[k]} {'B-PER' if k % 3 == 0 else 'B-LOC' if k % 3 == 1 else 'O'}")
            lines.append('')
        (root / f'{split}.txt').write_text('\n'.join(lines))
    (root / 'tagging.yaml').write_text('kind: tagging\ntrain: train.txt\ndev: dev.txt\nstride: 4\n')
    return root / 'tagging.yaml'


def qa_files(root: Path) -> Path:
    """A SQuAD 2.0 task (the demo's, 12 training and 6 dev questions) read with `tagging_files`' vocabulary (its words
    are [UNK] there: the answers' positions still decide): questions cut to 6 tokens, so windows of 16 hold 7 context
    tokens and every paragraph takes several."""
    from electra.finetuning.tasks.qa.demo import write_demo_squad
    tagging_files(root)
    write_demo_squad(root, '2.0', sizes={'train': 12, 'dev': 6})
    (root / 'qa.yaml').write_text('kind: squad\ntrain: train.json\ndev: dev.json\nmax_query_length: 6\ndoc_stride: 4\n'
                                  'beam_size: 4\nn_best_size: 4\n')
    return root / 'qa.yaml'


def train(task_name: str, out: Path) -> dict:
    "One run of the task (a GLUE name or a task file) from the same tiny body: its model state and history."
    torch.manual_seed(0)
    cfg = transformers.ElectraConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    body = transformers.ElectraModel(cfg)
    task_cfg = config_from_dict(FinetuneConfig, dict(model='tiny', epochs=2, batch_size=8, eval_batch_size=5, lr=1e-3,
                                                     dropout=0.0, stsb_scale=5.0, length_bucketing=True, max_length=16))
    if task_name.endswith('.yaml'):
        task = make_task(read_task_file(task_name))
        tok = transformers.ElectraTokenizerFast(vocab_file=str(Path(task_name).with_name('vocab.txt')))
        data = task.prepare(task_cfg, tok, out / 'cache', False)
    else:
        task = TASKS[task_name]
        data = TaskData(ClassificationTask(task, None), encoded(33, task.is_regression, 1),
                        {s: encoded(13, task.is_regression, 2 + k) for k, s in enumerate(task.dev_splits)})
    model, history = train_run(data, task_cfg, body, 7, torch.device('cpu'), None, 0)
    return {'model': model.state_dict(), 'history': history}


def main(out: str, *task_names: str) -> None:
    procs = init_distributed(torch.device('cpu'))
    runs = [train(name, Path(out)) for name in task_names]
    finish_distributed()  # every process leaves the group before any exits; the others end here
    if procs.rank == 0:
        for i, r in enumerate(runs): torch.save(r, Path(out) / f'{i}.pt')


if __name__ == '__main__':
    main(sys.argv[1], *sys.argv[2:])
