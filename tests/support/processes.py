"""Processes as /proc shows them, for the tests that end jobs with signals: whether one runs, and a process's
children."""
from pathlib import Path

from tests.support import forked


def alive(pid: int) -> bool:
    "Whether process `pid` runs (a zombie, dead but not yet reaped by the process it was handed to, does not)."
    try: state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except OSError: return False  # gone: no file, or ProcessLookupError when it exits while the file is read
    return state not in ('Z', 'X')


def _stats():
    "(pid, the fields of /proc/<pid>/stat after the command's name: state, parent, group, ...) of every process."
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try: yield int(stat.parent.name), stat.read_text().rsplit(')', 1)[1].split()
        except OSError: continue  # gone while the folder was read


def children(pid: int) -> list[int]:
    "The processes whose parent is `pid` (a forked process's zygote left out: tests/support/forked.py)."
    return [p for p, fields in _stats() if int(fields[1]) == pid and not forked.is_zygote(p)]


def group_members(pgid: int) -> list[int]:
    "The running processes of process group `pgid` (zombies left out)."
    return [p for p, fields in _stats() if int(fields[2]) == pgid and fields[0] not in ('Z', 'X')]
