"""electra/training/checkpoint.py: a checkpoint that cannot be read is named with what to do, in our words."""
import pytest
import torch

from electra.config.base import ConfigError
from electra.training.checkpoint import FORMAT, check_resume_corpus, load_checkpoint, state_checksum


@pytest.mark.parametrize('damage', [lambda b: b'not a checkpoint\n', lambda b: b[:len(b) // 2]], ids=['text', 'truncated'])
def test_an_unreadable_checkpoint_is_named_without_torchs_advice(tmp_path, damage):
    """Before: torch's own text followed the path, up to 700 characters of it advising weights_only=False (unsafe on
    a file one does not trust, and no help with a cut-short one)."""
    state = {'format': FORMAT, 'step': 2, 'model': {'w': torch.arange(1000.0)}}
    good, bad = tmp_path / 'run_1_50%.pth', tmp_path / 'run_1_100%.pth'
    torch.save({**state, 'checksum': state_checksum(state)}, good)
    bad.write_bytes(damage(good.read_bytes()))
    with pytest.raises(ConfigError) as e:
        load_checkpoint(bad)
    assert str(e.value).startswith(f'{bad}: cannot read this checkpoint: it is cut short or damaged, or not a file '
                                   f'written by pretrain.py (')
    assert str(e.value).endswith(f"The run's previous checkpoint is {good}.") and 'weights_only' not in str(e.value)
    assert load_checkpoint(good)['step'] == 2


def test_a_checkpoint_older_than_corpus_records_is_resumed_saying_its_corpus_is_not_checked(tmp_path, capsys):
    path = tmp_path / 'old_1_50%.pth'
    check_resume_corpus({'config': {'corpus': ['a.txt']}, 'step': 3}, ['a.txt'], '0123456789abcdef', path)
    assert capsys.readouterr().out == (f'resume: {path} does not record its corpus (a checkpoint of an earlier version): '
                                       'the corpus is not checked.\n')
