"""Experiment trackers beside the CSV files (`logger`, as transformers' `report_to`): TensorBoard, MLflow, Weights &
Biases and Neptune, each through its own client. Every tracker of a run gets its name, group and tags, the config
(each value and where it came from), every metrics row the CSV files get, on request files as artifacts, and a
summary's tables and figures (the comparison's); the main process alone logs. A tracker whose package is missing or whose server cannot be reached is refused before
any work (`check_trackers`).

fastai's TensorBoardCallback and WandbCallback log what fastai's Recorder holds (its smoothed loss, its metrics);
both jobs replace the Recorder by their own sums (no host read per step), so the trackers here take the rows the
CSV files get, through the same clients those callbacks use (torch's SummaryWriter, wandb)."""
from __future__ import annotations

import csv
import importlib
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from electra.config.errors import ConfigError
from electra.config.shared_keys import TRACKERS
from electra.runtime.processes import environment, is_main_process

__all__ = ['TrackedRun', 'tracker_names', 'check_trackers', 'Trackers', 'start_trackers', 'started_elsewhere']

# the package each tracker imports; the extra that installs it is named as the tracker (`pip install 'electra[mlflow]'`)
_PACKAGES = {'tensorboard': 'tensorboard', 'mlflow': 'mlflow', 'wandb': 'wandb', 'neptune': 'neptune'}
_END = {'finished': 'FINISHED', 'failed': 'FAILED', 'killed': 'KILLED'}  # MLflow's run statuses
_IN_FOLDER = {'tensorboard'}  # trackers whose run is files in the run's folder: a copy of the folder holds its own
# the modes in which a tracker writes a run's files to sync later (`wandb sync`, `neptune sync`): neither client can
# go on in an offline run of an earlier start, and each start's files sync as a run of their own (W&B's two folders
# under one id replace each other's history; Neptune's offline files keep no custom run id)
_OFFLINE = {'wandb': ('WANDB_MODE', ('offline', 'dryrun')), 'neptune': ('NEPTUNE_MODE', ('offline',))}


@dataclass(frozen=True)
class TrackedRun:
    """What every tracker is told of a run: its name, group (MLflow's experiment, W&B's group), tags, the config's
    values and where each came from (`value_sources`), TensorBoard's folder, and Neptune's project."""
    name: str
    group: str
    tags: tuple[str, ...]
    config: dict
    sources: dict
    folder: Path
    neptune_project: str = ''


def tracker_names(logger: list[str]) -> list[str]:
    "The trackers of a `logger` value ('none' alone means the CSV files only)."
    return [name for name in logger if name != 'none']


def check_trackers(logger: list[str]) -> None:
    """Each tracker's package importable and, for MLflow, its tracking store (MLFLOW_TRACKING_URI: a server or a local
    store) answering; else a ConfigError naming the extra to install or the address tried."""
    for name in tracker_names(logger):
        try: importlib.import_module(_PACKAGES[name])
        except ImportError:
            raise ConfigError(f"logger: {name} is not installed: pip install 'electra[{name}]', or drop {name} from "
                              "--logger.") from None
    if 'mlflow' in logger and is_main_process(): _check_mlflow_server()


