"""electra/finetuning/sweep.py: the sweep over all tasks, resume, the ensemble, the real STS-B."""
from __future__ import annotations

import copy
import csv
import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers

from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.data.tokenizer import tokenizer_identity
from electra.finetuning import export, learner, loading, runs, sweep
from electra.finetuning.inputs import recorded_inputs
from electra.finetuning.results import ResultsTable
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.submission import SUBMISSION_FILES
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.metrics import dev_metric_names
from electra.pretrained.export import model_fingerprint
from electra.runtime.errors import TrainingStopped
from tests.support.config import refused
from tests.support.finetune import job
from tests.support.tokenizers import reordered

pytestmark = pytest.mark.usefixtures('one_thread')

REPO = Path(__file__).resolve().parents[2]
REAL_GLUE = REPO.parent / 'shared' / 'data' / 'glue'
DEMO_CHECKPOINT = REPO / 'checkpoints' / 'pretrain' / 'demo_11081_100%.pth'


def parse(path):
    with open(path, newline='', encoding='utf-8') as f: rows = list(csv.reader(f, delimiter='\t', quoting=csv.QUOTE_NONE))
    return rows[0], rows[1:]


def test_sweep_all_tasks_gives_the_11_files_and_resumes(tmp_path, glue_dir, tiny):
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, runs=1, seed=5)
    src, lines = open_source(cfg.data), []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    df = results.df
    assert sorted(df['task']) == sorted(n for n in TASKS if n != 'AX') and set(df['seed']) == {5}
    table = (tmp_path / 'ckpt/t/results.csv').read_text().splitlines()
    assert len(table) == 10 and table[0].startswith('task,run,seed,score,mcc,accuracy,f1,pearson,spearman,accuracy_mm')
    for name in df['task']: assert (tmp_path / f'ckpt/t/{name}_0.pth').is_file()
    mnli = results.get('MNLI', 0)
    assert mnli['score'] == mnli['accuracy'] and 0 <= mnli['accuracy_mm'] <= 100
    assert any(l.startswith('QQP: 30 training examples') for l in lines)  # the two empty-question rows dropped
    assert any(l.startswith('MRPC: 64 training examples (both segment orders)') for l in lines)

    text = sweep.write_summary(cfg, results)
    assert '| CoLA | mcc | 1 |' in text and 'GLUE score (8 of 8 tasks)' in text
    assert (tmp_path / 'ckpt/t/summary.md').is_file() and (tmp_path / 'ckpt/t/summary.png').stat().st_size > 1000

    files = sweep.write_test_predictions(cfg, results, tok, src, log=lines.append)
    out = tmp_path / 'out/t'
    assert sorted(p.name for p in files) == sorted(SUBMISSION_FILES + ['glue_submission.zip'])
    for name in SUBMISSION_FILES:
        header, rows = parse(out / name)
        assert header == ['index', 'prediction'] and len(rows) == 12 and [int(r[0]) for r in rows] == list(range(12))
    assert {r[1] for r in parse(out / 'AX.tsv')[1]} <= {'entailment', 'neutral', 'contradiction'}
    assert all(0 <= float(r[1]) <= 5 for r in parse(out / 'STS-B.tsv')[1])
    with zipfile.ZipFile(out / 'glue_submission.zip') as z: assert sorted(z.namelist()) == sorted(SUBMISSION_FILES)

    # run again: every run is found finished, nothing is trained; a run of changed settings is done again, said why
    again = []
    sweep.run_sweep(cfg, model, tok, src, log=again.append)
    assert again == [f'{n}: all 1 runs finished before; skipped' for n in TASKS if n != 'AX']
    again = []
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['CoLA'], runs=1, seed=5, lr=1e-4), model, tok, src, log=again.append)
    assert again[0] == ('CoLA run 0: since its row was written, lr changed (was 0.0003, now 0.0001); fine-tuning it '
                        'again, replacing its row and checkpoint')
    assert again[1].endswith('1 of 1 runs to do') and ResultsTable(tmp_path / 'ckpt/t/results.csv').df['task'].tolist() == \
        [n for n in TASKS if n != 'AX']  # the other tasks' rows kept


def test_interrupted_sweep_resumes_and_ensemble_averages_logits(tmp_path, glue_dir, tiny):
    model, tok = tiny
    src = open_source(str(glue_dir))
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], runs=1), model, tok, src, log=lambda s: None)
    first = (tmp_path / 'ckpt/t/RTE_0.pth').stat().st_mtime_ns
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=3, ensemble_k=2)  # more runs: only runs 1 and 2 are trained
    lines = []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert (tmp_path / 'ckpt/t/RTE_0.pth').stat().st_mtime_ns == first and '1 of 3 runs' not in lines[0]
    assert lines[0].endswith('2 of 3 runs to do') and results.task_rows('RTE')['run'].tolist() == [0, 1, 2]
    sweep.write_test_predictions(cfg, results, tok, src, log=lines.append)
    assert 'ensemble dev accuracy' in lines[-1]
    # reference: the mean of the two best runs' logits, argmax, as label strings
    top = results.task_rows('RTE').sort_values(['score', 'run'], ascending=[False, True]).head(2)
    from electra.finetuning.tasks.encoding import encode, make_loader
    enc = encode(src.load(TASKS['RTE'], 'test'), tok, 64)
    logits = [learner.predict_outputs(loading.load_finetuned(p), make_loader(enc, 5, False, 0)) for p in top['checkpoint']]
    expected = [TASKS['RTE'].labels[i] for i in np.mean(logits, axis=0).argmax(-1)]
    assert [r[1] for r in parse(tmp_path / 'out/t/RTE.tsv')[1]] == expected


def finetune_from(cfg, lines):
    "What finetune.py does: the model loaded from `cfg.model`, then the sweep."
    model, tok = loading.load_pretrained(cfg.model)
    return sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)


def mask_row(weights: dict, tok) -> torch.Tensor:
    "The [MASK] token's embedding: no fine-tuning input holds it, so it keeps the pretrained value (zero gradient)."
    return weights['electra.embeddings.word_embeddings.weight'][tok.mask_token_id]


def test_a_model_written_again_at_its_path_is_fine_tuned_again_and_an_unchanged_one_is_reused(tmp_path, glue_dir, tiny):
    model, tok = tiny
    path = tmp_path / 'model'
    model.save_pretrained(path)
    tok.save_pretrained(path)
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=2, model=str(path))
    finetune_from(cfg, [])
    assert torch.equal(mask_row(torch.load(tmp_path / 'ckpt/t/RTE_1.pth')['model'], tok), mask_row(model.state_dict(), tok))
    # pretrained again (pretrain.py --overwrite): other weights at the same path
    other = loading.load_pretrained(str(path))[0]
    with torch.no_grad():
        for w in other.parameters(): w.mul_(0.5)
    other.save_pretrained(path)
    lines = []
    results = finetune_from(cfg, lines)
    assert lines[0] == (f'RTE runs 0, 1: since their rows were written, the model changed ({path}: its model.safetensors '
                        'differs); '
                        'fine-tuning them again, replacing their rows and checkpoints')
    assert lines[1].endswith('2 of 2 runs to do')
    for i in range(2):  # the new runs start from the new weights
        ckpt = torch.load(tmp_path / f'ckpt/t/RTE_{i}.pth')
        assert torch.equal(mask_row(ckpt['model'], tok), mask_row(other.state_dict(), tok))
    assert results.task_rows('RTE')['run'].tolist() == [0, 1]
    # the same model at another path (a copy): what it is counts, not where
    copy = tmp_path / 'copy'
    shutil.copytree(path, copy)
    lines = []
    finetune_from(job(tmp_path, glue_dir, tasks=['RTE'], runs=2, model=str(copy)), lines)
    assert lines == ['RTE: all 2 runs finished before; skipped']


TASK_FILE = 'train: train.tsv\ndev: dev.tsv\ntext: [sentence1, sentence2]\nlabel: label\n'


def edit_line(path: Path, k: int, edit) -> None:
    "Line k of a text file replaced by `edit(line)`."
    lines = path.read_text().splitlines()
    lines[k] = edit(lines[k])
    path.write_text('\n'.join(lines) + '\n')


def test_each_input_of_a_finished_run_edited_does_it_again_and_an_unchanged_rerun_reuses_it(tmp_path, glue_dir, tiny,
                                                                                            monkeypatch):
    """A task from files (RTE's tiny files), 1 run. Its row is reused only while the model and the data files (by
    content), the task file's settings (not its formatting) and the run's settings are the ones it records; each edit
    trains it again, saying in one line what changed. (What is matched is the point: a run is its untrained model.)"""
    model, tok = tiny
    trained = []

    def untrained(data, task_cfg, body, seed, *args, **kwargs):
        trained.append(seed)
        return data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]
    monkeypatch.setattr(runs, 'train_run', untrained)
    path, task = tmp_path / 'model', shutil.copytree(glue_dir / 'RTE', tmp_path / 'task')
    model.save_pretrained(path)
    tok.save_pretrained(path)
    (task / 'entail.yaml').write_text(TASK_FILE)
    now = {'model': model}  # the weights at `path` (not read back each time: a tenth of a second a read)

    def again(task_file=task / 'entail.yaml', **kw) -> list[str]:
        lines, cfg = [], job(tmp_path, glue_dir, tasks=[str(task_file)], model=str(path), **kw)
        sweep.run_sweep(cfg, now['model'], tok, open_source(cfg.data), log=lines.append)
        return lines[:next((k for k, line in enumerate(lines) if line.endswith('runs to do')), len(lines))]  # before training
    redone = 'since its row was written, {}; fine-tuning it again, replacing its row and checkpoint'.format
    again()
    assert again() == ['entail: all 1 runs finished before; skipped']
    # formatting only: comments, key order, a block list; and the same files and task file elsewhere
    (task / 'entail.yaml').write_text('# RTE as files\nlabel: label   # the class\ntext:\n  - sentence1\n  - sentence2\n'
                                      'dev: dev.tsv\ntrain: train.tsv\n')
    moved = shutil.copytree(task, tmp_path / 'moved')
    assert again() == again(moved / 'entail.yaml') == ['entail: all 1 runs finished before; skipped']
    edit_line(task / 'train.tsv', 1, lambda line: line.replace('painter', 'sailor'))
    assert again() == ['entail run 0: ' + redone(f"the train file changed ({task / 'train.tsv'})")]
    other_label = {'entailment': 'not_entailment', 'not_entailment': 'entailment'}
    edit_line(task / 'dev.tsv', 2, lambda line: '\t'.join([*line.split('\t')[:-1], other_label[line.split('\t')[-1]]]))
    assert again() == ['entail run 0: ' + redone(f"the dev file changed ({task / 'dev.tsv'})")]
    (task / 'entail.yaml').write_text(TASK_FILE + 'metrics: [accuracy, f1]\n')
    assert again() == ['entail run 0: ' + redone("the task file's metrics changed (was ['accuracy'], now ['accuracy', 'f1'])")]
    assert again(epochs=2) == ['entail run 0: ' + redone('epochs changed (was 1, now 2)')]
    first = torch.load(tmp_path / 'ckpt/t/entail_0.pth')['model']
    other = now['model'] = copy.deepcopy(model)
    with torch.no_grad():
        for w in other.parameters(): w.mul_(0.5)
    other.save_pretrained(path)  # pretrained again at the same path
    assert again(epochs=2) == ['entail run 0: ' + redone(f'the model changed ({path}: its model.safetensors differs)')]
    assert again(epochs=2) == ['entail: all 1 runs finished before; skipped']
    # its config.json alone edited, the weights byte-identical: said as such, not as "other weights"
    config = json.loads((path / 'config.json').read_text())
    (path / 'config.json').write_text(json.dumps({**config, 'hidden_dropout_prob': 0.0}))
    (path / 'added.txt').write_text('a file from_pretrained does not read is still a file of the folder')
    assert again(epochs=2) == ['entail run 0: ' + redone(f'the model changed ({path}: its config.json differs; '
                                                         'added.txt added)')]
    # a row of an earlier version records the fingerprint alone: the change is said without naming a file
    table = tmp_path / 'ckpt/t/results.csv'
    old = pd.read_csv(table, dtype=str)
    old.loc[0, 'settings'] = json.dumps({k: v for k, v in json.loads(old.loc[0, 'settings']).items() if k != 'model_files'})
    old.to_csv(table, index=False)
    (path / 'added.txt').unlink()
    assert again(epochs=2) == ['entail run 0: ' + redone(f'the model changed ({path} holds other files than its row '
                                                         'records)')]
    last = torch.load(tmp_path / 'ckpt/t/entail_0.pth')['model']
    (tmp_path / 'ckpt/t/entail_0.pth').unlink()
    assert again(epochs=2) == [f"entail run 0: its checkpoint is missing from {tmp_path / 'ckpt/t'}; fine-tuning it again, "
                               'replacing its row and checkpoint']
    assert len(trained) == 9  # the first run, one for each edit, one for the checkpoint deleted
    results = ResultsTable(tmp_path / 'ckpt/t/results.csv')
    assert len(results.df) == 1 and results.get('entail', 0)['steps'] == 2  # the last run's row only: 2 epochs of 1 step
    # the run of the new model started from its weights
    assert torch.equal(mask_row(last, tok), mask_row(other.state_dict(), tok))
    assert not torch.equal(mask_row(first, tok), mask_row(last, tok))


