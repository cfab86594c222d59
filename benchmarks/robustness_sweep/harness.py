"""The sweep's machinery: a case, what it records, the folder it runs in and the commands it runs (sweep.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
ENV = {'HF_HUB_OFFLINE': '1', 'HF_DATASETS_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'OMP_NUM_THREADS': '1',
       'MKL_NUM_THREADS': '1', 'NEPTUNE_MODE': 'offline', 'PYTHONPATH': str(REPO)}


@dataclass
class Proc:
    "What a command left: its status and output, and a note when its result is wrong."
    rc: int
    stdout: str
    stderr: str
    wrong: str = ''
    note: str = ''


@dataclass
class Case:
    id: str
    area: str
    fault: str
    expect: str                       # 'error': it must stop with a clear line; 'ok': it must work
    fn: Callable[['Ctx'], Proc]


@dataclass
class Record:
    id: str
    area: str
    fault: str
    expect: str
    rc: int
    said: str
    traceback: bool
    wrong: str
    verdict: str
    seconds: float
    note: str = ''
    stderr_tail: list = field(default_factory=list)


CASES: list[Case] = []


def case(id: str, area: str, fault: str, expect: str = 'error'):
    def deco(fn):
        assert all(c.id != id for c in CASES), id
        CASES.append(Case(id, area, fault, expect, fn))
        return fn
    return deco


class Ctx:
    "One case's folder (fresh) and the shared fixtures; runs the commands."

    def __init__(self, base: Path, dir: Path):
        self.base, self.dir = base, dir

    # -- fixtures
    @property
    def ckpt(self) -> Path: return self.base / 'pt' / 'tiny_11081_100%.pth'
    @property
    def export(self) -> Path: return self.base / 'pt' / 'tiny_11081'
    @property
    def cache(self) -> Path: return self.base / 'cache'
    @property
    def tasks(self) -> Path: return self.base / 'tasks'
    @property
    def glue(self) -> Path: return self.base / 'cache' / 'demo_glue'
    @property
    def tf(self) -> Path: return REPO / 'tests' / 'fixtures' / 'official_tf' / 'tied'

    def p(self, *parts) -> Path:
        "A path in this case's folder, its parent created."
        path = self.dir.joinpath(*map(str, parts))
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write(self, name, data, encoding='utf-8') -> Path:
        path = self.p(name)
        if isinstance(data, bytes): path.write_bytes(data)
        else: path.write_text(data, encoding=encoding)
        return path

    # -- commands
    def cmd(self, head: list, *args, wrap: str = '') -> list[str]:
        "The command line of a driver; `wrap`: code run before it in the same process (fault injection)."
        if wrap: return [sys.executable, str(REPO / 'benchmarks' / 'robustness_sweep' / 'inject.py'), wrap, *head, *map(str, args)]
        return [sys.executable, *head, *map(str, args)]

    def run(self, argv: list[str], timeout: int = 300, env: dict | None = None) -> Proc:
        r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **ENV, **(env or {})}, errors='replace')
        return Proc(r.returncode, r.stdout, r.stderr)

    def start(self, argv: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
        "A command in the background, its output to `log`, in a process group of its own (killed whole)."
        return subprocess.Popen(argv, cwd=REPO, stdout=open(log, 'w'), stderr=subprocess.STDOUT,
                                env={**os.environ, **ENV, **(env or {})}, start_new_session=True)

    def pretrain_args(self, out: Path | None = None, steps: int = 4, tokenizer: bool = True) -> list:
        "A tiny demo pretraining of `steps` steps into `out` (default: this case's out/), the shared data cache."
        return ['--run_name', 'c', '--steps', steps, '--batch_size', 8, '--log_every', 2, '--warmup_steps', 1,
                '--eval_examples', 8, '--num_proc', 1, '--device', 'cpu', '--cache_dir', self.cache,
                '--output_dir', out or self.p('out'),
                *(['--tokenizer', self.export / 'tokenizer'] if tokenizer else [])]

    def pretrain(self, *args, wrap: str = '', base: bool = True, timeout: int = 300) -> Proc:
        return self.run(self.cmd(['pretrain.py'], *(self.pretrain_args() if base else []), *args, wrap=wrap), timeout)

    def finetune_args(self, group_dir: Path | None = None) -> list:
        "One run of one epoch of the demo RTE from the tiny pretraining, no test predictions."
        out = group_dir or self.dir
        return ['--model', self.ckpt, '--data', self.glue, '--tasks', 'RTE', '--runs', 1, '--epochs', 1,
                '--task_overrides', '{}', '--max_train_samples', 64, '--predict', 'false', '--device', 'cpu',
                '--threads', 1, '--cache_dir', self.cache, '--output_dir', out / 'ft', '--test_output_dir', out / 'test']

    def finetune(self, *args, wrap: str = '', base: bool = True, timeout: int = 300) -> Proc:
        return self.run(self.cmd(['finetune.py'], *(self.finetune_args() if base else []), *args, wrap=wrap), timeout)

    def compare(self, *args, timeout: int = 300) -> Proc:
        return self.run(self.cmd(['-m', 'electra.experiments.compare'], '--output_dir', self.p('cmp'), *args), timeout)

    def convert(self, *args, timeout: int = 300) -> Proc:
        return self.run(self.cmd(['-m', 'electra.convert'], *args), timeout)


def said(stderr: str) -> str:
    "The line a user reads: the first `error:`, `stopped:` or `warning:` line, else the last line of stderr."
    lines = [line for line in stderr.splitlines() if line.strip()]
    for prefix in ('error:', 'stopped:', '[rank'):
        for line in lines:
            if line.startswith(prefix): return line
    for line in lines:
        if line.startswith('warning:'): return line
    return lines[-1] if lines else ''


def verdict(expect: str, p: Proc, traceback: bool) -> str:
    if p.wrong: return 'wrong'
    if traceback: return 'traceback'
    if expect == 'ok': return 'ok' if p.rc == 0 else 'unclear'
    if p.rc == 0: return 'wrong'
    return 'refused' if p.rc == 2 and said(p.stderr).startswith('error:') else 'unclear'


def kill_group(proc: subprocess.Popen) -> None:
    "kill -9 a process started by `Ctx.start` and everything in its process group."
    try: os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError: pass
    proc.wait()


def wait_for(pred: Callable[[], bool], timeout: float = 240, proc: subprocess.Popen | None = None) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred(): return True
        if proc is not None and proc.poll() is not None: return pred()
        time.sleep(0.05)
    return False