def _check_mlflow_server() -> None:
    """The tracking store of MLFLOW_TRACKING_URI opened (a server reached, a local store opened: MLflow 3 refuses a file
    store unless told otherwise) by one search, before any work; else a ConfigError naming the URI and the fix."""
    import mlflow
    uri = mlflow.get_tracking_uri()
    if uri.startswith(('http://', 'https://')):
        # one try, a short wait: MLflow's default of 7 retries with backoff waits minutes on a server that is not there
        with environment(MLFLOW_HTTP_REQUEST_MAX_RETRIES='0', MLFLOW_HTTP_REQUEST_TIMEOUT='20'):
            try: mlflow.MlflowClient(uri).search_experiments(max_results=1)
            except Exception as e:
                raise ConfigError(f"logger: mlflow: cannot reach the MLflow tracking server at {uri} ({type(e).__name__}). "
                                  "Start it, set MLFLOW_TRACKING_URI to its address, or drop mlflow from --logger.") from None
        return
    try: mlflow.MlflowClient(uri).search_experiments(max_results=1)
    except Exception as e:
        said = str(e).split('\n')[0].split('. ')[0]  # MLflow's first sentence: its whole message runs to lines
        fix = ('Set MLFLOW_ALLOW_FILE_STORE=true, or use a database store (e.g. MLFLOW_TRACKING_URI=sqlite:///mlflow.db)'
               if '://' not in uri or uri.startswith('file:') else 'Set MLFLOW_TRACKING_URI to a store MLflow can open')
        raise ConfigError(f"logger: mlflow: cannot open the MLflow tracking store at {uri} ({type(e).__name__}: {said}). "
                          f"{fix}, or drop mlflow from --logger.") from None


def _tag_pairs(tags: Iterable[str]) -> dict[str, str]:
    "Tags as MLflow's key-value pairs: 'variant=bert' -> variant: bert, a bare 'RTE' -> RTE: 'true'."
    return dict(t.split('=', 1) if '=' in t else (t, 'true') for t in tags)


def _sourced(run: TrackedRun) -> dict[str, dict]:
    "The run's config with where each value came from, as MLflow keeps it beside the parameters (`config.json`)."
    return {k: {'value': v, 'from': run.sources.get(k, '')} for k, v in run.config.items()}


def _rows_on_disk(history: dict[str, Path], step: int) -> tuple[dict[int, dict], dict[str, int]]:
    """The rows the CSV files `history` (prefix -> path, e.g. 'train/' -> metrics.csv) hold up to `step`, merged by
    step in increasing order (W&B takes no step below one it has), each value under its prefix as the sinks send it;
    and how many rows of each file."""
    rows, counts = {}, {}
    for prefix, path in history.items():
        if not Path(path).is_file(): continue
        with Path(path).open(newline='') as f: read = [r for r in csv.DictReader(f) if int(float(r['step'])) <= step]
        for r in read:
            rows.setdefault(int(float(r['step'])), {}).update(
                {prefix + k: float(v) for k, v in r.items() if k != 'step' and v != ''})
        if read: counts[Path(path).name] = len(read)
    return dict(sorted(rows.items())), counts


def _csv_markdown(path: Path) -> str:
    "A CSV file as a markdown table of its cells as written (TensorBoard shows text as markdown)."
    with path.open(newline='') as f: rows = list(csv.reader(f))
    lines = ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines[:1] + ['|' + '---|' * len(rows[0])] + lines[1:])


class _Tracker:
    "What the four trackers share: rows sent one after another (`log` each), as a tracker joining a run gets them."
    def log(self, metrics: dict, step: int): raise NotImplementedError

    def log_rows(self, rows: dict[int, dict]):
        for step, metrics in rows.items(): self.log(metrics, step)


class _TensorBoard(_Tracker):
    "A run's TensorBoard event files (torch's SummaryWriter); the config as a text table. No artifacts."
    def __init__(self, run: TrackedRun, run_id: str | None, step: int):
        from torch.utils.tensorboard import SummaryWriter
        # a resumed run drops the events after its checkpoint's step, as the CSV files drop their rows; a tracker
        # joining the run at a resume all the events an earlier start left (the rows on disk are sent again,
        # `catch_up`). Every start writes its session start: TensorBoard reads a folder's first as no restart.
        self.writer = SummaryWriter(str(run.folder), purge_step=step + 1 if run_id else 0)
        self.id = str(run.folder)
        # the config of each start at its step (a resume's other steps or lr): the last `config` text is the run's now
        rows = ''.join(f'| {k} | `{v!r}` | {run.sources.get(k, "")} |\n' for k, v in run.config.items())
        self.writer.add_text('config', f'| key | value | from |\n|---|---|---|\n{rows}', step if run_id else 0)
        if run_id: return
        self.writer.add_text('run', f'{run.name} (group {run.group}; tags {", ".join(run.tags) or "none"})', 0)

    def log(self, metrics: dict, step: int):
        for k, v in metrics.items(): self.writer.add_scalar(k, v, step, new_style=True, double_precision=True)

    def artifacts(self, paths: list[Path]): pass

    def replaces(self, old_id: str): pass  # the replaced run's folder is this one's: its events removed before the start

    def continues(self, old_id: str): pass  # a copied folder's events are the copy's own: it goes on in them

    def summary(self, tables: list[Path], figures: list[Path]):
        import matplotlib.image
        for t in tables: self.writer.add_text(t.stem, _csv_markdown(t), 0)
        for f in figures:  # a PNG as matplotlib reads it, (height, width, RGBA) in [0, 1]: its RGB
            self.writer.add_image(f.stem, matplotlib.image.imread(f)[..., :3], 0, dataformats='HWC')

    def end(self, status: str): self.writer.close()


