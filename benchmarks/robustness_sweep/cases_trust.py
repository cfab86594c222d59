"""The second sweep's cases: classes the first sweep (cases.py) did not aim at. By class:

- R: numeric config keys of the jobs and task files at 0, negative, NaN, inf, huge and of the wrong type
- U: every user string that becomes a file or folder name (task, run, group, comparison and variant names)
- M: metrics against every task kind and label count, undefined metrics
- L: values read from data (NaN, inf, empty, null or mixed labels, unseen dev labels, hostile ids), diverged runs
- X: data or settings edited between runs: fine-tuning into an existing group, resuming a pretraining
- S: text in other scripts (a tokenizer trained on Japanese, Hindi, Arabic, ... keeps what the script distinguishes)
- Z: text encodings and compressed corpus and task files
- A: the exported folder through transformers' Auto classes, its tokenizer and pipelines, long inputs included
- W: two commands on the same output at once

Each case states what is right: `error` (one line, status 2, before any work) or `ok` (it works, its outputs checked:
`Proc.wrong` says what is wrong with them). Fixtures of their own (a run trained on several scripts, a fresh export)
are built once per version of the library's code, so a sweep run after a change of the code never reads outputs of
the code before it.
"""
from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import re
import shutil
import sys
import textwrap
import time
from pathlib import Path

from cases import (CSV_HEAD, NER, NER_YAML, SQUAD_YAML, TASK_YAML, _csv_rows, _squad, ft_task, qa, simple, tag,
                   task)
from harness import REPO, Proc, case, kill_group, wait_for


def _code_version() -> str:
    "A hash of the library's code: fixtures built by other code are built again."
    h = hashlib.sha256()
    for f in sorted((REPO / 'electra').rglob('*.py')): h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _python(c, code: str, timeout: int = 300) -> Proc:
    """`code` run by a fresh Python, as a user's script; a line `WRONG: ...` it prints marks its outputs wrong."""
    p = c.run([sys.executable, '-c', textwrap.dedent(code)], timeout=timeout)
    wrong = [line[len('WRONG: '):] for line in p.stdout.splitlines() if line.startswith('WRONG: ')]
    if wrong: p.wrong = '; '.join(wrong)
    return p


def _pretrained(c, name: str, *args, corpus: str | None = None) -> Path:
    """A 2-step pretraining of its own (built once per code version, kept with the fixtures); its run folder."""
    out = c.base / f'trust-{name}-{_code_version()}'
    run = out / 'c_11081'
    if not (run / 'discriminator' / 'config.json').is_file():
        shutil.rmtree(out, ignore_errors=True)
        extra = []
        if corpus is not None:
            out.mkdir(parents=True)
            (out / 'corpus.txt').write_text(corpus, encoding='utf-8')
            extra = ['--corpus', out / 'corpus.txt']
        base = c.pretrain_args(out, 2, tokenizer=corpus is None)
        p = c.run(c.cmd(['pretrain.py'], *base, *extra, *args))
        assert p.rc == 0, p.stderr[-3000:]
    return run


def _ft_group(c, *args) -> Proc:
    return c.finetune('--group', 'g', *args)


# ======================================================================== R: numeric keys of the jobs

simple('R01', 'ranges', 'pretrain --seed -1 (the issue\'s case 4)', 'pretrain', '--seed', '-1')
simple('R02', 'ranges', 'pretrain --temperature 0', 'pretrain', '--temperature', '0')
simple('R03', 'ranges', 'pretrain --temperature nan', 'pretrain', '--temperature', 'nan')
simple('R04', 'ranges', 'pretrain --mask_token_prob 1.5', 'pretrain', '--mask_token_prob', '1.5')
simple('R05', 'ranges', 'pretrain --random_token_prob -0.1', 'pretrain', '--random_token_prob', '-0.1')
simple('R06', 'ranges', 'pretrain --disc_loss_weight inf', 'pretrain', '--disc_loss_weight', 'inf')
simple('R07', 'ranges', 'pretrain --gen_loss_weight -1', 'pretrain', '--gen_loss_weight', '-1')
simple('R08', 'ranges', 'pretrain --two_stage 1 (the whole run on the generator alone)', 'pretrain', '--two_stage', '1')
simple('R09', 'ranges', 'pretrain --warmup_steps -1', 'pretrain', '--warmup_steps', '-1')
simple('R10', 'ranges', 'pretrain --num_hidden_layers 0', 'pretrain', '--num_hidden_layers', '0')
simple('R11', 'ranges', 'pretrain --hidden_size 1000000000 (huge)', 'pretrain', '--hidden_size', '1000000000',
       '--intermediate_size', '1000000000', '--embedding_size', '1000000000')
simple('R12', 'ranges', 'pretrain --max_sentence_chars 0', 'pretrain', '--max_sentence_chars', '0')
simple('R13', 'ranges', 'pretrain --min_line_chars -5', 'pretrain', '--min_line_chars', '-5')
simple('R14', 'ranges', 'pretrain --eval_examples -1', 'pretrain', '--eval_examples', '-1')
simple('R15', 'ranges', 'pretrain --dist_timeout 0', 'pretrain', '--dist_timeout', '0')
simple('R16', 'ranges', 'pretrain --num_workers -1', 'pretrain', '--num_workers', '-1')
simple('R17', 'ranges', 'pretrain --pad_vocab_multiple -8', 'pretrain', '--pad_vocab_multiple', '-8')
simple('R18', 'ranges', 'pretrain --threads 0 (auto, as its help says)', 'pretrain', '--threads', '0', expect='ok')
simple('R19', 'ranges', 'pretrain --embedding_size 0', 'pretrain', '--embedding_size', '0')
simple('R20', 'ranges', 'pretrain --lr inf', 'pretrain', '--lr', 'inf')
simple('R21', 'ranges', 'pretrain --steps 1e3 (a whole number written as a float: 1000 steps)', 'pretrain', '--steps', '1e3',
       expect='ok')
simple('R22', 'ranges', 'pretrain --checkpoint_at 0.5,nan', 'pretrain', '--checkpoint_at', '0.5,nan')


@case('R23', 'ranges', 'pretrain --config a YAML with lr: -1 (the file and line named?)')
def _(c): return c.pretrain('--config', c.write('neg.yaml', 'config: demo\n# a comment\nlr: -1\n'))


simple('R30', 'ranges', 'finetune --seed -1', 'finetune', '--seed', '-1')
simple('R31', 'ranges', 'finetune --layer_lr_decay 0', 'finetune', '--layer_lr_decay', '0')
simple('R32', 'ranges', 'finetune --layer_lr_decay nan', 'finetune', '--layer_lr_decay', 'nan')
simple('R33', 'ranges', 'finetune --warmup_fraction 1.5', 'finetune', '--warmup_fraction', '1.5')
simple('R34', 'ranges', 'finetune --eval_batch_size 0', 'finetune', '--eval_batch_size', '0')
simple('R35', 'ranges', 'finetune --stsb_scale 0', 'finetune', '--stsb_scale', '0')
simple('R36', 'ranges', 'finetune --dist_timeout -1', 'finetune', '--dist_timeout', '-1')
simple('R37', 'ranges', 'finetune --length_buckets 0,-4', 'finetune', '--length_buckets', '0,-4')
simple('R38', 'ranges', "finetune --task_overrides '{RTE: {lr: .nan}}'", 'finetune', '--task_overrides',
       '{RTE: {lr: .nan}}')
simple('R39', 'ranges', "finetune --task_overrides '{RTE: {batch_size: \"8\"}}' (a quoted number: 8, as on the command "
       "line)", 'finetune', '--task_overrides', '{RTE: {batch_size: "8"}}', expect='ok')
simple('R40', 'ranges', 'finetune --stack_runs -2', 'finetune', '--stack_runs', '-2')
simple('R41', 'ranges', 'finetune --ensemble_k 0', 'finetune', '--ensemble_k', '0')

