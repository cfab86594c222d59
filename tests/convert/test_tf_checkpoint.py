"""The TensorFlow-free checkpoint reader: CRC-32C, bundles written here from the format's description, and the real
checkpoints the official code wrote (tests/fixtures/official_tf), against TF's own `tf.train.list_variables`."""
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from electra.convert.crc32c import _raw_update, crc32c, masked_crc32c, unmask_crc32c
from electra.convert.tf_checkpoint import CheckpointFormatError, TFCheckpoint, list_variables, read_variable
from tests.support.tf_bundle import write_bundle, write_table

FIXTURES = Path(__file__).resolve().parents[1] / 'fixtures' / 'official_tf'
VARIANTS = ('tied', 'untied', 'projected')


def test_crc32c_known_values_and_the_vectorised_path():
    assert crc32c(b'123456789') == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert crc32c(b'') == 0 and crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4: 32 bytes of zeros
    data = np.random.default_rng(0).integers(0, 256, 300_007, dtype=np.uint8).tobytes()
    whole = crc32c(data)  # many lanes joined, plus a tail
    assert whole == _raw_update(0xFFFFFFFF, data) ^ 0xFFFFFFFF  # the plain byte loop
    assert crc32c(data[100_000:], crc32c(data[:100_000])) == whole  # continues like crc32c::Extend
    assert unmask_crc32c(masked_crc32c(data)) == whole != masked_crc32c(data)


def tensors():
    rng = np.random.default_rng(1)
    return {'layer/dense/kernel': rng.standard_normal((3, 4)).astype(np.float32),
            'layer/dense/bias': np.arange(4, dtype=np.float32),
            'layer/big': rng.standard_normal((64, 600)).astype(np.float32),  # > 32 KiB: the vectorised CRC
            'half': rng.standard_normal(5).astype(np.float16), 'bf16': np.array([1.5, -2.0, 3.0, 0.0], np.float32),
            'ids': np.arange(6, dtype=np.int32).reshape(2, 3), 'global_step': np.array(7, dtype=np.int64),
            'names': np.array(0), 'scalar': np.array(2.5, np.float32)}


@pytest.mark.parametrize('per_block', [0, 3])
def test_reads_every_dtype_from_a_bundle_of_one_or_several_blocks(tmp_path, per_block):
    t = tensors()
    write_bundle(tmp_path / 'model.ckpt-3', t, bfloat16=('bf16',), strings=('names',), per_block=per_block)
    ckpt = TFCheckpoint(tmp_path)
    assert ckpt.shapes() == {name: a.shape for name, a in t.items()}
    for name, array in t.items():
        if name == 'names': continue
        got = ckpt.read(name)
        assert got.dtype == (np.float32 if name == 'bf16' else array.dtype) and np.array_equal(got, array), name
    with pytest.raises(CheckpointFormatError, match="variable 'names' is a string tensor; only numeric"):
        ckpt.read('names')
    with pytest.raises(CheckpointFormatError, match="no variable 'layer/dense/kernal'.*Did you mean 'layer/dense/kernel'"):
        ckpt.read('layer/dense/kernal')


def test_prefix_forms(tmp_path):
    prefix = write_bundle(tmp_path / 'model.ckpt-7', {'x': np.ones(2, np.float32)})
    for form in (tmp_path, prefix, f'{prefix}.index', f'{prefix}.data-00000-of-00001'):
        assert TFCheckpoint(form).prefix == prefix
    assert list_variables(prefix) == {'x': (2,)} and read_variable(tmp_path, 'x').tolist() == [1, 1]
    # a `checkpoint` file written on another machine names an absolute path there: the file here is used
    (tmp_path / 'checkpoint').write_text('model_checkpoint_path: "/gone/models/model.ckpt-7"\n')
    assert TFCheckpoint(tmp_path).prefix == prefix
    (tmp_path / 'checkpoint').unlink()
    assert TFCheckpoint(tmp_path).prefix == prefix  # no `checkpoint` file: the only *.index
    write_bundle(tmp_path / 'model.ckpt-9', {'x': np.ones(2, np.float32)}, checkpoint_file=False)
    with pytest.raises(CheckpointFormatError, match=r"2 checkpoints .* give the prefix DIR/model.ckpt-N"):
        TFCheckpoint(tmp_path)
    (tmp_path / 'empty').mkdir()
    with pytest.raises(CheckpointFormatError, match=r"no TensorFlow checkpoint in this directory"):
        TFCheckpoint(tmp_path / 'empty')
    with pytest.raises(CheckpointFormatError, match=r"not a TensorFlow checkpoint: no model.ckpt-8.index"):
        TFCheckpoint(tmp_path / 'model.ckpt-8')


