"The public API: `import electra` is light, every public name resolves to its home module and has a docstring."
import subprocess
import sys
from pathlib import Path

import pytest

import electra

ROOT = Path(__file__).resolve().parents[1]


def test_import_is_light_and_lists_the_api():
    code = 'import sys, electra; print(len(electra.__all__), "torch" in sys.modules, "fastai" in sys.modules)'
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(electra.__all__)), 'False', 'False']


def test_every_public_name_resolves_with_a_docstring():
    import importlib
    for name in electra.__all__:
        if name == '__version__': continue
        obj = getattr(electra, name)
        home = importlib.import_module(electra._HOMES[name])
        assert getattr(home, name) is obj and name in home.__all__, name
        assert (obj.__doc__ or '').strip(), f'{name} has no docstring'


def test_a_renamed_public_name_works_for_one_release_with_a_warning():
    with pytest.warns(DeprecationWarning, match=r'electra\.ElectraPretrainingModel is deprecated: use '
                                                r'electra\.ElectraGeneratorDiscriminator'):
        old = electra.ElectraPretrainingModel
    assert old is electra.ElectraGeneratorDiscriminator
