"""Task files and their data files read by what they hold, not by their names (electra/config/finetune.py
`is_task_file`, electra/finetuning/tasks/files.py, tagging/data.py, qa/data.py and qa/task.py): a task file without
`.yaml`, a folder named `.yaml`, data files whose extension lies or is missing."""
from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

import electra.finetuning  # noqa: F401  (fills the task catalogue)
from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig, is_task_file
from electra.config.values import config_from_dict
from electra.finetuning.tasks.files import FileSource, read_task_file
from electra.finetuning.tasks.qa.data import qa_format, read_mrqa, read_squad
from electra.finetuning.tasks.tagging.data import read_tagged

ROWS = [{'sentence': 'a good film', 'label': 'pos'}, {'sentence': 'a bad, bad plot', 'label': 'neg'}]
SQUAD = {'version': '1.1', 'data': [{'title': 't', 'paragraphs': [{'context': 'Paris is in France.', 'qas': [
    {'id': 'q1', 'question': 'Where is Paris?', 'answers': [{'text': 'France', 'answer_start': 12}]}]}]}]}
MRQA = [{'header': {'dataset': 'x', 'split': 'dev'}},
        {'context': 'Paris is in France.', 'qas': [{'qid': 'q1', 'question': 'Where is Paris?', 'answers': ['France'],
                                                    'detected_answers': [{'text': 'France', 'char_spans': [[12, 17]]}]}]}]


def task_file(tmp_path, train: str, name: str = 'mine.yaml', **more) -> str:
    lines = {'train': train, 'dev': train, 'text': 'sentence', 'label': 'label', **more}
    path = tmp_path / name
    path.write_text(''.join(f'{k}: {v}\n' for k, v in lines.items()), encoding='utf-8')
    return str(path)


def test_a_task_file_without_yaml_in_its_name_is_a_task_file(tmp_path):
    pd.DataFrame(ROWS).to_csv(tmp_path / 'train.csv', index=False)
    plain = task_file(tmp_path, 'train.csv', name='my_task')
    as_json = task_file(tmp_path, 'train.csv', name='other.json')  # YAML in a file named .json
    assert is_task_file(plain) and is_task_file(as_json) and not is_task_file('RTE')
    cfg = config_from_dict(FinetuneConfig, {'tasks': [plain, as_json], 'model': 'x', 'task_overrides': {}})
    assert cfg.task_names == ['my_task', 'other']


def test_a_folder_named_like_a_task_file_is_refused_naming_the_key(tmp_path):
    (tmp_path / 'tasks.yaml').mkdir()
    with pytest.raises(ConfigError) as e:
        config_from_dict(FinetuneConfig, {'tasks': [str(tmp_path / 'tasks.yaml')], 'model': 'x', 'task_overrides': {}})
    assert '\n' not in str(e.value) and 'tasks' in str(e.value) and 'is a folder' in str(e.value)


@pytest.mark.parametrize('name, write', [
    ('train.csv', lambda p: pd.DataFrame(ROWS).to_parquet(p)),             # parquet named .csv
    ('train', lambda p: pd.DataFrame(ROWS).to_csv(p, index=False)),        # CSV without an extension
    ('train.parquet', lambda p: pd.DataFrame(ROWS).to_json(p, orient='records', lines=True)),  # JSONL named .parquet
    ('train.jsonl', lambda p: pd.DataFrame(ROWS).to_csv(p, index=False)),  # CSV named .jsonl
    ('train.txt', lambda p: pd.DataFrame(ROWS).to_csv(p, sep='\t', index=False))])  # TSV named .txt
def test_a_data_file_is_read_by_what_it_holds(tmp_path, name, write):
    write(tmp_path / name)
    spec = read_task_file(task_file(tmp_path, name))
    rows, _ = FileSource(spec)._read('train')
    assert [(r['sentence'], r['label']) for r in rows] == [(r['sentence'], r['label']) for r in ROWS]


def test_a_data_folder_named_like_a_file_is_refused_naming_the_split(tmp_path):
    (tmp_path / 'train.csv').mkdir()
    with pytest.raises(ConfigError) as e:
        read_task_file(task_file(tmp_path, 'train.csv'))
    assert '\n' not in str(e.value) and 'train: ' in str(e.value) and 'is a folder' in str(e.value)


def test_tagged_files_are_jsonl_or_conll_by_what_they_hold(tmp_path):
    (tmp_path / 'a.txt').write_text('{"tokens": ["Paris", "is"], "tags": ["B-LOC", "O"]}\n', encoding='utf-8')
    (tmp_path / 'b.json').write_text('Paris B-LOC\nis O\n', encoding='utf-8')
    (tmp_path / 'c.jsonl').write_text('{ O\nParis B-LOC\n', encoding='utf-8')  # a word that is a brace: CoNLL
    words = [[(s.words, s.tags) for s in read_tagged(tmp_path / f).sentences] for f in ('a.txt', 'b.json', 'c.jsonl')]
    assert words == [[(['Paris', 'is'], ['B-LOC', 'O'])]] * 2 + [[(['{', 'Paris'], ['O', 'B-LOC'])]]


def test_qa_files_are_read_by_what_they_hold(tmp_path):
    (tmp_path / 'squad.txt').write_text(json.dumps(SQUAD), encoding='utf-8')
    (tmp_path / 'plain.jsonl.gz').write_text('\n'.join(map(json.dumps, MRQA)) + '\n', encoding='utf-8')
    with gzip.open(tmp_path / 'packed.jsonl', 'wt', encoding='utf-8') as f: f.write('\n'.join(map(json.dumps, MRQA)))
    (tmp_path / 'squad.yaml').write_text('kind: squad\ntrain: squad.txt\ndev: squad.txt\n', encoding='utf-8')
    (tmp_path / 'mrqa.yaml').write_text('kind: mrqa\ntrain: plain.jsonl.gz\ndev: packed.jsonl\n', encoding='utf-8')
    assert read_task_file(tmp_path / 'squad.yaml').files['train'] == tmp_path / 'squad.txt'
    assert read_task_file(tmp_path / 'mrqa.yaml').files['dev'] == tmp_path / 'packed.jsonl'
    answers = lambda exs: [(e.id, e.gold_texts) for e in exs]
    assert answers(read_squad(tmp_path / 'squad.txt')) == [('q1', ('France',))] and qa_format(tmp_path / 'squad.txt') == 'squad'
    for f in ('plain.jsonl.gz', 'packed.jsonl'):
        assert answers(read_mrqa(tmp_path / f)) == [('q1', ('France',))] and qa_format(tmp_path / f) == 'mrqa'
    (tmp_path / 'lying.yaml').write_text('kind: squad\ntrain: packed.jsonl\ndev: squad.txt\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=r'lying.yaml: train: packed.jsonl holds MRQA JSON lines, but kind is squad: '
                                          r'set kind: mrqa, or give a squad file\.$'):
        read_task_file(tmp_path / 'lying.yaml')
