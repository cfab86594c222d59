"""electra/config/paths.py: paths as people write them (`~`, `~user`, `$VAR`) expanded alike wherever a path is read,
and the folders a job writes kept apart from what it reads, for pretraining, fine-tuning and the comparison."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import electra.finetuning  # noqa: F401  (fills the task catalogue that FinetuneConfig checks its tasks with)
from electra.config.cli import load_config
from electra.config.compare import CompareConfig
from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig
from electra.config.pretrain import PretrainConfig
from electra.config.values import config_from_dict
from electra.finetuning.tasks.files import read_task_file
from electra.experiments.plan import make_plan
from tests.support.config import refused


@pytest.fixture
def home(tmp_path, monkeypatch):
    "A home folder of our own: `~` is $HOME (os.path.expanduser), and a variable the test sets."
    home = tmp_path / 'home'
    home.mkdir()
    monkeypatch.setenv('HOME', str(home))
    monkeypatch.setenv('ELECTRA_TEST_SCRATCH', str(tmp_path / 'scratch'))
    monkeypatch.chdir(tmp_path)
    return home


def pretrain(*argv, **overrides) -> PretrainConfig:
    return load_config(PretrainConfig, list(argv), preset_dir='configs/pretrain', overrides=overrides)


def test_tilde_and_variables_in_a_preset_are_the_paths_the_user_meant(home, tmp_path):
    (home / 'corpus').mkdir()
    preset = tmp_path / 'mine.yaml'
    preset.write_text("output_dir: ~/ckpt\ncache_dir: ${ELECTRA_TEST_SCRATCH}/cache\ncorpus: [~/corpus, demo]\n"
                      "tokenizer: $ELECTRA_TEST_SCRATCH/vocab.txt\ninit_from: ~/gen,~/disc\n", encoding='utf-8')
    cfg = pretrain('--config', str(preset))
    assert cfg.output_dir == str(home / 'ckpt') and cfg.cache_dir == str(tmp_path / 'scratch' / 'cache')
    assert cfg.corpus == [str(home / 'corpus'), 'demo'] and cfg.tokenizer == str(tmp_path / 'scratch' / 'vocab.txt')
    assert cfg.init_from == f"{home / 'gen'},{home / 'disc'}"  # each of the pair, as a shell would not


def test_tilde_on_the_command_line_and_in_overrides_and_in_a_preset_path(home, tmp_path):
    (home / 'presets').mkdir()
    (home / 'presets' / 'p.yaml').write_text('steps: 7\n', encoding='utf-8')
    cfg = pretrain('--config', '~/presets/p.yaml', '--output_dir', '~/out', '--corpus', '~/a.txt,~/b.txt')
    assert (cfg.steps, cfg.output_dir, cfg.corpus) == (7, str(home / 'out'), [str(home / 'a.txt'), str(home / 'b.txt')])
    cfg = pretrain('--config', 'demo', cache_dir='~/c', generator='~/gen', objective='fast_electra', tie_weights='none')
    assert (cfg.cache_dir, cfg.generator) == (str(home / 'c'), str(home / 'gen'))
    fine = load_config(FinetuneConfig, ['--model', '~/m.pth', '--data', '~/glue', '--output_dir', '~/o',
                                        '--test_output_dir', '$ELECTRA_TEST_SCRATCH/t', '--cache_dir', '~/c',
                                        '--tasks', 'RTE'],
                       preset_dir='configs/finetune')
    assert (fine.model, fine.data, fine.output_dir, fine.test_output_dir, fine.cache_dir) == (
        str(home / 'm.pth'), str(home / 'glue'), str(home / 'o'), str(tmp_path / 'scratch' / 't'), str(home / 'c'))
    comp = config_from_dict(CompareConfig, {'output_dir': '~/cmp', 'variants': {'electra': ''}}, from_file=False)
    assert comp.output_dir == str(home / 'cmp')


@pytest.mark.parametrize('value, named', [('$ELECTRA_NOT_SET_ANYWHERE/x', 'ELECTRA_NOT_SET_ANYWHERE'),
                                          ('${ELECTRA_NOT_SET_ANYWHERE}', 'ELECTRA_NOT_SET_ANYWHERE'),
                                          ('~no_such_user_here/x', 'no_such_user_here')])
def test_a_variable_that_is_not_set_or_a_user_that_does_not_exist_is_refused_naming_the_key(home, value, named):
    with pytest.raises(ConfigError) as e:
        pretrain('--config', 'demo', '--output_dir', value)
    message = str(e.value)
    assert '\n' not in message and message.startswith("command line: key 'output_dir': ") and named in message


def test_tilde_in_a_task_file_of_each_kind(home, tmp_path, monkeypatch):
    data = home / 'data'
    monkeypatch.setenv('ELECTRA_TEST_DATA', str(data))
    data.mkdir()
    (data / 'train.csv').write_text('sentence,label\na b,x\nc d,y\n', encoding='utf-8')
    (data / 'dev.csv').write_text('sentence,label\na b,x\n', encoding='utf-8')
    (data / 'train.txt').write_text('a O\nb B-X\n', encoding='utf-8')
    (data / 'dev.txt').write_text('a O\n', encoding='utf-8')
    (data / 'train.json').write_text('{"data": [], "version": "1.1"}', encoding='utf-8')
    (data / 'dev.json').write_text('{"data": [], "version": "1.1"}', encoding='utf-8')
    tasks = tmp_path / 'tasks'
    tasks.mkdir()
    files = {'sentences': ('train: ~/data/train.csv\ndev: $ELECTRA_TEST_DATA/dev.csv\ntext: sentence\nlabel: label\n',
                           'csv'),
             'tags': ('kind: tagging\ntrain: ~/data/train.txt\ndev: ${ELECTRA_TEST_DATA}/dev.txt\n', 'txt'),
             'qa': ('kind: squad\ntrain: ~/data/train.json\ndev: $ELECTRA_TEST_DATA/dev.json\n', 'json')}
    for name, (text, ext) in files.items():
        (tasks / f'{name}.yaml').write_text(text, encoding='utf-8')
        spec = read_task_file(tasks / f'{name}.yaml')
        assert spec.files == {'train': data / f'train.{ext}', 'dev': data / f'dev.{ext}'}, name


def test_tilde_in_the_environment_variables_the_libraries_read_as_paths(home, tmp_path):
    """HF_HOME and HF_DATASETS_CACHE, the folders the libraries cache the hub's models and data sets in (the library
    reads no path from the environment itself): `~` in them is expanded where they are used (checked)."""
    (tmp_path / 'rows.jsonl').write_text('{"text": "a"}\n', encoding='utf-8')
    code = ('import huggingface_hub.constants as h, datasets; print(h.HF_HUB_CACHE); '
            'print(datasets.load_dataset_builder("json", data_files="rows.jsonl").cache_dir)')
    env = {**os.environ, 'HF_HOME': '~/hf', 'HF_DATASETS_CACHE': '~/datasets'}
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True).stdout
    hub, data = out.split()
    assert hub == str(home / 'hf' / 'hub') and Path(data).is_relative_to(home / 'datasets'), out


# -- outputs never inside inputs, inputs never inside outputs



def job(tmp_path, data, **kw) -> FinetuneConfig:
    "A fine-tuning job's config as finetune.py reads it (its folders checked), on the tiny model."
    values = dict(data=str(data), runs=1, group='t', output_dir=str(tmp_path / 'ckpt'),
                  test_output_dir=str(tmp_path / 'out'), cache_dir=str(tmp_path / 'cache'), device='cpu')
    return load_config(FinetuneConfig, [], preset_dir='configs/finetune', overrides={**values, **kw})


def test_pretraining_outputs_inside_an_input_folder_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus, tok = tmp_path / 'corpus', tmp_path / 'tok'
    corpus.mkdir(), tok.mkdir()
    (corpus / 'a.txt').write_text('one.\n', encoding='utf-8')
    (tok / 'vocab.txt').write_text('[PAD]\n', encoding='utf-8')
    base = {'corpus': [str(corpus)], 'tokenizer': str(tok)}
    make = lambda **kw: pretrain(**base, **kw)
    message = refused(lambda: make(output_dir='corpus/ckpt'), "output_dir", "corpus")
    assert '--output_dir' in message  # the fix
    refused(lambda: make(output_dir=str(corpus)), 'output_dir', 'corpus')
    refused(lambda: make(cache_dir='corpus/../corpus/cache'), 'cache_dir', 'corpus')
    refused(lambda: make(cache_dir=str(tok / 'cache')), 'cache_dir', 'tokenizer')
    (tmp_path / 'link').symlink_to(corpus)  # the link resolved: it is the corpus folder
    refused(lambda: make(output_dir='link/out'), 'output_dir', 'corpus')
    make(output_dir='out', cache_dir='cache')  # apart: fine


def test_pretraining_inputs_inside_its_own_run_are_refused_and_another_runs_export_is_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / 'checkpoints' / 'pretrain'
    for run in ('vanilla_11081', 'mine_11081'):
        for net in ('generator', 'discriminator'): (out / run / net).mkdir(parents=True)
    (out / 'mine_11081_100%.pth').write_bytes(b'')
    make = lambda **kw: pretrain(output_dir='checkpoints/pretrain', **kw)
    # the README's continued pretraining: another run's export under the same output_dir
    assert make(run_name='mine', init_from='checkpoints/pretrain/vanilla_11081').init_from
    refused(lambda: make(run_name='vanilla', init_from=str(out / 'vanilla_11081')), 'init_from', 'output_dir')
    refused(lambda: make(run_name='mine', init_from=str(out / 'mine_11081_100%.pth')), 'init_from', 'output_dir')
    refused(lambda: make(run_name='mine', tokenizer=str(out / 'mine_11081' / 'discriminator')), 'tokenizer', 'output_dir')


def test_finetuning_outputs_and_inputs_kept_apart(tmp_path, monkeypatch, tiny_dir, glue_dir):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / 'checkpoints' / 'pretrain' / 'run_1' / 'discriminator'
    model.parent.mkdir(parents=True)
    model.symlink_to(tiny_dir)
    kw = dict(model=str(model), tasks=['RTE'])
    # the README's default: the model pretraining exported under checkpoints/, the sweep's outputs in checkpoints/glue
    job(tmp_path, glue_dir, **{**kw, 'output_dir': 'checkpoints/glue'})
    job(tmp_path, glue_dir, **{**kw, 'output_dir': 'checkpoints/pretrain', 'group': 'other'})  # beside it: fine
    refused(lambda: job(tmp_path, glue_dir, **{**kw, 'output_dir': str(model)}), 'output_dir', 'model')
    refused(lambda: job(tmp_path, glue_dir, **{**kw, 'output_dir': 'checkpoints/pretrain', 'group': 'run_1'}),
            'model', 'output_dir')
    refused(lambda: job(tmp_path, glue_dir, **{**kw, 'test_output_dir': str(glue_dir / 'preds')}), 'test_output_dir',
            'data')
    refused(lambda: job(tmp_path, glue_dir, **{**kw, 'cache_dir': str(glue_dir / 'RTE' / 'cache')}), 'cache_dir',
            'data')
    # the model given as a link: its target is the folder, and a folder beside it is not inside it
    refused(lambda: job(tmp_path, glue_dir, **{**kw, 'output_dir': str(tiny_dir)}), 'output_dir', 'model')
    job(tmp_path, glue_dir, **{**kw, 'output_dir': str(tiny_dir.parent)})


def test_finetuning_a_task_files_data_folder_and_the_outputs(tmp_path, monkeypatch, tiny_dir, glue_dir):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / 'mytask'
    data.mkdir()
    (data / 'train.csv').write_text('sentence,label\na b,x\nc d,y\n', encoding='utf-8')
    (data / 'dev.csv').write_text('sentence,label\na b,x\n', encoding='utf-8')
    spec = tmp_path / 'mytask.yaml'
    spec.write_text('train: mytask/train.csv\ndev: mytask/dev.csv\ntext: sentence\nlabel: label\n', encoding='utf-8')
    kw = dict(model=str(tiny_dir), tasks=[str(spec)])
    job(tmp_path, glue_dir, **kw)
    job(tmp_path, glue_dir, **{**kw, 'output_dir': 'mytask/out'})  # beside the files it names: fine
    refused(lambda: job(tmp_path, glue_dir, **{**kw, 'output_dir': '.', 'group': 'mytask'}), 'tasks', 'output_dir')


def test_the_comparison_keeps_its_folder_apart_from_the_corpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / 'corpus'
    corpus.mkdir()
    (corpus / 'a.txt').write_text('one.\n', encoding='utf-8')
    make = lambda out, name='cmp': make_plan(config_from_dict(CompareConfig, {
        'output_dir': out, 'name': name, 'variants': {'electra': ''}, 'pretrain_config': 'demo', 'finetune': False,
        'pretrain_overrides': {'corpus': [str(corpus)]}}, from_file=False))
    make('runs')
    refused(lambda: make('corpus'), 'output_dir', 'corpus')
    refused(lambda: make('.', name='corpus'), 'corpus', 'output_dir')


# -- a preset's kind by what it is, not its name

def test_a_preset_is_any_file_and_never_a_folder_whatever_their_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'mine').write_text('steps: 5\n', encoding='utf-8')          # YAML without an extension
    (tmp_path / 'mine.json').write_text('{"steps": 6}\n', encoding='utf-8')  # JSON is YAML
    assert (pretrain('--config', 'mine').steps, pretrain('--config', 'mine.json').steps) == (5, 6)
    (tmp_path / 'folder.yaml').mkdir()
    message = refused(lambda: pretrain('--config', 'folder.yaml'), '--config', 'folder.yaml')
    assert 'is a folder' in message


def test_the_driver_refuses_an_overlap_before_any_work_in_one_line_with_status_2(tmp_path, monkeypatch):
    "pretrain.py, as a user runs it: `~` in the corpus expanded, the output inside it refused, nothing written."
    from tests.support.notebook_runs import run_script
    corpus = tmp_path / 'home' / 'corpus'
    corpus.mkdir(parents=True)
    (corpus / 'a.txt').write_text('one.\n', encoding='utf-8')
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    proc = run_script('pretrain.py', '--corpus', '~/corpus', '--output_dir', '~/corpus/ckpt',
                      '--cache_dir', str(tmp_path / 'cache'))
    assert proc.returncode == 2 and proc.stdout == '', (proc.stdout, proc.stderr)
    assert proc.stderr == (f"error: output_dir: {corpus / 'ckpt'} ({corpus / 'ckpt'}) is inside corpus '{corpus}' "
                           f"({corpus}): the job would write among what it reads. Give --output_dir a folder outside "
                           "it.\n")
    assert sorted(p.name for p in corpus.iterdir()) == ['a.txt'] and not (tmp_path / 'cache').exists()


def test_a_run_group_or_comparison_folder_differing_only_in_case_from_one_there_is_refused(tmp_path, monkeypatch,
                                                                                          tiny_dir):
    "On macOS and Windows `Demo_0/` is `demo_0/`: the job would write into (and resume, replace) the other's folder."
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'ckpt' / 'demo_0').mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"^run_name: the run folder 'Demo_0' differs only in case from "
                                          + re.escape(str(tmp_path / 'ckpt' / 'demo_0')) + r", there already: on a case-insensitive file system \(macOS, Windows\), they "
                                          r"are one folder\. Give --run_name demo to continue that run, or another "
                                          r"name\.$"):
        pretrain('--output_dir', 'ckpt', '--run_name', 'Demo', '--seed', '0')
    assert pretrain('--output_dir', 'ckpt', '--run_name', 'demo', '--seed', '0').run_name == 'demo'
    (tmp_path / 'out' / 'mine').mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"^group: the group folder 'Mine' differs only in case from "
                                          + re.escape(str(tmp_path / 'out' / 'mine')) + r", there already: .* Give --group mine to continue that group, or another "
                                          r"name\.$"):
        load_config(FinetuneConfig, ['--config', 'demo', '--model', str(tiny_dir), '--tasks', 'RTE', '--group', 'Mine',
                                     '--output_dir', 'out'], preset_dir='configs/finetune')
    (tmp_path / 'cmp' / 'first').mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"^name: the comparison folder 'First' differs only in case from "
                                          + re.escape(str(tmp_path / 'cmp' / 'first'))):
        make_plan(config_from_dict(CompareConfig, {'output_dir': 'cmp', 'name': 'First', 'variants': {'electra': ''},
                                                   'pretrain_config': 'demo', 'finetune': False}, from_file=False))


def test_a_run_group_or_comparison_folder_in_another_unicode_form_from_one_there_is_refused(tmp_path, monkeypatch,
                                                                                            tiny_dir):
    "On macOS a folder 'revie\u0301w_0' (NFD, as macOS gives names) is the 'revi\u00e9w_0' (NFC) typed on Linux."
    monkeypatch.chdir(tmp_path)
    nfc, nfd = 'revi\u00e9w', 'revie\u0301w'
    form = (r"differs only in Unicode form \(NFC, NFD: an accented letter as one character or as a letter and a "
            r"combining accent\) from ")
    (tmp_path / 'ckpt' / f'{nfd}_0').mkdir(parents=True)
    with pytest.raises(ConfigError, match=rf"^run_name: the run folder '{nfc}_0' {form}"
                                          + re.escape(str(tmp_path / 'ckpt' / f'{nfd}_0')) + r", there already: on "
                                          r"macOS, whose file systems do not tell the forms apart, they are one "
                                          rf"folder\. Give --run_name {nfd} to continue that run, or another name\.$"):
        pretrain('--output_dir', 'ckpt', '--run_name', nfc, '--seed', '0')
    (tmp_path / 'out' / nfd.upper()).mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"^group: the group folder .* differs only in case and Unicode form "
                                          r"\(NFC, NFD: .*\) from .* there already: on macOS, whose file systems do "
                                          rf"not tell the forms apart, they are one folder\. Give --group {nfd.upper()} "):
        load_config(FinetuneConfig, ['--config', 'demo', '--model', str(tiny_dir), '--tasks', 'RTE', '--group', nfc,
                                     '--output_dir', 'out'], preset_dir='configs/finetune')
    (tmp_path / 'cmp' / nfd).mkdir(parents=True)
    with pytest.raises(ConfigError, match=rf"^name: the comparison folder '{nfc}' {form}"):
        make_plan(config_from_dict(CompareConfig, {'output_dir': 'cmp', 'name': nfc, 'variants': {'electra': ''},
                                                   'pretrain_config': 'demo', 'finetune': False}, from_file=False))


@pytest.mark.parametrize('given', ['demo,', 'demo,,bert', ',demo', 'demo, ,bert'])
def test_an_empty_preset_name_in_config_is_refused_as_such(tmp_path, monkeypatch, given):
    "A trailing or double comma in --config names no preset (nor the current folder), on the command line and in overrides."
    monkeypatch.chdir(tmp_path)
    for make in (lambda: pretrain('--config', given), lambda: pretrain(config=given)):
        message = refused(make, '--config', repr(given), 'an empty preset name (a trailing or double comma)')
        assert 'folder' not in message


SHELL_DEFAULTS = ['${ELECTRA_NOT_SET_ANYWHERE:-/d}/x', '${ELECTRA_NOT_SET_ANYWHERE-/d}/x', '${ELECTRA_TEST_EMPTY:-/d}/x',
                  '${ELECTRA_TEST_EMPTY-/d}/x', '${ELECTRA_TEST_SCRATCH:-/d}/x', '${ELECTRA_TEST_SCRATCH-/d}/x',
                  '${ELECTRA_NOT_SET_ANYWHERE:-$ELECTRA_TEST_SCRATCH}/x',
                  '${ELECTRA_NOT_SET_ANYWHERE:-${ELECTRA_TEST_SCRATCH}/y}/x', '${ELECTRA_NOT_SET_ANYWHERE:-~/d}/x']


@pytest.mark.parametrize('written', SHELL_DEFAULTS)
def test_a_variable_with_a_default_is_what_bash_makes_of_it_on_every_surface(home, tmp_path, monkeypatch, written):
    """`${X:-default}` and `${X-default}` as bash expands them written unquoted (bash itself is the reference: a `~` in
    the default too), in each place a path is given."""
    monkeypatch.setenv('ELECTRA_TEST_EMPTY', '')
    bash = subprocess.run(['bash', '-c', f'printf %s {written}'], capture_output=True, text=True, check=True).stdout
    preset = tmp_path / 'p.yaml'
    preset.write_text(f"output_dir: '{written}'\n", encoding='utf-8')
    assert pretrain('--output_dir', written).output_dir == bash
    assert pretrain('--config', f'demo,{preset}').output_dir == bash
    assert pretrain(output_dir=written).output_dir == bash


@pytest.mark.parametrize('written', ['${ELECTRA_TEST_SCRATCH:?not set}', '${ELECTRA_TEST_SCRATCH:+/a}', '${#ELECTRA_TEST_SCRATCH}',
                                     '${ELECTRA_TEST_SCRATCH/a/b}', '${ELECTRA_TEST_SCRATCH', '${}'])
def test_a_shell_expansion_this_reader_does_not_do_is_refused_with_a_fix_bash_takes(home, written):
    message = refused(lambda: pretrain('--output_dir', written), "command line: key 'output_dir'", repr(written))
    assert 'export' not in message and '${X:-default}' in message


# -- a shipped preset's name and a file's path told apart by how they are written, not by what lies in the folder

def test_a_bare_shipped_name_is_the_preset_whatever_files_lie_in_the_folder(tmp_path, monkeypatch):
    """`small` and `bert` mean configs/pretrain/small.yaml and bert.yaml as every README command spells them: a file
    `./small` or `./bert` here is said in one warning line naming both and `./NAME` for the file, and never read."""
    from electra.config.errors import RunWarning
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'small').write_text('hidden_size: 64\n', encoding='utf-8')
    (tmp_path / 'bert').write_text('a b c\n', encoding='utf-8')           # not even YAML: the preset is meant
    with pytest.warns(RunWarning) as said:
        cfg = pretrain('--config', 'small,bert')
    assert cfg.hidden_size == pretrain_preset('small')['hidden_size'] == 256
    assert cfg.objective == pretrain_preset('bert')['objective'] == 'mlm'
    lines = [str(w.message) for w in said]
    assert len(lines) == 2 and all('\n' not in line for line in lines)
    for name, line in zip(('small', 'bert'), lines):
        assert f"the shipped preset {PRESETS / f'{name}.yaml'}" in line and str(tmp_path / name) in line
        assert f'--config ./{name}' in line                                  # how to read the file instead
    assert pretrain('--config', './small').hidden_size == 64                 # written as a path: the file
    refused(lambda: pretrain('--config', 'demo,./bert'), 'bert', 'a mapping')


def test_a_value_written_as_a_path_is_a_file_and_one_that_is_not_there_is_named(tmp_path, monkeypatch):
    "`./bert` with only ./bert.yaml here is no file (never the shipped bert); `./mypreset` names the missing file."
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'bert.yaml').write_text('objective: electra_15\n', encoding='utf-8')
    (tmp_path / 'mypreset.yaml').write_text('steps: 7\n', encoding='utf-8')
    for name in ('bert', 'mypreset'):
        message = refused(lambda: pretrain('--config', f'demo,./{name}'), f"no such file './{name}'",
                          f'./{name}.yaml')
        assert 'unknown preset' not in message
    assert pretrain('--config', 'demo,./bert.yaml').objective == 'electra_15'
    assert pretrain('--config', 'demo,mypreset.yaml').steps == 7             # a .yaml name: a file, here
    refused(lambda: pretrain('--config', 'nope.yml'), "no such file 'nope.yml'")
    refused(lambda: pretrain('--config', 'sub/small'), "no such file 'sub/small'")
    refused(lambda: pretrain('--config', 'smal'), "unknown preset 'smal'", "'small'")
    assert pretrain('--config', 'demo').hidden_size == 64                   # the shipped demo, nothing here


def test_finetuning_and_the_comparison_read_a_preset_name_by_the_same_rule(tmp_path, monkeypatch):
    from electra.config.errors import RunWarning
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'small').write_text('lr: 0.5\n', encoding='utf-8')
    (tmp_path / 'electric').write_text('name: mine\n', encoding='utf-8')
    with pytest.warns(RunWarning, match=r'--config ./small'):
        cfg = load_config(FinetuneConfig, ['--config', 'small'], preset_dir='configs/finetune')
    assert cfg.lr == read_preset('configs/finetune', 'small')['lr'] != 0.5
    with pytest.warns(RunWarning, match=r'--config ./electric'):
        cmp = load_config(CompareConfig, ['--config', 'electric'], preset_dir='configs/compare')
    assert cmp.name == read_preset('configs/compare', 'electric')['name'] != 'mine'


def test_help_names_the_values_of_the_file_the_value_written_as_a_path_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'bert').write_text('objective: electra_15\n', encoding='utf-8')
    for given, objective in (('demo,./bert', 'electra_15'), ('demo,bert', 'mlm')):
        with warnings.catch_warnings(), pytest.raises(SystemExit):  # demo,bert: the file said, not read
            warnings.simplefilter('ignore')
            pretrain('--config', given, '--help')
        out = capsys.readouterr().out
        assert f'keys (their value with --config {given}; the default where it differs):' in out
        assert f"--objective (str, {objective!r}; default 'electra')" in out


PRESETS = Path(__file__).resolve().parents[2] / 'configs' / 'pretrain'


def read_preset(folder: str, name: str) -> dict:
    import yaml
    return yaml.safe_load((Path(__file__).resolve().parents[2] / folder / f'{name}.yaml').read_text(encoding='utf-8'))


def pretrain_preset(name: str) -> dict:
    return read_preset('configs/pretrain', name)



# -- a config's local paths resolved: the same files and folders from any folder


def test_each_job_s_local_paths_are_absolute_and_its_names_stay_names(tmp_path, monkeypatch):
    """What a job reads relative to the current folder is kept as the absolute path it names (a run's config.yaml,
    checkpoint, card, rows and trackers record the config): loaded from another folder holding other files of those
    names, the config still names these. Hub names, `demo`, `hub`, `hub:...` and GLUE names stay names, even where a
    folder of that name lies here; an output folder is absolute before it exists."""
    monkeypatch.chdir(tmp_path)
    for folder in ('dup', 'gen', 'model', 'glue', 'demo', 'RTE'): (tmp_path / folder).mkdir()
    (tmp_path / 'dup' / 'a.txt').write_text('One line of text.\n', encoding='utf-8')
    (tmp_path / 'vocab.txt').write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n', encoding='utf-8')
    for split in ('train', 'dev'): (tmp_path / f'{split}.csv').write_text('sentence,label\na b,0\nc d,1\n')
    (tmp_path / 'mine.yaml').write_text('train: train.csv\ndev: dev.csv\ntext: sentence\nlabel: label\n')
    cfg = pretrain('--corpus', 'dup/a.txt,demo,hub:wikitext', '--tokenizer', 'vocab.txt', '--output_dir', 'out',
                   '--cache_dir', './cache', '--init_from', 'gen,google/electra-small-generator')
    assert cfg.corpus == [str(tmp_path / 'dup' / 'a.txt'), 'demo', 'hub:wikitext']
    assert (cfg.tokenizer, cfg.output_dir, cfg.cache_dir) == (str(tmp_path / 'vocab.txt'), str(tmp_path / 'out'),
                                                             str(tmp_path / 'cache'))
    assert cfg.init_from == f"{tmp_path / 'gen'},google/electra-small-generator"
    frozen = pretrain('--config', 'fast_electra', '--generator', 'google/electra-small-generator')
    assert frozen.generator == 'google/electra-small-generator'
    assert pretrain('--config', 'fast_electra', '--generator', 'gen').generator == str(tmp_path / 'gen')
    fine = load_config(FinetuneConfig, ['--model', 'model', '--data', 'glue', '--tasks', 'RTE,mine.yaml',
                                        '--output_dir', 'o', '--test_output_dir', 't', '--cache_dir', 'c'],
                       preset_dir='configs/finetune')
    assert (fine.model, fine.data, fine.tasks) == (str(tmp_path / 'model'), str(tmp_path / 'glue'),
                                                   ['RTE', str(tmp_path / 'mine.yaml')])
    assert [fine.output_dir, fine.test_output_dir, fine.cache_dir] == [str(tmp_path / n) for n in 'otc']
    hub = load_config(FinetuneConfig, ['--model', 'google/electra-small-discriminator-v2', '--data', 'demo',
                                       '--tasks', 'RTE'], preset_dir='configs/finetune')
    assert (hub.model, hub.data) == ('google/electra-small-discriminator-v2', 'demo')
    assert FinetuneConfig(data='hub', tasks=['RTE'], model='model').model == str(tmp_path / 'model')  # from Python too
    comp = config_from_dict(CompareConfig, {'output_dir': 'cmp', 'tasks': ['RTE', 'mine.yaml'],
                                            'variants': {'electra': ''}}, from_file=False)
    assert (comp.output_dir, comp.tasks) == (str(tmp_path / 'cmp'), ['RTE', str(tmp_path / 'mine.yaml')])


@pytest.mark.parametrize('cls, key', [(PretrainConfig, 'output_dir'), (PretrainConfig, 'cache_dir'),
                                      (FinetuneConfig, 'output_dir'), (FinetuneConfig, 'test_output_dir')])
def test_an_empty_folder_a_job_writes_is_refused_naming_the_key(tmp_path, monkeypatch, cls, key):
    """R25b-2: `--output_dir ''` (or a preset's `${VAR-default}` with VAR set empty) wrote into the current folder but
    was saved as '', so the run's config.yaml named whatever folder it was loaded from, and its --resume started a new
    run at step 0 elsewhere. A folder a job writes given empty is refused, naming the key (and the preset's line)."""
    from electra.config.errors import ConfigError
    preset = 'configs/pretrain' if cls is PretrainConfig else 'configs/finetune'
    with pytest.raises(ConfigError, match=rf"^command line: key '{key}': '' names no folder \(an empty value, or a "
                                          r"\$VARIABLE set to nothing\): give one \('\.' for the current folder\)\.$"):
        load_config(cls, ['--config', 'demo', f'--{key}', ''], preset_dir=preset)
    monkeypatch.setenv('EMPTY_FOLDER', '')
    (tmp_path / 'p.yaml').write_text(f'config: demo\n{key}: ${{EMPTY_FOLDER-/somewhere}}\n')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path / 'p.yaml'))}: line 2: key '{key}': '' names no"):
        load_config(cls, ['--config', str(tmp_path / 'p.yaml')], preset_dir=preset)