def test_a_finished_run_padded_to_other_buckets_or_compiled_otherwise_is_done_again(tmp_path, glue_dir, tiny,
                                                                                      monkeypatch):
    """`length_buckets` and `compile` change a run's result with dropout on (the masks follow the padded shape;
    inductor draws its own): a row records both, so another value trains the run again, saying so, and a row of an
    earlier version that records neither is done again as such a row."""
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))

    def again(**kw) -> list[str]:
        lines, cfg = [], job(tmp_path, glue_dir, tasks=['RTE'], **kw)
        sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)
        return lines[:next((k for k, line in enumerate(lines) if line.endswith('runs to do')), len(lines))]
    redone = 'RTE run 0: since its row was written, {}; fine-tuning it again, replacing its row and checkpoint'.format
    again()
    assert again(length_buckets=[64]) == [redone('length_buckets changed (was [], now [64])')]
    assert again(length_buckets=[64]) == ['RTE: all 1 runs finished before; skipped']
    assert again(length_buckets=[64], compile=True) == [redone('compile changed (was False, now True)')]
    table = tmp_path / 'ckpt/t/results.csv'
    old = pd.read_csv(table, dtype=str)
    settings = json.loads(old.loc[0, 'settings'])
    for key in ('length_buckets', 'compile'): del settings['run'][key]
    old.loc[0, 'settings'] = json.dumps(settings)
    old.to_csv(table, index=False)  # a row written before these keys were recorded
    assert again(length_buckets=[64], compile=True) == [
        'RTE run 0: its row does not record length_buckets or compile (a results table of an earlier version); '
        'fine-tuning it again, replacing its row and checkpoint']


def test_stsb_scale_changed_does_again_only_the_runs_it_scales(tmp_path, glue_dir, tiny, monkeypatch):
    """`stsb_scale` scales the targets of a regression task without its own `target_scale` (STS-B): changed, every
    task of the group was fine-tuned again, "since its row was written, stsb_scale changed", to bit-identical results
    for the tasks it never touches (R20a-9). Now only the runs it scales are done again; the rows keep recording it."""
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))

    def again(**kw) -> list[str]:
        lines, cfg = [], job(tmp_path, glue_dir, tasks=['RTE', 'STS-B'], **kw)
        sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)
        return [line for line in lines if 'since its row was written' in line or 'finished before' in line]
    again()
    assert again(stsb_scale=3.0) == ['RTE: all 1 runs finished before; skipped',
                                     'STS-B run 0: since its row was written, stsb_scale changed (was 5.0, now 3.0); '
                                     'fine-tuning it again, replacing its row and checkpoint']
    assert again(stsb_scale=3.0) == ['RTE: all 1 runs finished before; skipped', 'STS-B: all 1 runs finished before; skipped']


def test_a_sweep_run_from_python_keeps_its_lines_in_the_groups_log(tmp_path, glue_dir, tiny, monkeypatch):
    """run_sweep from a notebook or a plain script (the streams not the job's) wrote no log.txt, though its help says
    the job's output goes there: why a run was done again was only in the notebook's output (R20a-5). Its own lines
    are appended to the group's log.txt, each job under a header line."""
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))
    said = []
    for lr in (1e-3, 2e-3):
        lines, cfg = [], job(tmp_path, glue_dir, tasks=['RTE'], lr=lr)
        sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)
        said.append(lines)
    log = (tmp_path / 'ckpt' / 't' / 'log.txt').read_text(encoding='utf-8').splitlines()
    heads = [i for i, line in enumerate(log) if line.startswith('=== ')]
    assert len(heads) == 2 and heads[0] == 0 and all('(run_sweep from Python)' in log[i] for i in heads)
    assert log[1:heads[1]] == said[0] and log[heads[1] + 1:] == said[1]
    assert any('lr changed (was 0.001, now 0.002)' in line for line in said[1])


def test_a_task_whose_every_run_is_undefined_says_why_it_has_no_transformers_folder(tmp_path, glue_dir, tiny,
                                                                                    monkeypatch):
    """A constant dev target: every run's score undefined, none picked, so no `<task>_<i>/` folder, without a word
    where the other tasks' lines say theirs (R20a-8). One line says why, and that the weights stay."""
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg),
        [{m: (float('nan') if data.task.name == 'STS-B' else 50.0) for m in dev_metric_names(data.task)}]))
    lines, cfg = [], job(tmp_path, glue_dir, tasks=['RTE', 'STS-B'], runs=2)
    sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)
    group = tmp_path / 'ckpt' / 't'
    assert [line for line in lines if 'transformers folder' in line] == [
        f"RTE run 0: also a transformers folder, {group / 'RTE_0'}",
        "STS-B: no transformers folder: the dev score of each of its 2 runs is undefined, so none is picked; their "
        "weights stay STS-B_<i>.pth (save_pretrained all writes a folder for every run)"]
    assert not (group / 'STS-B_0').exists() and (group / 'STS-B_1.pth').is_file()


def test_a_job_of_fewer_runs_names_the_rows_its_summary_leaves_out(tmp_path, glue_dir, tiny, monkeypatch):
    """`--runs 2` then `--runs 1` on one group: summary.md gave RTE over 1 run without a word of run 1, still in
    results.csv (only a later job of other tasks named it, R21a-2). The job's own summary names it."""
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))
    for n in (2, 1):
        cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=n)
        results = sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)
    text = sweep.write_summary(cfg, results)
    assert sorted(pd.read_csv(tmp_path / 'ckpt' / 't' / 'results.csv')['run']) == [0, 1]
    assert ("Left out as outside this job's 1 run(s) (kept in results.csv for a job that asks for them again): RTE "
            "(run 1).") in text


def test_a_task_whose_training_text_is_mostly_unknown_to_the_vocabulary_is_said_once(tmp_path, glue_dir, tiny,
                                                                                       monkeypatch):
    """RTE's tiny files as a task file, their letters written in Cyrillic: most of the text is [UNK] to the tiny
    model's vocabulary, and the job says so in one line for each of its files before its runs; RTE itself, in English,
    not."""
    from electra.finetuning.tasks.encoding import unknown_share_warning
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))
    task = shutil.copytree(glue_dir / 'RTE', tmp_path / 'task')
    cyrillic = str.maketrans('aeiopckxyABEHKMOPCTX', 'аеіорсkхуАВЕНКМОРСТХ')
    for name in ('train.tsv', 'dev.tsv'):  # the texts in Cyrillic, the header and the labels as they are
        head, *rows = [line.split('\t') for line in (task / name).read_text().splitlines()]
        rows = [[*(c.translate(cyrillic) for c in r[:-1]), r[-1]] for r in rows]
        (task / name).write_text(''.join('\t'.join(r) + '\n' for r in [head, *rows]))
    (task / 'ru.yaml').write_text(TASK_FILE)
    lines, cfg = [], job(tmp_path, glue_dir, tasks=['RTE', str(task / 'ru.yaml')])
    sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)
    said = [line for line in lines if line.startswith('warning: ')]
    assert len(said) == 2 and said[0].startswith('warning: ru: ') and ' are [UNK] (e.g. ' in said[0]
    for line, name in zip(said, ('train', 'dev')):  # the dev file is in Cyrillic too: said in a line of its own
        rows = [l.split('\t') for l in (task / f'{name}.tsv').read_text().splitlines()[1:]]
        assert line == unknown_share_warning('ru', [r[1] for r in rows] + [r[2] for r in rows], tok, name,
                                             str(task / f'{name}.tsv'))
    share = float(said[0].split('% of')[0].split()[-1])
    assert share > 50 and lines.index(said[0]) < next(k for k, l in enumerate(lines) if l.startswith('ru: '))


def test_a_dev_and_a_test_file_mostly_unknown_to_the_vocabulary_are_said_each_naming_its_split_and_file(
        tmp_path, glue_dir, tiny, monkeypatch):
    """RTE's tiny files as a task file, the dev and test texts with the Latin letters of their Cyrillic look-alikes (text
    copied from web pages, OCR output): the training text is covered, but the dev scores and the test predictions are
    made of [UNK]s. One line for each, the same line as the training text's, naming its split and file."""
    from electra.finetuning.tasks.encoding import unknown_share_warning
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))
    task = shutil.copytree(glue_dir / 'RTE', tmp_path / 'task')
    cyrillic, texts = str.maketrans('aeopc', 'аеорс'), {}
    for name in ('dev.tsv', 'test.tsv'):  # index, sentence1, sentence2 (, label): the two texts changed
        head, *rows = [line.split('\t') for line in (task / name).read_text().splitlines()]
        rows = [[r[0], r[1].translate(cyrillic), r[2].translate(cyrillic), *r[3:]] for r in rows]
        (task / name).write_text(''.join('\t'.join(r) + '\n' for r in [head, *rows]))
        texts[name] = [r[1] for r in rows] + [r[2] for r in rows]
    (task / 'look.yaml').write_text(TASK_FILE + 'test: test.tsv\nid: index\n')
    lines, cfg = [], job(tmp_path, glue_dir, tasks=[str(task / 'look.yaml')])
    sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lines.append)
    said = [line for line in lines if line.startswith('warning: ')]
    assert said == [unknown_share_warning('look', texts['dev.tsv'], tok, 'dev', str(task / 'dev.tsv')),
                    unknown_share_warning('look', texts['test.tsv'], tok, 'test', str(task / 'test.tsv'))]
    assert said[0].startswith('warning: look: ') and f'of its dev file {task / "dev.tsv"} are [UNK] (e.g. ' in said[0]
    assert f'of its test file {task / "test.tsv"} are [UNK] (e.g. ' in said[1]


