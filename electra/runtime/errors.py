"""How a job ends when it cannot go on: stopped on request (`TrainingStopped`: Ctrl-C, or a stop signal that
`stop_on_signals` turns into one), its loss diverged (`TrainingDiverged`), a full disk (`disk_full`), a folder where a
file goes (`in_the_way`), a bad setting (config's `ConfigError`); and the drivers' report of each, one line with no
traceback and the exit status a shell tests (`friendly_errors`), whatever became of the standard streams (`streams`)."""
from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import warnings

from electra.config.errors import ConfigError, RunWarning
from electra.runtime.processes import running_in_notebook
from electra.runtime.streams import guard_streams

__all__ = ['TrainingStopped', 'TrainingDiverged', 'StopSignal', 'STOP_SIGNALS', 'stopped_by', 'stop_on_signals',
           'disk_full', 'in_the_way', 'friendly_errors']

# what ends a job politely besides Ctrl-C: batch schedulers and `kill` (SIGTERM), a closed terminal or ssh session
# (SIGHUP), a scheduler's warning before it preempts (SIGUSR1, SIGUSR2: SLURM's --signal, docs/preemption.md)
STOP_SIGNALS = ('SIGTERM', 'SIGHUP', 'SIGUSR1', 'SIGUSR2')


class TrainingStopped(Exception):
    """Training stopped on request (Ctrl-C or a stop signal); the message says what was kept and how to continue.
    Its status, 130, is the one to requeue on: the job kept what it did and the command it names goes on from there."""
    exit_status = 130  # the shell's status for a process ended by SIGINT; the same for every stop (docs/preemption.md)


class StopSignal(KeyboardInterrupt):
    "A stop signal, raised where Ctrl-C raises KeyboardInterrupt: whatever handles Ctrl-C handles it the same way."

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def stopped_by(how: BaseException | int | None) -> str:
    "What stopped a job, for its messages: 'Ctrl-C' (SIGINT, a KeyboardInterrupt), else the signal's name ('SIGTERM')."
    signum = getattr(how, 'signum', how)
    return signal.Signals(signum).name if isinstance(signum, int) and signum != signal.SIGINT else 'Ctrl-C'


def stop_on_signals() -> None:
    """Make SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 stop this process as Ctrl-C does: each goes to the handler SIGINT has
    at that moment (during pretraining's fit `StopOnInterrupt`'s: the step ends and is checkpointed), or is raised as
    a `StopSignal` where Ctrl-C's KeyboardInterrupt would be. Once a stop is under way the next stop signals are
    ignored (a scheduler repeating itself, a parent passing on what its process group got too): only Ctrl-C stops at
    once; so are those that come once the job's program has returned, while its atexit functions run. Not in a notebook, whose kernel has its handlers, nor off the main thread (Python's rule); a SIGINT that
    is ignored (a job started in the background by a script) stays ignored. A process forked from this one (a data
    build's, a DataLoader's) gets Python's own handlers back: its parent ends it."""
    if running_in_notebook() or threading.current_thread() is not threading.main_thread(): return
    stops = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]  # (Windows has SIGTERM alone)
    pending = []  # the signal that started the stop under way, if any

    def handle(signum, frame):
        # the main program has returned (Python marks its thread ended before the atexit functions): the work is done
        if not threading.main_thread().is_alive() and signum != signal.SIGINT: return
        current = signal.getsignal(signal.SIGINT)
        if callable(current) and current not in (handle, signal.default_int_handler):  # StopOnInterrupt's, ...
            return current(signum, frame)
        if pending and signum != signal.SIGINT: return
        pending.append(signum)
        raise StopSignal(signum)

    def python_handlers():
        # a forked build process stopped by its parent's SIGTERM would otherwise raise in its exit and print a traceback
        for sig in stops: signal.signal(sig, signal.SIG_DFL)
        if signal.getsignal(signal.SIGINT) is handle: signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in stops: signal.signal(sig, handle)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler: signal.signal(signal.SIGINT, handle)
    if hasattr(os, 'register_at_fork'): os.register_at_fork(after_in_child=python_handlers)


