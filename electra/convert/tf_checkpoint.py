"""Read a TensorFlow (1.x, name-based) checkpoint without TensorFlow: the "tensor bundle" format of
`tf.train.Saver` (tensorflow/core/util/tensor_bundle/tensor_bundle.{h,cc}).

A checkpoint `PREFIX` is `PREFIX.index` plus `PREFIX.data-<shard>-of-<n>` files:

- `PREFIX.index` is an SSTable (LevelDB's table format, tensorflow/core/lib/io/table_format.txt): data blocks of
  sorted key/value entries (keys prefix-compressed against the previous key, restarting in full every few entries),
  a metaindex block, an index block whose values are the data blocks' handles, and a 48-byte footer ending with
  the magic number. Each block is followed by a 1-byte compression type and the masked CRC-32C of block + type.
- The entry with the empty key is a `BundleHeaderProto` (number of shards, endianness); every other key is a
  variable name whose value is a `BundleEntryProto` (dtype, shape, shard_id, offset, size, masked crc32c).
- A tensor is `size` raw bytes at `offset` in `PREFIX.data-<shard_id:05d>-of-<num_shards:05d>`.

The protobufs are decoded with the small wire-format reader below (no protobuf package needed).
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from electra.config.errors import ConfigError, did_you_mean
from electra.convert.crc32c import crc32c, masked_crc32c, unmask_crc32c

__all__ = ['CheckpointFormatError', 'TensorEntry', 'TFCheckpoint', 'resolve_prefix', 'list_variables',
           'read_variable']

TABLE_MAGIC = 0xDB4775248B80FB57  # tensorflow/core/lib/io/format.h kTableMagicNumber (LevelDB's)
FOOTER_SIZE = 48                  # 2 block handles padded to 20 bytes each + the 8-byte magic
BLOCK_TRAILER = 5                 # 1 byte compression type + 4 bytes masked crc32c
NO_COMPRESSION, SNAPPY = 0, 1

# tensorflow/core/framework/types.proto DataType -> (name, numpy little-endian dtype); bfloat16 is read as its
# 16 bits and widened to float32 (numpy has no bfloat16).
DTYPES = {1: ('float32', '<f4'), 2: ('float64', '<f8'), 3: ('int32', '<i4'), 4: ('uint8', 'u1'), 5: ('int16', '<i2'),
          6: ('int8', 'i1'), 7: ('string', None), 9: ('int64', '<i8'), 10: ('bool', '?'), 14: ('bfloat16', '<u2'),
          19: ('float16', '<f2')}
STRING = 7


class CheckpointFormatError(ConfigError):
    "A checkpoint file that is missing, truncated, corrupt or in a form this reader does not handle."


# --- protobuf wire format -----------------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    "A base-128 varint at `pos`: (value, position after it)."
    value = shift = 0
    while True:
        if pos >= len(buf): raise CheckpointFormatError(f"{where}: truncated varint")
        b = buf[pos]; pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80: return value, pos
        shift += 7
        if shift > 63: raise CheckpointFormatError(f"{where}: varint longer than 10 bytes")


def proto_fields(buf: bytes, where: str):
    """The fields of a serialized protobuf message: (field number, value) pairs, in order. A varint or fixed field
    gives an int, a length-delimited one (string, bytes, sub-message, packed repeated) its bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos, where)
        number, wire = key >> 3, key & 7
        if wire == 0: value, pos = _varint(buf, pos, where)
        elif wire == 1: value, pos = int.from_bytes(buf[pos:pos + 8], 'little'), pos + 8
        elif wire == 5: value, pos = int.from_bytes(buf[pos:pos + 4], 'little'), pos + 4
        elif wire == 2:
            n, pos = _varint(buf, pos, where)
            value, pos = bytes(buf[pos:pos + n]), pos + n
        else: raise CheckpointFormatError(f"{where}: unsupported protobuf wire type {wire} (field {number})")
        if pos > len(buf): raise CheckpointFormatError(f"{where}: protobuf field {number} runs past the end")
        yield number, value


def _signed(v: int) -> int:
    "An int32/int64 field read as a varint: negative values are sent as 64-bit two's complement."
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass(frozen=True)
class TensorEntry:
    "One variable's `BundleEntryProto`."
    name: str
    dtype: int          # TF DataType enum
    shape: tuple[int, ...]
    shard_id: int = 0
    offset: int = 0
    size: int = 0
    crc32c: int = 0     # masked, as stored
    sliced: bool = False  # a partitioned variable: its data lives in slice entries

    @property
    def dtype_name(self) -> str:
        return DTYPES.get(self.dtype, (f'DataType {self.dtype}', None))[0]


