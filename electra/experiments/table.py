"""The comparison's table and plot, rebuilt from what is on disk: per variant its pretraining steps, FLOPs and wall
time (the runs' records), and per task the dev score over every fine-tuning run of every pretraining seed (the
results tables finetune.py writes, its `score` column: the task's main metric as the sweep reports it). With
several `finetune_at` fractions, the same scores for each fine-tuned checkpoint: the curve of score against
pretraining compute (`curve.csv`, and the plot's lines)."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from electra.config.errors import RunWarning
from electra.experiments.plan import Plan, VariantPlan
from electra.experiments.runs import RECORD, read_record
from electra.finetuning.results import METRIC_COLUMNS, ResultsTable, sample_std
from electra.finetuning.tasks.files import make_task
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.runtime.files import atomic_write_figure, atomic_write_text, glyphs_said

__all__ = ['finetune_scores', 'variant_row', 'comparison_table', 'curve_table', 'table_markdown', 'plot_comparison',
           'write_table']


def finetune_scores(plan: Plan, variant: str, fraction: float = 1.0) -> pd.DataFrame:
    """Every finished fine-tuning run of `variant`'s checkpoints at `fraction` of pretraining (all its pretraining
    seeds): pretrain_seed, task, run, score and the other metrics; only the comparison's tasks and first `runs` runs."""
    parts = []
    for run in plan.runs_of(variant):
        path = plan.finetune_dir / run.point(fraction).group / 'results.csv'
        if not path.is_file(): continue
        df = ResultsTable(path).df
        df = df[df['task'].isin(plan.tasks) & (df['run'].astype(int) < plan.finetune.runs)]
        parts.append(df.assign(pretrain_seed=run.seed))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=['pretrain_seed', 'task', 'run', 'score'])


def _task_columns(scores: pd.DataFrame, task: str) -> dict:
    "A task's mean, sample std and count of the score, and the means of its other reported metrics."
    part = scores[scores['task'] == task]
    s = part['score'].astype(float).dropna()  # a run whose score is undefined counts for neither the mean nor the runs
    out = {task: float(s.mean()) if len(s) else math.nan, f'{task}_std': sample_std(s), f'{task}_runs': len(s)}
    for m in METRIC_COLUMNS:
        if m in part and part[m].notna().any(): out[f'{task}_{m}'] = float(part[m].astype(float).mean())
    return out


def _average(scores: pd.DataFrame, tasks: list[str]) -> tuple[float, float]:
    """The mean over tasks of each task's mean, and its spread: the sample std over (pretraining seed, fine-tuning run)
    of the average over tasks of that run's scores (for one task, the task's std)."""
    if not tasks or any(not (scores['task'] == t).any() for t in tasks): return math.nan, math.nan
    mean = float(np.mean([scores.loc[scores['task'] == t, 'score'].astype(float).mean() for t in tasks]))
    wide = scores.pivot_table(index=['pretrain_seed', 'run'], columns='task', values='score', aggfunc='mean')
    complete = wide.reindex(columns=tasks).dropna()
    return mean, sample_std(complete.mean(axis=1)) if len(complete) else math.nan


def variant_row(plan: Plan, v: VariantPlan) -> dict:
    "One row of the table: the variant's budget, its finished pretraining runs' wall time, its dev scores."
    records = [read_record(r.run_dir / RECORD) for r in plan.runs_of(v.name)]
    done = [r for r in records if r.get('done')]
    row = {'variant': v.name, 'config': v.preset, 'steps': v.steps, 'warmup_steps': v.warmup_steps,
           'flops_per_step': v.flops_per_step, 'pretrain_flops': v.total_flops,
           'pretrain_runs': len(done), 'seeds': len(records),
           'wall_seconds': float(np.mean([r['wall_seconds'] for r in done])) if done else math.nan}
    if plan.finetune is None: return row
    scores = finetune_scores(plan, v.name)
    for task in plan.tasks: row.update(_task_columns(scores, task))
    row['average'], row['average_std'] = _average(scores, plan.tasks)
    return row


def comparison_table(plan: Plan) -> pd.DataFrame:
    "One row per variant, in the comparison's order."
    return pd.DataFrame([variant_row(plan, v) for v in plan.variants])


def curve_table(plan: Plan) -> pd.DataFrame:
    """One row per variant and fine-tuned fraction of pretraining: the checkpoint's step, the training FLOPs spent to
    reach it (`pretrain_flops_to_step`: each stage of two-stage training at its own cost) and the dev scores as in
    `variant_row`."""
    rows = []
    for v in plan.variants:
        for point in plan.runs_of(v.name)[0].points:
            scores = finetune_scores(plan, v.name, point.fraction)
            row = {'variant': v.name, 'fraction': point.fraction, 'step': point.step,
                   'pretrain_flops': point.flops}
            for task in plan.tasks: row.update(_task_columns(scores, task))
            row['average'], row['average_std'] = _average(scores, plan.tasks)
            rows.append(row)
    return pd.DataFrame(rows)


