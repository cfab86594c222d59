"""Fast-ELECTRA (objective fast_electra): an existing masked LM, a tiny ElectraForMaskedLM or BertForMaskedLM written
here with save_pretrained, generates with an annealed temperature and is never trained; its FLOPs, its refusals, and
a run through the driver that resumes."""
import math
import string

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import (BertConfig, BertForMaskedLM, ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining)

import electra.objective.model as model_module
from tests.support import runners
from tests.support import baseline
from electra.config.errors import ConfigError
from electra.data.tokenizer import load_tokenizer
from electra.objective.flops import pretrain_flops
from electra.objective.masking import MaskingSettings, max_predictions
from electra.objective.model import build_pretraining_model
from electra.pretrained.export import load_discriminator
from electra.pretrained.generator import check_generator, load_generator
from electra.pretraining.init_from import load_init
from electra.training.checkpoint import load_checkpoint
from electra.training.step import one_graph_supported
from tests.support.config import refused
from tests.support.pretrain import TINY as DRIVER_TINY, pretrain, without
from tests.support.tiny import tiny_cfg, token_ids

pytestmark = pytest.mark.usefixtures('one_thread')
SPECIAL = {0: '[PAD]', 100: '[UNK]', 101: '[CLS]', 102: '[SEP]', 103: '[MASK]'}
# BERT's special ids, then letters and word pieces enough to spell any lowercase word of the demo corpus
WORDS = [*string.ascii_lowercase, *(f'##{c}' for c in string.ascii_lowercase), '.', ',', '-', "'"]
VOCAB = [SPECIAL.get(i, f'[unused{i}]') for i in range(104)] + WORDS
V = len(VOCAB)  # 160
SIZES = dict(vocab_size=V, hidden_size=24, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
             max_position_embeddings=64)


def write_vocab(path, tokens) -> str:
    path.write_text(''.join(t + '\n' for t in tokens))
    return str(path)


@pytest.fixture(scope='module')
def generators(tmp_path_factory):
    "Local save_pretrained folders of a tiny ELECTRA generator and a tiny BERT MLM, each with its tokenizer."
    root = tmp_path_factory.mktemp('generators')
    tokenizer = load_tokenizer(write_vocab(root / 'vocab.txt', VOCAB))
    torch.manual_seed(0)
    nets = {'electra': ElectraForMaskedLM(ElectraConfig(embedding_size=16, **SIZES)),
            'bert': BertForMaskedLM(BertConfig(**SIZES))}
    for name, net in nets.items():
        net.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root


def mlm_bias(net) -> torch.Tensor:
    "The output bias of the MLM head, one entry per vocabulary token."
    return net.generator_lm_head.bias if isinstance(net, ElectraForMaskedLM) else net.cls.predictions.bias


def fast_cfg(folder, **kw):
    return tiny_cfg(objective='fast_electra', generator=str(folder), tie_weights='none', dropout=0.0,
                    temperature_start=3.0, **kw)


def fast_runner(folder, steps: int, **kw):
    "A fast_electra model on the tiny generator in `folder` and the real pretraining Learner on synthetic batches."
    cfg = fast_cfg(folder, steps=steps, warmup_steps=0, **kw)
    frozen = load_generator(str(folder))
    check_generator(cfg, frozen, frozen.tokenizer)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, token_ids(V, mask=103), generator=frozen.net)
    runner = runners.LearnerRunner('t', cfg, model, baseline.synthetic_batches(steps, 4, 16, V, seed=3),
                                   torch.device('cpu'), 'fp32')
    runner.loader.n = steps
    return cfg, model, runner


