"""electra/runtime/errors.py `friendly_errors` and the environment of a torchrun job (electra/runtime/processes.py
`world`, electra/training/distributed.py `init_distributed`): variables torchrun sets, given by hand and wrong, end in
one `error: ...` line naming them, status 2, never in a traceback (of the job, or of the error hook itself)."""
import os
import re
import subprocess
import sys

import pytest

from electra.config.base import ConfigError
from electra.runtime.processes import world
from tests.support.distributed import REPO

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