def corrupt(path: Path, at: int, data: bytes = b'\xff') -> None:
    raw = bytearray(path.read_bytes())
    raw[at:at + len(data)] = data
    path.write_bytes(bytes(raw))


def test_refuses_corrupt_truncated_and_snappy_files(tmp_path):
    prefix = write_bundle(tmp_path / 'model.ckpt-1', {'w': np.arange(12, dtype=np.float32)})
    index, data = Path(f'{prefix}.index'), Path(f'{prefix}.data-00000-of-00001')
    good_index, good_data = index.read_bytes(), data.read_bytes()
    cases = [(lambda: corrupt(index, len(good_index) - 1), 'bad table magic number'),
             (lambda: index.write_bytes(good_index[:20]), 'shorter than a table footer'),
             (lambda: corrupt(index, 10), 'checksum mismatch in the block at byte 0; the file is corrupt'),
             (lambda: index.write_bytes(good_index[-48:]), 'runs past the end of the file'),
             (lambda: write_table(index, [(b'', b'')], compression=1), 'snappy-compressed.*does not decompress')]
    for damage, message in cases:
        index.write_bytes(good_index)
        damage()
        with pytest.raises(CheckpointFormatError, match=message) as e:
            TFCheckpoint(prefix).read('w')
        assert str(index) in str(e.value)
    index.write_bytes(good_index)
    corrupt(data, 5)
    with pytest.raises(CheckpointFormatError, match=r"checksum mismatch for variable 'w' \(bytes 0..48\)"):
        read_variable(prefix, 'w')
    assert read_variable(prefix, 'w', verify=False).shape == (12,)  # checking is optional
    data.write_bytes(good_data[:30])
    with pytest.raises(CheckpointFormatError, match=r"truncated: variable 'w' needs bytes 0..48, the file ends at 30"):
        read_variable(prefix, 'w')
    data.unlink()
    with pytest.raises(CheckpointFormatError, match=r"data-00000-of-00001: cannot read variable 'w'"):
        read_variable(prefix, 'w')


def test_big_endian_bundles_are_read_natively(tmp_path):
    "The header's endianness field (BundleHeaderProto.endianness = BIG) switches every tensor's byte order."
    from tests.support.tf_bundle import entry_proto, field
    w = np.arange(6, dtype=np.float32)
    raw = w.astype('>f4').tobytes()
    Path(tmp_path / 'm.data-00000-of-00001').write_bytes(raw)
    write_table(tmp_path / 'm.index', [(b'', field(1, 1) + field(2, 1)),
                                       (b'w', entry_proto(1, (6,), 0, len(raw), masked_crc32c(raw)))])
    assert read_variable(tmp_path / 'm', 'w').tolist() == w.tolist()


def fixture_lines(variant: str) -> list[str]:
    return [line for line in (FIXTURES / variant / 'variables.txt').read_text().splitlines() if not line.startswith('#')]


@pytest.mark.parametrize('variant', VARIANTS)
def test_the_official_checkpoints_list_as_tensorflow_lists_them(variant):
    "Names, dtypes and shapes equal TF's own `tf.train.list_variables` (variables.txt); every tensor's CRC checks."
    ckpt = TFCheckpoint(FIXTURES / variant)
    assert ckpt.prefix.name == 'model.ckpt-5' and ckpt.num_shards == 1
    listed = [f'{n}\t{e.dtype_name}\t{list(e.shape)}' for n, e in sorted(ckpt.entries.items())]
    assert listed == fixture_lines(variant)
    for name, entry in ckpt.entries.items():
        assert ckpt.read(name).shape == entry.shape
    assert ckpt.read('global_step') == 5


def test_a_damaged_official_index_is_refused(tmp_path):
    for name in ('model.ckpt-5.index', 'model.ckpt-5.data-00000-of-00001'):
        shutil.copy(FIXTURES / 'tied' / name, tmp_path / name)
    index = tmp_path / 'model.ckpt-5.index'
    raw = index.read_bytes()
    at = raw.index(b'discriminator_predictions')  # the first key, written in full
    corrupt(index, at, b'X')
    with pytest.raises(CheckpointFormatError, match=r'model.ckpt-5.index: checksum mismatch in the block'):
        TFCheckpoint(tmp_path)
    struct.pack_into('<I', raw := bytearray(raw), len(raw) - 8, 0)
    index.write_bytes(bytes(raw))
    with pytest.raises(CheckpointFormatError, match=r'bad table magic number'):
        TFCheckpoint(tmp_path)