@pytest.mark.parametrize('kind, pad', [('electra', 64), ('bert', 0)])
def test_the_generator_is_never_trained_and_holds_no_optimizer_state(generators, kind, pad):
    """3 steps: the generator equals its saved weights bit for bit, has no gradient, no optimizer state, no loss; with
    the discriminator's vocabulary padded (192 rows), the generator's 160 columns are the only ones sampled."""
    cfg, model, runner = fast_runner(generators / kind, steps=3, pad_vocab_multiple=pad)
    assert model.discriminator.config.vocab_size == (192 if pad else V)
    disc_before = {k: v.clone() for k, v in model.discriminator.state_dict().items()}
    runner.learn.fit(1)
    saved = type(model.generator).from_pretrained(generators / kind).state_dict()
    assert saved.keys() == model.generator.state_dict().keys()
    assert all(torch.equal(v, saved[k]) for k, v in model.generator.state_dict().items())
    assert not model.generator.training  # no dropout: it only infers
    frozen = {id(p) for p in model.generator.parameters()}
    opt = runner.learn.opt
    assert not any(id(p) in frozen for g in opt.param_groups for p in g['params'])
    assert not any(id(p) in frozen for p in opt.opt.state) and len(opt.opt.state) > 0
    assert all(p.grad is None and not p.requires_grad for p in model.generator.parameters())
    sums = dict(zip(('loss', 'gen_loss', 'disc_loss', 'gen_correct', 'gen_total'), runner.learn.pretraining_step.sums))
    assert sums['gen_loss'] == 0 and sums['gen_total'] > 0 and sums['disc_loss'] > 0  # no loss; its accuracy counted
    assert sums['loss'] == pytest.approx(cfg.disc_loss_weight * float(sums['disc_loss']))  # no generator term
    assert any(not torch.equal(v, disc_before[k]) for k, v in model.discriminator.state_dict().items())
    ids, tt = baseline.synthetic_batches(1, 8, 16, V, seed=5)[0]
    m = MaskingSettings((101, 102, 103, 0), 0, 103, V)(ids, torch.Generator().manual_seed(0))
    model.rng = torch.Generator().manual_seed(0)
    flat = torch.full((V,), -1e4).index_fill_(0, torch.tensor([150]), 1e4)  # a generator sure of token 150 ...
    with torch.no_grad(): mlm_bias(model.generator).copy_(flat)           # ... samples it at every masked position
    sampled = model(m.input_ids, tt, m.positions, m.labels)['sampled'][m.labels >= 0]
    assert (sampled == 150).all()


@pytest.mark.parametrize('shape, by_hand', [
    ('linear', [3.0, 2.6, 2.2, 1.8, 1.4]),                                            # 1 + 2 (1 - t/5)
    ('cosine', [1 + (1 + math.cos(math.pi * t / 5)) for t in range(5)]),             # 1 + 2 (1 + cos(pi t/5)) / 2
    ('exponential', [3 ** (1 - t / 5) for t in range(5)])])                          # 1 x 3^(1 - t/5)
def test_the_temperature_each_step_samples_with_is_the_schedules_formula(generators, monkeypatch, shape, by_hand):
    real, seen = model_module.sample_tokens, []

    def spy(logits, labels, temperature, *args):
        seen.append(float(temperature))
        return real(logits, labels, temperature, *args)
    monkeypatch.setattr(model_module, 'sample_tokens', spy)
    _, _, runner = fast_runner(generators / 'electra', steps=5, temperature_schedule=shape)
    runner.learn.fit(1)
    assert seen == pytest.approx(by_hand, rel=1e-6)


