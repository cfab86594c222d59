"""What the driver notebooks show between their steps, besides the decoded examples and masked batches of
`electra.tools.data_views`: the generator's samples, the discriminator's verdict on every token (an
`electra.tools.token_view.TokenView`), the loss curves, and the fine-tuning results. Each function returns a pandas
DataFrame, a `TokenView` or a matplotlib Figure; `show` displays it in a notebook and prints it (tables, token views)
in a script, so the same cells run in both.

Nothing here changes a run: masking and sampling use their own seeded generators, the model is put back in the
mode (train/eval) and with the sampling generator it had.
"""
from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from electra.config.objectives import OBJECTIVES, Objective
from electra.config.pretrain import PretrainConfig
from electra.config.yaml_reader import load_yaml
from electra.data.batches import pad_examples
from electra.finetuning.results import METRIC_COLUMNS
from electra.objective.masking import MaskingSettings, write_at_positions
from electra.runtime.files import atomic_write_figure, glyphs_said
from electra.runtime.processes import is_main_process, running_in_notebook
from electra.tools.data_views import mask_batch
from electra.tools.token_view import TokenView

__all__ = ['show', 'show_image', 'example_batch', 'ReplacedTokenDetection', 'replaced_token_detection', 'generator_samples',
           'detection_view', 'plot_losses', 'runs_table']


# -- showing things in a notebook and in a script

def show(obj, title: str | None = None) -> None:
    """Display `obj` (under `title`) in a notebook; in a script print the title and the object (a table as text; a figure
    not), from the main process of a torchrun job only."""
    from matplotlib.figure import Figure
    if not is_main_process(): return
    if running_in_notebook():
        from IPython.display import Image, Markdown, display
        if title: display(Markdown(f'**{title}**'))
        if isinstance(obj, Figure):  # as a PNG: whatever matplotlib backend the kernel has (none, Agg, inline)
            buf = io.BytesIO()
            with glyphs_said(title or 'the figure'): obj.savefig(buf, format='png', dpi=100)  # (text of any script)
            obj = Image(data=buf.getvalue(), format='png')
        display(obj)
        return
    if title: print(title)
    if isinstance(obj, Figure): return
    print(obj.to_string(index=False) if isinstance(obj, pd.DataFrame) else obj)


def show_image(path: str | Path) -> None:
    "Display a saved image in a notebook; in a script print where it is."
    if running_in_notebook():
        from IPython.display import Image, display
        display(Image(filename=str(path)))
    else:
        print(f'plot: {path}')


# -- a batch of examples

