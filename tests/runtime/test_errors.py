"""How a job ends (electra/runtime/errors.py): the stop signals raised as Ctrl-C is, once, in a process of their own."""
import signal
import subprocess
import sys

import pytest

from electra.runtime import errors
from tests.support.distributed import ENV, REPO

STOPS = """
import os, signal, sys, time
from electra.runtime.errors import StopSignal, stop_on_signals, stopped_by
stop_on_signals()
sig = getattr(signal, sys.argv[1])
try:
    os.kill(os.getpid(), sig)
    time.sleep(5)
except StopSignal as e: print('stopped by', stopped_by(e), isinstance(e, KeyboardInterrupt), flush=True)
os.kill(os.getpid(), signal.SIGTERM)  # a stop is under way: ignored
os.kill(os.getpid(), sig)
print('went on', flush=True)
if os.fork() == 0:  # a forked process (a data build's) has Python's handlers: SIGTERM ends it, without a word
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    os._exit(0)
print('child', os.wait()[1] & 0x7f == signal.SIGTERM, flush=True)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt as e: print('then', stopped_by(e), flush=True)
"""


@pytest.mark.parametrize('name', ['SIGTERM', 'SIGHUP', 'SIGUSR1', 'SIGUSR2'])
def test_each_stop_signal_is_raised_as_ctrl_c_once_and_a_ctrl_c_after_it_still_stops_at_once(name):
    out = subprocess.run([sys.executable, '-c', STOPS, name], cwd=REPO, env=ENV, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stderr == '', out.stderr
    assert out.stdout.splitlines() == [f'stopped by {name} True', 'went on', 'child True', 'then Ctrl-C']


def test_a_notebook_kernel_keeps_its_own_handlers(monkeypatch):
    "Inside Jupyter nothing is installed: SIGTERM still ends the kernel, its interrupt is the kernel's Ctrl-C."
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)}
    monkeypatch.setattr(errors, 'running_in_notebook', lambda: True)
    errors.stop_on_signals()
    assert {s: signal.getsignal(s) for s in before} == before
