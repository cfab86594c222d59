"""Benchmarks of the training steps: the project's real step against a straightforward baseline of the
same objective, timed in the same process, interleaved round by round (shared machines are noisy: medians count).

    python -m electra.tools.bench pretrain --preset small                      # CPU (bf16 if native): see BENCHMARKS.md
    python -m electra.tools.bench pretrain --preset small --device cuda --compile
    python -m electra.tools.bench finetune --preset small --device cuda --compile

`pretrain` times
  - fast: the real pretraining step, i.e. the fastai Learner of `electra.pretraining.learner.pretraining_learner` with all its
    callbacks (device masking, masked-only generator head, ElectraLoss, multi-tensor ElectraAdam, clipping,
    schedule, metrics on the device, bf16 autocast on GPU and on CPUs with native bf16, optional `torch.compile`,
    optional padded vocabulary);
  - baseline: the same objective written plainly: HF `ElectraForMaskedLM` / `ElectraForPreTraining` called as-is with
    their own losses (generator logits at EVERY position), fp32, eager, a per-parameter Python-loop Adam (same
    no-bias-correction math), per-parameter clipping, and the loss read back every step;
  - with `--ablations`, in-between steps that add one item at a time (the per-item breakdown): `+masked_head`
    (the project's model and loss: generator head at the masked positions only, sync-free attention mask),
    `+fused_adam` (ElectraAdam, one fused kernel per group, and foreach clipping), `+no_sync` (no loss read per
    step), `+bf16` (autocast), then `learner_fp32` / `learner_eager` (the real Learner without mixed precision /
    without compile) and, with a `--compile_mode` other than the default, `learner_compiled` (compiled in the
    default mode).
Before timing, both compute the loss of one batch from the same weights, masks and random streams: they must agree.

`finetune` times a GLUE-style classification step (batch 32, length 128): the real step, the fastai Learner of
`electra.finetuning.learner.finetuning_learner` (layer-wise rates, ElectraAdam, schedule, clipping, bf16 where native, optional
compile), against the same classifier (HF `ElectraModel`, dropout, linear head on [CLS]) trained plainly in fp32 with
a Python-loop Adam, per-parameter clipping and the loss read every step.

FLOPs are counted from the model shapes (`pretrain_flops`, `finetune_flops`: matmuls only, backward = 2 x forward);
MFU = model FLOPs of the fast step x steps/s / peak FLOP/s of the device (`--peak_tflops`, or `PEAK_TFLOPS`).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from electra.config.base import load_config
from electra.config.pretrain import PretrainConfig
from electra.objective.loss import ElectraLoss
from electra.objective.masking import mask_tokens, max_predictions
from electra.objective.model import build_pretraining_model, padded_vocab_size
from electra.training.device import AUTOCAST_DTYPES, cpu_bf16_supported, resolve_precision
from electra.training.optim import ElectraAdam, no_decay_param, param_groups
from electra.training.speed import HostSyncCounter, try_compile, uncompile

__all__ = ['encoder_flops', 'pretrain_flops', 'finetune_flops', 'device_peak_tflops', 'PEAK_TFLOPS', 'LoopAdam',
           'synthetic_batches', 'baseline_pretrain_loss', 'fast_pretrain_loss', 'count_host_syncs', 'main']

PRESET_DIR = Path(__file__).resolve().parents[2] / 'configs' / 'pretrain'
FINETUNE_PRESET_DIR = PRESET_DIR.parent / 'finetune'
BERT_IDS = dict(pad=0, unk=100, cls=101, sep=102, mask=103)  # the uncased BERT/ELECTRA vocabulary (30522 tokens)

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), matched against torch.cuda.get_device_name(). MFU is quoted
# against this peak whatever the step's precision, as is usual.
PEAK_TFLOPS = [('H200', 989.0), ('H100', 989.0), ('H800', 989.0), ('GH200', 989.0), ('A100', 312.0), ('A800', 312.0),
               ('L40S', 362.0), ('L4', 121.0), ('A10', 125.0), ('V100', 125.0)]

# GLUE training set sizes (official splits) and the official epochs: 3, or 10 for RTE and STS-B; MRPC and STS-B are
# doubled by `double_unordered`. Used to turn examples/s into the time of a 10-run sweep over all tasks.
GLUE_TRAIN = {'cola': (8551, 3), 'sst2': (67349, 3), 'mrpc': (2 * 3668, 3), 'stsb': (2 * 5749, 10),
              'qqp': (363846, 3), 'mnli': (392702, 3), 'qnli': (104743, 3), 'rte': (2490, 10), 'wnli': (635, 3)}


# ---------------------------------------------------------------- FLOPs

def encoder_flops(batch: int, length: int, hidden: int, layers: int, ffn: int, embedding: int) -> float:
    """Forward matmul FLOPs of one ELECTRA encoder over [batch, length] tokens (a multiply-add counts 2).
    T = batch * length tokens, H hidden, F FFN, E embedding size:
      embeddings_project (only when E != H)  2 T E H
      per layer: Q, K, V projections        2 T H 3H
                 attention output           2 T H H
                 scores Q K^T               2 batch L L H   (all heads together)
                 weighted sum P V           2 batch L L H
                 FFN in and out             2 T H F * 2
    Embedding lookups, LayerNorm, softmax, GELU and dropout are not matmuls and are not counted."""
    T = batch * length
    project = 2 * T * embedding * hidden if embedding != hidden else 0
    per_layer = 2 * T * hidden * 3 * hidden + 2 * T * hidden * hidden + 2 * 2 * batch * length * length * hidden \
        + 2 * 2 * T * hidden * ffn
    return float(project + layers * per_layer)


def pretrain_flops(cfg: PretrainConfig, batch: int, length: int, vocab: int, head_positions: int) -> dict[str, float]:
    """Matmul FLOPs of one pretraining step. `head_positions`: positions per sequence at which the generator's MLM head
    runs (P = max_predictions, 19 at length 128, for the masked-only head; `length` for a full-length head).
    Generator head at n = batch * positions: dense Hg -> E: 2 n Hg E, vocab projection E -> V: 2 n E V.
    Discriminator head: dense H -> H: 2 T H H, then H -> 1: 2 T H. Training = forward + backward = 3 x forward."""
    from electra.objective.model import discriminator_config, generator_config
    g, d = generator_config(cfg, vocab, 0), discriminator_config(cfg, vocab, 0)
    n, T = batch * head_positions, batch * length
    out = {
        'generator_encoder': encoder_flops(batch, length, g.hidden_size, g.num_hidden_layers, g.intermediate_size,
                                           g.embedding_size),
        'generator_head': float(2 * n * g.hidden_size * g.embedding_size + 2 * n * g.embedding_size * vocab),
        'discriminator_encoder': encoder_flops(batch, length, d.hidden_size, d.num_hidden_layers, d.intermediate_size,
                                               d.embedding_size),
        'discriminator_head': float(2 * T * d.hidden_size * d.hidden_size + 2 * T * d.hidden_size),
    }
    out['forward'] = sum(out.values())
    out['train_step'] = 3 * out['forward']
    return out


def finetune_flops(cfg: PretrainConfig, batch: int, length: int, n_outputs: int = 2) -> dict[str, float]:
    "Matmul FLOPs of one fine-tuning step: the discriminator encoder and a linear head on [CLS]; training = 3 x forward."
    enc = encoder_flops(batch, length, cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.embedding_size)
    fwd = enc + 2 * batch * cfg.hidden_size * n_outputs
    return {'encoder': enc, 'forward': fwd, 'train_step': 3 * fwd}


def device_peak_tflops(device: torch.device, override: float | None = None) -> float | None:
    "The peak used for MFU: `override`, else the table entry for the GPU's name; None on CPU (no MFU unless given)."
    if override: return override
    if device.type != 'cuda': return None
    name = torch.cuda.get_device_name(device)
    return next((p for key, p in PEAK_TFLOPS if key in name), None)


# ---------------------------------------------------------------- data, tokenizer stand-in, baseline optimizer

class BenchTokenizer:
    "What `pretraining_learner` reads of a tokenizer, with BERT's uncased ids (no vocabulary file needed)."
    pad_token_id, unk_token_id, cls_token_id = BERT_IDS['pad'], BERT_IDS['unk'], BERT_IDS['cls']
    sep_token_id, mask_token_id = BERT_IDS['sep'], BERT_IDS['mask']

    def __init__(self, vocab_size: int = 30522): self.vocab_size = vocab_size

    def __len__(self) -> int: return self.vocab_size


def synthetic_batches(n: int, batch: int, length: int, vocab: int, seed: int = 0, pin: bool = False):
    """`n` batches `(input_ids, token_type_ids)` [batch, length], int64, shaped like the official example builder's:
    `[CLS] A [SEP] B [SEP]` then padding; 95% of the examples full length, 5% of a random length in [5, length].
    Word ids are drawn from [1000, vocab) (past BERT's special and unused ids), or [104, vocab) for a small vocab."""
    g = torch.Generator().manual_seed(seed)
    first_word = 1000 if vocab > 2000 else 104
    out = []
    for _ in range(n):
        ids = torch.randint(first_word, vocab, (batch, length), generator=g)
        short = torch.rand(batch, generator=g) < 0.05
        lengths = torch.where(short, torch.randint(5, length + 1, (batch,), generator=g), torch.full((batch,), length))
        split = (lengths.float() * torch.rand(batch, generator=g).clamp(0.2, 0.8)).long().clamp(min=2)  # [SEP] of A
        ar = torch.arange(length)[None]
        ids[:, 0] = BERT_IDS['cls']
        ids[ar == split[:, None]] = BERT_IDS['sep']
        ids[ar == (lengths - 1)[:, None]] = BERT_IDS['sep']
        ids[ar >= lengths[:, None]] = BERT_IDS['pad']
        types = ((ar > split[:, None]) & (ar < lengths[:, None])).long()
        b = (ids, types)
        out.append(tuple(t.pin_memory() for t in b) if pin else b)
    return out


class Batches:
    "A loader over a fixed list of batches, cycled; `n` (settable) batches per pass."

    def __init__(self, batches: list, n: int = 1): self.batches, self.n = batches, n

    def __len__(self) -> int: return self.n

    def __iter__(self):
        for i in range(self.n): yield self.batches[i % len(self.batches)]


class LoopAdam:
    "The baseline optimizer: the same no-bias-correction Adam as `ElectraAdam`, one parameter at a time in Python."

    def __init__(self, named_params, lr: float, weight_decay: float, betas=(0.9, 0.999), eps: float = 1e-6,
                 lrs: dict[str, float] | None = None):
        self.params = [(n, p) for n, p in named_params if p.requires_grad]
        self.lr, self.wd, self.betas, self.eps, self.lrs = lr, weight_decay, betas, eps, lrs or {}
        self.state = {n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in self.params}

    @torch.no_grad()
    def step(self):
        b1, b2 = self.betas
        for name, p in self.params:
            if p.grad is None: continue
            m, v = self.state[name]
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            update = m / (v.sqrt() + self.eps)
            if self.wd and not no_decay_param(name): update += self.wd * p
            p.add_(update, alpha=-self.lrs.get(name, self.lr))

    def zero_grad(self):
        for _, p in self.params: p.grad = None


def unique_named_parameters(*modules: nn.Module):
    "Named parameters of several modules, each shared tensor once (the tied embeddings)."
    seen, out = set(), []
    for i, m in enumerate(modules):
        for n, p in m.named_parameters():
            if id(p) not in seen: seen.add(id(p)); out.append((f'{i}.{n}', p))
    return out


# ---------------------------------------------------------------- the two losses on one batch

def _masked(cfg: PretrainConfig, ids: torch.Tensor, vocab: int, rng: torch.Generator):
    special = torch.tensor([BERT_IDS[k] for k in ('cls', 'sep', 'mask', 'pad')], device=ids.device)
    return mask_tokens(ids, special, BERT_IDS['pad'], BERT_IDS['mask'], vocab, cfg.mask_prob, cfg.mask_mode,
                       cfg.mask_token_prob, cfg.random_token_prob, rng)


def baseline_pretrain_loss(generator, discriminator, cfg: PretrainConfig, masked, token_type_ids,
                           rng: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The objective as the HF classes compute it, as-is: generator logits [B, L, V] at every position with
    `ElectraForMaskedLM`'s own MLM loss, then Gumbel-max sampling at the masked positions written out here from the
    official formula (not the library's `sample_tokens`, so a bug there cannot cancel out) and
    `ElectraForPreTraining`'s own loss over the real tokens (2-D padding masks). Returns (total, gen, disc).
    Only the options the benchmark and the tests use are written out: temperature 1 and no `disallow_correct`."""
    ids, positions, labels = masked
    pad = discriminator.config.pad_token_id
    attn = (ids != pad).long()
    mlm_labels = torch.full_like(ids, -100).scatter(1, positions, labels)     # unchosen slots scatter -100
    g = generator(input_ids=ids, attention_mask=attn, token_type_ids=token_type_ids, labels=mlm_labels)
    if cfg.temperature != 1 or cfg.disallow_correct or cfg.uniform_generator:
        raise ValueError('the baseline writes out plain Gumbel-max sampling only (temperature 1, no options)')
    at = g.logits.detach().gather(1, positions[..., None].expand(-1, -1, g.logits.size(-1))).float()
    u = torch.rand(at.shape, device=at.device, generator=rng)      # official: -log(-log(u + 1e-9) + 1e-9)
    sampled = (at - torch.log(-torch.log(u + 1e-9) + 1e-9)).argmax(-1)
    chosen = labels >= 0
    disc_ids = ids.scatter(1, positions, torch.where(chosen, sampled, ids.gather(1, positions)))
    replaced = torch.zeros_like(ids).scatter(1, positions, (chosen & (sampled != labels)).long())  # same = original
    d = discriminator(input_ids=disc_ids, attention_mask=attn, token_type_ids=token_type_ids, labels=replaced)
    return cfg.gen_loss_weight * g.loss + cfg.disc_loss_weight * d.loss, g.loss, d.loss


def fast_pretrain_loss(model, loss_func: ElectraLoss, masked, token_type_ids) -> tuple[torch.Tensor, ...]:
    "The project's step: `ElectraPretrainingModel` (masked-only head) and `ElectraLoss`. Returns (total, gen, disc)."
    ids, positions, labels = masked
    loss = loss_func(model(ids, token_type_ids, positions, labels), labels)
    return (loss, *loss_func.last)


def count_host_syncs(learn, n_steps: int) -> HostSyncCounter:
    "Run `n_steps` steps of a Learner (eager) under `HostSyncCounter`; returns the counter."
    loader = learn.dls.train.loader
    old = loader.n
    loader.n = n_steps
    counter = HostSyncCounter()
    try:
        with counter: learn.fit(1)
    finally:
        loader.n = old
    return counter


# ---------------------------------------------------------------- runners

def _sync(device: torch.device):
    if device.type == 'cuda': torch.cuda.synchronize(device)


class Runner:
    "A training step to time: `run(k)` runs k steps and returns (wall seconds, process CPU seconds)."
    name = ''
    peak_mem: int | None = None

    def __init__(self, device: torch.device): self.device = device

    def steps(self, k: int): raise NotImplementedError

    def run(self, k: int) -> tuple[float, float]:
        if self.device.type == 'cuda': torch.cuda.reset_peak_memory_stats(self.device)
        _sync(self.device)
        t, c = time.perf_counter(), time.process_time()
        self.steps(k)
        _sync(self.device)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        if self.device.type == 'cuda':
            self.peak_mem = max(self.peak_mem or 0, torch.cuda.max_memory_allocated(self.device))
        return wall, cpu


def step_timer(runner: 'Runner', n_steps: Callable[[], int]):
    """A callback that times a Learner's fit from the end of its first batch (untimed: the loader and callbacks
    start up) to the end of its last, between two device synchronisations, into `runner.timed`."""
    from fastai.callback.core import Callback

    class StepTimer(Callback):
        "Times the steps after the first one of a fit."
        order, run_valid = 100, False  # after every other callback: a step ends here

        def before_fit(self): self.n = 0

        def after_batch(self):
            self.n += 1
            if self.n == 1:
                _sync(runner.device)
                if runner.device.type == 'cuda': torch.cuda.reset_peak_memory_stats(runner.device)
                self.t, self.c = time.perf_counter(), time.process_time()
            elif self.n == n_steps():
                _sync(runner.device)
                runner.timed = (time.perf_counter() - self.t, time.process_time() - self.c)
    return StepTimer()


class FitRunner(Runner):
    """A step inside a fastai Learner (`self.learn`, over the loader `self.loader`): each `run` is one `fit` of k + 1
    batches, the first untimed (`step_timer`); `fit_kwargs` go to `fit`."""
    fit_kwargs: dict = {}

    def run(self, k: int) -> tuple[float, float]:
        self.loader.n = k + 1
        self.learn.fit(1, **self.fit_kwargs)
        if self.device.type == 'cuda':
            self.peak_mem = max(self.peak_mem or 0, torch.cuda.max_memory_allocated(self.device))
        return self.timed


class LearnerRunner(FitRunner):
    "The real pretraining step: `electra.pretraining.learner.pretraining_learner`'s Learner."

    def __init__(self, name, cfg, model, batches, device, precision):
        super().__init__(device)
        from electra.pretraining.callbacks import ProgressBar
        from electra.pretraining.learner import pretraining_learner
        self.name, self.loader = name, Batches(batches)
        self.run_dir = Path(tempfile.mkdtemp(prefix='electra_bench_'))
        self.learn = pretraining_learner(cfg, model, BenchTokenizer(model.vocab_size), self.loader, self.run_dir, device,
                                   precision)
        self.learn.remove_cbs([cb for cb in self.learn.cbs if isinstance(cb, ProgressBar)])
        self.learn.metrics_logger.sinks = []
        self.learn.add_cb(step_timer(self, lambda: self.loader.n))

    @property
    def compiled(self):
        cb = getattr(self.learn, 'compile_model', None)
        return None if cb is None else cb.compiled


class PretrainLoopRunner(Runner):
    """A plain loop of the pretraining objective, for the baseline and the breakdown: `kind` 'hf' (the HF classes
    as-is, full-length generator logits) or 'project' (`ElectraPretrainingModel` + `ElectraLoss`); `opt` 'loop'
    (LoopAdam + per-parameter clipping) or 'electra' (ElectraAdam + foreach clipping); `read_loss`: `.item()` every
    step, as a plain loop logs it."""

    def __init__(self, name, cfg, model, batches, device, kind='hf', opt='loop', read_loss=True, autocast=None):
        super().__init__(device)
        self.name, self.cfg, self.kind, self.read_loss, self.autocast = name, cfg, kind, read_loss, autocast
        self.model = copy.deepcopy(model).to(device)  # its own weights: every runner starts from the same ones
        self.vocab = model.vocab_size
        self.loss_func = ElectraLoss(cfg.gen_loss_weight, cfg.disc_loss_weight)
        self.batches = [tuple(t.to(device) for t in b) for b in batches]
        self.i = 0
        self.mask_rng = torch.Generator(device=device).manual_seed(cfg.seed)
        self.sample_rng = torch.Generator(device=device).manual_seed(cfg.seed + 1)
        self.model.rng = self.sample_rng
        if opt == 'loop':
            named = unique_named_parameters(self.model)
            self.opt = LoopAdam(named, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps)
            self.clip = lambda: nn.utils.clip_grad_norm_([p for _, p in named], cfg.clip_grad, foreach=False)
        else:
            self.opt = ElectraAdam(param_groups(self.model), lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2),
                                   eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
            self.clip = lambda: nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_grad)
        self.model.train()

    def loss(self, masked, types):
        if self.kind == 'hf':
            return baseline_pretrain_loss(self.model.generator, self.model.discriminator, self.cfg, masked, types,
                                          self.sample_rng)[0]
        return fast_pretrain_loss(self.model, self.loss_func, masked, types)[0]

    def steps(self, k: int):
        for _ in range(k):
            ids, types = self.batches[self.i % len(self.batches)]
            self.i += 1
            m = _masked(self.cfg, ids, self.vocab, self.mask_rng)
            with torch.autocast(self.device.type, dtype=self.autocast or torch.float32, enabled=self.autocast is not None):
                loss = self.loss(m, types)
            loss.backward()
            if self.cfg.clip_grad > 0: self.clip()
            self.opt.step()
            self.opt.zero_grad()
            if self.read_loss: loss.item()


class FinetuneBaselineRunner(Runner):
    """A GLUE-style classification step written plainly: HF `ElectraModel` + dropout + linear head on [CLS], fp32,
    LoopAdam with the layer-wise rates, per-parameter clipping, the loss read every step."""

    def __init__(self, name, body, batches, device, lr=3e-4, layer_decay=0.8, n_outputs=2):
        super().__init__(device)
        from electra.finetuning.classifier import ElectraClassifier, optimizer_groups
        self.name, self.batches, self.i = name, [tuple(t.to(device) for t in b) for b in batches], 0
        self.model = ElectraClassifier(copy.deepcopy(body), n_outputs).to(device).train()
        groups, lrs = optimizer_groups(self.model, lr, layer_decay, 'official')
        lr_of = {n: float(r) for g, r in zip(groups, lrs) for n in g['names']}
        self.opt = LoopAdam(list(self.model.named_parameters()), lr, 0.0, lrs=lr_of)

    def steps(self, k: int):
        for _ in range(k):
            ids, mask, types, y = self.batches[self.i % len(self.batches)]
            self.i += 1
            loss = F.cross_entropy(self.model(ids, mask, types), y)
            loss.backward()
            nn.utils.clip_grad_norm_(list(self.model.parameters()), 1.0, foreach=False)
            self.opt.step()
            self.opt.zero_grad()
            loss.item()


class FinetuneLearnerRunner(FitRunner):
    """The real fine-tuning step: the fastai Learner of `electra.finetuning.learner.finetuning_learner` (ElectraAdam over the
    layer-wise groups, schedule, clipping, mixed precision), optionally with the classifier compiled."""

    def __init__(self, name, body, batches, device, cfg, autocast=None, compile_mode=None, n_outputs=2):
        super().__init__(device)
        from electra.finetuning.classifier import ElectraClassifier
        from electra.finetuning.learner import finetuning_learner
        self.name, self.loader = name, Batches([tuple(t.to(device) for t in b) for b in batches])
        model = ElectraClassifier(copy.deepcopy(body), n_outputs).to(device)
        self.compiled = None
        if compile_mode is not None:
            def trial():
                ids, mask, types, y = self.loader.batches[0]
                with torch.autocast(device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
                    F.cross_entropy(model(ids, mask, types).float(), y).backward()
                model.zero_grad(set_to_none=True)
            self.compiled = try_compile([model], trial, what='the classifier',
                                        mode=None if compile_mode == 'default' else compile_mode)
        self.learn = finetuning_learner(model, self.loader, [], cfg, False, device, autocast,
                                   (step_timer(self, lambda: self.loader.n),))
        self.fit_kwargs = {'lr': self.learn.layer_lrs}


# ---------------------------------------------------------------- timing

def interleaved(runners: list[Runner], warmup: int, rounds: int, steps: int, log=print) -> dict[str, dict]:
    """Warm every runner up, then `rounds` rounds in which every runner runs `steps` steps (the order alternates
    between rounds). Per runner: the per-round seconds per step (wall and process CPU) and their medians."""
    for r in runners:
        t = time.perf_counter()
        if warmup: r.run(warmup)
        log(f'  warm-up {r.name}: {warmup} step(s) in {time.perf_counter() - t:.1f}s')
    res = {r.name: {'wall': [], 'cpu': []} for r in runners}
    for i in range(rounds):
        order = runners if i % 2 == 0 else runners[::-1]
        for r in order:
            wall, cpu = r.run(steps)
            res[r.name]['wall'].append(wall / steps)
            res[r.name]['cpu'].append(cpu / steps)
        log(f'  round {i + 1}/{rounds}: ' + ', '.join(f'{r.name} {res[r.name]["wall"][-1]:.3f}s' for r in runners))
    for r in runners:
        d = res[r.name]
        d['median_s'] = statistics.median(d['wall'])
        d['median_cpu_s'] = statistics.median(d['cpu'])
        d['peak_mem_bytes'] = r.peak_mem
    return res


def ratio_per_round(res: dict, num: str, den: str) -> tuple[float, list[float]]:
    "Median over rounds of time(num) / time(den) in the same round: how many times faster `den` is."
    ratios = [a / b for a, b in zip(res[num]['wall'], res[den]['wall'])]
    return statistics.median(ratios), ratios


def environment(device: torch.device) -> dict:
    import fastai
    import transformers
    env = {'python': platform.python_version(), 'torch': torch.__version__, 'transformers': transformers.__version__,
           'fastai': fastai.__version__, 'threads': torch.get_num_threads(), 'device': str(device)}
    if device.type == 'cuda':
        env['gpu'] = torch.cuda.get_device_name(device)
    cpu = platform.processor()
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'): cpu = line.split(':', 1)[1].strip(); break
    except OSError: pass
    env['cpu'], env['cpu_count'] = cpu, os.cpu_count()
    return env


def _fmt_mem(b): return '-' if b is None else f'{b / 2**30:.2f} GiB'


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


# ---------------------------------------------------------------- pretrain

def _pretrain_cfg(args) -> PretrainConfig:
    "The preset's config with the benchmark's batch shape and speed options; no checkpoints, metrics every 100 steps."
    cfg = load_config(PretrainConfig, ['--config', args.preset], preset_dir=PRESET_DIR)
    over = {'batch_size': args.batch_size, 'max_length': args.max_length, 'compile': args.compile,
            'compile_mode': args.compile_mode,
            'pad_vocab_multiple': args.pad_vocab_multiple, 'checkpoint_at': [], 'log_every': 100, 'logger': 'none'}
    cfg = dataclass_replace(cfg, **{k: v for k, v in over.items() if v is not None})
    cfg.validate()
    return cfg


def _finetune_cfg(preset: str, batch_size: int, max_length: int):
    "The fine-tuning preset of this model size (small's recipe for sizes without one), one epoch of the given shape."
    from electra.config.finetune import FinetuneConfig
    name = preset if (FINETUNE_PRESET_DIR / f'{preset}.yaml').is_file() else 'small'
    cfg = load_config(FinetuneConfig, ['--config', name], preset_dir=FINETUNE_PRESET_DIR)
    return dataclass_replace(cfg, batch_size=batch_size, max_length=max_length, epochs=1, task_overrides={})


def padded_like(model, cfg: PretrainConfig, vocab: int):
    "A model of `cfg` (padded vocabulary) holding `model`'s weights (unpadded); padding rows keep their fresh init."
    out = build_pretraining_model(cfg, vocab, BERT_IDS['pad'])
    state = out.state_dict()
    for k, v in model.state_dict().items():
        if state[k].shape == v.shape: state[k] = v
        else: state[k][:len(v)] = v
    out.load_state_dict(state)
    return out


def loss_check(cfg: PretrainConfig, model, batch, device, seed: int = 0, dropout: bool = True) -> dict:
    """The fast objective and the baseline's on one batch, from the same weights (`model`, unpadded), masks and random
    streams (dropout included unless `dropout` is False), in fp32 eager: the two losses must agree to float rounding.
    (On a GPU the two may pick different attention kernels, whose dropout streams differ: check without dropout.)"""
    model = copy.deepcopy(model).to(device).train(dropout)
    ids, types = (t.to(device) for t in batch)
    m = _masked(cfg, ids, model.vocab_size, torch.Generator(device=device).manual_seed(seed))
    out = {}
    for name in ('fast', 'baseline'):
        torch.manual_seed(seed)
        rng = torch.Generator(device=device).manual_seed(seed + 1)
        with torch.no_grad():
            if name == 'fast':
                model.rng = rng
                losses = fast_pretrain_loss(model, ElectraLoss(cfg.gen_loss_weight, cfg.disc_loss_weight), m, types)
            else:
                losses = baseline_pretrain_loss(model.generator, model.discriminator, cfg, m, types, rng)
            out[name] = [float(x) for x in losses]
    out['abs_diff'] = abs(out['fast'][0] - out['baseline'][0])
    return out


def bench_pretrain(args) -> dict:
    device = torch.device(args.device)
    cfg = _pretrain_cfg(args)
    precision = resolve_precision(args.precision, device)
    vocab, B, L = args.vocab_size, cfg.batch_size, cfg.max_length
    torch.manual_seed(cfg.seed)
    # the baseline's HF classes at the tokenizer's vocabulary size; the fast model starts from the same weights
    base_model = build_pretraining_model(dataclass_replace(cfg, pad_vocab_multiple=0), vocab, BERT_IDS['pad'])
    model = padded_like(base_model, cfg, vocab)
    batches = synthetic_batches(args.n_batches, B, L, vocab, cfg.seed, pin=device.type == 'cuda')
    log = print
    log(f'pretrain benchmark: preset {args.preset}, batch {B} x length {L}, vocab {vocab} '
        f'(rows {padded_vocab_size(vocab, cfg.pad_vocab_multiple)}), {device}, fast path {precision} '
        f'({args.precision_reason}), baseline fp32{", compile" if cfg.compile else ""}')
    check = loss_check(cfg, base_model, batches[0], device, dropout=device.type == 'cpu')
    log(f'  same batch, masks and random streams: fast loss {check["fast"][0]:.6f}, baseline loss '
        f'{check["baseline"][0]:.6f} (|diff| {check["abs_diff"]:.2e})')
    autocast = AUTOCAST_DTYPES[precision]
    runners: list[Runner] = [PretrainLoopRunner('baseline', cfg, base_model, batches, device, 'hf', 'loop', True)]
    if args.ablations:
        runners += [
            PretrainLoopRunner('+masked_head', cfg, base_model, batches, device, 'project', 'loop', True),
            PretrainLoopRunner('+fused_adam', cfg, base_model, batches, device, 'project', 'electra', True),
            PretrainLoopRunner('+no_sync', cfg, base_model, batches, device, 'project', 'electra', False),
        ]
        if autocast is not None:
            runners.append(PretrainLoopRunner(f'+{precision}', cfg, base_model, batches, device, 'project', 'electra',
                                              False, autocast))
        eager = dataclass_replace(cfg, compile=False)
        if precision != 'fp32':  # the real Learner in fp32, to isolate what mixed precision adds to it
            runners.append(LearnerRunner('learner_fp32', eager, copy.deepcopy(model), batches, device, 'fp32'))
        if cfg.compile:  # the real Learner without compile, to isolate what compile adds
            runners.append(LearnerRunner('learner_eager', eager, copy.deepcopy(model), batches, device, precision))
        if cfg.compile and cfg.compile_mode != 'default':  # compiled in the default mode, to isolate what the mode adds
            runners.append(LearnerRunner('learner_compiled', dataclass_replace(cfg, compile_mode='default'),
                                         copy.deepcopy(model), batches, device, precision))
    if args.variants:  # keep only the named in-between steps (baseline and fast always run)
        keep = set(args.variants.split(','))
        runners = [r for r in runners if r.name in keep or r.name == 'baseline']
    fast = LearnerRunner('fast', cfg, model.to(device), batches, device, precision)
    runners.append(fast)
    res = interleaved(runners, args.warmup, args.rounds, args.steps, log)
    if cfg.compile: log(f'  compile: {"compiled" if fast.compiled else "FAILED, fast path ran eagerly"}')

    P = max_predictions(cfg.mask_prob, L) if cfg.mask_mode != 'bernoulli' else L
    rows_v = padded_vocab_size(vocab, cfg.pad_vocab_multiple)
    fl_fast = pretrain_flops(cfg, B, L, vocab, min(P, L))
    fl_base = pretrain_flops(cfg, B, L, vocab, L)
    peak = device_peak_tflops(device, args.peak_tflops)
    table = [['step', 's/step (median)', 'steps/s', 'tokens/s', 'TFLOP/step', 'achieved TFLOP/s', 'MFU', 'x baseline',
              'peak mem']]
    summary = {}
    for r in runners:
        d = res[r.name]
        sps = 1.0 / d['median_s']
        flops = fl_base['train_step'] if r.name == 'baseline' else fl_fast['train_step']
        ratio, ratios = ratio_per_round(res, 'baseline', r.name)
        mfu = flops * sps / (peak * 1e12) if peak else None
        summary[r.name] = {'s_per_step': d['median_s'], 'cpu_s_per_step': d['median_cpu_s'], 'steps_per_s': sps,
                           'tokens_per_s': sps * B * L, 'train_flops_per_step': flops, 'achieved_tflops': flops * sps / 1e12,
                           'mfu': mfu, 'speedup_vs_baseline': ratio, 'speedup_per_round': ratios,
                           'peak_mem_bytes': d['peak_mem_bytes'], 'wall_per_round': d['wall'], 'cpu_per_round': d['cpu']}
        table.append([r.name, f'{d["median_s"]:.4f}', f'{sps:.3g}', f'{sps * B * L:,.0f}', f'{flops / 1e12:.3f}',
                      f'{flops * sps / 1e12:.3f}', '-' if mfu is None else f'{100 * mfu:.1f}%', f'{ratio:.2f}x',
                      _fmt_mem(d['peak_mem_bytes'])])
    log('')
    log(_table(table))
    cpu_ratio = statistics.median(a / b for a, b in zip(res['baseline']['cpu'], res['fast']['cpu']))
    log(f'\nfast path: {summary["fast"]["steps_per_s"]:.3g} steps/s, {summary["fast"]["speedup_vs_baseline"]:.2f}x the '
        f'baseline (median of per-round ratios; by process CPU time {cpu_ratio:.2f}x)'
        + ('' if peak else '; no MFU: no peak FLOP/s known for this device (give --peak_tflops)'))
    log(f'model FLOPs per step: fast {fl_fast["train_step"] / 1e12:.3f} TFLOP (masked-only generator head at {P} '
        f'positions), baseline {fl_base["train_step"] / 1e12:.3f} TFLOP (head at all {L} positions)')
    if device.type == 'cpu':
        log(f'process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (all steps together)')
    out = {'command': 'python -m electra.tools.bench ' + ' '.join(args.argv), 'env': environment(device),
           'config': {'preset': args.preset, 'batch_size': B, 'max_length': L, 'vocab': vocab,
           'vocab_rows': rows_v, 'precision': precision, 'precision_reason': args.precision_reason,
           'compile': cfg.compile, 'compiled': fast.compiled,
           'pad_vocab_multiple': cfg.pad_vocab_multiple, 'warmup': args.warmup, 'rounds': args.rounds,
           'steps_per_round': args.steps}, 'loss_check': check, 'flops': {'fast': fl_fast, 'baseline': fl_base},
           'peak_tflops': peak, 'results': summary, 'cpu_time_speedup': cpu_ratio}
    if args.check_sync:
        out['host_syncs'] = sync_check(cfg, model, batches, device, precision, log)
    if args.profile: log(profile_steps(fast, args.steps, device))
    return out


def profile_steps(runner: Runner, k: int, device: torch.device, rows: int = 20) -> str:
    """torch.profiler's table of the ops that took the most time (device time on a GPU) in `k` more steps of `runner`;
    on a GPU also the kernels launched per step and how busy the GPU was: kernel time / wall time near 100% means
    the GPU is the limit, far below it means the host (Python, launches) is."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == 'cuda' else [])
    with profile(activities=activities) as prof:
        wall, _ = runner.run(k)
        _sync(device)
    key = 'self_cuda_time_total' if device.type == 'cuda' else 'self_cpu_time_total'
    head = f'\nprofile of {runner.name} ({k} step(s) after warm-up; top {rows} by {key}):\n'
    table = prof.key_averages().table(sort_by=key, row_limit=rows)
    if device.type != 'cuda': return head + table
    # the host's side: what keeps the CPU busy while the GPU waits for work
    table += f'\ntop {rows} by self_cpu_time_total:\n' + prof.key_averages().table(sort_by='self_cpu_time_total',
                                                                                  row_limit=rows)
    kernels = [e for e in prof.events() if str(getattr(e, 'device_type', '')).endswith('CUDA')]
    n = k + 1 if isinstance(runner, FitRunner) else k  # a Learner's fit runs one untimed step first
    busy_ms, wall_ms = sum(e.self_device_time_total for e in kernels) / 1e3 / n, 1e3 * wall / k
    return (head + table + f'\nGPU busy: {len(kernels) / n:.0f} kernels per step, kernel time {busy_ms:.3f} ms of '
            f'{wall_ms:.3f} ms wall per step ({100 * busy_ms / wall_ms:.0f}%)')


def dataclass_replace(cfg, **kw):
    import dataclasses
    return dataclasses.replace(cfg, **kw)


def sync_check(cfg, model, batches, device, precision, log=print, n_steps: int = 3) -> dict:
    """Device-to-host synchronisations in `n_steps` steps of the real (eager) Learner: counted with `HostSyncCounter`,
    and on CUDA also with `torch.cuda.set_sync_debug_mode('warn')`."""
    model = copy.deepcopy(model)
    uncompile(model)  # a deep copy of a compiled module would call the original's compiled forward
    runner = LearnerRunner('sync_check', dataclass_replace(cfg, compile=False), model, batches, device, precision)
    runner.run(1)  # first fit: optimizer state, generators
    counter = count_host_syncs(runner.learn, n_steps)
    out = {'steps': n_steps, 'ops': dict(counter.counts)}
    if device.type == 'cuda':
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            torch.cuda.set_sync_debug_mode('warn')
            try: runner.run(n_steps)
            finally: torch.cuda.set_sync_debug_mode(0)
        out['cuda_sync_warnings'] = [str(w.message).splitlines()[0] for w in caught if 'synchroniz' in str(w.message)]
    log(f'host syncs in {n_steps} steps of the real step: {out}')
    return out


# ---------------------------------------------------------------- finetune

def bench_finetune(args) -> dict:
    device = torch.device(args.device)
    cfg = _pretrain_cfg(args)
    from transformers import ElectraModel

    from electra.finetuning.learner import device_and_autocast
    from electra.objective.model import discriminator_config
    _, autocast = device_and_autocast(str(device), args.precision)
    precision = 'fp32' if autocast is None else str(autocast).split('.')[-1]
    B, L = cfg.batch_size, cfg.max_length
    torch.manual_seed(cfg.seed)
    body = ElectraModel(discriminator_config(cfg, args.vocab_size, BERT_IDS['pad']))
    g = torch.Generator().manual_seed(cfg.seed)
    batches = [(ids, (ids != BERT_IDS['pad']).long(), types, torch.randint(2, (B,), generator=g))
               for ids, types in synthetic_batches(args.n_batches, B, L, args.vocab_size, cfg.seed)]
    ft = _finetune_cfg(args.preset, B, L)
    print(f'finetune benchmark: preset {args.preset} discriminator, batch {B} x length {L}, {device}, fast path '
          f'{precision} ({args.precision_reason}), baseline fp32{", compile" if args.compile else ""}')
    runners = [FinetuneBaselineRunner('baseline', body, batches, device, ft.lr, ft.layer_lr_decay),
               FinetuneLearnerRunner('fast', body, batches, device, ft, autocast,
                                     (args.compile_mode or 'default') if args.compile else None)]
    res = interleaved(runners, args.warmup, args.rounds, args.steps)
    fl = finetune_flops(cfg, B, L)
    peak = device_peak_tflops(device, args.peak_tflops)
    table = [['step', 's/step (median)', 'examples/s', 'TFLOP/step', 'MFU', 'x baseline', 'peak mem']]
    summary = {}
    glue_examples = 10 * sum(n * e for n, e in GLUE_TRAIN.values())
    for r in runners:
        d = res[r.name]
        eps = B / d['median_s']
        ratio, ratios = ratio_per_round(res, 'baseline', r.name)
        mfu = fl['train_step'] * eps / B / (peak * 1e12) if peak else None
        summary[r.name] = {'s_per_step': d['median_s'], 'examples_per_s': eps, 'mfu': mfu, 'speedup_vs_baseline': ratio,
                           'speedup_per_round': ratios, 'peak_mem_bytes': d['peak_mem_bytes'],
                           'glue_sweep_train_hours': glue_examples / eps / 3600, 'wall_per_round': d['wall']}
        table.append([r.name, f'{d["median_s"]:.4f}', f'{eps:,.1f}', f'{fl["train_step"] / 1e12:.3f}',
                      '-' if mfu is None else f'{100 * mfu:.1f}%', f'{ratio:.2f}x', _fmt_mem(d['peak_mem_bytes'])])
    print('\n' + _table(table))
    fast = summary['fast']
    print(f'\nfast path: {fast["examples_per_s"]:,.1f} examples/s, {fast["speedup_vs_baseline"]:.2f}x the baseline; '
          f'GLUE, all tasks x 10 runs ({glue_examples / 1e6:.1f}M training examples at length {L}): '
          f'{60 * fast["glue_sweep_train_hours"]:.1f} min of training steps at this rate (evaluation not included)')
    if args.compile: print(f'  compile: {"compiled" if runners[1].compiled else "FAILED, ran eagerly"}')
    if args.profile: print(profile_steps(runners[1], args.steps, device))
    return {'command': 'python -m electra.tools.bench ' + ' '.join(args.argv), 'env': environment(device),
            'config': {'preset': args.preset, 'batch_size': B, 'max_length': L, 'compile': args.compile,
                       'precision': precision, 'precision_reason': args.precision_reason,
                       'warmup': args.warmup, 'rounds': args.rounds, 'steps_per_round': args.steps},
            'flops': fl, 'peak_tflops': peak, 'results': summary}


# ---------------------------------------------------------------- CLI

def parse_args(argv=None):
    p = argparse.ArgumentParser(prog='python -m electra.tools.bench', description=__doc__.split('\n\n')[0])
    p.add_argument('what', choices=['pretrain', 'finetune'])
    p.add_argument('--preset', default='small', help='model preset in configs/pretrain (small, small++, base, large, demo)')
    p.add_argument('--batch_size', type=int, default=None, help='default: the preset\'s (pretrain), 32 (finetune)')
    p.add_argument('--max_length', type=int, default=None, help='default: the preset\'s (pretrain), 128 (finetune)')
    p.add_argument('--vocab_size', type=int, default=30522, help='tokenizer vocabulary (BERT uncased: 30522)')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--precision', default='auto', help='fast path precision: fp32, bf16, fp16 or auto, the fastest the '
                   'device does natively: bf16 on GPUs that have it (else fp16) and on CPUs with AVX512-BF16/AMX, '
                   'else fp32 (the baseline is always fp32)')
    p.add_argument('--compile', action='store_true', help='torch.compile the fast path (the `compile` config key)')
    p.add_argument('--compile_mode', default=None, help="torch.compile mode, e.g. 'max-autotune' (default: the default mode)")
    p.add_argument('--pad_vocab_multiple', type=int, default=None, help='default: 64 on GPU, 0 on CPU')
    p.add_argument('--steps', type=int, default=None, help='timed steps per round (default: 50 on GPU; on CPU 1 '
                   'pretraining, 3 fine-tuning)')
    p.add_argument('--warmup', type=int, default=None, help='untimed steps first (default: 20 on GPU, 1 on CPU)')
    p.add_argument('--rounds', type=int, default=None, help='interleaved rounds (default: 5)')
    p.add_argument('--n_batches', type=int, default=4, help='distinct synthetic batches, cycled')
    p.add_argument('--ablations', action='store_true', help='also time the in-between steps (per-item breakdown)')
    p.add_argument('--variants', default=None, help='with --ablations: only these in-between steps, comma-separated '
                   '(+masked_head, +fused_adam, +no_sync, +bf16, learner_fp32, learner_eager, learner_compiled)')
    p.add_argument('--check_sync', action='store_true', help='count host synchronisations in the real step')
    p.add_argument('--profile', action='store_true', help='after timing, print torch.profiler\'s top ops of the fast step')
    p.add_argument('--peak_tflops', type=float, default=None, help='peak FLOP/s for MFU (default: known GPUs only)')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s)')
    p.add_argument('--json', default=None, help='also write the results to this JSON file')
    args = p.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    gpu = args.device.startswith('cuda')
    if args.what == 'finetune':
        args.batch_size = args.batch_size or 32
        args.max_length = args.max_length or 128
    cpu_steps = 3 if args.what == 'finetune' else 1
    for key, on_gpu, on_cpu in [('steps', 50, cpu_steps), ('warmup', 20, 1), ('rounds', 5, 5), ('pad_vocab_multiple', 64, 0)]:
        if getattr(args, key) is None: setattr(args, key, on_gpu if gpu else on_cpu)
    args.precision_reason = 'as asked (--precision)'
    if args.precision == 'auto':
        if gpu: args.precision_reason = 'auto: the GPU\'s tensor-core precision'
        elif cpu_bf16_supported():
            args.precision, args.precision_reason = 'bf16', 'auto: this CPU multiplies bf16 natively (AVX512-BF16/AMX)'
        else: args.precision_reason = 'auto: this CPU has no native bf16, so fp32'
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads: torch.set_num_threads(args.threads)
    warnings.filterwarnings('ignore', message='.*torch.jit.script.*')
    out = bench_pretrain(args) if args.what == 'pretrain' else bench_finetune(args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
        print(f'results written to {args.json}')
    return out


if __name__ == '__main__':
    main()