def _parse_shape(buf: bytes, where: str) -> tuple[int, ...]:
    "TensorShapeProto: repeated Dim dim = 2 (Dim: int64 size = 1), bool unknown_rank = 3."
    dims = []
    for number, value in proto_fields(buf, where):
        if number == 2: dims.append(_signed(dict(proto_fields(value, where)).get(1, 0)))
        elif number == 3 and value: raise CheckpointFormatError(f"{where}: a tensor of unknown rank")
    return tuple(dims)


def parse_entry(name: str, buf: bytes, where: str) -> TensorEntry:
    "BundleEntryProto: dtype = 1, shape = 2, shard_id = 3, offset = 4, size = 5, fixed32 crc32c = 6, slices = 7."
    f = {'dtype': 0, 'shape': (), 'shard_id': 0, 'offset': 0, 'size': 0, 'crc32c': 0, 'sliced': False}
    keys = {1: 'dtype', 3: 'shard_id', 4: 'offset', 5: 'size', 6: 'crc32c'}
    for number, value in proto_fields(buf, f"{where}, entry '{name}'"):
        if number in keys: f[keys[number]] = value
        elif number == 2: f['shape'] = _parse_shape(value, f"{where}, entry '{name}'")
        elif number == 7: f['sliced'] = True
    return TensorEntry(name, **f)


def parse_header(buf: bytes, where: str) -> dict:
    "BundleHeaderProto: int32 num_shards = 1, Endianness endianness = 2 (0 little, 1 big), VersionDef version = 3."
    header = {'num_shards': 1, 'endianness': 0}
    for number, value in proto_fields(buf, f"{where}, header"):
        if number == 1: header['num_shards'] = value
        elif number == 2: header['endianness'] = value
    return header


# --- SSTable ------------------------------------------------------------------------------------------------------

def _block_handle(buf: bytes, pos: int, where: str) -> tuple[tuple[int, int], int]:
    "A BlockHandle: varint64 offset, varint64 size (the size without the 5-byte trailer)."
    offset, pos = _varint(buf, pos, where)
    size, pos = _varint(buf, pos, where)
    return (offset, size), pos


def read_footer(data: bytes, where: str) -> tuple[tuple[int, int], tuple[int, int]]:
    "(metaindex handle, index handle) from the last 48 bytes, after checking the magic number."
    if len(data) < FOOTER_SIZE:
        raise CheckpointFormatError(f"{where}: {len(data)} bytes, shorter than a table footer ({FOOTER_SIZE}); the "
                                    "file is truncated or not a checkpoint index")
    footer = data[-FOOTER_SIZE:]
    magic = struct.unpack('<Q', footer[-8:])[0]
    if magic != TABLE_MAGIC:
        raise CheckpointFormatError(f"{where}: bad table magic number {magic:#018x} (expected {TABLE_MAGIC:#018x}); "
                                    "not a TensorFlow checkpoint index, or corrupt")
    metaindex, pos = _block_handle(footer, 0, f"{where} footer")
    index, _ = _block_handle(footer, pos, f"{where} footer")
    return metaindex, index


def read_block(data: bytes, handle: tuple[int, int], where: str) -> bytes:
    "A block's contents, checked against its trailer (compression type, masked crc32c of contents + type)."
    offset, size = handle
    if offset + size + BLOCK_TRAILER > len(data):
        raise CheckpointFormatError(f"{where}: block at {offset} (+{size} bytes) runs past the end of the file "
                                    f"({len(data)} bytes); truncated or corrupt")
    contents, kind = data[offset:offset + size], data[offset + size]
    stored = struct.unpack('<I', data[offset + size + 1:offset + size + 5])[0]
    if masked_crc32c(data[offset:offset + size + 1]) != stored:
        raise CheckpointFormatError(f"{where}: checksum mismatch in the block at byte {offset}; the file is corrupt")
    if kind == SNAPPY:
        raise CheckpointFormatError(f"{where}: block at byte {offset} is snappy-compressed. TensorFlow writes "
                                    "checkpoint indexes uncompressed and this reader does not decompress snappy")
    if kind != NO_COMPRESSION:
        raise CheckpointFormatError(f"{where}: block at byte {offset} has unknown compression type {kind}")
    return contents