class _Mlflow(_Tracker):
    "A run of MLflow's client (MLFLOW_TRACKING_URI): the group its experiment, the config its parameters."
    def __init__(self, run: TrackedRun, run_id: str | None, step: int):
        from mlflow import MlflowClient
        from mlflow.entities import Param
        self.client = MlflowClient()
        if run_id:
            self.id = run_id
            self.client.update_run(run_id, status='RUNNING')
            self._resumed(run, step)
            return
        self.id = self.client.create_run(self._experiment(run.group), run_name=run.name,
                                         tags=_tag_pairs(run.tags)).info.run_id
        params = [Param(k, str(v)) for k, v in run.config.items()]
        for i in range(0, len(params), 100):  # MLflow takes 100 parameters a call
            self.client.log_batch(self.id, params=params[i:i + 100])
        self.client.log_dict(self.id, _sourced(run), 'config.json')

    def _resumed(self, run: TrackedRun, step: int):
        """A resume's config: MLflow keeps each parameter's first value (a second value is refused), so each value
        that differs from its parameter is the tag `resumed.<key>` (a tag takes a new value; one the start no longer
        changes is removed), and, when one of these changed, the start's whole config with where each value came from
        as the artifact `config_resumed_at_<step>.json`: parameters and tags together are the config the run has now."""
        found = self.client.get_run(self.id)
        data = found.data
        self._tags_and_group(run, data.tags, found.info.experiment_id)
        now = {f'resumed.{k}': str(v) for k, v in run.config.items() if data.params.get(k) != str(v)}
        was = {k: v for k, v in data.tags.items() if k.startswith('resumed.')}
        if now == was: return  # the config of the last start (a finished run reopened for its files: the same)
        for k in was.keys() - now.keys(): self.client.delete_tag(self.id, k)
        for k, v in now.items(): self.client.set_tag(self.id, k, v)
        self.client.log_dict(self.id, _sourced(run), f'config_resumed_at_{step}.json')

    def _tags_and_group(self, run: TrackedRun, tags: dict, experiment_id: str) -> None:
        """A resume's `tracking_tags` set as a first start sets them (tags take new values; those of earlier starts are
        kept), and a `tracking_group` other than the run's experiment said: MLflow moves no run between experiments."""
        for k, v in _tag_pairs(run.tags).items():
            if tags.get(k) != v: self.client.set_tag(self.id, k, v)
        experiment = self.client.get_experiment(experiment_id).name
        if experiment != run.group:
            print(f"trackers: MLflow's run {self.id} stays in its experiment '{experiment}', not tracking_group "
                  f"'{run.group}' given now (MLflow moves no run between experiments; W&B's run follows the group): "
                  f"start the run under another --run_name to have it in '{run.group}' there too.", flush=True)

    def _experiment(self, name: str) -> str:
        from mlflow.exceptions import MlflowException
        found = self.client.get_experiment_by_name(name)
        if found is not None: return found.experiment_id
        try: return self.client.create_experiment(name)
        except MlflowException:  # another process of the group created it meanwhile
            return self.client.get_experiment_by_name(name).experiment_id

    def log(self, metrics: dict, step: int):
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self.client.log_batch(self.id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def log_rows(self, rows: dict[int, dict]):
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for step, row in rows.items() for k, v in row.items()]
        for i in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics a call
            self.client.log_batch(self.id, metrics=metrics[i:i + 1000])

    def artifacts(self, paths: list[Path]):
        for p in paths:
            if p.is_dir(): self.client.log_artifacts(self.id, str(p), p.name)
            else: self.client.log_artifact(self.id, str(p))

    def replaces(self, old_id: str):
        from mlflow.exceptions import MlflowException
        try: self.client.set_tag(old_id, 'replaced_by', self.id)
        except MlflowException: return  # the old run deleted, or kept by another tracking server: nothing to mark
        self.client.set_tag(self.id, 'replaces', old_id)

    def continues(self, old_id: str): self.client.set_tag(self.id, 'continues', old_id)

    def summary(self, tables: list[Path], figures: list[Path]):
        # the CSV files, not `log_table`, which appends to the table a rebuilt summary would replace
        self.artifacts([*tables, *figures])

    def end(self, status: str): self.client.set_terminated(self.id, _END[status])


