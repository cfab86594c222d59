"""Model FLOPs of the training steps, counted from the shapes, and the peak FLOP/s that MFU is quoted against."""
from __future__ import annotations

import torch

from electra.config.pretrain import PretrainConfig

__all__ = ['encoder_flops', 'pretrain_flops', 'finetune_flops', 'device_peak_tflops', 'PEAK_TFLOPS', 'GLUE_TRAIN']

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), matched against torch.cuda.get_device_name(). MFU is quoted
# against this peak whatever the step's precision, as is usual.
PEAK_TFLOPS = [('H200', 989.0), ('H100', 989.0), ('H800', 989.0), ('GH200', 989.0), ('A100', 312.0), ('A800', 312.0),
               ('L40S', 362.0), ('L4', 121.0), ('A10', 125.0), ('V100', 125.0)]

# GLUE training set sizes (official splits) and the official epochs: 3, or 10 for RTE and STS-B; MRPC and STS-B are
# doubled by `double_unordered`. Used to turn examples/s into the time of a 10-run sweep over all tasks.
GLUE_TRAIN = {'cola': (8551, 3), 'sst2': (67349, 3), 'mrpc': (2 * 3668, 3), 'stsb': (2 * 5749, 10),
              'qqp': (363846, 3), 'mnli': (392702, 3), 'qnli': (104743, 3), 'rte': (2490, 10), 'wnli': (635, 3)}



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


