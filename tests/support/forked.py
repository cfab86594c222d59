"""`Popen` and `run` as subprocess's, for the tests that start `python SCRIPT`, `python -m MODULE` or `python -c CODE`:
the process is forked from a server that has already imported torch, transformers, fastai and the rest
(tests/support/fork_server.py), so it skips the ~10 CPU-seconds a fresh interpreter spends importing them, the
most of what such a test costs. Everything else is a fresh interpreter's: the library and the script are imported
in the process itself, and its argv, sys.path, folder, environment, streams, descriptors, session, terminal,
signals, `__main__` and exit are set up as `python` sets them (tests/test_forked.py compares the two). The
process is this one's child (this process is made a child subreaper, and the server hands the job over), so
`wait`, `poll`, `returncode`, `send_signal`, `communicate` and the resource counts are subprocess's own.

A real interpreter is started instead for anything else: another program, interpreter options, `preexec_fn`, an
environment that differs from the server's in a variable a preloaded library may read when it is imported (a
server is started for each such environment at its second use: `_import_key`), and every call when
ELECTRA_TESTS_FORK=0."""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path

__all__ = ['Popen', 'run', 'forking']

SERVER = Path(__file__).with_name('fork_server.py')
_PR_SET_CHILD_SUBREAPER = 36
# variables no preloaded library reads when it is imported: a child may differ from its server in these
_RUNTIME = ('PATH', 'PWD', 'OLDPWD', 'SHLVL', '_', 'PYTHONPATH', 'COLUMNS', 'LINES', 'RANK', 'WORLD_SIZE',
            'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'ROLE_RANK', 'MASTER_ADDR', 'MASTER_PORT')
_RUNTIME_PREFIXES = ('SLURM_', 'ELECTRA_', 'PYTEST_', 'TORCHELASTIC_', 'NEPTUNE_', 'WANDB_', 'MLFLOW_')
_POPEN_KEYS = {'cwd', 'env', 'stdin', 'stdout', 'stderr', 'text', 'universal_newlines', 'encoding', 'errors',
               'start_new_session', 'pass_fds', 'close_fds', 'bufsize'}
_servers: dict[frozenset, '_Server | None'] = {}
_asked: dict[frozenset, int] = {}
_lock = threading.Lock()


def forking() -> bool:
    "Whether processes are forked from a server here (Linux, and not switched off with ELECTRA_TESTS_FORK=0)."
    return sys.platform.startswith('linux') and os.environ.get('ELECTRA_TESTS_FORK', '1') != '0'


def _import_key(env: dict[str, str]) -> frozenset:
    return frozenset((k, v) for k, v in env.items() if k not in _RUNTIME and not k.startswith(_RUNTIME_PREFIXES))


class _Server:
    "One fork server, started with an environment of one import key; gone with this process."

    def __init__(self, env: dict[str, str]):
        folder = tempfile.mkdtemp(prefix='electra_fork_')
        self.path = os.path.join(folder, 'socket')
        with open(os.path.join(folder, 'server.log'), 'w') as log:  # what the server itself says, if anything
            self.proc = subprocess.Popen([sys.executable, str(SERVER), self.path], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        self.ready = self.proc.stdout.readline().strip() == 'ready'
        atexit.register(self.close)

    def spawn(self, spec: dict, fds: list[int]) -> int:
        body = json.dumps(spec).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.path)
            socket.send_fds(conn, [struct.pack('!Q', len(body))], fds)
            conn.sendall(body)
            reply = conn.makefile().readline().strip()
        if not reply.isdigit(): raise OSError(f'the fork server could not start the process: {reply or "no reply"}')
        return int(reply)

    def close(self):
        if self.proc.poll() is None: self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close(), self.proc.stdout.close()


def _server(env: dict[str, str]) -> '_Server | None':
    """The server for `env`'s import key, started at its second request: a server costs what a fresh interpreter
    does, so an environment met once (a test's own HOME or HF_HOME) gets a real process."""
    key = _import_key(env)
    with _lock:
        _asked[key] = _asked.get(key, 0) + 1
        if key not in _servers and _asked[key] < 2: return None
        if key not in _servers:
            if not _servers:  # the jobs the servers hand over become this process's children
                ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1)
            server = _Server({k: v for k, v in env.items() if (k, v) in key})
            _servers[key] = server if server.ready else None
        return _servers[key]


