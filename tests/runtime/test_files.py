"""electra/runtime/files.py and the drivers' error line (electra/runtime/errors.py `friendly_errors`) on a full disk:
a write that fails leaves nothing partial, names the file, and the job ends with one line saying what to do; the same
line for a run that diverged."""
import errno
import io
import os
import sys

import pytest
import torch

from electra.config.errors import ConfigError
from electra.runtime import files
from electra.runtime.errors import TrainingDiverged, friendly_errors


class FillsUp(io.RawIOBase):
    "A file on a disk with `room` bytes left: the write that does not fit raises OSError(ENOSPC), as a full disk does."

    def __init__(self, f, room: int):
        self.f, self.room = f, room

    def writable(self): return True

    def write(self, data):
        if len(data) > self.room: raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.f.write(data)

    def fileno(self): return self.f.fileno()

    def close(self):
        self.f.close()
        super().close()


@pytest.fixture
def disk_with_room(monkeypatch):
    "`os.fdopen` of files.py gives files with 1000 bytes of room."
    real = os.fdopen
    monkeypatch.setattr(files.os, 'fdopen', lambda fd, mode: FillsUp(real(fd, mode), 1000))


@pytest.mark.parametrize('write', [lambda path: files.atomic_save({'w': torch.zeros(10_000)}, path),
                                   lambda path: files.atomic_write_bytes(b'x' * 5000, path)], ids=['torch.save', 'bytes'])
def test_a_full_disk_is_an_oserror_naming_the_file_and_leaves_nothing(tmp_path, disk_with_room, write):
    """torch.save reports the failed write as a RuntimeError of its own ('unexpected pos'); the OSError under it is what
    the user must see, with the file it was for. The old file stays, no temporary file is left."""
    path = tmp_path / 'run_11081_50%.pth'
    path.write_bytes(b'the previous version')
    with pytest.raises(OSError) as e:
        write(path)
    assert (e.value.errno, e.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == b'the previous version' and sorted(os.listdir(tmp_path)) == [path.name]


def test_writable_dir_names_the_file_in_the_way_and_can_check_without_creating(tmp_path):
    blocker = tmp_path / 'a_file'
    blocker.write_text('x')
    for create in (True, False):
        with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{blocker}/run/discriminator' \('{blocker}' is "
                                              r"a file, not a folder\). Choose a writable directory with --output_dir, or "
                                              r"move that file away\.$"):
            files.writable_dir(blocker / 'run' / 'discriminator', 'output_dir', create=create)
    with pytest.raises(ConfigError, match=rf"^out: cannot write to '{blocker}' \('{blocker}' is a file, not a folder\)"):
        files.writable_dir(blocker, 'out', create=False)
    with pytest.raises(ConfigError, match=r"^cache_dir: cannot write to '/proc/electra/x' \(.*\)\. Choose a writable "
                                          r"directory with --cache_dir\.$"):
        files.writable_dir('/proc/electra/x', 'cache_dir', create=False)
    assert files.writable_dir(tmp_path / 'later' / 'export', 'output_dir', create=False) == tmp_path / 'later' / 'export'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['a_file']   # checked, nothing made, no probe left
    assert files.writable_dir(tmp_path / 'now', 'output_dir').is_dir() and list((tmp_path / 'now').iterdir()) == []


def test_writable_files_names_a_folder_where_a_file_goes_and_makes_nothing(tmp_path):
    (tmp_path / 'summary.md').mkdir()
    (tmp_path / 'results.csv').write_text('kept')
    (tmp_path / 'linked.png').symlink_to(tmp_path / 'summary.md')  # a link to a folder: no file can be written there
    files.writable_files(tmp_path, ['results.csv', 'later.png'], 'output_dir')  # a file, or nothing yet: fine
    for name in ('summary.md', 'linked.png'):
        with pytest.raises(ConfigError, match=rf"^output_dir: cannot write to '{tmp_path / name}' \(it is a folder, not a "
                                              r"file\)\. Move that folder away, or choose another directory with "
                                              r"--output_dir\.$"):
            files.writable_files(tmp_path, ['results.csv', name], 'output_dir')
    assert sorted(os.listdir(tmp_path)) == ['linked.png', 'results.csv', 'summary.md']


@pytest.mark.parametrize('write', [lambda path: files.atomic_save({'w': torch.zeros(10)}, path),
                                   lambda path: files.atomic_write_text('x', path)], ids=['torch.save', 'text'])
def test_an_atomic_write_over_a_folder_names_the_folder_and_writes_nothing(tmp_path, write):
    "Before: the rename failed after the whole file was written, naming the temporary file first."
    path = tmp_path / 'summary.md'
    (path / 'inside').mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as e:
        write(path)
    assert (e.value.errno, e.value.filename, e.value.filename2) == (errno.EISDIR, str(path), None)
    assert sorted(os.listdir(tmp_path)) == ['summary.md'] and os.listdir(path) == ['inside']