def block_entries(block: bytes, where: str):
    """The (key, value) pairs of a block. Entry: varint shared, varint non_shared, varint value_length, then the key's
    last `non_shared` bytes (the first `shared` come from the previous key) and the value. The block ends with
    uint32 restart offsets and their uint32 count; entries stop where the restart array starts."""
    if len(block) < 4: raise CheckpointFormatError(f"{where}: block of {len(block)} bytes has no restart count")
    restarts = struct.unpack('<I', block[-4:])[0]
    limit = len(block) - 4 - 4 * restarts
    if limit < 0: raise CheckpointFormatError(f"{where}: block claims {restarts} restart points, more than fit")
    pos, key = 0, b''
    while pos < limit:
        shared, pos = _varint(block, pos, where)
        non_shared, pos = _varint(block, pos, where)
        length, pos = _varint(block, pos, where)
        if shared > len(key) or pos + non_shared + length > limit:
            raise CheckpointFormatError(f"{where}: corrupt block entry at byte {pos}")
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        yield key, block[pos:pos + length]
        pos += length


def table_entries(data: bytes, where: str):
    "Every (key, value) of an SSTable, in key order: the index block lists the data blocks."
    _, index = read_footer(data, where)
    for _, handle_bytes in block_entries(read_block(data, index, where), f"{where} (index block)"):
        handle, _ = _block_handle(handle_bytes, 0, f"{where} (index block)")
        yield from block_entries(read_block(data, handle, where), f"{where} (data block at {handle[0]})")


# --- checkpoint ---------------------------------------------------------------------------------------------------

_SIBLING = re.compile(r'(.*)\.(index|meta|data-\d{5}-of-\d{5})$')


def _checkpoint_file_path(directory: Path) -> Path | None:
    """The prefix the `checkpoint` file (a text CheckpointState proto: `model_checkpoint_path: "..."`) names, looked up
    as written, then inside `directory` (a checkpoint copied from elsewhere keeps its old absolute paths)."""
    state = directory / 'checkpoint'
    if not state.is_file(): return None
    m = re.search(r'^model_checkpoint_path:\s*"(.*)"\s*$', state.read_text(encoding='utf-8', errors='replace'), re.M)
    if not m: raise CheckpointFormatError(f"{state}: no model_checkpoint_path line; give the prefix DIR/model.ckpt-N")
    named = Path(m.group(1))
    for candidate in (named if named.is_absolute() else directory / named, directory / named.name):
        if Path(f'{candidate}.index').is_file(): return candidate
    raise CheckpointFormatError(f"{state} names '{m.group(1)}', but neither it nor {directory / named.name} has an "
                                ".index file; give the prefix DIR/model.ckpt-N of a checkpoint that is there")


def resolve_prefix(path: str | Path) -> Path:
    """The checkpoint prefix of `path`: a prefix (`DIR/model.ckpt-N`), one of its files (`.index`, `.data-*`, `.meta`),
    or a directory (the checkpoint its `checkpoint` file names, else its only `*.index`)."""
    p = Path(path).expanduser()
    if p.is_dir():
        named = _checkpoint_file_path(p)
        if named is not None: return named
        indexes = sorted(p.glob('*.index'))
        if len(indexes) == 1: return indexes[0].with_suffix('')
        if not indexes:
            raise CheckpointFormatError(f"{p}: no TensorFlow checkpoint in this directory (no *.index file, no "
                                        "'checkpoint' file)")
        raise CheckpointFormatError(f"{p}: {len(indexes)} checkpoints ({', '.join(i.stem for i in indexes[:5])}) and "
                                    "no 'checkpoint' file naming one; give the prefix DIR/model.ckpt-N")
    m = _SIBLING.match(p.name)
    if m and p.is_file(): p = p.with_name(m.group(1))
    if Path(f'{p}.index').is_file(): return p
    raise CheckpointFormatError(f"{path}: not a TensorFlow checkpoint: no {p.name}.index file there (give a directory "
                                "or a prefix DIR/model.ckpt-N)")


