"""`python -m benchmarks.bench scaling`: how pretraining's throughput grows with the number of data-parallel
processes (GPUs), measured on the real job.

For each process count k, one `torchrun --standalone --nproc_per_node k pretrain.py ...` job runs `warmup + steps`
steps on a corpus the benchmark writes into its work directory (the demo grammar of `electra.data.demo`), with a
`vocab.txt` of exactly the preset's vocabulary size: a tokenizer trained on the small demo corpus would stop far
below 30522 tokens, and the embedding gradients that DDP all-reduces would be those of a smaller model than the
preset's. Weak scaling (the default) keeps the per-process batch, so the global batch is k times it; strong scaling
keeps the global batch and gives each process 1/k of it.

The throughput is the job's own figure: the `steps_per_s` column of its metrics.csv, each row's rate over the steps
since the row before, timed inside the fit. Rows up to the warm-up step are left out, so start-up, the data build,
compilation and the export are not in it. Efficiency = examples/s at k / (k x examples/s at 1) (at the smallest k
measured, when 1 is not among them).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from electra.config.cli import load_config, parse_cli
from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig
from electra.data.demo import demo_corpus_text
from electra.data.tokenizer import SPECIAL_TOKENS
from benchmarks.bench.jobs import PRESET_DIR, _table, environment
from electra.training.device import affinity_cpus

__all__ = ['batches', 'bench_scaling', 'default_procs', 'job_command', 'parse_procs', 'read_metrics', 'scaling_args',
           'timed_rate', 'vocab_entries', 'with_efficiency', 'write_data']

REPO = PRESET_DIR.parents[1]
DEFAULTS = {'cuda': {'steps': 100, 'warmup': 20}, 'cpu': {'steps': 20, 'warmup': 5}}
# keys the benchmark sets on every job itself: passing them through would make the jobs measure something else
OWN_KEYS = {'config', 'steps', 'batch_size', 'device', 'log_every', 'eval_examples', 'checkpoint_at', 'logger',
            'corpus', 'tokenizer', 'cache_dir', 'output_dir', 'run_name', 'overwrite', 'resume'}


def cores() -> int:
    "CPU cores this process may use (a container's share, not the host's)."
    return len(affinity_cpus())


def default_procs(n: int) -> list[int]:
    "1, every power of two up to `n` and `n` itself: the process counts to measure on `n` devices."
    out, p = {1}, 1
    while p * 2 <= n:
        p *= 2
        out.add(p)
    return sorted(out | ({n} if n >= 1 else set()))


def parse_procs(text: str) -> list[int]:
    "'4,1,2' -> [1, 2, 4]: the process counts asked for, sorted, each once."
    try: procs = sorted({int(s) for s in text.split(',') if s.strip()})
    except ValueError: raise ValueError(f"--procs {text!r}: expected comma-separated counts, e.g. 1,2,4") from None
    if not procs or procs[0] < 1: raise ValueError(f"--procs {text!r}: counts must be 1 or more")
    return procs


def batches(mode: str, batch_size: int, k: int) -> tuple[int, int]:
    "(per-process batch, global batch) of k processes: weak keeps `batch_size` per process, strong keeps it global."
    if mode == 'weak': return batch_size, k * batch_size
    if batch_size % k:
        raise ValueError(f'strong scaling: the global batch {batch_size} does not split over {k} processes')
    return batch_size // k, batch_size


def scaling_args(argv: list[str]) -> argparse.Namespace:
    """The `scaling` command's arguments (`argv` starts with 'scaling'); other `--key value` pairs go to every job's
    pretrain.py (e.g. `--compile false`). Checks the process counts against the devices before any job starts."""
    p = argparse.ArgumentParser(prog='python -m benchmarks.bench scaling', description=__doc__.split('\n\n')[0],
                                epilog="Other --key value pairs go to every job's pretrain.py (python pretrain.py "
                                       '--help), e.g. --compile false --pad_vocab_multiple 0 for the small preset on '
                                       'a CPU.')
    p.add_argument('what', choices=['scaling'])
    p.add_argument('--preset', default='small', help='pretraining preset in configs/pretrain (small, base, demo, ...)')
    p.add_argument('--procs', default=None, help='process counts, e.g. 1,2,4,8 (default: 1, the powers of two up to '
                   'the visible GPUs (CPU cores with --device cpu), and that count)')
    p.add_argument('--mode', choices=['weak', 'strong'], default='weak', help='weak: the per-process batch stays '
                   '(global = k x it); strong: the global batch stays')
    p.add_argument('--batch_size', type=int, default=None, help="per process (weak) or global (strong); default: the "
                   "preset's batch_size")
    p.add_argument('--steps', type=int, default=None, help='timed steps per job (default: 100 on GPU, 20 on CPU)')
    p.add_argument('--warmup', type=int, default=None, help='untimed steps first (default: 20 on GPU, 5 on CPU)')
    p.add_argument('--device', choices=['cuda', 'cpu'], default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--workdir', default=None, help='corpus, data cache and runs go here (default: a temporary '
                   'directory, removed at the end)')
    p.add_argument('--json', default=None, help='also write the results to this JSON file')
    args, extra = p.parse_known_args(argv)
    args.argv, args.extra = list(argv), extra
    for key in ('steps', 'warmup'):
        if getattr(args, key) is None: setattr(args, key, DEFAULTS[args.device][key])
    if args.steps < 1 or args.warmup < 0: p.error('--steps must be 1 or more and --warmup 0 or more')
    try: bad = sorted(OWN_KEYS & set(parse_cli(extra)))
    except ConfigError as e: p.error(str(e))
    if bad: p.error(f"the benchmark sets {', '.join('--' + b for b in bad)} on every job itself")
    n = torch.cuda.device_count() if args.device == 'cuda' else cores()
    try: args.procs = parse_procs(args.procs) if args.procs else default_procs(n)
    except ValueError as e: p.error(str(e))
    if args.device == 'cuda' and args.procs[-1] > n:
        p.error(f'{args.procs[-1]} processes need as many GPUs; {n} visible')
    return args


def vocab_entries(text: str, size: int) -> list[str]:
    """A WordPiece vocabulary of exactly `size` entries for `text`: the special tokens, its words and punctuation
    (lowercased and split as BERT's pre-tokenizer splits them, so none becomes [UNK]), then never-seen `[unusedN]`
    fillers, as BERT's own vocabulary has."""
    words = sorted(set(re.findall(r'\w+|[^\w\s]', text.lower())))
    head = SPECIAL_TOKENS + words[:max(0, size - len(SPECIAL_TOKENS))]
    return head + [f'[unused{i}]' for i in range(size - len(head))]


def write_data(work: Path, vocab_size: int) -> tuple[Path, Path]:
    "The corpus file and the vocab.txt every job reads; all jobs then share one data cache (keyed by both)."
    text = demo_corpus_text()
    corpus, vocab = work / 'corpus.txt', work / 'vocab.txt'
    corpus.write_text(text, encoding='utf-8')
    vocab.write_text('\n'.join(vocab_entries(text, vocab_size)) + '\n', encoding='utf-8')
    return corpus, vocab


def job_command(args, k: int, global_batch: int, work: Path, corpus: Path, vocab: Path) -> list[str]:
    """The torchrun command of the k-process job: no held-out evaluation and no checkpoints (they would fall inside
    timed intervals), a metrics row at every multiple of gcd(warmup, steps), so that one falls on the warm-up's end."""
    every = math.gcd(args.warmup, args.steps)
    return [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', str(k),
            str(REPO / 'pretrain.py'), '--config', args.preset, *args.extra, '--device', args.device,
            '--steps', str(args.warmup + args.steps), '--batch_size', str(global_batch), '--log_every', str(every),
            '--eval_examples', '0', '--checkpoint_at=', '--logger', 'none', '--corpus', str(corpus),
            '--tokenizer', str(vocab), '--cache_dir', str(work / 'cache'), '--output_dir', str(work / f'procs{k}'),
            '--run_name', 'scaling', '--overwrite', 'true']


def read_metrics(text: str) -> list[dict]:
    "The (step, steps_per_s) of each row of a metrics.csv."
    return [{'step': int(r['step']), 'steps_per_s': float(r['steps_per_s'])} for r in csv.DictReader(text.splitlines())]


def timed_rate(rows: list[dict], warmup: int) -> tuple[float, int]:
    """(steps/s, steps) over the rows after step `warmup`. Each row's rate covers the steps since the row before, so
    the rate of several rows is their steps over the sum of their durations, not the mean of their rates."""
    prev, steps, seconds = 0, 0, 0.0
    for r in sorted(rows, key=lambda r: r['step']):
        if r['step'] > warmup:
            steps += r['step'] - prev
            seconds += (r['step'] - prev) / r['steps_per_s']
        prev = r['step']
    if not steps: raise ValueError(f'no metrics row after the {warmup} warm-up steps')
    return steps / seconds, steps


def with_efficiency(rows: list[dict]) -> list[dict]:
    """Adds `efficiency` to each row: its examples/s over k times the per-process examples/s of the smallest k (1
    when measured: then examples/s at k / (k x examples/s at 1))."""
    base = min(rows, key=lambda r: r['procs'])
    per_proc = base['examples_per_s'] / base['procs']
    return [{**r, 'efficiency': r['examples_per_s'] / (r['procs'] * per_proc)} for r in rows]


def run_job(cmd: list[str], env: dict, log: Path) -> float:
    "Runs one job with its output in `log`; its wall seconds. A failed job stops the benchmark with its last lines."
    t = time.perf_counter()
    with open(log, 'w') as f:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    if rc:
        tail = '\n'.join(log.read_text(errors='replace').splitlines()[-30:])
        raise RuntimeError(f'scaling: the job ended with status {rc}: {" ".join(cmd)}\n{tail}')
    return time.perf_counter() - t


def measure(args, cfg: PretrainConfig, k: int, work: Path, corpus: Path, vocab: Path) -> dict:
    "One job of k processes: its timed rate and the batch it ran."
    per_proc, global_batch = batches(args.mode, args.batch_size or cfg.batch_size, k)
    cmd = job_command(args, k, global_batch, work, corpus, vocab)
    # each process gets its share of the cores (torchrun's default of one thread would starve a CPU job of k < cores)
    threads = int(os.environ.get('OMP_NUM_THREADS') or max(1, cores() // k))
    env = {**os.environ, 'OMP_NUM_THREADS': str(threads)}
    wall = run_job(cmd, env, work / f'procs{k}.log')
    metrics = next((work / f'procs{k}').glob('*/metrics.csv'))
    sps, steps = timed_rate(read_metrics(metrics.read_text()), args.warmup)
    print(f'  {k} process(es), global batch {global_batch}: {sps:.3g} steps/s over {steps} steps '
          f'(the whole job {wall:.0f} s)', flush=True)
    return {'procs': k, 'per_process_batch': per_proc, 'global_batch': global_batch, 'steps_per_s': sps,
            'examples_per_s': sps * global_batch, 'tokens_per_s': sps * global_batch * cfg.max_length,
            'timed_steps': steps, 'threads_per_process': threads, 'job_wall_s': wall, 'command': ' '.join(cmd)}


@contextlib.contextmanager
def workdir(path: str | None):
    "`path` (kept afterwards), or a temporary directory removed at the end."
    if path:
        Path(path).mkdir(parents=True, exist_ok=True)
        yield Path(path)
    else:
        with tempfile.TemporaryDirectory(prefix='electra_scaling_') as tmp: yield Path(tmp)


def scaling_env(device: str) -> dict:
    "Versions and devices, with every visible GPU's name and the communication library."
    env = environment(torch.device(device))
    env['backend'] = 'nccl' if device == 'cuda' else 'gloo'
    if device == 'cuda':
        env['gpus'] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        env['cuda'] = torch.version.cuda
        with contextlib.suppress(Exception):  # a build without NCCL has no version to give
            v = torch.cuda.nccl.version()
            env['nccl'] = '.'.join(map(str, v)) if isinstance(v, tuple) else str(v)
    return env


def bench_scaling(args) -> dict:
    "The `scaling` benchmark: one job per process count; prints and returns the table."
    cfg = load_config(PretrainConfig, ['--config', args.preset, *args.extra], preset_dir=PRESET_DIR)
    for k in args.procs: batches(args.mode, args.batch_size or cfg.batch_size, k)  # all must split, before any runs
    backend = 'nccl' if args.device == 'cuda' else 'gloo'
    print(f'scaling benchmark ({args.mode}): preset {args.preset}, {args.device} ({backend}), '
          f'batch {args.batch_size or cfg.batch_size} {"per process" if args.mode == "weak" else "global"} x length '
          f'{cfg.max_length}, vocabulary {cfg.vocab_size}; {args.warmup} warm-up + {args.steps} timed steps per job; '
          f'processes {",".join(map(str, args.procs))} (the first job also builds the data cache, outside the timing)')
    with workdir(args.workdir) as work:
        corpus, vocab = write_data(work, cfg.vocab_size)
        rows = with_efficiency([measure(args, cfg, k, work, corpus, vocab) for k in args.procs])
    table = [['procs', 'batch/process', 'global batch', 'steps/s', 'examples/s', 'tokens/s', 'efficiency']]
    table += [[str(r['procs']), str(r['per_process_batch']), str(r['global_batch']), f'{r["steps_per_s"]:.3g}',
               f'{r["examples_per_s"]:,.1f}', f'{r["tokens_per_s"]:,.0f}', f'{100 * r["efficiency"]:.1f}%']
              for r in rows]
    k0 = rows[0]['procs']
    base = 'examples/s at 1' if k0 == 1 else f'examples/s at {k0} / {k0}'
    print('\n' + _table(table) + f'\n\nefficiency = examples/s at k / (k x {base}); tokens/s counts the batch\'s '
          f'positions (length {cfg.max_length}, padding included)')
    if args.device == 'cpu': print('on the CPU the processes share the cores: a check of the tool, not a speed figure')
    return {'command': 'python -m benchmarks.bench ' + ' '.join(args.argv), 'env': scaling_env(args.device),
            'config': {'preset': args.preset, 'mode': args.mode, 'device': args.device, 'max_length': cfg.max_length,
                       'vocab_size': cfg.vocab_size, 'warmup': args.warmup, 'steps': args.steps,
                       'extra': args.extra}, 'results': rows}
