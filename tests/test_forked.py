"""tests/support/forked.py: a process forked from the fork server is what `python` would have started. A probe
prints what a fresh interpreter sets up (argv, sys.path, folder, environment, standard streams, descriptors, session,
signal dispositions and mask, `__main__`, warnings filters, flags, whether its parent is this process) and ends in
each way a script ends; run both ways, every line it prints and its status are the same. The same for a probe that a
process (itself forked) starts with subprocess.Popen, forked by that process's zygote or started afresh."""
import json
import os
import re
import subprocess
import sys

import pytest

from tests.support import forked

pytestmark = pytest.mark.skipif(not forked.forking(), reason='no forking here (Linux only; ELECTRA_TESTS_FORK=0)')

PROBE = r'''
import json, os, signal, sys, warnings
def stream(s):
    return None if s is None else [s.encoding, s.errors, s.line_buffering, s.write_through, s.isatty(),
                                   type(s.buffer).__name__, s.mode, s.name]
main = sys.modules['__main__']
print(json.dumps({
    'argv': sys.argv, 'path': sys.path, 'cwd': os.getcwd(), 'env': os.environ.get('ELECTRA_PROBE_VALUE'),
    'parent': os.getppid() == int(os.environ['ELECTRA_PROBE_PARENT']), 'session': os.getsid(0) == os.getpid(),
    'group': os.getpgid(0) == os.getpid(), 'same group': os.getpgrp() == int(os.environ['ELECTRA_PROBE_GROUP']),
    'same session': os.getsid(0) == int(os.environ['ELECTRA_PROBE_SESSION']),
    'signals': {int(s): str(signal.getsignal(s)) for s in signal.valid_signals() if s not in (9, 19)},
    'mask': sorted(map(int, signal.pthread_sigmask(signal.SIG_BLOCK, []))),
    'streams': [stream(sys.stdin), stream(sys.stdout), stream(sys.stderr)],
    'main': sorted(k for k in vars(main) if k.startswith('__')), 'file': getattr(main, '__file__', None),
    'loader': type(getattr(main, '__loader__', None)).__name__, 'fds': sorted(map(int, os.listdir('/proc/self/fd'))),
    'flags': str(sys.flags), 'filters': [str(f[:3]) for f in warnings.filters], 'library': 'electra' in sys.modules,
    'name': __name__, 'comm': open('/proc/self/comm').read(), 'forked': '_electra_forked' in sys.modules}, sort_keys=True), file=sys.stderr)
end = os.environ['ELECTRA_PROBE_END']
if end == 'raise': raise ValueError('an uncaught error')
if end == 'ctrl-c': raise KeyboardInterrupt
if end == 'hook':  # a hook that exits, as the library's friendly_errors does
    sys.excepthook = lambda *a: sys.exit(130)
    raise RuntimeError('stopped')
if end == 'thread':
    import atexit, threading, time
    threading.Thread(target=lambda: (time.sleep(0.2), print('thread', flush=True))).start()
    atexit.register(lambda: print('atexit', flush=True))
sys.exit(int(end) if end.isdigit() else 0)
'''


@pytest.fixture(scope='module')
def probe(tmp_path_factory):
    folder = tmp_path_factory.mktemp('probe')
    (folder / 'probe.py').write_text(PROBE)
    return folder


def _ran(proc: subprocess.Popen) -> tuple[bool, int, str, str]:
    """(whether the probe was forked, the status, stdout, stderr) of a run of the probe (a missing script prints no
    line of the probe's: then whether the test's Popen forked it); the addresses of the objects the module spec of
    `-m` names differ between any two processes."""
    out, err = proc.communicate(timeout=120)
    said, _, rest = err.partition('\n')
    try: said = json.loads(said)
    except ValueError: was_forked, said = type(proc) is forked._ForkedPopen, err
    else: was_forked, said = said.pop('forked'), json.dumps(said) + '\n' + rest
    return was_forked, proc.returncode, out, re.sub(r'0x[0-9a-f]+', '0x', said)


