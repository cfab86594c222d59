"""benchmarks/bench/flops.py: the FLOP formula, by hand and by torch's FLOP counter."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from electra.objective.model import build_pretraining_model
from benchmarks.bench import flops
from tests.support.tiny import tiny_cfg, token_ids

pytestmark = pytest.mark.usefixtures('one_thread')


def test_flop_formula_matches_hand_count_and_flop_counter():
    cfg = tiny_cfg(dropout=0.0)  # disc H 32, F 64, E 24, 2 layers; generator H 16, F 4 x 16, 1 head
    B, L, P = 2, 8, 3
    fl = flops.pretrain_flops(cfg, B, L, 97, P)
    T = B * L
    disc = 2 * T * 24 * 32 + 2 * (2 * T * 32 * 96 + 2 * T * 32 * 32 + 2 * 2 * B * L * L * 32 + 2 * 2 * T * 32 * 64)
    gen = 2 * T * 24 * 16 + 2 * (2 * T * 16 * 48 + 2 * T * 16 * 16 + 2 * 2 * B * L * L * 16 + 2 * 2 * T * 16 * 64)
    assert (disc, gen) == (581632, 225280)
    assert fl['discriminator_encoder'] == disc and fl['generator_encoder'] == gen
    assert fl['generator_head'] == 2 * B * P * 16 * 24 + 2 * B * P * 24 * 97
    assert fl['discriminator_head'] == 2 * T * 32 * 32 + 2 * T * 32
    assert fl['train_step'] == 3 * fl['forward'] == 3 * (disc + gen + fl['generator_head'] + fl['discriminator_head'])
    # torch's own FLOP counter over the model's forward (masked-only head at P positions) gives the same total. It is
    # a second opinion only where it sees every matmul: with eager attention (explicit Q K^T and P V matmuls); some
    # torch versions do not count fused SDPA kernels on the CPU.
    model = build_pretraining_model(cfg, token_ids(97))
    for net in (model.generator, model.discriminator): net.set_attn_implementation('eager')
    model.rng = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 97, (B, L), generator=torch.Generator().manual_seed(0))
    positions = torch.tensor([[1, 2, 3], [4, 5, 6]])
    labels = ids.gather(1, positions)
    with FlopCounterMode(display=False) as counter:
        model(ids, torch.zeros_like(ids), positions, labels)
    assert counter.get_total_flops() == fl['forward']
    assert flops.pretrain_flops(cfg, B, L, 97, L)['generator_head'] == 2 * T * 16 * 24 + 2 * T * 24 * 97
    ft = flops.finetune_flops(cfg, B, L, 3)
    assert ft['forward'] == disc + 2 * B * 32 * 3 and ft['train_step'] == 3 * ft['forward']