simple('R45', 'ranges', 'compare --steps -1', 'compare', '--steps', '-1', '--dry_run', 'true')
simple('R46', 'ranges', 'compare --seeds -1', 'compare', '--seeds', '-1', '--dry_run', 'true')
simple('R47', 'ranges', 'compare --finetune_at 1.5', 'compare', '--finetune_at', '1.5', '--dry_run', 'true')
simple('R48', 'ranges', 'compare --finetune.lr nan', 'compare', '--finetune.lr', 'nan', '--dry_run', 'true')
simple('R49', 'ranges', 'compare --pretrain.temperature -1', 'compare', '--pretrain.temperature', '-1', '--dry_run', 'true')


@case('R55', 'ranges', 'task YAML: epochs: .nan')
def _(c): return ft_task(c, task(c, TASK_YAML + 'epochs: .nan\n'))


@case('R56', 'ranges', 'task YAML: max_length: 0')
def _(c): return ft_task(c, task(c, TASK_YAML + 'max_length: 0\n'))


@case('R57', 'ranges', 'task YAML: batch_size: -8')
def _(c): return ft_task(c, task(c, TASK_YAML + 'batch_size: -8\n'))


@case('R58', 'ranges', 'task YAML: lr: fast (a string)')
def _(c): return ft_task(c, task(c, TASK_YAML + 'lr: fast\n'))


@case('R59', 'ranges', 'task YAML: epochs: 1e9 (YAML 1.1 reads a string)')
def _(c): return ft_task(c, task(c, TASK_YAML + 'epochs: 1e9\n'))


@case('R60', 'ranges', 'QA task YAML: doc_stride: -16')
def _(c): return ft_task(c, qa(c, SQUAD_YAML.replace('doc_stride: 16', 'doc_stride: -16')))


@case('R61', 'ranges', 'QA task YAML: max_answer_length: 0')
def _(c): return ft_task(c, qa(c, SQUAD_YAML + 'max_answer_length: 0\n'))


@case('R62', 'ranges', 'QA task YAML: na_threshold: .inf')
def _(c): return ft_task(c, qa(c, SQUAD_YAML + 'na_threshold: .inf\n'))


@case('R63', 'ranges', 'tagging task YAML: stride: -1')
def _(c): return ft_task(c, tag(c, NER_YAML + 'stride: -1\n'))


# ======================================================================== U: user strings that become paths

def _entries(c) -> set:
    "What lies in this case's folder (by name) and beside it, in the sweep's folders."
    return {('case', p.name) for p in c.dir.iterdir()} | \
        {('work', p.name) for p in (*c.dir.parent.iterdir(), *c.dir.parent.parent.iterdir())}


def _outside(c, before: set) -> str:
    """What appeared since `before` outside the folders the job was given (ft/, test/ of this case's folder), as a wrong
    result; other cases' folders (of a sweep run beside this one) left out."""
    new = {f'{where}/{n}' for where, n in _entries(c) - before
           if not (where == 'case' and n in ('ft', 'test')) and not re.fullmatch(r'[A-Z]\d\d|[\w.-]+\.(json|log)', n)}
    return f'written outside the given folders: {sorted(new)}' if new else ''


def _named_task(c, name: str, yaml_text: str = TASK_YAML, maker=task, *args) -> Proc:
    path = maker(c, f'name: {json.dumps(name)}\n' + yaml_text)
    before = _entries(c)
    p = ft_task(c, path, '--predict', 'true', *args)
    p.wrong = _outside(c, before)
    return p


@case('U01', 'names', "task YAML: name: ../../escape (the issue's case 3)")
def _(c): return _named_task(c, '../../escape', TASK_YAML + 'test: dev.csv\n')


@case('U02', 'names', 'task YAML: name: an absolute path')
def _(c): return _named_task(c, str(c.dir.parent / 'abs'), TASK_YAML + 'test: dev.csv\n')


@case('U03', 'names', 'task YAML: name: a/b (a separator)')
def _(c): return _named_task(c, 'a/b')


@case('U04', 'names', 'task YAML: name: -rf (a leading dash)')
def _(c): return _named_task(c, '-rf')


@case('U05', 'names', 'task YAML: name of 300 characters (too long for a file name)')
def _(c): return _named_task(c, 'x' * 300)


@case('U06', 'names', 'task YAML: name with a newline')
def _(c): return _named_task(c, 'a\nb')


@case('U07', 'names', 'task YAML: name: .. ')
def _(c): return _named_task(c, '..')


@case('U08', 'names', 'tagging task YAML: name: ../x')
def _(c): return _named_task(c, '../x', NER_YAML, tag)


@case('U09', 'names', 'QA task YAML: name: ../../x')
def _(c): return _named_task(c, '../../x', SQUAD_YAML, qa)


simple('U10', 'names', 'finetune --group ../escape', 'finetune', '--group', '../escape')
simple('U11', 'names', 'finetune --group ..', 'finetune', '--group', '..')
simple('U12', 'names', "finetune --group '' (empty)", 'finetune', '--group', '')
simple('U13', 'names', 'finetune --group with a control character', 'finetune', '--group', 'a\x01b')
simple('U14', 'names', 'pretrain --run_name ../x', 'pretrain', '--run_name', '../x')
simple('U15', 'names', 'pretrain --run_name=-x (a leading dash)', 'pretrain', '--run_name=-x')
simple('U16', 'names', 'pretrain --run_name of 300 characters', 'pretrain', '--run_name', 'r' * 300)
simple('U17', 'names', 'compare --name ../x', 'compare', '--name', '../x', '--dry_run', 'true')
simple('U18', 'names', "compare --variants '{../v: {config: \"\"}}'", 'compare', '--variants', "{'../v': {config: ''}}",
       '--dry_run', 'true')


@case('U19', 'names', 'finetune --group \'my group\' (a space: a fine folder name)', expect='ok')
def _(c):
    p = c.finetune('--group', 'my group')
    if p.rc == 0 and not (c.dir / 'ft' / 'my group' / 'results.csv').is_file(): p.wrong = 'no results.csv in ft/my group'
    return p


@case('U20', 'names', 'task YAML: name in another script (名前_नाम): a fine file name', expect='ok')
def _(c):
    p = ft_task(c, task(c, 'name: 名前_नाम\n' + TASK_YAML))
    if p.rc == 0 and not (c.dir / 'ft' / 'demo' / '名前_नाम_0.pth').is_file() and \
            not list((c.dir / 'ft').rglob('名前_नाम_0.pth')):
        p.wrong = 'no 名前_नाम_0.pth written'
    return p


# ======================================================================== M: metrics and task kinds

THREE = CSV_HEAD + ''.join(f'r{i},"the film was {w} today .",{w}\n' for i, w in
                           enumerate(['good', 'bad', 'meh'] * 10))
THREE_DEV = CSV_HEAD + ''.join(f'd{i},"the film was {w} today .",{w}\n' for i, w in enumerate(['good', 'bad', 'meh'] * 3))
REG = CSV_HEAD + ''.join(f'r{i},"the film was {w} today .",{s}\n' for i, (w, s) in
                         enumerate([('good', '4.5'), ('bad', '0.5'), ('fine', '2.5')] * 8))
REG_YAML = TASK_YAML.replace('classification', 'regression')
ML_YAML = TASK_YAML.replace('classification', 'multilabel')


def _three(c, metrics: str) -> Proc:
    return ft_task(c, task(c, TASK_YAML + f'metrics: {metrics}\n', **{'train.csv': THREE, 'dev.csv': THREE_DEV}))


def _reports(p: Proc, name: str) -> Proc:
    if p.rc == 0 and name not in p.stdout: p.wrong = f'{name} not reported'
    return p


@case('M01', 'metrics', "metrics: [f1] on a three-class task (the issue's case 2)")
def _(c): return _three(c, '[f1]')


@case('M02', 'metrics', 'metrics: [mcc] on a three-class task (defined for many classes)', expect='ok')
def _(c): return _reports(_three(c, '[mcc]'), 'mcc')


@case('M03', 'metrics', 'metrics: [f1_macro] on a three-class task (an averaging named)', expect='ok')
def _(c): return _reports(_three(c, '[f1_macro]'), 'f1_macro')


