"""The demo's STS-B and RTE fine-tuning, 4 runs each, stacked (`--stack_runs 4`: one vmapped model pass) against one
run at a time (`--stack_runs 1`), in one process: wall time per task and mode, the runs' dev scores, the speed-up.

    python pretrain.py                                     # the demo's pretrained model, which the demo fine-tunes
    python -m benchmarks.stack_runs                        # both modes on the CPU, 1 round
    python -m benchmarks.stack_runs --rounds 3             # 3 rounds (median times)
    python -m benchmarks.stack_runs --device cuda --out benchmarks/stack_runs_gpu

Each round runs the sweep of both tasks in each mode (the order flips every other round), as `finetune.py` runs it
(`run_sweep` with the demo preset, its dropout on), into a temporary folder. Dropout masks differ between the modes
(a stacked run draws its own under vmap), so the scores agree only within the runs' spread. Writes `<out>.json`
(every sweep's seconds and rows, the machine and versions), default benchmarks/stack_runs_cpu.json. On the CPU the
demo preset's one thread is used (`--threads`: another number, the same for both modes); on a GPU its default
precision (bf16).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from electra.config.cli import load_config
from electra.config.finetune import FinetuneConfig
from electra.finetuning.loading import load_pretrained
from electra.finetuning.sweep import resolve_data, run_sweep
from benchmarks.bench.jobs import environment
from electra.training.device import use_cpu_threads

ROOT = Path(__file__).resolve().parents[1]
TASKS = ('STS-B', 'RTE')


def sweep(mode: int, task: str, out: Path, args) -> dict:
    "One sweep of `task` (4 runs) with `stack_runs` = mode: its seconds and its rows."
    cfg = load_config(FinetuneConfig, [], preset_dir=ROOT / 'configs/finetune', default_preset='demo', overrides=dict(
        model=args.model, tasks=[task], runs=args.runs, stack_runs=mode, predict=False, device=args.device, group=f'{task}_{mode}',
        output_dir=str(out / 'ckpt'), cache_dir=str(ROOT / 'cache')))
    pretrained, tokenizer = load_pretrained(cfg.model)
    source = resolve_data(cfg.data, cfg.cache_dir)
    start = time.perf_counter()
    table = run_sweep(cfg, pretrained, tokenizer, source, log=lambda *_: None)
    seconds = time.perf_counter() - start
    rows = table.df[['run', 'seed', 'score', 'train_loss']].to_dict('records')
    return {'task': task, 'stack_runs': mode, 'seconds': round(seconds, 2), 'rows': rows}


def summary(results: list[dict], runs: int) -> list[dict]:
    "Per task: the median seconds of each mode, the speed-up, and each mode's scores (mean, std over runs)."
    out = []
    for task in TASKS:
        of = {m: [r for r in results if r['task'] == task and r['stack_runs'] == m] for m in (runs, 1)}
        secs = {m: statistics.median(r['seconds'] for r in of[m]) for m in of}
        scores = {m: [row['score'] for r in of[m] for row in r['rows']] for m in of}
        out.append({'task': task, 'one_by_one_s': secs[1], 'stacked_s': secs[runs], 'speedup': round(secs[1] / secs[runs], 2),
                    **{f'{name}_score_mean': round(statistics.mean(scores[m]), 2) for name, m in (('one_by_one', 1), ('stacked', runs))},
                    **{f'{name}_score_std': round(statistics.stdev(scores[m]), 2) for name, m in (('one_by_one', 1), ('stacked', runs))}})
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--model', default='checkpoints/pretrain/demo_11081_100%.pth')
    p.add_argument('--runs', type=int, default=4, help='runs per task, all stacked in the stacked mode')
    p.add_argument('--rounds', type=int, default=1)
    p.add_argument('--device', default='cpu', help="'cpu' or 'cuda'")
    p.add_argument('--threads', type=int, default=1, help="CPU threads of both modes (the demo preset's 1)")
    p.add_argument('--out', default=str(ROOT / 'benchmarks/stack_runs_cpu'))
    args = p.parse_args(argv)
    os.chdir(ROOT)
    if args.device == 'cpu': print(f'this process: {use_cpu_threads(args.threads)}')  # both modes the same threads
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for mode in ((1, args.runs) if k % 2 == 0 else (args.runs, 1)):
                for task in TASKS:
                    results.append(sweep(mode, task, Path(tmp) / f'round{k}', args))
                    r = results[-1]
                    scores = ', '.join(f"{row['score']:.2f}" for row in r['rows'])
                    print(f"round {k + 1}: {task} stack_runs {mode}: {r['seconds']:.1f}s, scores {scores}", flush=True)
    table = summary(results, args.runs)
    for t in table:
        print(f"{t['task']}: one by one {t['one_by_one_s']:.1f}s, stacked {t['stacked_s']:.1f}s, x{t['speedup']:.2f}; "
              f"score {t['one_by_one_score_mean']:.2f} +- {t['one_by_one_score_std']:.2f} one by one, "
              f"{t['stacked_score_mean']:.2f} +- {t['stacked_score_std']:.2f} stacked")
    Path(args.out + '.json').write_text(json.dumps({'command': f"python -m benchmarks.stack_runs {' '.join(argv or sys.argv[1:])}".strip(),
                                                    'environment': environment(torch.device(args.device)), 'summary': table, 'sweeps': results},
                                                   indent=1, default=str))


if __name__ == '__main__':
    main()
