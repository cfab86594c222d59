"""What the library states of itself: its license (LICENSE, the official ELECTRA code's Apache-2.0 text), its version
(`electra.__version__`) printed by every command's `--version` and named by the changelog."""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest

import electra
from electra.convert.__main__ import main as convert_main
from electra.experiments.compare import main as compare_main
from electra.finetuning.tasks.demo import main as demo_main
from electra.finetuning.tasks.qa.hub import main as qa_hub_main
from electra.jobs import commands
from electra.tools.figures import main as figures_main
from electra.tools.notebooks import main as notebooks_main
from tests.support.pretrain import run_driver

ROOT = Path(__file__).resolve().parents[1]
# git's blob id of google-research/electra's LICENSE (`git ls-tree HEAD LICENSE` in a clone of the official code)
OFFICIAL_LICENSE_BLOB = 'd645695673349e3947e8e5ae42332d0ac3164cd7'


def test_the_license_is_the_official_electra_code_s_apache_2_text():
    data = (ROOT / 'LICENSE').read_bytes()
    assert hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest() == OFFICIAL_LICENSE_BLOB
    assert data.lstrip().startswith(b'Apache License\n                           Version 2.0, January 2004')


def _driver(script):
    return lambda: run_driver(script, ['--version'])


def _command(name):
    def run():
        old = sys.argv
        sys.argv = [f'electra-{name}', '--version']
        try: getattr(commands, name)()
        finally: sys.argv = old
    return run


COMMANDS = {'pretrain.py': _driver('pretrain.py'), 'finetune.py': _driver('finetune.py'),
            'python -m electra.experiments.compare': lambda: compare_main(['--version']),
            'python -m electra.convert': lambda: convert_main(['--version']),
            'python -m electra.tools.notebooks': lambda: notebooks_main(['--version']),
            'python -m electra.tools.figures': lambda: figures_main(['--version']),
            'python -m electra.finetuning.tasks.demo': lambda: demo_main(['--version']),
            'python -m electra.finetuning.tasks.qa.hub': lambda: qa_hub_main(['--version']),
            **{f'electra-{n}': _command(n) for n in ('pretrain', 'finetune', 'compare', 'convert')}}
PROGS = {'electra-pretrain': 'pretrain.py', 'electra-finetune': 'finetune.py',
         'electra-compare': 'python -m electra.experiments.compare', 'electra-convert': 'python -m electra.convert'}


@pytest.mark.parametrize('command', COMMANDS)
def test_every_command_prints_the_library_version_and_exits(command, capsys):
    with pytest.raises(SystemExit) as e: COMMANDS[command]()
    assert e.value.code in (0, None)
    assert capsys.readouterr().out == f'{PROGS.get(command, command)} (electra {electra.__version__})\n'


def test_the_changelog_has_an_entry_for_this_version():
    text = (ROOT / 'CHANGELOG.md').read_text(encoding='utf-8')
    versions = re.findall(r'^## \[?(\d+\.\d+\.\d+)\]?', text, re.M)
    assert versions[0] == electra.__version__, versions


def test_version_is_answered_before_the_config_is_read(capsys):
    "A preset that does not exist beside --version: the version all the same (what a bug report asks first)."
    with pytest.raises(SystemExit) as e: run_driver('finetune.py', ['--config', 'no_such_preset', '--version'])
    assert e.value.code == 0 and capsys.readouterr().out == f'finetune.py (electra {electra.__version__})\n'


@pytest.mark.parametrize('main, args', [('demo', ['--help']), ('demo', ['-h']), ('qa_hub', ['--help', 'out']),
                                        ('qa_hub', ['-h'])])
def test_the_tools_of_a_positional_folder_answer_help_and_write_nothing(main, args, tmp_path, monkeypatch, capsys):
    """R25a-1: `python -m electra.finetuning.tasks.demo --help` (and -h, --version) wrote the demo tasks into a folder
    named `--help` with status 0, as the QA hub tool read `--help` as its dataset: each read its arguments by hand.
    Both answer --help with their usage now, writing nothing."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e: {'demo': demo_main, 'qa_hub': qa_hub_main}[main](args)
    assert e.value.code == 0 and capsys.readouterr().out.startswith('usage: python -m electra.finetuning.tasks.')
    assert list(tmp_path.iterdir()) == []
