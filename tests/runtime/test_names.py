"""User strings that become file and folder names (task, run, group, variant names): a name that would leave the
folders the user gave, or break on a file system, is refused in one line naming the key before anything is written,
and nothing appears outside those folders."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from electra.config.errors import ConfigError
from electra.config.file_names import NAME_BYTES, safe_name
from electra.experiments.compare import load_compare_config, run_comparison
from electra.finetuning.tasks.demo import write_demo_tasks
from electra.runtime.files import path_inside
from tests.support.finetune import finetune_in_process
from tests.support.pretrain import pretrain

pytestmark = pytest.mark.usefixtures('one_thread')

# what a careless or hostile user might give as a name; ABS stands for an absolute path inside the test's own folder
# (a name that escaped would be seen there, and nothing is written anywhere else)
HOSTILE = ['../x', 'ABS', 'a/b', '..', '-rf', 'a\x00b', 'x' * 300]
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


def finetune_argv(sandbox: Path, model: Path, task: Path, group: str = 't') -> list[str]:
    return ['--model', str(model), '--tasks', str(task), '--runs', '1', '--epochs', '1', '--group', group,
            '--output_dir', str(sandbox / 'ckpt'), '--test_output_dir', str(sandbox / 'out'),
            '--cache_dir', str(sandbox / 'cache'), '--device', 'cpu', '--max_length', '32', '--threads', '1']


def test_a_task_file_named_to_climb_out_writes_nothing_outside_the_output_folders(tmp_path, tiny_dir):
    "The reported case: `name: ../../escape` put the run's checkpoint and token caches two folders above the group's."
    sandbox = tmp_path / 'a' / 'b' / 'sandbox'
    task = task_file(sandbox / 'data', '../../escape')
    before = files_under(tmp_path)
    with pytest.raises(ConfigError) as e: finetune_in_process(*finetune_argv(sandbox, tiny_dir, task))
    message = str(e.value)
    assert message.startswith(f'{task}: line 1: name: ') and "'../../escape'" in message and '\n' not in message
    assert files_under(tmp_path) == before


@pytest.mark.parametrize('name, why', [
    ('../x', "holds '/', which separates folders"), ('/tmp/abs', 'is an absolute path'), ('a/b', "holds '/'"),
    ('a\\b', "holds '\\\\'"), ('C:\\x', 'is an absolute path'), ('..', 'names a folder itself or its parent'),
    ('.', 'names a folder itself'), ('-rf', "starts with '-'"), ('.x', "starts with '.'"), ('', 'is empty'),
    ('a\x00b', "holds the control character '\\x00'"), ('a\nb', "holds the control character '\\n'"),
    ('a\u202eb', "holds the control character '\\u202e'"), ('a:b', "holds ':'"), ('a?', "holds '?'"),
    ('x ', 'begins or ends with a space'), ('x.', "ends with '.'"), ('NUL', 'the name of a device'),
    ('com1.txt', 'the name of a device'), ('x' * 300, 'is 300 bytes long'), ('語' * 67, 'is 201 bytes long'),
    (5, 'is not text'),
])
def test_a_name_that_is_not_one_safe_file_name_is_refused_naming_the_key(name, why):
    with pytest.raises(ConfigError) as e: safe_name(name, 'group')
    message = str(e.value)
    assert message.startswith('group: ') and why in message and '\n' not in message, message
    shown = repr(name) if not isinstance(name, str) or len(name) <= 60 else repr(name[:40])
    assert shown in message  # the value, as written (a long one by its start)


@pytest.mark.parametrize('name', ['RTE', 'my-task_v2.1', '日本語タスク', 'STS-B', 'हिन्दी', 'مهمة', 'x y', 'a+b',
                                  'x' * NAME_BYTES, 'CONSOLE', 'ner2'])
def test_a_name_of_any_script_is_kept_as_given(name):
    assert safe_name(name, 'name') is name


def test_the_name_of_a_task_file_is_refused_with_its_file_and_line(tmp_path):
    "The line of `name:` (or, without one, the file name, which names the task): the error points at what to edit."
    from electra.finetuning.tasks.files import read_task_file
    task = task_file(tmp_path, 'a/b')
    with pytest.raises(ConfigError, match=rf"^{task}: line 1: name: 'a/b' holds '/'"): read_task_file(task)
    task_file(tmp_path, None).rename(tmp_path / '-rf.yaml')
    with pytest.raises(ConfigError, match=r"-rf.yaml: name \(none given, so the file's\): '-rf' starts with '-'"):
        read_task_file(tmp_path / '-rf.yaml')
    task_file(tmp_path, 2024)  # a number is a name as written
    assert read_task_file(tmp_path / 'task.yaml').name == '2024'


def test_a_path_below_a_folder_stays_inside_it_links_resolved(tmp_path):
    root, elsewhere = tmp_path / 'out', tmp_path / 'elsewhere'
    (root / 'kept').mkdir(parents=True)
    elsewhere.mkdir()
    assert path_inside(root, 'g', 'x_0.pth', key='output_dir') == root / 'g' / 'x_0.pth'  # as composed, not resolved
    (root / 'inner').symlink_to(root / 'kept')  # a link that stays inside is the folder's own
    assert path_inside(root, 'inner', 'x', key='output_dir') == root / 'inner' / 'x'
    (root / 'away').symlink_to(elsewhere)
    for names in (('..', 'x'), ('g', '../../x'), (str(elsewhere),), ('away', 'x'), ('away',)):
        with pytest.raises(ConfigError) as e: path_inside(root, *names, key='output_dir')
        assert str(e.value).startswith(f'output_dir: {root.joinpath(*names)} leads to ') and str(root) in str(e.value)


def _job(sandbox: Path, place: str, name: str, model: Path):
    """The job that turns `name` into a path at `place`, its inputs written in `sandbox`: a function that runs it in
    this process, and the task file that names it (or None)."""
    good, task = task_file(sandbox / 'data', None), None
    if place in ('reviews', 'ner', 'squad'):  # a task file of each kind
        task = next(f for f in write_demo_tasks(sandbox / 'tasks', {'train': 8, 'dev': 4, 'test': 4}) if f.stem == place)
        lines = task.read_text().splitlines()
        task.write_text('\n'.join(f'name: {json.dumps(name)}' if ln.startswith('name:') else ln for ln in lines))
        return lambda: finetune_in_process(*finetune_argv(sandbox, model, task)), task
    if place == 'run_name': return lambda: pretrain(sandbox, '--run_name', name, '--seed', '1'), None
    if place == 'group': return lambda: finetune_in_process(*finetune_argv(sandbox, model, good, group=name)), None

    def compare():
        argv = ['--output_dir', str(sandbox / 'cmp'), *(['--name', name] if place == 'name' else [])]
        cfg = load_compare_config(argv, overrides={'variants': {name: {}}} if place == 'variants' else None)
        run_comparison(cfg, launch=lambda cmd, log: pytest.fail(f'launched {cmd}'), log=lambda s: None)
    return compare, None


@pytest.mark.parametrize('place', ['run_name', 'group', 'reviews', 'ner', 'squad', 'name', 'variants'])
@pytest.mark.parametrize('name', HOSTILE, ids=lambda n: repr(n)[:12])
def test_a_hostile_name_anywhere_is_refused_before_anything_is_written(tmp_path, tiny_dir, place, name):
    """Every place a user's name becomes a file or folder name: pretraining's run, fine-tuning's group, a task file's
    task of each kind, a comparison (name) and its variants. Each is refused in one line naming its key, and nothing
    at all is written, in the job's folders or outside them up to tmp_path (ABS: an absolute path there)."""
    name = str(tmp_path / 'abs') if name == 'ABS' else name
    job, task = _job(tmp_path / 'a' / 'b' / 'sandbox', place, name, tiny_dir)
    before = files_under(tmp_path)
    with pytest.raises(ConfigError) as e: job()
    key = {'run_name': 'run_name', 'group': 'group', 'name': 'name', 'variants': 'variants'}.get(place)
    assert str(e.value).startswith(f'{key}: ' if key else f'{task}: line 2: name: ') and '\n' not in str(e.value)
    assert files_under(tmp_path) == before