def example_batch(dataset, tokenizer, n: int = 4, max_length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `n` examples of a pretraining dataset as a padded batch (input_ids, token_type_ids), [n, L] each,
    L = `max_length` or the longest of them."""
    table = dataset.with_format('arrow')[:n]
    longest = max((len(ids) for ids in table['input_ids'].to_pylist()), default=1)
    return pad_examples(table, max_length or longest, tokenizer.pad_token_id)


# -- generator and discriminator at work

@dataclass
class ReplacedTokenDetection:
    "One replaced-token-detection pass over a batch: what each network saw and did (all [B, L] but `positions`)."
    original: torch.Tensor       # the example's ids
    masked: torch.Tensor         # the generator's input
    corrupted: torch.Tensor      # the discriminator's input: masked positions hold the generator's samples
    positions: torch.Tensor      # [B, P] the chosen positions
    chosen: torch.Tensor         # [B, P] which slots of `positions` are in use
    sampled: torch.Tensor        # [B, P] each slot's sample (a position drawn in several slots: one draw each)
    is_replaced: torch.Tensor    # bool: the token differs from the original (a sample equal to it counts as original)
    p_replaced: torch.Tensor     # the discriminator's probability that the token was replaced
    real: torch.Tensor           # bool: not padding


@torch.no_grad()
def replaced_token_detection(model, input_ids: torch.Tensor, token_type_ids: torch.Tensor, tokenizer, cfg,
                             seed: int = 0) -> ReplacedTokenDetection:
    """Mask a batch (`electra.tools.data_views.mask_batch`), let the generator of `model` (an `ElectraGeneratorDiscriminator`) fill
    in the masked positions with samples and its discriminator judge every token, in eval mode (no dropout).
    `cfg`: the run's `PretrainConfig` (its masking settings)."""
    device = next(model.parameters()).device
    input_ids, token_type_ids = input_ids.to(device), token_type_ids.to(device)
    m = mask_batch(input_ids, MaskingSettings.from_config(cfg, tokenizer), seed)
    was_training, rng = model.training, model.rng
    model.eval()
    model.rng = torch.Generator(device=device).manual_seed(seed + 1)
    try:  # `forward`, not `model(...)`: a model compiled in place for training runs this one pass eagerly
        out = model.forward(m.input_ids, token_type_ids, m.positions, m.labels)
    finally:
        model.train(was_training)
        model.rng = rng
    chosen = m.labels >= 0
    # an objective without a generator samples nothing; the MLM heads have no replaced-token detection: its
    # probabilities are NaN
    kept = m.input_ids.gather(1, m.positions)
    sampled = kept if out.sampled is None else out.sampled
    # as the model writes it: a position of several slots gets the floor of their samples' mean (scatter_update)
    corrupted = write_at_positions(m.input_ids, m.positions, sampled, chosen)
    is_replaced = torch.zeros_like(input_ids, dtype=torch.bool) if out.is_replaced is None else out.is_replaced
    p_replaced = torch.full(input_ids.shape, float('nan')) if out.disc_logits is None else \
        torch.sigmoid(out.disc_logits.float())
    return ReplacedTokenDetection(input_ids.cpu(), m.input_ids.cpu(), corrupted.cpu(), m.positions.cpu(), chosen.cpu(),
                                  sampled.cpu(), is_replaced.bool().cpu(), p_replaced.cpu(),
                                  out.attention_mask.bool().cpu())


def generator_samples(rtd: ReplacedTokenDetection, tokenizer, n: int = 2) -> pd.DataFrame:
    """At every masked slot of the first `n` examples, by position: the original token, what the generator saw
    ([MASK] or the kept token), that slot's sample, what the discriminator saw there (a position drawn in several
    slots, `mask_mode: with_replacement`: the floor of their samples' mean, as the official code writes it), and
    whether that replaced the original."""
    rows, name = [], lambda t: tokenizer.convert_ids_to_tokens(int(t))
    for r in range(min(n, rtd.original.shape[0])):
        slots = sorted((int(rtd.positions[r, s]), s) for s in range(rtd.positions.shape[1]) if rtd.chosen[r, s])
        for p, s in slots:
            rows.append({'example': r, 'position': p, 'original': name(rtd.original[r, p]),
                         'generator input': name(rtd.masked[r, p]), 'sample': name(rtd.sampled[r, s]),
                         'discriminator input': name(rtd.corrupted[r, p]), 'replaced': bool(rtd.is_replaced[r, p])})
    return pd.DataFrame(rows)


def detection_view(rtd: ReplacedTokenDetection, tokenizer, example: int = 0, threshold: float = 0.5) -> TokenView:
    """Every real token of one example as the discriminator saw it, with the original where the generator's sample
    replaced it and the discriminator's probability that it was replaced (flagged: above `threshold`): a `TokenView`,
    shown as coloured tokens in a notebook and as plain marks in a terminal."""
    r, n = example, int(rtd.real[example].sum())
    tokens = tokenizer.convert_ids_to_tokens(rtd.corrupted[r, :n].tolist())
    originals = [o if bool(rtd.is_replaced[r, p]) else None
                 for p, o in enumerate(tokenizer.convert_ids_to_tokens(rtd.original[r, :n].tolist()))]
    return TokenView(tokens, rtd.p_replaced[r, :n].float().numpy(), originals, threshold=threshold)


# -- training curves

def _read_csv(path: Path) -> pd.DataFrame:
    with open(path, newline='') as f: rows = list(csv.DictReader(f))
    return pd.DataFrame(rows).apply(pd.to_numeric, errors='coerce')


def _run_objective(metrics_csv: Path) -> Objective:
    "The objective of the run whose `metrics_csv` this is, as its config.yaml records it; the config's default without."
    saved = metrics_csv.parent / 'config.yaml'
    values = load_yaml(saved.read_text(encoding='utf-8'), str(saved), {}) if saved.is_file() else {}
    default = next(f.default for f in dataclasses.fields(PretrainConfig) if f.name == 'objective')
    return OBJECTIVES[(values or {}).get('objective', default)]


def plot_losses(metrics_csv: str | Path, path: str | Path | None = None, objective: Objective | None = None):
    """The pretraining curves of a run's `metrics.csv` against the step, in the panels its `objective`'s row names
    (`reported.curves`; when not given, the objective its config.yaml beside it records): generator and discriminator loss, and the accuracies with the
    discriminator's precision and recall on replaced tokens; BERT's MLM loss and accuracy. The held-out metrics of an
    `eval_metrics.csv` beside it, when there is one, are drawn dashed. Saved to `path` when given."""
    from matplotlib.figure import Figure
    metrics_csv = Path(metrics_csv)
    curves = [('training', _read_csv(metrics_csv), '-')]
    if (metrics_csv.parent / 'eval_metrics.csv').is_file():
        curves.append(('held-out', _read_csv(metrics_csv.parent / 'eval_metrics.csv'), '--'))
    panels = (objective or _run_objective(metrics_csv)).reported.curves
    fig = Figure(figsize=(14 * len(panels) / 3, 3.6))
    for ax, (title, cols) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        for i, c in enumerate(cols):
            for name, df, style in curves:
                if c not in df: continue
                ax.plot(df['step'], df[c], style, color=f'C{i}', marker='.' if len(df) < 30 else None,
                        label=c if name == 'training' else f'{c} ({name})')
        ax.set_xlabel('step'), ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3), ax.legend(fontsize=7)
    fig.tight_layout()
    if path is not None: atomic_write_figure(fig, path, 100)
    return fig


# -- fine-tuning

def runs_table(job, results) -> pd.DataFrame:
    "One row per finished run of this job (`FinetuneConfig`): task, run, seed, dev score and metrics, train loss, time."
    df = results.df
    df = df[df['task'].isin(job.task_names) & (df['run'] < job.runs)]
    cols = ['task', 'run', 'seed', 'score', *[c for c in METRIC_COLUMNS if df[c].notna().any()], 'train_loss', 'seconds']
    out = df[cols].copy()
    # Python's round, the rounding of `metric_text` (the log lines, summary.md): numpy's (pandas' `round`) rounds
    # x * 100 half to even, so a score held as 1.6650 would show 1.66 here and 1.67 there
    for c in cols[3:]: out[c] = [round(v, 4 if c == 'train_loss' else 2) for v in out[c].astype(float)]
    return out.reset_index(drop=True)
