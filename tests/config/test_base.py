"""electra/config/cli.py and values.py: presets, typed CLI overrides, unknown keys, wrong types, --help, retired keys."""
import re

import pytest

from electra.config.cli import load_config
from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_from_dict
from tests.support.config import load


def test_defaults_preset_and_overrides_in_order():
    cfg = load('--config', 'small', '--steps', '2e3', '--lr=0.001', '--corpus', 'a.txt,b.txt', '--resume')
    assert cfg.hidden_size == 256 and cfg.steps == 2000 and cfg.lr == 0.001
    assert cfg.corpus == ['a.txt', 'b.txt'] and cfg.resume is True and cfg.config == 'small'
    assert load(overrides={'steps': 7}).steps == 7                      # a notebook's config cell
    assert load().run_name == 'demo'                                     # the default preset is the demo


def test_unknown_key_named_with_suggestion():
    with pytest.raises(ConfigError, match=r"command line: unknown key 'stpes'.*Did you mean 'steps'"):
        load('--stpes', '10')


def test_wrong_type_named():
    with pytest.raises(ConfigError, match=r"key 'steps': expected an integer, got 'ten'"):
        load('--steps', 'ten')
    with pytest.raises(ConfigError, match=r"key 'resume': expected true or false"):
        load('--resume', 'maybe')
    with pytest.raises(ConfigError, match=r"^command line: key 'mask_mode': 'random' is not one of fixed, with_replacement, "
                                          r"bernoulli$"):
        load('--mask_mode', 'random')


def test_bad_yaml_key_names_the_file(tmp_path):
    path = tmp_path / 'mine.yaml'
    path.write_text('steps: 10\nhiden_size: 3\n')
    with pytest.raises(ConfigError, match=rf"^{path}: line 2: unknown key 'hiden_size'.*'hidden_size'"):
        load('--config', str(path))
    with pytest.raises(ConfigError, match="unknown preset 'smal'.*'small'"):
        load('--config', 'smal')


def test_help_lists_every_key(capsys):
    with pytest.raises(SystemExit) as e:
        load('--help')
    assert e.value.code == 0
    out = capsys.readouterr().out
    for key in ['corpus', 'steps', 'batch_size', 'max_length', 'lr', 'mask_prob', 'seed', 'device', 'run_name',
                'output_dir', 'resume', 'logger', 'hidden_size', 'tie_weights']:
        assert f'--{key} (' in out
    assert "--mask_prob (float, 0.15)" in out and 'demo' in out


def test_help_shows_the_values_the_chosen_preset_runs_with(capsys):
    """--help gives each key the value the job would run with, the dataclass default beside it where that differs:
    the default preset's (demo), the --config preset's, a flag's."""
    def help_text(*argv):
        with pytest.raises(SystemExit) as e: load(*argv)
        assert e.value.code == 0
        return capsys.readouterr().out
    out = help_text('--help')
    assert 'keys (their value with --config demo; the default where it differs):' in out
    assert '--hidden_size (int, 64; default 256)' in out and '--vocab_size (int, 2000; default 30522)' in out
    assert '--mask_prob (float, 0.15)' in out and "--run_name (str, 'demo'; default 'vanilla')" in out
    out = help_text('--config', 'small,bert', '--steps', '50', '--help')
    assert 'keys (their value with --config small,bert and the flags given; the default where it differs):' in out
    assert '--hidden_size (int, 256)' in out and "--objective (str, 'mlm'; default 'electra')" in out
    assert '--steps (int, 50; default 1000000)' in out
    with pytest.raises(ConfigError, match="unknown preset 'smal'"):
        load('--config', 'smal', '--help')


def test_mapping_on_the_command_line_is_yaml():
    from electra.config.finetune import FinetuneConfig
    cfg = load_config(FinetuneConfig, ['--config', 'small', '--task_overrides', '{RTE: {epochs: 4}, CoLA: {lr: 1e-4}}'],
                      preset_dir='configs/finetune')
    assert set(cfg.task_overrides) == {'RTE', 'CoLA', 'STS-B'}         # merged over the preset's
    assert cfg.for_task('RTE').epochs == 4 and cfg.for_task('CoLA').lr == 1e-4 and cfg.for_task('STS-B').epochs == 10
    assert load_config(FinetuneConfig, ['--task_overrides', '{}'], preset_dir='configs/finetune').task_overrides == {}
    with pytest.raises(ConfigError, match=r"key 'task_overrides': expected a mapping, got 'RTE=4'.*as YAML"):
        load_config(FinetuneConfig, ['--task_overrides', 'RTE=4'], preset_dir='configs/finetune')