def _seconds(s: float) -> str:
    if not math.isfinite(s): return '-'
    s = round(s)
    return f'{s // 3600}h{s % 3600 // 60:02d}m' if s >= 3600 else f'{s // 60}m{s % 60:02d}s' if s >= 60 else f'{s}s'


def _score(mean: float, std: float, n: int | None = None, expected: int | None = None) -> str:
    if not math.isfinite(mean): return '-'
    text = f'{mean:.2f} ± {std:.2f}' if math.isfinite(std) and n != 1 else f'{mean:.2f}'  # one run: no spread
    return text + (f' ({n} of {expected} runs)' if n is not None and expected and n < expected else '')


def _metric(plan: Plan, task: str) -> str:
    """The task's score metric, for the header: the one its fine-tuning scores and its summary names
    (`TaskInfo.score_metric`): GLUE's table, or the task a task file makes (`make_task`, as the sweep makes it): a QA
    task's f1, whose file names no metrics, a tagging task's accuracy where its tags turn out to hold no entities."""
    if task in TASKS: return TASKS[task].score_metric
    with warnings.catch_warnings():  # what reading the task's data says, its fine-tuning has said
        warnings.simplefilter('ignore', RunWarning)
        return make_task(plan.finetune.file_tasks()[task]).score_metric


def _score_cells(r: dict, tasks: list[str], expected: int | None) -> list[str]:
    "A row's score cells: each task's mean ± std (and how many runs, when some are missing), then the average."
    cells = [_score(r[t], r[f'{t}_std'], r[f'{t}_runs'], expected) for t in tasks]
    return cells + ([_score(r['average'], r['average_std'])] if len(tasks) > 1 else [])


# what `_average` computes, for the table's header
_AVERAGE = ('average: the mean over tasks, ± the sample std over the fine-tuning runs (pretraining seed, run index) '
            'of their mean over tasks (run i of each task taken together)')


def table_markdown(plan: Plan, table: pd.DataFrame, curve: pd.DataFrame | None = None) -> str:
    "The table as markdown, headed by what was compared and how; then the curve's table when several points were tuned."
    cfg, tasks = plan.cfg, plan.tasks
    ref = next(v for v in plan.variants if v.name == cfg.reference_name)
    budget = (f"equal pretraining FLOPs, those of {ref.name} in {ref.steps:,} steps" if cfg.budget == 'flops'
              else f'equal pretraining steps ({ref.steps:,})')
    scores = (f"Dev scores: mean ± sample std over all fine-tuning runs ({plan.finetune.runs} per task per pretraining "
              f"seed){'; ' + _AVERAGE if len(tasks) > 1 else ''}." if plan.finetune else 'No fine-tuning.')
    lines = [f'# Comparison {cfg.name}', '',
             f"Budget: {budget}; {len(cfg.seeds)} pretraining seed(s) per variant; wall time: the mean per pretraining "
             f"run (its attempts that trained; one that found it finished adds none). {scores}", '']
    task_heads = [f'{t} ({_metric(plan, t)})' for t in tasks] + (['average'] if len(tasks) > 1 else [])
    head = ['variant', 'steps', 'pretrain FLOPs', 'wall time', *task_heads]
    lines += ['| ' + ' | '.join(head) + ' |', '|---|' + '---:|' * (len(head) - 1)]
    expected = len(cfg.seeds) * plan.finetune.runs if plan.finetune else None
    for r in table.to_dict('records'):
        cells = [r['variant'], f"{r['steps']:,}", f"{r['pretrain_flops']:.2e}", _seconds(r['wall_seconds'])]
        lines.append('| ' + ' | '.join(cells + _score_cells(r, tasks, expected)) + ' |')
    if curve is not None and len(cfg.finetune_at) > 1:
        head = ['variant', 'fraction', 'step', 'pretrain FLOPs', *task_heads]
        lines += ['', '## Along pretraining', '', 'The checkpoints at each `finetune_at` fraction of every run, '
                  'fine-tuned the same way (FLOPs: those spent to reach the checkpoint).', '',
                  '| ' + ' | '.join(head) + ' |', '|---|' + '---:|' * (len(head) - 1)]
        for r in curve.to_dict('records'):
            cells = [r['variant'], f"{r['fraction']:g}", f"{r['step']:,}", f"{r['pretrain_flops']:.2e}"]
            lines.append('| ' + ' | '.join(cells + _score_cells(r, tasks, expected)) + ' |')
    return '\n'.join(lines)


