"""A minimal writer of TensorFlow's tensor-bundle checkpoints, written from the format's description (LevelDB table
format; tensor_bundle.proto), independent of the reader under test: `write_bundle(prefix, tensors)`."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from electra.convert.crc32c import masked_crc32c

MAGIC = 0xDB4775248B80FB57
DTYPE_CODES = {np.dtype('float32'): 1, np.dtype('float64'): 2, np.dtype('int32'): 3, np.dtype('int64'): 9,
               np.dtype('float16'): 19}
BFLOAT16, STRING = 14, 7


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative ints go as 64-bit two's complement
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n: return bytes(out)


def field(number: int, value) -> bytes:
    "A varint field for an int, a length-delimited one for bytes."
    if isinstance(value, int): return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def fixed32_field(number: int, value: int) -> bytes:
    return varint(number << 3 | 5) + struct.pack('<I', value)


def entry_proto(dtype: int, shape, offset: int, size: int, crc: int, shard: int = 0) -> bytes:
    dims = b''.join(field(2, field(1, d)) for d in shape)
    out = field(1, dtype) + field(2, dims)
    if shard: out += field(3, shard)
    if offset: out += field(4, offset)  # proto3 leaves zero values out
    return out + field(5, size) + fixed32_field(6, crc)


def header_proto(num_shards: int = 1) -> bytes:
    return field(1, num_shards) + field(3, field(1, 1))  # version { producer: 1 }


def block(items: list[tuple[bytes, bytes]], restart_interval: int = 4) -> bytes:
    "A table block: prefix-compressed entries, a full key every `restart_interval` entries, the restart array."
    out, restarts, prev = bytearray(), [], b''
    for i, (key, value) in enumerate(items):
        shared = 0
        if i % restart_interval == 0: restarts.append(len(out))
        else:
            while shared < min(len(key), len(prev)) and key[shared] == prev[shared]: shared += 1
        out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        prev = key
    restarts = restarts or [0]
    return bytes(out) + b''.join(struct.pack('<I', r) for r in restarts) + struct.pack('<I', len(restarts))


def handle(offset: int, size: int) -> bytes:
    return varint(offset) + varint(size)


def write_table(path: Path, items: list[tuple[bytes, bytes]], per_block: int = 0, compression: int = 0) -> None:
    "An SSTable of sorted `items`: data blocks of `per_block` entries (0: one block), metaindex, index, footer."
    items = sorted(items)
    groups = [items[i:i + per_block] for i in range(0, len(items), per_block)] if per_block else [items]
    data, index = bytearray(), []

    def put(contents: bytes) -> bytes:
        offset = len(data)
        trailer = bytes([compression])
        data.extend(contents + trailer + struct.pack('<I', masked_crc32c(contents + trailer)))
        return handle(offset, len(contents))

    for group in groups: index.append((group[-1][0], put(block(group))))
    metaindex = put(block([]))
    index_handle = put(block(index, restart_interval=1))
    footer = metaindex + index_handle
    data.extend(footer + b'\0' * (40 - len(footer)) + struct.pack('<Q', MAGIC))
    Path(path).write_bytes(bytes(data))


def write_bundle(prefix: str | Path, tensors: dict[str, np.ndarray], bfloat16: tuple[str, ...] = (),
                 strings: tuple[str, ...] = (), per_block: int = 0, checkpoint_file: bool = True) -> Path:
    """`prefix.index` and `prefix.data-00000-of-00001` holding `tensors` (names in `bfloat16` stored as bfloat16,
    i.e. the top 16 bits of their float32; names in `strings` as string tensors of placeholder bytes), and a
    `checkpoint` file naming the prefix."""
    prefix = Path(prefix)
    data, items = bytearray(), [(b'', header_proto())]
    for name, array in tensors.items():
        if name in strings: raw, dtype = b'\x03abc', STRING
        elif name in bfloat16:
            raw, dtype = (np.asarray(array, np.float32).view(np.uint32) >> 16).astype('<u2').tobytes(), BFLOAT16
        else:
            raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder('<')).tobytes()
            dtype = DTYPE_CODES[array.dtype]
        items.append((name.encode(), entry_proto(dtype, np.shape(array), len(data), len(raw), masked_crc32c(raw))))
        data += raw
    Path(f'{prefix}.data-00000-of-00001').write_bytes(bytes(data))
    write_table(Path(f'{prefix}.index'), items, per_block)
    if checkpoint_file:
        (prefix.parent / 'checkpoint').write_text(f'model_checkpoint_path: "{prefix.name}"\n'
                                                  f'all_model_checkpoint_paths: "{prefix.name}"\n')
    return prefix