class _Wandb(_Tracker):
    "A Weights & Biases run (WANDB_PROJECT, else 'electra'; WANDB_MODE=offline without an account)."
    def __init__(self, run: TrackedRun, run_id: str | None, step: int):
        import wandb
        self.run = wandb.init(project=os.environ.get('WANDB_PROJECT') or 'electra', group=run.group, name=run.name,
                              tags=list(run.tags), config=run.config, id=run_id, resume='allow' if run_id else None,
                              reinit='create_new', settings=wandb.Settings(quiet=True))
        self.run.config.update({'config_sources': run.sources}, allow_val_change=True)
        self.id, self.name = self.run.id, run.name

    def log(self, metrics: dict, step: int): self.run.log(metrics, step=step)

    def artifacts(self, paths: list[Path]):
        import wandb
        art = wandb.Artifact(f'{self.name}-{self.id}'.replace('/', '-'), type='model')
        for p in paths:
            if p.is_dir(): art.add_dir(str(p), name=p.name)
            else: art.add_file(str(p))
        self.run.log_artifact(art)

    def replaces(self, old_id: str): pass  # W&B and Neptune: the replaced run stays as it was (README, "Trackers")

    def continues(self, old_id: str): self.run.tags = (*self.run.tags, f'continues={old_id}')

    def summary(self, tables: list[Path], figures: list[Path]):
        import pandas as pd
        import wandb
        self.run.log({**{t.stem: wandb.Table(dataframe=pd.read_csv(t)) for t in tables},
                      **{f.stem: wandb.Image(str(f)) for f in figures}})

    def end(self, status: str): self.run.finish(exit_code=0 if status == 'finished' else 1)


