"""electra/tools/figures.py: a notebook executed in a kernel with its overrides, its tagged cells' pictures written as
PNG files and read back; bad input refused in one line."""
from __future__ import annotations

import base64
import io

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from electra.config.errors import ConfigError
from electra.tools.figures import main, notebook_figures, save_figures


def png(color: str) -> bytes:
    "A 2x2 PNG of one colour, made by matplotlib."
    from matplotlib.figure import Figure
    buf = io.BytesIO()
    fig = Figure(figsize=(0.02, 0.02))
    fig.patch.set_facecolor(color)
    fig.savefig(buf, format='png', dpi=100)
    return buf.getvalue()


def picture(data: bytes):
    return new_output('display_data', data={'image/png': base64.b64encode(data).decode(), 'text/plain': '<Figure>'})


def test_each_tagged_cell_gives_its_last_picture(tmp_path):
    red, blue = png('red'), png('blue')
    cells = [new_code_cell('a', metadata={'tags': ['figure:first']}, outputs=[picture(red), picture(blue)]),
             new_code_cell('b', outputs=[picture(red)]),                                          # not tagged
             new_code_cell('c', metadata={'tags': ['figure:none']}, outputs=[]),                  # drew nothing
             new_code_cell('d', metadata={'tags': ['parameters', 'figure:second']}, outputs=[picture(red)])]
    nb = new_notebook(cells=cells)
    assert notebook_figures(nb) == {'first': blue, 'second': red}
    paths = save_figures(nb, tmp_path / 'out')
    assert paths == [tmp_path / 'out' / 'first.png', tmp_path / 'out' / 'second.png']
    assert [p.read_bytes() for p in paths] == [blue, red]


def test_the_command_executes_the_notebook_with_its_overrides(tmp_path, capsys):
    nb = new_notebook(cells=[
        new_code_cell("overrides = {}", metadata={'tags': ['parameters']}),
        new_code_cell("import base64\nfrom IPython.display import Image, display\n"
                      "display(Image(data=base64.b64decode(overrides['png'])))", metadata={'tags': ['figure:shown']})],
        metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'}})
    nbformat.write(nb, str(tmp_path / 'n.ipynb'))
    green = png('green')
    overrides = '{"png": "%s"}' % base64.b64encode(green).decode()
    assert main(['--notebook', str(tmp_path / 'n.ipynb'), '--out', str(tmp_path / 'figs'), '--overrides', overrides]) == 0
    assert (tmp_path / 'figs' / 'shown.png').read_bytes() == green
    assert f"wrote {tmp_path / 'figs' / 'shown.png'}" in capsys.readouterr().out
    # a cell that fails: its error in one line
    with pytest.raises(ConfigError, match=r"n.ipynb failed: KeyError: 'png'"):
        main(['--notebook', str(tmp_path / 'n.ipynb'), '--out', str(tmp_path / 'figs')])


@pytest.mark.parametrize('argv, message', [
    (['--overrides', '{"k": 5'], '--overrides: not JSON'),
    (['--overrides', '[1]'], '--overrides: a JSON object of config keys'),
    (['--notebook', 'no/such.ipynb'], '--notebook: no/such.ipynb not found')])
def test_bad_input_is_refused_before_a_kernel_starts(argv, message):
    with pytest.raises(ConfigError, match=message):
        main(argv)


def test_the_help_gives_the_commands_it_announces_and_each_option_s_default(capsys):
    """R28a-1: the description was cut at its first paragraph, ending at 'written by:' with the commands missing, and
    no option showed its default (that leaving --out out writes into the checkout's docs/figures)."""
    from electra.tools.figures import ROOT
    with pytest.raises(SystemExit) as e: main(['--help'])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert 'written by:\n\n    python pretrain.py && python finetune.py' in out
    assert 'python -m electra.tools.figures --out docs/figures' in out
    compact = lambda text: ''.join(text.split())  # noqa: E731  (argparse wraps a long path, at a hyphen too)
    assert compact(f"(default: {ROOT / 'docs' / 'figures'})") in compact(out)
    assert '(default: {})' in out
