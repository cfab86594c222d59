"""The inputs and the baseline that the tests and the benchmark (`python -m benchmarks.bench`) share: synthetic batches
shaped like the official example builder's, a tokenizer stand-in, the plain objective of the HF classes with a
Python-loop Adam, and the check that it and the project's step compute the same loss. It lives where the tests live;
the benchmark imports it from here."""
from __future__ import annotations

import copy

import torch
from torch import nn

from electra.config.pretrain import PretrainConfig
from electra.objective.loss import ElectraLoss
from electra.objective.masking import MaskingSettings, mask_tokens
from electra.objective.model import build_pretraining_model
from electra.training.optim import no_decay_param

__all__ = ['BERT_IDS', 'BenchTokenizer', 'synthetic_batches', 'Batches', 'LoopAdam', 'unique_named_parameters',
           'baseline_pretrain_loss', 'fast_pretrain_loss', 'padded_like', 'loss_check', 'masked_batch']

BERT_IDS = dict(pad=0, unk=100, cls=101, sep=102, mask=103)  # the uncased BERT/ELECTRA vocabulary (30522 tokens)


def bert_ids(vocab: int) -> MaskingSettings:
    "What `build_pretraining_model` reads of a tokenizer with BERT's special ids and `vocab` tokens."
    return MaskingSettings((BERT_IDS['cls'], BERT_IDS['sep'], BERT_IDS['mask'], BERT_IDS['pad']), BERT_IDS['pad'],
                           BERT_IDS['mask'], vocab)


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

def masked_batch(cfg: PretrainConfig, ids: torch.Tensor, vocab: int, rng: torch.Generator):
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
    "The project's step: `ElectraGeneratorDiscriminator` (masked-only head) and `ElectraLoss`. Returns (total, gen, disc)."
    ids, positions, labels = masked
    loss = loss_func(model(ids, token_type_ids, positions, labels), labels)
    return (loss, *loss_func.last)



def padded_like(model, cfg: PretrainConfig, vocab: int):
    "A model of `cfg` (padded vocabulary) holding `model`'s weights (unpadded); padding rows keep their fresh init."
    out = build_pretraining_model(cfg, bert_ids(vocab))
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
    m = masked_batch(cfg, ids, model.vocab_size, torch.Generator(device=device).manual_seed(seed))
    out = {}
    for name in ('fast', 'baseline'):
        torch.manual_seed(seed)
        rng = torch.Generator(device=device).manual_seed(seed + 1)
        with torch.no_grad():
            if name == 'fast':
                model.rng = rng
                loss_func = ElectraLoss(cfg.gen_loss_weight, cfg.disc_loss_weight, cfg.objective)
                losses = fast_pretrain_loss(model, loss_func, m, types)
            else:
                losses = baseline_pretrain_loss(model.generator, model.discriminator, cfg, m, types, rng)
            out[name] = [float(x) for x in losses]
    out['abs_diff'] = abs(out['fast'][0] - out['baseline'][0])
    return out

