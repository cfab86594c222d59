"""The paper's GLUE score, from each GLUE task's score (the metrics themselves: `electra.finetuning.tasks.metrics`)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

__all__ = ['glue_score', 'GLUE_SCORE_TASKS']

# The paper's GLUE score: the mean over the eight tasks other than WNLI of Spearman for STS-B, MCC for CoLA and
# accuracy for the rest (MNLI: matched), each task's `score_metric`.
GLUE_SCORE_TASKS = ('CoLA', 'SST-2', 'MRPC', 'STS-B', 'QQP', 'MNLI', 'QNLI', 'RTE')


def glue_score(scores: Mapping[str, float]) -> float:
    "The paper's GLUE score from each task's `score_metric`: the mean over the tasks of `GLUE_SCORE_TASKS` present."
    vals = [scores[t] for t in GLUE_SCORE_TASKS if t in scores]
    return float(np.mean(vals)) if vals else float('nan')
