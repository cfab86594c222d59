"""electra/pretraining/init_from.py: where `init_from` points, loading the weights into the run's model with their
tying checked, and each refusal with its message."""
import dataclasses
import json
import re

import pytest
import torch
import transformers

from electra.config.cli import load_config
from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig
from electra.objective.model import build_pretraining_model, discriminator_config
from electra.pretraining.init_from import (
    FIXED_KEYS,
    RUN_OWN_KEYS,
    SIZE_KEYS,
    check_init_config,
    init_model_,
    init_sources,
    load_init,
)
from tests.support.config import refused
from tests.support.pretrain import ROOT
from tests.support.tiny import token_ids

WORDS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', *[f'w{i}' for i in range(95)]]


def tiny_cfg(**kw) -> PretrainConfig:
    return PretrainConfig(**{**dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    embedding_size=16, generator_size=0.5, max_position_embeddings=64, max_length=64),
                             **kw})


def save_pair(root, cfg: PretrainConfig, tied: bool = True, seed: int = 0):
    "A generator and a discriminator of `cfg`'s sizes saved as an export is (`root/generator`, `root/discriminator`)."
    torch.manual_seed(seed)
    model = build_pretraining_model(cfg, token_ids(len(WORDS)))
    gen, disc = model.generator, model.discriminator
    if not tied:  # trained apart: the generator's own embedding tables
        gen.electra.embeddings = transformers.models.electra.modeling_electra.ElectraEmbeddings(gen.config)
        gen.generator_lm_head.weight = gen.electra.embeddings.word_embeddings.weight
    tok = transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(WORDS)})
    for name, net in (('generator', gen), ('discriminator', disc)):
        net.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return model


def test_sources_are_a_checkpoint_a_pair_a_directory_or_a_hub_name(tmp_path):
    save_pair(tmp_path / 'run', tiny_cfg())
    assert init_sources(f'{tmp_path}/run') == (f'{tmp_path}/run/generator', f'{tmp_path}/run/discriminator')
    assert init_sources('g, d') == ('g', 'd')
    pair = ('google/electra-small-generator', 'google/electra-small-discriminator')
    assert init_sources('google/electra-small-discriminator') == init_sources('google/electra-small-generator') == pair
    with pytest.raises(ConfigError, match=r'no generator/ and discriminator/ folders'): init_sources(str(tmp_path))
    with pytest.raises(ConfigError, match=r'no such checkpoint'): init_sources(str(tmp_path / 'x.pth'))
    with pytest.raises(ConfigError, match=r'neither a \.pth'): init_sources('google/electra-small')


def test_the_run_starts_from_exactly_the_saved_weights_with_its_tying(tmp_path):
    cfg = tiny_cfg()
    source = save_pair(tmp_path / 'run', cfg)
    init = load_init(str(tmp_path / 'run'))
    check_init_config(cfg, init)
    torch.manual_seed(1)  # another fresh init, overwritten below
    model = init_model_(build_pretraining_model(cfg, token_ids(len(WORDS))), init)
    assert model.generator.electra.embeddings is model.discriminator.electra.embeddings
    assert model.generator.generator_lm_head.weight is model.generator.electra.embeddings.word_embeddings.weight
    for k, v in source.state_dict().items(): assert torch.equal(model.state_dict()[k], v), k
    # a padded vocabulary (pad_vocab_multiple) keeps its extra rows, the real ones are the source's
    padded = init_model_(build_pretraining_model(dataclasses.replace(cfg, pad_vocab_multiple=64), token_ids(len(WORDS))), init)
    words = 'discriminator.electra.embeddings.word_embeddings.weight'
    assert padded.state_dict()[words].shape[0] == 128 and torch.equal(padded.state_dict()[words][:100],
                                                                       source.state_dict()[words])


