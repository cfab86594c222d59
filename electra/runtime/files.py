"""Files a job writes safely: inside the folder the user gave (`path_inside`), in folders checked writable up front
(`writable_dir`), with no folder where they write a file (`writable_files`), atomic writes (a temporary file renamed into place), the run-directory lock that keeps two processes
off one run, the lock under which jobs that share a file read and rewrite it in turn; and what a file is by content
(`FileDigests`).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from electra.config.errors import ConfigError, RunWarning

__all__ = ['path_inside', 'writable_dir', 'writable_files', 'saved_by_torch', 'atomic_save', 'atomic_write_text', 'atomic_write_bytes',
           'atomic_write_figure', 'glyphs_said', 'locked', 'file_sha256',
           'FileDigests', 'owner_gone', 'hold_lock', 'release_lock', 'lock_run_dir', 'release_run_dir']


def path_inside(root: str | Path, *names: str, key: str) -> Path:
    """`root / names...`, once checked to stay inside `root` with `..` and symbolic links resolved: what the library
    writes below a folder the user gave (`key`: output_dir, test_output_dir, cache_dir, ...) is named here, so that no
    name (a task's, a run's) and no link inside that folder takes a file out of it. Else a one-line ConfigError
    naming `key` and the paths."""
    root = Path(root)
    path = root.joinpath(*map(str, names))
    real_root, real = root.resolve(), path.resolve()
    if not real.is_relative_to(real_root):
        raise ConfigError(f"{key}: {path} leads to {real}, outside {real_root}, the folder {key} gives: a name in it "
                          f"climbs out, or a link inside that folder points elsewhere. Give names without '/' or '..', "
                          f"or give the link's target as {key}.")
    return path


# The first bytes of what torch.save writes: a zip archive (torch >= 1.6) or, before it, a pickle (protocol 2)
_TORCH_HEADS = (b'PK\x03\x04', b'\x80\x02')


def saved_by_torch(path: str | Path) -> bool:
    """Whether `path` is a file torch.save wrote, by its first bytes, whatever its name: a checkpoint named without
    `.pth` is one, a folder or a text file named `.pth` is not."""
    try:
        with open(path, 'rb') as f: return f.read(4).startswith(_TORCH_HEADS)
    except OSError: return False


def _file_in_the_way(path: Path) -> Path | None:
    "The first of `path` and its parents that exists and is not a folder (so nothing can be made below it), or None."
    for p in (path, *path.parents):
        try:
            if p.exists(): return None if p.is_dir() else p
        except OSError: return None
    return None


def writable_dir(path: str | Path, key: str, create: bool = True) -> Path:
    """`path` checked writable up front (not at the first file written there), else a ConfigError naming `key` and the
    fix: created if needed, or with `create=False` only checked creatable (its nearest existing folder writable, no
    file in the way), for a folder the job makes when it has something to put there (an export after training)."""
    path = Path(path)
    if (blocker := _file_in_the_way(path)) is not None:
        raise ConfigError(f"{key}: cannot write to '{path}' ('{blocker}' is a file, not a folder). Choose a writable "
                          f"directory with --{key}, or move that file away.")
    try:
        if create: path.mkdir(parents=True, exist_ok=True)
        where = next(p for p in (path, *path.parents) if p.exists())  # where a file would go now
        probe = where / f'.write_test_{os.getpid()}'
        probe.write_text('ok')
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"{key}: cannot write to '{path}' ({e.strerror or e}). "
                          f"Choose a writable directory with --{key}.") from None
    return path


def writable_files(folder: str | Path, names, key: str) -> None:
    """Each of `names` in `folder` (files the job writes there, some only at its end) checked not to be a folder (or a
    link to one), before any work rather than at the write: else a ConfigError naming it and `key`."""
    for name in names:
        if (path := Path(folder) / name).is_dir():
            raise ConfigError(f"{key}: cannot write to '{path}' (it is a folder, not a file). Move that folder away, or "
                              f"choose another directory with --{key}.")


class _KeepsWriteErrors:
    "A file whose failed write is kept: torch.save reports one (a full disk) as a RuntimeError of its own."

    def __init__(self, f):
        self.f, self.error = f, None

    def write(self, data):
        try: return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def __getattr__(self, name): return getattr(self.f, name)


def _write(f, write, path: Path) -> None:
    "`write(f)`; a failed write (a full disk) is raised as the OSError it was, naming `path`."
    out = _KeepsWriteErrors(f)
    try:
        write(out)
        f.flush()
        os.fsync(f.fileno())
    except (OSError, RuntimeError) as e:
        error = e if isinstance(e, OSError) else out.error
        if error is None or error.errno is None: raise
        raise OSError(error.errno, error.strerror, str(path)) from None


def _atomic(path: Path, write) -> Path:
    path = Path(path)
    if path.is_dir():  # the rename would fail only once the whole file is written, naming the temporary file first
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f'.{path.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'wb') as f: _write(f, write, path)
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private (0600); outputs get the usual permissions
        os.replace(tmp, path)  # readers see the old file or the whole new one, never a partial one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_save(obj: Any, path: str | Path) -> Path:
    "`torch.save` to a temporary file beside `path`, fsync, then rename over `path`."
    return _atomic(Path(path), lambda f: torch.save(obj, f))


def atomic_write_text(text: str, path: str | Path) -> Path:
    "`text` (UTF-8) written atomically to `path`."
    return atomic_write_bytes(text.encode('utf-8'), path)


def atomic_write_bytes(data: bytes, path: str | Path) -> Path:
    "`data` written atomically to `path`: readers see the old file or the whole new one, never a partial one."
    return _atomic(Path(path), lambda f: f.write(data))


def atomic_write_figure(fig, path: str | Path, dpi: int) -> Path:
    "The matplotlib figure `fig` as a PNG of `dpi`, written atomically to `path`."
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=dpi)
    return atomic_write_bytes(buf.getvalue(), path)


_GLYPH = re.compile(r'Glyph (\d+) .*missing from font')  # matplotlib's warning, one per character and drawing


@contextlib.contextmanager
def glyphs_said(what: str | Path):
    """Around drawing a plot (`what`: its file): the characters no font of it draws (a group or run named in another
    script) said in one warning naming the plot, in place of matplotlib's warning per character and drawing, which
    names the library's lines; other warnings pass on as they were."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        yield
    missing = {}
    for w in caught:
        if (m := _GLYPH.match(str(w.message))) and issubclass(w.category, UserWarning): missing[chr(int(m[1]))] = None
        else: warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        warnings.warn(f"{what}: no font of the plot draws {', '.join(map(repr, missing))}, shown as boxes (install a "
                      "font of that script, e.g. Noto Sans CJK, for the plot to draw them); the text files hold every "
                      "name as it is.", RunWarning, stacklevel=3)


