"""electra/config/cli.py's presets: found from Python as from the commands (each job's `PRESETS`), a preset file's own
`config:` key (the presets it is layered over), and the faults of the preset surfaces (a chain with a missing file, a
folder, an empty file, a cycle), each a config or one line naming the file and line."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from electra.config.cli import load_config
from electra.config.compare import CompareConfig
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_to_dict, value_sources
from tests.support.config import expected_from_python, from_python, refused

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('where', ['root', 'elsewhere'])
def test_the_shipped_presets_are_found_from_python_and_a_finetune_config_needs_no_import_by_hand(tmp_path, where):
    "In the checkout's root (as Jupyter starts there) and from another folder, with the checkout on the path."
    lines = from_python(ROOT if where == 'root' else tmp_path, PYTHONPATH=str(ROOT))
    configs = Path('configs') if where == 'root' else ROOT / 'configs'
    assert lines == expected_from_python(configs)


# -- a preset file's own `config:` key: the presets it is layered over

def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding='utf-8')
    return path


def pretrain(*argv, **overrides) -> PretrainConfig:
    return load_config(PretrainConfig, list(argv), overrides=overrides)


def without_config(cfg) -> dict:
    return {k: v for k, v in config_to_dict(cfg).items() if k != 'config'}


def test_a_config_key_in_a_preset_file_layers_its_presets_under_the_file(tmp_path):
    ext = write(tmp_path / 'ext.yaml', 'config: demo\nsteps: 7\n')
    cfg = pretrain('--config', str(ext), '--warmup_steps', '1')
    assert (cfg.run_name, cfg.hidden_size, cfg.num_hidden_layers, cfg.steps) == ('demo', 64, 2, 7)
    assert without_config(cfg) == without_config(pretrain('--config', f'demo,{ext}', '--warmup_steps', '1'))
    assert cfg.config == str(ext)                                  # what was given, as the command line wrote it
    sources = value_sources(cfg)
    assert sources['steps'] == f'{ext}: line 2'
    assert sources['hidden_size'].endswith('configs/pretrain/demo.yaml: line 6')
    # several, and a file layered over another file that names a shipped preset
    base = write(tmp_path / 'base.yaml', 'config: small\nlr: 0.002\n')
    top = write(tmp_path / 'top.yaml', f'config: {base},bert\nsteps: 9\nwarmup_steps: 1\n')
    cfg = pretrain('--config', str(top))
    assert (cfg.hidden_size, cfg.batch_size, cfg.objective, cfg.lr, cfg.steps) == (256, 128, 'mlm', 0.002, 9)
    assert value_sources(cfg)['lr'] == f'{base}: line 2'
    assert value_sources(cfg)['objective'].endswith('configs/pretrain/bert.yaml: line 4')


def test_a_config_key_in_a_preset_file_that_names_no_preset_or_itself_is_refused_naming_its_line(tmp_path):
    ext = write(tmp_path / 'ext.yaml', 'steps: 7\nconfig: no_such_preset\n')
    refused(lambda: pretrain('--config', str(ext)), f"{ext}: line 2: key 'config': unknown preset 'no_such_preset'.",
            'Choose one of all_tokens_mlm, base, bert, demo,')
    write(ext, 'config: ./nope.yaml\n')
    refused(lambda: pretrain('--config', f'small,{ext}'), f"{ext}: line 1: key 'config': no such file './nope.yaml'")
    write(ext, 'config: [small, {bert: 1}]\n')  # a list of names is the chain (R25b-6); one of other things is not
    refused(lambda: pretrain('--config', str(ext)), f"{ext}: line 1: key 'config': expected a string")
    write(ext, 'config: demo,,bert\n')
    refused(lambda: pretrain('--config', str(ext)), f"{ext}: line 1: key 'config'", 'an empty preset name')
    a, b = tmp_path / 'a.yaml', tmp_path / 'b.yaml'
    write(a, f'config: {b}\n')
    write(b, f'steps: 3\nconfig: demo,{a}\n')
    refused(lambda: pretrain('--config', str(a)), f"{b}: line 2: key 'config'", f'{a} is layered under itself',
            f'{a} -> {b} -> {a}')
    write(a, f'config: {a}\n')
    refused(lambda: pretrain('--config', str(a)), f"{a}: line 1: key 'config'", f'{a} is layered under itself')


def test_finetuning_and_the_comparison_layer_a_files_config_key_alike(tmp_path):
    ft = write(tmp_path / 'ft.yaml', 'config: small\nruns: 2\n')
    cfg = load_config(FinetuneConfig, ['--config', str(ft), '--tasks', 'RTE'])
    assert (cfg.lr, cfg.group, cfg.runs) == (3e-4, 'small', 2)
    write(ft, 'config: no_such_preset\n')
    refused(lambda: load_config(FinetuneConfig, ['--config', str(ft)]), f"{ft}: line 1: key 'config': unknown preset",
            'small')
    cmp = write(tmp_path / 'cmp.yaml', 'config: electric\nseeds: [4]\n')
    cfg = load_config(CompareConfig, ['--config', str(cmp)])
    assert (cfg.name, list(cfg.variants), cfg.seeds) == ('electric', ['electra', 'electric', 'bert'], [4])


def test_a_runs_saved_config_and_the_comparisons_hold_no_config_key_and_load_back_the_same(tmp_path):
    "What a run saves is its resolved config, its presets applied: taken again with --config it is the same config."
    from electra.experiments.compare import _save_config
    from electra.pretraining.learner import save_run_config
    ext = write(tmp_path / 'ext.yaml', 'config: demo\nsteps: 7\nwarmup_steps: 1\n')
    cfg = pretrain('--config', str(ext), '--output_dir', str(tmp_path / 'out'))
    saved = save_run_config(cfg, tmp_path)
    assert 'config' not in yaml.safe_load(saved.read_text(encoding='utf-8'))
    again = pretrain('--config', str(saved))
    # (resume and overwrite are not saved: they say how that invocation treated the folder)
    assert {**without_config(again), 'resume': False, 'overwrite': True} == without_config(cfg)
    cmp = load_config(CompareConfig, ['--config', str(write(tmp_path / 'c.yaml', 'config: electric\nseeds: [4]\n'))])
    _save_config(cmp, tmp_path)
    assert 'config' not in yaml.safe_load((tmp_path / 'compare.yaml').read_text(encoding='utf-8'))
    again = load_config(CompareConfig, ['--config', str(tmp_path / 'compare.yaml')])
    assert without_config(again) == without_config(cmp)


# -- the other faults of a preset

def test_an_empty_preset_file_is_refused_and_a_chain_names_the_file_that_is_missing_or_a_folder(tmp_path):
    for text in ('', '\n\n', '# nothing yet\n', '~\n'):
        empty = write(tmp_path / 'empty.yaml', text)
        refused(lambda: pretrain('--config', f'small,{empty}'), f'{empty}: sets no key', 'leave it out of --config')
    write(tmp_path / 'only.yaml', 'config: small\n')                 # a file of presets only is not empty
    assert pretrain('--config', str(tmp_path / 'only.yaml')).batch_size == 128
    refused(lambda: pretrain('--config', f'small,{tmp_path}/missing.yaml'),
            f"--config: no such file '{tmp_path}/missing.yaml'")
    refused(lambda: pretrain('--config', f'small,{tmp_path}'), f"--config: '{tmp_path}' is a folder")
    refused(lambda: pretrain(config=f'small,{tmp_path}/missing.yaml'), 'no such file')   # a notebook's overrides


def test_a_relative_config_key_in_a_preset_file_names_a_file_beside_it_from_any_folder(tmp_path, monkeypatch):
    """`config: ./base.yaml` (or `base.yaml`, or a bare `mine`) in a preset file names the file beside it, as an include
    does, not a file of wherever the job is started: the folder of presets moves and is shared as a whole."""
    mine, elsewhere = tmp_path / 'presets', tmp_path / 'elsewhere'
    mine.mkdir(), elsewhere.mkdir()
    write(mine / 'base.yaml', 'config: demo\nlr: 0.002\n')
    write(mine / 'plain', 'steps: 5\n')
    top = write(mine / 'top.yaml', 'config: ./base.yaml,plain\nwarmup_steps: 1\n')
    write(elsewhere / 'base.yaml', 'lr: 0.5\n')  # a file of the same name where the job runs: never read
    monkeypatch.chdir(elsewhere)
    cfg = pretrain('--config', str(top))
    assert (cfg.run_name, cfg.lr, cfg.steps, cfg.warmup_steps) == ('demo', 0.002, 5, 1)
    assert value_sources(cfg)['lr'] == f"{mine / 'base.yaml'}: line 2"
    write(top, 'config: ./nope.yaml\n')
    refused(lambda: pretrain('--config', str(top)), f"{top}: line 1: key 'config': no such file './nope.yaml'",
            f"(looked for in {mine}, the folder of the file that names it)")


def test_a_key_both_on_the_command_line_and_in_the_overrides_is_refused_naming_both():
    """R25b-1 at run time: a driver whose overrides set a key (edited by hand, or exported by an earlier version) took
    them over its command line, silently; the same key in both is refused now, naming both values."""
    from electra.config.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        load_config(PretrainConfig, ['--steps', '50', '--lr', '1e-3'], overrides={'steps': 30})
    assert str(e.value) == ("steps: set on the command line (--steps 50) and in the overrides (steps: 30), which would "
                            "win: give it in one of them (a script's overrides are for a notebook; as a script, give "
                            "the command line's alone).")
    assert load_config(PretrainConfig, ['--lr', '1e-3'], overrides={'steps': 30}).steps == 30


def test_a_preset_s_config_key_takes_a_yaml_list_as_its_comma_separated_chain(tmp_path):
    """R25b-6: `config: [demo, ./p1.yaml]` was refused with "expected a string", where every other list key takes a
    YAML list or `a,b`; it is the chain `demo,./p1.yaml` now, the same config as that form gives."""
    (tmp_path / 'p1.yaml').write_text('lr: 0.002\nruns: 2\n')
    (tmp_path / 'listed.yaml').write_text('config: [demo, ./p1.yaml]\ngroup: lst\n')
    (tmp_path / 'joined.yaml').write_text('config: demo,./p1.yaml\ngroup: lst\n')
    listed, joined = (load_config(FinetuneConfig, ['--config', str(tmp_path / f'{n}.yaml')],
                                  preset_dir='configs/finetune') for n in ('listed', 'joined'))
    assert (listed.lr, listed.runs, listed.group) == (0.002, 2, 'lst')
    assert {k: v for k, v in config_to_dict(listed).items() if k != 'config'} == \
        {k: v for k, v in config_to_dict(joined).items() if k != 'config'}
