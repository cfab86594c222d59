"""The resumable sweep: every task of a job, `runs` seeds each, each finished run saved and recorded at
once; then the summary over runs and the test predictions of the selected runs.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from electra.config.base import ConfigError, TrainingStopped, writable_dir
from electra.config.finetune import FinetuneConfig, is_task_file
from electra.data.tokenizer import pad_token_id
from electra.finetuning.classifier import load_finetuned
from electra.finetuning.learner import TaskData, device_and_autocast, predict_outputs, train_run
from electra.finetuning.results import ResultsTable, plot_summary, select_runs, summarize, summary_markdown
from electra.finetuning.tasks.glue.encoding import encode_cached, make_loader
from electra.finetuning.tasks.glue.metrics import dev_metric_names, predictions, task_metrics
from electra.finetuning.tasks.glue.sources import Examples, GlueSource, double_unordered, drop_empty, open_source
from electra.finetuning.tasks.files import write_file_predictions
from electra.finetuning.tasks.glue.submission import SUBMISSION_FILES, write_predictions, zip_submission
from electra.finetuning.tasks.glue.tasks import TASKS, GlueTask
from electra.training.distributed import world
from electra.training.files import atomic_save, atomic_write_text, is_main_process
from electra.training.sinks import start_neptune_run

__all__ = ['resolve_data', 'prepare_task', 'RunJob', 'train_and_save', 'run_sweep', 'write_summary', 'write_test_predictions']


def resolve_data(data: str, cache_dir: str | Path) -> GlueSource:
    "The source named by the `data` key; 'demo' writes the project's sample tasks to `<cache_dir>/demo_glue` once."
    writable_dir(cache_dir, 'cache_dir')  # the token cache and the demo tasks live there
    if data == 'demo':
        from electra.finetuning.tasks.glue.demo import write_demo_glue
        root = Path(cache_dir) / 'demo_glue'
        if not (root / 'diagnostic' / 'diagnostic.tsv').is_file() and is_main_process(): write_demo_glue(root)
        return open_source(str(root))
    return open_source(data)


def _train_examples(task: GlueTask, task_cfg: FinetuneConfig, source: GlueSource, doubled: bool) -> Examples:
    ex = source.load(task, 'train')
    if task_cfg.drop_empty: ex = drop_empty(ex)
    if task_cfg.max_train_samples and len(ex) > task_cfg.max_train_samples:
        ex = ex.take(np.sort(np.random.default_rng(0).choice(len(ex), task_cfg.max_train_samples, replace=False)))
    return double_unordered(ex) if doubled else ex


def prepare_task(task: GlueTask, task_cfg: FinetuneConfig, source: GlueSource, tokenizer, cache_dir: str | Path,
                 doubled: bool) -> TaskData:
    "Read, filter, double (when `doubled`) and encode a task's training set, and encode its dev splits (cached)."
    cache = Path(cache_dir) / 'glue_tokens'
    length = task_cfg.max_length
    train = encode_cached(_train_examples(task, task_cfg, source, doubled), tokenizer, length, cache, f'{task.name}-train')
    dev = {s: encode_cached(source.load(task, s), tokenizer, length, cache, f'{task.name}-{s}') for s in task.dev_splits}
    return TaskData(task, train, dev)


def job_tasks(cfg: FinetuneConfig, source: GlueSource) -> dict[str, tuple[GlueTask, GlueSource]]:
    "Each task of the job by name, with the source of its examples: GLUE tasks read `source`, task files their own."
    from electra.finetuning.tasks.files import file_task, read_task_file
    out = {}
    for entry in cfg.tasks:
        task, src = file_task(read_task_file(entry)) if is_task_file(entry) else (TASKS[entry], source)
        out[task.name] = (task, src)
    return out


def _doubled(task: GlueTask, cfg: FinetuneConfig, task_cfg: FinetuneConfig) -> bool:
    "double_unordered applies to unordered-pair tasks, or to any task whose `task_overrides` switch it on."
    return task_cfg.double_unordered and (task.symmetric or 'double_unordered' in cfg.task_overrides.get(task.name, {}))




# -- the sweep

def _settings_key(cfg: FinetuneConfig, task: str, task_cfg: FinetuneConfig, seed: int, doubled: bool,
                  source: GlueSource) -> str:
    "A hash of what a run's result depends on; a resumed sweep refuses to mix runs of different settings."
    hp = {k: v for k, v in task_cfg.hparams().items() if k != 'eval_batch_size'}
    files = {'files': {k: str(v) for k, v in source.spec.files.items()}} if hasattr(source, 'spec') else {}
    blob = json.dumps({'task': task, 'model': cfg.model, 'data': cfg.data, 'seed': seed, 'doubled': doubled, **hp,
                       **files}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _neptune_run(cfg: FinetuneConfig, task: str, run: int, seed: int, task_cfg: FinetuneConfig):
    "A Neptune run for one fine-tuning run (`logger: neptune`), or None."
    if cfg.logger != 'neptune' or not is_main_process(): return None
    nrun = start_neptune_run(cfg.neptune_project, f'{cfg.group}/{task}_{run}', tags=[cfg.group, task])
    nrun['parameters'] = {'task': task, 'run': run, 'seed': seed, 'model': cfg.model, 'data': cfg.data,
                          **task_cfg.hparams()}
    return nrun


@dataclass(frozen=True)
class RunJob:
    "One fine-tuning run to do: its task, index and seed, the key of its settings, where its weights go."
    task: str
    run: int
    seed: int
    settings: str
    checkpoint: Path


def _todo(cfg: FinetuneConfig, name: str, doubled: bool, results: ResultsTable, out: Path,
          source: GlueSource) -> list[RunJob]:
    "The runs of task `name` not yet finished (in the results table and on disk); refuses rows of other settings."
    task_cfg, todo = cfg.for_task(name), []
    for i, seed in enumerate(cfg.seed_list):
        key = _settings_key(cfg, name, task_cfg, seed, doubled, source)
        ckpt, row = out / f'{name}_{i}.pth', results.get(name, i)
        if row is not None and row['settings'] != key:
            raise ConfigError(f"{results.path}: {name} run {i} was made with other settings (model, data, seed or "
                              f"hyperparameters changed). Use another --group, or delete that row and {ckpt} to redo it.")
        if row is None or not ckpt.is_file(): todo.append(RunJob(name, i, seed, key, ckpt))
    return todo


def _plan(cfg: FinetuneConfig, tokenizer, source: GlueSource, results: ResultsTable, say) -> Iterator[tuple[TaskData, list[RunJob]]]:
    "Task by task, its encoded data and its runs still to do (tasks with none are skipped); lazily, one task at a time."
    out = Path(cfg.output_dir) / cfg.group
    for name, (task, src) in ((n, t) for n, t in job_tasks(cfg, source).items() if not t[0].predicted_by):
        task_cfg = cfg.for_task(name)
        doubled = _doubled(task, cfg, task_cfg)
        todo = _todo(cfg, name, doubled, results, out, src)
        if not todo:
            say(f'{name}: all {cfg.runs} runs finished before; skipped')
            continue
        data = prepare_task(task, task_cfg, src, tokenizer, cfg.cache_dir, doubled)
        say(f'{name}: {len(data.train)} training examples{" (both segment orders)" if doubled else ""}, '
            f'{", ".join(f"{len(e)} {s}" for s, e in data.dev.items())}; {task_cfg.epochs} epochs, lr {task_cfg.lr:g}, '
            f'{len(todo)} of {cfg.runs} runs to do')
        yield data, todo


def train_and_save(cfg: FinetuneConfig, data: TaskData, job: RunJob, body, device, autocast, pad_id: int,
                   say: Callable[[str], None]) -> dict:
    "Train one run, save its weights to `job.checkpoint` (main process), and return its row of the results table."
    task, task_cfg = data.task, cfg.for_task(data.task.name)
    nrun, start = _neptune_run(cfg, task.name, job.run, job.seed, task_cfg), time.perf_counter()

    def report(epoch, loss, metrics):
        shown = ', '.join(f'{m} {metrics[m]:.2f}' for m in dev_metric_names(task))
        say(f'  {task.name} run {job.run} (seed {job.seed}) epoch {epoch + 1}/{task_cfg.epochs}: train loss {loss:.4f}, '
            f'dev {shown} [{time.perf_counter() - start:.0f}s]')
        if nrun is not None:
            nrun['train/loss'].append(loss)
            for m in dev_metric_names(task): nrun[f'dev/{m}'].append(metrics[m])

    model, history = train_run(data, task_cfg, body, job.seed, device, autocast, pad_id, report)
    final = history[-1]
    if is_main_process():
        atomic_save({'format': 'electra-glue', 'task': task.name, 'run': job.run, 'seed': job.seed,
                     'n_outputs': task.n_outputs, 'dropout': task_cfg.dropout, 'target_scale': model.target_scale,
                     'electra_config': body.config.to_dict(), 'model': model.state_dict(),
                     'pretrained': cfg.model, 'hparams': task_cfg.hparams(), 'dev': final}, job.checkpoint)
    if nrun is not None:
        for m in dev_metric_names(task): nrun[f'final/{m}'] = final[m]
        nrun.stop()
    return {'task': task.name, 'run': job.run, 'seed': job.seed, 'score': final[task.score_metric], **final,
            'steps': task_cfg.epochs * -(-len(data.train) // task_cfg.batch_size),
            'seconds': round(time.perf_counter() - start, 1), 'settings': job.settings, 'checkpoint': str(job.checkpoint),
            'finished_at': datetime.now(timezone.utc).isoformat(timespec='seconds')}


def run_sweep(cfg: FinetuneConfig, pretrained, tokenizer, source: GlueSource,
              log: Callable[[str], None] = print) -> ResultsTable:
    """Fine-tune `cfg.runs` runs of every training task in `cfg.tasks` from `pretrained` (an `ElectraForPreTraining`).
    Each finished run's weights go to `<output_dir>/<group>/<task>_<i>.pth` and its dev metrics to the results table
    `<output_dir>/<group>/results.csv` at once; runs already in the table with the same settings are skipped. With
    `parallel_runs` above 1, that many worker processes take the runs from a shared queue (`electra.finetuning.workers`);
    the table is the same as one process's."""
    results = ResultsTable(Path(cfg.output_dir) / cfg.group / 'results.csv')
    say = log if is_main_process() else (lambda *_: None)
    plan = _plan(cfg, tokenizer, source, results, say)
    from electra.finetuning.workers import parallel_runs, run_on_workers  # (workers.py builds on this module)
    n = parallel_runs(cfg)
    if n > 1:
        try:
            for row in run_on_workers(cfg, list(plan), pretrained, tokenizer, n, say): results.add(row)
        except KeyboardInterrupt:
            raise TrainingStopped(f"by Ctrl-C; the {len(results.df)} finished run(s) are kept in {results.path}. Run the "
                                  f"same command again to do the rest.") from None
        return results
    device, autocast = device_and_autocast(cfg.device, cfg.precision)
    pad_id = pad_token_id(tokenizer)
    if world().size > 1: say(f'every run is trained by the {world().size} processes of this torchrun job together; '
                             f'batch_size is the global batch')
    for data, todo in plan:
        for job in todo:
            try: row = train_and_save(cfg, data, job, pretrained.electra, device, autocast, pad_id, say)
            except KeyboardInterrupt:
                raise TrainingStopped(f"by Ctrl-C during {job.task} run {job.run}; the {len(results.df)} finished run(s) are "
                                      f"kept in {results.path}. Run the same command again to do the rest.") from None
            results.add(row)
    return results


