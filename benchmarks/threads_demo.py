"""The README's first command, `python pretrain.py` (the demo), timed by CPU threads: the default (`--threads auto`),
one thread and every core, on an idle CPU and with one core kept busy by a spinning process this script starts, in
one run. Each setting runs `--repeats` times, interleaved with the others; the table gives the median wall time of
each and the default's ratio to the better of one thread and all cores (the target: at most 1.15).

    python -m benchmarks.threads_demo                          # the demo as the README runs it; on an idle machine
    python -m benchmarks.threads_demo --steps 20 --repeats 1   # a quick check that it works

Writes `<out>.json` (every run: its condition, setting, wall seconds and the threads the job reported choosing; the
machine, the versions, the load before each condition) and `<out>.md` (the table), default benchmarks/threads_demo.
It uses the library as a user does: the driver in a subprocess, `electra.training.device` for the load it sees.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.bench.jobs import environment
from electra.training.device import affinity_cpus, busy_cores

ROOT = Path(__file__).resolve().parents[1]
CONDITIONS = ('idle', 'one core busy')
CHOSEN = re.compile(r'\((?:fp32|bf16|fp16), (\d+) CPU threads? \(([^)]*)\)\)')  # pretrain.py's first line


def run_demo(threads: str, steps: int | None, out_dir: Path) -> dict:
    "One `python pretrain.py` with `--threads threads`: its wall seconds and the threads it reported choosing."
    cmd = [sys.executable, str(ROOT / 'pretrain.py'), '--threads', threads, '--run_name', 'threads_bench',
           '--output_dir', str(out_dir), '--overwrite', 'true',
           *(['--steps', str(steps), '--warmup_steps', str(steps // 4)] if steps else [])]  # the demo's warm-up share
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f'error: {" ".join(cmd)} failed (exit status {proc.returncode}):\n{proc.stderr[-2000:]}')
    found = CHOSEN.search(proc.stdout)
    return {'wall_s': round(wall, 2), 'threads_used': int(found.group(1)) if found else None,
            'why': found.group(2) if found else None, 'warnings': [l for l in proc.stderr.splitlines() if 'warning' in l.lower()]}


def spinner() -> subprocess.Popen:
    "A process that keeps one core busy until killed."
    proc = subprocess.Popen([sys.executable, '-c', 'while True: pass'])
    time.sleep(1.0)  # running before the job under test starts
    return proc


def measure(settings: dict[str, str], repeats: int, steps: int | None, out_dir: Path) -> tuple[list[dict], dict]:
    "Every run of every setting in both conditions, and the load each condition started with."
    runs, load = [], {}
    for condition in CONDITIONS:
        spin = spinner() if condition == 'one core busy' else None
        try:
            load[condition] = {'busy_cores_seen': round(busy_cores(affinity_cpus(), 1.0), 2), 'loadavg': os.getloadavg()}
            for repeat in range(repeats):
                for name, value in settings.items():
                    runs.append({'condition': condition, 'setting': name, 'repeat': repeat,
                                 **run_demo(value, steps, out_dir)})
                    print(json.dumps(runs[-1]), flush=True)
        finally:
            if spin is not None:
                spin.kill()
                spin.wait()
    return runs, load


def table(runs: list[dict], settings: dict[str, str]) -> tuple[str, dict]:
    "The markdown table (median wall seconds; the default's ratio to the better fixed setting) and its numbers."
    lines = ['| condition | ' + ' | '.join(settings) + ' | default / best of the others | within 15% |',
             '|---|' + '---:|' * (len(settings) + 2)]
    summary = {}
    for condition in CONDITIONS:
        mine = [r for r in runs if r['condition'] == condition]
        median = {s: statistics.median(r['wall_s'] for r in mine if r['setting'] == s) for s in settings}
        used = {s: sorted({r['threads_used'] for r in mine if r['setting'] == s}) for s in settings}
        default, others = list(settings)[0], list(settings)[1:]
        ratio = median[default] / min(median[s] for s in others)
        summary[condition] = {'median_wall_s': median, 'threads_used': used, 'default_ratio': round(ratio, 3)}
        cells = [f"{median[s]:.1f} s ({'/'.join(map(str, used[s]))} thr.)" for s in settings]
        lines.append(f"| {condition} | {' | '.join(cells)} | {ratio:.2f} | {'yes' if ratio <= 1.15 else 'no'} |")
    return '\n'.join(lines), summary


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.threads_demo", description=__doc__.split('\n\n')[0])
    p.add_argument('--steps', type=int, default=None, help="pretraining steps (default: the demo preset's), a quarter "
                                                           "of them warm-up")
    p.add_argument('--repeats', type=int, default=3, help='runs of each setting in each condition')
    p.add_argument('--out', default=str(ROOT / 'benchmarks' / 'threads_demo'), help='<out>.json and <out>.md')
    args = p.parse_args(argv)
    n = len(affinity_cpus())
    settings = {'default (auto)': 'auto', '1 thread': '1', f'all {n} cores': str(n)}
    with tempfile.TemporaryDirectory(prefix='threads_bench-') as tmp:
        run_demo('1', 1, Path(tmp))  # untimed: builds the demo corpus and its cache, as any first run does
        runs, load = measure(settings, args.repeats, args.steps, Path(tmp))
    text, summary = table(runs, settings)
    steps = f'{args.steps} steps' if args.steps else "the demo preset's steps"
    header = (f"`python pretrain.py` ({steps}), median wall time of {args.repeats} run(s) per setting; "
              f"{environment(torch.device('cpu'))['cpu']}, {n} cores")
    record = {'command': ' '.join(['python', '-m', 'benchmarks.threads_demo', *(argv if argv is not None else sys.argv[1:])]),
              'steps': args.steps, 'repeats': args.repeats, 'environment': environment(torch.device('cpu')),
              'cores': n, 'load_at_start': load, 'summary': summary, 'runs': runs}
    Path(f'{args.out}.json').write_text(json.dumps(record, indent=1) + '\n', encoding='utf-8')
    Path(f'{args.out}.md').write_text(f'{header}\n\n{text}\n', encoding='utf-8')
    print(f'\n{header}\n\n{text}\n\n{args.out}.json, {args.out}.md')


if __name__ == '__main__':
    main()
