"""electra/objective/model.py: sizes, tying, the generator head, sampling, initialisation, padded vocabulary."""
import dataclasses

import pytest
import torch

from electra.config.cli import load_config
from electra.config.errors import ConfigError
from electra.config.pretrain import PretrainConfig
from electra.objective.masking import mask_tokens
from electra.objective.model import build_pretraining_model, generator_config, padded_vocab_size
from electra.objective.sampling import sample_tokens
from tests.support import baseline
from tests.support.tiny import V, batches, tiny_cfg, token_ids
from tests.support.tiny import tiny_model as tiny_model_of

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, embedding_size=24,
            generator_size=0.5, dropout=0.0)


def tiny_model(**kw):
    torch.manual_seed(0)
    return build_pretraining_model(PretrainConfig(**{**TINY, **kw}), token_ids(97))


@pytest.mark.parametrize('preset,hidden,heads,ffn,layers', [
    ('small', 64, 1, 256, 12), ('small++', 256, 4, 1024, 12), ('base', 256, 4, 1024, 12), ('large', 256, 4, 1024, 24)])
def test_generator_sizes_from_presets(preset, hidden, heads, ffn, layers):
    cfg = load_config(PretrainConfig, ['--config', preset], preset_dir='configs/pretrain')
    g = generator_config(cfg, 30522, 0)
    assert (g.hidden_size, g.num_attention_heads, g.intermediate_size, g.num_hidden_layers) == (hidden, heads, ffn, layers)
    assert g.embedding_size == cfg.embedding_size


def test_generator_ffn_is_four_times_its_hidden_whatever_the_discriminators():
    # official get_generator_config: intermediate = 4 x generator hidden (here the discriminator's FFN is 2 x hidden)
    g = generator_config(PretrainConfig(**TINY), 97, 0)
    assert (g.hidden_size, g.intermediate_size, g.num_attention_heads) == (16, 64, 1)


def test_embeddings_tied_as_one_module():
    m = tiny_model()
    ge, de = m.generator.electra.embeddings, m.discriminator.electra.embeddings
    for name in ['word_embeddings.weight', 'position_embeddings.weight', 'token_type_embeddings.weight',
                 'LayerNorm.weight', 'LayerNorm.bias']:
        assert ge.get_parameter(name).data_ptr() == de.get_parameter(name).data_ptr(), name
    assert m.generator.generator_lm_head.weight.data_ptr() == de.word_embeddings.weight.data_ptr()
    # embeddings_project stays per network (24 -> 16 for the generator, 24 -> 32 for the discriminator)
    assert m.generator.electra.embeddings_project.weight.data_ptr() != m.discriminator.electra.embeddings_project.weight.data_ptr()
    # the optimizer sees each shared tensor once, so one step moves the shared table once
    names = [n for n, _ in m.named_parameters()]
    assert sum(n.endswith('embeddings.word_embeddings.weight') for n in names) == 1
    assert sum(n.endswith('embeddings.LayerNorm.weight') for n in names) == 1


def test_no_tying_and_all_tying():
    m = tiny_model(tie_weights='none')
    assert m.generator.electra.embeddings.word_embeddings.weight.data_ptr() != \
        m.discriminator.electra.embeddings.word_embeddings.weight.data_ptr()
    assert m.generator.generator_lm_head.weight.data_ptr() == m.generator.electra.embeddings.word_embeddings.weight.data_ptr()
    m = tiny_model(tie_weights='all', generator_size=1.0)
    assert m.generator.electra is m.discriminator.electra
    with pytest.raises(ConfigError, match="tie_weights"):
        PretrainConfig(**{**TINY, 'tie_weights': 'all'}).validate()


def test_masked_only_head_equals_full_generator_gathered():
    m = tiny_model().eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 97, (3, 12), generator=g)
    tt = torch.zeros_like(ids)
    positions = torch.tensor([[1, 4, 7], [2, 3, 9], [0, 5, 11]])
    attn = torch.ones_like(ids, dtype=torch.bool)
    fast = m.generator_logits(ids, attn, tt, positions)
    full = m.generator(ids, attention_mask=attn, token_type_ids=tt).logits          # transformers' own head
    ref = full.gather(1, positions[..., None].expand(-1, -1, full.size(-1)))
    assert torch.allclose(fast, ref, atol=1e-5)


def test_discriminator_sees_samples_and_labels_follow():
    m = tiny_model().eval()
    m.rng = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 97, (4, 10), generator=torch.Generator().manual_seed(1))
    positions = torch.tensor([[1, 2]] * 4)
    labels = ids.gather(1, positions).clone()
    labels[0, 1] = -100
    out = m(ids, torch.zeros_like(ids), positions, labels)
    repl = out['is_replaced']
    assert not repl[:, [0, 3, 4, 5, 6, 7, 8, 9]].any() and not repl[0, 2]
    expect = (out['sampled'] != labels) & (labels >= 0)
    assert torch.equal(repl.gather(1, positions), expect)