def test_a_composed_run_name_too_long_is_refused_before_any_launch(tmp_path):
    "The comparison names its runs <name>_<variant>: two names of fine length can make one too long."
    cfg = load_compare_config(['--output_dir', str(tmp_path / 'cmp'), '--name', 'c' * 100],
                              overrides={'variants': {'v' * 100: {}}})
    with pytest.raises(ConfigError, match=r"^name, variants: 'cccc.*\(201 characters\) is 201 bytes long"):
        run_comparison(cfg, launch=lambda cmd, log: pytest.fail(f'launched {cmd}'), log=lambda s: None)
    assert not (tmp_path / 'cmp').exists()


def test_a_link_inside_an_output_folder_that_leads_out_is_refused(tmp_path, tiny_dir, glue_dir):
    "A group folder that is a link to another place: the job writes nothing there, nor anything outside its folders."
    sandbox, elsewhere = tmp_path / 'sandbox', tmp_path / 'elsewhere'
    task = task_file(sandbox / 'data', 'reviews')
    elsewhere.mkdir()
    (sandbox / 'ckpt').mkdir()
    (sandbox / 'ckpt' / 't').symlink_to(elsewhere)
    before = files_under(tmp_path)
    with pytest.raises(ConfigError, match=rf"^output_dir: {sandbox / 'ckpt' / 't'} leads to {elsewhere}, outside"):
        finetune_in_process(*finetune_argv(sandbox, tiny_dir, task), '--data', str(glue_dir))
    assert list(elsewhere.iterdir()) == []
    new = files_under(tmp_path) - before
    assert all(any(p.is_relative_to(sandbox / f) for f in ('ckpt', 'out', 'cache')) for p in new), sorted(new)
