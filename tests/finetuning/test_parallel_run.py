"""One fine-tuning run over the processes of a torchrun job (electra/finetuning/step.py averaging the gradients, the
sharded loaders and ClassifierLoss), on the CPU with gloo: the same parameters, train loss and dev metrics as one
process, down to a last batch smaller than the job."""
from pathlib import Path

import numpy as np
import pytest
import torch

from electra.finetuning.classifier import ClassifierLoss
from electra.finetuning.tasks.encoding import LengthBatchSampler, ShardedBatchSampler
from tests.support.distributed import as_if_in_a_job, max_diff, run, torchrun

WORKER = Path(__file__).with_name('ddp_finetune_worker.py')


KINDS = ['MNLI', 'STS-B', 'tagging', 'qa']  # classes (two dev sets), regression, tags, QA


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """The run of each kind trained by one process (this one, on one thread as the job's processes are: a process to
    start costs more than the runs) and by a torchrun job of two: one launch each, as a sweep trains."""
    from tests.finetuning.ddp_finetune_worker import main, qa_files, tagging_files
    root = tmp_path_factory.mktemp('ddp_finetune')
    # tagging: windows of 16, seqeval on gathered tags; QA: QALoss with weights, the beam's rows gathered, decoded
    tasks = ['MNLI', 'STS-B', str(tagging_files(root / 'tagging')), str(qa_files(root / 'qa'))]
    for name in ('one', 'two'): (root / name).mkdir()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        main(str(root / 'one'), *tasks)
    finally:
        torch.set_num_threads(threads)
    run([*torchrun(WORKER), str(root / 'two'), *tasks], root)
    return root


@pytest.mark.parametrize('task', KINDS)
def test_two_processes_train_the_run_of_one(runs, task):
    one, two = (torch.load(runs / n / f'{KINDS.index(task)}.pt', weights_only=False) for n in ('one', 'two'))
    # the QA start/end biases shift every position's logit alike, so a softmax over positions gives them no gradient:
    # what they get is float noise, which Adam scales up to steps of the learning rate's size
    zero_grad = {'classifier.start.bias', 'classifier.end.bias'} if task == 'qa' else set()
    # the answerability head's gradients are tiny here too: Adam scales their float noise (summation order differs by
    # CPU) to ~1e-5 on some machines, still far below one step of the learning rate (1e-3)
    small_grad = {'classifier.answerable_hidden.weight', 'classifier.answerable_hidden.bias'}
    assert max_diff(*({k: v for k, v in m['model'].items() if k not in zero_grad | small_grad} for m in (one, two))) < 2e-6
    if task == 'qa': assert max_diff(*({k: m['model'][k] for k in small_grad} for m in (one, two))) < 1e-4
    assert len(one['history']) == len(two['history']) == 2
    for a, b in zip(one['history'], two['history']):
        assert a.keys() == b.keys() and abs(a['train_loss'] - b['train_loss']) < 1e-6
        for k in a.keys() - {'train_loss', 'epoch'}: assert a[k] == pytest.approx(b[k], abs=1e-3), k  # in %: one
        # example in 13 moves accuracy by 7.7; outputs that differ by float noise move pearson by ~3e-4
    assert one['history'][0]['train_loss'] != one['history'][1]['train_loss']  # it trained


def test_sharded_batches_split_training_rows_and_deal_out_evaluation_batches():
    lengths = np.arange(10) + 5
    train = LengthBatchSampler(lengths, 4, True, seed=3, bucketing=False)
    whole = list(LengthBatchSampler(lengths, 4, True, seed=3, bucketing=False))  # sizes 4, 4, 2
    parts = [list(ShardedBatchSampler(LengthBatchSampler(lengths, 4, True, seed=3, bucketing=False), r, 3))
             for r in range(3)]
    assert [len(p) for p in parts] == [3, 3, 3] and len(ShardedBatchSampler(train, 0, 3)) == 3
    for k, batch in enumerate(whole):  # rows in contiguous blocks 2+1+1, then 1+1+stand-in
        assert np.concatenate([p[k] for p in parts if p[k][0] >= 0]).tolist() == list(batch)
    assert parts[2][2].tolist() == [-whole[2][0] - 1]  # the stand-in: the batch's first example, weight 0
    ev = [[b.tolist() for b in ShardedBatchSampler(LengthBatchSampler(lengths, 3, False), r, 2)] for r in range(2)]
    order = [b.tolist() for b in LengthBatchSampler(lengths, 3, False)]  # 4 batches, longest first
    assert ev == [order[0::2], order[1::2]] and [len(ShardedBatchSampler(LengthBatchSampler(lengths, 3, False), r, 2))
                                                 for r in range(2)] == [2, 2]


def test_classifier_loss_global_mean_against_hand_computed_values(monkeypatch):
    out, y = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), torch.tensor([0, 1, 0])
    ce = [np.log1p(np.exp(-2.0)), np.log1p(np.exp(-1.0)), np.log(2.0)]
    assert ClassifierLoss(False)(out, y).item() == pytest.approx(np.sum(ce), abs=1e-6)  # official: the batch's sum
    loss = ClassifierLoss(False, reduction='mean')
    assert loss(out, y).item() == pytest.approx(np.mean(ce), abs=1e-6)  # one process: the batch mean
    w = torch.tensor([1.0, 1.0, 0.0])  # the third row a stand-in
    with monkeypatch.context() as m:
        as_if_in_a_job(m, 2, others=5)  # 3 rows here and 5 elsewhere, over 2 processes
        assert loss(out, y, w).item() == pytest.approx((ce[0] + ce[1]) / ((2 + 5) / 2), abs=1e-6)
    assert (loss.local_sum.item(), loss.local_count.item()) == (pytest.approx(ce[0] + ce[1], abs=1e-6), 2.0)
    mse = ClassifierLoss(True, scale=5.0, reduction='mean')
    assert mse(torch.tensor([0.2, 0.9]), torch.tensor([1.0, 5.0])).item() == pytest.approx((0.0 + 0.01) / 2, abs=1e-7)
