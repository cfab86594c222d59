"""User strings that become file and folder names (task, run, group, variant names): a name that would leave the
folders the user gave, or break on a file system, is refused in one line naming the key before anything is written,
and nothing appears outside those folders."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from electra.config.base import ConfigError
from tests.support.finetune import finetune_in_process

pytestmark = pytest.mark.usefixtures('one_thread')

SENTENCES = [('good film', 'pos'), ('bad film', 'neg'), ('great plot', 'pos'), ('awful plot', 'neg')] * 2


def files_under(root: Path) -> set[Path]:
    "Every file and folder below `root`."
    return set(root.rglob('*'))


def task_file(folder: Path, name: str | None) -> Path:
    "A classification task file (`name:` as given, or none) over a tiny CSV, in `folder`."
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(SENTENCES, columns=['sentence', 'label']).to_csv(folder / 'train.csv', index=False)
    head = '' if name is None else f'name: {json.dumps(name)}\n'  # JSON's string is YAML's, control characters too
    (folder / 'task.yaml').write_text(f'{head}train: train.csv\ndev: train.csv\ntext: sentence\nlabel: label\n',
                                      encoding='utf-8')
    return folder / 'task.yaml'


def finetune_argv(sandbox: Path, model: Path, task: Path) -> list[str]:
    return ['--model', str(model), '--tasks', str(task), '--runs', '1', '--epochs', '1', '--group', 't',
            '--output_dir', str(sandbox / 'ckpt'), '--test_output_dir', str(sandbox / 'out'),
            '--cache_dir', str(sandbox / 'cache'), '--device', 'cpu', '--max_length', '32', '--threads', '1']


def test_a_task_file_named_to_climb_out_writes_nothing_outside_the_output_folders(tmp_path, tiny_dir):
    "The reported case: `name: ../../escape` put the run's checkpoint and test file two folders above the group's."
    sandbox = tmp_path / 'a' / 'b' / 'sandbox'
    task = task_file(sandbox / 'data', '../../escape')
    before = files_under(tmp_path)
    with pytest.raises(ConfigError) as e: finetune_in_process(*finetune_argv(sandbox, tiny_dir, task))
    message = str(e.value)
    assert message.startswith(f'{task}: line 1: name: ') and "'../../escape'" in message and '\n' not in message
    assert files_under(tmp_path) == before
