"""The standard streams of a job: a stream that closes or fills never costs the job its work. stdout piped into a
reader that stops early (`python pretrain.py | head -3`: the next write finds no reader, EPIPE), a stream closed when
the job started (`>&-`, `2>&-`), one into a full device (`>/dev/full`: ENOSPC) or a terminal that went away (EIO): the
job goes on, with no traceback and nothing blamed on its output folders, and says so in its log file.

`guard_streams` (called by `friendly_errors`, the first line of every program) puts each of `sys.stdout` and
`sys.stderr` behind a `_Stream` that writes to the stream and to the job's log. A failed write ends that stream (its
file descriptor then points at /dev/null, so that Python's own flush at exit, C code and child processes write nowhere
instead of failing again) and writes one line to the log (for stdout, once the log is open, one to stderr too):
`stdout: its reader stopped reading (Broken pipe); the job goes on, its output only in this log from here on`.

The log: `log.txt` in the run's folder (`log_to`), appended to by every start of the run under a header line with the
time and the command; written by the main process of a torchrun job only, as every file of a run (the others print
what it prints, and their streams are guarded all the same). What was written before the folder was
known is held (up to 1 MB) and written first. Lines redrawn with a carriage return (progress bars) are kept as last
drawn. A notebook keeps its own streams.
"""
from __future__ import annotations

import atexit
import errno
import io
import os
import shlex
import sys
import threading
from datetime import datetime
from typing import Callable
from pathlib import Path

from electra.runtime.processes import running_in_notebook, world

__all__ = ['LOG_NAME', 'guard_streams', 'log_to', 'also_in_log']

LOG_NAME = 'log.txt'
_HELD = 1 << 20  # characters of output held until the log file opens; older lines are dropped, and counted


def _as_drawn(text: str) -> str:
    "`text` as a terminal shows it after its carriage returns: what the last one drew (a progress bar's last state)."
    body = text.rstrip('\r')
    return text[body.rfind('\r') + 1:]


class _Log:
    "The job's output, both streams, line by line: held in memory until `open`, then appended to the log file."

    def __init__(self):
        self.lock = threading.RLock()  # the fastai loop, prefetch threads and the main thread all print
        self.file, self.path = None, None
        self.kept = True  # False: lines are not held for a log file (a process that writes none)
        self.held: list[str] = []
        self.held_size = self.dropped = 0
        self.partial: dict[str, str] = {}  # each stream's line not yet ended by a newline
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        self.lock = threading.RLock()  # a forked child (a data-loading worker) may start while another thread holds it

    def write(self, name: str, text: str) -> None:
        with self.lock:
            *lines, rest = (self.partial.get(name, '') + text).split('\n')
            self.partial[name] = _as_drawn(rest)
            for line in lines: self._line(_as_drawn(line).rstrip('\r'))

    def note(self, text: str) -> None:
        "A line of the library's own about the streams, with the time."
        with self.lock: self._line(f"[{datetime.now().isoformat(sep=' ', timespec='seconds')}] {text}")

    def _line(self, line: str) -> None:
        if self.file is None:
            if not self.kept: return
            self.held.append(line)
            self.held_size += len(line) + 1
            while self.held_size > _HELD and len(self.held) > 1:
                self.held_size -= len(self.held.pop(0)) + 1
                self.dropped += 1
            return
        try:
            self.file.write(line + '\n')
            self.file.flush()
        except OSError as e:  # the log's own disk: the job's next checkpoint reports it, naming the file
            self.file = None
            self.held, self.held_size = [f'(the log file {self.path} could not be written: {e.strerror or e})'], 0

    def open(self, path: Path) -> None:
        "Append to `path` from now on, under a header line, after what was held (a log opened before is closed)."
        with self.lock:
            if path == self.path and self.file is not None: return
            self.close()
            self.file, self.path = open(path, 'a', encoding='utf-8', errors='replace'), path
            held, dropped = self.held, self.dropped
            self.held, self.held_size, self.dropped = [], 0, 0
            self._line(f"=== {datetime.now().isoformat(sep=' ', timespec='seconds')} {shlex.join(sys.argv)} "
                       f"(PID {os.getpid()})")
            if dropped: self._line(f'({dropped} earlier lines not kept)')
            for line in held: self._line(line)

    def close(self) -> None:
        with self.lock:
            for name, rest in self.partial.items():
                if rest: self._line(rest.rstrip('\r'))
            self.partial = {}
            if self.file is not None: self.file.close()
            self.file = None


def _reason(e: BaseException) -> str:
    "What happened to a stream, in words, from the error of a write to it."
    if isinstance(e, OSError) and e.errno == errno.EPIPE: return 'its reader stopped reading (Broken pipe)'
    if isinstance(e, OSError): return e.strerror or str(e)
    return 'closed'  # ValueError: I/O operation on closed file


