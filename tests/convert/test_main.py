"""electra/convert/__main__.py: the command line of the converters."""
import subprocess
import sys


def test_no_subcommand_names_the_choices():
    "Before: 'the following arguments are required: SUBCOMMAND', without saying what it may be (V12 of the sweep)."
    r = subprocess.run([sys.executable, '-m', 'electra.convert'], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ''
    assert r.stderr.splitlines()[-1] == 'python -m electra.convert: error: the following arguments are required: {tf,ls}'
