"""Training the planned runs of a fine-tuning sweep and saving each: one run alone (`train_and_save`) or several of a
task stacked (`train_and_save_stack`, `electra.finetuning.stack`), a row of the results table each. The sweep
(`sweep.py`) trains them in its own process, the workers (`workers.py`) in theirs."""
from __future__ import annotations

import contextlib
import json
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import torch

from electra.config.finetune import FinetuneConfig
from electra.config.values import config_to_dict, value_sources
from electra.config.version import __version__
from electra.finetuning.inputs import data_named
from electra.finetuning.learner import diverged, train_run
from electra.finetuning.results import RESULT_COLUMNS
from electra.finetuning.stack import stack_size, train_stack
from electra.finetuning.tasks.base import TaskData
from electra.finetuning.tasks.metrics import dev_metric_names, scores_text
from electra.runtime.files import atomic_save, atomic_write_text, path_inside
from electra.runtime.processes import is_main_process
from electra.training.trackers import TrackedRun, Trackers, start_trackers, started_elsewhere, tracker_names

__all__ = ['group_dir', 'transformers_folder', 'RunJob', 'Diverged', 'runs_phrase', 'train_and_save', 'train_and_save_stack', 'train_jobs', 'stacks',
           'track_exports']


def group_dir(cfg: FinetuneConfig, key: str = 'output_dir') -> Path:
    "`<output_dir>/<group>` (`key` test_output_dir: `<test_output_dir>/<group>`), checked to be inside that folder."
    return path_inside(getattr(cfg, key), cfg.group, key=key)


def _tracked_run(cfg: FinetuneConfig, task: str, run: int, seed: int) -> TrackedRun:
    """What the trackers are told of one fine-tuning run: its task's config (`for_task`) and where each value came
    from, with the run's task, index and seed; its task_overrides the job's, from where the job's came (the task's
    config has applied them and holds none)."""
    task_cfg = cfg.for_task(task)
    config = {**config_to_dict(task_cfg), 'task_overrides': cfg.task_overrides, 'task': task, 'run': run, 'seed': seed}
    sources = {**value_sources(task_cfg), 'task_overrides': value_sources(cfg)['task_overrides'], 'task': 'tasks',
               'run': 'runs', 'seed': 'seeds' if cfg.seeds else 'seed + run'}
    tags = (*cfg.tracking_tags, f'task={task}')
    return TrackedRun(f'{cfg.group}/{task}_{run}', cfg.tracking_group or cfg.group, tags, config, sources,
                      group_dir(cfg) / 'tensorboard' / f'{task}_{run}', cfg.neptune_project)


def track_exports(cfg: FinetuneConfig, rows: list[dict], card: Path) -> None:
    """With `tracking_artifacts`, the files written after the runs go to each run's tracked runs (their ids are in its
    .pth), in the trackers that keep files: the group's model card `card`, and the run's transformers folder (with
    its own card) where one is written (`save_pretrained`)."""
    keep = [t for t in tracker_names(cfg.logger) if t != 'tensorboard']
    if not cfg.tracking_artifacts or not keep or not is_main_process(): return
    said = []  # an offline tracker's new run for each run's files: said once for the group
    for r in rows:
        checkpoint = Path(str(r['checkpoint']))
        if not checkpoint.is_file(): continue  # a row whose weights were removed since (the card says so)
        ids = torch.load(checkpoint, map_location='cpu', weights_only=True, mmap=True).get('trackers', {})
        run = _tracked_run(cfg, r['task'], int(r['run']), int(r['seed']))
        # a run of a job without trackers; or one tracked for another group's folder (this one a copy): not this one's
        if not ids or started_elsewhere(ids, run): continue
        # only the trackers that tracked the run: one added since (the run finished before, and was skipped) would
        # start a tracked run holding these files and none of its metrics (which no file keeps epoch by epoch)
        tracked = start_trackers([t for t in keep if t in ids], run, ids, say=said.append)
        folder = transformers_folder(checkpoint)
        tracked.artifacts([card, *([folder] if folder.is_dir() else [])])
        tracked.end()
    if said: print(f"{said[0][:-1]}: for the model card and transformers folder of {len(said)} fine-tuning "
                   f"run{'s' if len(said) > 1 else ''}.")


def transformers_folder(checkpoint: Path) -> Path:
    """Where a run's weights `<task>_<i>.pth` are also written as a transformers folder, `<task>_<i>/` beside them
    (`electra.finetuning.export`)."""
    return checkpoint.with_suffix('')


@dataclass(frozen=True)
class RunJob:
    "One fine-tuning run to do: its task, index and seed, the key of its settings, the model's fingerprint, where its weights go."
    task: str
    run: int
    seed: int
    settings: str
    model: str
    checkpoint: Path