@contextlib.contextmanager
def locked(path: str | Path):
    """Hold an exclusive lock on `path` (by a lock file beside it, `.<name>.lock`) while the block runs: jobs that read,
    change and rewrite the same file (`atomic_write_*`) take turns instead of each writing over what the other added.
    A process that dies lets go of it (flock); the lock file stays, empty, and is taken again by the next writer."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f'.{path.name}.lock', 'a') as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # waits for the other job's read-change-write
        try: yield
        finally: fcntl.flock(f, fcntl.LOCK_UN)


def file_sha256(path: str | Path) -> bytes:
    "The SHA-256 of a file's bytes, read in pieces (a corpus or a 400 MB training set is never held in memory)."
    with open(path, 'rb') as f: return hashlib.file_digest(f, 'sha256').digest()


def file_state(path: str | Path) -> str:
    """A file as it is now, without reading it: its resolved path, inode, size, modification time and change time.
    The change time (ctime) is the kernel's: every write, `touch` and `cp -p` moves it and no tool sets it back, so
    a same-length edit copied over a file with its mtime kept (`cp` then `touch -r`, `rsync -t`, `tar x`) is told
    apart; so is a file replaced by another. A `chmod` moves it too: a file seen as changed is read again, never
    the other way round."""
    st = os.stat(path)
    return f'{Path(path).resolve()}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}'


class FileDigests:
    """`file_sha256` of files, each read once while its `file_state` stays the same: a job asks for the same file
    more than once (MNLI's training set by every run, one file named as two splits) and reads it once."""

    def __init__(self): self._seen: dict[str, bytes] = {}

    def __call__(self, path: str | Path) -> bytes:
        key = file_state(path)
        if key not in self._seen: self._seen[key] = file_sha256(path)
        return self._seen[key]


def _alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs. A zombie does not: it has died (a `kill -9`) and waits for its
    parent, or for the process it was handed to, to collect its status, which some containers' first process is slow
    to do."""
    try: os.kill(pid, 0)
    except ProcessLookupError: return False
    except PermissionError: pass  # another user's
    try: state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError): return True  # no /proc to tell (not Linux): it exists, so it runs
    return state != 'Z'


def owner_gone(pid: int, host: str) -> bool:
    """Whether the owner (`pid` on `host`) of a lock or a temporary file is a process of this host that has died: only
    then is what it left safe to take over or remove (a process of another host cannot be checked from here)."""
    import socket
    return host == socket.gethostname() and not _alive(pid)


def hold_lock(path: str | Path, busy: str) -> Path:
    """Hold the lock file `path` (this process's PID and host in it) until `release_lock` or the process exits, so that
    a second process asking for it is refused instead of interleaving its work with this one's: `busy` the refusal's
    words after the path, its `{pid}` and `{host}` those of the holder. A lock left by a process that died on this host
    is taken over; this process may take its own lock again (several jobs in one notebook session)."""
    import atexit
    import socket
    path, me = Path(path), (os.getpid(), socket.gethostname())
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try: pid, host = path.read_text().split()[:2]
            except (OSError, ValueError): pid, host = '0', me[1]   # unreadable or half-written: treat as stale
            if (int(pid), host) == me: return path
            if not owner_gone(int(pid), host): raise ConfigError(f"{path}: {busy.format(pid=pid, host=host)}") from None
            path.unlink(missing_ok=True)  # a dead process's lock
            continue
        with os.fdopen(fd, 'w') as f: f.write(f'{me[0]} {me[1]}\n')
        atexit.register(release_lock, path)
        return path
    raise ConfigError(f"{path}: cannot take this lock; delete it if no other job is going on.")


def release_lock(path: str | Path) -> None:
    "Give up this process's lock `path` (`hold_lock`); another process's lock is left alone."
    try:
        if Path(path).read_text().split()[:1] == [str(os.getpid())]: Path(path).unlink()
    except OSError: pass


def lock_run_dir(run_dir: str | Path, what: str = 'run', name_key: str = 'run_name') -> Path:
    """Hold `<run_dir>/.lock` until training ends (`release_run_dir`, called by the Checkpointer) or the process exits
    (`hold_lock`), so a second process of the same run name, seed and output_dir is refused instead of interleaving
    metrics and overwriting checkpoints (also a comparison's folder: `what` and `name_key` name it in the message)."""
    return hold_lock(Path(run_dir) / '.lock', f"{what} {Path(run_dir).name} is already running (PID {{pid}} on {{host}}). "
                                              f"Wait for it, or give this one another --{name_key}; if that process is "
                                              "gone, delete the lock.")


def release_run_dir(run_dir: str | Path) -> None:
    "Give up this process's lock on `run_dir` (`lock_run_dir`); another process's lock is left alone."
    release_lock(Path(run_dir) / '.lock')