def test_refusals_name_what_differs(tmp_path, monkeypatch):
    cfg = tiny_cfg()
    save_pair(tmp_path / 'run', cfg)
    init = load_init(str(tmp_path / 'run'))
    with pytest.raises(ConfigError, match=r'discriminator hidden_size: config 64, weights 32; .*generator hidden_size: '
                                          r'config 32, weights 16.*--hidden_size 32 .*--generator_size 0.5'):
        check_init_config(dataclasses.replace(cfg, hidden_size=64, intermediate_size=128), init)
    with pytest.raises(ConfigError, match=r'generator hidden_size: config 32, weights 16'):
        check_init_config(dataclasses.replace(cfg, generator_size=1.0), init)
    other = tmp_path / 'vocab.txt'
    other.write_text('\n'.join(WORDS[:-1] + ['other']) + '\n')
    refused(lambda: check_init_config(dataclasses.replace(cfg, tokenizer=str(other)), init),
            f"tokenizer: {other} is not the tokenizer {tmp_path / 'run'} was trained with: its vocabulary (100 tokens) "
            "is not that of the weights' tokenizer (100 tokens; 'w94' is None there, 99 here); a run that continues "
            "from weights tokenizes with theirs. Leave --tokenizer empty.")
    same = tmp_path / 'same.txt'  # their vocabulary as a vocab.txt: the same tokenizer, read from another file
    same.write_text('\n'.join(WORDS) + '\n')
    check_init_config(dataclasses.replace(cfg, tokenizer=str(same), strip_accents=True), init)  # BERT's rule, as theirs
    refused(lambda: check_init_config(tiny_cfg(tokenizer=str(same), strip_accents=False), init),  # given: kept
            f"tokenizer: {same} is not the tokenizer {tmp_path / 'run'} was trained with: it keeps accents, where the "
            "weights' tokenizer strips accents;")
    # refused from its config.json before its weights load: transformers' report of a head it would have initialised
    # afresh ('newly initialized') came first, saying the opposite of the refusal
    with monkeypatch.context() as m:
        m.setattr(transformers.ElectraForMaskedLM, 'from_pretrained', lambda *a, **k: pytest.fail('weights loaded'))
        with pytest.raises(ConfigError, match=r'holds a ElectraForPreTraining, not an ElectraForMaskedLM'):
            load_init(f'{tmp_path}/run/discriminator,{tmp_path}/run/discriminator')

    save_pair(tmp_path / 'apart', cfg, tied=False)
    apart = load_init(str(tmp_path / 'apart'))
    with pytest.raises(ConfigError, match=r"embeddings weights differ, but tie_weights 'embeddings' .* --tie_weights none"):
        init_model_(build_pretraining_model(cfg, token_ids(len(WORDS))), apart)
    untied = init_model_(build_pretraining_model(dataclasses.replace(cfg, tie_weights='none'), token_ids(len(WORDS))), apart)
    assert torch.equal(untied.generator.electra.embeddings.word_embeddings.weight,
                       apart.generator.electra.embeddings.word_embeddings.weight)

    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    with pytest.raises(ConfigError, match=r"cannot load the generator 'google/electra-small-generator' .* Use local "
                                          r"copies instead: a directory with generator/ and discriminator/"):
        load_init('google/electra-small-discriminator')



@pytest.mark.parametrize('damage, match', [
    (lambda d: (d / 'config.json').unlink(),
     r"init_from: .*/run/generator: no config.json, so not a save_pretrained directory"),
    (lambda d: (d / 'config.json').write_text('{"model_type": "electra", '), r"init_from: .*/run/generator/config.json: "
                                                                             r"unreadable"),
    (lambda d: (d / 'config.json').write_text(
        (d / 'config.json').read_text().replace('"hidden_size": 16', '"hidden_size": 24')),
     r"init_from: cannot load the generator .*/run/generator' \(its weights do not fit its config.json")],
    ids=['no-config', 'config-not-json', 'config-of-other-sizes'])
def test_a_local_folder_that_does_not_load_is_named(tmp_path, damage, match):
    "Before: a RuntimeError (ignore_mismatched_sizes) or an OSError from deep inside from_pretrained (P73 of the sweep)."
    save_pair(tmp_path / 'run', tiny_cfg())
    damage(tmp_path / 'run' / 'generator')
    with pytest.raises(ConfigError, match=match):
        load_init(str(tmp_path / 'run'))


def test_the_flags_a_size_mismatch_prints_are_all_the_run_needs(tmp_path):
    """The refusal of weights of other sizes prints the flags that fit them, every key included that a later check
    applies (max_length against their max_position_embeddings, tie_weights against their tying): the run's command
    with exactly those flags added is accepted by the config and by the weights' checks, before any data is built.
    Before: the sizes alone, then a max_length error, then (after the data build) a tie_weights one."""
    source = tiny_cfg(max_position_embeddings=32, max_length=32, tie_weights='none')
    save_pair(tmp_path / 'run', source, tied=False)  # trained apart: tying the embeddings does not fit them
    init = load_init(str(tmp_path / 'run'))
    argv = ['--config', 'demo', '--init_from', str(tmp_path / 'run'), '--output_dir', str(tmp_path / 'out')]
    read = lambda args: load_config(PretrainConfig, args, preset_dir=ROOT / 'configs' / 'pretrain', prog='pretrain.py')
    with pytest.raises(ConfigError, match=r'discriminator hidden_size: config 64, weights 32') as e:
        check_init_config(read(argv), init)
    flags = re.search(r' or set: (--.*)$', str(e.value))[1].split()
    assert {'--max_length', '--tie_weights'} <= set(flags[::2])
    fixed = read([*argv, *flags])
    assert (fixed.max_length, fixed.tie_weights) == (32, 'none')
    check_init_config(fixed, init)
    model = init_model_(build_pretraining_model(fixed, token_ids(len(WORDS))), init)
    assert torch.equal(model.generator.electra.embeddings.word_embeddings.weight,
                       init.generator.electra.embeddings.word_embeddings.weight)