class _Neptune(_Tracker):
    """A Neptune run (NEPTUNE_MODE, default async). Neptune's hosted service closed on 2026-03-05: its offline mode
    and self-hosted installations remain. A resumed run is found again by its custom run id."""
    def __init__(self, run: TrackedRun, run_id: str | None, step: int):
        import neptune
        self.id = run_id or uuid.uuid4().hex
        try:
            self.run = neptune.init_run(project=run.neptune_project or None, name=run.name,
                                        tags=[run.group, *run.tags], custom_run_id=self.id,
                                        mode=os.environ.get('NEPTUNE_MODE', 'async'))
        except Exception as e:  # (Neptune's own messages are banners of 20 lines: its exception's name says which)
            raise ConfigError(f"logger: cannot start a Neptune run ({type(e).__name__}). Set NEPTUNE_API_TOKEN and "
                              "--neptune_project, or NEPTUNE_MODE=offline, or drop neptune from --logger.") from None
        if _offline('neptune'): self.run['custom_run_id'] = self.id  # the id `continues` names: offline files keep none
        # every start's (a resume's other steps or lr): Neptune's fields take a new value
        self.run['config'] = {k: str(v) for k, v in run.config.items()}
        self.run['config_sources'] = dict(run.sources)

    def log(self, metrics: dict, step: int):
        for k, v in metrics.items(): self.run[k].append(v, step=step)

    def replaces(self, old_id: str): pass

    def continues(self, old_id: str): self.run['continues'] = old_id

    def artifacts(self, paths: list[Path]):
        for p in paths: self.run[f'artifacts/{p.name}'].upload_files(str(p / '*') if p.is_dir() else str(p))

    def summary(self, tables: list[Path], figures: list[Path]):
        from neptune.types import File
        # the files' bytes, which the run keeps: an upload of a path keeps only the path, read when an offline run is
        # synced (a table a later start rebuilt, or a folder moved, by then)
        for p in [*tables, *figures]:
            self.run[f'summary/{p.stem}'].upload(File.from_content(p.read_bytes(), extension=p.suffix.lstrip('.')))

    def end(self, status: str): self.run.stop()


_CLASSES = {'tensorboard': _TensorBoard, 'mlflow': _Mlflow, 'wandb': _Wandb, 'neptune': _Neptune}


class Trackers:
    """The trackers of one run: a metrics sink (`trackers(row)`: every value but `step`, at `step`), their run ids (a
    checkpoint keeps them, with the folder they were started for, so that a resumed run goes on in the same tracked
    runs, and a copy resumed elsewhere does not), artifacts, and the end."""
    def __init__(self, started: dict, folder: str = ''): self.started, self.folder, self.ended = started, folder, False

    def __call__(self, row: dict) -> None:
        metrics = {k: float(v) for k, v in row.items() if k != 'step'}
        for t in self.started.values(): t.log(metrics, int(row['step']))

    @property
    def ids(self) -> dict[str, str]:
        "Each tracker's run id, and `folder`: the run's (TrackedRun.folder, resolved); none without trackers."
        ids = {name: t.id for name, t in self.started.items()}
        return {**ids, 'folder': self.folder} if ids else {}

    def catch_up(self, names: list[str], history: dict[str, Path], step: int) -> str:
        """The trackers `names`, joining the run at a resume (the checkpoint names no run of theirs, or one they cannot
        go on in), first get the rows the CSV files `history` hold up to `step`, at their steps: each tracked run then
        holds every row of the files, as one tracked from the start does (the values as the files write them, to 6
        significant digits). Returns what was sent, as said in a line ('' when nothing was)."""
        rows, counts = _rows_on_disk(history, step)
        if not rows: return ''
        for name in names: self.started[name].log_rows(rows)
        return f"the rows written before it ({', '.join(f'{n} of {f}' for f, n in counts.items())}) sent first"

    def artifacts(self, paths: Iterable[str | Path]) -> None:
        for t in self.started.values(): t.artifacts([Path(p) for p in paths])

    def replaces(self, old: dict[str, str]) -> None:
        "Mark the tracked runs `old` (a replaced run's ids, from its checkpoint) as replaced by these, where a tracker can."
        for name, t in self.started.items():
            if name in old: t.replaces(old[name])

    def continues(self, old: dict[str, str]) -> None:
        "Link these new tracked runs to those `old` (a copied run folder's checkpoint's) they go on from, where a tracker can."
        for name, t in self.started.items():
            if name in old and name not in _IN_FOLDER: t.continues(old[name])

    def summary(self, tables: Iterable[str | Path], figures: Iterable[str | Path]) -> None:
        """A summary's CSV tables and PNG figures, each as its tracker shows one: MLflow the files as artifacts,
        TensorBoard a markdown table and an image, W&B a Table and an Image, Neptune a copy of the files."""
        for t in self.started.values(): t.summary([Path(p) for p in tables], [Path(p) for p in figures])

    def end(self, status: str = 'finished') -> None:
        "End each tracked run once: 'finished', 'failed' or 'killed' (stopped, to be resumed)."
        if self.ended: return
        self.ended = True
        for t in self.started.values(): t.end(status)