@pytest.mark.parametrize('argv, said', [(['--steps', '5', '--steps', '7'], '--steps 5, then --steps 7'),
                                         (['--warmup-steps=1', '--lr', '1e-3', '--warmup_steps', '2'],
                                          '--warmup-steps=1, then --warmup_steps 2'),
                                         (['--overwrite', '--overwrite', 'false'], '--overwrite, then --overwrite false')])
def test_a_key_given_twice_on_the_command_line_takes_the_last_and_says_so(argv, said):
    """Before: the last of the two won without a word (`--steps 5 --steps 7` ran 7 steps). The last still wins, as
    argparse's do (a wrapper script's common flags, then the run's own), and a warning names both."""
    from electra.config.errors import RunWarning
    key = 'warmup_steps' if 'warmup' in said else argv[0][2:]
    with pytest.warns(RunWarning, match=rf"^{key}: given twice on the command line \({re.escape(said)}\): the last "
                                        r"is taken\.$"):
        cfg = load_config(PretrainConfig, argv)
    assert getattr(cfg, key) == {'steps': 7, 'warmup_steps': 2, 'overwrite': False}[key]


def test_retired_size_key_is_skipped_in_files_and_unknown_on_the_command_line(tmp_path):
    # run configs and checkpoints written before 'size' was retired still load, to the same config
    old = tmp_path / 'old.yaml'
    old.write_text('size: small\nhidden_size: 48\n')
    cfg = load_config(PretrainConfig, ['--config', str(old)], preset_dir='configs/pretrain')
    assert cfg.hidden_size == 48 and not hasattr(cfg, 'size')
    assert config_from_dict(PretrainConfig, {'size': 'base', 'lr': 1e-3}) == config_from_dict(PretrainConfig, {'lr': 1e-3})
    with pytest.raises(ConfigError, match="command line: unknown key 'size'"):
        load_config(PretrainConfig, ['--size', 'base'], preset_dir='configs/pretrain')


def test_a_key_twice_in_a_yaml_file_is_refused_naming_the_file_key_and_lines(tmp_path):
    "PyYAML keeps the last of two equal keys: the first setting was dropped without a word."
    from electra.config.finetune import FinetuneConfig
    path = tmp_path / 'mine.yaml'
    path.write_text('lr: 1.0e-4\nepochs: 3\nlr: 3.0e-4\n')
    with pytest.raises(ConfigError, match=rf"^{path}: key 'lr' is given twice, on lines 1 and 3; the second would "
                                          r"silently replace the first\. Keep one of them\.$"):
        load_config(FinetuneConfig, ['--config', str(path)], preset_dir='configs/finetune')
    path.write_text('task_overrides:\n  RTE: {epochs: 10}\n  CoLA: {lr: 1.0e-4}\n  RTE: {epochs: 2}\n')
    with pytest.raises(ConfigError, match=rf"^{path}: key 'RTE' is given twice, on lines 2 and 4"):
        load_config(FinetuneConfig, ['--config', str(path)], preset_dir='configs/finetune')
    with pytest.raises(ConfigError, match=r"^command line: key 'task_overrides': key 'RTE' is given twice; the second "
                                          r"would silently replace the first"):
        load_config(FinetuneConfig, ['--task_overrides', '{RTE: {epochs: 10}, RTE: {epochs: 3}}'],
                    preset_dir='configs/finetune')


