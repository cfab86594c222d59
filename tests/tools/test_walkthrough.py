"""electra/tools/walkthrough.py `plot_losses`: the panels of a run's curves named as its objective's row says."""
import csv

import pytest

from electra.config.objectives import OBJECTIVES
from electra.pretraining.callbacks import METRIC_NAMES


def _metrics(path, **values):
    with path.open('w', newline='') as f:
        w = csv.DictWriter(f, METRIC_NAMES)
        w.writeheader()
        for step in (1, 2):
            w.writerow({k: values.get(k, 0.5) for k in METRIC_NAMES} | {'step': step})
    return path


def _panels(fig):
    return [(ax.get_title(), [line.get_label() for line in ax.get_lines()]) for ax in fig.axes]


@pytest.mark.parametrize('name', [n for n, row in OBJECTIVES.items() if row.samples and row.head == 'rtd'])
def test_a_run_with_a_generator_draws_the_three_panels_as_before(tmp_path, name):
    from electra.tools.walkthrough import plot_losses
    fig = plot_losses(_metrics(tmp_path / 'metrics.csv'), objective=OBJECTIVES[name])
    assert _panels(fig) == [('generator MLM loss', ['gen_loss']), ('discriminator BCE loss', ['disc_loss']),
                            ('accuracies; precision / recall of "replaced"',
                             ['gen_accuracy', 'disc_accuracy', 'replaced_precision', 'replaced_recall'])]
    assert _panels(plot_losses(tmp_path / 'metrics.csv')) == _panels(fig)      # a metrics.csv alone: as before


@pytest.mark.parametrize('name, head', [('replace_mlm', 'MLM'), ('all_tokens_mlm', 'COPY')])
def test_a_run_whose_discriminator_predicts_tokens_draws_its_head_s_loss_and_no_precision_or_recall(tmp_path, name,
                                                                                                     head):
    "Replace MLM, All-Tokens MLM: their discriminator's loss titled by its head, not BCE, and no P/R (0, never measured)."
    from electra.tools.walkthrough import plot_losses
    fig = plot_losses(_metrics(tmp_path / 'metrics.csv', replaced_precision=0, replaced_recall=0),
                      objective=OBJECTIVES[name])
    assert _panels(fig) == [('generator MLM loss', ['gen_loss']), (f'discriminator {head} loss', ['disc_loss']),
                            (f'accuracies: the generator\'s, the discriminator {head} head\'s',
                             ['gen_accuracy', 'disc_accuracy'])]


def test_a_bert_run_draws_its_mlm_loss_and_accuracy_and_no_generator_or_replacements(tmp_path):
    "BERT (`mlm`): metrics.csv's gen columns NaN and P/R 0, as its run writes them; neither drawn nor titled."
    from electra.tools.walkthrough import plot_losses
    path = _metrics(tmp_path / 'metrics.csv', gen_loss='nan', gen_accuracy='nan', replaced_precision=0,
                    replaced_recall=0)
    fig = plot_losses(path, objective=OBJECTIVES['mlm'])
    assert _panels(fig) == [('MLM loss', ['disc_loss']), ('MLM accuracy at the masked positions', ['disc_accuracy'])]
    (tmp_path / 'config.yaml').write_text('objective: mlm\nsteps: 2\n', encoding='utf-8')  # as the run saved it
    assert _panels(plot_losses(path)) == _panels(fig)


def test_the_runs_table_shows_each_score_as_the_summary_and_the_log_lines_do():
    """A score results.csv holds as 1.6650 is 1.67 in summary.md and the epoch line (`metric_text`, Python's rounding of
    the value); pandas' `round(2)` (numpy's: x * 100 rounded half to even, 166.49999...) showed it as 1.66."""
    import types

    import numpy as np
    import pandas as pd

    from electra.finetuning.results import METRIC_COLUMNS
    from electra.finetuning.tasks.metrics import metric_text
    from electra.tools.walkthrough import runs_table
    scores = [1.665, 2.3308, 0.125, 97.115]
    df = pd.DataFrame({'task': 'STS-B', 'run': range(4), 'seed': range(4), 'score': scores,
                       **{c: np.nan for c in METRIC_COLUMNS}, 'train_loss': [0.123456] * 4, 'seconds': 1.0})
    df['spearman'] = scores
    table = runs_table(types.SimpleNamespace(task_names=['STS-B'], runs=4), types.SimpleNamespace(df=df))
    assert [f'{v:.2f}' for v in table['score']] == [metric_text(s) for s in scores]
    assert table['score'][0] == 1.67  # the finding's: 1.66 shown beside 1.67
    assert table['spearman'].tolist() == table['score'].tolist() and table['train_loss'].tolist() == [0.1235] * 4
    assert list(table.columns) == ['task', 'run', 'seed', 'score', 'spearman', 'train_loss', 'seconds']
