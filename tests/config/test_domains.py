"""Every config key's declared domain (electra/config/fields.py `field`, `Domain`): walked for every key of every job and
task file, each value outside it refused in one line naming where it came from, the key, the value and the domain."""
import dataclasses
import typing

import pytest

import electra.finetuning  # noqa: F401  (fills the task catalogue that FinetuneConfig checks its tasks with)
from electra.config.cli import load_config
from electra.config.compare import CompareConfig
from electra.config.errors import ConfigError
from electra.config.finetune import TASK_KEYS, FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_from_dict
from electra.finetuning.tasks.files import FileOptions
from electra.finetuning.tasks.qa.task import QAOptions
from electra.finetuning.tasks.tagging.task import TaggingOptions
from electra.tools.explore import ExploreConfig
from tests.support.config import load

# every config dataclass a user writes keys of: the three jobs, the Explore notebook's, the task files' own settings
CONFIGS = [PretrainConfig, FinetuneConfig, CompareConfig, ExploreConfig, FileOptions, TaggingOptions, QAOptions]
VALID = {CompareConfig: {'variants': {'electra': ''}}}  # what a config needs besides its defaults to pass `validate`


def number_type(tp):
    "int or float for a key of numbers (a number, a list of them, a number or 'auto'), else None."
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (list, tuple): return number_type(args[0]) if args else None
    if args: return next((a for a in args if a in (int, float)), None)
    return tp if tp in (int, float) else None


def numeric_keys(cls):
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if number_type(hints[f.name])]


