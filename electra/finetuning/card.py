"""The model card of a fine-tuning group: `README.md` in `<output_dir>/<group>/`, beside the runs' weights
(`<task>_<i>.pth`), its results table and summary. Its metadata's `model-index` holds each task's dev score over the
runs (median, mean, best: the summary's numbers, from `results.csv`); the text says what the models are, the model they
were fine-tuned from, the settings, every run, each task's labels, the runs also written as transformers folders
(`<task>_<i>/`, each with a card of its own: `electra.finetuning.export`), and how to load one. The runs themselves are
PyTorch modules saved by `run_sweep` (`load_finetuned` reads them): the group's card names no `library_name`."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import torch
from huggingface_hub import EvalResult, ModelCardData

from electra.config.finetune import RESULT_KEYS, TASK_KEYS, FinetuneConfig
from electra.config.values import config_to_dict, value_sources
from electra.finetuning.inputs import as_read_back, recorded_inputs
from electra.finetuning.results import SCORE_DECIMALS, summarize
from electra.finetuning.runs import group_dir, runs_phrase
from electra.finetuning.tasks.base import TaskInfo
from electra.pretrained.card import LICENSE, LICENSE_NOTE, details, write_card, yaml_block
from electra.pretrained.export import pretraining_progress

__all__ = ['PIPELINE_TAGS', 'by_run', 'unlike_runs', 'write_finetuned_card']

# the Hub's task of each task kind
PIPELINE_TAGS = {'classification': 'text-classification', 'regression': 'text-classification',
                 'multilabel': 'text-classification', 'tagging': 'token-classification',
                 'squad': 'question-answering', 'mrqa': 'question-answering'}
GLUE_HUB = 'nyu-mll/glue'


def _kinds(files: dict, tasks: dict[str, TaskInfo]) -> dict[str, str]:
    "Each task's kind: a task file's own (`files`: the job's task files), a GLUE task's classification or regression."
    return {name: files[name].kind if name in files else 'regression' if info.is_regression else 'classification'
            for name, info in tasks.items()}


# a task's rows that cannot tell what they were fine-tuned on: of a results table before rows named their data
UNKNOWN = 'data not recorded in its rows'


def _task_data(cfg: FinetuneConfig, files: dict, name: str, rows: pd.DataFrame) -> list[str | None]:
    """What the rows of a task were fine-tuned on, as their column `data` names it (`inputs.data_named`); each once,
    None for rows that do not say (a table of an earlier version). Such rows of this job's tasks are of this job's
    data: the sweep reuses a row only when the data's bytes are the ones its `settings` record
    (`inputs.what_changed`)."""
    job = files[name].path.as_posix() if name in files else cfg.data
    named = [job if pd.isna(d) and name in cfg.task_names else None if pd.isna(d) else d for d in rows['data']]
    return sorted(set(named), key=lambda d: (d is None, str(d)))


def _data_words(data: str | None) -> str:
    "A task's data in words, as the card's text names it."
    return {None: UNKNOWN, 'demo': "the project's demo data", 'hub': 'the HF hub (nyu-mll/glue)'}.get(data, data)


def _dataset(files: dict, name: str, info: TaskInfo, data: list[str | None]) -> dict:
    """Where a task's dev set came from (`data`: what its rows were fine-tuned on, `_task_data`), as the model-index
    describes a dataset; runs on several (jobs on other `data`, a task file moved) name each, none claimed for all."""
    kind, words = 'unknown' if data == [None] else ' + '.join(map(str, data)), '; '.join(map(_data_words, data))
    if name in files: return dict(dataset_type=kind, dataset_name=name if len(data) == 1 else f'{name} ({words})',
                                  dataset_split='dev')
    # the GLUE config names each task's set (the Hub groups a model's results by dataset type, config and split)
    if data == ['hub']:
        return dict(dataset_type=GLUE_HUB, dataset_name=f'GLUE {name}', dataset_config=info.hf_config,
                    dataset_split='validation')
    return dict(dataset_type=kind, dataset_name=f'GLUE {name} ({words})', dataset_config=info.hf_config,
                dataset_split='dev')


def _results(cfg: FinetuneConfig, df: pd.DataFrame, files: dict, summary: pd.DataFrame, tasks: dict[str, TaskInfo],
             kinds: dict[str, str]) -> list[EvalResult]:
    "Each task's score metric over its runs (median, mean, best), those defined, on the data its rows record."
    results = []
    for r in summary.to_dict('records'):
        name = r['task']
        dataset = _dataset(files, name, tasks[name], _task_data(cfg, files, name, df[df['task'] == name]))
        for stat in ('median', 'mean', 'best'):
            if math.isnan(r[stat]): continue
            results.append(EvalResult(task_type=PIPELINE_TAGS[kinds[name]], task_name=name, **dataset,
                                      metric_type=r['metric'], metric_value=round(float(r[stat]), SCORE_DECIMALS),
                                      metric_name=f"{r['metric']} ({stat} of {r['runs'] - r['undefined']} runs)"))
    return results


def _metadata(cfg: FinetuneConfig, df: pd.DataFrame, summary: pd.DataFrame,
              tasks: dict[str, TaskInfo]) -> ModelCardData:
    "The card's metadata: what the Hub reads of the group (its tasks, data, the model it came from, its dev scores)."
    files = cfg.file_tasks()
    kinds = _kinds(files, tasks)
    tags = sorted(set(PIPELINE_TAGS[k] for k in kinds.values()))
    on_hub = not Path(cfg.model).exists() and not cfg.model.endswith('.pth')  # a hub name, not a file of this machine
    glue = [n for n in tasks if n not in files]
    on_glue_hub = any('hub' in _task_data(cfg, files, n, df[df['task'] == n]) for n in glue)
    return ModelCardData(
        language='en' if len(glue) == len(tasks) else None,  # GLUE is English; a task file's language is not known
        license=LICENSE, base_model=cfg.model if on_hub else None, pipeline_tag=tags[0] if len(tags) == 1 else None,
        datasets=[GLUE_HUB] if on_glue_hub else None, model_name=cfg.group,
        tags=['electra', 'fine-tuned', *sorted(set(kinds.values()))],
        eval_results=_results(cfg, df, files, summary, tasks, kinds) or None)


def _runs_table(df: pd.DataFrame) -> str:
    "Every run of the job: its task, seed, dev score, steps and weights file."
    lines = ['| task | run | seed | score | steps | weights |', '|---|---|---|---|---|---|']
    for r in df.sort_values(['task', 'run']).to_dict('records'):
        lines.append(f"| {r['task']} | {r['run']} | {r['seed']} | {r['score']} | {r['steps']} | "
                     f"`{Path(str(r['checkpoint'])).name}` |")
    return '\n'.join(lines)


# what a head predicts where it has no classes
_PREDICTS = {'regression': 'one score, on the task\'s scale', 'squad': 'an answer span of the context (start and end '
             'tokens; SQuAD 2.0: or no answer)', 'mrqa': 'an answer span of the context (start and end tokens)'}


def _labels_section(tasks: dict[str, TaskInfo], kinds: dict[str, str]) -> str:
    "What each task's runs predict: its label names by class id (`id2label` of its transformers folders)."
    lines = ['| task | kind | labels (by class id) |', '|---|---|---|']
    for name, info in tasks.items():
        lines.append(f"| {name} | {kinds[name]} | {_PREDICTS.get(kinds[name]) or ', '.join(info.label_names)} |")
    return '## Labels\n\n' + '\n'.join(lines)


def _folders_section(cfg: FinetuneConfig, kinds: dict[str, str]) -> str:
    """The runs also written as transformers folders (`electra.finetuning.export`): exactly those on disk now, a
    run's `<task>_<i>/` beside its `<task>_<i>.pth`, whichever job wrote it; QA runs never are."""
    out = group_dir(cfg)
    found = [f"`{p.name}/`" for p in sorted(out.iterdir()) if (p / 'config.json').is_file() and
             (out / f'{p.name}.pth').is_file()] if out.is_dir() else []
    qa = [name for name, kind in kinds.items() if kind in ('squad', 'mrqa')]
    text = (f"{', '.join(found)}: runs also written as `save_pretrained` folders of transformers' own class (the key "
            "`save_pretrained`), each with its tokenizer, its card and the task's label names, read by `pipeline(...)` "
            "and `from_pretrained` without this library." if found else
            f"None (`save_pretrained` is `{cfg.save_pretrained}`): the runs are the `.pth` files.")
    if qa: text += (f" The runs of {', '.join(qa)} stay `.pth` files: the official QA head (the end predicted given the "
                    "start, the answerability classifier) has no transformers class.")
    return f'## transformers folders\n\n{text}'