def test_rows_of_a_table_written_before_models_were_fingerprinted_are_done_again(tmp_path, glue_dir, tiny):
    "Such a row does not say which model it came from: it is trained again rather than trusted."
    model, tok = tiny
    path = tmp_path / 'model'
    model.save_pretrained(path)
    tok.save_pretrained(path)
    cfg = job(tmp_path, glue_dir, tasks=['MRPC', 'RTE'], runs=1, model=str(path))
    finetune_from(cfg, [])
    table = tmp_path / 'ckpt/t/results.csv'
    old = pd.read_csv(table, dtype=str)
    old = old.drop(columns=[c for c in ('model_fingerprint',) if c in old]).assign(settings='0123456789ab')
    old.to_csv(table, index=False)  # the old format: no fingerprint, settings hashed another way
    lines = []
    results = finetune_from(cfg, lines)
    assert lines[0] == ('MRPC run 0: its row does not record the model or the data and settings (a results table of an '
                        'earlier version); fine-tuning it again, replacing its row and checkpoint')
    assert lines[1].endswith('1 of 1 runs to do') and any(l.startswith('RTE run 0: its row does not record') for l in lines)
    assert results.df['model_fingerprint'].notna().all()
    again = []
    finetune_from(cfg, again)
    assert again == ['MRPC: all 1 runs finished before; skipped', 'RTE: all 1 runs finished before; skipped']


def test_ctrl_c_in_a_sweep_keeps_the_finished_runs_and_says_how_to_go_on(tmp_path, glue_dir, tiny, monkeypatch):
    "A Ctrl-C in run 1 of RTE stops the sweep with one message; run 0 stays in the table and is not trained again."
    model, tok = tiny
    src, real, calls = open_source(str(glue_dir)), learner.train_run, []

    def interrupted_second_run(*args, **kwargs):
        calls.append(args[3])  # the seed
        if len(calls) == 2: raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(runs, 'train_run', interrupted_second_run)
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=3)
    with pytest.raises(TrainingStopped, match=r'by Ctrl-C during RTE run 1; the 1 finished run\(s\) are kept in '
                                              rf'{re.escape(str(tmp_path / "ckpt/t/results.csv"))}\. Run the same'):
        sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    assert ResultsTable(tmp_path / 'ckpt/t/results.csv').df['run'].tolist() == [0]
    lines = []
    sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert lines[0].endswith('2 of 3 runs to do') and calls[2:] == cfg.seed_list[1:]


@pytest.mark.skipif(not (REAL_GLUE / 'STS-B' / 'test.tsv').is_file(), reason='../shared/data/glue/STS-B is absent')
def test_real_sts_b_two_short_runs(tmp_path, tiny_dir):
    "From the demo checkpoint when it exists (else the tiny model): 2 short runs on the real STS-B."
    source = str(DEMO_CHECKPOINT) if DEMO_CHECKPOINT.is_file() else str(tiny_dir)
    model, tok = loading.load_pretrained(source)
    cfg = job(tmp_path, REAL_GLUE, tasks=['STS-B'], runs=2, max_train_samples=64, epochs=1, model=source, batch_size=16)
    src = open_source(cfg.data)
    results = sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    rows = results.task_rows('STS-B')
    assert rows['run'].tolist() == [0, 1] and rows['seed'].tolist() == [0, 1]
    assert (rows['score'] == rows['spearman']).all()
    # each reported score is the saved run's own: its dev predictions, scored by scipy, give the table's numbers
    import scipy.stats

    from electra.finetuning.tasks.encoding import make_loader
    dev = ClassificationTask(TASKS['STS-B'], src).prepare(cfg.for_task('STS-B'), tok, cfg.cache_dir, True).dev['dev']
    for r in rows.to_dict('records'):
        pred = learner.predict_outputs(loading.load_finetuned(r['checkpoint']), make_loader(dev, cfg.eval_batch_size, False, 0))
        # spearman by ranks: the run read back has target_scale folded into its weights (on_task_scale), whose last-bit
        # rounding can reorder the near-ties of a short run's near-constant scores (here |spearman| < 1%), so 0.01 points
        assert r['spearman'] == pytest.approx(100 * scipy.stats.spearmanr(pred, dev.label)[0], rel=1e-4, abs=0.01)
        assert r['pearson'] == pytest.approx(100 * scipy.stats.pearsonr(pred, dev.label)[0], rel=1e-4)
    summary = sweep.write_summary(cfg, results)
    assert '| STS-B | spearman | 2 |' in summary and (tmp_path / 'ckpt/t/summary.md').is_file()
    sweep.write_test_predictions(cfg, results, tok, src, log=lambda s: None)
    header, rows = parse(tmp_path / 'out/t/STS-B.tsv')
    test_index = [r[0] for r in parse(REAL_GLUE / 'STS-B' / 'test.tsv')[1]]
    assert header == ['index', 'prediction'] and len(rows) == 1379 and [r[0] for r in rows] == test_index
    assert all(0.0 <= float(r[1]) <= 5.0 for r in rows)


def test_demo_data_is_written_once_and_doubling_follows_the_overrides(tmp_path):
    src = sweep.resolve_data('demo', tmp_path)
    stamp = (tmp_path / 'demo_glue/CoLA/train.tsv').stat().st_mtime_ns
    assert src.description == f'GLUE TSV files in {tmp_path / "demo_glue"}'
    assert len(src.load(TASKS['MNLI'], 'train')) == 400 and len(src.load(TASKS['AX'], 'test')) == 100
    sweep.resolve_data('demo', tmp_path)
    assert (tmp_path / 'demo_glue/CoLA/train.tsv').stat().st_mtime_ns == stamp
    cfg = config_from_dict(FinetuneConfig, {'task_overrides': {'QQP': {'double_unordered': True}, 'STS-B': {'double_unordered': False}}})
    doubled = {n: sweep._doubled(ClassificationTask(TASKS[n], None), cfg, cfg.for_task(n)) for n in ('MRPC', 'STS-B', 'QQP', 'RTE')}
    assert doubled == {'MRPC': True, 'STS-B': False, 'QQP': True, 'RTE': False}
    off = config_from_dict(FinetuneConfig, {'double_unordered': False})
    assert not sweep._doubled(ClassificationTask(TASKS['MRPC'], None), off, off.for_task('MRPC'))


def test_uncreatable_cache_dir_named():
    with pytest.raises(ConfigError, match=r"cache_dir: cannot write to '/proc/electra_cache'.*--cache_dir"):
        sweep.resolve_data('demo', '/proc/electra_cache')


@pytest.mark.parametrize('key', ['output_dir', 'test_output_dir'])
def test_an_output_folder_that_cannot_be_made_stops_the_sweep_before_any_run(tmp_path, glue_dir, tiny, monkeypatch, key):
    "Runs' weights and results (output_dir), test predictions (test_output_dir): checked before the first run, not after."
    model, tok = tiny
    blocker = tmp_path / 'a_file'
    blocker.write_text('x')

    def no_training(*args, **kwargs): raise AssertionError('a run was trained')
    monkeypatch.setattr(runs, 'train_run', no_training)
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], **{key: str(blocker / 'out')})
    with pytest.raises(ConfigError, match=rf"^{key}: cannot write to '{blocker}/out/t' \('{blocker}' is a file, not a "
                                          rf"folder\)\. Choose a writable directory with --{key}, or move that file away"):
        sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)
    if key == 'test_output_dir':  # not written without predictions: not asked for
        with pytest.raises(AssertionError, match='a run was trained'):
            sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], predict=False, **{key: str(blocker / 'out')}),
                            model, tok, open_source(cfg.data), log=lambda s: None)


@pytest.mark.parametrize('where, name', [
    ('ckpt', 'summary.md'), ('ckpt', 'summary.png'), ('ckpt', 'README.md'), ('ckpt', 'log.txt'), ('ckpt', 'RTE_0.pth'),
    ('ckpt', 'results.csv'), ('ckpt', 'job_runs.json'), ('out', 'RTE.tsv'), ('out', 'glue_submission.zip'),
    ('out', 'made_by.json')])
def test_a_folder_where_the_job_writes_a_file_stops_the_sweep_before_any_run(tmp_path, glue_dir, tiny, monkeypatch,
                                                                            where, name):
    """A folder where the job writes a file of the group (its summary, card, log, a run's weights, the table) or of its
    test folder: refused before the first run, naming it. Before: summary.md's a traceback after every run trained."""
    model, tok = tiny

    def no_training(*args, **kwargs): raise AssertionError('a run was trained')
    monkeypatch.setattr(runs, 'train_run', no_training)
    (tmp_path / where / 't' / name).mkdir(parents=True)
    key = {'ckpt': 'output_dir', 'out': 'test_output_dir'}[where]
    cfg = job(tmp_path, glue_dir, tasks=['RTE'])
    with pytest.raises(ConfigError, match=rf"^{key}: cannot write to '{tmp_path / where / 't' / name}' \(it is a "
                                          rf"folder, not a file\)\. Move that folder away, or choose another directory "
                                          rf"with --{key}\.$"):
        sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)


def test_a_file_where_a_run_s_transformers_folder_goes_stops_the_sweep_before_any_run(tmp_path, glue_dir, tiny,
                                                                                    monkeypatch):
    "Before: the run was trained before the file was met in the way of its transformers folder (written after it)."
    model, tok = tiny

    def no_training(*args, **kwargs): raise AssertionError('a run was trained')
    monkeypatch.setattr(runs, 'train_run', no_training)
    (tmp_path / 'ckpt' / 't').mkdir(parents=True)
    (blocker := tmp_path / 'ckpt' / 't' / 'RTE_0').write_text('x')
    cfg = job(tmp_path, glue_dir, tasks=['RTE'])
    with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{blocker}' \('{blocker}' is a file, not a "
                                          r"folder\)\. Choose a writable directory with --output_dir, or move that file"):
        sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)


def test_nan_predictions_never_reach_a_submission_file(tmp_path, glue_dir, tiny):
    model, tok = tiny
    src = open_source(str(glue_dir))
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=1)
    results = sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    ckpt_path = tmp_path / 'ckpt/t/RTE_0.pth'
    ckpt = torch.load(ckpt_path, weights_only=True)
    ckpt['model']['classifier.weight'][0, 0] = float('nan')   # a run that diverged
    torch.save(ckpt, ckpt_path)
    with pytest.raises(ConfigError, match=r'RTE.tsv: run 0 .* predict NaN or infinite outputs for \d+ of \d+ RTE test '
                                          r'examples; no file written\. Delete those runs. rows'):
        sweep.write_test_predictions(cfg, results, tok, src, log=lambda s: None)
    assert not (tmp_path / 'out/t/RTE.tsv').exists()


