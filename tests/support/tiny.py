"""A tiny pretraining config and model (BERT's special ids) and synthetic batches for it."""
import torch

from electra.config.pretrain import PretrainConfig
from electra.objective.masking import MaskingSettings
from electra.objective.model import build_pretraining_model
from tests.support import baseline

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, embedding_size=24,
            generator_size=0.5, batch_size=4, max_length=16, checkpoint_at=[], steps=1000, warmup_steps=10)
V = 120  # vocabulary of the tiny tests: BERT's special ids (pad 0, [CLS] 101, [SEP] 102, [MASK] 103), words 104..119


def tiny_cfg(**kw) -> PretrainConfig:
    return PretrainConfig(**{**TINY, **kw})


def tiny_model(cfg, vocab=V):
    torch.manual_seed(0)
    return build_pretraining_model(cfg, token_ids(vocab))


def batches(cfg, n=2):
    return baseline.synthetic_batches(n, cfg.batch_size, cfg.max_length, V, seed=3)


def token_ids(vocab: int = V, pad: int = 0, mask: int | None = None, special: tuple[int, ...] = ()) -> MaskingSettings:
    """What `build_pretraining_model` reads of a tokenizer: its size, its [PAD] and [MASK] ids, the ids masking never
    chooses (by default [PAD] alone)."""
    return MaskingSettings(special or (pad,), pad, mask, vocab)