class TFCheckpoint:
    """The variables of one checkpoint: `entries` (name -> TensorEntry) from the index; `read(name)` a tensor from its
    data file, its CRC-32C checked when `verify` (vectorised; about 0.2 s per 100 MB)."""

    def __init__(self, path: str | Path, verify: bool = True):
        self.prefix, self.verify = resolve_prefix(path), verify
        self.index_path = Path(f'{self.prefix}.index')
        try: data = self.index_path.read_bytes()
        except OSError as e: raise CheckpointFormatError(f"{self.index_path}: cannot read ({e.strerror})") from None
        where, header, self.entries = str(self.index_path), None, {}
        for key, value in table_entries(data, where):
            if key == b'': header = parse_header(value, where)
            elif key[:1] == b'\x00': continue  # the slices of a partitioned variable (EncodeTensorNameSlice keys)
            else:
                name = key.decode('utf-8', errors='replace')
                self.entries[name] = parse_entry(name, value, where)
        if header is None:
            raise CheckpointFormatError(f"{where}: no bundle header (the entry with the empty key); not a tensor "
                                        "bundle index (a TF 0.x V1 checkpoint?)")
        if header['endianness'] not in (0, 1):
            raise CheckpointFormatError(f"{where}: unknown endianness {header['endianness']} in the bundle header")
        self.num_shards, self.big_endian = header['num_shards'], header['endianness'] == 1

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: e.shape for name, e in self.entries.items()}

    def data_path(self, shard: int) -> Path:
        return Path(f'{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}')

    def _entry(self, name: str) -> TensorEntry:
        entry = self.entries.get(name)
        if entry is None:
            raise CheckpointFormatError(f"{self.index_path}: no variable '{name}' (the checkpoint has "
                                        f"{len(self.entries)}).{did_you_mean(name, list(self.entries))}")
        where = f"{self.index_path}: variable '{name}'"
        if entry.dtype == STRING:
            raise CheckpointFormatError(f"{where} is a string tensor; only numeric tensors are read")
        if entry.dtype not in DTYPES: raise CheckpointFormatError(f"{where} has unsupported {entry.dtype_name}")
        if entry.sliced: raise CheckpointFormatError(f"{where} is partitioned into slices, which are not supported")
        if not 0 <= entry.shard_id < self.num_shards:
            raise CheckpointFormatError(f"{where} is in shard {entry.shard_id}, but the bundle has {self.num_shards}")
        return entry

    def _read_bytes(self, entry: TensorEntry) -> bytearray:
        path = self.data_path(entry.shard_id)
        buf = bytearray(entry.size)
        try:
            with open(path, 'rb') as f:
                f.seek(entry.offset)
                got = f.readinto(buf)
        except OSError as e:
            raise CheckpointFormatError(f"{path}: cannot read variable '{entry.name}' ({e.strerror}); the data file "
                                        f"belongs beside {self.index_path.name}") from None
        if got != entry.size:
            raise CheckpointFormatError(f"{path}: truncated: variable '{entry.name}' needs bytes {entry.offset}.."
                                        f"{entry.offset + entry.size}, the file ends at {entry.offset + got}")
        if self.verify and crc32c(buf) != unmask_crc32c(entry.crc32c):
            raise CheckpointFormatError(f"{path}: checksum mismatch for variable '{entry.name}' (bytes {entry.offset}.."
                                        f"{entry.offset + entry.size}); the data file is corrupt")
        return buf

    def read(self, name: str) -> np.ndarray:
        "The variable `name` as a numpy array of its shape (bfloat16 widened to float32, big-endian made native)."
        entry = self._entry(name)
        kind, code = DTYPES[entry.dtype]
        dtype = np.dtype(code)
        if self.big_endian: dtype = dtype.newbyteorder('>')
        count = int(np.prod(entry.shape, dtype=np.int64))
        if count * dtype.itemsize != entry.size:
            raise CheckpointFormatError(f"{self.index_path}: variable '{name}' is {kind} {list(entry.shape)} = "
                                        f"{count * dtype.itemsize} bytes, but its entry says {entry.size}; corrupt index")
        array = np.frombuffer(self._read_bytes(entry), dtype=dtype).reshape(entry.shape)
        if kind == 'bfloat16': array = (array.astype(np.uint32) << 16).view(np.float32)
        return array.astype(array.dtype.newbyteorder('='), copy=False)


def list_variables(prefix: str | Path) -> dict[str, tuple[int, ...]]:
    "Every variable's name and shape, as `tf.train.list_variables` gives them (string tensors included)."
    return TFCheckpoint(prefix).shapes()


def read_variable(prefix: str | Path, name: str, verify: bool = True) -> np.ndarray:
    "One variable as a numpy array; `verify` checks its CRC-32C against the index."
    return TFCheckpoint(prefix, verify=verify).read(name)