def test_a_malformed_test_file_stops_the_task_before_its_runs(tmp_path, glue_dir, tiny):
    "A test index twice (two submission rows for one example) or a ragged test row was found only after training."
    data = shutil.copytree(glue_dir / 'RTE', tmp_path / 'glue' / 'RTE')
    with open(data / 'test.tsv', encoding='utf-8') as f: lines = f.read().splitlines()
    (data / 'test.tsv').write_text('\n'.join(lines + [lines[1]]) + '\n', encoding='utf-8')  # its first example again
    cfg = job(tmp_path, tmp_path / 'glue', tasks=['RTE'], runs=1)
    with pytest.raises(ConfigError, match=rf"RTE/test.tsv line {len(lines) + 1}: index 0 is also on line 2"):
        sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=lambda s: None)
    assert not list(tmp_path.rglob('*.pth'))
    no_predictions = job(tmp_path, tmp_path / 'glue', tasks=['RTE'], runs=1, predict=False)
    sweep.run_sweep(no_predictions, *tiny, open_source(cfg.data), log=lambda s: None)  # the test file is not needed
    assert (tmp_path / 'ckpt/t/RTE_0.pth').is_file()


def test_a_glue_file_missing_is_named_before_any_run(tmp_path, glue_dir, tiny):
    "The task's files are hashed before its runs are planned: a missing one is named there, as its reader names it."
    data = shutil.copytree(glue_dir / 'RTE', tmp_path / 'glue' / 'RTE')
    (data / 'dev.tsv').unlink()
    cfg = job(tmp_path, tmp_path / 'glue', tasks=['RTE'])
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(data / 'dev.tsv'))}: file not found\. RTE needs"):
        sweep.run_sweep(cfg, *tiny, open_source(cfg.data), log=lambda s: None)
    assert not list(tmp_path.rglob('*.pth'))


def test_a_max_length_past_the_length_the_model_was_pretrained_at_is_said_in_one_line(tmp_path, glue_dir):
    """`finetune.py --max_length 128` on a model pretrained at 64 ran with status 0 and no word that positions
    64..127 were never trained. The pretraining length is in the discriminator's config (its export's config.json
    too); a fine-tuning max_length past it is said in one line naming both; within it, nothing is said."""
    from transformers import ElectraConfig
    from electra.config.pretrain import PretrainConfig
    from electra.finetuning.sweep import _check_lengths
    from electra.objective.model import discriminator_config
    discriminator_config(PretrainConfig(max_length=64), 100, 0).save_pretrained(tmp_path / 'm')
    config = ElectraConfig.from_pretrained(tmp_path / 'm')
    assert config.pretraining_max_length == 64
    said = []
    _check_lengths(job(tmp_path, glue_dir, tasks=['STS-B', 'SST-2'], max_length=64), config, said.append)
    assert said == []
    _check_lengths(job(tmp_path, glue_dir, tasks=['STS-B', 'SST-2'], max_length=128), config, said.append)
    assert said == ["warning: max_length 128 (STS-B, SST-2) is past the 64 tokens the model tiny was pretrained at: "
                    "positions 64 to 127 were never trained, so longer inputs go through untrained position "
                    "embeddings. Set max_length to at most 64 to fine-tune as it was pretrained."]


def test_a_run_fine_tuned_again_replaces_its_tensorboard_events(tmp_path, glue_dir, tiny):
    """A finished run trained again (lr changed) replaces its TensorBoard events with its row: read back, its dev
    score per epoch is the new run's alone. Before: the old run's points stayed beside the new ones (steps 1, 2 twice)."""
    from tests.test_trackers import tensorboard_scalars
    model, tok = tiny
    src = open_source(str(glue_dir))
    for lr in (3e-4, 1e-4):
        cfg = job(tmp_path, glue_dir, tasks=['RTE'], epochs=2, lr=lr, logger=['tensorboard'])
        sweep.run_sweep(cfg, model, tok, src, log=lambda line: None)
    folder = tmp_path / 'ckpt/t/tensorboard/RTE_0'
    assert len(list(folder.glob('events.out.tfevents.*'))) == 1
    row = ResultsTable(tmp_path / 'ckpt/t/results.csv').get('RTE', 0)
    scores = tensorboard_scalars(folder, 'results/score')
    assert scores == [(2, f"{float(row['score']):.6g}")]
    assert [s for s, _ in tensorboard_scalars(folder, 'dev/accuracy')] == [1, 2]


def test_a_run_fine_tuned_again_marks_its_replaced_mlflow_run(tmp_path, glue_dir, tiny, monkeypatch):
    "The MLflow run of a replaced run is tagged `replaced_by` the new run's id, which is tagged `replaces` it."
    from mlflow import MlflowClient
    monkeypatch.setenv('MLFLOW_TRACKING_URI', (tmp_path / 'mlruns').as_uri())
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')  # a local store, no server to start
    model, tok = tiny
    src, ids = open_source(str(glue_dir)), []
    for lr in (3e-4, 1e-4):
        cfg = job(tmp_path, glue_dir, tasks=['RTE'], lr=lr, logger=['mlflow'])
        sweep.run_sweep(cfg, model, tok, src, log=lambda line: None)
        ids.append(torch.load(tmp_path / 'ckpt/t/RTE_0.pth', weights_only=True)['trackers']['mlflow'])
    client = MlflowClient()
    old, new = (client.get_run(i).data.tags for i in ids)
    assert ids[0] != ids[1] and old['replaced_by'] == ids[1] and new['replaces'] == ids[0]
    assert 'replaced_by' not in new
    # a copy of the group, its run fine-tuned again there: the original group's run is not the one replaced
    shutil.copytree(tmp_path / 'ckpt/t', tmp_path / 'ckpt/tc')
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], lr=2e-4, logger=['mlflow'], group='tc'), model, tok, src,
                    log=lambda line: None)
    again = torch.load(tmp_path / 'ckpt/tc/RTE_0.pth', weights_only=True)['trackers']['mlflow']
    assert again not in ids and 'replaced_by' not in client.get_run(ids[1]).data.tags
    assert 'replaces' not in client.get_run(again).data.tags


def one_token_type(model):
    "A copy of `model` with one token-type row, as a model saved with type_vocab_size 1 is."
    model = copy.deepcopy(model)
    types = model.electra.embeddings.token_type_embeddings
    types.weight = torch.nn.Parameter(types.weight.data[:1].clone())
    types.num_embeddings = model.config.type_vocab_size = 1
    return model


def test_a_model_of_one_token_type_is_refused_before_any_run_for_the_tasks_that_feed_two(tmp_path, glue_dir, tiny):
    """A model with type_vocab_size 1 given for MRPC ended in an IndexError after the data build (segment B is token
    type 1; tagging feeds type 1 on every token, QA on the context): refused in one line naming the key, the task and
    what works. A single-text task feeds type 0 only, which such a model reads (transformers' own class)."""
    model, tok = tiny
    one = one_token_type(model)
    enc = tok('a dog', 'the cat', return_tensors='pt')
    with pytest.raises(IndexError): one.electra(**enc)  # what the runs met
    one.electra(**tok('a dog', return_tensors='pt'))  # one text: type 0
    refused(lambda: sweep.run_sweep(job(tmp_path, glue_dir, tasks=['SST-2', 'MRPC']), one, tok,
                                    open_source(str(glue_dir)), log=lambda s: None),
            'model: tiny has one token type (type_vocab_size 1 in its config), but MRPC feeds two (segment B is token '
            'type 1)', 'single-text tasks only', 'type_vocab_size 2')
    assert not list(tmp_path.rglob('*.pth'))
    results = sweep.run_sweep(job(tmp_path, glue_dir, tasks=['SST-2']), one, tok, open_source(str(glue_dir)),
                              log=lambda s: None)
    assert list(results.df['task']) == ['SST-2']


def test_a_run_stopped_before_its_weights_is_marked_replaced_by_the_run_that_does_it_again(tmp_path, glue_dir, tiny,
                                                                                            monkeypatch):
    """R24a-3: a run stopped mid-training (Ctrl-C, a stop signal) left its MLflow run KILLED under the name of the run
    that did it again, the two unlinked, where a run fine-tuned again is tagged: its attempt had no checkpoint to keep
    its ids. Each attempt's ids are kept beside its checkpoint-to-be until the weights are saved, so the next attempt
    marks it: the killed run `replaced_by` the new one, the new one `replaces` it; the finished run leaves no file."""
    from mlflow import MlflowClient
    monkeypatch.setenv('MLFLOW_TRACKING_URI', (tmp_path / 'mlruns').as_uri())
    monkeypatch.setenv('MLFLOW_ALLOW_FILE_STORE', 'true')
    model, tok = tiny
    src, real = open_source(str(glue_dir)), learner.train_run

    def stopped(*args, **kwargs): raise KeyboardInterrupt
    monkeypatch.setattr(runs, 'train_run', stopped)
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], logger=['mlflow'])
    with pytest.raises(TrainingStopped):
        sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    client = MlflowClient()
    [killed] = client.search_runs([client.get_experiment_by_name('t').experiment_id])
    assert killed.info.status == 'KILLED' and not (tmp_path / 'ckpt/t/RTE_0.pth').exists()
    monkeypatch.setattr(runs, 'train_run', real)
    sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    new = torch.load(tmp_path / 'ckpt/t/RTE_0.pth', weights_only=True)['trackers']['mlflow']
    assert client.get_run(killed.info.run_id).data.tags['replaced_by'] == new
    assert client.get_run(new).data.tags['replaces'] == killed.info.run_id
    assert client.get_run(new).info.status == 'FINISHED'
    assert not list((tmp_path / 'ckpt/t').glob('.RTE_0*'))


def test_a_checkpoint_replaced_by_another_runs_is_fine_tuned_again_and_never_predicted_from(tmp_path, glue_dir, tiny):
    """RTE_1.pth copied over RTE_0.pth (a backup restored, files copied between groups): what the .pth records (task,
    run, seed, dev scores) is not run 0's row, so the sweep trains run 0 again, saying why, rather than predict from
    run 1's weights under run 0's name; predicting or exporting from the table as it was refuses in one line."""
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'ckpt/t'
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=2, save_pretrained='none')
    results = sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    run1 = results.get('RTE', 1)
    shutil.copy(out / 'RTE_1.pth', out / 'RTE_0.pth')
    stale = ResultsTable(out / 'results.csv')
    run0 = results.get('RTE', 0)
    holds = (f"it holds RTE run 1 (seed 1, dev accuracy {run1['score']:.2f}), not RTE run 0 (seed 0, dev accuracy "
             f"{run0['score']:.2f}) as its row records")
    both = job(tmp_path, glue_dir, tasks=['RTE'], runs=2, ensemble_k=2)  # run 0 picked, whatever the scores
    refused(lambda: sweep.write_test_predictions(both, stale, tok, src, log=lambda s: None),
            str(out / 'RTE_0.pth'), holds, 'run the same command again')
    refused(lambda: export.save_runs(job(tmp_path, glue_dir, tasks=['RTE'], runs=2, save_pretrained='all'), stale, tok,
                                     lambda s: None), str(out / 'RTE_0.pth'), holds)
    lines = []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert lines[0] == (f"RTE run 0: since its row was written, its checkpoint {out / 'RTE_0.pth'} was replaced: "
                        f"{holds}; fine-tuning it again, replacing its row and checkpoint")
    assert lines[1].endswith('1 of 2 runs to do')
    ckpt = torch.load(out / 'RTE_0.pth', weights_only=True)
    assert (ckpt['task'], ckpt['run'], ckpt['seed']) == ('RTE', 0, 0)
    assert ckpt['settings'] == results.get('RTE', 0)['settings']
    again = []
    sweep.run_sweep(cfg, model, tok, src, log=again.append)
    assert again == ['RTE: all 2 runs finished before; skipped']


