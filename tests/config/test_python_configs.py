"""A job's config built in Python (`FinetuneConfig(...)`, `PretrainConfig(...)`, `CompareConfig(...)`,
`dataclasses.replace`) is checked where it is built, by the code that checks a preset and the command line
(`config/values.py`): each key's type and domain, the rules between keys, unknown keys, each refused in one line; what
it gave is recorded as 'Python', read as the command line reads it (a path's `~` and `$VAR`), and copied."""
import copy
import os
import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import electra.finetuning  # noqa: F401  (fills the task catalogue that FinetuneConfig checks its tasks with)
from electra.config.compare import CompareConfig
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.values import typed_keys, value_sources
from tests.support.config import refused

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('kw, message', [
    ({'lr': -1}, "Python: key 'lr': -1.0 is not a finite number > 0 (peak learning rate of the head (small 3e-4, base 1e-4, "
                 "large 5e-5))"),
    ({'select': 'bogus'}, "Python: key 'select': 'bogus' is not one of best, median"),
    ({'runs': 0}, "Python: key 'runs': 0 is not a whole number > 0 (fine-tuning runs per task, each from the same "
                  "pretrained weights with its own seed)"),
    ({'epochs': 0.5}, "Python: key 'epochs': expected an integer, got 0.5."),
    ({'tasks': 7}, "Python: key 'tasks': expected a list, got 7. Use a YAML list or comma-separated values."),
    ({'ensemble_k': 11}, "ensemble_k: must be at most runs (10), got 11."),
    ({'tasks': ['RTE', 'RTE']}, 'tasks: RTE is listed twice; list each task once.'),
    ({'task_overrides': {'RTE': {'epochs': 0}}}, "Python: key 'task_overrides.RTE.epochs': 0 is not a whole number > 0 "
                                                 "(passes over the training set)"),
    ({'lrr': 1e-3}, "Python: unknown key 'lrr'. Did you mean 'lr'? electra.config.finetune.FinetuneConfig lists the "
                    "keys."),
])
def test_a_finetune_config_built_in_python_is_refused_where_it_is_built(kw, message):
    """Before, each was taken and failed deep inside the job (ElectraAdam's lr=-0.4096, a TypeError, "/: tasks: it is
    a folder" from a string read by characters), `select='bogus'` only after the fine-tuning; an unknown keyword was
    Python's TypeError."""
    assert refused(lambda: FinetuneConfig(**kw)) == message