@case('M04', 'metrics', 'metrics: [f1] on a two-class task', expect='ok')
def _(c): return _reports(ft_task(c, task(c, TASK_YAML + 'metrics: [f1]\n')), 'f1')


@case('M05', 'metrics', 'regression task: metrics: [accuracy]')
def _(c): return ft_task(c, task(c, REG_YAML + 'metrics: [accuracy]\n', **{'train.csv': REG, 'dev.csv': REG}))


@case('M06', 'metrics', 'regression task: metrics: [f1]')
def _(c): return ft_task(c, task(c, REG_YAML + 'metrics: [f1]\n', **{'train.csv': REG, 'dev.csv': REG}))


@case('M07', 'metrics', 'classification task: metrics: [pearson, spearman]')
def _(c): return ft_task(c, task(c, TASK_YAML + 'metrics: [pearson, spearman]\n'))


@case('M08', 'metrics', 'multilabel task: metrics: [pearson]')
def _(c): return ft_task(c, task(c, ML_YAML + 'metrics: [pearson]\n'))


@case('M09', 'metrics', 'tagging task: metrics: [pearson]')
def _(c): return ft_task(c, tag(c, NER_YAML + 'metrics: [pearson]\n'))


@case('M10', 'metrics', 'tagging task: metrics: [mcc]')
def _(c): return ft_task(c, tag(c, NER_YAML + 'metrics: [mcc]\n'))


@case('M11', 'metrics', 'QA task: metrics: [accuracy]')
def _(c): return ft_task(c, qa(c, SQUAD_YAML + 'metrics: [accuracy]\n'))


@case('M12', 'metrics', 'classification task: metrics: [] (empty: the default, accuracy)', expect='ok')
def _(c): return _reports(ft_task(c, task(c, TASK_YAML + 'metrics: []\n')), 'accuracy')


@case('M13', 'metrics', 'regression dev set whose labels are all equal: pearson undefined, said so (not 0)', expect='ok')
def _(c):
    dev = CSV_HEAD + ''.join(f'd{i},"the film was good .",2.5\n' for i in range(8))
    p = ft_task(c, task(c, REG_YAML, **{'train.csv': REG, 'dev.csv': dev}))
    if p.rc == 0 and 'undefined' not in (p.stdout + p.stderr).lower(): p.wrong = 'an undefined pearson reported as a number'
    return p


@case('M14', 'metrics', 'classification dev set of one class, metrics [mcc]: 0, as the official MCCScorer (scikit-learn) '
                        'defines it', expect='ok')
def _(c):
    dev = CSV_HEAD + ''.join(f'd{i},"the film was good .",good\n' for i in range(8))
    return ft_task(c, task(c, TASK_YAML + 'metrics: [mcc]\n', **{'dev.csv': dev}))


@case('M15', 'metrics', 'multilabel task: metrics: [macro_f1] (now f1_macro: refused, naming it)')
def _(c):
    rows = CSV_HEAD + ''.join(f'r{i},"the film was {w} .","{l}"\n' for i, (w, l) in
                              enumerate([('good', 'pos,film'), ('bad', 'neg'), ('long', 'film')] * 8))
    return _reports(ft_task(c, task(c, ML_YAML + 'metrics: [macro_f1]\n', **{'train.csv': rows, 'dev.csv': rows})),
                    'macro_f1')


# ======================================================================== L: values read from data

def _reg(c, train: str = REG, dev: str = REG, yaml_text: str = REG_YAML) -> Proc:
    return ft_task(c, task(c, yaml_text, **{'train.csv': train, 'dev.csv': dev}))


@case('L01', 'data values', "regression train label nan (the issue's case 1)")
def _(c): return _reg(c, REG.replace(',4.5\n', ',nan\n', 1))


@case('L02', 'data values', 'regression train label inf')
def _(c): return _reg(c, REG.replace(',4.5\n', ',inf\n', 1))


@case('L03', 'data values', 'regression dev label NaN')
def _(c): return _reg(c, dev=REG.replace(',0.5\n', ',NaN\n', 1))


@case('L04', 'data values', 'classification CSV with an empty label cell')
def _(c): return ft_task(c, task(c, **{'train.csv': CSV_HEAD + _csv_rows().replace(',bad\n', ',\n', 1)}))


def _jsonl(rows) -> str: return ''.join(json.dumps(r) + '\n' for r in rows)


JSONL_YAML = TASK_YAML.replace('.csv', '.jsonl')
GOOD_JSONL = [{'id': f'r{i}', 'text': f'the film was {w} .', 'label': w} for i, w in enumerate(['good', 'bad'] * 12)]


@case('L05', 'data values', 'JSONL classification label null')
def _(c):
    rows = GOOD_JSONL + [{'id': 'x', 'text': 'the film', 'label': None}]
    return ft_task(c, task(c, JSONL_YAML, **{'train.jsonl': _jsonl(rows), 'dev.jsonl': _jsonl(GOOD_JSONL)}))


@case('L06', 'data values', 'JSONL labels of mixed type (1 and "1")')
def _(c):
    rows = [{'id': f'r{i}', 'text': f'film {i % 2}', 'label': (i % 2 if i % 4 else str(i % 2))} for i in range(24)]
    return ft_task(c, task(c, JSONL_YAML, **{'train.jsonl': _jsonl(rows), 'dev.jsonl': _jsonl(rows)}))


@case('L07', 'data values', 'parquet classification label NaN (a float column)')
def _(c):
    import pandas as pd
    df = pd.DataFrame({'id': [f'r{i}' for i in range(24)], 'text': ['the film'] * 24,
                       'label': [float(i % 2) for i in range(23)] + [float('nan')]})
    df.to_parquet(c.p('train.parquet'))
    df.iloc[:8].fillna(0.0).to_parquet(c.p('dev.parquet'))
    return ft_task(c, task(c, TASK_YAML.replace('.csv', '.parquet'), **{'train.csv': None, 'dev.csv': None}))


@case('L08', 'data values', 'TSV regression label NaN')
def _(c):
    tsv = lambda s: s.replace(',"', '\t').replace('",', '\t').replace('id,text,label', 'id\ttext\tlabel')
    return ft_task(c, task(c, REG_YAML.replace('.csv', '.tsv'),
                           **{'train.tsv': tsv(REG.replace(',2.5\n', ',NaN\n', 1)), 'dev.tsv': tsv(REG)}))


@case('L09', 'data values', 'JSONL dev label never seen in training')
def _(c):
    dev = GOOD_JSONL[:6] + [{'id': 'd', 'text': 'the film', 'label': 'meh'}]
    return ft_task(c, task(c, JSONL_YAML, **{'train.jsonl': _jsonl(GOOD_JSONL), 'dev.jsonl': _jsonl(dev)}))


@case('L10', 'data values', 'test CSV with an id holding a tab (it would break the predictions TSV)')
def _(c):
    test = CSV_HEAD + 'ab\tcd,"the film",good\n' + _csv_rows(4, 300)
    return ft_task(c, task(c, TASK_YAML + 'test: test.csv\n', **{'test.csv': test}), '--predict', 'true')


@case('L11', 'data values', 'JSONL test id holding a newline')
def _(c):
    test = [{'id': 'a\nb', 'text': 'the film', 'label': 'good'}] + GOOD_JSONL[:4]
    return ft_task(c, task(c, JSONL_YAML + 'test: test.jsonl\n', **{
        'train.jsonl': _jsonl(GOOD_JSONL), 'dev.jsonl': _jsonl(GOOD_JSONL), 'test.jsonl': _jsonl(test)}), '--predict', 'true')


@case('L12', 'data values', 'classification labels 0, 1 and nan (NaN as a class?)')
def _(c):
    rows = CSV_HEAD + _csv_rows().replace(',good\n', ',1\n').replace(',bad\n', ',0\n').replace(',1\n', ',nan\n', 1)
    dev = CSV_HEAD + _csv_rows(8, 100).replace(',good\n', ',1\n').replace(',bad\n', ',0\n')
    return ft_task(c, task(c, **{'train.csv': rows, 'dev.csv': dev}))


