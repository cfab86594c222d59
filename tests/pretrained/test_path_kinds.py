"""A model's kind decided by what it is, not by its name (electra/pretrained/export.py `load_discriminator`, fine-tuning's
`load_pretrained`, pretraining's `init_sources`): a save_pretrained folder named like a file, a checkpoint named like a
folder, a `.pth` that is text, each read as what it is or refused in one line naming the key and the fix."""
from __future__ import annotations

import shutil

import pytest
import torch

from electra.config.errors import ConfigError
from electra.config.values import config_to_dict
from electra.data.tokenizer import load_tokenizer, tokenizer_state
from electra.finetuning import loading
from electra.objective.model import build_pretraining_model
from electra.objective.masking import MaskingSettings
from electra.pretraining.init_from import init_sources, load_init
from electra.runtime.files import atomic_save
from electra.training.checkpoint import FORMAT
from tests.pretraining.test_init_from import save_pair, tiny_cfg as pair_cfg
from tests.support.tiny import V, tiny_cfg

pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    "A pretrain.py checkpoint of a tiny model, named as the library names them."
    root = tmp_path_factory.mktemp('ckpt')
    vocab = root / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok, cfg = load_tokenizer(str(vocab)), tiny_cfg()
    torch.manual_seed(0)
    path = root / 'run_1_100%.pth'
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': build_pretraining_model(cfg, MaskingSettings.for_tokenizer(tok)).state_dict()}, path)
    return path


def same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_a_save_pretrained_folder_named_like_a_file_loads_as_the_folder(tiny_dir, tmp_path):
    named = tmp_path / 'my_model.pth'
    shutil.copytree(tiny_dir, named)
    disc, tok = loading.load_pretrained(str(named))
    assert same_weights(disc, loading.load_pretrained(str(tiny_dir))[0]) and len(tok) == disc.config.vocab_size


def test_a_checkpoint_named_like_a_folder_loads_as_the_checkpoint(checkpoint, tmp_path):
    named = tmp_path / 'my_model'
    shutil.copyfile(checkpoint, named)
    assert same_weights(loading.load_pretrained(str(named))[0], loading.load_pretrained(str(checkpoint))[0])
    assert init_sources(str(named)) == named and load_init(str(named)).discriminator.config.hidden_size == 32


@pytest.mark.parametrize('content', [b'not a model\n', b'{"architectures": ["ElectraForPreTraining"]}\n'])
def test_a_pth_that_is_text_is_refused_naming_the_key(tmp_path, content):
    lying = tmp_path / 'model.pth'
    lying.write_bytes(content)
    for load, key in ((loading.load_pretrained, 'model'), (init_sources, 'init_from')):
        with pytest.raises(ConfigError) as e:
            load(str(lying))
        message = str(e.value)
        assert '\n' not in message and message.startswith(f'{key}: {lying}') and 'save_pretrained' in message, message


def test_an_export_folder_named_like_a_checkpoint_is_the_pair_for_init_from(tmp_path):
    save_pair(tmp_path / 'run.pth', pair_cfg())
    assert init_sources(str(tmp_path / 'run.pth')) == (f'{tmp_path}/run.pth/generator', f'{tmp_path}/run.pth/discriminator')


def test_a_tokenizer_json_given_as_a_vocab_file_is_refused_naming_its_folder(tiny_dir, tmp_path):
    from electra.data.tokenizer import load_tokenizer as load
    assert len(load(str(tiny_dir))) > 5  # the folder that holds it
    named = tmp_path / 'vocab.txt'  # a tokenizer.json under a vocab's name
    shutil.copyfile(tiny_dir / 'tokenizer.json', named)
    for given in (tiny_dir / 'tokenizer.json', named):
        with pytest.raises(ConfigError) as e:
            load(str(given))
        assert '\n' not in str(e.value) and str(e.value).startswith(f'tokenizer {given}: ') and 'JSON' in str(e.value)
