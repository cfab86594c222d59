"""The cost of the whole GLUE sweep (every task of the GLUE score x `--runs` seeds of one model), projected from one
task's stacked fine-tuning log, against a target (30 minutes for ELECTRA-Small's ten seeds on one GPU).

    python finetune.py ... --tasks STS-B --runs 10 --stack_runs 10 ... 2>&1 | tee stsb.log
    python -m benchmarks.glue_projection --log stsb.log --task STS-B --json glue_projection.json

The log's epoch lines (`STS-B run 0 (seed ...) epoch 2/3: ... [41.3s]`) give the time since the stack started at the
end of each epoch. The first epoch holds the compilation and the CUDA graphs' capture, so a steady epoch is the mean
of the later ones (epoch k's end less epoch k-1's), dev scoring included. Divided by the epoch's steps (the train
examples over the batch size, rounded up) it is the seconds of one step of the stack, all its runs at once. The
projection multiplies it by each task's steps: its train examples (GLUE's, below) over the batch size, times its
epochs (the small recipe: 3, 10 for RTE and STS-B), the stack doing every seed of a task at once. It assumes a step of
another task costs what a step of the measured one costs: with length buckets a step's time follows its batch's
length, so tasks of longer pairs (MNLI, QQP, QNLI) cost more per step than STS-B; the output says so beside the sum.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
from pathlib import Path

# GLUE's training examples per task (the GLUE benchmark's train splits) and the small recipe's epochs
# (configs/finetune/small.yaml: 3, and 10 for RTE and STS-B, the paper's Table 7)
TRAIN_EXAMPLES = {'CoLA': 8551, 'SST-2': 67349, 'MRPC': 3668, 'STS-B': 5749, 'QQP': 363846, 'MNLI': 392702,
                  'QNLI': 104743, 'RTE': 2490}
EPOCHS = {**{t: 3 for t in TRAIN_EXAMPLES}, 'RTE': 10, 'STS-B': 10}
EPOCH_LINE = re.compile(r'^\s*(?P<task>\S+) run (?P<run>\d+) \(seed \d+\) epoch (?P<epoch>\d+)/(?P<epochs>\d+):'
                        r'.*\[(?P<seconds>[\d.]+)s\]\s*$')


def epoch_ends(log: str, task: str) -> list[float]:
    "The seconds since the stack started at the end of each epoch of `task`'s first stacked run in the log `log`."
    ends, run = {}, None
    for line in log.splitlines():
        m = EPOCH_LINE.match(line)
        if not m or m['task'] != task: continue
        run = m['run'] if run is None else run
        if m['run'] == run: ends[int(m['epoch'])] = float(m['seconds'])
    return [ends[e] for e in sorted(ends)]


def projection(ends: list[float], task: str, examples: int, batch_size: int, target_minutes: float) -> dict:
    "The steady seconds per step of the stack and the whole sweep's projected minutes, with the arithmetic."
    if len(ends) < 2:
        raise SystemExit(f'glue_projection: {task} needs 2 epochs or more in the log (found {len(ends)}): the first '
                         'holds the compilation; run it with more epochs.')
    steady = statistics.mean(b - a for a, b in zip(ends, ends[1:]))  # s per epoch after the first
    steps_per_epoch = math.ceil(examples / batch_size)
    s_per_step = steady / steps_per_epoch
    rows = [{'task': t, 'train_examples': n, 'epochs': EPOCHS[t], 'steps': math.ceil(n / batch_size) * EPOCHS[t],
             'minutes': math.ceil(n / batch_size) * EPOCHS[t] * s_per_step / 60} for t, n in TRAIN_EXAMPLES.items()]
    total = sum(r['minutes'] for r in rows)
    return {'measured_task': task, 'epoch_ends_s': ends, 'steady_epoch_s': steady, 'steps_per_epoch': steps_per_epoch,
            's_per_step': s_per_step, 'tasks': rows, 'total_minutes': total, 'target_minutes': target_minutes,
            'first_epoch_s': ends[0]}


def as_text(p: dict) -> str:
    "The projection as a table, the arithmetic spelled out."
    lines = [f"{p['measured_task']}: epochs end at {', '.join(f'{s:.1f}' for s in p['epoch_ends_s'])} s; steady "
             f"epoch {p['steady_epoch_s']:.2f} s / {p['steps_per_epoch']} steps = {p['s_per_step'] * 1e3:.2f} ms a "
             f"step of the stack (first epoch, compilation included: {p['first_epoch_s']:.1f} s)",
             '| task | train examples | epochs | steps | minutes |', '|---|---:|---:|---:|---:|']
    lines += [f"| {r['task']} | {r['train_examples']:,} | {r['epochs']} | {r['steps']:,} | {r['minutes']:.1f} |"
              for r in p['tasks']]
    lines.append(f"projected sweep: {p['total_minutes']:.1f} minutes (target {p['target_minutes']:.0f}), steps at "
                 f"{p['measured_task']}'s cost; tasks of longer pairs cost more per step with length buckets")
    return '\n'.join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--log', required=True, help='the log of a finetune.py run of one task, stacked, 2+ epochs')
    p.add_argument('--task', default='STS-B')
    p.add_argument('--examples', type=int, default=None, help="the task's train examples (default: GLUE's)")
    p.add_argument('--results', default=None, help="the run's results.csv: the task's train examples from its steps "
                                                   "(the examples of the data it ran on, which a demo task's are not)")
    p.add_argument('--batch_size', type=int, default=32)
    p.add_argument('--target_minutes', type=float, default=30.0)
    p.add_argument('--json', default=None, help='also write the projection to this JSON file')
    args = p.parse_args(argv)
    ends = epoch_ends(Path(args.log).read_text(errors='replace'), args.task)
    examples = args.examples or TRAIN_EXAMPLES[args.task]
    if args.results:  # steps = epochs x ceil(examples / batch size): the examples, to within one batch
        row = next(r for r in csv.DictReader(open(args.results)) if r['task'] == args.task)
        examples = int(row['steps']) // len(ends) * args.batch_size
    result = projection(ends, args.task, examples, args.batch_size, args.target_minutes)
    print(as_text(result))
    if args.json: Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == '__main__':
    main()
