"""Speed helpers of the training step: `torch.compile` with a clean fallback, non-blocking host-to-device
batches, and a detector of device-to-host synchronisation.

None of these changes what is computed: a compiled step computes the same loss (up to float rounding and its own
dropout random stream), a prefetched batch is the same batch, and the detector only watches.
"""
from __future__ import annotations

import warnings
from collections import Counter
from typing import Callable, Iterable

import torch
from fastai.data.core import DataLoaders
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from electra.config.errors import RunWarning

__all__ = ['try_compile', 'compile_failure', 'uncompile', 'DevicePrefetcher', 'DeviceDataLoaders', 'HostSyncCounter', 'SYNC_OPS']


def uncompile(*modules: nn.Module) -> None:
    "Undo `nn.Module.compile()`: the modules run eagerly again."
    for m in modules: m._compiled_call_impl = None


def try_compile(modules: Iterable[nn.Module], trial: Callable[[], None], backend: str | Callable = 'inductor',
                mode: str | None = None, what: str = 'the model') -> bool:
    """Compile `modules` in place (`nn.Module.compile`: parameter names and `state_dict` keys do not change) and run
    `trial()`, a forward and backward pass that triggers the compilation. If anything fails, the modules go back to
    eager mode, a one-line warning says why, and False is returned: training goes on, only slower."""
    modules = list(modules)
    kwargs = {'dynamic': False} if mode is None else {'dynamic': False, 'mode': mode}  # batches have static shapes
    try:
        for m in modules: m.compile(backend=backend, **kwargs)
        trial()
        return True
    except Exception as e:  # any compiler failure (no C++ compiler, unsupported op, backend error) falls back
        uncompile(*modules)
        warnings.warn(f'compile: torch.compile of {what} failed ({compile_failure(e)}); running eagerly.',
                      RunWarning, stacklevel=2)
        return False


def compile_failure(e: Exception) -> str:
    "'Type: first line' of the compiler's own error inside the exception `torch.compile` raised."
    root = e
    while root.__cause__ is not None or getattr(root, 'inner_exception', None) is not None:
        root = getattr(root, 'inner_exception', None) or root.__cause__
    return f"{type(root).__name__}: {(str(root).strip().splitlines() or [''])[0][:200]}"


def _to_device(b, device: torch.device):
    if isinstance(b, torch.Tensor):
        if device.type == 'cuda' and not b.is_pinned(): b = b.pin_memory()
        return b.to(device, non_blocking=True)
    if isinstance(b, (list, tuple)): return type(b)(_to_device(o, device) for o in b)
    if isinstance(b, dict): return {k: _to_device(v, device) for k, v in b.items()}
    return b


class DevicePrefetcher:
    """Wraps a loader of CPU batches: yields them on `device`, copied with `non_blocking=True` from pinned memory one
    batch ahead, so the copy of batch i + 1 overlaps step i and the host never waits for it (a blocking copy, as
    fastai's own `to_device` makes, waits for the device on every step). On CPU it yields the batches unchanged."""

    def __init__(self, loader, device: torch.device | str):
        self.loader, self.device = loader, torch.device(device)

    def __len__(self) -> int: return len(self.loader)

    def __getattr__(self, name):  # `dataset`, `batch_size`, ... of the wrapped loader
        if name == 'loader': raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self):
        if self.device.type == 'cpu':
            yield from self.loader
            return
        it = iter(self.loader)
        try: nxt = _to_device(next(it), self.device)
        except StopIteration: return
        for b in it:
            cur, nxt = nxt, _to_device(b, self.device)
            yield cur
        yield nxt


# Ops that make the host wait for the device when their inputs live on an accelerator: reading a value (`.item()`,
# `bool(t)`, `if t:`), and ops whose output size depends on the data (`nonzero`, boolean-mask indexing, ...).
SYNC_OPS = {'aten::_local_scalar_dense', 'aten::nonzero', 'aten::nonzero_static', 'aten::masked_select',
            'aten::masked_scatter_', 'aten::unique', 'aten::_unique', 'aten::_unique2', 'aten::unique_consecutive',
            'aten::unique_dim', 'aten::equal', 'aten::is_nonzero', 'aten::repeat_interleave'}


class HostSyncCounter(TorchDispatchMode):
    """Counts the ops run inside it that synchronise the host with the device (see `SYNC_OPS`; indexing with a boolean
    mask counts too). It works on any device, so a CPU run shows which ops WOULD stall a GPU. Not seen: `.cpu()`,
    `.tolist()` and `.numpy()` of CPU tensors, which do not dispatch. `counts` maps op names to calls."""

    def __init__(self):
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        if name in SYNC_OPS and not (name == 'aten::repeat_interleave' and (kwargs or {}).get('output_size')):
            self.counts[name] += 1
        elif name in ('aten::index', 'aten::index_put_', 'aten::index_put', '_index_put_impl_'):
            indices = args[1] if len(args) > 1 else ()
            if any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ()):
                self.counts[f'{name} (boolean mask)'] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int: return sum(self.counts.values())


class DeviceDataLoaders(DataLoaders):
    "fastai `DataLoaders` over plain torch loaders (which have no `.to`): the Learner moves each batch to `device`."

    def __init__(self, *loaders, device: torch.device, n_inp: int):
        super().__init__(*loaders)
        self._device = torch.device(device)
        self.n_inp = n_inp  # how many leading batch items are inputs (fastai's split into xb and yb)
