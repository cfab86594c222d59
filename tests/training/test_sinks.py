"""electra/training/sinks.py: a pretraining run's one-line reports, named as its objective's row says
(config/objectives.py `Objective.reported`): every objective with a generator as before, BERT's MLM by what it has."""
import math
import re

import pytest

from electra.config.objectives import OBJECTIVES
from electra.training.sinks import CsvLog, eval_line, metrics_line

ROW = {'step': 6, 'loss': 7.2906, 'gen_loss': 1.25, 'disc_loss': 0.1212, 'lr': 0.001, 'gen_accuracy': 0.0833,
       'disc_accuracy': 0.9125, 'replaced_precision': 0.5, 'replaced_recall': 0.25, 'replaced_fraction': 0.1,
       'steps_per_s': 3.04, 'skipped_steps': 0}
EVAL = {'step': 6, 'gen_loss': 5.0, 'disc_loss': 0.4, 'gen_accuracy': 0.1, 'disc_accuracy': 0.85, 'disc_auc': 0.6,
        'replaced_fraction': 0.13, 'gen_accuracy_baseline': 0.05, 'disc_accuracy_baseline': 0.87, 'uniform_auc': 0.9,
        'examples': 8}
NUMBER = r'(-?[\d.]+(?:e-?\d+)?|nan)'
WITH_GENERATOR = [name for name, row in OBJECTIVES.items() if row.samples]
DETECTING = [name for name in WITH_GENERATOR if OBJECTIVES[name].head == 'rtd']  # replaced-token detection's head
PREDICTING = [name for name in WITH_GENERATOR if OBJECTIVES[name].head != 'rtd']  # Replace MLM, All-Tokens MLM


def test_the_objectives_are_split_as_their_heads_say():
    assert (DETECTING, PREDICTING) == (['electra', 'electra_15', 'electric', 'fast_electra'],
                                       ['replace_mlm', 'all_tokens_mlm'])


@pytest.mark.parametrize('name', DETECTING)
def test_an_objective_with_a_generator_prints_its_lines_as_before(name):
    "The lines these objectives printed before the row named them (the format written out here), parsed back."
    line = metrics_line(ROW, OBJECTIVES[name])
    assert line == ('step 6: loss 7.2906 (gen 1.2500, disc 0.1212) gen_acc 0.0833 disc_acc 0.9125 replaced P/R '
                    '0.500/0.250 lr 0.001 3.0 steps/s')
    m = re.fullmatch(rf'step (\d+): loss {NUMBER} \(gen {NUMBER}, disc {NUMBER}\) gen_acc {NUMBER} disc_acc {NUMBER} '
                     rf'replaced P/R {NUMBER}/{NUMBER} lr {NUMBER} {NUMBER} steps/s', line)
    keys = ['step', 'loss', 'gen_loss', 'disc_loss', 'gen_accuracy', 'disc_accuracy', 'replaced_precision',
            'replaced_recall', 'lr', 'steps_per_s']
    assert [round(float(v), 1) for v in m.groups()] == [round(ROW[k], 1) for k in keys]
    # the held-out line says where each number is taken: the discriminator's over the positions of its loss
    at = 'at the masked positions' if OBJECTIVES[name].positions == 'chosen' else 'over every token'
    assert eval_line(EVAL, OBJECTIVES[name]) == (
        f'step 6 held-out: AUC 0.600 {at} (chance 0.5), 0.900 on random replacements over every token; gen acc 0.100 '
        f'at the masked positions (most frequent token 0.050); disc acc 0.850 {at} (always "original" 0.870); 13.0% '
        'of the tokens replaced; loss gen 5.000 disc 0.400')


@pytest.mark.parametrize('name, head', [('replace_mlm', 'mlm'), ('all_tokens_mlm', 'copy')])
def test_an_objective_whose_discriminator_predicts_tokens_names_its_head_and_no_replaced_p_r(name, head):
    """Replace MLM and All-Tokens MLM: a generator replaces, the discriminator predicts the original tokens (its MLM
    or copy head) and detects nothing: its loss and accuracy are named by its head, and no `replaced P/R` (their run
    printed `replaced P/R 0.000/0.000`, a detection it never does, and the held-out `main acc`)."""
    row = {**ROW, 'replaced_precision': 0.0, 'replaced_recall': 0.0}
    assert metrics_line(row, OBJECTIVES[name]) == (f'step 6: loss 7.2906 (gen 1.2500, disc {head} 0.1212) gen_acc '
                                                   f'0.0833 disc_{head}_acc 0.9125 lr 0.001 3.0 steps/s')
    # R25a-3: its accuracy beside what a network that learnt nothing scores over the same positions: the most frequent
    # token at the masked positions (the MLM head), the input token itself over every token (the copy head)
    held_out = {**EVAL, 'disc_auc': math.nan, 'uniform_auc': math.nan, 'disc_accuracy_baseline': 0.87}
    at, baseline = (('at the masked positions', 'always the most frequent token') if head == 'mlm' else
                    ('over every token', 'always the input token'))
    assert eval_line(held_out, OBJECTIVES[name]) == (
        f'step 6 held-out: gen acc 0.100 at the masked positions (most frequent token 0.050); disc {head} acc 0.850 '
        f'{at} ({baseline} 0.870); loss gen 5.000 disc {head} 0.400')
    assert OBJECTIVES[name].reported.replacements and not OBJECTIVES[name].reported.detection


