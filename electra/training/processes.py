"""Processes that live only as long as the process that started them and waits for them: a job the comparison
command launches, the workers of a torchrun job, the processes of a data build. Each is ended by the kernel when its
parent dies, `kill -9` included, instead of running on unseen and holding its run's lock. It ends as a `kill -9` of
itself would: its checkpoints are whole (they are written to a temporary file renamed into place), and what it left
(a temporary file, its lock) is taken over by the next start of the run.

Light on purpose (no torch): a driver binds itself to its parent in its first lines.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ['PARENT_VAR', 'die_with_parent', 'end_with_parent', 'child_env']

PARENT_VAR = 'ELECTRA_PARENT_PID'  # set by a parent that waits for its child: the child ends when that process does
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


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
