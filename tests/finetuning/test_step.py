"""electra/finetuning/step.py: a fine-tuning run alone and a stack of runs train through `finetuning_step`, and one
step of the real Learner equals the plain step on the same batch: the model's forward, the loss's `.backward()`,
torch's `clip_grad_norm_` (each run's own for a stack) and a Python loop of the official Adam."""
import copy

import pytest
import torch

import electra.finetuning.step as step_module
from tests.support.baseline import LoopAdam
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.finetuning import learner, stack
from electra.finetuning.classifier import ElectraClassifier
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.glue.tasks import TASKS
from tests.finetuning.test_stack import no_dropout

pytestmark = pytest.mark.usefixtures('one_thread')
CPU = torch.device('cpu')


def setting(**kw) -> FinetuneConfig:
    "One epoch, the first step at the peak rate (no warm-up), weight decay and clipping that bites."
    return config_from_dict(FinetuneConfig, {'epochs': 1, 'warmup_fraction': 0.0, 'weight_decay': 0.01,
                                             'clip_grad': 0.05, 'lr': 1e-3, 'layer_lr_decay': 0.8, **kw})


def batch(seed: int, rows: int = 6):
    "(input_ids, attention_mask, token_type_ids [rows, 7], labels [rows]) of the MNLI task's three classes."
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (rows, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0  # a padded row
    return ids, mask, torch.zeros_like(ids), torch.randint(0, 3, (rows,), generator=g)


def plain_step(model, xb, y, cfg, rates: dict[str, float]):
    "The plain step on `model` (in place): forward, the task's loss, `.backward()`, `clip_grad_norm_`, LoopAdam."
    task = ClassificationTask(TASKS['MNLI'], None)
    task.loss_func(model, cfg)(model(*xb), y).backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), cfg.clip_grad)
    named = list(model.named_parameters())
    LoopAdam(named, 0.0, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps, rates).step()


def spied(monkeypatch) -> list:
    "Counts the calls of `finetuning_step` (the Learner's callback takes the function when it is made)."
    calls, real = [], step_module.finetuning_step

    def spy(*args):
        calls.append(1)
        return real(*args)
    monkeypatch.setattr(step_module, 'finetuning_step', spy)
    return calls


def rates_by_name(learn) -> dict[str, float]:
    "Each parameter's rate at the step just taken, by name (the layer-wise groups)."
    return {n: g['lr'] for g in learn.opt.opt.param_groups for n in g['names']}


def test_a_run_alone_trains_through_the_step_and_its_step_is_the_plain_step(tiny, monkeypatch):
    torch.manual_seed(0)
    model = ElectraClassifier(no_dropout(tiny[0].electra), 3, dropout=0.0)
    ref, start = copy.deepcopy(model), model.classifier.weight.detach().clone()
    cfg, (*xb, y) = setting(), batch(1)
    calls = spied(monkeypatch)
    loss = ClassificationTask(TASKS['MNLI'], None).loss_func(model, cfg)
    learn = learner.finetuning_learner(model, [(*xb, y)], [], cfg, loss, CPU, None)
    learn.fit(1, lr=learn.layer_lrs)
    assert calls == [1]  # the one step ran through `finetuning_step`
    plain_step(ref, xb, y, cfg, rates_by_name(learn))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=2e-6, msg=name)
    assert not torch.equal(model.classifier.weight, start)


def test_a_stack_trains_through_the_step_and_each_run_takes_its_plain_step(tiny, monkeypatch):
    "Two stacked runs, each batch its own: each run's weights are its plain step's, clipped by its own norm."
    models = []
    for seed in (3, 11):
        torch.manual_seed(seed)
        models.append(ElectraClassifier(no_dropout(tiny[0].electra), 3, dropout=0.0))
    refs = copy.deepcopy(models)
    stacked, cfg, batches = stack.StackedRuns(models), setting(), [batch(1), batch(2, rows=4)]
    calls = spied(monkeypatch)
    loss = stack.StackedLoss(ClassificationTask(TASKS['MNLI'], None).loss_func(models[0], cfg), 2)
    learn = learner.finetuning_learner(stacked, [stack.stack_batches(batches, 0)], [], cfg, loss, CPU, None,
                                       clip_fn=stack.clip_runs_by_norm_)
    learn.fit(1, lr=learn.layer_lrs)
    assert calls == [1]
    for r, (ref, (*xb, y)) in enumerate(zip(refs, batches)):
        plain_step(ref, xb, y, cfg, rates_by_name(learn))
        for (name, p), q in zip(stacked.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p[r], q, rtol=0, atol=1e-5, msg=f'run {r} {name}')