def started_elsewhere(ids: dict, run: TrackedRun) -> bool:
    """Whether the tracked runs `ids` (a checkpoint's) were started for another folder than `run`'s: the run folder
    was copied (or moved). Ids kept before the folder was recorded with them cannot tell: they count as this folder's."""
    return bool(ids.get('folder')) and Path(ids['folder']).resolve() != run.folder.resolve()


def start_trackers(logger: list[str], run: TrackedRun, ids: dict | None = None, step: int = 0,
                   history: dict[str, Path] | None = None, say: Callable[[str], None] = print) -> Trackers:
    """The trackers of `logger` started for `run` in the main process (none elsewhere); `ids`: a checkpoint's, whose
    tracked runs go on (from `step`, where TensorBoard drops later events) when they were started for this folder.
    In a copy of the folder (another run from that step on) the trackers start new runs, linked to those (`continues`),
    and TensorBoard goes on in the copy's own events: the original's tracked runs get no second value at a step.
    A tracker that `ids` do not name joins the run at `step`: it first gets the rows of the CSV files `history`
    (prefix -> path) up to it (`Trackers.catch_up`). An offline W&B or Neptune (`_OFFLINE`) cannot go on in the runs
    `ids` name: a new run each, as in a copy, sent those rows too (`_restarted_offline`). Each of these is said (`say`)."""
    if not is_main_process(): return Trackers({})
    ids, folder = ids or {}, str(run.folder.resolve())
    elsewhere = started_elsewhere(ids, run)
    offline = [name for name in tracker_names(logger) if name in ids and not elsewhere and _offline(name)]
    kept = {name: i for name, i in ids.items() if name in _IN_FOLDER or not (elsewhere or name in offline)}
    started = Trackers({name: _CLASSES[name](run, kept.get(name), step) for name in tracker_names(logger)}, folder)
    if elsewhere and set(ids) & (set(started.started) - _IN_FOLDER):
        say(f"trackers: the checkpoint's tracked runs were started for {ids['folder']}, not this folder ({folder}): "
              "new tracked runs, each tagged with the one it continues (MLflow's tag continues, W&B's tag "
              "continues=<id>, Neptune's field continues).")
        started.continues(ids)
    joined = [name for name in started.started if name not in ids]
    if step and history and joined and (sent := started.catch_up(joined, history, step)):
        say(f"trackers: {', '.join(joined)} join{'s' if len(joined) == 1 else ''} this run at step {step}: {sent}, "
              f"at their steps.")
    if offline: say(_restarted_offline(started, offline, ids, history if step else None, step))
    return started


def _offline(name: str) -> bool:
    "Whether tracker `name` writes its run to files to sync later (WANDB_MODE=offline, NEPTUNE_MODE=offline)."
    variable, modes = _OFFLINE.get(name, ('', ()))
    return os.environ.get(variable, '').strip().lower() in modes


def _restarted_offline(started: Trackers, names: list[str], ids: dict, history: dict | None, step: int) -> str:
    """The offline trackers `names`, which cannot go on in the checkpoint's runs `ids`: each is a new run, linked to the
    one it continues and sent the rows written before `step` (when `history` names them), so that the last start's
    run holds the whole run. Returns the line that says so."""
    started.continues({name: ids[name] for name in names})
    sent = started.catch_up(names, history, step) if history else ''
    modes = ', '.join(f'{_OFFLINE[n][0]}={os.environ[_OFFLINE[n][0]].strip()}' for n in names)
    return (f"trackers: {', '.join(names)} offline ({modes}) cannot go on in an earlier start's offline run (each "
            f"start's files sync as a run of their own): a new tracked run, tagged with the one it continues (W&B's "
            f"tag continues=<id>, Neptune's field continues){f', {sent}, so that it holds the whole run' if sent else ''}.")
