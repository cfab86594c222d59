"""electra/finetuning/learner.py: one fine-tuning run: schedule, seed, precision, STS-B scale."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from electra.config.errors import ConfigError
from electra.config.finetune import FinetuneConfig
from electra.config.values import config_from_dict
from electra.finetuning import classifier, layerwise, learner, loading
from electra.finetuning.tasks.classification import ClassificationTask
from electra.finetuning.tasks.glue.sources import open_source
from electra.finetuning.tasks.glue.tasks import TASKS
from tests.support.finetune import job

pytestmark = pytest.mark.usefixtures('one_thread')


def test_layerwise_schedule_reaches_the_optimizer(tmp_path, glue_dir, tiny):
    from fastai.callback.core import Callback
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, epochs=2, lr=1e-3, layer_lr_decay=0.5, batch_size=8, clip_grad=0.5)
    data = ClassificationTask(TASKS['RTE'], open_source(cfg.data)).prepare(cfg, tok, cfg.cache_dir, False)

    class Spy(Callback):
        order = 99  # after ParamScheduler set this step's rates and the step took them
        def before_fit(self): self.seen = []
        def after_batch(self):
            if self.training: self.seen.append([g['lr'] for g in self.opt.opt.param_groups])
    spy = Spy()
    _, history = learner.train_run(data, cfg, model.electra, 0, torch.device('cpu'), None, 0, extra_cbs=(spy,))
    clf = classifier.ElectraClassifier(model.electra, 2)
    _, peaks = layerwise.optimizer_groups(clf, 1e-3, 0.5, 'official')
    total = 2 * 4  # 32 examples, batch 8, 2 epochs
    assert len(spy.seen) == total and len(history) == 2
    # warm-up and decay together, per layer: lr(t) = peak_g * min(1, t / W) * (1 - t / T), W = 0.1 x T = 0.8 steps,
    # fractional as the official create_optimizer's (warmup_proportion x num_train_steps): 0 at step 0, where a warm-up
    # truncated to whole steps (0) gave the peak
    for t, lrs in enumerate(spy.seen):
        assert np.allclose(lrs, peaks * min(1.0, t / 0.8) * (1 - t / total), rtol=1e-12, atol=0), t
    assert np.all(np.asarray(spy.seen[0]) == 0)


def test_runs_are_reproducible_from_the_seed(tmp_path, glue_dir, tiny):
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, epochs=1, batch_size=8)
    data = ClassificationTask(TASKS['STS-B'], open_source(cfg.data)).prepare(cfg, tok, cfg.cache_dir, True)
    assert len(data.train) == 64  # double_unordered
    a, ha = learner.train_run(data, cfg, model.electra, 7, torch.device('cpu'), None, 0)
    b, hb = learner.train_run(data, cfg, model.electra, 7, torch.device('cpu'), None, 0)
    c, _ = learner.train_run(data, cfg, model.electra, 8, torch.device('cpu'), None, 0)
    assert ha == hb and torch.equal(a.classifier.weight, b.classifier.weight)
    assert not torch.equal(a.classifier.weight, c.classifier.weight)
    assert not torch.equal(a.electra.embeddings.word_embeddings.weight, model.electra.embeddings.word_embeddings.weight)


def test_precision_on_cpu(monkeypatch, tmp_path, glue_dir, tiny):
    cpu = torch.device('cpu')
    assert learner.device_and_autocast('cpu', 'auto') == (cpu, None)
    with pytest.raises(ConfigError, match='precision: fp16 mixed precision needs a GPU'):
        learner.device_and_autocast('cpu', 'fp16')
    monkeypatch.setattr('electra.training.device.cpu_bf16_supported', lambda: False)
    with pytest.raises(ConfigError, match='precision: bf16 .* native bf16'):
        learner.device_and_autocast('cpu', 'bf16')
    monkeypatch.setattr('electra.training.device.cpu_bf16_supported', lambda: True)
    assert learner.device_and_autocast('cpu', 'bf16') == (cpu, torch.bfloat16)
    # a bf16 run on this CPU autocasts the classifier's matmuls (a spy reads the dtype of the logits)
    model, tok = tiny
    cfg = job(tmp_path, glue_dir, batch_size=8)
    data = ClassificationTask(TASKS['RTE'], open_source(cfg.data)).prepare(cfg, tok, cfg.cache_dir, False)
    from fastai.callback.core import Callback

    class Spy(Callback):
        order = 5  # the model's outputs as it returns them, before the step casts them to fp32 for the loss
        def before_fit(self):
            self.dtypes = set()
            self.model.register_forward_hook(lambda m, args, out: self.dtypes.add(out.dtype))
    spy = Spy()
    _, history = learner.train_run(data, cfg, model.electra, 0, cpu, torch.bfloat16, 0, extra_cbs=(spy,))
    assert spy.dtypes == {torch.bfloat16} and np.isfinite(history[-1]['train_loss'])


@pytest.mark.parametrize('scale', [5.0, 1.0])
def test_sts_b_targets_learned_on_the_official_scale(tiny, tmp_path, scale):
    """stsb_scale 5 (official): the head learns score / 5 with MSE; predictions come back on the 0-5 scale, also
    from a saved run, whose module itself gives them (R15a-2: it gave score / 5). 1: the raw scores (replication)."""
    model, _ = tiny
    clf = classifier.ElectraClassifier(model.electra, 1, dropout=0.0, target_scale=scale).eval()
    ids = torch.tensor([[2, 20, 21, 3, 0], [2, 22, 3, 0, 0]]); mask = (ids != 0).long(); types = torch.zeros_like(ids)
    y = torch.tensor([4.0, 1.5])
    with torch.no_grad(): raw = clf(ids, mask, types)
    cfg = config_from_dict(FinetuneConfig, {'stsb_scale': scale})
    loader = torch.utils.data.DataLoader(list(zip(ids, mask, types, y)), batch_size=2)  # one batch, in order
    loss = ClassificationTask(TASKS['STS-B'], None).loss_func(clf, cfg)  # the kind's loss reads the model's scale
    learn = learner.finetuning_learner(clf, loader, [], cfg, loss, torch.device('cpu'), None)
    assert float(learn.loss_func(raw, y)) == pytest.approx(float(((raw - y / scale) ** 2).sum()), rel=1e-6)  # official sum
    assert np.allclose(learner.predict_outputs(clf, loader), scale * raw.numpy(), atol=1e-6)
    path = tmp_path / 'run.pth'
    torch.save({'format': 'electra-glue', 'n_outputs': 1, 'dropout': 0.0, 'target_scale': scale,
                'electra_config': model.electra.config.to_dict(), 'model': clf.state_dict()}, path)
    assert np.allclose(learner.predict_outputs(loading.load_finetuned(path), loader), scale * raw.numpy(), atol=1e-6)
    with torch.no_grad(): assert torch.allclose(loading.load_finetuned(path)(ids, mask, types), scale * raw, atol=1e-6)
    torch.save({'format': 'electra-finetuned', 'kind': 'classification', 'electra_config': model.electra.config.to_dict(),
                'head': ClassificationTask(TASKS['STS-B'], None).head(clf), 'model': clf.state_dict()}, path)
    assert np.allclose(learner.predict_outputs(loading.load_finetuned(path), loader), scale * raw.numpy(), atol=1e-6)
    with torch.no_grad(): assert torch.allclose(loading.load_finetuned(path)(ids, mask, types), scale * raw, atol=1e-6)
    assert clf.target_scale == scale  # training's own module is left on the training scale
    assert FinetuneConfig().stsb_scale == 5.0
