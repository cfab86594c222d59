"""electra/config/finetune.py: FinetuneConfig's presets, per-task overrides and defaults."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from electra.config.cli import load_config
from electra.config.errors import ConfigError, RunWarning
from electra.config.finetune import INPUT_KEYS, JOB_KEYS, RESULT_KEYS, TASK_KEYS, FinetuneConfig
from electra.config.values import config_from_dict, value_sources
from electra.finetuning.tasks.glue.tasks import TASKS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures('one_thread')
@pytest.mark.parametrize('preset, lr, decay', [('small', 3e-4, 0.8), ('base', 1e-4, 0.8), ('large', 5e-5, 0.9), ('demo', 1e-3, 0.8)])
def test_presets(preset, lr, decay):
    cfg = load_config(FinetuneConfig, ['--config', preset], preset_dir=REPO / 'configs/finetune')
    assert (cfg.lr, cfg.layer_lr_decay, cfg.batch_size, cfg.weight_decay, cfg.layer_lr_mode) == (lr, decay, 32, 0.0, 'official')
    assert cfg.for_task('RTE').epochs == cfg.for_task('STS-B').epochs == 10 and cfg.for_task('CoLA').epochs == 3
    assert cfg.tasks == list(TASKS) and cfg.select == 'best'


@pytest.mark.usefixtures('one_thread')
def test_the_preset_table_of_the_docs_is_what_each_preset_file_holds():
    "docs/fidelity.md's fine-tuning hyperparameters per preset, cell by cell, equal what `--config NAME` reads."
    table = (REPO / 'docs/fidelity.md').read_text().split('| preset | lr (`lr`) |', 1)[1].split('\n\n', 1)[0]
    rows = [[c.strip() for c in line.split('|')[1:-1]] for line in table.splitlines()[2:]]
    assert [r[0].split()[0] for r in rows] == ['`small`', '`base`', '`large`', '`demo`']
    for name, lr, decay, batch, epochs, model in rows:
        cfg = load_config(FinetuneConfig, ['--config', name.split()[0].strip('`')], preset_dir=REPO / 'configs/finetune')
        long = sorted(t for t in TASKS if cfg.for_task(t).epochs != cfg.epochs)
        assert (float(lr), float(decay), int(batch)) == (cfg.lr, cfg.layer_lr_decay, cfg.batch_size), name
        assert epochs == f"{cfg.epochs}; {cfg.for_task(long[0]).epochs} for {' and '.join(long)}", name
        assert model == (f"{cfg.model} (the released Small++)" if name.startswith('`small`') else cfg.model if
                         name != '`demo`' else f"the demo pretraining's checkpoint, length {cfg.max_length}, "
                                               f"{cfg.runs} runs"), name


@pytest.mark.usefixtures('one_thread')
def test_task_overrides_are_validated():
    with pytest.raises(ConfigError, match="task_overrides.RTE: 'epoch' cannot be set per task. Did you mean 'epochs'"):
        config_from_dict(FinetuneConfig, {'task_overrides': {'RTE': {'epoch': 3}}})
    with pytest.raises(ConfigError, match="unknown GLUE task 'rte'. Did you mean 'RTE'"):
        config_from_dict(FinetuneConfig, {'task_overrides': {'rte': {'epochs': 3}}})
    with pytest.raises(ConfigError, match=r"^config: key 'task_overrides\.MRPC\.epochs': 0 is not a whole number > 0 "
                                          r"\(passes over the training set\)$"):
        config_from_dict(FinetuneConfig, {'task_overrides': {'MRPC': {'epochs': 0}}})
    with pytest.raises(ConfigError, match='task_overrides.SST-2: double_unordered needs a sentence-pair task'):
        config_from_dict(FinetuneConfig, {'task_overrides': {'SST-2': {'double_unordered': True}}})
    with pytest.raises(ConfigError, match='AX is predicted with the MNLI model'):
        config_from_dict(FinetuneConfig, {'tasks': ['AX']})
    cfg = config_from_dict(FinetuneConfig, {'lr': 1e-4, 'task_overrides': {'CoLA': {'lr': 2e-4, 'layer_lr_mode': 'intended'}}})
    assert (cfg.for_task('CoLA').lr, cfg.for_task('CoLA').layer_lr_mode, cfg.for_task('SST-2').lr) == (2e-4, 'intended', 1e-4)


def test_length_buckets_are_checked_and_reach_the_task_s_loaders():
    "Buckets must be positive and hold max_length; a task's own buckets (task_overrides) reach its loaders' batches."
    import numpy as np
    from electra.finetuning.tasks.classification import ClassificationTask
    from electra.finetuning.tasks.encoding import Encoded
    with pytest.raises(ConfigError, match=r"^config: key 'length_buckets': \[0, 128\] is not a list of whole numbers > 0 "
                                          r"\(empty: each batch padded to its longest example; pad every batch"):
        config_from_dict(FinetuneConfig, {'length_buckets': [0, 128]})
    with pytest.raises(ConfigError, match=r'^length_buckets: the largest \(64\) must hold max_length \(128\).*add 128'):
        config_from_dict(FinetuneConfig, {'length_buckets': [32, 64]})
    cfg = config_from_dict(FinetuneConfig, {'batch_size': 2, 'eval_batch_size': 2,
                                            'task_overrides': {'RTE': {'length_buckets': [16, 128]}}})
    assert cfg.length_buckets == [] and cfg.for_task('RTE').length_buckets == [16, 128]
    lengths = np.array([5, 3, 9, 20])  # token i of example j is j
    enc = Encoded(np.concatenate([np.full(n, j) for j, n in enumerate(lengths)]), np.cumsum([0, *lengths]),
                  lengths, np.zeros(4, dtype=np.int64), np.arange(4))
    task = ClassificationTask.__new__(ClassificationTask)
    for train in (True, False):
        widths = sorted(b[0].shape[1] for b in task.loader(enc, cfg.for_task('RTE'), 0, train))
        assert widths == [16, 128] if not train else set(widths) <= {16, 128}


def test_finetuning_trains_on_random_batches_by_default():
    from electra.config.finetune import FinetuneConfig
    assert FinetuneConfig().length_bucketing is False and FinetuneConfig().for_task('MRPC').length_bucketing is False


def test_command_line_tasks_replace_a_preset_s_task_file_before_it_is_read(tmp_path):
    # a preset naming a task file that is not there: `--tasks` replaces the list before any task file is read
    preset = tmp_path / 'mine.yaml'
    preset.write_text(f"tasks: [{tmp_path / 'absent.yaml'}]\nruns: 2\n")
    cfg = load_config(FinetuneConfig, ['--config', str(preset), '--tasks', 'STS-B'], preset_dir=REPO / 'configs/finetune')
    assert (cfg.tasks, cfg.runs) == (['STS-B'], 2)
    cfg = load_config(FinetuneConfig, ['--config', str(preset)], preset_dir=REPO / 'configs/finetune',
                      overrides={'tasks': ['MRPC']})                     # a notebook's config cell too
    assert cfg.tasks == ['MRPC']
    with pytest.raises(ConfigError, match=rf"^{preset}: line 1: tasks: '{tmp_path / 'absent.yaml'}' is no task file: "
                                          rf"there is none at {tmp_path / 'absent.yaml'}\. "):  # still refused if kept
        load_config(FinetuneConfig, ['--config', str(preset)], preset_dir=REPO / 'configs/finetune')


def test_a_later_preset_or_the_command_line_settles_what_an_earlier_preset_left_invalid(tmp_path):
    # checks apply to the final config: a preset's value is judged only once the command line has had its say
    preset = tmp_path / 'mine.yaml'
    preset.write_text('runs: 0\n')
    assert load_config(FinetuneConfig, ['--config', str(preset), '--runs', '3'], preset_dir=REPO / 'configs/finetune').runs == 3
    with pytest.raises(ConfigError, match=rf"^{preset}: line 1: key 'runs': 0 is not a whole number > 0 \(fine-tuning runs"):
        load_config(FinetuneConfig, ['--config', str(preset)], preset_dir=REPO / 'configs/finetune')


@pytest.mark.usefixtures('one_thread')
def test_a_per_task_key_on_the_command_line_replaces_the_presets_task_overrides_and_says_so():
    "--epochs 1 trained RTE the preset's 10 epochs without a word; the command line wins, in a warning."
    with pytest.warns(RunWarning, match=r"--epochs 1 applies to every task: it replaces the preset's task_overrides "
                                        r"\(RTE epochs: 10; STS-B epochs: 10\)\. To keep a per-task value"):
        cfg = load_config(FinetuneConfig, ['--config', 'demo', '--epochs', '1'], preset_dir=REPO / 'configs/finetune')
    assert cfg.for_task('RTE').epochs == cfg.for_task('STS-B').epochs == cfg.for_task('CoLA').epochs == 1
    assert cfg.task_overrides == {}


@pytest.mark.usefixtures('one_thread')
def test_task_overrides_given_with_the_key_on_the_command_line_are_kept():
    argv = ['--config', 'demo', '--epochs', '1', '--task_overrides', '{RTE: {epochs: 4}}']
    cfg = load_config(FinetuneConfig, argv, preset_dir=REPO / 'configs/finetune')
    assert (cfg.for_task('RTE').epochs, cfg.for_task('STS-B').epochs) == (4, 1)
    cfg = load_config(FinetuneConfig, ['--config', 'demo', '--lr', '1e-4'], preset_dir=REPO / 'configs/finetune')
    assert cfg.for_task('RTE').epochs == 10 and cfg.for_task('RTE').lr == 1e-4


@pytest.mark.usefixtures('one_thread')
def test_task_overrides_typed_are_merged_over_the_presets_task_by_task_and_key_by_key():
    """R18a-3: `--config demo --task_overrides '{MRPC: {epochs: 1}}'` trained RTE 3 epochs, not demo's 10, in silence
    (and `{RTE: {lr: 0.002}}` dropped RTE's 10 epochs): a typed mapping replaced the preset's whole. What the command
    types wins value by value (README): the preset's other tasks, and the typed task's other keys, stay; each entry
    says where it came from; a per-task flag still replaces that key in the preset's entries, not in the typed ones."""
    import warnings

    from electra.config.values import entry_sources
    demo = f"{REPO / 'configs/finetune/demo.yaml'}: line "
    load = lambda *argv, **kw: load_config(FinetuneConfig, ['--config', 'demo', *argv],
                                           preset_dir=REPO / 'configs/finetune', **kw)
    cfg = load('--task_overrides', '{MRPC: {epochs: 1}}')
    assert [cfg.for_task(t).epochs for t in ('MRPC', 'RTE', 'STS-B', 'CoLA')] == [1, 10, 10, 3]
    assert cfg.task_overrides == {'RTE': {'epochs': 10}, 'STS-B': {'epochs': 10}, 'MRPC': {'epochs': 1}}
    sources = entry_sources(cfg, 'task_overrides')
    assert sources['MRPC'] == 'command line' and sources['RTE'].startswith(demo) and sources['STS-B'].startswith(demo)
    cfg = load('--task_overrides', '{RTE: {lr: 0.002}}')
    assert (cfg.for_task('RTE').epochs, cfg.for_task('RTE').lr, cfg.for_task('MRPC').lr) == (10, 0.002, 1e-3)
    assert load('--task_overrides', '{}').task_overrides == {}  # none at all, as typed
    cfg = load(overrides={'task_overrides': {'MRPC': {'epochs': 1}}})  # a notebook's overrides alike
    assert [cfg.for_task(t).epochs for t in ('MRPC', 'RTE')] == [1, 10]
    assert entry_sources(cfg, 'task_overrides')['MRPC'] == 'overrides'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        cfg = load('--epochs', '1', '--task_overrides', '{RTE: {epochs: 4}}')
    assert [cfg.for_task(t).epochs for t in ('RTE', 'STS-B', 'MRPC')] == [4, 1, 1]
    assert [str(w.message) for w in caught if w.category is RunWarning] == [
        "--epochs 1 applies to every task: it replaces the preset's task_overrides (STS-B epochs: 10). To keep a "
        "per-task value, give task_overrides on the command line too."]


def test_every_key_is_declared_as_changing_a_run_s_result_or_not():
    "A key added to the job must be placed: a setting that changes results but is left out would reuse rows it changes."
    groups = [RESULT_KEYS, INPUT_KEYS, JOB_KEYS]
    keys = [f.name for f in dataclasses.fields(FinetuneConfig)]
    assert sorted(k for g in groups for k in g) == sorted(keys)  # each key once, none unknown
    assert set(TASK_KEYS) <= set(RESULT_KEYS) | {'eval_batch_size'}  # per-task keys change results


def _tasks_with_own_values(tmp_path) -> tuple[Path, Path]:
    "The demo's tagging and SQuAD task files, the tagging one setting its own epochs and lr (lines 8 and 9)."
    from electra.finetuning.tasks.demo import write_demo_tasks
    _, ner, squad = write_demo_tasks(tmp_path / 'tasks', sizes={'train': 8, 'dev': 4, 'test': 4})
    lines = ner.read_text(encoding='utf-8').splitlines()
    ner.write_text('\n'.join([*lines[:7], 'epochs: 5', 'lr: 0.002', *lines[7:]]) + '\n', encoding='utf-8')
    return ner, squad


@pytest.mark.usefixtures('one_thread')
def test_the_command_line_wins_over_task_files_and_kinds_a_task_file_over_the_preset_the_kind_fills_the_rest(tmp_path):
    """R1-1: `--max_length 32` with a tagging task trained at the kind's 256, `--epochs 1` with demo_squad at the kind's
    2 epochs, `--epochs 1` with a task file's `epochs: 5` at 5, all with status 0 and the command line's value recorded.
    The rule: the command line > task_overrides > a task file > the kind's defaults > the preset's keys > the defaults
    (official configure_finetuning.py: a task's defaults over the general ones, passed-in hparams over both)."""
    ner, squad = _tasks_with_own_values(tmp_path)
    preset = tmp_path / 'mine.yaml'
    preset.write_text('max_length: 64\nepochs: 3\nlr: 0.001\ntask_overrides: {}\n', encoding='utf-8')
    load = lambda *argv: load_config(FinetuneConfig, ['--config', str(preset), '--tasks', f'{ner},{squad}', *argv],
                                     preset_dir=REPO / 'configs/finetune')
    values = lambda cfg, task: tuple(getattr(cfg.for_task(task), k) for k in ('epochs', 'lr', 'max_length', 'dropout'))
    cfg = load()  # nobody typed: the task file's over the kind's, the kind's over the preset's (official: squad 512)
    assert values(cfg, 'ner') == (5, 0.002, 256, 0.0) and values(cfg, 'squad') == (2, 0.001, 512, 0.1)
    assert cfg.for_task('squad').eval_batch_size == 32 and cfg.command_line_over_task_files() == []
    sources = value_sources(cfg.for_task('ner'))
    assert (sources['epochs'], sources['lr']) == (f'{ner.resolve()}: line 8', f'{ner.resolve()}: line 9')
    assert (sources['max_length'], sources['dropout']) == ("the tagging kind's default",) * 2
    assert value_sources(cfg.for_task('squad'))['lr'] == f'{preset}: line 3'  # a key no kind sets: the preset's
    cfg = load('--max_length', '32', '--epochs', '1')  # the command line over all
    assert values(cfg, 'ner') == (1, 0.002, 32, 0.0) and values(cfg, 'squad') == (1, 0.001, 32, 0.1)
    assert value_sources(cfg.for_task('ner'))['epochs'] == 'command line'
    assert cfg.command_line_over_task_files() == [
        f"ner: epochs 1 from the command line replaces epochs: 5 of its task file ({ner.resolve()}: line 8)"]
    cfg = load_config(FinetuneConfig, ['--config', 'demo_squad', '--tasks', str(squad), '--epochs', '1'],
                      preset_dir=REPO / 'configs/finetune')  # its task_overrides' 8 epochs replaced, said at load
    assert (cfg.for_task('squad').epochs, cfg.for_task('squad').max_length) == (1, 128)
    cfg = load('--epochs', '1', '--task_overrides', '{ner: {epochs: 7}}')  # a per-task value typed too: it wins
    # R25b-3: said as the command line's are, its source the entry's (it was said nowhere, its source
    # `task_overrides.ner` whether the command line or which preset line gave it)
    assert values(cfg, 'ner')[0] == 7 and cfg.command_line_over_task_files() == [
        f"ner: epochs 7 from task_overrides.ner (command line) replaces epochs: 5 of its task file ({ner.resolve()}: "
        "line 8)"]
    assert value_sources(cfg.for_task('ner'))['epochs'] == 'task_overrides.ner (command line)'
    preset.write_text('max_length: 64\nepochs: 3\nlr: 0.001\ntask_overrides:\n  ner: {epochs: 6}\n', encoding='utf-8')
    assert value_sources(load().for_task('ner'))['epochs'] == f'task_overrides.ner ({preset}: line 5)'


@pytest.mark.usefixtures('one_thread')
def test_select_median_with_an_ensemble_is_said_once_not_to_apply():
    "`--select median --ensemble_k 2` submitted the top 2 by dev score, as `best` does, without a word."
    import warnings

    def load(*flags):
        return load_config(FinetuneConfig, ['--config', 'demo', '--runs', '3', *flags], preset_dir=REPO / 'configs/finetune')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        cfg = load('--select', 'median', '--ensemble_k', '2')
        for name in ('RTE', 'MNLI'): cfg.for_task(name)  # each task's config: not said again
    said = [str(w.message) for w in caught if issubclass(w.category, RunWarning)]
    assert said == ["select: median does not apply with ensemble_k 2: the test predictions average the top 2 runs by "
                    "dev score whatever select says, and save_pretrained's picked runs are those 2. Set ensemble_k 1 "
                    "to submit the median run."]
    with warnings.catch_warnings():
        warnings.simplefilter('error', RunWarning)  # best with an ensemble, or median alone: nothing to say
        load('--ensemble_k', '2')
        load('--select', 'median')


def test_a_task_file_not_found_is_named_as_written_where_it_was_looked_for_and_where_it_was_set(tmp_path, monkeypatch):
    """R25b-4: a preset's `tasks: [./mytask.yaml]` beside the preset, read from the current folder, ended in
    `error: mytask.yaml: no such task file`: neither the path as written, nor the folder looked in, nor the preset's
    line; the user saw the file beside the preset. The line names all three now, and the rule."""
    from electra.config.errors import ConfigError
    (tmp_path / 'ft1').mkdir()
    (tmp_path / 'ft1' / 'mytask.yaml').write_text('train: t.csv\n')
    (tmp_path / 'ft1' / 'p7.yaml').write_text('config: demo\ntasks: [./mytask.yaml]\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        load_config(FinetuneConfig, ['--config', 'ft1/p7.yaml'], preset_dir='configs/finetune')
    assert str(e.value) == (f"ft1/p7.yaml: line 2: tasks: './mytask.yaml' is no task file: there is none at "
                            f"{tmp_path / 'mytask.yaml'} (a relative path is read from the current folder, "
                            f"{tmp_path}, wherever it is written). Give GLUE names or task YAML files; the demo's task "
                            "files are written by `python -m electra.finetuning.tasks.demo cache/demo_tasks`.")
    with pytest.raises(ConfigError, match=r"^command line: tasks: 'no_such\.yaml' is no task file: there is none at "):
        load_config(FinetuneConfig, ['--config', 'demo', '--tasks', 'no_such.yaml'], preset_dir='configs/finetune')