@pytest.mark.parametrize('favoured, replaced', [(50, False), (60, True)])
def test_sample_equal_to_the_original_counts_as_original(favoured, replaced):
    """A generator that reproduces the original token (its output bias makes it certain) replaces nothing: the
    discriminator sees the original and its label says original. Favouring another token replaces every slot."""
    m = tiny_model().eval()
    m.rng = torch.Generator().manual_seed(0)
    original = torch.full((4, 10), 50)
    positions = torch.tensor([[1, 2, 5]] * 4)
    labels = original.gather(1, positions)
    labels[0, 2] = -100                                                 # an unused slot: never replaced
    masked = original.scatter(1, positions, 4)                          # [MASK] at the chosen positions
    with torch.no_grad():
        m.generator.generator_lm_head.bias.zero_()
        m.generator.generator_lm_head.bias[favoured] = 1e4
        out = m(masked, torch.zeros_like(masked), positions, labels)
    chosen = torch.zeros_like(original, dtype=torch.bool).scatter(1, positions, labels >= 0)
    assert torch.equal(out['sampled'], torch.full_like(labels, favoured))
    assert torch.equal(out['is_replaced'], chosen if replaced else torch.zeros_like(chosen))


def test_a_repeated_position_gets_the_floor_of_the_mean_of_its_samples(monkeypatch):
    """Official `scatter_update` at a position chosen twice ('with_replacement' masking): samples 10 and 12 for an
    original 11 write floor(22 / 2) = 11, which counts as original; samples 20 and 25 write 22, a replacement."""
    import electra.objective.model
    m = tiny_model().eval()
    original = torch.full((1, 10), 11)
    original[0, 6] = 21
    positions = torch.tensor([[3, 3, 6, 6, 8]])
    labels = torch.tensor([[11, 11, 21, 21, -100]])
    samples = torch.tensor([[10, 12, 20, 25, 50]])
    monkeypatch.setattr(electra.objective.model, 'sample_tokens', lambda *a, **k: samples)
    masked = original.scatter(1, positions[:, :4], 4)
    with torch.no_grad():
        out = m(masked, torch.zeros_like(masked), positions, labels)
    expected_input = masked.clone()
    expected_input[0, 3], expected_input[0, 6] = 11, 22      # the unused slot (position 8) writes nothing
    assert torch.equal(out['disc_logits'], m.discriminator(expected_input, token_type_ids=torch.zeros_like(masked)).logits)
    assert out['is_replaced'].nonzero().tolist() == [[0, 6]]


@pytest.mark.parametrize('init', ['official', 'hf'])
def test_initialisation_official_or_transformers(init):
    """'official': truncated normal(0, 0.02) cut at 2 std (std 0.02 * 0.8796), biases 0; glorot uniform for
    embeddings_project and the discriminator's output layer. 'hf': transformers' normal(0, 0.02)."""
    torch.manual_seed(0)
    m = build_pretraining_model(PretrainConfig(**{**TINY, 'init': init}), token_ids(2000))
    words = m.discriminator.electra.embeddings.word_embeddings.weight[1:]           # 64k draws ([PAD] row aside)
    dense = m.discriminator.electra.encoder.layer[0].intermediate.dense
    project = m.discriminator.electra.embeddings_project.weight                     # [32, 24]
    out = m.discriminator.discriminator_predictions.dense_prediction.weight         # [1, 32]
    if init == 'official':
        for w in (words, dense.weight):
            assert float(w.abs().max()) <= 0.04 and float(w.std()) == pytest.approx(0.02 * 0.87962, rel=0.03)
        for w, fan in ((project, 24 + 32), (out, 32 + 1)):
            bound = (6 / fan) ** 0.5
            assert 0.9 * bound < float(w.abs().max()) <= bound
        assert not dense.bias.any() and not m.generator.generator_lm_head.bias.any()
    else:
        assert float(words.abs().max()) > 0.06 and float(words.std()) == pytest.approx(0.02, rel=0.03)
        assert float(project.std()) == pytest.approx(0.02, rel=0.2)


@pytest.mark.usefixtures('one_thread')
def test_padded_vocab_equals_unpadded_and_never_samples_padding():
    cfg = tiny_cfg(dropout=0.0)
    plain = tiny_model_of(cfg).eval()
    padded = baseline.padded_like(plain, dataclasses.replace(cfg, pad_vocab_multiple=64), V).eval()
    assert padded_vocab_size(V, 64) == 128 and padded.generator.config.vocab_size == 128 and padded.vocab_size == V
    (ids, tt), _ = batches(cfg)
    m = mask_tokens(ids, torch.tensor([0, 101, 102, 103]), 0, 103, V, draws=torch.Generator().manual_seed(0))
    attn = ids != 0
    with torch.no_grad():
        a = plain.generator_logits(m.input_ids, attn, tt, m.positions)
        b = padded.generator_logits(m.input_ids, attn, tt, m.positions)
    assert torch.allclose(a, b[..., :V], atol=1e-6) and torch.isneginf(b[..., V:]).all()
    # the same generator loss (padded logits add nothing to the softmax)
    ce = lambda lg: torch.nn.functional.cross_entropy(lg.flatten(0, 1), m.labels.flatten(), ignore_index=-100)
    assert float(ce(a)) == pytest.approx(float(ce(b)), rel=1e-6)
    # even if the padding rows' bias made them the likeliest tokens, they are never sampled (nor uniformly)
    with torch.no_grad(): padded.generator.generator_lm_head.bias[V:] = 1e4
    uniform = tiny_model_of(dataclasses.replace(cfg, pad_vocab_multiple=64, uniform_generator=True))
    for model in (padded, uniform):
        model.rng = torch.Generator().manual_seed(1)
        for _ in range(20):
            out = model(m.input_ids, tt, m.positions, m.labels)
            assert (out['sampled'] < V).all()
    big = torch.zeros(4000, 128)
    big[:, V:] = float('-inf')
    assert (sample_tokens(big, uniform=True) < V).all()