@pytest.fixture
def excepthook():
    "The drivers' hook (friendly_errors), restored afterwards."
    import warnings
    saved = sys.excepthook, warnings.showwarning
    friendly_errors()
    yield sys.excepthook
    sys.excepthook, warnings.showwarning = saved


@pytest.mark.parametrize('error, where', [
    (OSError(errno.ENOSPC, 'No space left on device', '/data/run_11081_50%.pth'), " writing /data/run_11081_50%.pth"),
    (OSError(errno.EDQUOT, 'Disk quota exceeded'), ''),
    (OSError('[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device'), '')],
    ids=['enospc', 'quota', 'pyarrow'])
def test_a_full_disk_ends_the_job_with_one_line_saying_what_to_do(excepthook, capsys, error, where):
    with pytest.raises(SystemExit) as e:
        excepthook(type(error), error, None)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1 and 'Traceback' not in err
    assert err.startswith(f'error: the disk is full{where} ({error.strerror or "No space left on device"}). Free space')
    assert 'run the same command again (pretrain.py: with --resume)' in err


@pytest.mark.parametrize('error, line', [
    (IsADirectoryError(errno.EISDIR, 'Is a directory', '/g/summary.md'),
     "'/g/summary.md' is a folder where the job reads or writes a file (Is a directory). Move that folder away"),
    (IsADirectoryError(errno.EISDIR, 'Is a directory', '/g/.summary.md.x1.tmp', None, '/g/summary.md'),  # os.replace's
     "'/g/summary.md' is a folder where the job reads or writes a file (Is a directory). Move that folder away"),
    (NotADirectoryError(errno.ENOTDIR, 'Not a directory', '/g/RTE_0/config.json'),
     "'/g/RTE_0/config.json' is below a file, where the job expects a folder (Not a directory). Move that file away")],
    ids=['folder', 'folder-renamed-over', 'file'])
def test_a_folder_or_file_in_the_way_ends_the_job_with_one_line_naming_it(excepthook, capsys, error, line):
    "Wherever a write finds one (a file no up-front check names): one line, not a traceback, and what to do."
    with pytest.raises(SystemExit) as e:
        excepthook(type(error), error, None)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1 and 'Traceback' not in err
    assert err.startswith(f'error: {line}') and err.rstrip().endswith(
        'and run the same command again (pretrain.py: with --resume): what was finished is kept.')


def test_other_os_errors_are_left_to_python(excepthook, capsys):
    "Only a full disk is a known fault with a fix to name; any other error still shows where it came from."
    error = OSError(errno.EIO, 'Input/output error')
    excepthook(type(error), error, None)  # Python's own report, no exit of ours
    assert 'OSError: [Errno 5] Input/output error' in capsys.readouterr().err


@pytest.mark.parametrize('rank, line', [(None, 'error: '), ('1', '[rank1] error: ')], ids=['alone', 'torchrun'])
def test_a_diverged_run_ends_the_job_with_its_error_line_and_status_2(excepthook, capsys, monkeypatch, rank, line):
    """A run whose loss became NaN is no bad setting (no ConfigError), yet the drivers report it as one: one `error:`
    line (the rank's under torchrun), fastai's prefix of an error raised in a callback dropped, status 2."""
    if rank: monkeypatch.setenv('RANK', rank), monkeypatch.setenv('WORLD_SIZE', '2')
    diverged = TrainingDiverged('Exception occured in `MetricsLogger` when calling event `after_fit`:\n\tthe loss '
                                'became NaN or infinite at step 5')
    assert not isinstance(diverged, ConfigError)
    with pytest.raises(SystemExit) as e:
        excepthook(type(diverged), diverged, None)
    assert e.value.code == 2 and capsys.readouterr().err == f'{line}the loss became NaN or infinite at step 5\n'


def test_characters_no_font_draws_are_said_in_one_warning_naming_the_plot(tmp_path):
    """R19a-2: a group named `grp é 日本 x` gave summary.png's title as boxes and four matplotlib UserWarnings per glyph,
    naming the library's source lines. One RunWarning now names the file and the characters; the plot is written."""
    import warnings

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from electra.config.errors import RunWarning
    path = tmp_path / 'summary.png'
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with files.glyphs_said(path):
            fig, ax = plt.subplots()
            ax.set_title('grp é 日本 x: dev score per run')
            fig.tight_layout()  # (text is measured here too: a glyph missing is found before the file is drawn)
            files.atomic_write_figure(fig, path, 50)
        plt.close(fig)
    assert [(w.category, str(w.message)) for w in caught] == [(RunWarning, (
        f"{path}: no font of the plot draws '日', '本', shown as boxes (install a font of that script, e.g. Noto Sans "
        "CJK, for the plot to draw them); the text files hold every name as it is."))]
    assert path.read_bytes()[:4] == b'\x89PNG' and sorted(os.listdir(tmp_path)) == ['summary.png']
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with files.glyphs_said(path):
            fig, ax = plt.subplots()
            ax.set_title('grp é x')
            files.atomic_write_figure(fig, path, 50)
        plt.close(fig)
    assert caught == []
