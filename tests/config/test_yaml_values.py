"""The same characters mean the same value on every surface: a preset, a task file, a YAML-form flag (`--seeds
'[...]'`, `--task_overrides`), a plain flag and a notebook's overrides. YAML 1.1 (PyYAML) reads `010` as octal 8,
`0x10` as 16, `1:30` as base-60 90 and `no`/`on` as booleans, where a flag reads `010` as 10 and `no` as a word; a
whole number in one of those forms is refused everywhere, naming the place and the decimal to write, and a word is
what its key's declared type makes of it."""
from __future__ import annotations

import pytest

import electra.finetuning  # noqa: F401  (fills the task catalogue that FinetuneConfig checks its tasks with)
from electra.config.cli import load_config
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.finetuning.tasks.files import read_task_file
from tests.support.config import refused


def pretrain(*argv, **overrides) -> PretrainConfig:
    return load_config(PretrainConfig, list(argv), preset_dir='configs/pretrain', overrides=overrides)


def finetune(*argv, **overrides) -> FinetuneConfig:
    return load_config(FinetuneConfig, ['--tasks', 'RTE', *argv], preset_dir='configs/finetune', overrides=overrides)




# (written, the decimal a user is told to write: what YAML 1.1 reads it as, the leading zero's as the flags read it)
ODD_INTEGERS = [('010', '10'), ('017', '17'), ('0x10', '16'), ('0o17', '15'), ('0b11', '3'), ('1:30', '90')]


@pytest.mark.parametrize('written, decimal', ODD_INTEGERS)
def test_a_whole_number_in_an_octal_hex_or_base_60_form_is_refused_on_every_surface(tmp_path, written, decimal):
    fix = f'write {decimal}'
    preset = tmp_path / 'p.yaml'
    preset.write_text(f'run_name: zp\nseed: {written}\n', encoding='utf-8')
    refused(lambda: pretrain('--config', f'demo,{preset}'), f'{preset}: line 2', "'seed'", written, fix)
    refused(lambda: pretrain('--seed', written), "command line: key 'seed'", fix)
    refused(lambda: pretrain(steps=written), "overrides: key 'steps'", fix)
    refused(lambda: pretrain('--checkpoint_at', f'[{written}]'), "key 'checkpoint_at'", fix)
    refused(lambda: finetune('--seeds', f'[{written}, 11]'), "command line: key 'seeds'", fix)
    refused(lambda: finetune('--seeds', f'{written},11'), "command line: key 'seeds'", fix)
    refused(lambda: finetune('--task_overrides', f'{{RTE: {{epochs: {written}}}}}'), 'task_overrides', fix)
    task = tmp_path / 'task.yaml'
    task.write_text(f'train: t.csv\ndev: d.csv\ntext: s\nlabel: l\nepochs: {written}\n', encoding='utf-8')
    refused(lambda: read_task_file(task), f'{task}: line 5', "'epochs'", fix)


def test_the_same_characters_are_the_same_value_in_a_preset_and_on_the_command_line(tmp_path):
    preset = tmp_path / 'p.yaml'
    preset.write_text("run_name: 010\nseed: 10\nsteps: 1_000\nresume: no\noverwrite: on\nlr: 1.0e-4\n"
                      "tracking_group: no\n", encoding='utf-8')
    cfg = pretrain('--config', f'demo,{preset}')
    flags = pretrain('--run_name', '010', '--seed', '10', '--steps', '1_000', '--resume', 'no', '--overwrite', 'on',
                     '--lr', '1.0e-4')
    for key in ('run_name', 'seed', 'steps', 'resume', 'overwrite', 'lr'):
        assert getattr(cfg, key) == getattr(flags, key), key
    assert (cfg.run_name, cfg.steps, cfg.resume, cfg.overwrite) == ('010', 1000, False, True)
    quoted = tmp_path / 'q.yaml'
    quoted.write_text("run_name: '010'\n", encoding='utf-8')
    assert pretrain('--config', f'demo,{quoted}').run_name == '010'


@pytest.mark.parametrize('written', ['.inf', '-.inf', '.nan'])
def test_yaml_s_infinity_and_nan_are_what_the_flag_makes_of_them(tmp_path, written):
    "A number key refuses them from a preset as from a flag; a string key keeps the characters."
    preset = tmp_path / 'p.yaml'
    preset.write_text(f'lr: {written}\n', encoding='utf-8')
    refused(lambda: pretrain('--config', f'demo,{preset}'), f'{preset}: line 1', "'lr'")
    refused(lambda: pretrain('--lr', written), "command line: key 'lr'")
    preset.write_text(f'hub_split: {written}\n', encoding='utf-8')
    assert pretrain('--config', f'demo,{preset}').hub_split == written


def test_a_number_where_a_string_is_wanted_is_kept_as_written_or_refused(tmp_path):
    "`1.50` is 1.5 to YAML: a string key cannot tell what was written, so it asks for quotes."
    preset = tmp_path / 'p.yaml'
    preset.write_text('run_name: 1.50\n', encoding='utf-8')
    refused(lambda: pretrain('--config', f'demo,{preset}'), f'{preset}: line 1', "'run_name'", 'quote it')
    assert pretrain('--run_name', '1.50').run_name == '1.50'


def test_a_task_named_or_labelled_by_a_yaml_1_1_word_keeps_the_word(tmp_path):
    (tmp_path / 't.csv').write_text('on,no\na b,1\nc d,0\n', encoding='utf-8')
    (tmp_path / 'd.csv').write_text('on,no\na b,1\nc d,0\n', encoding='utf-8')
    task = tmp_path / 'task.yaml'
    task.write_text('name: off\ntrain: t.csv\ndev: d.csv\ntext: on\nlabel: no\n', encoding='utf-8')
    spec = read_task_file(task)
    assert (spec.name, spec.text, spec.label) == ('off', ('on',), 'no')


def test_what_yaml_safe_dump_writes_a_run_s_config_yaml_with_reads_back_the_same():
    "A run's config.yaml (yaml.safe_dump, YAML 1.1 quoting) given back to --config: every value as it was saved."
    import yaml
    from electra.config.yaml_reader import load_yaml
    values = ['1.0e5', '-.5', '010', 'no', 'on', '1:30', '1_000', '.inf', '2026-11-28', '0x10', '+3', '-0', 'true',
              10, -3, 0, 1.5, 1e-05, 1e20, -0.25, True, False, None, [1, 'no', 2.5], {'RTE': {'epochs': 10, 'lr': 2e-05}}]
    saved = yaml.safe_dump({f'k{i}': v for i, v in enumerate(values)})
    read = load_yaml(saved, 'config.yaml')
    assert [read[f'k{i}'] for i in range(len(values))] == values
    assert [type(read[f'k{i}']) for i in range(len(values))] == [type(v) for v in values]


def test_a_task_named_by_a_fraction_asks_for_quotes(tmp_path):
    "`name: 1.50` is 1.5 to YAML: the task would silently be named `1.5`."
    task = tmp_path / 'task.yaml'
    task.write_text('name: 1.50\ntrain: t.csv\ndev: d.csv\ntext: s\nlabel: l\n', encoding='utf-8')
    refused(lambda: read_task_file(task), f'{task}: line 1', 'quote it')
    task.write_text("name: '1.50'\ntrain: t.csv\ndev: d.csv\ntext: s\nlabel: l\n", encoding='utf-8')
    refused(lambda: read_task_file(task), 't.csv')  # the name taken, the next check reached: the data file is missing