def _task_settings_section(cfg: FinetuneConfig, mine: dict[str, TaskInfo], earlier: dict[str, TaskInfo],
                           df: pd.DataFrame) -> str:
    """The values each task's runs used where they are not the job's config: this job's tasks' by `for_task` (a task
    file's own, a task kind's defaults, `task_overrides`), each with where it came from; those of earlier jobs'
    tasks as their rows record them (`_recorded_settings`)."""
    job, lines = config_to_dict(cfg), ['| task | key | value | from |', '|---|---|---|---|']
    for name in mine:
        task_cfg = cfg.for_task(name)
        sources = value_sources(task_cfg)
        lines += [f"| {name} | `{k}` | {getattr(task_cfg, k)} | {sources[k]} |" for k in TASK_KEYS
                  if getattr(task_cfg, k) != job[k]]
    for name, info in earlier.items():
        lines += [f"| {name} | {key} | {value} | its rows of `results.csv` (an earlier job) |"
                  for key, value in _recorded_settings(cfg, info, df[df['task'] == name])]
    text = ('\n'.join(lines) if len(lines) > 2 else "None: every task's runs used the job's config (below).")
    return f"## Each task's settings\n\nWhere a task's runs used other values than the job's config below:\n\n{text}"


def _recorded_settings(cfg: FinetuneConfig, info: TaskInfo, rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(key, value) of what an earlier job's task's `rows` record (`inputs.RunInputs.run`) of the per-task keys other
    than this job's config, a value per run where its runs differ; `double_unordered` as it applies to the task (what
    a row records: on for an unordered pair task). Rows of an earlier version, which record no values, are said."""
    recorded = [recorded_inputs(s) for s in rows['settings']]
    if any(r is None for r in recorded): return [('–', 'not recorded (rows of an earlier version)')]
    job = as_read_back(config_to_dict(cfg)) | {'double_unordered': cfg.double_unordered and info.symmetric}
    out = []
    for key in (k for k in TASK_KEYS if k in RESULT_KEYS and any(k in r['run'] for r in recorded)):
        # a key recorded since some rows were written (`inputs.what_changed`): not known of those
        values = [r['run'].get(key, 'not recorded') for r in recorded]
        if all(v == job[key] for v in values): continue
        out.append((f'`{key}`', by_run(values, rows['run'])))
    return out


def by_run(values: list, runs) -> str:
    "A value of each of `runs`, each value once: '3' where all are 3, else '3 (run 0); 2 (runs 1, 2)'."
    groups = {}
    for run, v in zip(runs, values): groups.setdefault(json.dumps(v, sort_keys=True), []).append(int(run))
    if len(groups) == 1: return str(values[0])
    return '; '.join(f"{json.loads(v)} ({runs_phrase(sorted(r))})" for v, r in groups.items())


def unlike_runs(rows: pd.DataFrame) -> list[str]:
    """What a task's `rows` record differently among themselves, each as `by_run` says it: the run's values
    (`inputs.run_inputs`; not the seed, each run's own), the task file's settings, the model's and the data's content,
    the tokenizer.
    Summarised runs are alike unless an earlier job was stopped partway (or the table is of an earlier version, whose
    rows record no values: nothing to compare)."""
    recorded = [recorded_inputs(s) for s in rows['settings']]
    if len(rows) < 2 or any(r is None for r in recorded): return []
    parts = {f'`{k}`': [r['run'].get(k, 'not recorded') for r in recorded]
             for k in sorted({k for r in recorded for k in r['run']} - {'seed'})}
    parts |= {f"the task file's `{k}`": [r['task'].get(k, 'not recorded') for r in recorded]
              for k in sorted({k for r in recorded for k in r['task']})}
    parts |= {'the model': list(rows['model_fingerprint']), 'the tokenizer': [r.get('tokenizer') for r in recorded]}
    parts |= {f'the {split} data': [r['data'].get(split, 'none') for r in recorded]
              for split in sorted({s for r in recorded for s in r['data']})}
    return [f'{label} {by_run(values, rows["run"])}' for label, values in parts.items() if len(set(map(str, values))) > 1]


def _earlier_line(cfg: FinetuneConfig, df: pd.DataFrame, earlier: list[str]) -> str:
    "The tasks of earlier jobs of the group, each with the data its rows were fine-tuned on (`_task_data`)."
    if not earlier: return ''
    named = [f"{n} ({'; '.join(map(_data_words, _task_data(cfg, {}, n, df[df['task'] == n])))})" for n in earlier]
    return (" Also in this group, from earlier jobs (their model and settings in their rows of `results.csv`, "
            f"`model_fingerprint` and `settings`), each with the data its runs were fine-tuned on: {', '.join(named)}.")


# what calling a run's module (`load_finetuned`) gives, by task kind: what its transformers folder gives
_OUTPUTS = {
    'classification': 'a classification run its logits [N, classes] (softmax: the probabilities)',
    'regression': "a regression run its scores [N] on the task's own scale (STS-B's 0-5; a task file's `target_scale` "
                  "folded in), its test file's values before their rounding (STS-B's clipped to 0-5 too)",
    'multilabel': 'a multi-label run its logits [N, labels] (sigmoid: each label\'s probability; > 0: predicted)',
    'tagging': "a tagging run its logits [N, T, tags] for every token (a word's tag is its first piece's)",
    'squad': "a QA run the head's dict (`start_logits`, `answerable_logit`, and the beam of start and end "
             "log-probabilities of the official joint head, or `end_logits` without it), which `finetune.py` decodes "
             "into its answers",
}
_OUTPUTS['mrqa'] = _OUTPUTS['squad']


_ENCODED_AS_TEXTS = ('classification', 'regression', 'multilabel')  # kinds whose inputs `encode_texts` makes


def _usage_section(cfg: FinetuneConfig, df: pd.DataFrame, kinds: dict[str, str], tasks: dict[str, TaskInfo]) -> str:
    """How to use: a run read with `load_finetuned`, the tokenizer of the model it was fine-tuned from, and its inputs
    encoded as the run encoded them (`encode_texts` at its max_length: the tokenizer's own call cuts at its
    model_max_length, so a longer text gave other outputs than the run's); what it gives."""
    example = df.sort_values(['task', 'run']).iloc[0] if not df.empty else None
    load = (f"model = load_finetuned('{Path(str(example['checkpoint'])).name}')  # {example['task']} run "
            f"{example['run']}, a file of this folder" if example is not None else "model = load_finetuned(PATH)")
    gives = '; '.join(dict.fromkeys(_OUTPUTS.get(k, f"a {k} run its head's outputs") for k in kinds.values()))
    call, names = '', 'load_finetuned, load_pretrained'
    if example is not None and kinds.get(example['task']) in _ENCODED_AS_TEXTS:
        info, length = tasks.get(example['task']), _run_max_length(Path(str(example['checkpoint'])))
        pair = ", ['its pair']" if info is not None and info.hf_text[1] is not None else ''
        call = (f"outputs = model(**encode_texts(tokenizer, ['a text']{pair}, max_length={length or 'MAX_LENGTH'}))"
                f"  # the run's max_length{'' if length else ' (its checkpoint was not found)'}\n")
        names = 'encode_texts, load_finetuned, load_pretrained'
    return ("## How to use\n\nEach run is a PyTorch module (`ElectraClassifier`, `ElectraTagger` or `ElectraQA`) over "
            "transformers' `ElectraModel`, read with this library in eval mode; its tokenizer is the one of the model it "
            f"was fine-tuned from:\n\n```python\nfrom electra import {names}\n\n{load}\n"
            f"_, tokenizer = load_pretrained('{cfg.model}')\n{call}```\n\n"
            "A classification, regression or multi-label run is called on `encode_texts(tokenizer, texts, text_pairs, "
            "max_length=...)`, its texts encoded as the run encoded its data (`[CLS] A [SEP] B [SEP]`, BERT's "
            "`_truncate_seq_pair` to the run's `max_length`: the tokenizer's own call cuts at its `model_max_length`, "
            "so a longer text would get other outputs); a tagging or QA run reads a longer input in windows, as "
            "`finetune.py` does. It gives what the run's transformers folder gives where it has one (`<task>_<i>/`): "
            f"{gives}.")


def _run_max_length(checkpoint: Path) -> int | None:
    "The max_length a fine-tuned run's checkpoint records it was trained at; None when the file is not there."
    if not checkpoint.is_file(): return None
    return torch.load(checkpoint, map_location='cpu', weights_only=True, mmap=True).get('hparams', {}).get('max_length')


def _progress(model: str) -> str:
    "Where the pretraining of a pretrain.py checkpoint was (its step of its steps), in brackets; '' for other models."
    return f" ({said})" if (said := pretraining_progress(model)) else ''


def _data_line(cfg: FinetuneConfig, mine: dict) -> str:
    "The GLUE data of the job's GLUE tasks, where one ran: a task file names its own data."
    files = cfg.file_tasks()
    if all(n in files for n in mine): return ', each read from its task file.'
    return f"; GLUE data: {cfg.data}{' (a task file names its own)' if any(n in files for n in mine) else ''}."


def write_finetuned_card(cfg: FinetuneConfig, df: pd.DataFrame, tasks: dict[str, TaskInfo], summary_text: str) -> Path:
    """Write the card of the fine-tuning group of `cfg` from `df`, the rows of its results table the summary describes
    (this job's tasks' and those of earlier jobs), `tasks` (the description of each task, those of `df` among them) and
    `summary_text` (the summary as `summary.md` has it); returns its path."""
    earlier = [n for n in tasks if n in set(df['task']) and n not in cfg.task_names]
    mine = {n: tasks[n] for n in cfg.task_names if not tasks[n].predicted_by}  # AX: predicted by MNLI's runs
    tasks = {**mine, **{n: tasks[n] for n in earlier}}
    summary = summarize(df, tasks)
    body = '\n\n'.join([
        f"# ELECTRA fine-tuned: {cfg.group}",
        f"ELECTRA (Clark et al. 2020) fine-tuned from `{cfg.model}`{_progress(cfg.model)}: {cfg.runs} run(s) of each "
        "task of this job, each with its own seed, their weights `<task>_<i>.pth` in this folder beside the results "
        f"table `results.csv` and its summary `summary.md`. Tasks: {', '.join(mine)}{_data_line(cfg, mine)}"
        + _earlier_line(cfg, df, earlier),
        f"## Dev scores\n\nOver the runs of each task (`summary.md`):\n\n{summary_text}",
        f"## Runs\n\n{_runs_table(df)}",
        _labels_section(tasks, _kinds(cfg.file_tasks(), tasks)),
        _folders_section(cfg, _kinds(cfg.file_tasks(), tasks)),
        _task_settings_section(cfg, mine, {n: tasks[n] for n in earlier}, df),
        f"## Settings\n\nThe job's config, from the presets `{cfg.config}` (`finetune.py --config` takes it again: "
        "their values are in it, so it names none to apply again):\n\n"
        f"{details(yaml_block({k: v for k, v in config_to_dict(cfg).items() if k != 'config'}))}",
        _usage_section(cfg, df, _kinds(cfg.file_tasks(), tasks), tasks),
        LICENSE_NOTE])
    return write_card(group_dir(cfg), _metadata(cfg, df, summary, tasks), body)
