"""electra/training/checkpoint.py: a checkpoint that cannot be read is named with what to do, in our words."""
import pytest
import torch

from electra.config.errors import ConfigError
from electra.training.checkpoint import FORMAT, check_resume_compatible, check_resume_corpus, load_checkpoint, state_checksum


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


@pytest.mark.parametrize('key, now', [('lowercase', False), ('vocab_size', 1500), ('strip_accents', True)])
def test_a_resume_that_changes_what_shaped_the_runs_own_tokenizer_is_refused(tmp_path, key, now):
    """The run's trained tokenizer is reused on resume whatever `lowercase`, `vocab_size` and `strip_accents` say: a
    changed one was accepted, and config.yaml and the model card then described a tokenizer the run does not have.
    With a tokenizer of the user's (`tokenizer` given) the tokenizer's own files are compared instead."""
    from electra.config.pretrain import PretrainConfig
    from electra.config.values import config_to_dict
    was = config_to_dict(PretrainConfig())
    ckpt = {'config': was, 'tokenizer': {'vocab.txt': 'x'}, 'step': 5}
    with pytest.raises(ConfigError, match=f"'{key}' was {was[key]!r} in the checkpoint but is {now!r} now"):
        check_resume_compatible(ckpt, {**was, key: now}, {'vocab.txt': 'x'}, tmp_path / 'run.pth')
    mine = {**was, 'tokenizer': 'my_vocab.txt'}
    check_resume_compatible({**ckpt, 'config': mine}, {**mine, key: now}, {'vocab.txt': 'x'}, tmp_path / 'run.pth')


def test_a_run_begun_from_weights_resumes_whatever_vocab_size_its_checkpoint_recorded(tmp_path):
    """A run that takes its tokenizer from init_from (or a frozen generator) trains none: vocab_size now records that
    tokenizer's size, which a checkpoint of an earlier version recorded as the preset's value. Its tokenizer files are
    compared instead (a changed one is refused), as with a tokenizer given."""
    from electra.config.pretrain import PretrainConfig
    from electra.config.values import config_to_dict
    was = {**config_to_dict(PretrainConfig()), 'init_from': str(tmp_path / 'weights')}
    ckpt = {'config': was, 'tokenizer': {'vocab.txt': 'x'}, 'step': 5}
    check_resume_compatible(ckpt, {**was, 'vocab_size': 1450}, {'vocab.txt': 'x'}, tmp_path / 'run.pth')
    with pytest.raises(ConfigError, match='the tokenizer differs from the one this checkpoint was trained with'):
        check_resume_compatible(ckpt, {**was, 'vocab_size': 1450}, {'vocab.txt': 'y'}, tmp_path / 'run.pth')


def test_a_checkpoint_of_an_earlier_version_naming_its_generator_relatively_resumes_from_its_folder(tmp_path,
                                                                                                      monkeypatch,
                                                                                                      capsys):
    """A config keeps its local paths absolute now; a checkpoint of an earlier version kept them as typed. Resumed from
    its folder, a relative `generator` (a key a resume may not change) names the same folder: not refused (it was,
    "'generator' was 'gen' in the checkpoint but is '/.../gen' now"), nor said to have changed; from elsewhere it names
    another, refused as before."""
    from electra.config.pretrain import PretrainConfig
    from electra.config.values import config_to_dict
    (tmp_path / 'gen').mkdir()
    monkeypatch.chdir(tmp_path)
    now = config_to_dict(PretrainConfig(objective='fast_electra', generator='gen', tie_weights='none'))
    assert now['generator'] == str(tmp_path / 'gen')
    ckpt = {'config': {**now, 'generator': 'gen'}, 'tokenizer': {'vocab.txt': 'x'}, 'step': 5}
    check_resume_compatible(ckpt, now, {'vocab.txt': 'x'}, tmp_path / 'run.pth')
    assert capsys.readouterr().out == ''
    elsewhere = {**now, 'generator': str(tmp_path / 'other' / 'gen')}
    with pytest.raises(ConfigError, match="'generator' was 'gen' in the checkpoint but is '.*other/gen' now"):
        check_resume_compatible(ckpt, elsewhere, {'vocab.txt': 'x'}, tmp_path / 'run.pth')


def test_a_fine_tuned_run_read_as_a_pretraining_checkpoint_names_the_model_it_started_from(tmp_path):
    """R9-1's mirror: --model, --init_from or the Explore notebook's `model` given a fine-tuned run of finetune.py
    said only that it is not a pretraining checkpoint; it records the model it was fine-tuned from: named."""
    path = tmp_path / 'RTE_0.pth'
    torch.save({'format': 'electra-finetuned', 'task': 'RTE', 'pretrained': 'out/demo_11081_100%.pth'}, path)
    with pytest.raises(ConfigError) as e:
        load_checkpoint(path)
    assert str(e.value) == (f"{path}: a fine-tuned run of finetune.py (task RTE), not a pretraining checkpoint of "
                            "pretrain.py: the Explore notebook's `finetuned` reads it; the pretrained model it was "
                            "fine-tuned from is out/demo_11081_100%.pth.")
    torch.save([1, 2], path)
    with pytest.raises(ConfigError) as e:
        load_checkpoint(path)
    assert str(e.value) == (f"{path}: not an ELECTRA pretraining checkpoint written by pretrain.py (expected a dict "
                            "with format 'electra-pretrain').")
