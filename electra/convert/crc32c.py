"""CRC-32C (Castagnoli), the checksum of TensorFlow's tensor bundles and table blocks; `zlib` only has CRC-32.

A byte loop in Python runs at about 1 MB/s, too slow for a 400 MB checkpoint, so long inputs are cut into many
equal lanes whose CRCs numpy computes side by side (4 bytes a step, slicing-by-4 tables), then joined with the
linear "feed m zero bytes" operator: crc(A || B) = shift_|B|(crc(A)) ^ crc(B) for the raw register.
"""
from __future__ import annotations

import numpy as np

__all__ = ['crc32c', 'masked_crc32c', 'unmask_crc32c']

_POLY = 0x82F63B78  # the Castagnoli polynomial, bit-reversed
_MASK_DELTA = 0xA282EAD8  # LevelDB / TF `crc32c::Mask`: rotate right by 15 bits, add this constant
_SMALL = 1 << 15  # below this many bytes the plain loop is quicker than setting up the lanes


def _byte_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8): c = (c >> 1) ^ (_POLY if c & 1 else 0)
        table.append(c)
    return table


_T0 = _byte_table()
# slicing-by-4: _TABLES[k][b] = the register after byte b followed by k zero bytes
_TABLES = [np.array(_T0, dtype=np.uint32)]
for _ in range(3):
    prev = _TABLES[-1]
    _TABLES.append((prev >> np.uint32(8)) ^ _TABLES[0][prev & np.uint32(0xFF)])


def _raw_update(reg: int, data: bytes | memoryview) -> int:
    "The register after `data`, without the initial and final inversion."
    t = _T0
    for b in bytes(data): reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg


def _apply(cols: list[int], v: int) -> int:
    "A GF(2) 32x32 matrix given by its columns (the images of 1 << j) applied to `v`."
    out, j = 0, 0
    while v:
        if v & 1: out ^= cols[j]
        v >>= 1; j += 1
    return out


def _zeros_operator(n: int) -> list[int]:
    "Columns of the linear map 'feed n zero bytes' on the raw register (square-and-multiply on 1 zero byte)."
    step = [_T0[(1 << j) & 0xFF] ^ ((1 << j) >> 8) for j in range(32)]
    result = [1 << j for j in range(32)]  # identity
    while n:
        if n & 1: result = [_apply(step, c) for c in result]
        step = [_apply(step, c) for c in step]
        n >>= 1
    return result


def _lanes_raw(words: np.ndarray) -> np.ndarray:
    "Raw CRCs (register starting at 0) of each row of `words` [K, q] (little-endian uint32), computed column by column."
    t0, t1, t2, t3 = _TABLES
    cols = np.ascontiguousarray(words.T)                       # [q, K]: one step reads a contiguous row
    reg = np.zeros(words.shape[0], dtype=np.uint32)
    ff, s8, s16, s24 = np.uint32(0xFF), np.uint32(8), np.uint32(16), np.uint32(24)
    for row in cols:
        reg ^= row
        reg = t3[reg & ff] ^ t2[(reg >> s8) & ff] ^ t1[(reg >> s16) & ff] ^ t0[reg >> s24]
    return reg


def crc32c(data: bytes | bytearray | memoryview | np.ndarray, crc: int = 0) -> int:
    "CRC-32C of `data`, continuing from `crc` (the CRC of what came before), as `crc32c::Extend`."
    buf = memoryview(data).cast('B') if not isinstance(data, np.ndarray) else memoryview(data.reshape(-1).view(np.uint8))
    reg, n = crc ^ 0xFFFFFFFF, len(buf)
    if n < _SMALL: return _raw_update(reg, buf) ^ 0xFFFFFFFF
    lanes = max(256, int(4 * n ** 0.5)) // 4 * 4
    width = n // lanes // 4 * 4                                # bytes per lane, a whole number of words
    words = np.frombuffer(buf[:lanes * width], dtype='<u4').reshape(lanes, width // 4)
    shift = _zeros_operator(width)
    # the operator as 4 byte tables, so joining the K lane CRCs costs 4 look-ups each
    tables = [[_apply(shift, b << (8 * k)) for b in range(256)] for k in range(4)]
    z0, z1, z2, z3 = tables
    for c in _lanes_raw(words).tolist():
        reg = z0[reg & 0xFF] ^ z1[(reg >> 8) & 0xFF] ^ z2[(reg >> 16) & 0xFF] ^ z3[reg >> 24] ^ c
    return _raw_update(reg, buf[lanes * width:]) ^ 0xFFFFFFFF


def masked_crc32c(data, crc: int = 0) -> int:
    "The masked CRC TF stores (`crc32c::Mask`): a CRC of data that holds CRCs is itself a poor checksum."
    c = crc32c(data, crc)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc32c(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF
