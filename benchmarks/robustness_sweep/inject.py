"""Run a driver with a fault injected into its file writes, in the same process:

    python inject.py FAULT SCRIPT_OR_-m MODULE ARGS...

FAULT is `hang:<pattern>[:<n>]` (the n-th atomic write (default 1) of a file whose name contains <pattern> is written
to its temporary file, then the process prints `INJECT hang <path>` and sleeps, so a `kill -9` lands in the middle of
the write, before the rename) or `enospc:<pattern>[:<n>]` (that write raises OSError(ENOSPC), as a full disk does).
"""
import errno
import os
import runpy
import sys
import time

import electra.runtime.files as files

fault, target = sys.argv[1], sys.argv[2:]
kind, pattern, *nth = fault.split(':')
nth, seen = int(nth[0]) if nth else 1, [0]
real_atomic = files._atomic


def atomic(path, write):
    if pattern in os.path.basename(str(path)):
        seen[0] += 1
        if seen[0] == nth:
            if kind == 'enospc':  # the disk fills up during the write
                def full(f):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real_atomic(path, full)

            def hang(f):
                write(f)
                f.flush()
                print(f'INJECT hang {path}', flush=True)
                time.sleep(600)
            return real_atomic(path, hang)
    return real_atomic(path, write)


files._atomic = atomic
if target[0] == '-m':
    sys.argv = [target[1], *target[2:]]
    runpy.run_module(target[1], run_name='__main__', alter_sys=True)
else:
    sys.argv = target
    runpy.run_path(target[0], run_name='__main__')
