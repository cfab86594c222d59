"""Processes as /proc shows them, for the tests that end jobs with signals: whether one runs, and a process's
children."""
from pathlib import Path


def alive(pid: int) -> bool:
    "Whether process `pid` runs (a zombie, dead but not yet reaped by the process it was handed to, does not)."
    try: state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except OSError: return False  # gone: no file, or ProcessLookupError when it exits while the file is read
    return state not in ('Z', 'X')


def children(pid: int) -> list[int]:
    "The processes whose parent is `pid`."
    out = []
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try: fields = stat.read_text().rsplit(')', 1)[1].split()
        except OSError: continue
        if int(fields[1]) == pid: out.append(int(stat.parent.name))
    return out


def group_members(pgid: int) -> list[int]:
    "The running processes of process group `pgid` (zombies left out)."
    out = []
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try: fields = stat.read_text().rsplit(')', 1)[1].split()
        except OSError: continue
        if int(fields[2]) == pgid and fields[0] not in ('Z', 'X'): out.append(int(stat.parent.name))
    return out