def _what(args) -> tuple[str, str, list[str]] | None:
    "('script' | 'module' | 'code', the script, module or code, its arguments) for a plain `python` command line."
    if not isinstance(args, (list, tuple)) or len(args) < 2 or os.fspath(args[0]) != sys.executable: return None
    args = [os.fspath(a) for a in args]
    if args[1] in ('-m', '-c'):
        return (('module' if args[1] == '-m' else 'code'), args[2], args[3:]) if len(args) > 2 else None
    return None if args[1].startswith('-') else ('script', args[1], args[2:])


def _fd_open(fd: int) -> bool:
    try: os.fstat(fd)
    except OSError: return False
    return True


class _ForkedPopen(subprocess.Popen):
    "subprocess.Popen whose child comes from a fork server instead of fork and exec."

    def __init__(self, args, server: _Server, what: tuple, controlling_tty: bool, closed: tuple, **kwargs):
        self._fork_server, self._what, self._ctty, self._closed = server, what, controlling_tty, closed
        super().__init__(args, **kwargs)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                       shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids,
                       uid, umask, start_new_session, process_group):
        fds, targets = [], []
        for target, fd in enumerate((p2cread, c2pwrite, errwrite)):
            fd = target if fd == -1 else fd  # not redirected: this process's own, as a child inherits it
            if target not in self._closed and _fd_open(fd): fds.append(fd), targets.append(target)
        for fd in pass_fds: fds.append(fd), targets.append(fd)
        kind, target, rest = self._what
        ignored = [int(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)
                   and signal.getsignal(s) == signal.SIG_IGN and s not in (signal.SIGPIPE, signal.SIGXFSZ)]
        spec = {'kind': kind, 'target': target, 'args': rest, 'cwd': os.fspath(cwd) if cwd else os.getcwd(),
                'env': {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()},
                'session': bool(start_new_session), 'process_group': process_group, 'ctty': self._ctty,
                'targets': targets, 'ignored': ignored,
                'blocked': [int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])]}
        try:
            self.pid = self._fork_server.spawn(spec, fds)
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)


def Popen(args, *, controlling_tty: bool = False, closed: tuple[int, ...] = (), **kwargs) -> subprocess.Popen:
    """subprocess.Popen(args, **kwargs), forked from a server where it can be (module docstring).
    `controlling_tty`: the process's stdin, a terminal, becomes its controlling terminal (with start_new_session);
    `closed`: standard streams (0, 1, 2) the process starts without, as after the shell's `>&-`."""
    what = _what(args)
    env = kwargs.get('env')
    if what and forking() and set(kwargs) <= _POPEN_KEYS and kwargs.get('close_fds', True):
        server = _server(dict(os.environ if env is None else env))
        if server: return _ForkedPopen(args, server, what, controlling_tty, tuple(closed), **kwargs)
    return _real_popen(args, controlling_tty=controlling_tty, closed=closed, **kwargs)


def _real_popen(args, *, controlling_tty: bool = False, closed: tuple[int, ...] = (), **kwargs) -> subprocess.Popen:
    "`Popen` without a fork server: a fresh interpreter, `controlling_tty` and `closed` done before its exec."
    if controlling_tty or closed:
        kwargs['preexec_fn'] = lambda: _set_up_streams(controlling_tty, closed)
    return subprocess.Popen(args, **kwargs)


def _set_up_streams(controlling_tty: bool, closed: tuple[int, ...]) -> None:
    "In a real child, before exec: what `controlling_tty` and `closed` ask for."
    if controlling_tty:
        import fcntl
        import termios
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    for fd in closed: os.close(fd)


# subprocess.run itself, with this module's Popen in place of subprocess's
run = types.FunctionType(subprocess.run.__code__, {**vars(subprocess), 'Popen': Popen}, 'run',
                         subprocess.run.__defaults__, subprocess.run.__closure__)
run.__kwdefaults__ = subprocess.run.__kwdefaults__
run.__doc__ = 'subprocess.run, its process started by this module\'s Popen.'
