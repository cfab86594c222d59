"""The fork server of tests/support/forked.py: run as `python fork_server.py SOCKET`, it imports the third-party
libraries a driver process spends most of its start-up on (torch, transformers, fastai, datasets, ...: about 10
CPU-seconds), never the library or pytest, then forks a process for each request, which makes itself what
`python SCRIPT ...`, `python -m MODULE ...` or `python -c CODE ...` would have started: its argv, sys.path, working
folder, environment, standard streams (closed ones too), other file descriptors, session and controlling terminal,
signal dispositions and mask, `__main__`, random seeds and exit (status, atexit, the flush of stdout) as a fresh
interpreter has them. Before it runs anything, a forked process forks its zygote: a copy of this server, serving
the `python` children the process starts (forked.py's `nest`). Only the standard library (and forked.py, as
`_electra_forked`) is imported here besides the preloaded libraries."""
import ctypes
import fcntl
import io
import json
import os
import signal
import socket
import struct
import sys
import threading
import types
import warnings

PRELOAD = ['numpy', 'torch', 'transformers', 'transformers.models.electra.modeling_electra',
           'tokenizers', 'safetensors', 'huggingface_hub',
           'datasets', 'pandas', 'scipy.stats', 'sklearn.metrics', 'matplotlib', 'matplotlib.pyplot',
           'fastai.basics', 'fastai.learner', 'fastai.callback.progress', 'fastai.callback.core',
           'fastai.callback.schedule', 'fastai.data.core']
_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15
SELF = os.path.abspath(__file__)  # kept: a module run with -m takes a fresh `__main__`, never this one's globals
FOLDER, KEY = '', frozenset()  # the server's folder (its socket, its zygotes'), its environment's import key
COMM = b''  # the server's name in /proc/<pid>/comm: a fresh interpreter's
_zygote: tuple[int, str] | None = None  # (pid, socket) of this forked process's zygote