def test_what_a_checkpoint_records_against_its_row():
    "`run_mismatch` by hand: the run itself matches to the table's 4 decimals; another model's, or another score, not."
    row = {'task': 'RTE', 'run': 0, 'seed': 0, 'accuracy': 62.5, 'train_loss': 0.6931, 'model_fingerprint': 'ab',
           'settings': '{"s": 1}', 'score': 62.5}
    ckpt = {'task': 'RTE', 'run': 0, 'seed': 0, 'pretrained_fingerprint': 'ab', 'settings': '{"s": 1}',
            'dev': {'epoch': 0, 'train_loss': 0.693147, 'accuracy': 62.5}}
    assert loading.run_mismatch(ckpt, row) == ''
    assert loading.run_mismatch({**ckpt, 'pretrained_fingerprint': 'cd'}, row) == (
        'it holds RTE run 0 (seed 0, dev accuracy 62.50) of another model, not RTE run 0 (seed 0, dev accuracy 62.50) '
        'as its row records')
    assert loading.run_mismatch({**ckpt, 'dev': {**ckpt['dev'], 'accuracy': 56.25}}, row).startswith(
        'it holds RTE run 0 (seed 0, dev accuracy 56.25), not')
    old = {k: v for k, v in ckpt.items() if k not in ('settings', 'pretrained_fingerprint')}  # an earlier version's
    assert loading.run_mismatch(old, row) == ''


def zipped(folder: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(folder / 'glue_submission.zip') as z: return {n: z.read(n) for n in sorted(z.namelist())}


def test_mnli_fine_tuned_again_without_ax_in_tasks_predicts_ax_again_and_a_replaced_runs_files_go(tmp_path, glue_dir,
                                                                                                 tiny):
    """AX is predicted by MNLI's runs: MNLI fine-tuned again (max_length 16, then 64) by a job without AX rewrites the
    folder's AX.tsv from the new run, as a job of both writes it; a task's files whose runs were fine-tuned again by a
    job that did not predict (`--predict false`) leave the folder and the zip at that job, said in a line."""
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'out/t'
    short = job(tmp_path, glue_dir, tasks=['MNLI', 'AX', 'RTE'], task_overrides={'MNLI': {'max_length': 16}})
    sweep.write_test_predictions(short, sweep.run_sweep(short, model, tok, src, log=lambda s: None), tok, src,
                                 log=lambda s: None)
    # the length-16 run's predictions told apart from the next run's (the tiny runs predict one class): another class
    before = re.sub(r'\t(entailment|neutral)$', '\tcontradiction', (out / 'AX.tsv').read_text(), flags=re.M)
    (out / 'AX.tsv').write_text(before)
    before = before.encode()
    cfg, lines = job(tmp_path, glue_dir, tasks=['MNLI']), []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert lines[0].startswith('MNLI run 0: since its row was written, max_length changed (was 16, now 64)')
    sweep.write_test_predictions(cfg, results, tok, src, log=lines.append)
    # the reference: the same table predicted by a job of MNLI and AX, into another folder
    both = job(tmp_path, glue_dir, tasks=['MNLI', 'AX'], test_output_dir=str(tmp_path / 'ref'))
    sweep.write_test_predictions(both, results, tok, src, log=lambda s: None)
    assert (out / 'AX.tsv').read_bytes() == (tmp_path / 'ref/t/AX.tsv').read_bytes() != before
    assert zipped(out)['AX.tsv'] == (out / 'AX.tsv').read_bytes() and 'RTE.tsv' in zipped(out)
    assert ('AX.tsv: predicted again with MNLI\'s runs: the folder holds it, and AX is predicted by MNLI\'s model '
            '(AX is not in tasks)') in lines
    # RTE fine-tuned again without predicting: RTE.tsv is of a replaced run, removed by that job
    lines = []
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], lr=1e-4, predict=False), model, tok, src, log=lines.append)
    assert not (out / 'RTE.tsv').exists() and 'RTE.tsv' not in zipped(out) and 'MNLI-m.tsv' in zipped(out)
    assert (f'RTE.tsv removed from {out} and its zip: it was predicted by RTE run 0 (seed 0), fine-tuned again since; '
            'predict RTE again to write it') in lines


def test_mnli_predicted_without_ax_says_the_submission_lacks_ax_and_how_to_add_it(tmp_path, glue_dir, tiny):
    """R24a-2: a sweep of MNLI without AX wrote a zip without AX.tsv (GLUE's diagnostic set, which a full submission
    holds and MNLI's model predicts), nothing said. One line now says so and how to add it; with AX there is none."""
    model, tok = tiny
    src = open_source(str(glue_dir))
    for tasks in (['MNLI'], ['MNLI', 'AX']):
        cfg, lines = job(tmp_path, glue_dir, tasks=tasks, group='_'.join(tasks)), []
        sweep.write_test_predictions(cfg, sweep.run_sweep(cfg, model, tok, src, log=lambda s: None), tok, src,
                                     log=lines.append)
        said = [line for line in lines if line.startswith('AX.tsv: not')]
        assert said == ([] if 'AX' in tasks else [
            "AX.tsv: not predicted: AX, GLUE's diagnostic set, is predicted with MNLI's model when AX is in tasks (a "
            "full submission holds it): add AX to --tasks"])
        assert ('AX.tsv' in zipped(tmp_path / 'out' / cfg.group)) == ('AX' in tasks)


def test_a_task_file_whose_test_was_taken_out_loses_its_stale_file_with_that_fix_and_gets_no_zip(tmp_path, glue_dir,
                                                                                                 tiny):
    """RTE's tiny files as a task file with `test:`, predicted; then the same task file without `test:` and its
    training file cut by a row, fine-tuned again: the old predictions of the replaced run are removed, and the line
    says why nothing was written (the task file names no test file now), not to put in tasks a task that is there. A
    folder of task files' predictions gets no glue_submission.zip, empty, at any point."""
    model, tok = tiny
    task, out = shutil.copytree(glue_dir / 'RTE', tmp_path / 'task'), tmp_path / 'out/t'
    (task / 'nli.yaml').write_text(TASK_FILE + 'test: test.tsv\nid: index\n')
    cfg = job(tmp_path, glue_dir, tasks=[str(task / 'nli.yaml')])
    src = open_source(cfg.data)
    sweep.write_test_predictions(cfg, sweep.run_sweep(cfg, model, tok, src, log=lambda s: None), tok, src,
                                 log=lambda s: None)
    def files(): return sorted(p.name for p in out.iterdir() if not p.name.startswith('.'))  # not made_by's lock
    assert files() == ['made_by.json', 'nli.tsv']
    (task / 'nli.yaml').write_text(TASK_FILE)
    (task / 'train.tsv').write_text(''.join((task / 'train.tsv').read_text().splitlines(keepends=True)[:-1]))
    lines = []
    sweep.write_test_predictions(cfg, sweep.run_sweep(cfg, model, tok, src, log=lines.append), tok, src,
                                 log=lines.append)
    assert lines[-1] == (f"nli.tsv removed from {out}: it was predicted by nli run 0 (seed 0), fine-tuned again "
                         "since; nli's task file names no test file now: give it `test:` to write it")
    assert files() == ['made_by.json'] and json.loads((out / 'made_by.json').read_text()) == {}


def test_another_group_folder_writing_into_the_same_test_folder_is_refused_before_any_run(tmp_path, glue_dir, tiny):
    """Two sweeps that share a group name and test_output_dir but not output_dir (two results tables, maybe two models):
    the second would zip its files with the first's. The test folder records which group folder and model wrote each
    file (`made_by.json`); the second job is refused in one line before its first run."""
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'out/t'
    cfg = job(tmp_path, glue_dir, tasks=['RTE'])
    sweep.write_test_predictions(cfg, sweep.run_sweep(cfg, model, tok, src, log=lambda s: None), tok, src,
                                 log=lambda s: None)
    made_by = json.loads((out / 'made_by.json').read_text())
    assert made_by['RTE.tsv']['group'] == str((tmp_path / 'ckpt/t').resolve())
    row = ResultsTable(tmp_path / 'ckpt/t/results.csv').get('RTE', 0)
    assert made_by['RTE.tsv']['by'] == 'RTE' and made_by['RTE.tsv']['model'] == row['model_fingerprint']
    inputs = hashlib.sha256(f"{row['settings']}|{row['model_fingerprint']}".encode()).hexdigest()[:16]
    assert made_by['RTE.tsv']['runs'] == [{'run': 0, 'seed': 0, 'inputs': inputs, 'finished_at': row['finished_at']}]
    other = job(tmp_path, glue_dir, tasks=['MRPC'], output_dir=str(tmp_path / 'other'))
    refused(lambda: sweep.run_sweep(other, model, tok, src, log=lambda s: None), str(out),
            f"RTE.tsv of the group folder {(tmp_path / 'ckpt/t').resolve()}", str((tmp_path / 'other/t').resolve()),
            '--test_output_dir')
    assert not (tmp_path / 'other/t/results.csv').exists()
    refused(lambda: sweep.write_test_predictions(other, ResultsTable(tmp_path / 'ckpt/t/results.csv'), tok, src,
                                                 log=lambda s: None), 'RTE.tsv of the group folder')
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['MRPC'], output_dir=str(tmp_path / 'other'), predict=False), model,
                    tok, src, log=lambda s: None)  # without predictions the test folder is not its business
    # the same group folder, another task from another model: both in the zip, said in one line
    m2 = tmp_path / 'm2'
    model.save_pretrained(m2)
    tok.save_pretrained(m2)
    two, lines = job(tmp_path, glue_dir, tasks=['MRPC'], model=str(m2)), []
    sweep.write_test_predictions(two, sweep.run_sweep(two, model, tok, src, log=lambda s: None), tok, src,
                                 log=lines.append)
    fingerprints = ResultsTable(tmp_path / 'ckpt/t/results.csv').df.set_index('task')['model_fingerprint']
    assert lines[-1] == (f"warning: the test files of {out} come from runs of 2 models (MRPC.tsv from runs of the "
                         f"model {fingerprints['MRPC']}; RTE.tsv from runs of the model {fingerprints['RTE']}; by "
                         "fingerprint): "
                         "the results table holds rows of each. Fine-tune the other tasks again from this job's model "
                         "(put them in tasks) for a submission of one model.")