def test_python_values_are_read_as_the_command_line_reads_them_and_recorded_as_python(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('ELECTRA_TEST_OUT', str(tmp_path / 'out'))
    tasks, overrides = ['RTE', 'MRPC'], {'RTE': {'epochs': 2}}
    cfg = FinetuneConfig(tasks=tasks, epochs='3', task_overrides=overrides, output_dir='$ELECTRA_TEST_OUT/glue',
                         cache_dir='~/cache')
    assert (cfg.epochs, cfg.output_dir, cfg.cache_dir) == (3, str(tmp_path / 'out' / 'glue'), str(tmp_path / 'cache'))
    tasks.append('CoLA')
    overrides['RTE']['epochs'] = 9  # the caller's objects changed afterwards: the config keeps what it was given
    assert cfg.tasks == ['RTE', 'MRPC'] and cfg.task_overrides == {'RTE': {'epochs': 2}}
    assert FinetuneConfig(tasks='RTE,MRPC').tasks == ['RTE', 'MRPC']  # a string is a list as on the command line
    sources = value_sources(cfg)
    assert (sources['epochs'], sources['tasks'], sources['lr']) == ('Python', 'Python', 'default')
    assert {'epochs', 'tasks', 'task_overrides', 'output_dir', 'cache_dir'} <= typed_keys(cfg)  # win as typed keys do
    assert cfg.for_task('RTE').epochs == 2 and cfg.for_task('MRPC').epochs == 3
    for copied in (copy.deepcopy(cfg), pickle.loads(pickle.dumps(cfg))):  # (a worker process gets it pickled)
        assert copied == cfg and value_sources(copied) == sources and typed_keys(copied) == typed_keys(cfg)
        assert '_given' not in vars(copied)


def test_pretrain_and_compare_configs_built_in_python_are_checked_too():
    assert refused(lambda: PretrainConfig(steps=0)) == ("Python: key 'steps': 0 is not a whole number > 0 (optimizer "
                                                        "steps)")
    assert refused(lambda: PretrainConfig(objective='bogus')).startswith("Python: key 'objective': 'bogus' is not one "
                                                                         "of electra, ")
    assert refused(lambda: PretrainConfig(max_length=1024)) == ('max_length: must be at most max_position_embeddings '
                                                                '(512), got 1024.')
    assert refused(lambda: PretrainConfig(stpes=10)).startswith("Python: unknown key 'stpes'. Did you mean 'steps'?")
    electra = {'variants': {'electra': ''}}
    assert refused(lambda: CompareConfig(**electra, seeds=[])) == ("Python: key 'seeds': [] is not a non-empty list "
                                                                   "of whole numbers in [0, 2**32) (pretraining seeds: "
                                                                   "every variant is pretrained once per seed)")
    assert refused(lambda: CompareConfig(**electra, seeds=[1, 1])) == 'seeds: seeds must differ, got [1, 1].'
    assert refused(lambda: CompareConfig()).startswith('variants: give at least one variant')
    assert CompareConfig(**electra, steps=5).steps == 5


def test_dataclasses_replace_checks_the_new_values_and_keeps_the_others():
    cfg = PretrainConfig(hidden_size=64, num_attention_heads=2)
    small = dataclasses.replace(cfg, lr=1e-3)
    assert (small.lr, small.hidden_size, small.num_attention_heads) == (1e-3, 64, 2)
    assert refused(lambda: dataclasses.replace(cfg, lr=float('nan'))) == ("Python: key 'lr': nan is not a finite "
                                                                          "number > 0 (peak learning rate)")
    assert refused(lambda: dataclasses.replace(cfg, num_attention_heads=3)) == ('num_attention_heads: hidden_size 64 '
                                                                                'is not divisible by 3 heads.')


def test_the_public_name_builds_a_checked_finetune_config_in_a_fresh_process():
    """A FinetuneConfig checked where it is built needs the task kinds its tasks are checked with: a script's first line
    builds one (config fills the task catalogue on first use, `config/registries.py`)."""
    code = ("import electra\nprint(electra.FinetuneConfig(tasks=['RTE', 'MRPC'], runs=2).tasks)\n"
            "try: electra.FinetuneConfig(tasks=['RTEE'])\nexcept electra.config.errors.ConfigError as e: print(e)\n")
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["['RTE', 'MRPC']", "tasks: unknown GLUE task 'RTEE'. Did you mean 'RTE'? Tasks are "
                                                   "CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI, AX, or a task file (YAML) by its path."]


def test_a_value_set_on_a_built_config_is_checked_as_one_given_in_python(tmp_path, monkeypatch):
    """`cfg.lr = -1` in a notebook, after the config was built from a preset: refused in one line, the config left as
    it was; a good value read as the command line reads it, its rules between keys checked, recorded as 'Python'.
    Before, any value was taken as it was and failed deep inside the job (or not at all)."""
    from electra.config.cli import load_config
    monkeypatch.setenv('HOME', str(tmp_path))
    cfg = load_config(FinetuneConfig, ['--config', 'small', '--runs', '3'])
    before = (dataclasses.asdict(cfg), value_sources(cfg))
    for key, value, message in [
            ('lr', -1, "Python: key 'lr': -1.0 is not a finite number > 0 (peak learning rate of the head (small 3e-4, "
                       "base 1e-4, large 5e-5))"),
            ('tasks', 7, "Python: key 'tasks': expected a list, got 7. Use a YAML list or comma-separated values."),
            ('ensemble_k', 4, 'ensemble_k: must be at most runs (3), got 4.'),
            ('runs', 2.5, "Python: key 'runs': expected an integer, got 2.5.")]:
        def set_it(): setattr(cfg, key, value)
        assert refused(set_it) == message
        assert (dataclasses.asdict(cfg), value_sources(cfg)) == before  # left as it was
    cfg.epochs, cfg.cache_dir, cfg.tasks = '2', '~/cache', 'RTE,MRPC'
    assert (cfg.epochs, cfg.cache_dir, cfg.tasks) == (2, str(tmp_path / 'cache'), ['RTE', 'MRPC'])
    sources = value_sources(cfg)
    assert (sources['epochs'], sources['tasks'], sources['runs']) == ('Python', 'Python', before[1]['runs'])
    assert 'epochs' in typed_keys(cfg) and cfg.for_task('MRPC').epochs == 2
    assert cfg.for_task('RTE').epochs == 10  # the preset's task_overrides keep their own, as in FinetuneConfig(...)


@pytest.mark.parametrize('cls', [FinetuneConfig, PretrainConfig, CompareConfig])
def test_a_key_misspelt_on_a_built_config_is_refused_as_an_unknown_key(cls, tmp_path, monkeypatch):
    """`cfg.max_len = 32` (max_length meant) on a built config set an attribute no job reads, in silence: the run
    trained at 64 and recorded the config as meant (R20a-2). Refused as the constructor refuses `max_len=32`, naming
    the key meant; the library's own attributes (a leading `_`) and the class's own stay settable."""
    from electra.config.cli import load_config
    monkeypatch.setenv('HOME', str(tmp_path))
    cfg = load_config(cls, [])
    before = dataclasses.asdict(cfg)
    message = refused(lambda: cls(max_len=32))
    assert message.startswith("Python: unknown key 'max_len'.")
    def set_it(): cfg.max_len = 32
    assert refused(set_it) == message
    def set_steps(): cfg.step = 10
    assert refused(set_steps).startswith("Python: unknown key 'step'.")
    assert dataclasses.asdict(cfg) == before and not hasattr(cfg, 'max_len')
    cfg._scratch = 1  # the library's own state on a config: not a key
    assert cfg._scratch == 1


def test_a_key_named_as_the_official_code_or_transformers_names_it_is_pointed_to_ours():
    "`learning_rate` (configure_finetuning.py, TrainingArguments) is far from `lr` in spelling: named all the same."
    from electra.config.cli import load_config
    def set_it(): cfg.learning_rate = 1e-5
    cfg = load_config(FinetuneConfig, [])
    assert refused(set_it).startswith("Python: unknown key 'learning_rate'. Did you mean 'lr'?")
    assert refused(lambda: load_config(PretrainConfig, ['--num_train_steps', '10'])).startswith(
        "command line: unknown key 'num_train_steps'. Did you mean 'steps'?")
    assert refused(lambda: FinetuneConfig(layerwise_lr_decay=0.8)).startswith(
        "Python: unknown key 'layerwise_lr_decay'. Did you mean 'layer_lr_decay'?")


@pytest.mark.parametrize('cls, preset, key, theirs', [(FinetuneConfig, 'base', 'lr', 1e-4),
                                                      (PretrainConfig, 'base', 'hidden_size', 768)],
                         ids=['finetune', 'pretrain'])
def test_a_preset_named_in_python_is_refused_with_the_call_that_applies_it(cls, preset, key, theirs):
    """`FinetuneConfig(config='base')` recorded 'base' but kept the class's defaults (small's lr 3e-4 where base's 1e-4
    was meant), silently: a preset is applied by load_config. Refused in one line naming that call, which applies it;
    a config that load_config built keeps its preset's name through `dataclasses.replace`, and a preset set on a
    built config is refused the same way."""
    from electra.config.cli import load_config
    call = f"electra.load_config({cls.__name__}, [], overrides={{'config': '{preset}', ...}})"
    refused(lambda: cls(config=preset), "Python: key 'config': ", 'names a preset but does not apply it', call)
    refused(lambda: cls(config='demo', lr=1e-3), call.replace(preset, 'demo'))
    built = load_config(cls, [], overrides={'config': preset})
    assert (built.config, getattr(built, key)) == (preset, theirs)  # the call the line names applies the preset
    again = dataclasses.replace(built, seed=5)
    assert (again.config, getattr(again, key), again.seed) == (preset, theirs, 5)
    def set_it(): built.config = 'small'
    refused(set_it, "Python: key 'config': ", call.replace(preset, 'small'))
    assert built.config == preset


def test_load_config_in_a_notebook_reads_no_command_line_of_the_kernel(monkeypatch):
    """In Jupyter, sys.argv is the kernel's (`ipykernel_launcher.py -f kernel.json`): `load_config(cls,
    overrides=...)` without `[]` stopped on `unexpected argument '-f'` the user never typed (R20a-7). A notebook has no
    command line: its config is its overrides, as the drivers' notebooks read it (`cli_args`)."""
    from electra.config import cli
    monkeypatch.setattr(sys, 'argv', ['ipykernel_launcher.py', '-f', '/root/.local/share/jupyter/runtime/k.json'])
    monkeypatch.setattr(cli, 'running_in_notebook', lambda: True)
    cfg = cli.load_config(FinetuneConfig, overrides={'config': 'demo', 'runs': 1})
    assert (cfg.runs, value_sources(cfg)['runs']) == (1, 'overrides')
    monkeypatch.setattr(cli, 'running_in_notebook', lambda: False)  # a script: its command line, as always
    assert refused(lambda: cli.load_config(FinetuneConfig)) == "unexpected argument '-f': options are written --key value."


def test_a_warning_of_python_overrides_names_them_in_one_line_without_the_librarys_source(tmp_path):
    """`load_config(FinetuneConfig, [], overrides={'epochs': 2})` warned of `--epochs 2` and "the command line", after
    Python's `.../electra/config/cli.py:202: RunWarning:` and a line of the library's source (R20a-6): one `warning:`
    line, as the drivers print it, naming the overrides and where to give task_overrides."""
    code = ("import electra; electra.load_config(electra.FinetuneConfig, [], overrides={'config': 'small', 'epochs': 2})")
    from electra.runtime.processes import library_env
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=tmp_path,
                          env=library_env({**os.environ, 'HOME': str(tmp_path)}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ("warning: epochs=2 (overrides) applies to every task: it replaces the preset's "
                           "task_overrides (RTE epochs: 10; STS-B epochs: 10). To keep a per-task value, give "
                           "task_overrides in the overrides too.\n")


def test_the_comparisons_config_in_a_notebook_reads_no_command_line_of_the_kernel(monkeypatch):
    "R20a-7's fault on the comparison's reader: `load_compare_config(overrides=...)` in Jupyter read the kernel's -f."
    from electra.config import cli
    from electra.experiments.compare import load_compare_config
    monkeypatch.setattr(sys, 'argv', ['ipykernel_launcher.py', '-f', '/root/.local/share/jupyter/runtime/k.json'])
    monkeypatch.setattr(cli, 'running_in_notebook', lambda: True)
    assert load_compare_config(overrides={'seeds': [3]}).seeds == [3]
