"""electra/finetuning/stack.py for extractive QA: stacked runs (the joint head given each run's gold starts, dict
outputs) are the runs alone with dropout 0, as `tests/finetuning/test_stack.py` holds for the other kinds."""
from __future__ import annotations

import pytest

from electra.finetuning.tasks.files import read_task_file
from electra.finetuning.tasks.qa.task import QATask
from tests.finetuning.tasks.qa.test_task import demo_task, qa_model  # noqa: F401 (a fixture)
from tests.finetuning.test_stack import alone_and_stacked, assert_runs_equal, no_dropout
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')


def test_stacked_qa_runs_are_the_runs_alone(tmp_path, qa_model):  # noqa: F811
    """SQuAD 2.0 windows of 64 tokens, 2 epochs, length bucketing: each stacked run equals its run alone. The start and
    end biases shift every position's logit alike, which a softmax over positions ignores: their gradient is 0 but for
    rounding, which Adam's normalisation blows up to steps of the learning rate, so only their outputs are compared."""
    model, tok = qa_model
    spec = demo_task(tmp_path, 'max_length: 64\ndoc_stride: 24\nbeam_size: 5\n', sizes={'train': 24, 'dev': 8}, test=False)
    cfg = job(tmp_path, 'demo', tasks=[str(spec)], epochs=2, batch_size=12, lr=3e-3, length_bucketing=True)
    cfg = cfg.for_task('demo_squad')
    task = QATask(read_task_file(spec))
    data = task.prepare(cfg, tok, cfg.cache_dir, False)
    alone, stacked = alone_and_stacked(cfg, data, no_dropout(model.electra))
    assert_runs_equal(alone, stacked, cfg, data, noise=('classifier.start.bias', 'classifier.end.bias'))