def test_test_files_picked_by_several_rules_are_recorded_and_said(tmp_path, glue_dir, tiny):
    """R28a-3: jobs on one group with other select, ensemble_k or runs left a zip of files chosen by several rules (the
    median of 3 runs here, an ensemble of 2 there) without a word, and made_by.json recorded none of them."""
    import dataclasses
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'out/t'
    cfg = job(tmp_path, glue_dir, tasks=['RTE', 'MRPC'], runs=3, select='median')
    sweep.write_test_predictions(cfg, sweep.run_sweep(cfg, model, tok, src, log=lambda s: None), tok, src,
                                 log=lambda s: None)
    made_by = json.loads((out / 'made_by.json').read_text())
    assert made_by['RTE.tsv']['picked_by'] == {'select': 'median', 'ensemble_k': 1, 'of_runs': 3}
    lines = []
    two = dataclasses.replace(cfg, tasks=['RTE'], runs=2, ensemble_k=2)
    sweep.write_test_predictions(two, ResultsTable(tmp_path / 'ckpt/t/results.csv'), tok, src, log=lines.append)
    assert json.loads((out / 'made_by.json').read_text())['RTE.tsv']['picked_by'] == {
        'select': 'median', 'ensemble_k': 2, 'of_runs': 2}
    assert lines[-1] == (f"warning: the test files of {out} were picked by 2 rules (MRPC.tsv: the median of 3 runs; "
                         "RTE.tsv: an ensemble of the top 2 of 2 runs): predict every task in one job for a submission "
                         "of one rule.")


def test_a_damaged_record_of_the_test_files_is_refused_in_one_line(tmp_path):
    from electra.finetuning import made_by
    (tmp_path / 'made_by.json').write_text('{"RTE.tsv": {"task": "RTE"}}')
    refused(lambda: made_by.check_test_folder(tmp_path, tmp_path / 'g'), str(tmp_path / 'made_by.json'),
            "not the record of finetune.py's test files", 'Move it away')
    (tmp_path / 'made_by.json').write_text('{"RTE.tsv": ')
    refused(lambda: made_by.check_test_folder(tmp_path, tmp_path / 'g'), str(tmp_path / 'made_by.json'))


def card_folders(group: Path) -> list[str]:
    "The folders the group card's 'transformers folders' section names."
    section = (group / 'README.md').read_text(encoding='utf-8').split('## transformers folders\n\n', 1)[1].split('\n## ')[0]
    return sorted(re.findall(r'`([^`/]+)/`', section))


def test_a_later_job_of_other_tasks_or_fewer_runs_leaves_a_summary_and_card_of_the_whole_group(tmp_path, glue_dir, tiny):
    """RTE and MRPC, 2 runs each, both picked (ensemble_k 2), then RTE alone with 1 run: the summary and the card
    describe the group on disk, MRPC's 2 runs beside RTE's one (said to be of an earlier job), the card lists exactly
    the transformers folders there, and RTE run 1, outside this job's runs, loses its folder, said in a line."""
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'ckpt/t'
    first = job(tmp_path, glue_dir, tasks=['RTE', 'MRPC'], runs=2, ensemble_k=2, predict=False)
    sweep.write_summary(first, sweep.run_sweep(first, model, tok, src, log=lambda s: None))
    assert card_folders(out) == ['MRPC_0', 'MRPC_1', 'RTE_0', 'RTE_1']
    cfg, lines = job(tmp_path, glue_dir, tasks=['RTE'], runs=1, predict=False), []
    results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert (f"RTE run 1: its transformers folder {out / 'RTE_1'} removed: the run is outside this job's 1 run(s); "
            "its weights stay RTE_1.pth") in lines
    text = sweep.write_summary(cfg, results)
    mrpc = results.task_rows('MRPC')['score'].astype(float)
    assert f"| MRPC | accuracy | 2 | {mrpc.mean():.2f} |" in text and '| RTE | accuracy | 1 |' in text
    assert 'GLUE score (2 of 8 tasks)' in text
    assert 'Tasks of earlier jobs of this group, each over the runs of the last job that named it: MRPC (runs 0, 1).' in text
    assert text in (out / 'summary.md').read_text() and text in (out / 'README.md').read_text()
    on_disk = sorted(p.name for p in out.iterdir() if (p / 'config.json').is_file())
    assert card_folders(out) == on_disk == ['MRPC_0', 'MRPC_1', 'RTE_0']
    assert '| MRPC | 1 |' in (out / 'README.md').read_text()  # the runs table lists MRPC's runs too


def test_an_earlier_task_is_summarised_over_the_runs_its_last_job_covered(tmp_path, glue_dir, tiny):
    """RTE 2 runs, then RTE 1 run at another lr (run 0 fine-tuned again; run 1, of the first lr, outside the job but
    kept in results.csv for a job that asks for it again), then MRPC alone: the summary and the card give RTE over
    run 0, the runs of its last job, not run 1 of the other lr pooled back in; the note says so."""
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'ckpt/t'
    for cfg in (job(tmp_path, glue_dir, tasks=['RTE'], runs=2, predict=False),
                job(tmp_path, glue_dir, tasks=['RTE'], runs=1, lr=1e-4, predict=False)):
        sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    third = job(tmp_path, glue_dir, tasks=['MRPC'], predict=False)
    results = sweep.run_sweep(third, model, tok, src, log=lambda s: None)
    lrs = [recorded_inputs(s)['run']['lr'] for s in results.task_rows('RTE')['settings']]
    assert lrs == [1e-4, 3e-4]  # both rows kept: run 1 is of the first job's lr (the default)
    text = sweep.write_summary(third, results)
    rte = float(results.get('RTE', 0)['score'])
    assert f"| RTE | accuracy | 1 | {rte:.2f} | {rte:.2f} | – | {rte:.2f} | {rte:.2f} |" in text
    assert ('Tasks of earlier jobs of this group, each over the runs of the last job that named it: RTE (run 0). Left '
            'out as outside the runs of their last job (kept in results.csv for a job that asks for them again): RTE '
            '(run 1).') in text
    assert json.loads((out / 'job_runs.json').read_text()) == {'MRPC': 1, 'RTE': 1}
    card = (out / 'README.md').read_text()
    assert '| RTE | 0 |' in card and '| RTE | 1 |' not in card


def test_runs_of_a_task_fine_tuned_unlike_are_said_in_the_summary(tmp_path, glue_dir):
    """`_group_rows` by hand: RTE's two rows of an earlier job (no record of its runs: a table of an earlier version)
    record other epochs, model and train data, the seeds aside: each difference said by run, in one line."""
    from types import SimpleNamespace

    def row(run, epochs, model, train):
        settings = {'tokenizer': 'tok', 'model_files': {}, 'data': {'train': train, 'dev': 'd'}, 'task': {},
                    'run': {'epochs': epochs, 'lr': 1e-4, 'seed': run}}
        return {'task': 'RTE', 'run': run, 'settings': json.dumps(settings), 'model_fingerprint': model}
    df = pd.DataFrame([row(0, 3, 'm1', 'a'), row(1, 2, 'm1', 'a'), row(2, 2, 'm2', 'b')])
    table = SimpleNamespace(df=df, job_runs={})
    rows, note = sweep._group_rows(job(tmp_path, glue_dir, tasks=['MRPC']), table, TASKS)
    assert sorted(rows['run']) == [0, 1, 2]
    assert note == ('Tasks of earlier jobs of this group, over all their rows of results.csv (no job of theirs '
                    'recorded): RTE. RTE\'s runs were not fine-tuned alike: `epochs` 3 (run 0); 2 (runs 1, 2); the '
                    'model m1 (runs 0, 1); m2 (run 2); the train data a (runs 0, 1); b (run 2). Name the task in tasks '
                    'to fine-tune its runs again alike.')
    rows, note = sweep._group_rows(job(tmp_path, glue_dir, tasks=['MRPC']), SimpleNamespace(df=df, job_runs={'RTE': 2}),
                                   TASKS)
    assert sorted(rows['run']) == [0, 1] and note.startswith('Tasks of earlier jobs of this group, each over the runs '
                                                             'of the last job that named it: RTE (runs 0, 1). Left out '
                                                             'as outside the runs of their last job (kept in '
                                                             'results.csv for a job that asks for them again): RTE '
                                                             '(run 2).')
    assert note.endswith("RTE's runs were not fine-tuned alike: `epochs` 3 (run 0); "
                                                           "2 (run 1). Name the task in tasks to fine-tune its runs "
                                                           "again alike.")


def test_the_summary_names_the_tasks_of_earlier_jobs_and_the_task_files_it_leaves_out(tmp_path, glue_dir):
    "`_group_rows` by hand: this job's task over its runs, a GLUE task of an earlier job whole, a task file named left out."
    from types import SimpleNamespace
    df = pd.DataFrame([{'task': t, 'run': r, 'settings': None, 'model_fingerprint': None}
                       for t, runs in (('RTE', 3), ('MRPC', 3), ('entail', 1)) for r in range(runs)])
    table = SimpleNamespace(df=df, job_runs={})  # MRPC's job not recorded: a table of an earlier version
    rows, note = sweep._group_rows(job(tmp_path, glue_dir, tasks=['RTE'], runs=2), table, TASKS)
    assert sorted(zip(rows['task'], rows['run'])) == [('MRPC', 0), ('MRPC', 1), ('MRPC', 2), ('RTE', 0), ('RTE', 1)]
    assert note == ("Left out as outside this job's 2 run(s) (kept in results.csv for a job that asks for them again): "
                    'RTE (run 2). Tasks of earlier jobs of this group, over all their rows of results.csv (no job of theirs '
                    'recorded): MRPC. Left out: entail, '
                    'task files of earlier jobs (rows in results.csv) that this job does not name; name them in tasks '
                    'to summarise them.')


def test_labels_that_differ_only_in_case_are_said_once_in_a_job(tmp_path, glue_dir, tiny, monkeypatch):
    """RTE's tiny files as a task file, one training label written 'Entailment': one warning for the job, though its
    task files are read again for the summary and the test predictions."""
    import warnings
    model, tok = tiny
    monkeypatch.setattr(runs, 'train_run', lambda data, task_cfg, body, *a, **kw: (
        data.task.new_model(copy.deepcopy(body), task_cfg), [{m: 50.0 for m in dev_metric_names(data.task)}]))
    task = shutil.copytree(glue_dir / 'RTE', tmp_path / 'task')
    edit_line(task / 'train.tsv', 1, lambda line: line.rsplit('\t', 1)[0] + '\tEntailment')
    (task / 'cased.yaml').write_text(TASK_FILE + 'test: test.tsv\nid: index\n')
    cfg = job(tmp_path, glue_dir, tasks=[str(task / 'cased.yaml')])
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter('always')
        results = sweep.run_sweep(cfg, model, tok, open_source(cfg.data), log=lambda s: None)
        sweep.write_test_predictions(cfg, results, tok, open_source(cfg.data), log=lambda s: None)
    said = [str(w.message) for w in got if 'differ only in case' in str(w.message)]
    assert len(said) == 1 and "the labels 'Entailment' (1 row) and 'entailment' (" in said[0]