@pytest.mark.parametrize('changes, named', [
    ({'intermediate_size': 32}, 'generator intermediate_size: 32 (with the sizes that fit the rest, this run builds 64)'),
    ({'num_attention_heads': 2}, 'generator num_attention_heads: 2 (with the sizes that fit the rest, this run builds 1)')],
    ids=['ffn', 'heads'])
def test_a_generator_of_a_shape_no_generator_size_gives_is_refused_without_flags_that_cannot_fit(tmp_path, changes,
                                                                                                named):
    """The run's generator is its discriminator scaled by generator_size, FFN 4 x its hidden size, max(1, hidden // 64)
    heads (the official get_generator_config). Weights of another generator shape were refused with 'or set: <flags>',
    and the command with exactly those flags was refused again with the same flags: no setting gives them."""
    cfg = tiny_cfg(tie_weights='none')
    save_pair(tmp_path / 'run', cfg, tied=False)
    gen = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / 'run' / 'generator')
    other = transformers.ElectraForMaskedLM(transformers.ElectraConfig(**{**gen.config.to_dict(), **changes}))
    other.save_pretrained(tmp_path / 'run' / 'generator')
    message = refused(lambda: check_init_config(cfg, load_init(str(tmp_path / 'run'))),
                      f'init_from: {tmp_path / "run"}: ', named, 'no setting of this run gives',
                      'FFN 4 x its hidden size', 'fine-tune its discriminator')
    assert ' or set: ' not in message and '--hidden_size' not in message


def test_a_tying_the_weights_do_not_have_is_refused_before_the_data_is_built(tmp_path):
    "Sizes that fit but a tie_weights the source's weights do not have: refused by check_init_config, naming the fix."
    save_pair(tmp_path / 'apart', tiny_cfg(), tied=False)
    with pytest.raises(ConfigError, match=r"tie_weights 'embeddings' .* --tie_weights none"):
        check_init_config(tiny_cfg(), load_init(str(tmp_path / 'apart')))
    save_pair(tmp_path / 'tied', tiny_cfg())
    with pytest.raises(ConfigError, match=r"tie_weights 'gdes' keeps .* --tie_weights embeddings or none"):
        check_init_config(tiny_cfg(tie_weights='gdes'), load_init(str(tmp_path / 'tied')))
    check_init_config(tiny_cfg(objective='mlm'), load_init(str(tmp_path / 'apart')))  # BERT takes no generator: no tying


@pytest.mark.parametrize('values, named', [
    ({'hidden_act': 'relu'},
     'discriminator hidden_act: relu (this run: gelu); generator hidden_act: relu (this run: gelu)'),
    ({'layer_norm_eps': 0.001},
     'discriminator layer_norm_eps: 0.001 (this run: 1e-12); generator layer_norm_eps: 0.001'),
    ({'type_vocab_size': 1}, 'discriminator type_vocab_size: 1 (this run: 2); generator type_vocab_size: 1')],
    ids=['hidden_act', 'layer_norm_eps', 'type_vocab_size'])
