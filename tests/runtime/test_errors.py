"""How a job ends (electra/runtime/errors.py `friendly_errors`): the environment of a torchrun job
(electra/runtime/processes.py `world`, electra/training/distributed.py `init_distributed`): variables torchrun sets,
given by hand and wrong, end in one `error: ...` line naming them, status 2, never in a traceback (of the job, or of
the error hook itself); the stop signals raised as Ctrl-C is, once, in a process of their own."""
import os
import re
import signal
import subprocess
import sys

import pytest

from electra.config.errors import ConfigError
from electra.runtime import errors
from electra.runtime.processes import world
from tests.support import forked
from tests.support.distributed import ENV, REPO
# a job's first lines, as the drivers start: the hook, then the first question a job asks of its environment
JOB = 'from electra.runtime.errors import friendly_errors; friendly_errors(); from electra.runtime.processes import world; world()'


@pytest.mark.parametrize('env, named', [
    ({'WORLD_SIZE': 'abc'}, "WORLD_SIZE='abc' is not a number"),        # the hook itself raised reading WORLD_SIZE
    ({'WORLD_SIZE': '0'}, 'WORLD_SIZE=0'),                               # ZeroDivisionError in the batch split
    ({'RANK': '-1'}, 'RANK=-1'),                                         # numpy's seed refused the negative rank
    ({'RANK': '3', 'WORLD_SIZE': '2'}, 'RANK=3'),                        # torch's rendezvous failed later
    ({'LOCAL_RANK': '1', 'LOCAL_WORLD_SIZE': '1'}, 'LOCAL_RANK=1'),
    ({'LOCAL_WORLD_SIZE': '0'}, 'LOCAL_WORLD_SIZE=0'),                   # ran on, status 0
])
def test_a_torchrun_variable_that_cannot_be_is_one_error_line_naming_it(env, named):
    clean = {k: v for k, v in os.environ.items() if k not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')}
    res = subprocess.run([sys.executable, '-c', JOB], cwd=REPO, env={**clean, **env}, capture_output=True, text=True,
                         timeout=60)
    assert (res.returncode, res.stdout) == (2, '')
    assert re.match(r'(\[rank\d+\] )?error: environment: ', res.stderr)  # (a process of several names its rank)
    assert res.stderr.count('\n') == 1 and named in res.stderr


def test_a_rendezvous_address_that_cannot_be_is_refused_before_joining(monkeypatch):
    "MASTER_PORT=abc was torch's ValueError traceback from inside init_process_group; an unset MASTER_ADDR too."
    from electra.training.distributed import init_distributed
    import torch
    monkeypatch.setenv('WORLD_SIZE', '2'), monkeypatch.setenv('RANK', '0')
    for addr, port, named in (('127.0.0.1', 'abc', "MASTER_PORT='abc'"), ('127.0.0.1', '70000', "MASTER_PORT='70000'"),
                              ('', '29500', 'MASTER_ADDR')):
        monkeypatch.setenv('MASTER_ADDR', addr), monkeypatch.setenv('MASTER_PORT', port)
        with pytest.raises(ConfigError, match=f'^environment: {named}'): init_distributed(torch.device('cpu'), 5)
    assert world().size == 2


STOPS = """
import os, signal, sys, time
from electra.runtime.errors import StopSignal, stop_on_signals, stopped_by
# SIGINT as a process started from a terminal has it (a test runner's worker may pass it on blocked or ignored)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
signal.signal(signal.SIGINT, signal.default_int_handler)
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


ENDING = """
import atexit, os, signal, sys, time
from electra.config.errors import ConfigError
from electra.runtime.errors import friendly_errors
friendly_errors()
def signalled():  # torchrun's SIGTERM to this process, once another process of the job has failed
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    time.sleep(0.2)
if sys.argv[2] == 'atexit': atexit.register(signalled)
else: sys.stderr = type('Slow', (), {'write': lambda self, s: (signalled(), sys.__stderr__.write(s))[1],
                                     'flush': lambda self: sys.__stderr__.flush()})()
raise ConfigError('batch_size: 5 cannot be split over 2 processes.')
"""


@pytest.mark.parametrize('when', ['atexit', 'while it is said'])
@pytest.mark.parametrize('name', ['SIGTERM', 'SIGUSR1'])
def test_a_stop_signal_while_a_job_ends_with_an_error_changes_nothing_of_its_end(name, when):
    """A process of a torchrun job that failed gets torchrun's SIGTERM while it ends (its error line being written,
    its atexit functions running): it ends as it was ending, one `error:` line and status 2. It printed the
    StopSignal's traceback, raised inside the hook or an atexit function."""
    res = forked.run([sys.executable, '-c', ENDING, name, when], cwd=REPO, env=ENV, capture_output=True, text=True,
                     timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (2, '', 'error: batch_size: 5 cannot be split over 2 processes.\n')


@pytest.mark.parametrize('name', ['SIGTERM', 'SIGHUP', 'SIGUSR2'])
def test_a_stop_signal_in_the_atexit_functions_of_a_job_that_ended_well_changes_nothing_of_its_end(name):
    """A job whose work is done gets a stop signal while its atexit functions run (a scheduler's SIGTERM at the end of
    its time, torchrun's to the other processes): it ends as it was ending, status 0, nothing printed. It printed
    `Exception ignored in atexit callback` and the StopSignal's traceback."""
    ended_well = ENDING.replace("raise ConfigError('batch_size: 5 cannot be split over 2 processes.')", "print('done')")
    res = forked.run([sys.executable, '-c', ended_well, name, 'atexit'], cwd=REPO, env=ENV, capture_output=True,
                     text=True, timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (0, 'done\n', '')