def write_summary(cfg: FinetuneConfig, results: ResultsTable) -> str:
    "The per-task summary as markdown, saved with a plot of the spread over runs as `summary.md` and `summary.png`."
    out = Path(cfg.output_dir) / cfg.group
    tasks = {**TASKS, **_file_task_shapes(cfg)}
    df = results.df[results.df['task'].isin(cfg.task_names) & (results.df['run'] < cfg.runs)]
    text = summary_markdown(summarize(df, tasks)) if not df.empty else 'no finished runs'
    if is_main_process():
        atomic_write_text(f'# Dev results of {cfg.group} ({cfg.model})\n\n{text}\n', out / 'summary.md')
    if not df.empty: plot_summary(df, out / 'summary.png', title=f'{cfg.group}: dev score per run (bar: median)', tasks=tasks)
    return text


def _file_task_shapes(cfg: FinetuneConfig) -> dict[str, GlueTask]:
    "The job's tasks from files, for their metrics (their data is read once more for the training labels)."
    from electra.finetuning.tasks.files import file_task
    return {name: file_task(spec)[0] for name, spec in cfg.file_tasks().items()}


def write_test_predictions(cfg: FinetuneConfig, results: ResultsTable, tokenizer, source: GlueSource,
                           log: Callable[[str], None] = print) -> list[Path]:
    """Predict the test sets with the selected run of each task (`select`), or the averaged logits of the top
    `ensemble_k` runs; AX with MNLI's. Writes `<test_output_dir>/<group>/<file>.tsv` (GLUE: the site's format, and
    `glue_submission.zip`; a task from files: `id<TAB>prediction`)."""
    out = Path(cfg.test_output_dir) / cfg.group
    say = log if is_main_process() else (lambda *_: None)
    tasks, written = job_tasks(cfg, source), []
    for name, (task, src) in ((n, t) for n, t in tasks.items() if not t[0].predicted_by):
        rows = results.task_rows(name)
        rows = rows[rows['run'] < cfg.runs]  # this job's runs, not later ones left by a larger sweep
        if rows.empty:
            say(f'{name}: no finished runs, no test predictions')
            continue
        targets = [(t, s, split, stem) for t, s in tasks.values() if t is task or t.predicted_by == name
                   for split, stem in t.test_files]
        written += _predict_task(cfg, task, src, select_runs(rows, cfg.select, cfg.ensemble_k), targets, tokenizer,
                                 out, say)
    if any(p.name in SUBMISSION_FILES for p in written): written.append(zip_submission(out))
    return written