def test_the_flops_of_a_step_count_the_frozen_generator_forward_only(generators):
    "The forward against torch's FLOP counter and a hand count; a step = the generator once + the discriminator 3x."
    for kind in ('electra', 'bert'):
        frozen = load_generator(str(generators / kind))
        cfg = fast_cfg(generators / kind)
        torch.manual_seed(0)
        model = build_pretraining_model(cfg, token_ids(V, mask=103), generator=frozen.net)
        ids = torch.randint(104, V, (3, 12), generator=torch.Generator().manual_seed(0))
        ids[:, 0], ids[:, -1] = 101, 102
        m = MaskingSettings((101, 102, 103, 0), 0, 103, V, mask_prob=0.3)(ids, torch.Generator().manual_seed(1))
        for net in (model.generator, model.discriminator): net.set_attn_implementation('eager')
        with FlopCounterMode(display=False) as counter:
            model(m.input_ids, torch.zeros_like(ids), m.positions, m.labels)
        P = m.positions.shape[1]
        fl = pretrain_flops(cfg, 3, 12, V, P, frozen.net.config)
        assert counter.get_total_flops() == fl['forward']
        T, n, E = 36, 3 * P, 16 if kind == 'electra' else 24  # BERT's head: dense 24 -> 24, decoder 24 -> V
        project = 2 * T * 16 * 24 if kind == 'electra' else 0
        layer = 2 * T * 24 * 72 + 2 * T * 24 * 24 + 2 * 2 * 3 * 12 * 12 * 24 + 2 * 2 * T * 24 * 32
        assert fl['generator_encoder'] + fl['generator_head'] == project + layer + 2 * n * 24 * E + 2 * n * E * V
        main = fl['discriminator_encoder'] + fl['discriminator_head']
        assert fl['train_step'] == fl['generator_encoder'] + fl['generator_head'] + 3 * main


def test_a_generator_of_another_vocabulary_or_kind_and_an_offline_hub_name_are_refused_in_one_line(generators, tmp_path):
    frozen = load_generator(str(generators / 'bert'))
    cfg = fast_cfg(generators / 'bert')
    swapped = load_tokenizer(write_vocab(tmp_path / 'vocab.txt', VOCAB[:104] + ['b', 'a'] + WORDS[2:]))
    with pytest.raises(ConfigError) as e:
        check_generator(cfg, frozen, swapped)
    assert "generator: " in str(e.value) and "'a' is 104 there, 105 here" in str(e.value) and '\n' not in str(e.value)
    with pytest.raises(ConfigError, match=r'reads at most 64 tokens, fewer than max_length 128'):
        check_generator(fast_cfg(generators / 'bert', max_length=128, max_position_embeddings=512), frozen,
                        frozen.tokenizer)
    disc = tmp_path / 'disc'
    ElectraForPreTraining(ElectraConfig(embedding_size=16, **SIZES)).save_pretrained(disc)
    frozen.tokenizer.save_pretrained(disc)
    with pytest.raises(ConfigError, match=r'generator: .*disc holds a ElectraForPreTraining, not one of '
                                          r'ElectraForMaskedLM, BertForMaskedLM'):
        load_generator(str(disc))
    with pytest.raises(ConfigError) as e:
        load_generator('nobody-here/no-such-generator')
    assert str(e.value).startswith("generator: cannot load the generator 'nobody-here/no-such-generator'")
    assert 'Use local copies instead: a save_pretrained directory' in str(e.value) and '\n' not in str(e.value)


def test_a_fast_electra_run_resumed_from_its_half_ends_as_the_straight_run(generators, tmp_path):
    """Through pretrain.py on the demo corpus: it tokenizes with the generator's tokenizer, exports no generator, and
    a run stopped after its 50% checkpoint and resumed ends with the uninterrupted run's weights, bit for bit."""
    # (no --vocab_size: the generator's tokenizer is the run's, of its own size)
    argv = [*without(DRIVER_TINY, '--vocab_size'), '--steps', '8', '--log_every', '4', '--eval_examples', '0',
            '--config', 'demo,fast_electra',
            '--generator', str(generators / 'bert'), '--run_name', 'fast', '--checkpoint_at', '0.5,1.0']
    straight = pretrain(tmp_path, *argv)
    assert straight['tokenizer'].get_vocab() == load_generator(str(generators / 'bert')).tokenizer.get_vocab()
    run_dir = tmp_path / 'ckpt' / 'fast_11081'
    assert (run_dir / 'discriminator').is_dir() and not (run_dir / 'generator').exists()
    (tmp_path / 'ckpt' / 'fast_11081_100%.pth').unlink()  # as if stopped after the 50% checkpoint
    resumed = pretrain(tmp_path, *argv, '--resume')
    assert resumed['start_step'] == 4
    final = resumed['model'].state_dict()
    assert all(torch.equal(final[k], v) for k, v in straight['model'].state_dict().items())
    saved = BertForMaskedLM.from_pretrained(generators / 'bert').state_dict()
    assert all(torch.equal(resumed['model'].generator.state_dict()[k], v) for k, v in saved.items())
    half = tmp_path / 'ckpt' / 'fast_11081_50%.pth'  # fine-tuning reads its discriminator; init_from refuses it
    assert torch.equal(load_discriminator(half)[0].state_dict()['discriminator_predictions.dense.weight'],
                       load_checkpoint(half)['model']['discriminator.discriminator_predictions.dense.weight'])
    with pytest.raises(ConfigError, match=r"^init_from: .*fast_11081_50%\.pth is a fast_electra run's, whose generator "
                                          r"is the existing .*bert: continuing from it is not supported"):
        load_init(str(half))


