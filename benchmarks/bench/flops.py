"""Model FLOPs of the training steps, counted from the shapes, and the peak FLOP/s that MFU is quoted against."""
from __future__ import annotations

import torch

from electra.config.pretrain import PretrainConfig
from electra.objective.flops import encoder_flops, pretrain_flops

__all__ = ['encoder_flops', 'pretrain_flops', 'finetune_flops', 'device_peak_tflops', 'PEAK_TFLOPS', 'GLUE_TRAIN']

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), matched against torch.cuda.get_device_name(). MFU is quoted
# against this peak whatever the step's precision, as is usual.
PEAK_TFLOPS = [('H200', 989.0), ('H100', 989.0), ('H800', 989.0), ('GH200', 989.0), ('A100', 312.0), ('A800', 312.0),
               ('L40S', 362.0), ('L4', 121.0), ('A10', 125.0), ('V100', 125.0)]

# GLUE training set sizes (official splits) and the official epochs: 3, or 10 for RTE and STS-B; MRPC and STS-B are
# doubled by `double_unordered`. Used to turn examples/s into the time of a 10-run sweep over all tasks.
GLUE_TRAIN = {'cola': (8551, 3), 'sst2': (67349, 3), 'mrpc': (2 * 3668, 3), 'stsb': (2 * 5749, 10),
              'qqp': (363846, 3), 'mnli': (392702, 3), 'qnli': (104743, 3), 'rte': (2490, 10), 'wnli': (635, 3)}


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