def test_weights_of_an_architecture_no_setting_gives_are_refused_naming_the_keys(tmp_path, values, named):
    """The run builds its networks with fields no key of its config sets (GELU, LayerNorm epsilon 1e-12, two token
    types, as the official code): a source of a relu activation was trained and exported as a GELU model, silently (its
    logits 0.15 off); a source of one token type got an "or set: ..." fix that could not work. Refused in one line,
    before any data, with no flags offered; weights of the run's architecture start the run as transformers' own
    classes compute them."""
    cfg = tiny_cfg()
    save_pair(tmp_path / 'run', cfg)
    for net in ('generator', 'discriminator'):
        source = getattr(transformers, f"ElectraFor{'MaskedLM' if net == 'generator' else 'PreTraining'}")
        model = source.from_pretrained(tmp_path / 'run' / net)
        if 'type_vocab_size' in values:  # its one token-type row, as such a model is saved
            types = model.electra.embeddings.token_type_embeddings
            types.weight.data = types.weight.data[:1]
        model.config.update(values)
        model.save_pretrained(tmp_path / 'other' / net)
        tok = transformers.ElectraTokenizerFast.from_pretrained(tmp_path / 'run' / net)
        tok.save_pretrained(tmp_path / 'other' / net)
    message = refused(lambda: check_init_config(cfg, load_init(str(tmp_path / 'other'))),
                      f'init_from: {tmp_path / "other"}: ', named, 'no setting of this run gives',
                      'fine-tune its discriminator')
    assert ' or set: ' not in message and '--hidden_size' not in message  # no flags that cannot fix it
    init = load_init(str(tmp_path / 'run'))  # the run's own architecture: accepted, the same function
    check_init_config(cfg, init)
    model = init_model_(build_pretraining_model(cfg, token_ids(len(WORDS))), init).eval()
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    theirs = transformers.ElectraForPreTraining.from_pretrained(tmp_path / 'run' / 'discriminator',
                                                                attn_implementation='sdpa').eval()  # as the run's
    with torch.no_grad():
        # to float rounding (attention sums in another order), where a relu source's logits were 0.15 off
        torch.testing.assert_close(model.discriminator(ids).logits, theirs(ids).logits, rtol=0, atol=1e-6)


def test_every_field_of_an_electra_config_is_checked_or_the_run_s_own():
    "A field transformers adds to ElectraConfig is classified before `init_from` ignores it."
    fields = set(transformers.ElectraConfig().to_dict())
    classified = set(SIZE_KEYS) | set(FIXED_KEYS) | set(RUN_OWN_KEYS)
    assert fields == classified, fields ^ classified


def test_a_generator_and_discriminator_of_two_tokenizers_are_refused_naming_the_first_differing_token(tmp_path):
    """`--init_from GEN,DISC` read the discriminator's tokenizer alone: a generator whose tokenizer orders two tokens
    otherwise (self-consistent with its own) was fed ids meaning other tokens to it, silently. Refused as a
    mismatched frozen generator is (`vocabulary_mismatch`), naming the first token whose id differs."""
    cfg = tiny_cfg()
    save_pair(tmp_path / 'run', cfg)
    gen = tmp_path / 'run' / 'generator'
    words = list(WORDS)
    words[10], words[11] = words[11], words[10]  # w5 and w6 swapped in the generator's tokenizer
    transformers.ElectraTokenizerFast(vocab={w: i for i, w in enumerate(words)}).save_pretrained(gen)
    refused(lambda: load_init(f"{gen},{tmp_path / 'run' / 'discriminator'}"),
            f"init_from: {gen}'s vocabulary (100 tokens) is not the discriminator's tokenizer's (100 tokens; 'w5' is "
            "11 there, 10 here)", 'trained together')


@pytest.mark.parametrize('recorded, length, trained', [(64, 32, 64), (32, 64, 64), (None, 32, None)])
def test_the_length_the_positions_were_trained_at_carries_over_from_the_weights(tmp_path, recorded, length, trained):
    """A run continued from weights pretrained at `recorded` tokens, at `max_length` `length`, has position rows
    trained up to the longer of the two (its discriminator's `pretraining_max_length`); weights that record none (a hub
    model without the field) leave it unknown: nothing recorded, rather than rows called untrained that were trained.
    A resume takes the checkpoint's value; typing it is refused."""
    save_pair(tmp_path / 'run', tiny_cfg())
    config = tmp_path / 'run' / 'discriminator' / 'config.json'
    values = json.loads(config.read_text())
    values.pop('pretraining_max_length')
    config.write_text(json.dumps({**values, **({'pretraining_max_length': recorded} if recorded else {})}))
    cfg = tiny_cfg(max_length=length, init_from=str(tmp_path / 'run'))
    check_init_config(cfg, load_init(str(tmp_path / 'run')))
    assert cfg.init_max_length == (recorded or 0)
    assert getattr(discriminator_config(cfg, 100, 0), 'pretraining_max_length', None) == trained
    assert ('pretraining_max_length' in discriminator_config(cfg, 100, 0).to_dict()) == bool(trained)  # none written
    resumed = tiny_cfg(max_length=length)
    resumed.resume_start(str(tmp_path / 'run'), 'c.pth', 'r', init_max_length=cfg.init_max_length)
    assert getattr(discriminator_config(resumed, 100, 0), 'pretraining_max_length', None) == trained
    assert discriminator_config(tiny_cfg(max_length=length), 100, 0).pretraining_max_length == length  # from scratch