@pytest.mark.usefixtures('one_thread')
def test_sdpa_mask_gives_transformers_own_result():
    "The [B, 1, 1, L] mask the model passes (no host sync) gives what transformers computes from the 2-D mask."
    cfg = tiny_cfg(dropout=0.0)
    model = tiny_model_of(cfg).eval()
    (ids, tt), _ = batches(cfg)
    ids[0, 10:] = 0
    from electra.objective.model import sdpa_mask
    attn = ids != 0
    with torch.no_grad():
        ours = model.discriminator(ids, attention_mask=sdpa_mask(model.discriminator, attn), token_type_ids=tt).logits
        theirs = model.discriminator(ids, attention_mask=attn.long(), token_type_ids=tt).logits
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_sizes_too_large_for_the_memory_are_refused_naming_them():
    "hidden_size 1e9 (each size in its domain) ended in the allocator's RuntimeError traceback; one line naming the sizes."
    huge = dict(hidden_size=10 ** 9, intermediate_size=10 ** 9, embedding_size=10 ** 9, num_attention_heads=1)
    with pytest.raises(ConfigError, match=r"^hidden_size 1000000000, intermediate_size 1000000000, embedding_size "
                                          r"1000000000 and \d+ layers over \d+ tokens make a model that this machine's "
                                          r"memory cannot hold \(.*\)\. Choose smaller sizes"):
        build_pretraining_model(PretrainConfig(**{**TINY, **huge}), token_ids(V))


@pytest.mark.parametrize('init', ['official', 'hf'])
def test_a_padded_model_is_built_with_the_unpadded_model_s_weights_and_leaves_the_random_stream_alike(init):
    """`pad_vocab_multiple` changes the speed alone: a fresh padded model holds the weights of the unpadded one built
    from the same seed (its padding rows zero, never read), and torch's stream is left where that build leaves it, so
    the run's dropout is the same too. The padding rows' initialisation drew from the stream: every weight initialised
    after them, and the dropout of every step, were other numbers."""
    cfg = tiny_cfg(dropout=0.0, init=init)
    plain = tiny_model_of(cfg)
    after = torch.rand(4)
    padded = tiny_model_of(dataclasses.replace(cfg, pad_vocab_multiple=64))
    assert torch.equal(torch.rand(4), after) and padded.discriminator.config.vocab_size == 128
    state = padded.state_dict()
    for k, v in plain.state_dict().items():
        assert torch.equal(state[k][:len(v)], v), k
        assert not state[k][len(v):].any(), k  # the padding rows (and the generator's output bias) zero


@pytest.mark.parametrize('objective', ['electra', 'mlm'])
def test_the_parameter_line_names_what_the_objective_s_model_has(objective):
    """ELECTRA: the discriminator, and generator + discriminator (as pretrain.py printed them); BERT (no generator):
    the network and the network with its MLM head, counted by transformers' own classes (the head's projection is
    the word embeddings, its bias its own)."""
    from transformers import ElectraForMaskedLM, ElectraForPreTraining
    from transformers.models.electra.modeling_electra import ElectraGeneratorPredictions

    from electra.objective.model import parameter_line
    model = tiny_model(objective=objective, **({'tie_weights': 'embeddings'}))
    disc = ElectraForPreTraining(model.discriminator.config).num_parameters()
    if objective == 'electra':  # the generator's embeddings are the discriminator's
        gen = model.generator.config
        shared = sum(p.numel() for p in ElectraForMaskedLM(gen).electra.embeddings.parameters())
        whole = disc + ElectraForMaskedLM(gen).num_parameters() - shared
        assert parameter_line(model) == f'discriminator {disc / 1e6:.2f}M parameters, generator + discriminator ' \
                                        f'{whole / 1e6:.2f}M'
    else:
        config = model.discriminator.config
        whole = disc + sum(p.numel() for p in ElectraGeneratorPredictions(config).parameters()) + config.vocab_size
        assert model.generator is None
        assert parameter_line(model) == f'the network {disc / 1e6:.2f}M parameters, the network + its MLM head ' \
                                        f'{whole / 1e6:.2f}M'
    assert sum(p.numel() for p in model.parameters()) == whole  # exact, beyond the line's two decimals
