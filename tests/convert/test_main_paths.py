"""electra/convert/__main__.py: its paths as people write them, `~` and `$VAR` expanded as the jobs' config keys are
(a quoted `~` reaches the command unexpanded)."""
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