@case('L13', 'data values', 'fine-tuning that diverges (--lr 1e6): NaN loss, stopped naming the step')
def _(c): return c.finetune('--lr', '1e6', '--epochs', '2')


@case('L14', 'data values', 'a diverged task file run (regression, lr: 1e8, 20 epochs): stopped, no score recorded')
def _(c):
    # 24 rows are one step an epoch, and the first step's rate is 0 (warm-up): 20 epochs let the rate reach 1e8
    p = _reg(c, yaml_text=REG_YAML + 'lr: 1.0e+8\nepochs: 20\nbatch_size: 8\n')
    rows = list((c.dir / 'ft').rglob('results.csv'))
    if rows and 'nan' in rows[0].read_text().lower(): p.wrong = 'a NaN score kept in results.csv'
    return p


# ======================================================================== X: edited between runs

def _task_group(c, *args) -> tuple[Path, Proc]:
    "A task file fine-tuned into group g; the task file's path and the first run."
    path = task(c)
    return path, ft_task(c, path, '--group', 'g', *args)


def _redone(p: Proc, why: str) -> Proc:
    if p.rc == 0 and 'finished before' in p.stdout: p.wrong = f'{why}: the earlier result was reused'
    return p


@case('X01', 'edited', 'task file run, then its train CSV edited (one label flipped), same command', expect='ok')
def _(c):
    path, first = _task_group(c)
    if first.rc: return first
    (c.dir / 'train.csv').write_text(CSV_HEAD + _csv_rows().replace(',bad\n', ',good\n', 1))
    return _redone(ft_task(c, path, '--group', 'g'), 'the train file changed')


@case('X02', 'edited', 'task file run, then its dev CSV edited, same command', expect='ok')
def _(c):
    path, first = _task_group(c)
    if first.rc: return first
    (c.dir / 'dev.csv').write_text(CSV_HEAD + _csv_rows(8, 100).replace('film', 'book'))
    return _redone(ft_task(c, path, '--group', 'g'), 'the dev file changed')


@case('X03', 'edited', 'task file run, then the task file given epochs: 2, same command', expect='ok')
def _(c):
    path, first = _task_group(c)
    if first.rc: return first
    path.write_text(TASK_YAML + 'epochs: 2\n')
    return _redone(ft_task(c, path, '--group', 'g'), 'the task file changed')


@case('X04', 'edited', 'task file run, then the same command unchanged: reused', expect='ok')
def _(c):
    path, first = _task_group(c)
    if first.rc: return first
    p = ft_task(c, path, '--group', 'g')
    if p.rc == 0 and 'finished before' not in p.stdout: p.wrong = 'an unchanged run was trained again'
    return p


@case('X05', 'edited', 'task file run, its train CSV touched (same bytes): reused', expect='ok')
def _(c):
    path, first = _task_group(c)
    if first.rc: return first
    time.sleep(0.01)
    (c.dir / 'train.csv').write_bytes((c.dir / 'train.csv').read_bytes())
    p = ft_task(c, path, '--group', 'g')
    if p.rc == 0 and 'finished before' not in p.stdout: p.wrong = 'a touched, unchanged file made the run train again'
    return p