def load_forked() -> types.ModuleType:
    "tests/support/forked.py, as a module of its own name (a job that imports tests.support.forked gets its own)."
    import importlib.util
    spec = importlib.util.spec_from_file_location('_electra_forked', os.path.join(os.path.dirname(SELF), 'forked.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def preload() -> None:
    """Import PRELOAD under a record of warnings: one shown here is not shown again in a child of this server (a
    registry keeps it), so none is shown; a fresh interpreter's filters are restored afterwards."""
    import importlib
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        for name in PRELOAD: importlib.import_module(name)


def recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    "One request: an 8-byte length sent with the file descriptors, then that many bytes of JSON."
    head, fds, _, _ = socket.recv_fds(conn, 8, 64)
    size, body = struct.unpack('!Q', head)[0], b''
    while len(body) < size:
        part = conn.recv(size - len(body))
        if not part: raise EOFError('request cut short')
        body += part
    return json.loads(body), fds


def place_fds(fds: list[int], targets: list[int], keep: set[int]) -> None:
    """Each received descriptor at its target number (0, 1, 2 and the pass_fds); a standard stream without one is
    closed, as in a process started with it closed; every other descriptor is closed (close_fds)."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256) for fd in fds]  # out of the way of every target
    for fd, target in zip(high, targets):
        os.dup2(fd, target, inheritable=True)
    wanted = set(targets) | keep
    for fd in map(int, os.listdir('/proc/self/fd')):
        if fd not in wanted:
            try: os.close(fd)
            except OSError: pass


def std_streams(enc: dict, unbuffered: bool) -> None:
    """sys.stdin/stdout/stderr (and their __dunder__ copies) made as CPython's create_stdio makes them; None if closed.
    `unbuffered`: `-u` given."""
    unbuffered = unbuffered or bool(os.environ.get('PYTHONUNBUFFERED'))
    for fd, name, mode in ((0, 'stdin', 'r'), (1, 'stdout', 'w'), (2, 'stderr', 'w')):
        try: os.fstat(fd)
        except OSError:
            setattr(sys, name, None), setattr(sys, f'__{name}__', None)
            continue
        raw = io.FileIO(fd, mode + 'b', closefd=False)
        raw.name = f'<{name}>'
        buf = raw if unbuffered and mode == 'w' else (io.BufferedReader(raw) if mode == 'r' else io.BufferedWriter(raw))
        tty = raw.isatty()
        stream = io.TextIOWrapper(buf, encoding=enc[name][0], errors=enc[name][1], newline='\n',
                                  line_buffering=mode == 'w' and (tty or fd == 2) and not unbuffered,
                                  write_through=unbuffered)
        stream.mode = mode
        setattr(sys, name, stream), setattr(sys, f'__{name}__', stream)


def set_signals(ignored: list[int], blocked: list[int]) -> None:
    """Dispositions as an exec from the requesting process leaves them (what it ignores stays ignored, the rest
    default), then as CPython sets them at start-up (SIGPIPE and SIGXFSZ ignored, SIGINT to KeyboardInterrupt unless
    ignored); the requesting thread's mask."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP): continue
        try: signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
        except (OSError, ValueError): pass
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if signal.SIGINT not in ignored: signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def set_path(kind: str, target: str, base: list[str]) -> None:
    "sys.path as `python` builds it: the script's folder (or the working folder), PYTHONPATH, then the rest."
    first = {'script': os.path.dirname(os.path.abspath(target)), 'module': os.getcwd(), 'code': ''}[kind]
    extra = [os.path.abspath(p) for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    sys.path[:] = [first, *extra, *base]
    import importlib
    importlib.invalidate_caches()  # files written since this server started are found


def main_module(kind: str, target: str) -> types.ModuleType:
    """A fresh `__main__`, as the interpreter makes it before it runs a script, -c or -m (which runs the module in
    this one's namespace: runpy._run_module_as_main), never this server's own."""
    import builtins
    import importlib.machinery
    main = types.ModuleType('__main__')
    main.__builtins__, main.__annotations__ = builtins, {}
    main.__loader__ = importlib.machinery.BuiltinImporter
    if kind == 'script':
        main.__file__, main.__cached__ = os.path.abspath(target), None
        main.__loader__ = importlib.machinery.SourceFileLoader('__main__', target)
    sys.modules['__main__'] = main
    return main


def execute(kind: str, target: str, args: list[str]) -> int:
    "Run the request's code as the interpreter would; its exit status."
    import runpy
    main = main_module(kind, target)
    try:
        if kind == 'module':
            sys.argv = ['-m', *args]  # runpy puts the module's file in argv[0], as `python -m` does
            runpy._run_module_as_main(target, alter_argv=True)
        else:
            sys.argv = [target if kind == 'script' else '-c', *args]
            if kind == 'script':
                try:
                    with open(target, 'rb') as f: source = f.read()
                except OSError as e:
                    print(f"{sys.executable}: can't open file {os.path.abspath(target)!r}: [Errno {e.errno}] "
                          f"{e.strerror}", file=sys.stderr)
                    return 2
            else: source = target
            exec(compile(source, main.__file__ if kind == 'script' else '<string>', 'exec'), main.__dict__)
        return 0
    except SystemExit as e:
        return exit_status(e)
    except KeyboardInterrupt as e:
        return report(e, -signal.SIGINT)
    except BaseException as e:
        return report(e, 1)


def exit_status(e: SystemExit) -> int:
    "The status a SystemExit ends the interpreter with (its code printed to stderr when it is not a number)."
    if e.code is None: return 0
    if isinstance(e.code, int): return e.code
    print(e.code, file=sys.stderr)
    return 1


def report(e: BaseException, status: int) -> int:
    """The uncaught exception to sys.excepthook, as the interpreter hands it (its traceback without this file's
    frames); a SystemExit the hook raises sets the status, as in PyErr_PrintEx."""
    import traceback
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == SELF: tb = tb.tb_next
    try: sys.excepthook(type(e), e.with_traceback(tb), tb)
    except SystemExit as hook_exit: return exit_status(hook_exit)
    except BaseException as hook_error:
        print('Error in sys.excepthook:', file=sys.stderr)
        hook_tb = hook_error.__traceback__.tb_next  # from the hook's own frame on
        traceback.print_exception(type(hook_error), hook_error, hook_tb, chain=False)
        print('\nOriginal exception was:', file=sys.stderr)
        traceback.print_exception(type(e), e, tb)
    return status


def finish(status: int) -> None:
    "End as Py_FinalizeEx does: threads joined, atexit run, stdout and stderr flushed; a KeyboardInterrupt by SIGINT."
    import atexit
    try: threading._shutdown()
    except BaseException: pass
    atexit._run_exitfuncs()
    for name in ('stdout', 'stderr'):
        stream = getattr(sys, name)
        if stream is None: continue
        try: stream.flush()
        except Exception as e:
            if name == 'stdout' and status == 0: status = 120
            try: os.write(2, f'Exception ignored in: {stream!r}\n{type(e).__name__}: {e}\n'.encode())
            except OSError: pass
    stop_zygote()
    if status == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 130
    os._exit(max(0, min(status, 255)) if isinstance(status, int) else 1)


def become(spec: dict, fds: list[int], base_path: list[str], enc: dict) -> None:
    "The forked process becomes the requested one, runs it, and exits."
    try:
        if spec['session']: os.setsid()
        elif spec['process_group'] not in (None, -1): os.setpgid(0, spec['process_group'])
        elif os.getpgrp() != spec['group']: os.setpgid(0, spec['group'])  # a zygote's child: its requester's group
        place_fds(fds, spec['targets'], set())
        if spec['ctty']:
            import termios
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        os.chdir(spec['cwd'])
        os.environ.clear()
        os.environ.update(spec['env'])
        set_signals(spec['ignored'], spec['blocked'])
        std_streams(enc, spec['unbuffered'])
        set_path(spec['kind'], spec['target'], base_path)
        import random
        random.seed()  # a fresh interpreter's seeds come from the OS, not from this server's state
        sys.modules['numpy'].random.seed()
        import linecache
        linecache.clearcache()
        forked = sys.modules['_electra_forked']
        if forked.forking(nested=True): start_zygote(base_path, enc, forked)
    except BaseException as e:  # the set-up failed: say so where the test reads, as a failed exec would
        import traceback
        os.write(2, f'fork_server: could not set up the process: {e!r}\n{traceback.format_exc()}'.encode())
        os._exit(127)
    finish(execute(spec['kind'], spec['target'], spec['args']))


def start_zygote(base_path: list[str], enc: dict, forked: types.ModuleType) -> None:
    """Fork this process's zygote while it is still this server's copy: it serves the `python` children this process
    starts (forked.nest). It is in a process group of its own (a signal to this one's group is not for it), holds no
    descriptor of this process's, and ends with it."""
    global _zygote
    owner, path = os.getpid(), os.path.join(FOLDER, f'zygote-{os.getpid()}')
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as low:  # a standard stream's number, if one is closed
        listener = socket.socket(fileno=fcntl.fcntl(low.fileno(), fcntl.F_DUPFD_CLOEXEC, 256))
    listener.bind(path)
    listener.listen(8)
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != owner: os._exit(0)
            ctypes.CDLL(None).prctl(_PR_SET_NAME, forked.ZYGOTE_NAME.encode())
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2): os.dup2(null, fd)
            place_fds([], [], {0, 1, 2, listener.fileno()})
            serve(listener, base_path, enc)
        finally:
            os._exit(0)
    listener.close()
    _zygote = (pid, path)
    forked.nest(path, KEY)


def stop_zygote() -> None:
    "This process's zygote ended and reaped, its socket removed (a process that dies otherwise takes it along)."
    if _zygote is None: return
    pid, path = _zygote
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError: pass  # reaped already, by the process's own code
    try: os.unlink(path)
    except OSError: pass


def spawn(conn: socket.socket, spec: dict, fds: list[int], base_path: list[str], enc: dict) -> None:
    """Fork twice: the middle process exits at once, so the job is handed to the requesting process (a child
    subreaper) and is its child as a process it started itself would be; the job starts only once it is."""
    go_r, go_w = os.pipe()
    pid_r, pid_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            job = os.fork()
            if job == 0:
                ctypes.CDLL(None).prctl(_PR_SET_NAME, COMM)  # a fresh interpreter's name, never its zygote's
                os.close(go_w), os.close(pid_r), os.close(pid_w)
                os.read(go_r, 1)
                os.close(go_r)
                become(spec, fds, base_path, enc)
            os.write(pid_w, str(job).encode())
        finally:
            os._exit(0)
    os.close(go_r), os.close(pid_w)
    job = int(os.read(pid_r, 32) or b'0')
    os.close(pid_r)
    os.waitpid(middle, 0)
    for fd in fds: os.close(fd)
    conn.sendall(f'{job}\n'.encode())
    os.write(go_w, b'x')
    os.close(go_w)


def serve(listener: socket.socket, base_path: list[str], enc: dict) -> None:
    "Fork a process for each request, forever."
    while True:
        conn, _ = listener.accept()
        with conn:
            try: spec, fds = recv_request(conn)
            except (EOFError, OSError, ValueError): continue
            try: spawn(conn, spec, fds, base_path, enc)
            except OSError as e: conn.sendall(f'error {e!r}\n'.encode())


def main(path: str) -> None:
    global FOLDER, KEY, COMM
    if sys.platform.startswith('linux'):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # gone with the test process
    pythonpath = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    base_path = [p for p in sys.path[1:] if p not in pythonpath and os.path.abspath(p) not in pythonpath]
    del sys.path[0]  # this file's folder, tests/support: its modules (tokenizers.py) would hide the libraries'
    FOLDER, KEY = os.path.dirname(path), load_forked()._import_key(dict(os.environ))
    with open('/proc/self/comm', 'rb') as f: COMM = f.read().strip()
    preload()
    # no Python thread may run here when it forks (a lock it holds stays held in the child); the native threads of
    # OpenBLAS and pyarrow's allocator reset themselves at a fork, as in a DataLoader's forked workers
    threads = threading.active_count()
    enc = {name: (getattr(sys, name).encoding, getattr(sys, name).errors) for name in ('stdin', 'stdout', 'stderr')}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    print('ready' if threads == 1 else f'{threads} Python threads', flush=True)
    if threads == 1: serve(listener, base_path, enc)


if __name__ == '__main__':
    main(sys.argv[1])