@dataclass(frozen=True)
class Diverged:
    "A run whose loss became NaN or infinite at `step`: it stopped there, with no score and no checkpoint."
    task: str
    run: int
    seed: int
    step: int


def _diverged(cfg: FinetuneConfig, data: TaskData, job: RunJob, step: int, autocast, tracked,
              say: Callable[[str], None]) -> Diverged:
    "The record of a run that diverged at `step`, said in one line with what to try: the rate, the labels, the precision."
    name = data.task.name
    precision = {torch.float16: ', or precision bf16 or fp32 instead of fp16 (whose range overflows first)',
                 torch.bfloat16: ', or precision fp32 instead of bf16'}.get(autocast, '')
    message = (f"{name} run {job.run} (seed {job.seed}): the loss became NaN or infinite at step {step}; the run stopped "
               f"with no score and no checkpoint. Try a lower learning rate (task_overrides.{name}.lr, now "
               f"{cfg.for_task(name).lr:g}), check the task's labels and inputs{precision}; the same command tries this "
               "run again.")
    say(message)
    tracked.end('failed')
    return Diverged(name, job.run, job.seed, step)


def runs_phrase(runs: list[int]) -> str:
    "'run 3' or 'runs 3, 4': the runs of a stack, as the log names them."
    return f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(map(str, runs))}"


def _attempt_file(job: RunJob) -> Path:
    """Where a run's attempt keeps its tracked runs' ids until its weights are saved (then its .pth keeps them): one
    stopped, failed or killed before has no checkpoint to name them by, and the next attempt marks them replaced."""
    return job.checkpoint.with_name(f'.{job.checkpoint.stem}.attempt.json')


def _replace_earlier(job: RunJob, run: TrackedRun, tracked: Trackers) -> None:
    """Mark the tracked runs this one replaces as replaced by it: an attempt's that ended without weights, then the
    run's whose weights the folder holds (ids in its .pth); not those of another run whose file was copied over this
    one's (`sweep._todo` trains this one again), nor those of the group this folder is a copy of."""
    earlier = [json.loads(_attempt_file(job).read_text())] if _attempt_file(job).is_file() else []
    if job.checkpoint.is_file(): earlier.append(torch.load(job.checkpoint, map_location='cpu', weights_only=True, mmap=True))
    for old in earlier:
        ids = old.get('trackers', {})
        if (old.get('task'), old.get('run')) == (job.task, job.run) and not started_elsewhere(ids, run):
            tracked.replaces(ids)
    if tracked.ids:
        atomic_write_text(json.dumps({'task': job.task, 'run': job.run, 'trackers': tracked.ids}), _attempt_file(job))


def _reporter(cfg: FinetuneConfig, data: TaskData, job: RunJob, say: Callable[[str], None], start: float):
    "A run's epoch report (the log line, the trackers' rows at step epoch + 1) and its trackers."
    task, task_cfg = data.task, cfg.for_task(data.task.name)
    run = _tracked_run(cfg, task.name, job.run, job.seed)
    # a run trains from its first epoch: the events of a run it replaces (trained again) go, as its row does
    if is_main_process(): shutil.rmtree(run.folder, ignore_errors=True)
    tracked = start_trackers(cfg.logger, run)
    if is_main_process(): _replace_earlier(job, run, tracked)

    def report(epoch, loss, metrics):
        shown = scores_text(metrics, dev_metric_names(task))
        say(f'  {task.name} run {job.run} (seed {job.seed}) epoch {epoch + 1}/{task_cfg.epochs}: train loss {loss:.4f}, '
            f'dev {shown} [{time.perf_counter() - start:.1f}s]')
        tracked({'step': epoch + 1, 'train/loss': loss, **{f'dev/{m}': metrics[m] for m in dev_metric_names(task)}})
    return report, tracked