def _dodged(xs: list[float], step: float = 0.02) -> list[float]:
    "Points of (about) equal FLOPs moved apart by `step` decades each, centred on their x, so no error bar hides another."
    groups: dict[float, list[int]] = {}
    for i, x in enumerate(xs): groups.setdefault(round(math.log10(x), 2), []).append(i)
    out = list(xs)
    for members in groups.values():
        for k, i in enumerate(members): out[i] = xs[i] * 10 ** (step * (k - (len(members) - 1) / 2))
    return out


def plot_comparison(plan: Plan, table: pd.DataFrame, path: Path, curve: pd.DataFrame | None = None) -> Path | None:
    """Average dev score (error bar: its spread) against pretraining FLOPs (log axis): a labelled point per variant
    (points at equal FLOPs set slightly apart), or with several fine-tuned fractions (`curve`) a line per variant
    through its checkpoints, as the curves of the paper's Figure 3. None when no scores exist yet."""
    along = curve is not None and len(plan.cfg.finetune_at) > 1
    data = curve if along else table
    if 'average' not in data or not data['average'].notna().any(): return None
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    with glyphs_said(path):  # (a comparison or variant named in another script)
        fig = _comparison_figure(plan, table, curve, along, data)
        atomic_write_figure(fig, path, 120)
    plt.close(fig)
    return path


def _comparison_figure(plan: Plan, table: pd.DataFrame, curve: pd.DataFrame | None, along: bool, data: pd.DataFrame):
    "The figure of `plot_comparison`: its points or lines, axes, labels and legend."
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.set_xscale('log')
    if along: _plot_lines(ax, curve)
    else: _plot_points(ax, table)
    lo, hi = data.loc[data['average'].notna(), 'pretrain_flops'].agg(['min', 'max'])
    if along:  # the checkpoints' FLOPs as the ticks: a curve spans a decade or two
        ticks = sorted(set(data.loc[data['average'].notna(), 'pretrain_flops'].round(-9)))
        ax.set_xticks(ticks, [f'{x:.2g}' for x in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlim(lo / 1.5, hi * 1.5)
    else:
        if hi < 10 * lo: ax.set_xlim(lo / 4, hi * 4)  # equal FLOPs: a readable stretch of the axis around the points
        ax.xaxis.set_minor_formatter(matplotlib.ticker.LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(2, 1)))
    ax.set_xlabel('pretraining FLOPs' + (' (to the checkpoint)' if along else ' (per run)'))
    one = plan.tasks[0] if len(plan.tasks) == 1 else None
    ax.set_ylabel(f'{one} dev {_metric(plan, one)}' if one else f'average dev score ({len(plan.tasks)} tasks)')
    ax.set_title(f'{plan.cfg.name}: dev score against pretraining compute')
    ax.grid(alpha=0.3, which='both')
    ax.legend(fontsize=8, loc='best')
    fig.tight_layout()
    return fig


def _plot_points(ax, table: pd.DataFrame) -> None:
    rows = table[table['average'].notna()].to_dict('records')
    for r, x in zip(rows, _dodged([r['pretrain_flops'] for r in rows])):
        err = r['average_std'] if math.isfinite(r['average_std']) else 0.0
        ax.errorbar(x, r['average'], yerr=err, fmt='o', capsize=4, label=r['variant'])
        ax.annotate(r['variant'], (x, r['average']), textcoords='offset points', xytext=(7, 4), fontsize=9)


def _plot_lines(ax, curve: pd.DataFrame) -> None:
    "A line per variant through its checkpoints; points of equal FLOPs set slightly apart, as `_plot_points` does."
    done = curve[curve['average'].notna()]
    done = done.assign(x=_dodged(list(done['pretrain_flops'])))
    for name, part in done.groupby('variant', sort=False):
        ax.errorbar(part['x'], part['average'], yerr=part['average_std'].fillna(0.0), fmt='o-', capsize=3, label=name)


def write_table(plan: Plan) -> tuple[pd.DataFrame, str]:
    "`table.csv`, `table.md` and `plot.png` (and `curve.csv` for several `finetune_at`) in the comparison's folder."
    table = comparison_table(plan)
    curve = curve_table(plan) if plan.finetune is not None and len(plan.cfg.finetune_at) > 1 else None
    text = table_markdown(plan, table, curve)
    atomic_write_text(table.to_csv(index=False, float_format='%.6g'), plan.root / 'table.csv')
    if curve is not None: atomic_write_text(curve.to_csv(index=False, float_format='%.6g'), plan.root / 'curve.csv')
    atomic_write_text(text + '\n', plan.root / 'table.md')
    plot_comparison(plan, table, plan.root / 'plot.png', curve)
    return table, text