def _predict_task(cfg: FinetuneConfig, task: GlueTask, source: GlueSource, picked, targets: list, tokenizer,
                  out: Path, say) -> list[Path]:
    "The test files of one trained task (and of the tasks predicted with its model) from its picked runs."
    device, autocast = device_and_autocast(cfg.device, cfg.precision)
    task_cfg, pad_id, cache = cfg.for_task(task.name), pad_token_id(tokenizer), Path(cfg.cache_dir) / 'glue_tokens'
    encoded = {(t.name, split): encode_cached(s.load(t, split), tokenizer, task_cfg.max_length, cache, f'{t.name}-{split}')
               for t, s, split, _ in targets}
    dev = {s: encode_cached(source.load(task, s), tokenizer, task_cfg.max_length, cache, f'{task.name}-{s}')
           for s in task.dev_splits} if len(picked) > 1 else {}
    sums: dict = {}
    for path in picked['checkpoint']:
        model = load_finetuned(path, device)
        for key, enc in [*encoded.items(), *(((task.name, s), e) for s, e in dev.items())]:
            loader = make_loader(enc, task_cfg.eval_batch_size, False, pad_id, pin_memory=device.type == 'cuda')
            sums[key] = sums.get(key, 0) + predict_outputs(model, loader, autocast) / len(picked)
        del model
    runs = ', '.join(f"run {int(r['run'])} (seed {int(r['seed'])}, dev {task.score_metric} {r['score']:.2f})"
                     for r in picked.to_dict('records'))
    if dev:
        scores = task_metrics(task, {s: predictions(task, sums[(task.name, s)]) for s in dev},
                              {s: e.label for s, e in dev.items()})
        runs += f"; ensemble dev {', '.join(f'{m} {v:.2f}' for m, v in scores.items())}"
    written = []
    for t, s, split, stem in targets:
        enc, outs = encoded[(t.name, split)], sums[(t.name, split)]
        bad = int((~np.isfinite(outs)).reshape(len(outs), -1).any(1).sum()) if len(outs) else 0
        if bad:  # argmax of NaN logits is a valid-looking label: never let one reach a submission file
            raise ConfigError(f"{stem}.tsv: {runs} predict NaN or infinite outputs for {bad} of {len(outs)} "
                              f"{t.name} {split} examples; no file written. Delete those runs' rows from "
                              f"{Path(cfg.output_dir) / cfg.group / 'results.csv'} and run the task again.")
        if hasattr(s, 'ids'): written.append(write_file_predictions(out / f'{stem}.tsv', t, s.ids(split), enc.idx,
                                                                     predictions(t, outs)))
        else: written.append(write_predictions(out / f'{stem}.tsv', t, enc.idx, predictions(t, outs)))
        say(f'{stem}.tsv: {len(enc)} predictions from {task.name} {runs}')
    return written