def _save_run(cfg: FinetuneConfig, data: TaskData, job: RunJob, model, history: list[dict], body, tracked,
              start: float) -> dict:
    """Save a trained run's weights to `job.checkpoint` (main process), give its trackers its row of the results table
    (its numbers, as results/<column>; the weights as an artifact with `tracking_artifacts`), and return the row."""
    task, task_cfg, final = data.task, cfg.for_task(data.task.name), history[-1]
    if is_main_process():
        # a transformers folder of the run this one replaces is of other weights: gone before the new weights are saved
        shutil.rmtree(transformers_folder(job.checkpoint), ignore_errors=True)
        atomic_save({'format': 'electra-finetuned', 'electra_version': __version__, 'kind': task.kind, 'task': task.name,
                     'run': job.run, 'seed': job.seed, 'labels': list(task.info.label_names),
                     'multilabel': task.info.multilabel, 'head': task.head(model), 'electra_config': body.config.to_dict(), 'model': task.saved_state(model),
                     'data': task.data_source(), 'task_settings': task.settings(), 'pretrained': cfg.model, 'pretrained_fingerprint': job.model, 'hparams': task_cfg.hparams(), 'dev': final,
                     'settings': job.settings,  # its row's: `loading.run_mismatch` compares them
                     'trackers': tracked.ids}, job.checkpoint)  # `track_exports` goes on in its tracked runs
        _attempt_file(job).unlink(missing_ok=True)  # its .pth names its tracked runs now
    row = {'task': task.name, 'run': job.run, 'seed': job.seed, 'score': final[task.score_metric], **final,
           'steps': task_cfg.epochs * -(-len(data.train) // task_cfg.batch_size),
           'seconds': round(time.perf_counter() - start, 1), 'settings': job.settings, 'data': data_named(cfg, task),
           'model_fingerprint': job.model,
           'checkpoint': str(job.checkpoint),
           'finished_at': datetime.now(timezone.utc).isoformat(timespec='seconds')}
    # the numbers of its results.csv row: not the history's `epoch` (fastai's, from 0), which the table has not
    tracked({'step': task_cfg.epochs, **{f'results/{k}': v for k, v in row.items() if k in RESULT_COLUMNS
                                      and isinstance(v, (int, float)) and k not in ('run', 'seed')}})
    if cfg.tracking_artifacts and is_main_process(): tracked.artifacts([job.checkpoint])
    tracked.end()
    return row


@contextlib.contextmanager
def _ended_if_stopped(trackers: list[Trackers]):
    "Runs' trackers ended as killed when their training stops (Ctrl-C) or fails: the same command does them again."
    try: yield
    except BaseException:
        for t in trackers: t.end('killed')
        raise


def train_and_save(cfg: FinetuneConfig, data: TaskData, job: RunJob, body, device, autocast, pad_id: int,
                   say: Callable[[str], None]) -> dict | Diverged:
    """Train one run, save its weights to `job.checkpoint` (main process), and return its row of the results table;
    or, when its loss became NaN or infinite, nothing saved and its `Diverged` record."""
    start = time.perf_counter()
    report, tracked = _reporter(cfg, data, job, say, start)
    with _ended_if_stopped([tracked]):
        model, history = train_run(data, cfg.for_task(data.task.name), body, job.seed, device, autocast, pad_id, report)
    if (step := diverged(history)) is not None: return _diverged(cfg, data, job, step, autocast, tracked, say)
    return _save_run(cfg, data, job, model, history, body, tracked, start)


def train_and_save_stack(cfg: FinetuneConfig, data: TaskData, jobs: list[RunJob], body, device, autocast, pad_id: int,
                         say: Callable[[str], None]) -> list[dict | Diverged]:
    """Train runs of one task together (`electra.finetuning.stack`), save each one's weights and return their rows (or
    `Diverged` records), as `train_and_save` does each alone; a row's `seconds` is the stack's time."""
    start = time.perf_counter()
    reporters = [_reporter(cfg, data, job, say, start) for job in jobs]
    with _ended_if_stopped([tracked for _, tracked in reporters]):
        stacked, run_model, histories = train_stack(data, cfg.for_task(data.task.name), body, [j.seed for j in jobs],
                                                    device, autocast, pad_id, [report for report, _ in reporters])
    out = []
    for r, (job, (_, tracked)) in enumerate(zip(jobs, reporters)):
        step = diverged(histories[r])
        out.append(_diverged(cfg, data, job, step, autocast, tracked, say) if step is not None else
                   _save_run(cfg, data, job, stacked.copy_run_to(r, run_model), histories[r], body, tracked, start))
    return out


def train_jobs(cfg: FinetuneConfig, data: TaskData, jobs: list[RunJob], body, device, autocast, pad_id: int,
               say: Callable[[str], None]) -> list[dict | Diverged]:
    """The rows of `jobs`, runs of one task (a `Diverged` record for a run whose loss became NaN or infinite): one
    trained alone (`train_and_save`), more stacked (`train_and_save_stack`)."""
    if len(jobs) > 1: return train_and_save_stack(cfg, data, jobs, body, device, autocast, pad_id, say)
    return [train_and_save(cfg, data, jobs[0], body, device, autocast, pad_id, say)]


def stacks(cfg: FinetuneConfig, plan, body, device, autocast, say, workers: int = 1,
           share: int = 1) -> Iterator[tuple[TaskData, list[RunJob]]]:
    """The runs of `plan`, task by task, cut into the stacks trained together (`stack_size`, on a device `share`
    processes train on at once; with `workers` processes at most a worker's share of a task's runs, so that none
    waits while another trains them all)."""
    for data, todo in plan:
        size = min(stack_size(cfg, cfg.for_task(data.task.name), body, device, autocast, len(todo), share),
                   -(-len(todo) // workers))
        if size > 1: say(f'{data.task.name}: {size} runs at a time, stacked')
        yield from ((data, todo[i:i + size]) for i in range(0, len(todo), size))
