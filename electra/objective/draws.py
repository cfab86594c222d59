"""Where the step's random numbers come from (the config key `random_draws`): masking's and the sampling noise's.

'generator': the run's seeded torch.Generator, drawn in turn (`torch.rand`, `torch.randint`), its state saved in each
checkpoint. A generator cannot run inside a compiled graph, so the masking runs outside it and the Gumbel noise [B, P, V]
is drawn beforehand and copied in. 'counter' (`CounterDraws`): each draw a pure function of (seed, step, stream, part,
element index), computed by integer hashing in plain tensor ops. It needs no state: a step's draws follow from the seed
and the step number, so a run is reproducible from its seed and resumes bit for bit from the step alone, and it traces
into a compiled graph (the step a 0-d tensor there, read where it is), with the same bits on the CPU and the GPU, eager
or compiled (integer arithmetic, never past 2^63, then exact float conversion).

How: the key of a call, 64 bits, is Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC 2011; the generator of torch's CUDA streams) of the counter (step, stream, part) under the seed; element
i's 32 bits are two rounds of a 32-bit integer finalizer (C. Wellons' hash-prospector, [16 21f0aaad 15 735a2d97 15]:
bijective, both multipliers below 2^31) keyed by its two words, x = mix(mix(i ^ k0) ^ k1 ^ (i >> 32)). Philox runs once
per call (on ints, or on 0-d tensors in a graph), the cheap finalizer once per element.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ['STREAMS', 'CounterDraws', 'philox4x32', 'as_draws']

M32 = 0xFFFFFFFF
# what each draw is for: one stream each, so that a draw of one never shifts or repeats another's
STREAMS = {'mask_positions': 1, 'mask_actions': 2, 'mask_tokens': 3, 'sampling_noise': 4}
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)   # Random123's multipliers and Weyl key increments of Philox4x32
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _mulhilo(a, m: int):
    """(high, low) 32-bit words of a * m, for words a (an int or an int64 tensor) and m in [0, 2^32): the product as two
    16-bit halves of m, so that no intermediate passes 2^63 (int64 tensors then hold it exactly, on any device)."""
    t, u = a * (m & 0xFFFF), a * (m >> 16)                     # each < 2^48; a * m = u * 2^16 + t
    return (u + (t >> 16)) >> 16, (((u & 0xFFFF) << 16) + t) & M32


def philox4x32(counter, key, rounds: int = 10) -> tuple:
    """Philox4x32-`rounds` of four 32-bit counter words under two key words (Random123's `philox4x32_R`): each an int or
    an int64 tensor of values in [0, 2^32). Returns the four output words."""
    (c0, c1, c2, c3), (k0, k1) = counter, key
    for r in range(rounds):
        if r: k0, k1 = (k0 + _PHILOX_W[0]) & M32, (k1 + _PHILOX_W[1]) & M32
        hi0, lo0 = _mulhilo(c0, _PHILOX_M[0])
        hi1, lo1 = _mulhilo(c2, _PHILOX_M[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def _mix(x: torch.Tensor) -> torch.Tensor:
    "hash-prospector's 32-bit finalizer of words `x` in [0, 2^32) (int64): a bijection; the products stay below 2^63."
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & M32
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & M32
    return x ^ (x >> 15)


@dataclass(frozen=True)
class CounterDraws:
    """The draws of one step of one process: U(0, 1) and integers as pure functions of (`seed`, `step`, stream, `part`,
    element index). `seed`: this process's (`rank_seed`: each torchrun rank its own); `step`: the steps taken, an int, or
    a 0-d int64 tensor filled in place in a compiled step (so it compiles once); `part`: the micro-batch."""
    seed: int
    step: int | torch.Tensor
    part: int = 0

    def bits(self, shape, device, stream: int) -> torch.Tensor:
        "32-bit words [shape] (int64) of `stream`, element i of the flattened shape hashed from i."
        k0, k1, _, _ = philox4x32((self.step & M32, self.step >> 32, stream, self.part), (self.seed & M32, self.seed >> 32))
        i = torch.arange(math.prod(shape), device=device).view(shape)
        return _mix(_mix((i & M32) ^ k0) ^ k1 ^ (i >> 32))

    def uniform(self, shape, device, stream: int) -> torch.Tensor:
        """float32 U(0, 1) [shape]: (k + 1/2) / 2^23 for 23 of the bits, k < 2^23 (exact in float32), so never 0 or 1:
        the resolution of TensorFlow's float32 uniform, which the official code draws."""
        return ((self.bits(shape, device, stream) >> 9).float() + 0.5) * 2.0 ** -23

    def integers(self, high: int, shape, device, stream: int) -> torch.Tensor:
        "int64 in [0, `high`) [shape]: the 32 bits modulo `high` (a bias of at most high / 2^32)."
        return self.bits(shape, device, stream) % high


@dataclass(frozen=True)
class GeneratorDraws:
    "The draws of a torch.Generator (None: torch's global one), in the order they are asked for; `stream` unused."
    generator: torch.Generator | None

    def uniform(self, shape, device, stream: int) -> torch.Tensor:
        return torch.rand(shape, device=device, generator=self.generator)

    def integers(self, high: int, shape, device, stream: int) -> torch.Tensor:
        return torch.randint(high, shape, device=device, generator=self.generator)


def as_draws(source):
    """A random source as an object with `uniform` and `integers`: a torch.Generator (or None) wrapped, counter draws
    (or any object with those two methods) as they are."""
    return source if hasattr(source, 'uniform') else GeneratorDraws(source)
