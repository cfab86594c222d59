"""electra/finetuning/tasks/demo.py as a command: its usage error ends as the other tools' do."""
import sys

from tests.support import forked
from tests.support.distributed import REPO


def test_the_command_without_its_folder_prints_its_usage_with_status_2():
    "It ended with status 1, where argparse and the other tools of the project end a usage error with 2."
    res = forked.run([sys.executable, '-m', 'electra.finetuning.tasks.demo'], cwd=REPO, capture_output=True,
                     text=True, timeout=120)
    assert (res.returncode, res.stdout) == (2, '') and res.stderr == (
        'usage: python -m electra.finetuning.tasks.demo [-h] [--version] DIR\n'
        'python -m electra.finetuning.tasks.demo: error: the following arguments are required: DIR\n')