def outside(f, tp) -> list:
    """Every kind of value outside the declared domain that the key's type allows: the open bounds themselves, a step
    past the closed ones, -1 and 0 where they are not allowed, NaN, inf, a huge number, a string, a bool, a fraction for
    a whole number; each in a list for list keys, and the empty list where one is needed."""
    d, num = f.metadata['domain'], number_type(tp)
    step = 1 if num is int else 0.5
    values = [d.gt, d.lt, *([d.ge - step] if d.ge is not None else []), *([d.le + step] if d.le is not None else [])]
    low = d.gt if d.gt is not None else d.ge
    values += [v for v in (-1, 0) if low is not None and (v < low or (v == low and d.gt is not None))]
    values += [float('nan'), float('inf'), -float('inf'), 'abc', True] + ([2 ** 64, 1.5] if num is int else [])
    values = [v for v in values if v is not None]
    if typing.get_origin(tp) in (list, tuple):
        return [[v] for v in values] + ([[]] if d.min_items else [])
    return values


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_every_numeric_key_declares_a_domain_that_holds_its_default(cls):
    "A key added without a domain fails here, so that no number is taken unchecked; and no default is outside its own."
    assert [f.name for f, _ in numeric_keys(cls) if 'domain' not in f.metadata] == []
    for f, _ in numeric_keys(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        config_from_dict(cls, {**VALID.get(cls, {}), f.name: default}, source='defaults')


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_every_value_outside_a_numeric_key_s_domain_is_refused_in_one_line_naming_the_key(cls):
    """Negative, zero where not allowed, NaN, inf, huge, a string, a bool, past a bound: each refused when read, in one
    line that names the command line, the key and the value (per-task keys also inside task_overrides)."""
    cases = [(f.name, f.name, v, {f.name: v}) for f, tp in numeric_keys(cls) for v in outside(f, tp)]
    if cls is FinetuneConfig:
        cases += [(k, f'task_overrides.RTE.{k}', v, {'task_overrides': {'RTE': {k: v}}})
                  for f, tp in numeric_keys(cls) if (k := f.name) in TASK_KEYS for v in outside(f, tp)]
    assert cases
    for key, named, value, given in cases:
        with pytest.raises(ConfigError) as e:
            config_from_dict(cls, {**VALID.get(cls, {}), **given}, source='command line', from_file=False)
        message = str(e.value)
        assert '\n' not in message and message.startswith(f"command line: key '{named}': "), (key, value, message)
        one = value[0] if value and isinstance(value, list) else value  # (a list's bad element is named alone)
        shown = {repr(one), repr(value), *([repr(float(one))] if isinstance(one, int) else [])}
        assert any(s in message for s in shown) and (' is not ' in message or ': expected ' in message), message


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_every_value_outside_a_numeric_key_s_domain_given_in_python_is_refused_where_the_config_is_built(cls):
    """The same values given to the class itself (`FinetuneConfig(lr=-1)`, as a notebook or a script builds one for
    `run_sweep`): each refused where it is built, in one line naming Python, the key and the value, by the check the
    command line gets. Before, every one was taken, to fail deep inside the job or not at all."""
    cases = [(f.name, v, {f.name: v}) for f, tp in numeric_keys(cls) for v in outside(f, tp)]
    if cls is FinetuneConfig:
        cases += [(f'task_overrides.RTE.{k}', v, {'task_overrides': {'RTE': {k: v}}})
                  for f, tp in numeric_keys(cls) if (k := f.name) in TASK_KEYS for v in outside(f, tp)]
    for named, value, given in cases:
        with pytest.raises(ConfigError) as e:
            cls(**{**VALID.get(cls, {}), **given})
        message = str(e.value)
        assert '\n' not in message and message.startswith(f"Python: key '{named}': "), (named, value, message)


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_the_closed_bounds_of_each_domain_are_taken(cls):
    "A value on a closed bound (ge, le) is inside: whatever else may refuse it (rules between keys), its domain does not."
    for f, tp in numeric_keys(cls):
        d = f.metadata['domain']
        for bound in (b for b in (d.ge, d.le) if b is not None):
            value = [bound] if typing.get_origin(tp) in (list, tuple) else bound
            try: config_from_dict(cls, {**VALID.get(cls, {}), f.name: value})
            except ConfigError as e: assert f"key '{f.name}'" not in str(e), str(e)


def test_the_message_names_the_preset_file_and_line_the_command_line_or_overrides(tmp_path):
    preset = tmp_path / 'mine.yaml'
    preset.write_text('steps: 10\n\nlr: .nan\n')
    with pytest.raises(ConfigError, match=rf"^{preset}: line 3: key 'lr': nan is not a finite number > 0 \(peak learning "
                                          r"rate\)$"):
        load('--config', str(preset))
    assert load('--config', str(preset), '--lr', '1e-3').lr == 1e-3  # a preset's value the command line replaces
    with pytest.raises(ConfigError, match=r"^command line: key 'num_attention_heads': 0 is not a whole number > 0 "):
        load('--num_attention_heads', '0')  # (was a ZeroDivisionError in the check of hidden_size against it)
    with pytest.raises(ConfigError, match=r"^overrides: key 'eval_examples': -1 is not a whole number >= 0 \(0: no held-out "
                                          r"evaluation; examples held out"):
        load(overrides={'eval_examples': -1})
    preset.write_text('runs: 2\ntask_overrides:\n  RTE:\n    lr: 1.0e-4\n    epochs: 0\n')
    with pytest.raises(ConfigError, match=rf"^{preset}: line 5: key 'task_overrides\.RTE\.epochs': 0 is not a whole "
                                          r"number > 0 \(passes over the training set\)$"):
        load_config(FinetuneConfig, ['--config', str(preset)], preset_dir='configs/finetune')


def test_the_message_names_a_task_file_and_line(tmp_path):
    for split in ('train', 'dev'): (tmp_path / f'{split}.csv').write_text('sentence,label\na b,0\nc d,1\n')
    task = tmp_path / 'mine.yaml'
    task.write_text('train: train.csv\ndev: dev.csv\ntext: sentence\nlabel: label\nkind: regression\n'
                    'target_scale: .inf\nwarmup_fraction: 1\n')
    with pytest.raises(ConfigError, match=rf"^{task}: line 7: key 'warmup_fraction': 1\.0 is not a number in \[0, 1\) \(0: "
                                          r"no warm-up; warm-up steps"):
        config_from_dict(FinetuneConfig, {'tasks': [str(task)]})
    task.write_text(task.read_text().replace('warmup_fraction: 1', 'warmup_fraction: 0'))
    with pytest.raises(ConfigError, match=rf"^{task}: line 6: key 'target_scale': inf is not a finite number > 0 "
                                          r"\(regression: targets are learned divided by this"):
        config_from_dict(FinetuneConfig, {'tasks': [str(task)]})


def test_help_shows_each_key_s_domain(capsys):
    with pytest.raises(SystemExit):
        load('--help')
    out = capsys.readouterr().out
    assert "--seed (int, 11081): a whole number in [0, 2**32)\n" in out
    assert "--num_proc (int, 0): a whole number >= 0; 0: one per CPU core\n" in out
    assert "--corpus_weights (list, []): a list of finite numbers > 0; empty: concatenate the corpora" in out
    assert "--mask_prob (float, 0.15): a number in (0, 1)\n" in out and "--lr (float, 0.001; default 0.0005): a finite number > 0\n" in out
    assert "--mask_mode (str, 'fixed'): one of fixed, with_replacement, bernoulli\n" in out
    assert "--threads (int | str, 'auto'): auto or a whole number >= 0; 0: auto\n" in out
