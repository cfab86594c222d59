"""electra/finetuning/tasks/qa/hub.py: hub copies of SQuAD written as the official JSON read back the same questions."""
from __future__ import annotations

import json
import os
import re
import sys

import pandas as pd
import pytest

from electra.config.errors import ConfigError
from electra.finetuning.tasks.qa.data import read_squad
from electra.finetuning.tasks.qa.demo import write_demo_squad
from electra.finetuning.tasks.qa import hub
from electra.finetuning.tasks.qa.hub import write_hub_squad
from tests.support import forked


def hub_rows(path) -> list[dict]:
    "The rows of the hub dataset for an official file: one per question, answers as two lists."
    rows = []
    for art in json.loads(path.read_text(encoding='utf-8'))['data']:
        for par in art['paragraphs']:
            for qa in par['qas']:
                rows.append({'id': qa['id'], 'title': art['title'], 'context': par['context'], 'question': qa['question'],
                             'answers': {'text': [a['text'] for a in qa['answers']],
                                         'answer_start': [a['answer_start'] for a in qa['answers']]}})
    return rows


@pytest.mark.parametrize('version', ['1.1', '2.0'])
def test_a_saved_hub_copy_becomes_the_official_files(tmp_path, version):
    src = write_demo_squad(tmp_path / 'src', version, sizes={'train': 30, 'dev': 12})
    copy = tmp_path / 'copy' / 'data'
    copy.mkdir(parents=True)
    for split, name in (('train', 'train'), ('validation', 'dev')):
        pd.DataFrame(hub_rows(src / f'{name}.json')).to_parquet(copy / f'{split}-00000-of-00001.parquet')
    written = write_hub_squad(str(tmp_path / 'copy'), tmp_path / 'out')
    assert [p.name for p in written] == ['train.json', 'dev.json']
    for name in ('train', 'dev'):
        assert json.loads((tmp_path / 'out' / f'{name}.json').read_text())['version'] == ('v2.0' if version == '2.0' else '1.1')
        want, got = read_squad(src / f'{name}.json'), read_squad(tmp_path / 'out' / f'{name}.json')
        key = lambda e: (e.id, e.question, e.context, e.answers, e.is_impossible, e.gold_texts)  # noqa: E731
        assert [key(e) for e in got] == [key(e) for e in want] and len(got) == (30 if name == 'train' else 12)


def test_offline_names_the_local_alternative(tmp_path, monkeypatch):
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    with pytest.raises(ConfigError, match=r"rajpurkar/squad_v2: the hub cannot be reached \(HF_HUB_OFFLINE is set\)\. "
                                          r"Give a local copy instead"):
        write_hub_squad('rajpurkar/squad_v2', tmp_path / 'out')
    (tmp_path / 'empty').mkdir()
    with pytest.raises(ConfigError, match='no train-\\*.parquet and validation-\\*.parquet files'):
        write_hub_squad(str(tmp_path / 'empty'), tmp_path / 'out')


def test_a_file_named_as_the_source_is_refused_not_read_as_the_hub_dataset(tmp_path, monkeypatch):
    "`datasets.load_dataset(name)` reads a local path of that name before the hub: a file there is neither."
    import datasets
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'squad_v2').write_text('{"data": []}')
    monkeypatch.setattr('electra.finetuning.tasks.qa.hub.hub_unreachable', lambda: None)
    monkeypatch.setattr(datasets, 'load_dataset', lambda *a, **k: pytest.fail('read the local file'))
    with pytest.raises(ConfigError, match=rf"^squad_v2: a file, not a directory of a hub copy, nor a hub name: "
                                          rf"{re.escape(str(tmp_path / 'squad_v2'))} is a file of that name here, which "
                                          r"`datasets` reads instead of the hub's\. Give a directory of its parquet "
                                          r"files or of `save_to_disk` output, or a hub name\.$"):
        write_hub_squad('squad_v2', tmp_path / 'out')


def test_the_command_line_ends_a_bad_source_with_one_line_and_status_2(tmp_path, capsys):
    "Before: the same line with status 1, which the project keeps for failures that are not bad input (E08 of the sweep)."
    cmd = [sys.executable, '-m', 'electra.finetuning.tasks.qa.hub']
    r = forked.run([*cmd, 'rajpurkar/squad_v2', str(tmp_path / 'out')], capture_output=True, text=True,
                   env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert r.returncode == 2 and r.stderr.count('\n') == 1, r.stderr
    assert r.stderr.startswith('error: rajpurkar/squad_v2: the hub cannot be reached (HF_HUB_OFFLINE is set).')
    assert not (tmp_path / 'out').exists()
    with pytest.raises(SystemExit) as e: hub.main([])  # in this process: no interpreter to start
    assert e.value.code == 2 and capsys.readouterr().err.endswith(
        'python -m electra.finetuning.tasks.qa.hub: error: the following arguments are required: DATASET_OR_DIR, '
        'OUT_DIR\n')
