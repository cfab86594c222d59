"""electra/finetuning/card.py: the model card (README.md) of a fine-tuning group, written with its summary, parsed
back: valid YAML metadata, each task's dev scores in the model-index equal to its runs in results.csv."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

import electra
from electra.config.cli import load_config
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_to_dict
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
            f'{metric} (median of {n} runs)': scores.median(), f'{metric} (mean of {n} runs)': round(scores.mean(), 4),
            f'{metric} (best of {n} runs)': scores.max()}
        assert found[task]['dataset']['config'] == config
        assert found[task]['dataset']['type'] == ('nyu-mll/glue' if data == 'hub' else 'demo')
    assert summary in text and '| STS-B | 2 | 2 | 70.25 | 12 | `STS-B_2.pth` |' in text
    assert f"Tasks: STS-B, RTE, MNLI; GLUE data: {data}." in text  # AX is predicted by MNLI's runs
    assert "model = load_finetuned('RTE_0.pth')  # RTE run 0, a file of this folder" in text
    config = re.search(r'```yaml\n(.*?)\n```', text, re.S)[1]
    assert yaml.safe_load(config)['tasks'] == ['STS-B', 'RTE', 'MNLI', 'AX']
    assert str(tmp_path) not in text.replace(config, '')  # nothing of where the folder lies but the job's config
    # taken again with --config it is the job's config, its presets applied: it names none to apply again
    assert 'config' not in yaml.safe_load(config) and f"from the presets `{cfg.config}`" in text
    (tmp_path / 'again.yaml').write_text(config, encoding='utf-8')
    again = load_config(FinetuneConfig, ['--config', str(tmp_path / 'again.yaml')])
    assert {**config_to_dict(again), 'config': cfg.config} == config_to_dict(cfg)


def test_the_card_s_mean_is_written_to_the_results_table_s_decimals(tmp_path):
    """R24a-4: the mean of 93.5936, 93.5936 and 76.0454 was written as 87.74419999999999 (float noise of a mean of
    4-decimal scores), the median and best as 93.5936. By hand: 263.2326 / 3 = 87.7442."""
    cfg = job(tmp_path, 'demo', tasks=['STS-B'], runs=3, group='g')
    table = ResultsTable(tmp_path / 'ckpt' / 'g' / 'results.csv')
    for run, score in enumerate([93.5936, 93.5936, 76.0454]):
        table.add({'task': 'STS-B', 'run': run, 'seed': run, 'score': score, 'settings': 'x'})
    sweep.write_summary(cfg, table)
    text = (tmp_path / 'ckpt' / 'g' / 'README.md').read_text(encoding='utf-8')
    [result] = metadata(text)['model-index'][0]['results']
    assert {m['name']: m['value'] for m in result['metrics']} == {
        'spearman (median of 3 runs)': 93.5936, 'spearman (mean of 3 runs)': 87.7442, 'spearman (best of 3 runs)': 93.5936}
    assert 'value: 87.7442\n' in text


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
    # R21a-3: no GLUE task ran, so no GLUE data is named (before: "GLUE data: demo (a task file names its own)")
    text = (tmp_path / 'ckpt' / 'files' / 'README.md').read_text(encoding='utf-8')
    assert 'GLUE' not in text.split('## Dev scores')[0] and 'Tasks: ner, squad, each read from its task file.' in text


def test_the_card_of_a_job_from_an_intermediate_checkpoint_says_the_step_of_its_pretraining(tmp_path, tmp_path_factory):
    """R21a-3: fine-tuned from pretrain.py's `_25%.pth`, the card named the file only, not that its pretraining
    was at step 5 of 20; the step and the steps are those the checkpoint records, whatever its name says."""
    from tests.support.notebook_runs import tiny_pretraining
    checkpoint = Path(tiny_pretraining(tmp_path_factory)['checkpoint']).with_name('tiny_11081_25%.pth')
    renamed = tmp_path / 'mine.pth'
    renamed.write_bytes(checkpoint.read_bytes())
    task = write_demo_tasks(tmp_path / 'tasks', sizes={'train': 8, 'dev': 4, 'test': 4})[1]
    cfg = job(tmp_path, 'demo', tasks=['RTE', str(task)], runs=1, group='g', model=str(renamed))
    table = ResultsTable(tmp_path / 'ckpt' / 'g' / 'results.csv')
    for name in ('RTE', 'ner'):
        table.add({'task': name, 'run': 0, 'seed': 0, 'score': 50.0, 'settings': 'x', 'steps': 4,
                   'checkpoint': str(tmp_path / 'ckpt' / 'g' / f'{name}_0.pth')})
    sweep.write_summary(cfg, table)
    text = (tmp_path / 'ckpt' / 'g' / 'README.md').read_text(encoding='utf-8')
    assert f"fine-tuned from `{renamed}` (pretrained to step 5 of 20, a checkpoint of pretrain.py): 1 run(s)" in text
    assert 'Tasks: RTE, ner; GLUE data: demo (a task file names its own).' in text


def settings_table(text: str) -> dict:
    "The card's 'Each task's settings' table as {(task, key): (value, from)}."
    section = text.split("## Each task's settings\n\n", 1)[1].split('\n## ')[0]
    cells = [[c.strip() for c in line.strip('|').split('|')] for line in section.splitlines() if line.startswith('| ')]
    return {(task, key.strip('`')): (value, source) for task, key, value, source in cells[1:]}


def two_jobs(tmp_path, glue_dir, tiny) -> tuple:
    """RTE fine-tuned on one GLUE folder with its own lr and epochs (task_overrides), then MRPC by a second job on
    another folder; the second job's config, the other folder and the card's path."""
    from electra.finetuning.tasks.glue.demo import write_demo_glue
    from electra.finetuning.tasks.glue.sources import open_source
    model, tok = tiny
    other = write_demo_glue(tmp_path / 'other', sizes={'train': 16, 'dev': 8, 'test': 8}, seed=1)
    first = job(tmp_path, glue_dir, tasks=['RTE'], predict=False, save_pretrained='none',
                task_overrides={'RTE': {'lr': 2e-4, 'epochs': 2}})
    sweep.write_summary(first, sweep.run_sweep(first, model, tok, open_source(str(glue_dir)), log=lambda s: None))
    second = job(tmp_path, other, tasks=['MRPC'], predict=False, save_pretrained='none')
    sweep.write_summary(second, sweep.run_sweep(second, model, tok, open_source(str(other)), log=lambda s: None))
    return second, other, tmp_path / 'ckpt' / 't' / 'README.md'


@pytest.mark.usefixtures('one_thread')
def test_a_group_of_two_jobs_on_other_data_cards_each_task_with_the_data_its_rows_were_fine_tuned_on(tmp_path, glue_dir,
                                                                                                       tiny):
    """The second card names RTE's data as its rows record it (not the second job's), in the model-index and the
    text; rows of a table of an earlier version (no `data` column) are said not to tell, MRPC's taken as this job's."""
    second, other, card = two_jobs(tmp_path, glue_dir, tiny)
    text = card.read_text(encoding='utf-8')
    found = {r['task']['name']: r['dataset'] for r in metadata(text)['model-index'][0]['results']}
    assert {t: (d['type'], d['name'], d['config']) for t, d in found.items()} == {
        'RTE': (str(glue_dir), f'GLUE RTE ({glue_dir})', 'rte'), 'MRPC': (str(other), f'GLUE MRPC ({other})', 'mrpc')}
    assert f"from earlier jobs (their model and settings in their rows of `results.csv`, `model_fingerprint` and " \
           f"`settings`), each with the data its runs were fine-tuned on: RTE ({glue_dir})." in text
    rows = pd.read_csv(card.parent / 'results.csv')
    assert list(zip(rows['task'], rows['data'])) == [('MRPC', str(other)), ('RTE', str(glue_dir))]
    rows.drop(columns='data').to_csv(card.parent / 'results.csv', index=False)
    sweep.write_summary(second, ResultsTable(card.parent / 'results.csv'))
    text = card.read_text(encoding='utf-8')
    found = {r['task']['name']: r['dataset'] for r in metadata(text)['model-index'][0]['results']}
    assert (found['RTE']['type'], found['RTE']['name']) == ('unknown', 'GLUE RTE (data not recorded in its rows)')
    assert found['MRPC']['type'] == str(other)
    assert 'fine-tuned on: RTE (data not recorded in its rows).' in text
    # the second job again: MRPC's row, reused (its data's bytes are the job's), gets the name of the job's data
    from electra.finetuning.tasks.glue.sources import open_source
    sweep.run_sweep(second, *tiny, open_source(str(other)), log=lambda s: None)
    again = pd.read_csv(card.parent / 'results.csv')
    assert list(zip(again['task'], again['data'].fillna(''))) == [('MRPC', str(other)), ('RTE', '')]
    assert list(again['finished_at']) == list(rows['finished_at'])  # reused, not fine-tuned again


@pytest.mark.usefixtures('one_thread')
def test_a_group_of_two_jobs_lists_the_values_an_earlier_job_s_task_used_from_its_rows(tmp_path, glue_dir, tiny):
    """RTE's lr and epochs of the first job (task_overrides), not the second job's config shown, are in the second
    card's 'Each task's settings', from its rows; rows of an earlier version (settings not recorded) are said."""
    second, _, card = two_jobs(tmp_path, glue_dir, tiny)
    text = card.read_text(encoding='utf-8')
    assert settings_table(text) == {('RTE', 'lr'): ('0.0002', 'its rows of `results.csv` (an earlier job)'),
                                    ('RTE', 'epochs'): ('2', 'its rows of `results.csv` (an earlier job)')}
    shown = yaml.safe_load(re.search(r'```yaml\n(.*?)\n```', text, re.S)[1])
    assert (shown['lr'], shown['epochs'], shown['task_overrides']) == (3e-4, 1, {})
    rows = pd.read_csv(card.parent / 'results.csv', dtype={'settings': str})
    rows.loc[rows['task'] == 'RTE', 'settings'] = '5d41402abc4b2a76'  # a hash of them, as an earlier version wrote
    rows.to_csv(card.parent / 'results.csv', index=False)
    sweep.write_summary(second, ResultsTable(card.parent / 'results.csv'))
    assert settings_table(card.read_text(encoding='utf-8')) == {
        ('RTE', '–'): ('not recorded (rows of an earlier version)', 'its rows of `results.csv` (an earlier job)')}


def test_an_earlier_task_s_runs_on_other_data_and_values_are_each_named(tmp_path):
    """RTE's two runs by two earlier jobs, one on the demo data at lr 2e-4, one on a folder at lr 1e-4 with no record
    of `loss_reduction` (a key recorded since): the card claims neither data for both, and lists each run's values."""
    import json
    from electra.finetuning.inputs import as_read_back
    from electra.config.values import config_to_dict
    from electra.config.finetune import RESULT_KEYS
    cfg = job(tmp_path, 'hub', tasks=['MRPC'], runs=1, group='g')
    base = {k: v for k, v in as_read_back(config_to_dict(cfg)).items() if k in RESULT_KEYS}
    table = ResultsTable(tmp_path / 'ckpt' / 'g' / 'results.csv')
    for run, (data, run_values) in enumerate([('demo', {**base, 'lr': 2e-4}),
                                              ('/data/glue', {k: v for k, v in {**base, 'lr': 1e-4}.items()
                                                              if k != 'loss_reduction'})]):
        settings = json.dumps({'data': {}, 'task': {}, 'run': {**run_values, 'double_unordered': False}})
        table.add({'task': 'RTE', 'run': run, 'seed': run, 'score': 50.0 + run, 'settings': settings, 'data': data,
                   'steps': 4, 'checkpoint': str(tmp_path / 'ckpt' / 'g' / f'RTE_{run}.pth')})
    table.add({'task': 'MRPC', 'run': 0, 'seed': 0, 'score': 70.0, 'settings': 'x', 'steps': 4,
               'checkpoint': str(tmp_path / 'ckpt' / 'g' / 'MRPC_0.pth')})
    sweep.write_summary(cfg, table)
    text = (tmp_path / 'ckpt' / 'g' / 'README.md').read_text(encoding='utf-8')
    meta = metadata(text)
    found = {r['task']['name']: r['dataset'] for r in meta['model-index'][0]['results']}
    assert (found['RTE']['type'], found['RTE']['name']) == ('/data/glue + demo',
                                                            "GLUE RTE (/data/glue; the project's demo data)")
    assert (found['MRPC']['type'], found['MRPC']['name']) == ('nyu-mll/glue', 'GLUE MRPC')  # this job's: the hub
    assert meta['datasets'] == ['nyu-mll/glue']
    assert "fine-tuned on: RTE (/data/glue; the project's demo data)." in text
    rows = 'its rows of `results.csv` (an earlier job)'
    assert settings_table(text) == {('RTE', 'lr'): ('0.0002 (run 0); 0.0001 (run 1)', rows),
                                    ('RTE', 'loss_reduction'): ('sum (run 0); not recorded (run 1)', rows)}