def test_a_group_folder_copied_or_renamed_reads_its_own_checkpoints(tmp_path, glue_dir, tiny):
    """A group is a folder: its rows name their .pth relative to it, so a copy (`cp -a`) or a renamed folder is
    resumed, predicted and exported from its own files; the original fine-tuned again since changes nothing of the
    copy. A table written with absolute paths (earlier versions) is read the same way: each row's file by its name
    in the folder that holds the table, where the sweep wrote it."""
    model, tok = tiny
    src, ckpt = open_source(str(glue_dir)), tmp_path / 'ckpt'
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=1, save_pretrained='none')
    first = sweep.run_sweep(cfg, model, tok, src, log=lambda s: None).get('RTE', 0)
    with open(ckpt / 't' / 'results.csv', newline='', encoding='utf-8') as f:
        assert [r['checkpoint'] for r in csv.DictReader(f)] == ['RTE_0.pth']
    shutil.copytree(ckpt / 't', ckpt / 'c')
    own = hashlib.md5((ckpt / 'c' / 'RTE_0.pth').read_bytes()).hexdigest()
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], runs=1, epochs=2, save_pretrained='none'), model, tok, src,
                    log=lambda s: None)  # the original's run fine-tuned again: other weights in t/RTE_0.pth
    copy_cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=1, group='c', save_pretrained='none')
    lines = []
    results = sweep.run_sweep(copy_cfg, model, tok, src, log=lines.append)
    assert lines[0] == 'RTE: all 1 runs finished before; skipped'
    assert results.get('RTE', 0)['checkpoint'] == str(ckpt / 'c' / 'RTE_0.pth')
    assert loading.read_run(results.get('RTE', 0))['dev'][TASKS['RTE'].score_metric] == pytest.approx(first['score'], abs=5e-5)
    assert sweep.write_test_predictions(copy_cfg, results, tok, src, log=lambda s: None)
    assert hashlib.md5((ckpt / 'c' / 'RTE_0.pth').read_bytes()).hexdigest() == own
    table = ckpt / 'c' / 'results.csv'  # as an earlier version wrote it: the original's absolute path
    table.write_text(table.read_text().replace(',RTE_0.pth,', f",{ckpt / 't' / 'RTE_0.pth'},"))
    (ckpt / 'c').rename(ckpt / 'm')
    renamed = job(tmp_path, glue_dir, tasks=['RTE'], runs=1, group='m', save_pretrained='none')
    lines = []
    results = sweep.run_sweep(renamed, model, tok, src, log=lines.append)
    assert lines[0] == 'RTE: all 1 runs finished before; skipped'
    assert results.get('RTE', 0)['checkpoint'] == str(ckpt / 'm' / 'RTE_0.pth')
    assert sweep.write_test_predictions(renamed, results, tok, src, log=lambda s: None)


def test_a_model_given_that_is_not_the_configs_model_is_refused_in_one_line(tmp_path, glue_dir, tiny_dir):
    """run_sweep records each row under the fingerprint of `cfg.model`: a model object read from another model (B
    given, A named) would store B's runs as A's, which finetune.py --model A then skips as finished. It is refused,
    naming both, and the fix it prints (model set to B) records B's fingerprint."""
    other = tmp_path / 'B'
    model, tok = loading.load_pretrained(str(tiny_dir))
    with torch.no_grad(): model.electra.embeddings.word_embeddings.weight.add_(0.01)
    model.save_pretrained(other)
    tok.save_pretrained(other)
    src = open_source(str(glue_dir))
    given, tok = loading.load_pretrained(str(other))
    named = job(tmp_path, glue_dir, model=str(tiny_dir), tasks=['RTE'], runs=1, save_pretrained='none')
    refused(lambda: sweep.run_sweep(named, given, tok, src, log=lambda s: None),
            f"model: the model given to run_sweep was read from {other}, not from {tiny_dir} (the config's model)",
            f"set model to {other}")
    assert not (tmp_path / 'ckpt' / 't' / 'results.csv').exists()
    fixed = job(tmp_path, glue_dir, model=str(other), tasks=['RTE'], runs=1, save_pretrained='none')
    row = sweep.run_sweep(fixed, given, tok, src, log=lambda s: None).get('RTE', 0)
    assert row['model_fingerprint'] == model_fingerprint(other) != model_fingerprint(tiny_dir)


def test_a_job_that_does_not_predict_removes_the_files_of_the_runs_it_replaces_and_rewrites_the_zip(tmp_path,
                                                                                                   glue_dir, tiny):
    """A `--predict false` job that fine-tunes MNLI again replaces the runs that wrote MNLI-m.tsv, MNLI-mm.tsv and
    AX.tsv: the job itself removes them from the test folder, its zip and made_by.json, one line each (the zip then
    holds RTE.tsv alone, byte-equal to the folder's); RTE's file, of runs it kept, stays."""
    model, tok = tiny
    src, out = open_source(str(glue_dir)), tmp_path / 'out/t'
    cfg = job(tmp_path, glue_dir, tasks=['MNLI', 'AX', 'RTE'])
    sweep.write_test_predictions(cfg, sweep.run_sweep(cfg, model, tok, src, log=lambda s: None), tok, src,
                                 log=lambda s: None)
    assert sorted(zipped(out)) == ['AX.tsv', 'MNLI-m.tsv', 'MNLI-mm.tsv', 'RTE.tsv']
    lines = []
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['MNLI'], lr=1e-4, predict=False), model, tok, src, log=lines.append)
    removed = [l for l in lines if ' removed from ' in l]
    assert removed == [f"AX.tsv removed from {out} and its zip: it was predicted by MNLI run 0 (seed 0), fine-tuned "
                       "again since; predict AX again (put it in tasks) to write it"] + [
        f"{name} removed from {out} and its zip: it was predicted by MNLI run 0 (seed 0), fine-tuned again since; "
        "predict MNLI again to write it" for name in ('MNLI-m.tsv', 'MNLI-mm.tsv')]
    assert sorted(p.name for p in out.glob('*.tsv')) == ['RTE.tsv']
    assert zipped(out) == {'RTE.tsv': (out / 'RTE.tsv').read_bytes()}
    assert sorted(json.loads((out / 'made_by.json').read_text())) == ['RTE.tsv']


def test_the_zip_of_files_of_other_data_is_said_and_a_file_of_a_changed_test_set_goes(tmp_path, glue_dir, tiny):
    """made_by.json records what each file was predicted from: the task's data (its folder) and its test file by
    content (the SHA-256 of the file's SHA-256, as the rows record data). RTE predicted again from another folder
    (that holds no MRPC) leaves a zip of two data sets: one `warning:` line, as for models. Then MRPC's test file
    of the first folder gains a row: a job predicting RTE from that folder removes the MRPC.tsv of the old test set
    (100 rows against 103, which the site rejects), said in a line, and the zip holds RTE.tsv alone."""
    model, tok = tiny
    g1, out = shutil.copytree(glue_dir, tmp_path / 'g1'), tmp_path / 'out/t'
    g2 = shutil.copytree(g1, tmp_path / 'g2')
    shutil.rmtree(g2 / 'MRPC')
    a = job(tmp_path, g1, tasks=['RTE', 'MRPC'])
    sweep.write_test_predictions(a, sweep.run_sweep(a, model, tok, open_source(str(g1)), log=lambda s: None), tok,
                                 open_source(str(g1)), log=lambda s: None)
    def test_digest(path): return hashlib.sha256(hashlib.sha256(path.read_bytes()).digest()).hexdigest()[:16]
    made_by = json.loads((out / 'made_by.json').read_text())
    assert {n: (e['data'], e['test']) for n, e in made_by.items()} == {
        'RTE.tsv': (str(g1.resolve()), test_digest(g1 / 'RTE/test.tsv')),
        'MRPC.tsv': (str(g1.resolve()), test_digest(g1 / 'MRPC/test.tsv'))}
    b, lines = job(tmp_path, g2, tasks=['RTE']), []
    sweep.write_test_predictions(b, sweep.run_sweep(b, model, tok, open_source(str(g2)), log=lambda s: None), tok,
                                 open_source(str(g2)), log=lines.append)
    assert sorted(zipped(out)) == ['MRPC.tsv', 'RTE.tsv']
    assert lines[-1] == (f"warning: the GLUE files of {out} (its glue_submission.zip) were predicted from 2 data "
                         f"sources (MRPC.tsv from {g1.resolve()}; RTE.tsv from {g2.resolve()}): each is scored on "
                         "its own data's test set. Predict the other tasks again from this job's data (put them in "
                         "tasks) for a submission of one data set.")
    with open(g1 / 'MRPC/test.tsv', 'a') as f: f.write('12\t1\t2\tone more line .\tand another one .\n')
    c, lines = job(tmp_path, g1, tasks=['RTE']), []
    sweep.write_test_predictions(c, sweep.run_sweep(c, model, tok, open_source(str(g1)), log=lambda s: None), tok,
                                 open_source(str(g1)), log=lines.append)
    assert lines[-1] == (f"MRPC.tsv removed from {out} and its zip: it was predicted from another MRPC test file "
                         f"(of {g1.resolve()}) than the one there now; predict MRPC again (put it in tasks) to "
                         "write it")
    assert sorted(zipped(out)) == ['RTE.tsv'] and sorted(json.loads((out / 'made_by.json').read_text())) == ['RTE.tsv']



def test_a_group_renamed_or_copied_with_its_test_folder_takes_its_records_as_its_own(tmp_path, glue_dir, tiny):
    """`mv ckpt/N1 ckpt/N2; mv out/N1 out/N2`: made_by.json names the group folder ckpt/N1, gone, yet its runs are
    N2's rows (seed, inputs, finished_at): the job of N2 takes them as its own (the record then names N2) instead of
    refusing a mix of two groups; a copy of both folders (`cp -a`) the same, its records naming the copy. Files whose
    runs are not the group's rows are still refused (the test above)."""
    model, tok = tiny
    src, ckpt, out = open_source(str(glue_dir)), tmp_path / 'ckpt', tmp_path / 'out'
    n1 = job(tmp_path, glue_dir, tasks=['RTE'], group='N1', save_pretrained='none')
    sweep.write_test_predictions(n1, sweep.run_sweep(n1, model, tok, src, log=lambda s: None), tok, src,
                                 log=lambda s: None)
    before = (out / 'N1/RTE.tsv').read_bytes()
    (ckpt / 'N1').rename(ckpt / 'N2')
    (out / 'N1').rename(out / 'N2')
    for group in ('N2', 'A2'):
        if group == 'A2':
            shutil.copytree(ckpt / 'N2', ckpt / 'A2')
            shutil.copytree(out / 'N2', out / 'A2')
        cfg, lines = job(tmp_path, glue_dir, tasks=['RTE', 'MRPC'], group=group, save_pretrained='none'), []
        results = sweep.run_sweep(cfg, model, tok, src, log=lines.append)
        assert lines[0] == 'RTE: all 1 runs finished before; skipped'
        sweep.write_test_predictions(cfg, results, tok, src, log=lines.append)
        made_by = json.loads((out / group / 'made_by.json').read_text())
        assert {e['group'] for e in made_by.values()} == {str((ckpt / group).resolve())}
        assert sorted(made_by) == ['MRPC.tsv', 'RTE.tsv'] and (out / group / 'RTE.tsv').read_bytes() == before


