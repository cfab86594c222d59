"""electra/finetuning/tasks/glue/tasks.py: the task table's labels."""
from __future__ import annotations

from electra.finetuning.tasks.glue.tasks import TASKS


def test_label_ids_match_hf_datasets():
    assert TASKS['MNLI'].labels == ('entailment', 'neutral', 'contradiction')
    assert TASKS['AX'].labels == TASKS['MNLI'].labels
    assert TASKS['QNLI'].labels == TASKS['RTE'].labels == ('entailment', 'not_entailment')
    assert TASKS['STS-B'].is_regression and TASKS['STS-B'].n_outputs == 1
