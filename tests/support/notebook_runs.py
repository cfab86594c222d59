"""Runs that `tests/test_notebooks.py` and `tests/tools/test_explore.py` share: a tiny pretraining through
`pretrain.py` run as a script (once per test session, kept in pytest's temporary directory that the suite's worker
processes share), and executing a
notebook with nbclient under a time bound, its config cell's `overrides` set by the test."""
from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from electra.tools.figures import execute_notebook as execute
from tests.support import forked
from tests.support.pretrain import run_driver

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / 'notebooks'

# the demo preset (model size, corpus, tokenizer) cut to a few steps
TINY_PRETRAIN = ['--run_name', 'tiny', '--steps', '20', '--batch_size', '8', '--log_every', '10', '--warmup_steps', '2',
                 '--device', 'cpu']
# a model this small runs fastest on one thread, above all on a busy machine
ENV = {'HF_HUB_OFFLINE': '1', 'HF_DATASETS_OFFLINE': '1', 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}


def run_script(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    "`python <script> <args>` from the repository root, as a user runs it."
    env = {**os.environ, **ENV, 'PYTHONPATH': str(REPO)}
    return forked.run([sys.executable, str(REPO / script), *map(str, args)], cwd=REPO, capture_output=True,
                      text=True, env=env, timeout=timeout)


def run_in_process(script: str, *args) -> str:
    """`python <script> <args>` from the repository root run in this process (`run_driver`: its imports are done here
    already, a process would spend seconds on them), in `run_script`'s environment, this process's threads put back
    afterwards: what it printed."""
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as m, contextlib.redirect_stdout(io.StringIO()) as printed:
        for k, v in ENV.items(): m.setenv(k, v)
        try: run_driver(script, list(map(str, args)))
        finally: torch.set_num_threads(threads)
    return printed.getvalue()


def tiny_pretraining(tmp_path_factory) -> dict:
    """`pretrain.py --config demo` cut to 20 steps, run as a script with command-line flags (in this process:
    `run_in_process`); once per session, by whichever worker process (pytest-xdist) asks first, under a lock the others
    wait on. Returns the checkpoint, run directory, cache directory, stdout and run time."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'): base = base.parent  # the session's folder, above each worker's own
    out = base / 'tiny_pretraining'
    out.mkdir(parents=True, exist_ok=True)
    record = out / 'run.json'
    with open(out / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if record.is_file(): return json.loads(record.read_text())
        start = time.monotonic()
        stdout = run_in_process('pretrain.py', '--output_dir', out / 'ckpt', '--cache_dir', out / 'cache', *TINY_PRETRAIN)
        info = {'checkpoint': str(out / 'ckpt' / 'tiny_11081_100%.pth'), 'run_dir': str(out / 'ckpt' / 'tiny_11081'),
                'cache_dir': str(out / 'cache'), 'stdout': stdout, 'seconds': round(time.monotonic() - start, 1)}
        record.write_text(json.dumps(info))
        return info


def execute_notebook(path: Path, overrides: dict, time_bound: float, cwd: Path = NOTEBOOKS, epilogue: str = ''):
    """Execute notebook `path` top to bottom in a fresh kernel (`electra.tools.figures.execute_notebook`: `overrides`
    after the cell tagged `parameters`, `epilogue` as a last cell), within `time_bound` seconds, as a user runs it.
    Returns the executed notebook and the seconds it took."""
    return execute(path, overrides, cwd, time_bound, ENV, epilogue)


def outputs_text(nb) -> str:
    "All text a notebook's cells printed or displayed (stream, text/plain, text/html, text/markdown)."
    parts = []
    for cell in nb.cells:
        for out in cell.get('outputs', []):
            if out.get('output_type') == 'stream': parts.append(out.get('text', ''))
            for mime in ('text/plain', 'text/html', 'text/markdown'):
                if mime in out.get('data', {}): parts.append(out['data'][mime])
    return '\n'.join(parts)


def has_image(nb) -> bool:
    return any('image/png' in out.get('data', {}) for c in nb.cells for out in c.get('outputs', []))