class _Stream(io.TextIOBase):
    "`sys.stdout` or `sys.stderr` of a job: the stream and the job's log; a write the stream refuses ends the stream."

    def __init__(self, name: str, stream, log: _Log, fd: int):
        self.name, self.stream, self.log = name, stream, log
        self.fd = fd if stream is None else _descriptor(stream)  # closed at the start: `fd`, now /dev/null
        self.other: _Stream | None = None  # stdout's: stderr, told when stdout ends

    def write(self, text: str) -> int:
        self.log.write(self.name, text)
        self.show(text)
        return len(text)

    def flush(self) -> None:
        if self.stream is None: return
        try: self.stream.flush()
        except (OSError, ValueError) as e: self.end(_reason(e))

    def end(self, reason: str) -> None:
        "The stream is gone (`reason`): its descriptor onto /dev/null, the job goes on, said in the log and elsewhere."
        if self.stream is not None and self.fd is not None: _onto_devnull(self.fd)
        self.stream = None
        self.log.note(f'{self.name}: {reason}; the job goes on, its output only in this log from here on')
        # on stderr where the log is open (else the log says it when it opens: `--help | head` is as quiet as usual);
        # never on stdout, the job's data
        if self.name == 'stdout' and self.other is not None and self.log.path is not None:
            self.other.show(f'note: stdout: {reason}; the job goes on, its output in {self.log.path}\n')

    def show(self, text: str) -> None:
        "`text` on the stream only (`write` puts it in the log too); a failure is seen at this write, not at exit."
        if self.stream is None: return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError) as e: self.end(_reason(e))

    def isatty(self) -> bool:
        try: return self.stream is not None and self.stream.isatty()
        except (OSError, ValueError): return False

    def fileno(self) -> int:
        if self.fd is None: raise io.UnsupportedOperation('fileno')
        return self.fd

    def writable(self) -> bool: return True

    @property
    def encoding(self) -> str: return getattr(self.stream, 'encoding', None) or 'utf-8'

    @property
    def errors(self) -> str: return getattr(self.stream, 'errors', None) or 'strict'


def _descriptor(stream) -> int | None:
    "The file descriptor under `stream`, or None (not a file: a test's capture)."
    try: return stream.fileno()
    except (OSError, ValueError): return None  # io.UnsupportedOperation is both


def _onto_devnull(fd: int, only_if_closed: bool = False) -> None:
    "Point file descriptor `fd` at /dev/null (`only_if_closed`: only when it is closed, so no file opened later gets it)."
    if only_if_closed:
        try:
            os.fstat(fd)
            return
        except OSError: pass
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def guard_streams() -> None:
    """Put `sys.stdout` and `sys.stderr` behind `_Stream`s writing to the job's log too (once; not in a notebook). A
    standard descriptor closed when the job started is pointed at /dev/null first: a file the job opens would take its
    number, and whatever writes to it (a child process, C code) would write into that file."""
    if running_in_notebook() or isinstance(sys.stdout, _Stream): return
    for fd in (0, 1, 2): _onto_devnull(fd, only_if_closed=True)
    log = _Log()
    # Python gives None for a stream whose descriptor was closed at its start, in sys.__stdout__ too; transformers'
    # import puts an open /dev/null in sys.stderr then, so the one to read is sys.__stderr__
    out, err = (_Stream(name, stream if original is not None else None, log, fd) for name, stream, original, fd in
                (('stdout', sys.stdout, sys.__stdout__, 1), ('stderr', sys.stderr, sys.__stderr__, 2)))
    out.other = err
    sys.stdout, sys.stderr = out, err
    atexit.register(log.close)
    for s in [s for s in (out, err) if s.stream is None]: s.end('closed when the job started')


def log_to(folder: str | Path) -> Path | None:
    """The job's log from here on: `folder`/log.txt, with what was written before; its path. None where the streams
    are not guarded (a notebook) and in the other processes of a torchrun job, which write no files."""
    if not isinstance(sys.stdout, _Stream): return None
    log = sys.stdout.log
    if world().rank != 0:
        with log.lock: log.kept, log.held = False, []
        return None
    log.open(Path(folder) / LOG_NAME)
    return log.path


def also_in_log(say: Callable[[str], None], folder: str | Path, what: str) -> Callable[[str], None]:
    """`say`, each line also appended to `folder`/log.txt under a header line naming `what`: the job's log where the
    streams are not the job's (`log_to` gave None: a notebook, a script calling the library), its own lines only."""
    path = Path(folder) / LOG_NAME
    with open(path, 'a', encoding='utf-8') as f:
        f.write(f"=== {datetime.now().isoformat(sep=' ', timespec='seconds')} ({what})\n")

    def said(line: str) -> None:
        say(line)
        with open(path, 'a', encoding='utf-8', errors='replace') as f: f.write(f'{line}\n')
    return said
