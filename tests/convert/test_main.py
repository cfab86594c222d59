"""electra/convert/__main__.py: the command line of the converters."""
import pytest

from electra.convert.__main__ import main


def test_no_subcommand_names_the_choices(capsys):
    "Before: 'the following arguments are required: SUBCOMMAND', without saying what it may be (V12 of the sweep)."
    with pytest.raises(SystemExit) as e: main([])
    out = capsys.readouterr()
    assert e.value.code == 2 and out.out == ''
    assert out.err.splitlines()[-1] == 'python -m electra.convert: error: the following arguments are required: {tf,ls}'