def test_a_comparison_spends_electras_flops_on_fast_electra_with_its_generator_counted_once(generators):
    from electra.experiments.compare import load_compare_config
    from electra.experiments.plan import make_plan
    folder = generators / 'electra'
    variants = f'{{electra: "", fast: {{config: fast_electra, overrides: {{generator: {folder}}}}}}}'
    plan = make_plan(load_compare_config(['--config', 'demo', '--variants', variants, '--pretrain.corpus', 'demo',
                                          '--finetune.data', 'demo']))
    electra, fast = plan.variants
    net = ElectraForMaskedLM.from_pretrained(folder).config
    c = fast.config  # its vocabulary: the generator's (the run tokenizes with its tokenizer)
    parts = pretrain_flops(c, c.batch_size, c.max_length, V, max_predictions(c.mask_prob, c.max_length), net)
    assert fast.flops_per_step == parts['generator_encoder'] + parts['generator_head'] + 3 * (
        parts['discriminator_encoder'] + parts['discriminator_head'])
    assert fast.steps == round(electra.steps * electra.flops_per_step / fast.flops_per_step)
    assert ['--generator', str(folder)] in [plan.runs[1].pretrain_args[i:i + 2] for i in range(40)]


@pytest.mark.skipif(not one_graph_supported(), reason='torch < 2.11 cannot trace the backward into a graph')
def test_the_step_compiled_as_one_graph_reads_each_steps_temperature_without_compiling_again(generators):
    "3 steps whose temperature changes every step: one graph (aot_eager), and the eager run's weights."
    from tests.training.test_one_graph import CountingBackend
    weights = []
    for compiled in (False, True):
        _, model, runner = fast_runner(generators / 'electra', steps=3, compile=compiled, compile_scope='step')
        backend = CountingBackend()
        runner.learn.pretraining_step.backend = backend
        runner.learn.fit(1)
        assert runner.learn.pretraining_step.compiled is (True if compiled else None)
        assert backend.graphs == compiled
        weights.append(model.state_dict())
    for k, v in weights[0].items(): torch.testing.assert_close(weights[1][k], v, rtol=0, atol=1e-6, msg=k)