def ending() -> None:
    """The job is ending (its error or stop being said, then its atexit functions): the stop signals are ignored from
    here, as once a stop is under way. torchrun sends SIGTERM to a job's other processes when one fails, and one that
    was ending with its own error raised it inside the hook or an atexit function, a traceback after its one line."""
    if threading.current_thread() is not threading.main_thread(): return
    for name in STOP_SIGNALS:
        if hasattr(signal, name): signal.signal(getattr(signal, name), signal.SIG_IGN)


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


def in_the_way(e: BaseException) -> ConfigError | None:
    """The error line of a folder found where the job reads or writes a file, or of a file where it expects a folder,
    naming it (the target of a rename, not its temporary file); None for anything else. The drivers check the files
    they know of before any work (`writable_files`, `writable_dir`); this names any other."""
    if not isinstance(e, OSError) or e.errno not in (errno.EISDIR, errno.ENOTDIR) or not e.filename: return None
    path = e.filename2 or e.filename
    what = ('is a folder where the job reads or writes a file', 'Move that folder away') if e.errno == errno.EISDIR \
        else ('is below a file, where the job expects a folder', 'Move that file away')
    return ConfigError(f"'{path}' {what[0]} ({e.strerror}). {what[1]} (or choose another folder for the job's outputs) "
                       "and run the same command again (pretrain.py: with --resume): what was finished is kept.")


def friendly_errors() -> None:
    """Report what ends a script as one line, no traceback: a `ConfigError` as `error: ...` with exit status 2 (the
    usage-error status of argparse), a full disk, a folder or file in the way (`in_the_way`) and a `TrainingDiverged`
    the same way, a `TrainingStopped` or a Ctrl-C as `stopped: ...` with status 130; other errors are unchanged. A
    `RunWarning` is one `warning: ...` line (from the main process of a torchrun job). A notebook shows errors its own
    way. The stop signals end the script as Ctrl-C does (`stop_on_signals`), and a standard stream that closes or
    fills ends that stream, not the job (`guard_streams`)."""
    stop_on_signals()
    guard_streams()
    previous, previous_warning = sys.excepthook, warnings.showwarning

    def show(message, category, *args, **kwargs):
        if not issubclass(category, RunWarning): return previous_warning(message, category, *args, **kwargs)
        if os.environ.get('RANK', '0') == '0': print(f'warning: {message}', file=sys.stderr, flush=True)  # once a job

    def hook(tp, value, tb):
        ending()
        if issubclass(tp, KeyboardInterrupt): value = TrainingStopped(f'interrupted by {stopped_by(value)}; nothing '
                                                                      'after the last checkpoint or finished run was kept.')
        elif (known := disk_full(value) or in_the_way(value)) is not None: value = known
        elif not issubclass(tp, (ConfigError, TrainingDiverged, TrainingStopped)): return previous(tp, value, tb)
        # fastai prefixes an error raised in a callback with "Exception occured in `Cb` when calling event `e`:\n\t"
        text = str(value).split(chr(10) + chr(9), 1)[-1]
        size = os.environ.get('WORLD_SIZE', '').strip()  # (read as it is: the hook must not fail on a bad one)
        rank = os.environ.get('RANK', '0') if size.isdigit() and int(size) > 1 else None
        stopped = isinstance(value, TrainingStopped)
        if not (stopped and rank not in (None, '0')):  # every process of a job stops; the main one says so
            print(f"{'stopped' if stopped else f'[rank{rank}] error' if rank else 'error'}: {text}", file=sys.stderr,
                  flush=True)
        sys.exit(getattr(value, 'exit_status', 2))  # raised in the hook, SystemExit sets the status; atexit still runs
    hook.exits = True  # (init_distributed keeps it: torch's own hook would swallow what it prints)
    sys.excepthook, warnings.showwarning = hook, show
