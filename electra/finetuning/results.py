"""The results of a fine-tuning sweep: a CSV table with one row per finished run, per-task summaries, a plot of
the spread over runs, and the choice of the runs whose predictions are submitted."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from electra.config.errors import ConfigError
from electra.config.text_files import load_json, read_text
from electra.finetuning.tasks.base import TaskInfo
from electra.finetuning.tasks.glue.metrics import GLUE_SCORE_TASKS, glue_score
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.metrics import METRIC_NAMES, dev_metric_names, metric_text
from electra.runtime.files import atomic_write_figure, atomic_write_text, glyphs_said, locked, writable_files
from electra.runtime.processes import is_main_process

__all__ = ['JOB_RUNS', 'METRIC_COLUMNS', 'RESULT_COLUMNS', 'SCORE_DECIMALS', 'ResultsTable', 'sample_std', 'summarize', 'summary_markdown',
           'plot_summary', 'select_runs']

# GLUE's columns first (MNLI's mismatched accuracy among them), then every other metric of the table of
# tasks/metrics.py: tasks from files, tagging, QA
_GLUE_COLUMNS = ['mcc', 'accuracy', 'f1', 'pearson', 'spearman', 'accuracy_mm']
METRIC_COLUMNS = [*_GLUE_COLUMNS, *(m for m in METRIC_NAMES if m not in _GLUE_COLUMNS)]
SCORE_DECIMALS = 4  # results.csv's numbers, and the statistics of them that the card's metadata gives
# `data`: what the run was fine-tuned on, by name (`inputs.data_named`), for the group's card; `settings` holds it by
# content
RESULT_COLUMNS = ['task', 'run', 'seed', 'score', *METRIC_COLUMNS, 'train_loss', 'steps', 'seconds', 'settings', 'data',
                  'model_fingerprint', 'checkpoint', 'finished_at']
# columns a table written by an earlier version may lack: empty in its rows (a run without a fingerprint is of a model
# not known, and is fine-tuned again: `sweep._todo`; one without `data` is carded as not telling its data)
LATER_COLUMNS = [*METRIC_COLUMNS, 'data', 'model_fingerprint']
RENAMED_COLUMNS = {'micro_f1': 'f1_micro', 'macro_f1': 'f1_macro'}  # the multi-label F1s of tables written before
# beside the table: each task's `runs` in the last job that named it. A job of fewer runs keeps the rows past them (a
# later job of more reuses them), so a later job of other tasks summarises an earlier task over these runs only: the
# rows past them may be of other settings (`sweep._group_rows`)
JOB_RUNS = 'job_runs.json'


class ResultsTable:
    """The results CSV: read at start (to resume a sweep), one row added and the file rewritten atomically as soon as
    each run finishes; rows in GLUE's task order, then by run. Jobs writing the same table at once (two commands on
    one group) change it in turn, each the table as the other left it (`_rewrite`). A run whose loss became NaN or
    infinite has no row: `diverged` keeps this job's (`runs.Diverged`), for the summary and the job's last line, and a
    later job tries them again."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        writable_files(self.path.parent, (self.path.name, JOB_RUNS), 'output_dir')  # written in place later
        self.df = _read_table(self.path) if self.path.is_file() else pd.DataFrame(columns=RESULT_COLUMNS)
        self.job_runs = _read_job_runs(self.path.parent / JOB_RUNS)  # task -> runs of its last job ({}: none recorded)
        self.diverged: list = []

    def get(self, task: str, run: int) -> dict | None:
        rows = self.df[(self.df['task'] == task) & (self.df['run'] == run)]
        return None if rows.empty else rows.iloc[-1].to_dict()

    def add(self, row: dict) -> None:
        "Add a finished run's row, replacing an earlier row of its task and run, and rewrite the table (`_rewrite`)."
        new = pd.DataFrame([{c: row.get(c, np.nan) for c in RESULT_COLUMNS}])
        self._rewrite(lambda df: _with_row(df, new))

    def name_data(self, task: str, runs: list[int], data: str) -> None:
        """Rows of `task`'s `runs` that do not name their data (a table of an earlier version) named `data`: a job
        reuses a row only on the data its `settings` record by content (`inputs.what_changed`), so they are of the
        job's data, and a later job on other data still tells them apart (the card: `finetuning.card._task_data`)."""
        def named(df: pd.DataFrame) -> pd.DataFrame:
            df = df.assign(data=df['data'].astype(object))  # all empty: read as numbers
            df.loc[(df['task'] == task) & df['run'].isin(runs) & df['data'].isna(), 'data'] = data
            return df
        if self.df.loc[(self.df['task'] == task) & self.df['run'].isin(runs), 'data'].isna().any():
            self._rewrite(named)

    def add_diverged(self, record) -> None:
        """A run of this job that diverged (`runs.Diverged`: task, run, ...): kept in `diverged`, and an earlier row of
        that run (of another model, done again) dropped, so that it is neither summarised nor picked for predictions."""
        self.diverged.append(record)
        if self.get(record.task, record.run) is not None:
            self._rewrite(lambda df: df[~((df['task'] == record.task) & (df['run'] == record.run))].reset_index(drop=True))

    def _rewrite(self, change) -> None:
        """The table as `change` (a function of the table) makes it, and the file rewritten (main process). Under the
        table's lock the file is read again first, so that the rows another job added meanwhile are kept."""
        if not is_main_process():
            self.df = change(self.df)
            return
        with locked(self.path):
            df = change(_read_table(self.path) if self.path.is_file() else self.df)
            stored = df.assign(checkpoint=[_stored(c, self.path.parent) for c in df['checkpoint']])
            atomic_write_text(stored.to_csv(index=False, float_format=f'%.{SCORE_DECIMALS}f'), self.path)
            self.df = _read_table(self.path)  # as written (4 decimals), as the rows read back from it are

    def record_job(self, tasks: list[str], runs: int) -> None:
        "`tasks` named by a job of `runs` runs: `JOB_RUNS` rewritten (main process), under its lock as the table is."
        path = self.path.parent / JOB_RUNS
        if not is_main_process():
            self.job_runs = {**self.job_runs, **dict.fromkeys(tasks, runs)}
            return
        with locked(path):
            self.job_runs = {**_read_job_runs(path), **dict.fromkeys(tasks, runs)}
            atomic_write_text(json.dumps(self.job_runs, indent=1, sort_keys=True) + '\n', path)

    def task_rows(self, task: str) -> pd.DataFrame:
        return self.df[self.df['task'] == task].sort_values('run')


