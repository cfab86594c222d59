"""`Popen` and `run` as subprocess's, for the tests that start `python SCRIPT`, `python -m MODULE` or `python -c CODE`:
the process is forked from a server that has already imported torch, transformers, fastai and the rest
(tests/support/fork_server.py), so it skips the ~10 CPU-seconds a fresh interpreter spends importing them, the
most of what such a test costs. Everything else is a fresh interpreter's: the library and the script are imported
in the process itself, and its argv, sys.path, folder, environment, streams, descriptors, session, terminal,
signals, `__main__` and exit are set up as `python` sets them (tests/test_forked.py compares the two). The
process is this one's child (this process is made a child subreaper, and the server hands the job over), so
`wait`, `poll`, `returncode`, `send_signal`, `communicate` and the resource counts are subprocess's own.

The processes such a process starts itself (fine-tuning workers, torchrun's workers, a comparison's jobs) are
forked the same way (`nested`): before it runs anything, a forked process forks a copy of its server (its zygote,
in a process group of its own, named `electra-zygote`, gone with it), and `subprocess.Popen` asks that copy for
each plain `python` child whose environment has the server's import key; the process is made a child subreaper, so
the child is its own. In the test process, the library's own `subprocess` is given this module's `Popen`
(`subprocess_forked`, tests/conftest.py).

A real interpreter is started instead for anything else: another program, interpreter options other than `-u`,
`preexec_fn`, an environment that differs from the server's in a variable a preloaded library may read when it is
imported (a server is started for each such environment at its second use: `_import_key`), and every call when
ELECTRA_TESTS_FORK=0; ELECTRA_TESTS_FORK=top forks only the processes a test starts itself."""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path

__all__ = ['Popen', 'run', 'forking', 'prestart', 'is_zygote', 'server_pids', 'nest', 'subprocess_forked']

SERVER = Path(__file__).with_name('fork_server.py')
_PR_SET_CHILD_SUBREAPER = 36
ZYGOTE_NAME = 'electra-zygote'
# variables no preloaded library reads when it is imported: a child may differ from its server in these
_RUNTIME = ('PATH', 'PWD', 'OLDPWD', 'SHLVL', '_', 'PYTHONPATH', 'PYTHONUNBUFFERED', 'COLUMNS', 'LINES', 'RANK',
            'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'GROUP_WORLD_SIZE', 'ROLE_RANK', 'ROLE_NAME',
            'ROLE_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'TORCH_NCCL_ASYNC_ERROR_HANDLING')
_RUNTIME_PREFIXES = ('SLURM_', 'ELECTRA_', 'PYTEST_', 'TORCHELASTIC_', 'NEPTUNE_', 'WANDB_', 'MLFLOW_')
_POPEN_KEYS = {'cwd', 'env', 'stdin', 'stdout', 'stderr', 'text', 'universal_newlines', 'encoding', 'errors',
               'start_new_session', 'pass_fds', 'close_fds', 'bufsize'}
_servers: dict[frozenset, '_Server'] = {}
_asked: dict[frozenset, int] = {}
_lock = threading.Lock()


def forking(nested: bool = False) -> bool:
    """Whether processes are forked from a server here (Linux, and not switched off with ELECTRA_TESTS_FORK=0);
    `nested`: the processes a forked process or the library starts (not with ELECTRA_TESTS_FORK=top either)."""
    value = os.environ.get('ELECTRA_TESTS_FORK', '1')
    return sys.platform.startswith('linux') and value != '0' and not (nested and value == 'top')


def server_pids() -> set[int]:
    "The fork servers this process has started."
    return {server.proc.pid for server in _servers.values()}


def is_zygote(pid: int) -> bool:
    "Whether process `pid` is a forked process's copy of its server (`nested`), not a process it started."
    try: return Path(f'/proc/{pid}/comm').read_text().strip() == ZYGOTE_NAME
    except OSError: return False


def _import_key(env: dict[str, str]) -> frozenset:
    return frozenset((k, v) for k, v in env.items() if k not in _RUNTIME and not k.startswith(_RUNTIME_PREFIXES))


class _Client:
    "The requesting end of a fork server (or of a zygote) listening at `path`."

    def __init__(self, path: str):
        self.path = path

    def spawn(self, spec: dict, fds: list[int]) -> int:
        body = json.dumps(spec).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.path)
            socket.send_fds(conn, [struct.pack('!Q', len(body))], fds)
            conn.sendall(body)
            reply = conn.makefile().readline().strip()
        if not reply.isdigit(): raise OSError(f'the fork server could not start the process: {reply or "no reply"}')
        return int(reply)


