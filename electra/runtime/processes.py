"""The processes of a job. Each one's place in it (`world`: rank and size, as torchrun describes them in the
environment; `is_main_process`: the one that writes files) and how it was started (`running_in_notebook`, else its
command line, `cli_args`). And processes that live only as long as the process that started them and waits for them: a
job the comparison command launches, the workers of a torchrun job, the processes of a data build. Each is ended by the
kernel when its parent dies, `kill -9` included, instead of running on unseen and holding its run's lock. It ends as a
`kill -9` of itself would: its checkpoints are whole (they are written to a temporary file renamed into place), and
what it left (a temporary file, its lock) is taken over by the next start of the run.

Light on purpose (no torch): a driver binds itself to its parent in its first lines.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from electra.config.cli import cli_args, running_in_notebook  # (how a process was started: config reads it too)
from electra.config.errors import ConfigError

__all__ = ['World', 'world', 'is_main_process', 'running_in_notebook', 'cli_args', 'command_again', 'PARENT_VAR',
           'die_with_parent', 'end_with_parent', 'child_env', 'library_env', 'environment', 'driver_path']

PARENT_VAR = 'ELECTRA_PARENT_PID'  # set by a parent that waits for its child: the child ends when that process does
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class World:
    "This process's place in the job: rank among `size` processes, `local_rank` among the `local_size` of its machine."
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1


def world() -> World:
    "The job's processes as torchrun describes them in the environment (one process when it does not)."
    def read(key: str, default: int) -> int:
        value = os.environ.get(key, '')
        if not value: return default
        try: return int(value)
        except ValueError: raise ConfigError(f"environment: {key}={value!r} is not a number (torchrun sets it).") from None
    size = read('WORLD_SIZE', 1)  # without LOCAL_WORLD_SIZE (set by hand, not by torchrun): the job is on one machine
    w = World(read('RANK', 0), size, read('LOCAL_RANK', 0), read('LOCAL_WORLD_SIZE', size))
    for (rank, rank_key), (size, size_key) in (((w.rank, 'RANK'), (w.size, 'WORLD_SIZE')),
                                               ((w.local_rank, 'LOCAL_RANK'), (w.local_size, 'LOCAL_WORLD_SIZE'))):
        if size < 1 or not 0 <= rank < size:  # a job of 0 processes, or a rank outside it, cannot be
            raise ConfigError(f"environment: {rank_key}={rank} with {size_key}={size}: a job has {size_key} >= 1 "
                              f"processes, ranked 0 to {size_key} - 1 (torchrun sets them; unset them to run one process).")
    return w


def is_main_process() -> bool:
    "Only rank 0 writes files in a torchrun job (a single process is rank 0)."
    return world().rank == 0


def command_again(args: list[str] | None = None, module: str | None = None) -> str | None:
    """The command line that runs this job again, with `args` for its flags (default: its own): `python SCRIPT ...`,
    `python -m MODULE ...` for a module run with -m, `torchrun <the same options> SCRIPT ...` in a torchrun job. None
    in a notebook, which is run again by its cells."""
    if running_in_notebook(): return None
    words = [*(['-m', module] if module else sys.argv[:1]), *(cli_args() if args is None else args)]
    if world().size > 1: return ' '.join(['torchrun <the same options>', *map(shlex.quote, words)])
    return shlex.join(['python', *words])


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process (SIGKILL) when `parent`, the process that started it, dies (Linux's
    PR_SET_PDEATHSIG). A parent that died before the request took effect ends this process at once (status 1)."""
    if sys.platform.startswith('linux'):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        print(f'stopped: the process that started this one (PID {parent}) is gone.', file=sys.stderr, flush=True)
        os._exit(1)


def end_with_parent() -> None:
    """Bind this job to the process that started it, where that process waits for it: the comparison command (which
    names itself in ELECTRA_PARENT_PID, not handed down further) or the agent of a torchrun job, whose workers it
    starts itself. A job started from a shell is left alone: `nohup python pretrain.py &` outlives the shell."""
    parent = os.environ.pop(PARENT_VAR, '')
    if parent: die_with_parent(int(parent))
    elif os.environ.get('TORCHELASTIC_RUN_ID'): die_with_parent(os.getppid())  # the agent, from the first lines on


def child_env(env: dict[str, str]) -> dict[str, str]:
    "`env` for a child process that is to end with this one (`end_with_parent`)."
    return {**env, PARENT_VAR: str(os.getpid())}


def library_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with the folder that holds this `electra` first on PYTHONPATH: a child process imports the library this
    one runs, a checkout's or an installed package's, from whatever folder it starts in."""
    root = str(Path(__file__).resolve().parents[2])
    return {**env, 'PYTHONPATH': os.pathsep.join(p for p in (root, env.get('PYTHONPATH', '')) if p)}


@contextlib.contextmanager
def environment(**values: str):
    "os.environ with `values` set for the block, as it was after (a client that reads its settings there, a child)."
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try: yield
    finally:
        for k, v in old.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v


def driver_path(name: str) -> Path:
    """The driver `name` (pretrain.py, finetune.py) that goes with this `electra`: a wheel's copy, which the build puts
    in electra/jobs/ (setup.py), else the repository's own at the root of the checkout this `electra` is in (a checkout,
    an editable install). The repository holds one copy of each, the notebooks' export."""
    package = Path(__file__).resolve().parents[1]
    root = package.parent
    checkout = (root / 'notebooks').is_dir()  # a checkout's root, not the site-packages folder of a wheel
    path = next((p for p in (package / 'jobs' / name, *([root / name] if checkout else [])) if p.is_file()), None)
    if path is None:
        raise ConfigError(f"{name} is neither in {package / 'jobs'} (a wheel's copy) nor in a checkout: this "
                          "installation is incomplete. Install the package again (`pip install .` from a checkout).")
    return path