def _with_row(df: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    "`df` with the row `new` in place of any of its task and run, in GLUE's task order (tasks from files by name), then run."
    task, run = new.iloc[0]['task'], new.iloc[0]['run']
    keep = df[~((df['task'] == task) & (df['run'] == run))]
    df = new if keep.empty else pd.concat([keep, new], ignore_index=True)
    # the same table whichever order the runs finished in (parallel workers)
    names = [*TASKS, *sorted(set(df['task']) - set(TASKS))]
    order = df['task'].map({name: k for k, name in enumerate(names)})
    return df.iloc[np.lexsort((df['run'].astype(int).to_numpy(), order.to_numpy()))].reset_index(drop=True)


_WITHOUT_RECORD = 'a job then summarises an earlier task over all its rows.'


def _read_job_runs(path: Path) -> dict[str, int]:
    "The record `JOB_RUNS` ({} without one); a ConfigError naming a file that is not one, and the fix."
    if not path.is_file(): return {}
    try: record = load_json(read_text(path), str(path))
    except ConfigError as e: raise ConfigError(f"{e} Or delete it: {_WITHOUT_RECORD}") from None
    if not (isinstance(record, dict) and all(type(n) is int and n > 0 for n in record.values())):
        raise ConfigError(f"{path}: not finetune.py's record of each task's runs (an object of task names and whole "
                          f"numbers > 0). Delete it: {_WITHOUT_RECORD}")
    return record


def _read_table(path: Path) -> pd.DataFrame:
    "A results CSV written by `ResultsTable`; a ConfigError naming a file that is not one, or a damaged row, and the fix."
    def refuse(why: str): raise ConfigError(f"{path}: not a results table of finetune.py ({why}). Move it away or choose "
                                            "another --group.")
    try: text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError: refuse('not UTF-8 text')
    if not text.strip(): refuse('an empty file')
    try: df = pd.read_csv(io.StringIO(text), dtype={'task': str, 'settings': str, 'data': str, 'model_fingerprint': str,
                                                    'checkpoint': str, 'finished_at': str})
    except pd.errors.ParserError as e: refuse(str(e).strip())
    df = df.rename(columns=RENAMED_COLUMNS)
    for c in LATER_COLUMNS:
        if c not in df.columns: df[c] = np.nan
    missing = [c for c in RESULT_COLUMNS if c not in df.columns]
    if missing: refuse(f"no column {', '.join(missing)}")
    incomplete = df[['task', 'run', 'settings']].isna().any(axis=1).to_numpy().nonzero()[0]  # what a resume matches on
    if len(incomplete):
        raise ConfigError(f"{path}: line {incomplete[0] + 2} is incomplete (a damaged file). Delete that line and run the "
                          "same command again to redo its run.")
    df['checkpoint'] = [_resolved(c, path.parent) for c in df['checkpoint']]
    return df[RESULT_COLUMNS]


# A group is a folder that may be copied or renamed: a row names its .pth relative to the folder holding the table,
# and is read against where that folder is now. The sweep writes every run's file there, as <task>_<i>.pth
# (`sweep._todo`), so a row of an earlier version (an absolute path, perhaps of the folder this one was copied
# from) names its file by its name in this folder, never the other folder's file.
def _stored(checkpoint, folder: Path) -> str:
    "A row's checkpoint as the table stores it: relative to the table's folder (`folder`)."
    if not isinstance(checkpoint, str) or not checkpoint: return checkpoint
    path = Path(checkpoint)
    return path.name if path.parent == folder else checkpoint


def _resolved(checkpoint, folder: Path):
    "A stored checkpoint as the rows in memory hold it: the file of that name in `folder`, where the table is now."
    if not isinstance(checkpoint, str) or not checkpoint: return checkpoint
    path = Path(checkpoint)
    return str(folder / (path.name if path.is_absolute() else path))


def sample_std(values: pd.Series) -> float:
    """The sample std (ddof 1) of the scores; NaN for fewer than two, where it is undefined (0/0): the summary shows
    '–', the comparison's table.csv an empty cell."""
    return float(values.std(ddof=1)) if len(values) > 1 else float('nan')


def summarize(df: pd.DataFrame, tasks: dict[str, TaskInfo] = TASKS) -> pd.DataFrame:
    """Per task of `tasks` (in its order: GLUE's, then tasks from files): the score metric's runs (and how many of them
    it is undefined for), mean, median, sample std, best and worst over the runs it is defined for (NaN: none), and the
    means of the task's other metrics, the same way."""
    rows = []
    for name, task in tasks.items():
        part = df[df['task'] == name]
        if part.empty: continue
        s = part['score'].astype(float).dropna()  # an undefined score is no score, never a 0
        others = [m for m in dev_metric_names(task) if m != task.score_metric]
        rows.append({'task': name, 'metric': task.score_metric, 'runs': len(part), 'undefined': len(part) - len(s),
                     'mean': s.mean(), 'median': s.median(), 'std': sample_std(s),
                     'best': s.max(), 'worst': s.min(),
                     'other metrics (mean)': ', '.join(f'{m} {metric_text(part[m].astype(float).mean())}'
                                                       for m in others)})
    return pd.DataFrame(rows)


def summary_markdown(summary: pd.DataFrame) -> str:
    "The summary as a markdown table, closed by the paper's GLUE score (mean over the 8 tasks other than WNLI)."
    head = '| task | metric | runs | mean | median | std | best | worst | other metrics (mean) |'
    lines = [head, '|' + '---|' * 9]
    for r in summary.to_dict('records'):
        runs = f"{r['runs']} ({r['undefined']} undefined)" if r['undefined'] else r['runs']
        # a std over fewer than two defined scores is undefined, no spread: '–', not a score called undefined
        cells = ' | '.join('–' if c == 'std' and np.isnan(r[c]) else metric_text(r[c])
                           for c in ('mean', 'median', 'std', 'best', 'worst'))
        lines.append(f"| {r['task']} | {r['metric']} | {runs} | {cells} | {r['other metrics (mean)']} |")
    scored = summary[summary['task'].isin(GLUE_SCORE_TASKS)]
    if not scored.empty:  # a task without a defined score leaves the GLUE score undefined, not lowered
        g = {col: metric_text(glue_score(dict(zip(scored['task'], scored[col]))))
             for col in ('mean', 'median', 'best', 'worst')}
        label = f'GLUE score ({len(scored)} of {len(GLUE_SCORE_TASKS)} tasks)'
        lines.append(f"| {label} | | | {g['mean']} | {g['median']} | | {g['best']} | {g['worst']} | |")
    return '\n'.join(lines)


def plot_summary(df: pd.DataFrame, path: str | Path, title: str = '', tasks: dict[str, TaskInfo] = TASKS) -> Path:
    "A PNG of every run's dev score per task (dots), with each task's median (bar)."
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    path = Path(path)
    names = [n for n in tasks if (df['task'] == n).any()]
    with glyphs_said(path):  # (a group or task named in another script)
        fig, ax = plt.subplots(figsize=(1.2 * max(len(names), 3) + 1, 4))
        rng = np.random.default_rng(0)
        for x, name in enumerate(names):
            s = df.loc[df['task'] == name, 'score'].astype(float).dropna().to_numpy()  # undefined scores: no dot
            ax.scatter(x + rng.uniform(-0.15, 0.15, len(s)), s, s=18, alpha=0.7)
            if len(s): ax.hlines(np.median(s), x - 0.3, x + 0.3, colors='k', linewidth=2)
        ax.set_xticks(range(len(names)), [f'{n}\n({tasks[n].score_metric})' for n in names], fontsize=8)
        ax.set_ylabel('dev score (%)')
        ax.set_title(title or 'GLUE dev scores per run (bar: median)')
        ax.grid(axis='y', alpha=0.3)
        fig.tight_layout()
        if is_main_process(): atomic_write_figure(fig, path, 120)
    plt.close(fig)
    return path


def select_runs(rows: pd.DataFrame, select: str = 'best', k: int = 1) -> pd.DataFrame:
    """The runs whose predictions are submitted: the best dev score, or the median run (the upper middle of the runs
    sorted by score, so a real run), or with `k > 1` the top k by dev score (an ensemble). Ties go to the lower run.
    A run whose score is undefined (NaN) is never picked: with none defined, the pick is empty."""
    ranked = rows.assign(_s=rows['score'].astype(float)).dropna(subset=['_s'])
    ranked = ranked.sort_values(['_s', 'run'], ascending=[False, True])
    if ranked.empty: pick = ranked
    elif k > 1: pick = ranked.head(k)
    elif select == 'best': pick = ranked.head(1)
    elif select == 'median': pick = ranked.iloc[[(len(ranked) - 1) // 2]]
    else: raise ValueError(f"select: unknown mode {select!r}; use 'best' or 'median'")
    return pick.drop(columns='_s')
