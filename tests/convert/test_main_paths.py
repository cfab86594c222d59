"""electra/convert/__main__.py: its paths as people write them, `~` and `$VAR` expanded as the jobs' config keys are
(a quoted `~` reaches the command unexpanded)."""
import shutil
from pathlib import Path

import pytest

from electra.config.errors import ConfigError
from electra.convert.__main__ import main

FIXTURES = Path(__file__).resolve().parents[1] / 'fixtures' / 'official_tf'


def test_out_and_src_with_tilde_and_a_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('ELECTRA_TEST_FIXTURES', str(FIXTURES))
    monkeypatch.chdir(tmp_path)
    assert main(['tf', '$ELECTRA_TEST_FIXTURES/tied', '--out', '~/converted', '--no-verify']) == 0
    assert (tmp_path / 'home' / 'converted' / 'discriminator' / 'config.json').is_file()
    assert not (tmp_path / '~').exists() and not (tmp_path / '$ELECTRA_TEST_FIXTURES').exists()
    with pytest.raises(ConfigError, match=r"^--out: '\$ELECTRA_UNSET_HERE/x' names the environment variable"):
        main(['tf', str(FIXTURES / 'tied'), '--out', '$ELECTRA_UNSET_HERE/x'])


def _refused(argv: list[str], *parts) -> str:
    with pytest.raises(ConfigError) as e:
        main(argv)
    message = str(e.value)
    assert '\n' not in message and all(p in message for p in parts), message
    return message


def test_an_out_inside_the_checkpoint_folder_or_an_input_among_what_it_replaces_is_refused(tmp_path):
    "As the jobs keep their outputs apart from their inputs (config/paths.py `check_apart`), before any work."
    src = tmp_path / 'U'
    shutil.copytree(FIXTURES / 'tied', src)
    for given in (src, src / 'model.ckpt-5', src / 'model.ckpt-5.index'):  # a folder, a prefix, one of its files
        _refused(['tf', str(given), '--out', str(src / 'out')], 'out', f"src '{src}'", '--out a folder outside it')
        _refused(['tf', str(given), '--out', str(src)], 'out', f"src '{src}'")
    assert sorted(p.name for p in src.iterdir()) == sorted(p.name for p in (FIXTURES / 'tied').iterdir())
    out = tmp_path / 'conv'
    assert main(['tf', str(src), '--out', str(out), '--no-verify']) == 0
    kept = (out / 'discriminator' / 'tokenizer.json').read_bytes()
    _refused(['tf', str(src), '--out', str(out), '--overwrite', '--vocab', str(out / 'discriminator' / 'tokenizer.json')],
             '--vocab', 'discriminator', 'copy it elsewhere')
    _refused(['tf', str(src), '--out', str(out), '--overwrite', '--hparams', str(out / 'conversion.json')],
             '--hparams', 'conversion.json')
    assert (out / 'discriminator' / 'tokenizer.json').read_bytes() == kept


def test_a_pretraining_runs_folder_as_out_is_named_as_such_and_kept_even_with_overwrite(tmp_path):
    run = tmp_path / 'run_11081'
    for role in ('discriminator', 'generator'):
        (run / role).mkdir(parents=True)
        (run / role / 'config.json').write_text('{}', encoding='utf-8')
    (run / 'config.yaml').write_text('run_name: run\n', encoding='utf-8')
    for extra in ([], ['--overwrite']):
        message = _refused(['tf', str(FIXTURES / 'tied'), '--out', str(run), '--no-verify', *extra],
                           f'--out {run}', "a pretraining run's export", 'discriminator', 'generator')
        assert 'conversion (' not in message and 'holds a conversion' not in message
    assert sorted(p.name for p in run.iterdir()) == ['config.yaml', 'discriminator', 'generator']


def test_a_missing_checkpoint_is_named_before_an_out_beside_it_is_weighed(tmp_path, monkeypatch):
    """The source's existence comes before the overlap of --out with it: `cv/nonexist --out cv/out` names the missing
    checkpoint (resolve_prefix's line), not --out inside 'cv'; so does a folder without a checkpoint."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'cv').mkdir()
    message = _refused(['tf', 'cv/nonexist', '--out', 'cv/out_nonexist'],
                       'cv/nonexist: not a TensorFlow checkpoint: no nonexist.index file there')
    assert 'inside src' not in message
    message = _refused(['tf', 'cv', '--out', 'cv/out'], 'cv: no TensorFlow checkpoint in this directory')
    assert 'inside src' not in message
    assert not (tmp_path / 'cv' / 'out_nonexist').exists() and not (tmp_path / 'cv' / 'out').exists()
