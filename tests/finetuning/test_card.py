"""electra/finetuning/card.py: the model card (README.md) of a fine-tuning group, written with its summary, parsed
back: valid YAML metadata, each task's dev scores in the model-index equal to its runs in results.csv."""
from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml

import electra
from electra.finetuning import sweep
from electra.finetuning.results import ResultsTable
from electra.finetuning.tasks.demo import write_demo_tasks
from tests.support.finetune import job

# dev scores of three runs of two tasks; an undefined score (NaN) is no score
SCORES = {'STS-B': [80.0, 82.5, 70.25], 'RTE': [60.0, 55.0, float('nan')]}


def metadata(text: str) -> dict:
    match = re.match(r'---\n(.*?)\n---\n', text, re.S)
    assert match, text[:200]
    return yaml.safe_load(match[1])


def sweep_results(tmp_path, data: str) -> tuple:
    "A job over STS-B, RTE, MNLI and AX with SCORES recorded in its results table (MNLI: no run finished)."
    cfg = job(tmp_path, data, tasks=['STS-B', 'RTE', 'MNLI', 'AX'], runs=3, group='g',
              model='google/electra-small-discriminator')
    table = ResultsTable(tmp_path / 'ckpt' / 'g' / 'results.csv')
    for task, scores in SCORES.items():
        for run, score in enumerate(scores):
            table.add({'task': task, 'run': run, 'seed': run, 'score': score, 'settings': 'x', 'steps': 10 + run,
                       'checkpoint': str(tmp_path / 'ckpt' / 'g' / f'{task}_{run}.pth')})
    return cfg, table


@pytest.mark.parametrize('data', ['hub', 'demo'])
def test_the_card_of_a_group_holds_each_task_s_dev_scores_from_its_results_table(tmp_path, data):
    cfg, table = sweep_results(tmp_path, data)
    summary = sweep.write_summary(cfg, table)
    text = (tmp_path / 'ckpt' / 'g' / 'README.md').read_text(encoding='utf-8')
    meta = metadata(text)
    assert meta['language'] == 'en' and meta['pipeline_tag'] == 'text-classification' and 'library_name' not in meta
    assert meta['license'] == 'apache-2.0' and meta['electra_version'] == electra.__version__
    assert meta['base_model'] == 'google/electra-small-discriminator'
    assert meta.get('datasets') == (['nyu-mll/glue'] if data == 'hub' else None)
    rows = pd.read_csv(tmp_path / 'ckpt' / 'g' / 'results.csv')
    [model] = meta['model-index']
    assert model['name'] == 'g'
    found = {r['task']['name']: r for r in model['results']}
    assert sorted(found) == ['RTE', 'STS-B']  # one result per task: no run of MNLI, AX is MNLI's
    for task, metric, config in (('STS-B', 'spearman', 'stsb'), ('RTE', 'accuracy', 'rte')):
        scores = rows.loc[rows['task'] == task, 'score'].dropna()
        n = len(scores)
        assert {m['name']: m['value'] for m in found[task]['metrics']} == {
            f'{metric} (median of {n} runs)': scores.median(), f'{metric} (mean of {n} runs)': scores.mean(),
            f'{metric} (best of {n} runs)': scores.max()}
        assert found[task]['dataset']['config'] == config
        assert found[task]['dataset']['type'] == ('nyu-mll/glue' if data == 'hub' else 'demo')
    assert summary in text and '| STS-B | 2 | 2 | 70.25 | 12 | `STS-B_2.pth` |' in text
    assert "model = load_finetuned('RTE_0.pth')  # RTE run 0, a file of this folder" in text
    config = re.search(r'```yaml\n(.*?)\n```', text, re.S)[1]
    assert yaml.safe_load(config)['tasks'] == ['STS-B', 'RTE', 'MNLI', 'AX']
    assert str(tmp_path) not in text.replace(config, '')  # nothing of where the folder lies but the job's config


def test_the_card_of_tasks_from_files_names_their_files_and_kinds(tmp_path):
    "A tagging and a QA task: no pipeline tag for the two, no language (a task file does not say it), one result each."
    ner, squad = write_demo_tasks(tmp_path / 'tasks', sizes={'train': 8, 'dev': 4, 'test': 4})[1:]
    cfg = job(tmp_path, 'demo', tasks=[str(ner), str(squad)], runs=2, group='files')
    table = ResultsTable(tmp_path / 'ckpt' / 'files' / 'results.csv')
    for task, scores in (('ner', [40.0, 50.0]), ('squad', [10.0, 30.0])):
        for run, score in enumerate(scores):
            table.add({'task': task, 'run': run, 'seed': run, 'score': score, 'settings': 'x', 'steps': 4,
                       'checkpoint': str(tmp_path / 'ckpt' / 'files' / f'{task}_{run}.pth')})
    sweep.write_summary(cfg, table)
    meta = metadata((tmp_path / 'ckpt' / 'files' / 'README.md').read_text(encoding='utf-8'))
    assert 'pipeline_tag' not in meta and 'language' not in meta and 'datasets' not in meta
    assert {'tagging', 'squad'} <= set(meta['tags'])
    found = {r['task']['name']: r for r in meta['model-index'][0]['results']}
    assert {t: (r['task']['type'], r['dataset']['type']) for t, r in found.items()} == {
        'ner': ('token-classification', ner.as_posix()), 'squad': ('question-answering', squad.as_posix())}
    assert [m['value'] for m in found['ner']['metrics']] == [45.0, 45.0, 50.0]  # median, mean, best