def test_a_tokenizer_that_is_not_the_models_is_refused_naming_both_and_one_alike_is_accepted(tmp_path, glue_dir,
                                                                                             tiny_dir):
    """The model's ids mean its own tokenizer's tokens: the same words in another order, another model's tokenizer of
    the same size or the same vocabulary read cased trained silently, the rows kept under the model's fingerprint and
    the wrong tokenizer exported. Refused in one line naming both and the fix, before any run; the same vocabulary
    read otherwise (transformers' AutoTokenizer from the model's folder, another object) is the model's, and the rows
    and the exported folder record it."""
    model, own = loading.load_pretrained(str(tiny_dir))
    src = open_source(str(glue_dir))
    cfg = job(tmp_path, glue_dir, model=str(tiny_dir), tasks=['RTE'], runs=1)
    start = f"tokenizer: the tokenizer given to run_sweep is not the one {tiny_dir} was saved with: "
    fix = f"Give the tokenizer load_pretrained('{tiny_dir}') returns with the model."
    refused(lambda: sweep.run_sweep(cfg, model, reordered(own), src, log=lambda s: None),
            start + f"its vocabulary ({len(own)} tokens) is not that of the model's tokenizer ({len(own)} tokens; 'a' is "
            f"{len(own) - 1} there, 9 here). " + fix)
    other = [t for t, _ in sorted(own.get_vocab().items(), key=lambda kv: kv[1])][:9]
    other += [f'w{i}' for i in range(len(own) - 9)]  # another model's words, as many
    refused(lambda: sweep.run_sweep(cfg, model, transformers.ElectraTokenizerFast(
        vocab={w: i for i, w in enumerate(other)}), src, log=lambda s: None), start + "its vocabulary", fix)
    cased = transformers.AutoTokenizer.from_pretrained(tiny_dir, do_lower_case=False)
    refused(lambda: sweep.run_sweep(cfg, model, cased, src, log=lambda s: None),
            f"tokenizer: the tokenizer given to run_sweep ({tiny_dir}) is not the one {tiny_dir} was saved with: it "
            f"keeps its case, where the model's tokenizer lower-cases its input. " + fix)
    assert not (tmp_path / 'ckpt' / 't' / 'results.csv').exists()
    alike = transformers.AutoTokenizer.from_pretrained(tiny_dir)  # the same vocabulary, another object and reader
    results = sweep.run_sweep(cfg, model, alike, src, log=lambda s: None)
    row = results.get('RTE', 0)
    assert row['model_fingerprint'] == model_fingerprint(tiny_dir)
    assert recorded_inputs(row['settings'])['tokenizer'] == tokenizer_identity(own) == tokenizer_identity(alike)
    assert loading.load_finetuned(row['checkpoint']).electra_tokenizer_identity == tokenizer_identity(own)
    exported = transformers.AutoTokenizer.from_pretrained(tmp_path / 'ckpt' / 't' / 'RTE_0')
    assert exported.get_vocab() == own.get_vocab()
    # the test set predicted with the tokenizer the runs read, not another
    swapped = reordered(own)
    refused(lambda: sweep.write_test_predictions(cfg, results, swapped, src, log=lambda s: None),
            f"tokenizer: the tokenizer given to write_test_predictions is not the one RTE run 0 was fine-tuned with (its "
            f"identity {tokenizer_identity(swapped)}, the run's {tokenizer_identity(own)}): give the tokenizer its sweep "
            f"was given (of {tiny_dir}: load_pretrained returns it).")
    assert not (tmp_path / 'out' / 't' / 'RTE.tsv').exists()
    written = sweep.write_test_predictions(cfg, results, own, src, log=lambda s: None)
    assert [p.name for p in written] == ['RTE.tsv', 'glue_submission.zip']


def test_a_model_that_records_no_tokenizer_is_held_to_its_rows_and_its_runs_to_the_tokenizer_they_read(
        tmp_path, glue_dir, tiny):
    """A model built in memory says nothing of its tokenizer: one of more tokens than its embedding rows is refused (its
    ids would run past them); one that fits is taken, and its identity is in the rows' inputs, so that a run read with
    another tokenizer is never skipped as finished with the right one (a sweep given the model's own after one given the
    same words in another order trained again)."""
    model, own = copy.deepcopy(tiny[0]), tiny[1]
    del model.electra_tokenizer, model.electra_tokenizer_identity
    src = open_source(str(glue_dir))
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=1, save_pretrained='none')
    vocab = {**own.get_vocab(), 'extra': len(own)}
    refused(lambda: sweep.run_sweep(cfg, model, transformers.ElectraTokenizerFast(vocab=vocab), src, log=lambda s: None),
            f"tokenizer: the tokenizer given to run_sweep is not the one tiny can read: it has {len(own) + 1} tokens, "
            f"more than the model's {len(own)} embedding rows. Give the tokenizer load_pretrained('tiny') returns")
    swapped = reordered(own)
    sweep.run_sweep(cfg, model, swapped, src, log=lambda s: None)
    lines = []
    sweep.run_sweep(cfg, model, own, src, log=lines.append)
    assert lines[0] == (f'RTE run 0: since its row was written, the tokenizer changed (other tokens, ids or '
                        f'normalisation: its identity was {tokenizer_identity(swapped)}, now {tokenizer_identity(own)}); '
                        'fine-tuning it again, replacing its row and checkpoint')
    again = []
    sweep.run_sweep(cfg, model, own, src, log=again.append)
    assert again == ['RTE: all 1 runs finished before; skipped']


def test_a_row_of_an_earlier_version_that_records_no_tokenizer_is_done_again(tmp_path, glue_dir, tiny):
    "A row written before the tokenizer was recorded does not say which one its run read: trained again, said why."
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], runs=1, save_pretrained='none')
    src = open_source(str(glue_dir))
    sweep.run_sweep(cfg, model, tok, src, log=lambda s: None)
    table = tmp_path / 'ckpt/t/results.csv'
    old = pd.read_csv(table, dtype=str)
    old['settings'] = [json.dumps({k: v for k, v in json.loads(s).items() if k != 'tokenizer'}, sort_keys=True)
                       for s in old['settings']]
    old.to_csv(table, index=False)
    lines = []
    sweep.run_sweep(cfg, model, tok, src, log=lines.append)
    assert lines[0] == ('RTE run 0: its row does not record the tokenizer (a results table of an earlier version); '
                        'fine-tuning it again, replacing its row and checkpoint')
    again = []
    sweep.run_sweep(cfg, model, tok, src, log=again.append)
    assert again == ['RTE: all 1 runs finished before; skipped']


def test_the_model_change_names_the_files_that_differ_whatever_the_model_is(tmp_path):
    """A .pth written again holds other bytes; a folder names each file edited, added or removed; a hub model another
    commit; and the fingerprint stays what earlier versions recorded (the hash of the files' names and digests)."""
    from electra.finetuning.inputs import RunInputs, what_changed
    from electra.pretrained.export import model_files
    pth, folder = tmp_path / 'run.pth', tmp_path / 'model'
    pth.write_bytes(b'weights one')
    folder.mkdir()
    for name, text in (('config.json', '{}'), ('model.safetensors', 'w'), ('vocab.txt', 'a')):
        (folder / name).write_text(text)

    def said(model, before: dict, after: dict) -> list[str]:
        new = RunInputs(model_fingerprint(model, after), after, 'tok', {}, {}, {})
        row = {'model_fingerprint': model_fingerprint(model, before), 'settings': RunInputs(
            '', before, 'tok', {}, {}, {}).settings}
        return what_changed(row, new, {}, str(model))[0]
    was = model_files(pth)
    assert was == {'': hashlib.sha256(b'weights one').hexdigest()}
    pth.write_bytes(b'weights two')
    assert said(pth, was, model_files(pth)) == [f'the model changed ({pth} holds other bytes)']
    was = model_files(folder)
    (folder / 'model.safetensors').write_text('w2')
    (folder / 'vocab.txt').unlink()
    (folder / 'tokenizer.json').write_text('{}')
    assert said(folder, was, model_files(folder)) == [f'the model changed ({folder}: its model.safetensors differs; '
                                                      'tokenizer.json added; vocab.txt removed)']
    assert said('someone/model', {}, {}) == []  # the same commit: the same fingerprint
    row = {'model_fingerprint': 'another', 'settings': RunInputs('', {}, 'tok', {}, {}, {}).settings}
    assert what_changed(row, RunInputs(model_fingerprint('someone/model'), {}, 'tok', {}, {}, {}), {}, 'someone/model')[0] \
        == ['the model changed (someone/model: its files in the hub cache are of another commit)']


def test_a_task_of_a_group_that_another_job_fine_tunes_is_refused_and_a_dead_job_s_lock_taken_over(tmp_path, glue_dir,
                                                                                                  tiny):
    """R23a-1: two jobs on one group and one task at once (other lr) both trained every run: the one that ended with
    status 0 wrote a card and summary.md of scores and settings its table no longer held (the other job's rows had
    replaced its own), and the other died in a traceback of their shared temporary export folder. A task of a group
    is fine-tuned by one job at a time: the second is refused before any work, naming the lock, the job holding it
    and the fix; another task of the group is not held; a lock of a job that died is taken over."""
    import subprocess
    import sys
    cfg = job(tmp_path, glue_dir, tasks=['RTE'], predict=False, save_pretrained='none')
    group = tmp_path / 'ckpt' / 't'
    group.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, '-c', 'import time; from electra.runtime.files import hold_lock; '
                               f'hold_lock({str(group / ".RTE.lock")!r}, "busy"); print("locked", flush=True); '
                               'time.sleep(120)'], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'locked'
        with pytest.raises(ConfigError) as e:
            sweep.run_sweep(cfg, *tiny, open_source(str(glue_dir)), log=lambda s: None)
        assert str(e.value) == (f"{group / '.RTE.lock'}: RTE of group t is being fine-tuned by another job (PID "
                                f"{holder.pid} on {__import__('socket').gethostname()}). Wait for it to end, or give "
                                "this job another --group; if that job is gone, delete the lock.")
        assert not (group / 'results.csv').exists()  # refused before any work
        other = job(tmp_path, glue_dir, tasks=['MRPC'], predict=False, save_pretrained='none')
        assert len(sweep.run_sweep(other, *tiny, open_source(str(glue_dir)), log=lambda s: None).df) == 1
    finally:
        holder.kill()  # like kill -9: the lock file stays
        holder.wait()
    assert len(sweep.run_sweep(cfg, *tiny, open_source(str(glue_dir)), log=lambda s: None).df) == 2  # taken over
    assert len(sweep.run_sweep(cfg, *tiny, open_source(str(glue_dir)), log=lambda s: None).df) == 2  # its own again


def test_a_task_s_plan_line_counts_one_epoch_in_the_singular(tmp_path, glue_dir, tiny):
    "R26a-1: `--epochs 1` printed '1 epochs' in each task's plan line."
    model, tok = tiny
    lines = []
    sweep.run_sweep(job(tmp_path, glue_dir, tasks=['RTE'], epochs=1), model, tok, open_source(str(glue_dir)),
                    log=lines.append)
    [plan] = [line for line in lines if line.startswith('RTE: ') and 'runs to do' in line]
    assert '; 1 epoch, lr ' in plan and 'epochs' not in plan