class _Server(_Client):
    """One fork server, started with an environment of one import key; gone with this process, its folder too. It
    imports while this process goes on: `wait_ready` waits for it."""

    def __init__(self, env: dict[str, str]):
        self.folder = tempfile.mkdtemp(prefix='electra_fork_')
        super().__init__(os.path.join(self.folder, 'socket'))
        with open(os.path.join(self.folder, 'server.log'), 'w') as log:  # what the server itself says, if anything
            self.proc = subprocess.Popen([sys.executable, str(SERVER), self.path], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        self._ready = False
        atexit.register(self.close)

    def wait_ready(self) -> None:
        "Wait until it has imported; a server that could not start is an error of the tests' own, said with its log."
        if self._ready: return
        said = self.proc.stdout.readline().strip()
        if said != 'ready':
            with open(os.path.join(self.folder, 'server.log')) as log: tail = log.read()[-3000:]
            raise RuntimeError(f'the fork server {SERVER} did not start ({said or "no word"}):\n{tail}')
        self._ready = True

    def close(self):
        if self.proc.poll() is None: self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close(), self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _server(env: dict[str, str]) -> '_Server | None':
    """The server for `env`'s import key, started at its second request (or by `prestart`): a server costs what a
    fresh interpreter does, so an environment met once (a test's own HOME or HF_HOME) gets a real process."""
    key = _import_key(env)
    with _lock:
        _asked[key] = _asked.get(key, 0) + 1
        if key not in _servers and _asked[key] < 2: return None
        if key not in _servers: _start(env, key)
        _servers[key].wait_ready()
        return _servers[key]


def _start(env: dict[str, str], key: frozenset) -> None:
    if not _servers:  # the jobs the servers hand over become this process's children
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _servers[key] = _Server({k: v for k, v in env.items() if (k, v) in key})


def prestart(*envs: dict[str, str]) -> None:
    """Servers for the environments most tests start their processes with, importing while the first tests run: the
    first process of such an environment is then forked too, not a real interpreter."""
    if not forking(): return
    with _lock:
        for env in envs:
            key = _import_key(env)
            if key not in _servers: _start(env, key)


def _what(args) -> tuple[str, str, list[str], bool] | None:
    """('script' | 'module' | 'code', the script, module or code, its arguments, whether `-u` was given) for a plain
    `python` command line (torchrun starts its workers with `-u`)."""
    if not isinstance(args, (list, tuple)) or len(args) < 2 or os.fspath(args[0]) != sys.executable: return None
    args = [os.fspath(a) for a in args]
    unbuffered = args[1] == '-u'
    if unbuffered: del args[1]
    if len(args) < 2: return None
    if args[1] in ('-m', '-c'):
        return (('module' if args[1] == '-m' else 'code'), args[2], args[3:], unbuffered) if len(args) > 2 else None
    return None if args[1].startswith('-') else ('script', args[1], args[2:], unbuffered)


def _fd_open(fd: int) -> bool:
    try: os.fstat(fd)
    except OSError: return False
    return True


class _Nested:
    "A forked process's zygote (`nested`): where it listens, the import key it serves, the process it serves."

    def __init__(self, path: str, key: frozenset):
        self.client, self.key, self.owner = _Client(path), key, os.getpid()

    def request(self, args, executable, preexec_fn, close_fds, shell, gid, gids, uid, umask, env) -> tuple | None:
        "(zygote, what, controlling_tty, closed) for a child this process may have forked, else None."
        if os.getpid() != self.owner or not forking(nested=True): return None  # a fork of it: its children are not its own
        what = _what(args)
        plain = (executable is None and preexec_fn is None and close_fds and not shell and uid is None and gid is None
                 and not gids and umask < 0)
        if not (what and plain and _import_key(dict(os.environ if env is None else env)) == self.key): return None
        return self.client, what, False, ()


_nested: _Nested | None = None


def nest(path: str, key: frozenset) -> None:
    """Called by a forked process before it runs anything (tests/support/fork_server.py), its zygote listening at
    `path`: every plain `python` child it starts with `subprocess` is forked by the zygote and handed to it."""
    global _nested
    _nested = _Nested(path, key)
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1)
    subprocess.Popen._execute_child = _execute_child


_EXECUTE_CHILD = subprocess.Popen._execute_child


def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags,
                   shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids, uid,
                   umask, start_new_session, process_group):
    """subprocess.Popen's `_execute_child`, the child forked by a server where one takes it (`_ForkedPopen`'s or,
    `nested`, the zygote's), else subprocess's own."""
    request = getattr(self, '_fork_request', None) or (_nested and _nested.request(
        args, executable, preexec_fn, close_fds, shell, gid, gids, uid, umask, env))
    if request is None:
        return _EXECUTE_CHILD(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                              creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                              restore_signals, gid, gids, uid, umask, start_new_session, process_group)
    server, (kind, target, rest, unbuffered), ctty, closed = request
    fds, targets = [], []
    for target_fd, fd in enumerate((p2cread, c2pwrite, errwrite)):
        fd = target_fd if fd == -1 else fd  # not redirected: this process's own, as a child inherits it
        if target_fd not in closed and _fd_open(fd): fds.append(fd), targets.append(target_fd)
    for fd in pass_fds: fds.append(fd), targets.append(fd)
    ignored = [int(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)
               and signal.getsignal(s) == signal.SIG_IGN and s not in (signal.SIGPIPE, signal.SIGXFSZ)]
    spec = {'kind': kind, 'target': target, 'args': rest, 'unbuffered': unbuffered,
            'cwd': os.fspath(cwd) if cwd else os.getcwd(),
            'env': {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()},
            'session': bool(start_new_session), 'process_group': process_group, 'group': os.getpgrp(), 'ctty': ctty,
            'targets': targets, 'ignored': ignored,
            'blocked': [int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])]}
    try:
        self.pid = server.spawn(spec, fds)
        self._child_created = True
    finally:
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)


class _ForkedPopen(subprocess.Popen):
    "subprocess.Popen whose child comes from a fork server instead of fork and exec."
    _execute_child = _execute_child

    def __init__(self, args, server: _Server, what: tuple, controlling_tty: bool, closed: tuple, **kwargs):
        self._fork_request = (server, what, controlling_tty, closed)
        super().__init__(args, **kwargs)


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

# subprocess as a module whose Popen and run are this module's: the library's own `subprocess` in the test process
# (tests/conftest.py), so that the workers and jobs it starts there are forked too
subprocess_forked = types.SimpleNamespace(**{**{k: v for k, v in vars(subprocess).items() if not k.startswith('__')},
                                             'Popen': Popen, 'run': run})