def test_a_yaml_merge_key_may_still_be_overridden(tmp_path):
    "A key given beside `<<: *anchor` replaces the merged one: that is YAML's rule, not a duplicate."
    from electra.config.finetune import FinetuneConfig
    path = tmp_path / 'mine.yaml'
    path.write_text('task_overrides:\n  RTE: &r {epochs: 10, lr: 1.0e-4}\n  MRPC:\n    <<: *r\n    lr: 2.0e-4\n')
    cfg = load_config(FinetuneConfig, ['--config', str(path)], preset_dir='configs/finetune')
    assert cfg.task_overrides == {'RTE': {'epochs': 10, 'lr': 1e-4}, 'MRPC': {'epochs': 10, 'lr': 2e-4}}


@pytest.mark.parametrize('data, line', [('steps: 5\n# café\n'.encode('latin-1'), 2), ('steps: 5\n'.encode('utf-16'), 1),
                                        (bytes(range(256)), 2)], ids=['latin-1', 'utf-16', 'binary'])
def test_a_config_file_not_in_utf8_is_named_with_the_line(tmp_path, data, line):
    "A preset saved as latin-1 or UTF-16, or a binary file given as one: a ConfigError naming it, not a UnicodeDecodeError."
    path = tmp_path / 'mine.yaml'
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=rf"{path}: line {line}: not UTF-8 text .*Save it as UTF-8"):
        load('--config', str(path))


def test_a_key_that_is_not_a_name_is_refused(tmp_path):
    "YAML reads `1: 2` as an integer key: named as an unknown key, not a TypeError from the suggestion."
    path = tmp_path / 'mine.yaml'
    path.write_text('1: 2\n')
    with pytest.raises(ConfigError, match=rf"{path}: line 1: unknown key '1'"):
        load('--config', str(path))


def test_a_list_on_the_command_line_is_comma_separated_or_a_yaml_list():
    """`--length_buckets 32,64` and `--length_buckets '[32, 64]'` (as YAML writes it, and as a mapping is written) give
    the same list; `--tasks '[RTE, STS-B]'` gave the tasks '[RTE' and 'STS-B]', `--length_buckets '[32, 64]'` an error."""
    from electra.config.finetune import FinetuneConfig
    parse = lambda *argv: load_config(FinetuneConfig, list(argv), preset_dir='configs/finetune')  # noqa: E731
    assert parse('--length_buckets', '32,64').length_buckets == parse('--length_buckets', '[32, 64]').length_buckets == [32, 64]
    assert parse('--tasks', '[RTE, STS-B]').tasks == parse('--tasks', 'RTE,STS-B').tasks == ['RTE', 'STS-B']
    assert parse('--seeds', '[]', '--runs', '1').seeds == []
    with pytest.raises(ConfigError, match=r"key 'length_buckets': expected an integer, got 'a'"):
        parse('--length_buckets', '[32, a]')
    with pytest.raises(ConfigError, match=r"key 'length_buckets': expected a list, got '\[32, 64'"):
        parse('--length_buckets', '[32, 64')


def test_the_three_jobs_declare_the_trackers_keys_alike():
    """logger, neptune_project, tracking_group, tracking_tags, tracking_artifacts: in pretraining, fine-tuning and the
    comparison the same type, default and domain, read alike (a bad value refused with the same message); the jobs'
    help texts differ only in the words each job gives (its runs, folder, group, tags and files)."""
    import dataclasses
    import typing

    from electra.config.shared_keys import TRACKER_KEYS
    from electra.config.compare import CompareConfig
    from electra.config.finetune import FinetuneConfig
    jobs = (PretrainConfig, FinetuneConfig, CompareConfig)
    for key in TRACKER_KEYS:
        fields = [next(f for f in dataclasses.fields(cls) if f.name == key) for cls in jobs]
        declared = {(str(typing.get_type_hints(cls)[key]), repr(f.metadata.get('domain')),
                     repr(f.default if f.default is not dataclasses.MISSING else f.default_factory()))
                    for cls, f in zip(jobs, fields)}
        assert len(declared) == 1, (key, declared)
        names = [[f.name for f in dataclasses.fields(cls)] for cls in jobs]
        assert all(n[n.index('threads') + 1:n.index('threads') + 1 + len(TRACKER_KEYS)] == list(TRACKER_KEYS) for n in names)
    for cls in jobs:
        with pytest.raises(ConfigError, match=r"^logger: 'none' means the CSV files only: give it alone"):
            config_from_dict(cls, {'logger': ['none', 'mlflow']}).validate()
