"""Where a job runs and in which precision: the same rules for pretraining and fine-tuning."""
from __future__ import annotations

import torch

from electra.config.base import ConfigError
from electra.training.distributed import world

__all__ = ['AUTOCAST_DTYPES', 'cpu_bf16_supported', 'resolve_device', 'resolve_precision']

AUTOCAST_DTYPES = {'fp32': None, 'bf16': torch.bfloat16, 'fp16': torch.float16}  # precision -> autocast dtype


def cpu_bf16_supported() -> bool:
    "True when this CPU multiplies bf16 natively (AVX512-BF16 or AMX), so bf16 autocast speeds CPU training up."
    try: return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError): return False


def resolve_device(name: str) -> torch.device:
    """The torch device of `device`: auto (a GPU when there is one), cpu, cuda or cuda:N; checked. Under torchrun,
    'auto' and 'cuda' mean this process's own GPU, cuda:LOCAL_RANK."""
    if name == 'auto': name = 'cuda' if torch.cuda.is_available() else 'cpu'
    try: device = torch.device(name)
    except RuntimeError: raise ConfigError(f"device: '{name}' is not a device; use auto, cpu, cuda or cuda:N.") from None
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ConfigError(f"device: '{name}' asked for, but no CUDA GPU is visible. Use --device cpu.")
    w = world()
    if device.type == 'cuda' and device.index is None and w.size > 1:
        if w.local_rank >= torch.cuda.device_count():
            raise ConfigError(f"device: process {w.local_rank} of this machine has no GPU of its own "
                              f"({torch.cuda.device_count()} visible): start at most that many with --nproc_per_node.")
        device = torch.device('cuda', w.local_rank)
    return device


def resolve_precision(name: str, device: torch.device) -> str:
    """'auto' is bf16 on GPUs that support it, fp16 on older GPUs, fp32 on CPU. bf16 may also be asked for on a CPU
    with native bf16 matmuls (AVX512-BF16 / AMX)."""
    if device.type != 'cuda':
        if name == 'bf16' and cpu_bf16_supported(): return 'bf16'
        if name in ('bf16', 'fp16'):
            where = 'a GPU' if name == 'fp16' else 'a GPU or a CPU with native bf16 (AVX512-BF16, AMX)'
            raise ConfigError(f"precision: {name} mixed precision needs {where}; use fp32 on this CPU.")
        return 'fp32'
    if name == 'auto': return 'bf16' if torch.cuda.is_bf16_supported() else 'fp16'
    return name
