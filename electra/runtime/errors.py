"""How a job ends when it cannot go on: stopped on request (`TrainingStopped`), its loss diverged
(`TrainingDiverged`), a full disk (`disk_full`), a bad setting (config's `ConfigError`); and the drivers' report of
each, one line with no traceback and the exit status a shell tests (`friendly_errors`), whatever became of the
standard streams (`streams`)."""
from __future__ import annotations

import errno
import os
import sys
import warnings

from electra.config.base import ConfigError, RunWarning
from electra.runtime.streams import guard_streams

__all__ = ['TrainingStopped', 'TrainingDiverged', 'disk_full', 'friendly_errors']


class TrainingStopped(Exception):
    "Training stopped on request (Ctrl-C); the message says what was kept and how to continue."
    exit_status = 130  # the shell's status for a process ended by SIGINT


class TrainingDiverged(Exception):
    """The loss became NaN or infinite. A pretraining run stops, with no checkpoint written after it; a fine-tuning run
    stops with no score, the sweep's other runs go on, and the job ends with this error naming it."""
    exit_status = 2  # as a bad setting's: the job cannot go on as it was set up (the message says what to change)


def disk_full(e: BaseException) -> ConfigError | None:
    "The error line of a write that found the disk full (or the quota used up), naming the file; None for anything else."
    if not isinstance(e, OSError): return None
    if e.errno not in (errno.ENOSPC, errno.EDQUOT) and 'No space left on device' not in str(e): return None  # pyarrow: no errno
    where = f' writing {e.filename}' if e.filename else ''
    return ConfigError(f"the disk is full{where} ({e.strerror or 'No space left on device'}). Free space there, or "
                       "point the job's folders (output_dir, cache_dir, test_output_dir, --out) at another disk, and run "
                       "the same command again (pretrain.py: with --resume): what was finished is kept.")


def friendly_errors() -> None:
    """Report what ends a script as one line, no traceback: a `ConfigError` as `error: ...` with exit status 2 (the
    usage-error status of argparse), a full disk and a `TrainingDiverged` the same way, a `TrainingStopped` or a Ctrl-C
    as `stopped: ...` with status 130; other errors are unchanged. A `RunWarning` is one `warning: ...` line (from the
    main process of a torchrun job). A notebook shows errors its own way. And a standard stream that closes or fills
    ends that stream, not the job (`guard_streams`)."""
    guard_streams()
    previous, previous_warning = sys.excepthook, warnings.showwarning

    def show(message, category, *args, **kwargs):
        if not issubclass(category, RunWarning): return previous_warning(message, category, *args, **kwargs)
        if os.environ.get('RANK', '0') == '0': print(f'warning: {message}', file=sys.stderr, flush=True)  # once a job

    def hook(tp, value, tb):
        if issubclass(tp, KeyboardInterrupt): value = TrainingStopped('interrupted by Ctrl-C; nothing after the last '
                                                                      'checkpoint or finished run was kept.')
        elif disk_full(value): value = disk_full(value)
        elif not issubclass(tp, (ConfigError, TrainingDiverged, TrainingStopped)): return previous(tp, value, tb)
        # fastai prefixes an error raised in a callback with "Exception occured in `Cb` when calling event `e`:\n\t"
        text = str(value).split(chr(10) + chr(9), 1)[-1]
        rank = os.environ.get('RANK', '0') if int(os.environ.get('WORLD_SIZE', '1') or 1) > 1 else None
        stopped = isinstance(value, TrainingStopped)
        if not (stopped and rank not in (None, '0')):  # every process of a job stops; the main one says so
            print(f"{'stopped' if stopped else f'[rank{rank}] error' if rank else 'error'}: {text}", file=sys.stderr,
                  flush=True)
        sys.exit(getattr(value, 'exit_status', 2))  # raised in the hook, SystemExit sets the status; atexit still runs
    hook.exits = True  # (init_distributed keeps it: torch's own hook would swallow what it prints)
    sys.excepthook, warnings.showwarning = hook, show