def _env(**values: str) -> dict[str, str]:
    "This environment, the probe told who starts it (this process) and given a value to print."
    return {**os.environ, 'ELECTRA_PROBE_PARENT': str(os.getpid()), 'ELECTRA_PROBE_GROUP': str(os.getpgrp()),
            'ELECTRA_PROBE_SESSION': str(os.getsid(0)), 'ELECTRA_PROBE_VALUE': 'v', **values}


@pytest.mark.parametrize('how', ['script', 'relative script', 'module', 'code', 'session', 'devnull stdin',
                                 'pythonpath', 'closed stdout', 'missing script', 'unbuffered'])
def test_a_forked_process_is_the_process_python_starts(probe, how):
    argv = {'script': [str(probe / 'probe.py'), 'a', '--b'], 'module': ['-m', 'probe', 'x'],
            'code': ['-c', PROBE, 'y'], 'missing script': ['missing.py'], 'unbuffered': ['-u', 'probe.py']}.get(
        how, ['probe.py'])
    kwargs = {'session': {'start_new_session': True}, 'devnull stdin': {'stdin': subprocess.DEVNULL},
              'closed stdout': {'closed': (1,)}}.get(how, {})
    env = _env(**({'PYTHONPATH': f'{probe}{os.pathsep}relative'} if how == 'pythonpath' else {}))
    forked.run([sys.executable, '-c', 'pass'], env=env)  # a server is started at an environment's second use
    for end in ['0', '3', 'raise', 'ctrl-c', 'hook', 'thread']:
        ran = [_ran(popen([sys.executable, *argv], cwd=probe, env={**env, 'ELECTRA_PROBE_END': end},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs))
               for popen in (forked._real_popen, forked.Popen)]
        (real, *a), (was_forked, *b) = ran
        assert not real and was_forked and a == b, (end, a, b)
        if how == 'missing script': break


# a process (itself forked) that starts the probe as torchrun starts its workers, and the library its own
PARENT = r"""
import os, subprocess, sys
os.environ.update(ELECTRA_PROBE_PARENT=str(os.getpid()), ELECTRA_PROBE_GROUP=str(os.getpgrp()),
                  ELECTRA_PROBE_SESSION=str(os.getsid(0)))
new = os.environ['ELECTRA_PROBE_NEW'] == '1'
if new: os.environ['ELECTRA_PROBE_SESSION'] = '0'  # its own: the probe's session is then its pid, not 0
proc = subprocess.Popen([sys.executable, *sys.argv[1:]], start_new_session=new, env={**os.environ, 'OMP_X': '1'}
                        if os.environ['ELECTRA_PROBE_KEY'] == '1' else None)
sys.exit(proc.wait() % 256)
"""


@pytest.mark.parametrize('how', ['script', 'unbuffered module', 'new session', 'closed stdin', 'another import key'])
def test_a_process_a_forked_process_starts_is_the_process_python_starts(probe, how):
    argv = {'unbuffered module': ['-u', '-m', 'probe', 'x']}.get(how, [str(probe / 'probe.py'), 'a'])
    env = _env(ELECTRA_PROBE_NEW=str(int(how == 'new session')), ELECTRA_PROBE_KEY=str(int(how == 'another import key')))
    for end in ['0', '3', 'raise', 'ctrl-c', 'thread']:
        ran = [_ran(forked.Popen([sys.executable, '-c', PARENT, *argv], cwd=probe,
                                 env={**env, 'ELECTRA_PROBE_END': end, 'ELECTRA_TESTS_FORK': nested},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 closed=(0,) if how == 'closed stdin' else ()))
               for nested in ('top', '1')]
        (real, *a), (was_forked, *b) = ran
        assert not real and was_forked == (how != 'another import key') and a == b, (end, a, b)