@case('X06', 'edited', 'GLUE run, then RTE dev.tsv edited in the data folder, same command', expect='ok')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    first = c.finetune('--data', c.dir / 'glue', '--group', 'g')
    if first.rc: return first
    dev = c.dir / 'glue' / 'RTE' / 'dev.tsv'
    lines = dev.read_text().splitlines()
    dev.write_text('\n'.join(lines[:len(lines) // 2]) + '\n')
    return _redone(c.finetune('--data', c.dir / 'glue', '--group', 'g'), 'the dev file changed')


@case('X07', 'edited', 'GLUE run into group g, then --max_length 32 into the same group (the demo preset: 64)', expect='ok')
def _(c):
    first = _ft_group(c)
    if first.rc: return first
    return _redone(_ft_group(c, '--max_length', '32'), '--max_length changed')


@case('X08', 'edited', 'GLUE run into group g, then --max_train_samples 32 into the same group', expect='ok')
def _(c):
    first = _ft_group(c)
    if first.rc: return first
    return _redone(_ft_group(c, '--max_train_samples', '32'), '--max_train_samples changed')


def _pretrain_text(c, name: str = 'corpus.txt', n: int = 300) -> Path:
    return c.write(name, ''.join(f'the cat number {i % 7} sat on mat {i % 5} .\nit was happy .\n\n' for i in range(n)))


def _half_run(c, *args) -> Proc:
    "A 4-step run on a corpus of its own, its last checkpoint removed so --resume continues at step 2."
    first = c.pretrain('--corpus', _pretrain_text(c), *args)
    if first.rc: return first
    (c.dir / 'out' / 'c_11081_100%.pth').unlink()
    return first


@case('X10', 'edited', 'pretrain --resume after the corpus file was edited')
def _(c):
    first = _half_run(c)
    if first.rc: return first
    _pretrain_text(c, n=280)
    return c.pretrain('--corpus', c.dir / 'corpus.txt', '--resume')


@case('X11', 'edited', 'pretrain --resume with another --mask_prob')
def _(c):
    first = _half_run(c)
    if first.rc: return first
    return c.pretrain('--corpus', c.dir / 'corpus.txt', '--resume', '--mask_prob', '0.3')


@case('X12', 'edited', 'pretrain --resume with a lower --lr (after a divergence): goes on, said in one line', expect='ok')
def _(c):
    first = _half_run(c)
    if first.rc: return first
    p = c.pretrain('--corpus', c.dir / 'corpus.txt', '--resume', '--lr', '2e-4')  # the demo preset's: 1e-3
    if p.rc == 0 and 'resume: lr was' not in p.stdout: p.wrong = 'the learning rate changed without a word'
    return p


@case('X13', 'edited', 'pretrain --resume with another --batch_size')
def _(c):
    first = _half_run(c)
    if first.rc: return first
    return c.pretrain('--corpus', c.dir / 'corpus.txt', '--resume', '--batch_size', '4')


@case('X14', 'edited', 'pretrain --resume after the corpus was touched (same bytes): resumes', expect='ok')
def _(c):
    first = _half_run(c)
    if first.rc: return first
    f = c.dir / 'corpus.txt'
    f.write_bytes(f.read_bytes())
    p = c.pretrain('--corpus', f, '--resume')
    if p.rc == 0 and 'starting at step' not in p.stdout: p.wrong = 'did not resume'
    return p


@case('X15', 'edited', 'pretrain --resume of a finished 4-step run with --steps 8 (more steps: legitimate)', expect='ok')
def _(c):
    first = c.pretrain('--corpus', _pretrain_text(c))
    if first.rc: return first
    p = c.pretrain('--corpus', c.dir / 'corpus.txt', '--resume', '--steps', '8')
    if p.rc == 0 and 'of 8' not in p.stdout: p.wrong = 'did not continue to step 8'
    return p


# ======================================================================== S: text in other scripts

SCRIPTS = {
    'ja': ['かがみ は ひかり を うつす 。', 'かかみ と かがみ は ちがう ことば です 。', '日本語 の 文章 を 読む 。',
           'ぱん と はん と ばん 。', 'カード と ガード は ちがう 。'],
    'hi': ['कुत्ता भौंकता है ।', 'कत्ता एक और शब्द है ।', 'किताब मेज़ पर है ।', 'हिंदी में मात्राएँ महत्वपूर्ण हैं ।',
           'हम घर जाते हैं ।'],
    'ar': ['أكل الولد التفاحة .', 'إلى البيت الكبير .', 'آمن الرجل .', 'مَدرسة و مدرسة .', 'سأل عن الطريق .'],
    'zh': ['我们 学习 中文 。', '日本语 和 中文 不同 。', '北京 是 首都 。'],
    'ko': ['한국어 를 공부 합니다 .', '서울 은 큰 도시 입니다 .'],
    'th': ['กิน ข้าว แล้ว หรือ ยัง', 'กน เป็น คำ อื่น'],
    'he': ['שָׁלוֹם עוֹלָם', 'שלום עולם'],
    'en': ['The café in Zürich was naïve .', 'The cafe was plain .', 'RÉSUMÉ and resume differ .'],
}


def _scripts_run(c) -> Path:
    "A 2-step pretraining whose tokenizer is trained on every script above (lowercase: true, the default)."
    text = ''.join(''.join(line + '\n' for line in lines) * 30 + '\n' for lines in SCRIPTS.values())
    return _pretrained(c, 'scripts', '--vocab_size', '1500', '--max_length', '32', '--eval_examples', '0',
                       '--sentence_split', 'none', corpus=text)


def _tok_check(c, body: str, folder: str = 'discriminator') -> Proc:
    "`body` run with `tok`, the AutoTokenizer of the scripts run's export, and `pieces(text)`, its tokens."
    run = _scripts_run(c)
    return _python(c, f"""
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(run / folder)!r})
        pieces = lambda t: tok.tokenize(t)
        def differ(a, b):
            if pieces(a) == pieces(b): print(f'WRONG: {{a!r}} and {{b!r}} tokenize alike: {{pieces(a)}}')
        def keeps(t):
            back = tok.decode(tok.encode(t, add_special_tokens=False)).replace(' ', '')
            if back != t.lower().replace(' ', ''): print(f'WRONG: {{t!r}} comes back as {{back!r}}')
        def known(t):
            if tok.unk_token in pieces(t): print(f'WRONG: {{t!r}} holds [UNK]: {{pieces(t)}}')
        {textwrap.indent(textwrap.dedent(body), ' ' * 8).strip()}
    """)


@case('S01', 'scripts', 'Japanese: dakuten kept (かがみ/かかみ, カード/ガード, ぱん/はん/ばん)', expect='ok')
def _(c): return _tok_check(c, "differ('かがみ', 'かかみ'); differ('カード', 'ガード'); differ('ぱん', 'はん'); differ('ばん', 'はん')")


@case('S02', 'scripts', 'Hindi: vowel signs and virama kept (कुत्ता/कत्ता, है comes back as है)', expect='ok')
def _(c): return _tok_check(c, "differ('कुत्ता', 'कत्ता'); keeps('है'); keeps('हिंदी'); keeps('मात्राएँ')")


@case('S03', 'scripts', 'Arabic: hamza forms kept (أ/إ/آ/ا), harakat kept', expect='ok')
def _(c): return _tok_check(c, "keeps('أكل'); keeps('إلى'); keeps('آمن'); differ('مَدرسة', 'مدرسة')")


@case('S04', 'scripts', 'Chinese and Japanese kanji: one token per character', expect='ok')
def _(c):
    return _tok_check(c, """
        for t in ('中文', '日本语', '北京'):
            if pieces(t) != list(t): print(f'WRONG: {t!r} -> {pieces(t)}, not one token per character')
    """)


@case('S05', 'scripts', 'Korean: syllables come back whole', expect='ok')
def _(c): return _tok_check(c, "keeps('한국어'); keeps('서울'); known('한국어')")


@case('S06', 'scripts', 'Thai: vowel marks kept (กิน/กน)', expect='ok')
def _(c): return _tok_check(c, "differ('กิน', 'กน'); keeps('กิน')")


@case('S07', 'scripts', 'Hebrew: points kept (שָׁלוֹם/שלום)', expect='ok')
def _(c): return _tok_check(c, "differ('שָׁלוֹם', 'שלום'); keeps('שָׁלוֹם')")


@case('S08', 'scripts', 'English with lowercase: true: case folded (Café = café)', expect='ok')
def _(c):
    return _tok_check(c, """
        if pieces('Café') != pieces('café'): print(f"WRONG: Café and café differ: {pieces('Café')} {pieces('café')}")
        if pieces('RESUME') != pieces('resume'): print('WRONG: RESUME and resume differ')
    """)


@case('S09', 'scripts', 'the generator export tokenizes as the discriminator export', expect='ok')
def _(c):
    return _tok_check(c, """
        from transformers import AutoTokenizer
        gen = AutoTokenizer.from_pretrained(%r)
        for t in ('かがみ', 'कुत्ता', 'أكل', 'Café'):
            if gen.tokenize(t) != pieces(t): print(f'WRONG: {t!r}: generator {gen.tokenize(t)} vs {pieces(t)}')
    """ % str(_scripts_run(c) / 'generator'))


@case('S10', 'scripts', 'the fine-tuning of a Hindi task file from the scripts run keeps the marks (no [UNK]s)', expect='ok')
def _(c):
    run = _scripts_run(c)
    words = ['कुत्ता भौंकता है', 'किताब मेज़ पर है']
    rows = CSV_HEAD + ''.join(f'r{i},{words[i % 2]},{("a", "b")[i % 2]}\n' for i in range(24))
    p = ft_task(c, task(c, **{'train.csv': rows, 'dev.csv': rows}), '--model', run.parent / 'c_11081_100%.pth')
    if p.rc == 0 and 'warning' in p.stderr and '[UNK]' in p.stderr: p.wrong = 'the Hindi text became [UNK]'
    return p


@case('S11', 'scripts', 'the official uncased vocab.txt given as --tokenizer still strips accents (as BERT)', expect='ok')
def _(c):
    vocab = c.write('vocab.txt', '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncafe\nthe\n.\n' + ''.join(f'{ch}\n##{ch}\n' for ch in
                                                                                           'abcdefghijklmnopqrstuvwxyz'))
    p = c.pretrain('--tokenizer', vocab, '--steps', '1', '--output_dir', c.p('out'))
    if p.rc: return p
    check = _python(c, f"""
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(c.dir / 'out' / 'c_11081' / 'discriminator')!r})
        if tok.tokenize('Café') != ['cafe']: print(f"WRONG: Café -> {{tok.tokenize('Café')}} with BERT's uncased rules")
    """)
    return check


@case('S12', 'scripts', 'a Japanese corpus of 1 500 distinct kanji: the rarer ones are not [UNK]', expect='ok')
def _(c):
    chars = [chr(0x4E00 + i * 7) for i in range(1500)]
    lines = ''.join(' '.join(chars[j:j + 20]) + ' 。\n' for j in range(0, 1500, 20)) * 3 + '\n'
    common = ('日本 の 文章 を 読む 。\n' * 400) + '\n'
    run = _pretrained(c, 'kanji', '--vocab_size', '8000', '--max_length', '32', '--eval_examples', '0',
                      '--sentence_split', 'none', corpus=common + lines)
    return _python(c, f"""
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(run / 'discriminator')!r})
        rare = {''.join(chars[-50:])!r}
        unk = sum(p == tok.unk_token for p in tok.tokenize(rare))
        if unk: print(f'WRONG: {{unk}} of 50 kanji seen 3 times in the corpus are [UNK]')
    """)


# ======================================================================== Z: encodings and compressed files

TEXT = ''.join(f'the cat number {i % 7} sat on the mat .\nit was happy .\n\n' for i in range(300))
COMPRESS = {'gz': gzip.compress, 'bz2': bz2.compress, 'xz': lzma.compress}


def _zstd(data: bytes) -> bytes:
    "zstd's frame (the magic bytes and a raw block), enough to be recognised; no zstd module needed."
    import struct
    return b'\x28\xb5\x2f\xfd' + bytes([0x20, len(data) & 0xFF]) + struct.pack('<I', (len(data) << 3) | 1)[:3] + data


COMPRESS['zst'] = _zstd


def _corpus(c, name: str, data: bytes) -> Proc: return c.pretrain('--corpus', c.write(name, data))


for _i, _ext in enumerate(('gz', 'bz2', 'xz', 'zst'), 1):
    case(f'Z0{_i}', 'encodings', f'pretrain --corpus corpus.txt.{_ext} (compressed)')(
        lambda c, e=_ext: _corpus(c, f'corpus.txt.{e}', COMPRESS[e](TEXT.encode())))


@case('Z05', 'encodings', 'pretrain --corpus a gzip file named corpus.txt (no suffix to tell)')
def _(c): return _corpus(c, 'corpus.txt', gzip.compress(TEXT.encode()))


@case('Z06', 'encodings', 'pretrain --corpus a directory of two text files and one .txt.gz')
def _(c):
    c.write('dir/a.txt', TEXT)
    c.write('dir/b.txt', TEXT.replace('cat', 'dog'))
    c.write('dir/c.txt.gz', gzip.compress(TEXT.replace('cat', 'cow').encode()))
    return c.pretrain('--corpus', c.dir / 'dir')


@case('Z07', 'encodings', 'pretrain --corpus a directory of .txt.bz2 files only')
def _(c):
    for n in range(3): c.write(f'dir/{n}.txt.bz2', bz2.compress(TEXT.encode()))
    return c.pretrain('--corpus', c.dir / 'dir')


@case('Z08', 'encodings', 'pretrain --corpus a Shift-JIS Japanese file')
def _(c): return _corpus(c, 'ja.txt', ('かがみ は ひかり を うつす 。\n日本語 の 文章 。\n\n' * 200).encode('shift_jis'))


@case('Z09', 'encodings', 'pretrain --corpus a GBK Chinese file')
def _(c): return _corpus(c, 'zh.txt', ('我们 学习 中文 。\n北京 是 首都 。\n\n' * 200).encode('gbk'))


@case('Z10', 'encodings', 'pretrain --corpus a windows-1256 Arabic file')
def _(c): return _corpus(c, 'ar.txt', ('أكل الولد التفاحة .\nإلى البيت .\n\n' * 200).encode('cp1256'))


@case('Z11', 'encodings', 'pretrain --corpus a UTF-32 file')
def _(c): return _corpus(c, 'u32.txt', TEXT.encode('utf-32'))


@case('Z12', 'encodings', 'pretrain --corpus UTF-8 with a byte-order mark and CRLF lines: read as text', expect='ok')
def _(c):
    p = c.run(c.cmd(['pretrain.py'], *c.pretrain_args(tokenizer=False), '--vocab_size', '1000', '--corpus',
                    c.write('bom.txt', ('\ufeff' + TEXT.replace('\n', '\r\n')).encode())))
    vocab = c.dir / 'out' / 'c_11081' / 'discriminator' / 'tokenizer.json'
    if p.rc == 0 and vocab.is_file() and any(ch in vocab.read_text() for ch in ('\ufeff', '\\ufeff', '\\r')):
        p.wrong = 'the BOM or a CR is in the vocabulary'
    return p


@case('Z13', 'encodings', 'pretrain --tokenizer vocab.txt.gz')
def _(c):
    words = json.loads((c.export / 'discriminator' / 'tokenizer.json').read_text())['model']['vocab']
    return c.pretrain('--tokenizer', c.write('vocab.txt.gz', gzip.compress(''.join(w + '\n' for w in words).encode())))


@case('Z14', 'encodings', 'task YAML: train: train.csv.gz')
def _(c):
    return ft_task(c, task(c, TASK_YAML.replace('train.csv', 'train.csv.gz'),
                           **{'train.csv.gz': gzip.compress((CSV_HEAD + _csv_rows()).encode())}))


@case('Z15', 'encodings', 'task YAML: train.csv that is gzip bytes')
def _(c): return ft_task(c, task(c, **{'train.csv': gzip.compress((CSV_HEAD + _csv_rows()).encode())}))


@case('Z16', 'encodings', 'task YAML: train: train.jsonl.xz')
def _(c):
    return ft_task(c, task(c, JSONL_YAML.replace('train.jsonl', 'train.jsonl.xz'),
                           **{'train.jsonl.xz': lzma.compress(_jsonl(GOOD_JSONL).encode()), 'dev.jsonl': _jsonl(GOOD_JSONL)}))


@case('Z17', 'encodings', 'task YAML: parquet files written with zstd compression inside (parquet\'s own)', expect='ok')
def _(c):
    import pandas as pd
    df = pd.DataFrame(GOOD_JSONL)
    df.to_parquet(c.p('train.parquet'), compression='zstd')
    df.to_parquet(c.p('dev.parquet'), compression='zstd')
    return ft_task(c, task(c, TASK_YAML.replace('.csv', '.parquet'), **{'train.csv': None, 'dev.csv': None}))


MRQA_YAML = 'kind: mrqa\ntrain: train.jsonl.gz\ndev: dev.jsonl\nmax_length: 64\ndoc_stride: 16\nmax_query_length: 16\n'


def _mrqa(n: int) -> str:
    line = lambda i: json.dumps({'context': 'Borin lives under the oak.', 'qas': [
        {'qid': f'q{i}', 'question': 'Where?', 'answers': ['the oak'],
         'detected_answers': [{'text': 'the oak', 'char_spans': [[18, 24]]}]}]}) + '\n'
    return json.dumps({'header': {'dataset': 'x'}}) + '\n' + ''.join(map(line, range(n)))


@case('Z18', 'encodings', 'MRQA train.jsonl.gz (the official, gzipped): read', expect='ok')
def _(c): return ft_task(c, qa(c, MRQA_YAML, **{'train.json': None, 'dev.json': None,
                                                 'train.jsonl.gz': gzip.compress(_mrqa(12).encode()), 'dev.jsonl': _mrqa(4)}))


@case('Z19', 'encodings', 'MRQA train.jsonl.gz that is plain text (not gzip)')
def _(c): return ft_task(c, qa(c, MRQA_YAML, **{'train.json': None, 'dev.json': None,
                                                 'train.jsonl.gz': _mrqa(12), 'dev.jsonl': _mrqa(4)}))


@case('Z20', 'encodings', 'SQuAD train.json that is gzip bytes')
def _(c): return ft_task(c, qa(c, **{'train.json': gzip.compress(json.dumps(_squad()).encode())}))


@case('Z21', 'encodings', 'CoNLL tagging train.txt.gz')
def _(c): return ft_task(c, tag(c, NER_YAML.replace('train.txt', 'train.txt.gz'), **{'train.txt.gz': gzip.compress(NER.encode())}))


@case('Z22', 'encodings', 'GLUE data folder whose RTE/train.tsv is gzip bytes')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    tr = c.dir / 'glue' / 'RTE' / 'train.tsv'
    tr.write_bytes(gzip.compress(tr.read_bytes()))
    return c.finetune('--data', c.dir / 'glue')


@case('Z23', 'encodings', 'GLUE data folder with RTE/train.tsv.gz instead of train.tsv')
def _(c):
    shutil.copytree(c.glue / 'RTE', c.dir / 'glue' / 'RTE')
    tr = c.dir / 'glue' / 'RTE' / 'train.tsv'
    (tr.parent / 'train.tsv.gz').write_bytes(gzip.compress(tr.read_bytes()))
    tr.unlink()
    return c.finetune('--data', c.dir / 'glue')


@case('Z24', 'encodings', 'pretrain --corpus a table train.jsonl.gz')
def _(c): return _corpus(c, 'train.jsonl.gz', gzip.compress(''.join(json.dumps({'text': line}) + '\n'
                                                                      for line in TEXT.split('\n\n')).encode()))


# ======================================================================== A: the export through transformers

def _export(c) -> Path:
    "A 2-step run exported by this code (the tiny pretraining's tokenizer)."
    return _pretrained(c, 'export', '--eval_examples', '0')


def _auto(c, body: str) -> Proc:
    return _python(c, f"""
        import torch, warnings
        warnings.simplefilter('ignore')
        from transformers.utils import logging; logging.set_verbosity_error()
        run = {str(_export(c))!r}
        LONG = 'the cat sat on the mat . ' * 300
        {textwrap.indent(textwrap.dedent(body), ' ' * 8).strip()}
    """)


@case('A01', 'auto', 'AutoModel on discriminator/: ElectraModel, hidden states of the right shape', expect='ok')
def _(c):
    return _auto(c, """
        from transformers import AutoModel, AutoTokenizer
        m, tok = AutoModel.from_pretrained(run + '/discriminator'), AutoTokenizer.from_pretrained(run + '/discriminator')
        out = m(**tok('the cat sat', return_tensors='pt')).last_hidden_state
        if type(m).__name__ != 'ElectraModel' or out.shape[-1] != m.config.hidden_size: print(f'WRONG: {type(m)} {out.shape}')
    """)


@case('A02', 'auto', 'AutoModelForPreTraining on discriminator/: every weight loaded, the library\'s logits', expect='ok')
def _(c):
    return _auto(c, """
        from transformers import AutoModelForPreTraining, AutoTokenizer
        from electra.pretrained.export import load_discriminator
        m, info = AutoModelForPreTraining.from_pretrained(run + '/discriminator', output_loading_info=True)
        if any(info[k] for k in ('missing_keys', 'unexpected_keys', 'mismatched_keys')): print(f'WRONG: {info}')
        ours, tok = load_discriminator(run.replace('/c_11081', '/c_11081_100%.pth'))
        x = tok('the cat sat on the mat', return_tensors='pt')
        m.eval(); ours.eval()
        with torch.no_grad(): a, b = m(**x).logits, ours(**x).logits
        if not torch.allclose(a, b, atol=1e-5): print(f'WRONG: logits differ by {(a - b).abs().max()}')
    """)


@case('A03', 'auto', 'AutoModelForMaskedLM on generator/: every weight loaded', expect='ok')
def _(c):
    return _auto(c, """
        from transformers import AutoModelForMaskedLM
        m, info = AutoModelForMaskedLM.from_pretrained(run + '/generator', output_loading_info=True)
        if any(info[k] for k in ('missing_keys', 'unexpected_keys', 'mismatched_keys')): print(f'WRONG: {info}')
    """)


@case('A04', 'auto', "AutoTokenizer of the export: model_max_length is the model's 512 positions", expect='ok')
def _(c):
    return _auto(c, """
        from transformers import AutoTokenizer, AutoConfig
        for net in ('discriminator', 'generator'):
            tok, cfg = AutoTokenizer.from_pretrained(f'{run}/{net}'), AutoConfig.from_pretrained(f'{run}/{net}')
            if tok.model_max_length != cfg.max_position_embeddings:
                print(f'WRONG: {net}: model_max_length {tok.model_max_length}, positions {cfg.max_position_embeddings}')
    """)


@case('A05', 'auto', 'the export\'s tokenizer with truncation=True on a 2 000-token text: cut to the model\'s length',
      expect='ok')
def _(c):
    return _auto(c, """
        from transformers import AutoTokenizer, AutoModel
        tok = AutoTokenizer.from_pretrained(run + '/discriminator')
        x = tok(LONG, truncation=True, return_tensors='pt')
        if x['input_ids'].shape[1] > 512: print(f"WRONG: truncation=True left {x['input_ids'].shape[1]} tokens")
        AutoModel.from_pretrained(run + '/discriminator')(**x)
    """)


@case('A06', 'auto', "pipeline('fill-mask', generator/) on a short text", expect='ok')
def _(c):
    return _auto(c, """
        from transformers import pipeline
        out = pipeline('fill-mask', model=run + '/generator')('the cat [MASK] on the mat .')
        if len(out) != 5 or not all(o['token_str'].strip() for o in out): print(f'WRONG: {out}')
    """)


@case('A07', 'auto', "pipeline('fill-mask', generator/) on a 2 000-token text, tokenizer_kwargs truncation", expect='ok')
def _(c):
    return _auto(c, """
        from transformers import pipeline
        fill = pipeline('fill-mask', model=run + '/generator')
        out = fill('the [MASK] sat . ' + LONG, tokenizer_kwargs={'truncation': True})
        if len(out) != 5: print(f'WRONG: {out}')
    """)


@case('A08', 'auto', "pipeline('feature-extraction', discriminator/) on a 2 000-token text with truncation", expect='ok')
def _(c):
    return _auto(c, """
        from transformers import pipeline
        out = pipeline('feature-extraction', model=run + '/discriminator', tokenize_kwargs={'truncation': True})(LONG)
        import numpy as np
        if np.array(out).shape[1] > 512: print(f'WRONG: {np.array(out).shape}')
    """)


@case('A09', 'auto', "pipeline('text-classification', discriminator/) (a new head) on a 2 000-token text, truncation",
      expect='ok')
def _(c):
    return _auto(c, """
        from transformers import pipeline
        out = pipeline('text-classification', model=run + '/discriminator')(LONG, truncation=True)
        if not out or 'label' not in out[0]: print(f'WRONG: {out}')
    """)


@case('A10', 'auto', 'AutoModelForSequenceClassification and AutoModelForTokenClassification on discriminator/',
      expect='ok')
def _(c):
    return _auto(c, """
        from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer
        tok = AutoTokenizer.from_pretrained(run + '/discriminator')
        x = tok(['the cat', 'a dog sat'], padding=True, return_tensors='pt')
        s = AutoModelForSequenceClassification.from_pretrained(run + '/discriminator', num_labels=3)(**x).logits
        t = AutoModelForTokenClassification.from_pretrained(run + '/discriminator', num_labels=4)(**x).logits
        if s.shape != (2, 3) or t.shape[-1] != 4: print(f'WRONG: {s.shape} {t.shape}')
    """)


@case('A11', 'auto', 'a run with --max_position_embeddings 64 --max_length 64: the export\'s tokenizer cuts at 64',
      expect='ok')
def _(c):
    run = _pretrained(c, 'pos64', '--max_position_embeddings', '64', '--max_length', '64', '--eval_examples', '0')
    return _python(c, f"""
        from transformers import AutoTokenizer, pipeline
        tok = AutoTokenizer.from_pretrained({str(run / 'discriminator')!r})
        n = len(tok('the cat sat . ' * 100, truncation=True)['input_ids'])
        if n != 64: print(f'WRONG: truncation=True gives {{n}} tokens for 64 positions')
        pipeline('fill-mask', model={str(run / 'generator')!r})('the [MASK] sat . ' * 100, tokenizer_kwargs={{'truncation': True}})
    """)


@case('A12', 'auto', 'a run with --pad_vocab_multiple 64: the export\'s vocabulary is the tokenizer\'s; fill-mask '
      'predicts real tokens', expect='ok')
def _(c):
    run = _pretrained(c, 'pad64', '--pad_vocab_multiple', '64', '--eval_examples', '0')
    return _python(c, f"""
        from transformers import AutoTokenizer, AutoModelForMaskedLM, pipeline
        tok = AutoTokenizer.from_pretrained({str(run / 'generator')!r})
        m = AutoModelForMaskedLM.from_pretrained({str(run / 'generator')!r})
        if m.config.vocab_size != len(tok): print(f'WRONG: vocab {{m.config.vocab_size}} vs tokenizer {{len(tok)}}')
        out = pipeline('fill-mask', model={str(run / 'generator')!r})('the cat [MASK] .', top_k=20)
        if any(o['token'] >= len(tok) for o in out): print('WRONG: a predicted id past the tokenizer')
    """)


@case('A13', 'auto', 'the converted official checkpoint through AutoModel, AutoTokenizer and fill-mask, long input',
      expect='ok')
def _(c):
    p = c.convert('tf', c.tf, '--out', c.dir / 'conv')
    if p.rc: return p
    return _python(c, f"""
        from transformers import AutoTokenizer, AutoModel, pipeline
        out = {str(c.dir / 'conv')!r}
        tok = AutoTokenizer.from_pretrained(out + '/discriminator')
        x = tok('the cat sat . ' * 300, truncation=True, return_tensors='pt')
        AutoModel.from_pretrained(out + '/discriminator')(**x)
        pipeline('fill-mask', model=out + '/generator')('the [MASK] sat . ' * 300, tokenizer_kwargs={{'truncation': True}})
    """)


@case('A14', 'auto', 'fine-tuning a task file of 5 000-character texts from the export folder, --max_length 64',
      expect='ok')
def _(c):
    rows = CSV_HEAD + ''.join(f'r{i},"{("the film was good . " if i % 2 else "the film was bad . ") * 250}",'
                              f'{("bad", "good")[i % 2]}\n' for i in range(24))
    return ft_task(c, task(c, **{'train.csv': rows, 'dev.csv': rows}), '--model', _export(c) / 'discriminator',
                   '--max_length', '64')


@case('A15', 'auto', 'pretrain --init_from the export folder (the round trip)', expect='ok')
def _(c): return c.pretrain('--init_from', _export(c), '--steps', '1')


# ======================================================================== W: two commands on the same output at once

def _two(c, first: list, second: list, ready=None, timeout: int = 400) -> tuple[int, Proc]:
    "`first` started in the background; when `ready()` (default: at once) `second` runs; both waited for."
    log = c.p('first.log')
    proc = c.start(first, log)
    if ready is not None and not wait_for(ready, proc=proc):
        kill_group(proc)
    p = c.run(second, timeout)
    try: rc = proc.wait(timeout)
    except Exception:
        kill_group(proc)
        rc = -9
    p.note = f'first: rc {rc}: {log.read_text().strip().splitlines()[-1:] if log.read_text().strip() else ""}'
    return rc, p


def _loads(path: Path) -> str:
    import torch
    try: torch.load(path, map_location='cpu', weights_only=False)
    except Exception as e: return f'{path.name} does not load ({type(e).__name__})'
    return ''


def _held(c, second: list, first: list) -> Proc:
    """`first`, a 16-step run, stops in the middle of writing its 50% checkpoint (injected), holding its run; `second`
    runs meanwhile; then the first is killed. Its last whole checkpoint must still load."""
    log = c.p('first.log')
    proc = c.start(c.cmd(['pretrain.py'], *first, wrap='hang:50%.pth'), log)
    if not wait_for(lambda: 'INJECT hang' in log.read_text(), proc=proc):
        kill_group(proc)
        return Proc(-1, '', log.read_text(), note='the first run never reached its checkpoint')
    p = c.run(second)
    kill_group(proc)
    if p.rc == 0: return p
    kept = sorted(f.name for f in (c.dir / 'out').glob('c_11081_*.pth'))
    if 'c_11081_25%.pth' not in kept: p.wrong = f"the first run's checkpoints are gone (left: {kept})"
    else: p.wrong = _loads(c.dir / 'out' / 'c_11081_25%.pth')
    return p


@case('W01', 'two at once', 'two pretrain.py of the same run at once: the second refused, the first\'s files intact')
def _(c): return _held(c, c.cmd(['pretrain.py'], *c.pretrain_args(steps=16)), c.pretrain_args(steps=16))


@case('W02', 'two at once', 'pretrain --overwrite of a run that is training: refused, the running one\'s files intact')
def _(c): return _held(c, c.cmd(['pretrain.py'], *c.pretrain_args(steps=16), '--overwrite', 'true'),
                       c.pretrain_args(steps=16))


@case('W03', 'two at once', 'pretrain --resume of a run that is training: refused')
def _(c): return _held(c, c.cmd(['pretrain.py'], *c.pretrain_args(steps=16), '--resume'), c.pretrain_args(steps=16))


@case('W04', 'two at once', 'a new run training its own tokenizer, and the same command while it trains: refused, the '
      'first\'s tokenizer whole')
def _(c):
    args = [*c.pretrain_args(steps=16, tokenizer=False), '--vocab_size', '1000']
    p = _held(c, c.cmd(['pretrain.py'], *args), args)
    tok = c.dir / 'out' / 'c_11081' / 'tokenizer' / 'tokenizer.json'
    if p.rc == 2 and not tok.is_file(): p.wrong = p.wrong or "the first run's tokenizer is gone"
    return p


def _ft_checks(c, group: Path, tasks: dict[str, int]) -> str:
    "One row per run of each task in results.csv, each run's .pth loads."
    import pandas as pd
    if not (group / 'results.csv').is_file(): return 'no results.csv'
    df = pd.read_csv(group / 'results.csv')
    for t, runs in tasks.items():
        got = sorted(df[df['task'] == t]['run'])
        if got != list(range(runs)): return f'results.csv rows of {t}: runs {got}'
        for r in range(runs):
            if bad := _loads(group / f'{t}_{r}.pth'): return bad
    return ''


@case('W05', 'two at once', 'two finetune.py of the same group and task at once: one row per run, weights that load',
      expect='ok')
def _(c):
    args = c.cmd(['finetune.py'], *c.finetune_args(), '--group', 'g', '--runs', '2')
    rc, p = _two(c, args, args)
    p.wrong = (f'the first job failed ({p.note})' if rc else '') or _ft_checks(c, c.dir / 'ft' / 'g', {'RTE': 2})
    return p


@case('W06', 'two at once', 'two finetune.py of the same group, different tasks at once: both tasks\' rows kept',
      expect='ok')
def _(c):
    path = task(c, 'name: mine\n' + TASK_YAML)
    rc, p = _two(c, c.cmd(['finetune.py'], *c.finetune_args(), '--group', 'g'),
                 c.cmd(['finetune.py'], *c.finetune_args(), '--group', 'g', '--tasks', path))
    p.wrong = (f'the first job failed ({p.note})' if rc else '') or _ft_checks(c, c.dir / 'ft' / 'g', {'RTE': 1, 'mine': 1})
    return p


@case('W07', 'two at once', 'two finetune.py of one group with --predict true at once: the predictions file whole',
      expect='ok')
def _(c):
    args = c.cmd(['finetune.py'], *c.finetune_args(), '--group', 'g', '--predict', 'true')
    rc, p = _two(c, args, args)
    tsv = c.dir / 'test' / 'g' / 'RTE.tsv'
    if rc: p.wrong = f'the first job failed ({p.note})'
    elif not tsv.is_file() or len(tsv.read_text().splitlines()) < 2: p.wrong = 'no RTE.tsv'
    return p


@case('W08', 'two at once', 'two finetune.py of different groups building one token cache at once', expect='ok')
def _(c):
    cache = c.p('cache')
    rc, p = _two(c, c.cmd(['finetune.py'], *c.finetune_args(), '--group', 'a', '--cache_dir', cache),
                 c.cmd(['finetune.py'], *c.finetune_args(), '--group', 'b', '--cache_dir', cache))
    if rc: p.wrong = f'the first job failed ({p.note})'
    return p


@case('W09', 'two at once', 'two pretrain.py of different runs building one data cache at once', expect='ok')
def _(c):
    cache, corpus = c.p('cache'), _pretrain_text(c)
    run = lambda name: c.cmd(['pretrain.py'], *c.pretrain_args(), '--run_name', name, '--cache_dir', cache, '--corpus', corpus)
    rc, p = _two(c, run('a'), run('b'))
    if rc: p.wrong = f'the first job failed ({p.note})'
    if p.rc == 0 and len(list((cache / 'pretrain_data').iterdir())) != 1: p.wrong = p.wrong or 'two data caches built'
    return p


@case('W10', 'two at once', 'two conversions to the same --out at once: one refused or both the same, conversion whole')
def _(c):
    args = c.cmd(['-m', 'electra.convert'], 'tf', c.tf, '--out', c.dir / 'out')
    rc, p = _two(c, args, args)
    if not (c.dir / 'out' / 'conversion.json').is_file(): p.wrong = 'no conversion.json'
    if p.rc == 0 and rc == 0: p.note += '; both converted'
    return p


@case('W11', 'two at once', 'two comparisons of the same name at once (pretrain only): the second refused')
def _(c):
    def args(steps: int) -> list:
        return c.cmd(['-m', 'electra.experiments.compare'], '--output_dir', c.p('cmp'), '--finetune', 'false',
                     '--pretrain_overrides', json.dumps({'steps': steps, 'warmup_steps': 1, 'eval_examples': 0,
                                                         'num_proc': 1, 'cache_dir': str(c.cache), 'device': 'cpu',
                                                         'tokenizer': str(c.export / 'tokenizer')}),
                     '--variants', '{electra: {config: ""}}')
    log = c.p('first.log')
    first = c.start(args(100_000), log)  # still training when the second starts; killed after it
    if not wait_for(lambda: any((c.dir / 'cmp').rglob('.lock')), proc=first):
        kill_group(first)
        return Proc(-1, '', log.read_text(), note='the first comparison never started its pretraining')
    p = c.run(args(100_000))
    kill_group(first)
    return p