def test_the_frozen_generators_accuracy_is_its_recount_and_its_loss_nan(generators, tmp_path):
    """The frozen generator still predicts: metrics.csv's and the held-out evaluation's gen_accuracy equal a recount by
    transformers' ElectraForMaskedLM on the same masked inputs; its loss, not computed, is NaN (never 0). The generator
    favours the words 104-106 and the batches hold the words 104-109: it is right at some masked positions only."""
    from electra.pretraining.evaluation import HeldOutEvaluation, held_out_seeds
    folder, net = tmp_path / 'gen', ElectraForMaskedLM.from_pretrained(generators / 'electra')
    with torch.no_grad(): net.generator_lm_head.bias[104:107] += 20.0
    net.save_pretrained(folder)
    load_generator(str(generators / 'electra')).tokenizer.save_pretrained(folder)
    cfg = fast_cfg(folder, steps=3, warmup_steps=0, log_every=3)
    frozen = load_generator(str(folder))
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, token_ids(V, mask=103), generator=frozen.net)
    runner = runners.LearnerRunner('t', cfg, model, baseline.synthetic_batches(3, 4, 16, 110, seed=3),
                                   torch.device('cpu'), 'fp32')
    runner.loader.n = 3
    seen = []
    # each step's input_ids, token_type_ids, positions, labels
    model.register_forward_hook(lambda m, args, out: seen.append(args[:4]))
    rows = []
    runner.learn.metrics_logger.sinks = [rows.append]
    held_out = baseline.synthetic_batches(1, 4, 16, 110, seed=5)
    masking = runner.learn.pretraining_step.constants.masking
    evaluation = HeldOutEvaluation(held_out, 3, 3, runner.run_dir / 'eval.csv', masking, seed=7)
    runner.learn.add_cb(evaluation)
    runner.learn.fit(1)
    net = ElectraForMaskedLM.from_pretrained(folder).eval()

    def recount(input_ids, token_type_ids, positions, labels) -> tuple[int, int]:
        with torch.no_grad():
            logits = net(input_ids, attention_mask=input_ids != 0, token_type_ids=token_type_ids).logits
        preds = logits.gather(1, positions[..., None].expand(-1, -1, logits.size(-1))).argmax(-1)       # [B, P]
        return int(((preds == labels) & (labels >= 0)).sum()), int((labels >= 0).sum())

    counts = [recount(*args) for args in seen[:3]]  # the 3 training steps (the evaluation's forward is not hooked)
    assert 0 < sum(c for c, _ in counts) < sum(n for _, n in counts)
    assert len(rows) == 1 and rows[0]['gen_accuracy'] == sum(c for c, _ in counts) / sum(n for _, n in counts)
    assert math.isnan(rows[0]['gen_loss']) and rows[0]['disc_loss'] > 0
    ids, types = held_out[0]
    m = masking(ids, torch.Generator().manual_seed(held_out_seeds(7)[0]))  # the evaluation's masks: its first draws
    correct, total = recount(m.input_ids, types, m.positions, m.labels)
    row = evaluation.last_row
    assert 0 < correct < total and row['gen_accuracy'] == correct / total and math.isnan(row['gen_loss'])
    chosen = m.labels[m.labels >= 0]  # its baseline: always the most frequent masked token
    assert row['gen_accuracy_baseline'] == chosen.bincount().max().item() / total


@pytest.mark.parametrize('kind', ['electra', 'bert'])
def test_a_generator_of_one_token_type_is_refused_before_the_data_is_built(generators, tmp_path, kind):
    """A masked LM with type_vocab_size 1 (BERT-style models saved so) as `--generator` ended in an IndexError after the
    data build: every example is a pair with segment B of token type 1 (the official `[CLS] A [SEP] B [SEP]`),
    which transformers' own class cannot read. Refused in one line naming the key and what works."""
    cls, config = ((ElectraForMaskedLM, ElectraConfig(embedding_size=16, type_vocab_size=1, **SIZES))
                   if kind == 'electra' else (BertForMaskedLM, BertConfig(type_vocab_size=1, **SIZES)))
    cls(config).save_pretrained(tmp_path / kind)
    load_tokenizer(str(generators / kind)).save_pretrained(tmp_path / kind)
    frozen = load_generator(str(tmp_path / kind))
    with pytest.raises(IndexError):  # what the run met
        frozen.net(torch.tensor([[2, 110, 3, 111, 3]]), token_type_ids=torch.tensor([[0, 0, 0, 1, 1]]))
    refused(lambda: check_generator(fast_cfg(tmp_path / kind), frozen, frozen.tokenizer),
            f'generator: {tmp_path / kind} has one token type (type_vocab_size 1 in its config), but every example '
            'is a sentence pair, segment B token type 1', 'type_vocab_size 2')