def test_bert_s_lines_name_its_mlm_loss_and_masked_token_accuracy_and_no_generator_or_replacements():
    """BERT (`mlm`, no generator): the row of the finding's run (gen nan, P/R 0) printed as the MLM's loss and
    accuracy at the masked positions, without a generator's numbers, nan, or replaced P/R."""
    bert = OBJECTIVES['mlm']
    row = {**ROW, 'gen_loss': math.nan, 'disc_loss': 7.2906, 'gen_accuracy': math.nan, 'disc_accuracy': 0.0022,
           'replaced_precision': 0.0, 'replaced_recall': 0.0}
    line = metrics_line(row, bert)
    assert line == 'step 6: loss 7.2906 (mlm 7.2906) mlm_acc 0.0022 lr 0.001 3.0 steps/s'
    held_out = {**EVAL, 'gen_loss': math.nan, 'gen_accuracy': math.nan, 'disc_auc': math.nan, 'uniform_auc': math.nan,
                'gen_accuracy_baseline': math.nan, 'disc_accuracy_baseline': 0.136, 'disc_loss': 7.29,
                'disc_accuracy': 0.0022}
    assert eval_line(held_out, bert) == ('step 6 held-out: mlm acc 0.002 at the masked positions (always the most '
                                         'frequent token 0.136); loss mlm 7.290')
    for text in (line, eval_line(held_out, bert)):
        assert 'gen' not in text and 'nan' not in text and 'P/R' not in text and 'disc' not in text
    assert not bert.reported.replacements and all(OBJECTIVES[n].reported.replacements for n in WITH_GENERATOR)
    assert not bert.reported.detection and all(OBJECTIVES[n].reported.detection for n in DETECTING)


def test_the_fp16_skips_are_said_after_the_line():
    line = metrics_line({**ROW, 'skipped_steps': 2}, OBJECTIVES['electra'])
    assert line.endswith('3.0 steps/s (2 fp16 overflow steps skipped)')


def test_electra_15_s_held_out_line_says_its_positions_and_an_auc_over_too_few_originals_is_undefined():
    """ELECTRA 15%'s row of the finding (its AUC at the masked positions over 4 "original" of 442, now undefined):
    each number says where it is taken, its baseline beside it over the same positions, and the share replaced is
    of the tokens (the line read "disc acc 0.991 (always "original" 0.009; 14.4% replaced)", two denominators)."""
    row = {**EVAL, 'disc_auc': math.nan, 'uniform_auc': 0.392, 'disc_accuracy': 0.991,
           'disc_accuracy_baseline': 0.009, 'replaced_fraction': 0.144}
    assert eval_line(row, OBJECTIVES['electra_15']) == (
        'step 6 held-out: AUC undefined at the masked positions (fewer than 30 "original" or replaced), 0.392 on '
        'random replacements over every token; gen acc 0.100 at the masked positions (most frequent token 0.050); '
        'disc acc 0.991 at the masked positions (always "original" 0.009); 14.4% of the tokens replaced; loss gen '
        '5.000 disc 0.400')
    first_stage = {**EVAL, **dict.fromkeys(('disc_loss', 'disc_accuracy', 'disc_auc', 'uniform_auc',
                                            'disc_accuracy_baseline', 'replaced_fraction'), math.nan)}
    assert eval_line(first_stage, OBJECTIVES['electra']) == (  # two-stage training's first stage: no discriminator yet
        'step 6 held-out: gen acc 0.100 at the masked positions (most frequent token 0.050); loss gen 5.000 disc nan')


def test_an_undefined_value_is_written_empty(tmp_path):
    "A metrics file writes NaN (undefined, or not measured) as an empty cell, as results.csv does; pandas reads NaN."
    import pandas as pd
    log = CsvLog(tmp_path / 'eval_metrics.csv', ['step', 'disc_auc', 'uniform_auc'])
    log.append({'step': 5, 'disc_auc': math.nan, 'uniform_auc': 0.3921234567})
    assert (tmp_path / 'eval_metrics.csv').read_text().splitlines() == ['step,disc_auc,uniform_auc', '5,,0.392123']
    assert math.isnan(pd.read_csv(tmp_path / 'eval_metrics.csv')['disc_auc'][0])
