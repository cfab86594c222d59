"""electra/finetuning/loss.py: the batch reduction every fine-tuning loss shares (sum as the official
`FinetuningModel`, mean, tagging's per-word mean), under one process and under torchrun, down to the gradient the
optimizer steps on after clipping."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.finetuning import learner
from electra.finetuning.classifier import ClassifierLoss, ElectraClassifier
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.glue.tasks import TASKS
from electra.finetuning.tasks.qa.heads import QALoss
from electra.finetuning.tasks.tagging.model import TaggingLoss
from tests.support.distributed import as_if_in_a_job


def _cases():
    "(loss, args, the per-example losses [4] by an independent formula) for each task kind."
    torch.manual_seed(0)
    logits, y = torch.randn(4, 3), torch.tensor([0, 2, 1, 1])
    ce = -logits.log_softmax(-1)[torch.arange(4), y]
    out, target = torch.randn(4), torch.tensor([4.0, 0.5, 2.5, 5.0])
    sq = (out - target / 5) ** 2
    qa = {'start_logits': torch.randn(4, 6), 'end_logits': torch.randn(4, 6), 'answerable_logit': torch.randn(4)}
    s, e, imp = torch.tensor([0, 2, 5, 1]), torch.tensor([0, 3, 5, 4]), torch.tensor([1.0, 0.0, 0.0, 0.0])
    z = qa['answerable_logit']
    span = -(qa['start_logits'].log_softmax(-1)[torch.arange(4), s] + qa['end_logits'].log_softmax(-1)[torch.arange(4), e])
    qa_per = span / 2 - 0.5 * (imp * F.logsigmoid(z) + (1 - imp) * F.logsigmoid(-z))
    tags, labels = torch.randn(4, 5, 3), torch.tensor([[0, 1, -100, 2, -100]] * 2 + [[2, -100, -100, -100, -100]] * 2)
    lp = tags.log_softmax(-1)
    tag_per = torch.stack([-sum(lp[b, t, labels[b, t]] for t in range(5) if labels[b, t] >= 0) for b in range(4)])
    return {'classification': (lambda r: ClassifierLoss(False, reduction=r), (logits, y), ce),
            'regression': (lambda r: ClassifierLoss(True, 5.0, reduction=r), (out, target), sq),
            'qa': (lambda r: QALoss(True, 0.5, r), (qa, s, e, imp), qa_per),
            'tagging': (lambda r: TaggingLoss(r), (tags, labels), tag_per)}


@pytest.mark.parametrize('kind', ['classification', 'regression', 'qa', 'tagging'])
def test_sum_and_mean_against_the_per_example_losses(kind):
    make, args, per = _cases()[kind]
    w = torch.tensor([1.0, 0.0, 1.0, 1.0])  # the second row a stand-in of `ShardedBatchSampler`
    assert float(make('sum')(*args)) == pytest.approx(float(per.sum()), rel=1e-5)
    assert float(make('mean')(*args)) == pytest.approx(float(per.mean()), rel=1e-5)
    loss = make('sum')
    assert float(loss(*args, w)) == pytest.approx(float((per * w).sum()), rel=1e-5)
    # what the epoch's train loss adds up: this batch's sum and its count of examples, whatever the reduction
    assert (float(loss.local_sum), float(loss.local_count)) == (pytest.approx(float((per * w).sum()), rel=1e-5), 3.0)


def test_sum_under_torchrun_is_the_global_sum_for_the_step_to_average(monkeypatch):
    "W processes: the step averages the gradients, so each returns W times its own sum; 'mean' divides by the global count."
    make, args, per = _cases()['classification']
    as_if_in_a_job(monkeypatch, 3, others=5)  # 4 rows here, 5 on the other two processes together
    loss = make('sum')
    assert float(loss(*args)) == pytest.approx(3 * float(per.sum()), rel=1e-5)
    loss = make('mean')
    assert float(loss(*args)) == pytest.approx(float(per.sum()) / 3, rel=1e-5)  # sum / ((4 + 5) / 3)


def _grads(model, xb, y, reduction: str) -> list[torch.Tensor]:
    "Each parameter's gradient of the batch's summed or mean cross-entropy, by plain autograd on a copy of `model`."
    ref = copy.deepcopy(model)
    per = F.cross_entropy(ref(*xb), y, reduction='none')
    (per.sum() if reduction == 'sum' else per.mean()).backward()
    return [p.grad.clone() for p in ref.parameters()]


def _norm(grads) -> float: return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))


@pytest.mark.parametrize('reduction', ['sum', 'mean'])
def test_the_optimizer_steps_on_the_clipped_gradient_of_the_configured_reduction(tiny, reduction, monkeypatch):
    """One step of the fine-tuning Learner with clip_grad between the mean's gradient norm and the sum's (8 times
    it): the optimizer sees the sum's gradient scaled down to clip_grad, or the mean's gradient as it is."""
    import transformers
    from electra.training.optim import ElectraAdam
    model, _ = tiny
    config = copy.deepcopy(model.config)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0  # the same forward pass in both
    body = transformers.ElectraModel(config)
    body.load_state_dict(model.electra.state_dict())
    torch.manual_seed(0)
    clf = ElectraClassifier(body, 3, dropout=0.0)
    ids = torch.randint(5, 40, (8, 6)); mask = torch.ones_like(ids); types = torch.zeros_like(ids)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    mean, total = _grads(clf, (ids, mask, types), y, 'mean'), _grads(clf, (ids, mask, types), y, 'sum')
    clip = 3 * _norm(mean)  # the mean's gradient passes unclipped, the sum's (norm 8x) is clipped
    want = mean if reduction == 'mean' else [g * clip / _norm(total) for g in total]

    seen, update = {}, ElectraAdam.update  # the gradients the optimizer steps on, by parameter

    def spy(self, group, params, grads, *a):
        seen.update({id(p): g.clone() for p, g in zip(params, grads)})
        return update(self, group, params, grads, *a)
    monkeypatch.setattr(ElectraAdam, 'update', spy)
    cfg = config_from_dict(FinetuneConfig, {'loss_reduction': reduction, 'clip_grad': clip, 'epochs': 1})
    loss = ClassificationTask(TASKS['MNLI'], None).loss_func(clf, cfg)  # the task kind's loss, with the config's reduction
    loader = torch.utils.data.DataLoader(list(zip(ids, mask, types, y)), batch_size=8)
    learn = learner.finetuning_learner(clf, loader, [], cfg, loss, torch.device('cpu'), None)
    learn.fit(1, lr=learn.layer_lrs)
    grads = [seen[id(p)] for p in clf.parameters()]
    assert len(grads) == len(want)
    for got, exp in zip(grads, want): assert torch.allclose(got, exp, rtol=1e-4, atol=1e-8)


def test_token_reduction_is_for_tagging_tasks_only(tmp_path):
    with pytest.raises(ConfigError, match=r"^config: key 'loss_reduction': 'avg' is not one of sum, mean, token$"):
        config_from_dict(FinetuneConfig, {'loss_reduction': 'avg'})
    cfg = config_from_dict(FinetuneConfig, {'tasks': ['STS-B', 'RTE'], 'task_overrides': {'RTE': {'loss_reduction': 'token'}}})
    with pytest.raises(ConfigError, match=r"task_overrides\.RTE\.loss_reduction: 'token' .* RTE is a GLUE task"):
        cfg.check_task_kinds()
    cfg = config_from_dict(FinetuneConfig, {'tasks': ['STS-B'], 'loss_reduction': 'token'})
    with pytest.raises(ConfigError, match=r"^loss_reduction: 'token' .* STS-B is a GLUE task"):
        cfg.check_task_kinds()
    config_from_dict(FinetuneConfig, {'tasks': ['STS-B'], 'loss_reduction': 'mean'}).check_task_kinds()
    with pytest.raises(ValueError, match=r"loss_reduction: 'token' is not one of sum, mean for QALoss"):
        QALoss(reduction='token')
