"""electra/config/pretrain.py: PretrainConfig's checks and presets; its defaults are the official recipe."""
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from electra.config.cli import load_config
from electra.config.errors import ConfigError, RunWarning
from electra.config.pretrain import RESUME_CONTENT, RESUME_FREE, RESUME_SAID, RESUME_SAME, PretrainConfig
from electra.config.values import config_from_dict
from electra.data.corpus import BuildSettings
from electra.objective.model import build_pretraining_model
from electra.pretraining.step import PretrainingStep
from tests.support import runners
from tests.support import baseline
from tests.support.config import load
from tests.support.tiny import token_ids


def test_invalid_values_rejected():
    with pytest.raises(ConfigError, match='mask_prob'):
        load('--mask_prob', '1.5')
    with pytest.raises(ConfigError, match='num_attention_heads'):
        load('--hidden_size', '65')


def test_gpu_presets_turn_the_speed_settings_on():
    "The presets meant for GPUs compile the step into CUDA graphs and pad the vocabulary; the demo (CPU) does not."
    for name in ('small', 'small++', 'base', 'large'):
        cfg = load('--config', name)
        assert (cfg.compile, cfg.compile_mode, cfg.pad_vocab_multiple) == (True, 'reduce-overhead', 64), name
    demo = load()
    assert (demo.compile, demo.pad_vocab_multiple) == (False, 0)
    with pytest.raises(ConfigError, match="^command line: key 'compile_mode': 'fast' is not one of default, reduce-overhead"):
        load('--compile_mode', 'fast')


@pytest.mark.parametrize('key, value, match', [
    ('lr', 'nan', r"'lr': nan is not a finite number > 0 \(peak learning rate"),
    ('lr', '-1', r"'lr': -1.0 is not a finite number > 0 \(peak learning rate"),
    ('dropout', '1.5', r"'dropout': 1.5 is not a number in \[0, 1\) \("),
    ('weight_decay', '-0.1', r"'weight_decay': -0.1 is not a finite number >= 0 \(decoupled weight decay"),
    ('adam_eps', '0', r"'adam_eps': 0.0 is not a finite number > 0 \(Adam epsilon\)"),
    ('clip_grad', 'inf', r"'clip_grad': inf is not a finite number >= 0 \(0: no clipping; gradient clipping"),
])
def test_optimizer_and_dropout_values_checked_up_front(key, value, match):
    "Refused when the config is built, in one line, not deep inside torch or as a run that trains on NaN."
    with pytest.raises(ConfigError, match=f'^command line: key {match}'):
        load(f'--{key}', value)
    from electra.config.finetune import FinetuneConfig
    with pytest.raises(ConfigError, match=f'^command line: key {match}'):  # the optimizer's keys and these two: both jobs
        load_config(FinetuneConfig, [f'--{key}', value], preset_dir='configs/finetune')


def test_warmup_longer_than_the_run_warns():
    with pytest.warns(RunWarning, match=r'warmup_steps \(10000\) is not shorter than the run \(30 steps\)'):
        load('--config', 'small', '--steps', '30')


def test_presets_hold_paper_recipes():
    def cfg(name): return load_config(PretrainConfig, ['--config', name], preset_dir='configs/pretrain')
    small, base, large = cfg('small'), cfg('base'), cfg('large')
    assert (small.lr, small.batch_size, small.max_length, small.steps) == (5e-4, 128, 128, 1_000_000)
    assert (base.lr, base.batch_size, base.max_length, base.steps, base.hidden_size) == (2e-4, 256, 512, 766_000, 768)
    assert (large.lr, large.batch_size, large.steps, large.mask_prob, large.num_hidden_layers) == (2e-4, 2048, 400_000, 0.25, 24)
    assert small.weight_decay == 0.01 and small.warmup_steps == 10_000 and small.disc_loss_weight == 50.0


def _number(text: str) -> float:
    "A number as docs/fidelity.md's table writes it: 1,000,000, 5e-4, 1/3."
    top, _, bottom = text.replace(',', '').partition('/')
    return float(top) / float(bottom) if bottom else float(top)


def test_the_preset_table_of_the_docs_is_what_each_preset_file_holds():
    """docs/fidelity.md's recipe of each preset, cell by cell, equals what `--config NAME` reads (the generator's
    columns as `generator_config` derives them): the demo row kept an older recipe (400 steps at 5e-4, warm-up 100)
    after its preset changed to 200 steps at 1e-3, warm-up 40."""
    from electra.objective.model import generator_config
    table = Path('docs/fidelity.md').read_text().split('| preset | hidden | layers |', 1)[1].split('\n\n', 1)[0]
    rows = [line.split('|')[1:-1] for line in table.splitlines()[2:]]
    assert [r[0].strip() for r in rows] == ['`small`', '`small++`', '`base`', '`large`', '`demo`']
    for row in rows:
        name, *cells = [c.strip() for c in row]
        cfg = load_config(PretrainConfig, ['--config', name.strip('`')], preset_dir='configs/pretrain')
        g = generator_config(cfg, 30522, 0)
        size, gen = re.fullmatch(r'(\S+) \((\d+) / (\d+) / (\d+)\)', cells[5]).groups()[0], cells[5].split('(')[1]
        held = [cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.intermediate_size,
                cfg.embedding_size, cfg.generator_size, cfg.max_length, cfg.batch_size, cfg.steps, cfg.lr,
                cfg.warmup_steps, cfg.mask_prob]
        said = [_number(c) for c in cells[:5]] + [_number(size)] + [_number(c) for c in cells[6:]]
        assert said == pytest.approx(held, rel=1e-6), name
        assert gen == f'{g.hidden_size} / {g.num_attention_heads} / {g.intermediate_size})', name


def test_a_generator_whose_derived_heads_do_not_divide_its_hidden_size_is_refused_with_sizes_that_do():
    """generator_size 0.5 of hidden 262: the official `get_generator_config` gives hidden 131 and max(1, 131 // 64) = 2
    heads, which transformers builds and the first step's matmul refused (130 x 131) after the data build. Refused in
    one line naming the sizes; each generator_size it offers builds a generator whose forward runs."""
    from transformers import ElectraForMaskedLM
    from electra.objective.model import generator_config
    shape = dict(hidden_size=262, num_attention_heads=2, generator_size=0.5, embedding_size=16, intermediate_size=64,
                 num_hidden_layers=1, max_length=16, max_position_embeddings=16)
    with pytest.raises(ConfigError, match=r"^generator_size: 0\.5 of hidden_size 262 makes a generator of hidden size "
                                          r"131 with 2 heads .* 131 is not divisible by 2\. Give generator_size "
                                          r"0\.496 \(hidden 130\) or 0\.504 \(hidden 132\)\.$") as e:
        config_from_dict(PretrainConfig, shape)
    for size, hidden in (('0.496', 130), ('0.504', 132)):
        g = generator_config(config_from_dict(PretrainConfig, {**shape, 'generator_size': float(size)}), 50, 0)
        assert (g.hidden_size, g.hidden_size % g.num_attention_heads) == (hidden, 0)
        out = ElectraForMaskedLM(g)(torch.tensor([[1, 2, 3]])).logits
        assert out.shape == (1, 3, 50)
    with pytest.raises(ConfigError, match=r'^generator_size: 0\.3 of hidden_size 768 makes .* 230 with 3 heads'):
        load_config(PretrainConfig, ['--config', 'base', '--generator_size', '0.3'], preset_dir='configs/pretrain')
    # no generator network: nothing to refuse (BERT's MLM; the uniform generator)
    assert config_from_dict(PretrainConfig, {**shape, 'objective': 'mlm', 'disc_loss_weight': 1.0}).generator_size == 0.5
    assert config_from_dict(PretrainConfig, {**shape, 'uniform_generator': True}).uniform_generator


def test_config_keys_are_validated():
    from electra.config.pretrain import PretrainConfig
    from electra.config.values import config_from_dict
    with pytest.raises(ConfigError, match='corpus_weights: give one weight per corpus entry'):
        config_from_dict(PretrainConfig, {'corpus': ['a', 'b'], 'corpus_weights': [1.0]})
    with pytest.raises(ConfigError, match='corpus_format'):
        config_from_dict(PretrainConfig, {'corpus_format': 'sentences'})
    cfg = config_from_dict(PretrainConfig, {'corpus': ['a', 'b'], 'corpus_weights': '1,3', 'num_proc': 2})
    assert cfg.corpus_weights == [1.0, 3.0] and BuildSettings.from_config(cfg).max_length == cfg.max_length


# The job's defaults reproduce the official recipe (google-research/electra, configure_pretraining.py and
# pretrain/pretrain_helpers.py): checked through the objects the job builds from a default `PretrainConfig`, not
# by reading the config back, so a changed default fails here whatever the value looks like.
V = 1000
SHAPE = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, embedding_size=16,
             generator_size=0.5, checkpoint_at=[])  # model size only: every objective and optimizer key is default


def default_learner(**kw):
    "The real Learner (`pretraining_learner`) of a default config at a tiny model size."
    cfg = PretrainConfig(**{**SHAPE, **kw})
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, token_ids(V))
    data = baseline.synthetic_batches(1, cfg.batch_size, cfg.max_length, V, seed=1)
    return cfg, runners.LearnerRunner('default', cfg, model, data, torch.device('cpu'), 'fp32').learn


@pytest.mark.usefixtures('one_thread')
def test_default_corruption_is_85_mask_15_kept_0_random():
    "Official: of the chosen positions 85% become [MASK], 15% keep their token, none becomes a random token."
    cfg, learn = default_learner(batch_size=256)
    (ids, types), = baseline.synthetic_batches(1, 256, cfg.max_length, V, seed=2)
    step = next(cb for cb in learn.cbs if isinstance(cb, PretrainingStep))  # the masking the Learner's step runs
    masked, positions, labels = step.constants.masking(ids, torch.Generator().manual_seed(cfg.seed))
    chosen = labels >= 0
    got = masked.gather(1, positions)[chosen]
    original = labels[chosen]
    n = int(chosen.sum())
    # official count per row: round(real tokens * 0.15), at least 1, at most int((0.15 + 0.005) * 128) = 19
    real = (ids != 0).sum(1).double()
    assert n == int(torch.clamp(torch.round(real * 0.15), 1, 19).sum())
    to_mask, kept = float((got == 103).float().mean()), float((got == original).float().mean())
    assert to_mask == pytest.approx(0.85, abs=0.02) and kept == pytest.approx(0.15, abs=0.02)  # 4 standard errors
    assert int(((got != 103) & (got != original)).sum()) == 0


@pytest.mark.usefixtures('one_thread')
def test_default_optimizer_is_the_official_adam():
    """eps 1e-6, betas (0.9, 0.999), no bias correction, decay 0.01: one step of the Learner's optimizer on a tiny
    gradient, where eps dominates the denominator (eps 1e-8 would move the weight 25x further)."""
    cfg, learn = default_learner()
    learn.create_opt()
    learn.opt.set_hyper('lr', 1e-3)
    weight = learn.model.discriminator.electra.encoder.layer[0].intermediate.dense.weight   # decayed
    bias = learn.model.discriminator.electra.encoder.layer[0].intermediate.dense.bias       # not decayed
    before_w, before_b = weight.detach().clone(), bias.detach().clone()
    for p in learn.model.parameters(): p.grad = None
    weight.grad, bias.grad = torch.full_like(weight, 1e-6), torch.full_like(bias, 1e-6)
    learn.opt.step()
    m, v = 0.1 * 1e-6, 0.001 * 1e-12
    step = 1e-3 * m / (np.sqrt(v) + 1e-6)
    assert torch.allclose(weight, before_w * (1 - 1e-3 * 0.01) - step, rtol=0, atol=3e-9)
    assert torch.allclose(bias, before_b - step, rtol=0, atol=3e-9)


@pytest.mark.usefixtures('one_thread')
def test_default_schedule_warms_up_and_decays_together():
    "Official: lr * min(1, t / W) * (1 - t / T), so at the end of the warm-up the rate is already below the peak."
    cfg, learn = default_learner(steps=1000, warmup_steps=100, lr=1e-3)
    sched = next(cb for cb in learn.cbs if type(cb).__name__ == 'ParamScheduler').scheds['lr']
    for t in (0, 50, 100, 500, 999):
        assert sched(t / 1000) == pytest.approx(1e-3 * min(1, t / 100) * (1 - t / 1000), rel=1e-9, abs=1e-15)
    assert sched(0.1) == pytest.approx(0.9e-3)  # a warm-up-then-decay schedule gives the peak, 1e-3, here


@pytest.mark.usefixtures('one_thread')
def test_job_defaults_are_the_objective_of_the_paper():
    "Loss weights 1 and 50, temperature 1, embeddings tied, generator 1/4 of the discriminator: as the objects hold them."
    cfg, learn = default_learner()
    assert (learn.loss_func.gen_weight, learn.loss_func.disc_weight) == (1.0, 50.0)
    model = learn.model
    assert model.temperature == 1.0 and not model.disallow_correct and not model.uniform_generator
    assert model.generator.electra.embeddings is model.discriminator.electra.embeddings
    # the official initialisers: truncated normal cut at 2 std (transformers' plain normal exceeds 0.04 in 16k draws)
    assert float(model.discriminator.electra.embeddings.word_embeddings.weight.abs().max()) <= 0.04
    small = dataclasses.replace(PretrainConfig(), **{k: v for k, v in SHAPE.items() if k != 'generator_size'})
    assert small.generator_size == 0.25


@pytest.mark.parametrize('name, why', [('a/b', "holds '/'"), ('', 'is empty'), ('..', 'names a folder itself or its parent'),
                                       ('.x', "starts with '.'"), ('x ', 'begins or ends with a space')])
def test_run_name_must_be_a_plain_name(name, why):
    "A run name is part of file names: 'a/b' would put the checkpoints where --resume and the run lock never look."
    with pytest.raises(ConfigError, match=rf"^run_name: '{re.escape(name)}' {why}"):
        load('--run_name', name)
    assert load('--run_name', 'my-run_2.0+x').run_name == 'my-run_2.0+x'
    assert load('--run_name', 'x y').run_name == 'x y'  # a space inside a name is a file name's, quoted where it is shown


@pytest.mark.parametrize('seed', ['-1', str(2 ** 64)])
def test_a_seed_out_of_range_is_refused_before_any_data_is_built(tmp_path, seed):
    """`pretrain.py --seed -1` built the corpus cache and the tokenizer, then stopped in numpy's SeedSequence with a
    ValueError traceback (2**64 in torch.manual_seed): one line naming the key and its range, and nothing made."""
    from tests.support.pretrain import TINY, pretrain
    with pytest.raises(ConfigError, match=rf"^command line: key 'seed': {seed} is not a whole number in "
                                          r"\[0, 2\*\*32\) \(random seed for .*\)$"):
        pretrain(tmp_path, *TINY, '--seed', seed)
    assert list(tmp_path.iterdir()) == []  # no cache folder, no output folder


def test_every_key_is_declared_by_what_a_resume_does_when_it_differs():
    "A key added to the job must be placed: one that changes training but is left out would be resumed over silently."
    groups = [RESUME_SAME, RESUME_SAID, RESUME_CONTENT, RESUME_FREE]
    assert sorted(k for g in groups for k in g) == sorted(f.name for f in dataclasses.fields(PretrainConfig))


def test_two_checkpoint_fractions_of_one_file_name_are_refused_naming_both():
    "0.3333333 and 0.33333334 both wrote `<run>_<seed>_33.3333%.pth`: the second replaced the first, silently."
    from electra.training.checkpoint import checkpoint_name
    assert checkpoint_name('r', 0, 0.3333333) == checkpoint_name('r', 0, 0.33333334) == 'r_0_33.3333%.pth'
    with pytest.raises(ConfigError, match=r"^checkpoint_at: 0\.3333333 and 0\.33333334 are one checkpoint file "
                                          r"\(<run_name>_<seed>_33\.3333%\.pth\); give fractions that differ in their "
                                          r"first six digits\.$"):
        load_config(PretrainConfig, ['--checkpoint_at', '[0.3333333, 0.33333334, 1.0]'], preset_dir='configs/pretrain')
    with pytest.raises(ConfigError, match=r"^checkpoint_at: 0\.5 is listed twice; list each fraction once\.$"):
        load_config(PretrainConfig, ['--checkpoint_at', '[0.5, 1.0, 0.5]'], preset_dir='configs/pretrain')


def own_tokenizer(path, entries, normalizer=None):
    "A WordLevel tokenizer folder of `entries` (after the special tokens) with `normalizer`, as a BPE or Unigram one."
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate([*specials, *entries])}, unk_token='[UNK]'))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if normalizer is not None: tok.normalizer = normalizer
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='[UNK]', cls_token='[CLS]', sep_token='[SEP]',
                            mask_token='[MASK]', pad_token='[PAD]').save_pretrained(path)
    return path


def followed(tmp_path, *argv):
    """The config of `argv` once it follows what its `--tokenizer` does (as pretrain.py does after loading it), with
    the tokenizer and config.yaml as saved."""
    import yaml

    from electra.data.tokenizer import applied_case, get_tokenizer
    from electra.pretraining.learner import save_run_config
    cfg = load_config(PretrainConfig, list(argv), preset_dir='configs/pretrain')
    tok = get_tokenizer(cfg.tokenizer, [], cfg.vocab_size, cfg.lowercase, tmp_path, None, cfg.strip_accents)
    cfg.follow_tokenizer(applied_case(tok), f'the tokenizer {cfg.tokenizer}', len(tok))
    (tmp_path / 'run').mkdir(exist_ok=True)
    return cfg, tok, yaml.safe_load(save_run_config(cfg, tmp_path / 'run').read_text())


def test_what_the_run_s_tokenizer_does_is_recorded_and_a_typed_case_or_accent_rule_it_contradicts_refused(tmp_path):
    """R1-4, R7a-6: a tokenizer folder applies its own normalizer whatever `lowercase` and `strip_accents` say (a cased
    save_pretrained folder, a BPE without a normalizer, a Unigram that lower-cases): config.yaml recorded the keys'
    values, not what was applied. What the tokenizer does to the probes 'A' and 'é' is recorded, sourced to it; a typed
    value it contradicts is refused in one line, one from a file replaced with a warning."""
    from tokenizers import normalizers

    from electra.config.values import value_sources
    from electra.data.tokenizer import load_tokenizer
    from tests.data.test_tokenizer import bert_style_vocab
    cased = tmp_path / 'cased'
    load_tokenizer(str(bert_style_vocab(tmp_path / 'v.txt', ['The', 'the'])), lowercase=False).save_pretrained(cased)
    bpe = own_tokenizer(tmp_path / 'bpe', ['The', 'the', 'café'])  # no normalizer: the text as it is
    lower = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    uni = own_tokenizer(tmp_path / 'uni', ['the', 'café'], lower)
    for folder, lowers in ((cased, False), (bpe, False), (uni, True)):
        cfg, tok, saved = followed(tmp_path, '--tokenizer', str(folder))
        assert (saved['lowercase'], saved['strip_accents']) == (lowers, False) == (cfg.lowercase, cfg.strip_accents)
        assert (tok.tokenize('The')[0] == 'the') is lowers
        if lowers is False:
            assert value_sources(cfg)['lowercase'] == f'the tokenizer {folder}: what it does to its input'
        typed = str(not lowers).lower()
        does = "lower-cases its input ('A' becomes 'a')" if lowers else "keeps the case of its input ('A' stays 'A')"
        refusal = (f'lowercase: {typed} (command line) contradicts the tokenizer {folder}, which {does}. Drop '
                   '--lowercase, or give a tokenizer that does what you ask.')
        with pytest.raises(ConfigError, match=re.escape(refusal) + '$'):
            followed(tmp_path, '--tokenizer', str(folder), '--lowercase', typed)
    refusal = (f"strip_accents: true (command line) contradicts the tokenizer {bpe}, which keeps accents ('é' stays "
               "'é'). Drop --strip_accents, or give a tokenizer that does what you ask.")
    with pytest.raises(ConfigError, match=re.escape(refusal) + '$'):
        followed(tmp_path, '--tokenizer', str(bpe), '--strip_accents', 'true')
    (tmp_path / 'old.yaml').write_text('lowercase: true\n')  # a file's value (an older run's config.yaml): replaced
    replaced = (f"lowercase: true ({tmp_path / 'old.yaml'}: line 1) is replaced by what the tokenizer {cased} does: "
                "it keeps the case of its input")
    with pytest.warns(RunWarning, match=re.escape(replaced)):
        cfg, _, _ = followed(tmp_path, '--config', str(tmp_path / 'old.yaml'), '--tokenizer', str(cased))
    assert cfg.lowercase is False


def test_a_typed_vocab_size_a_given_tokenizer_contradicts_is_refused_and_its_size_recorded_otherwise(tmp_path):
    """R18a-2: `--tokenizer X --vocab_size 3000` (X of 125 tokens) ran in silence, config.yaml and the model card saying
    3000 for a model of X's rows. vocab_size sizes a tokenizer trained on the corpus: typed beside one the run does not
    train, it is refused unless it is that tokenizer's size; from a preset or the default, the tokenizer's size is
    what is recorded, sourced to it."""
    from electra.config.values import value_sources
    bpe = own_tokenizer(tmp_path / 'bpe', [f'w{i}' for i in range(120)])  # the 5 special tokens and 120 words
    refusal = (f"vocab_size: 3000 (command line) contradicts the tokenizer {bpe}, which has 125 tokens: vocab_size "
               "sizes a tokenizer trained on the corpus, and this run trains none. Drop --vocab_size.")
    with pytest.raises(ConfigError, match=re.escape(refusal) + '$'):
        followed(tmp_path, '--tokenizer', str(bpe), '--vocab_size', '3000')
    cfg, tok, saved = followed(tmp_path, '--tokenizer', str(bpe), '--vocab_size', '125')
    assert saved['vocab_size'] == cfg.vocab_size == len(tok) == 125
    assert value_sources(cfg)['vocab_size'] == 'command line'
    for preset in ('small', 'demo'):  # the class's default 30522, demo's 2000
        cfg, tok, saved = followed(tmp_path, '--config', preset, '--tokenizer', str(bpe))
        assert saved['vocab_size'] == cfg.vocab_size == 125
        assert value_sources(cfg)['vocab_size'] == f'the tokenizer {bpe}: its size (125 tokens)'


def test_a_vocab_txt_applies_a_typed_strip_accents_and_records_bert_s_rule_otherwise(tmp_path):
    """R7a-4: `--tokenizer vocab.txt --strip_accents false` stripped accents anyway (BERT's rule: strip with lowercase),
    its accented entries unreachable, while config.yaml said false. A typed value is applied; without one BERT's
    rule applies and is what config.yaml records."""
    from tests.data.test_tokenizer import bert_style_vocab
    vocab = bert_style_vocab(tmp_path / 'fr.txt', ['élève', 'eleve', 'é', '##é'])
    cfg, tok, saved = followed(tmp_path, '--tokenizer', str(vocab), '--strip_accents', 'false')
    assert tok.tokenize('Élève') == ['élève'] and saved['strip_accents'] is False
    unreached = (f"tokenizer {vocab}: 3 entries of the vocabulary hold accents ('élève', 'é', '##é'), which no input "
                 "reaches while accents are stripped (strip_accents: true). For a vocabulary with accents give "
                 "--strip_accents false.")
    with pytest.warns(RunWarning, match=re.escape(unreached) + '$'):
        cfg, tok, saved = followed(tmp_path, '--tokenizer', str(vocab))
    assert tok.tokenize('Élève') == ['eleve'] and saved['strip_accents'] is True and saved['lowercase'] is True
    vocab = bert_style_vocab(tmp_path / 'cased.txt', ['Élève', 'élève', 'eleve'])  # cased: read with lowercase false
    with pytest.warns(RunWarning, match=r"2 entries of the vocabulary hold accents \('Élève', 'élève'\)"):
        cfg, tok, saved = followed(tmp_path, '--tokenizer', str(vocab), '--lowercase', 'false',
                                   '--strip_accents', 'true')
    assert tok.tokenize('élève') == ['eleve'] and (saved['lowercase'], saved['strip_accents']) == (False, True)
    cfg, tok, saved = followed(tmp_path, '--tokenizer', str(vocab), '--lowercase', 'false')
    assert tok.tokenize('élève') == ['élève'] and saved['strip_accents'] is False  # BERT's rule: no lowercase, no strip


@pytest.mark.parametrize('preset, argv, said', [
    ('bert', ['--generator_size', '0.5', '--temperature', '2'],
     ["generator_size 0.5 (command line) has no effect: objective 'mlm' has no generator network.",
      "temperature 2 (command line) has no effect: objective 'mlm' samples no replacements."]),
    ('bert', ['--gen_loss_weight', '2', '--disallow_correct', 'true'],
     ["gen_loss_weight 2 (command line) has no effect: objective 'mlm' has no generator network.",
      "disallow_correct true (command line) has no effect: objective 'mlm' samples no replacements."]),
    ('uniform_generator', ['--generator_size', '0.5', '--temperature', '2', '--disallow_correct', 'true'],
     ["generator_size 0.5 (command line) has no effect: the uniform generator is no network.",
      "temperature 2 (command line) has no effect: the uniform generator's draws are uniform at any temperature."]),
    ('electra', ['--generator_size', '0.5', '--temperature', '2', '--disallow_correct', 'true'], [])],
    ids=['bert-sizes', 'bert-loss', 'uniform', 'electra'])
def test_a_typed_key_the_objective_does_not_read_is_said_in_a_warning(preset, argv, said):
    """`--config bert --generator_size 0.5` ran in silence, config.yaml and the card recording a generator size for a
    run without one (the kind of R18a-2: a typed value that cannot apply). Said in one warning each, the run going on
    (a flag set shared by runs of several objectives is common); a preset's value is not typed and says nothing."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        load_config(PretrainConfig, ['--config', preset, *argv], preset_dir='configs/pretrain')
    assert [str(w.message) for w in caught if w.category is RunWarning] == said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        load_config(PretrainConfig, ['--config', f'demo,{preset}'], preset_dir='configs/pretrain')  # demo sets 0.5
    assert not [w for w in caught if w.category is RunWarning and 'has no effect' in str(w.message)]


def test_a_grad_accum_steps_that_does_not_divide_the_batch_names_what_works_and_where_it_came_from(tmp_path):
    """R29b-1: 'grad_accum_steps: must divide batch_size (32), got 3.' named no size that works (the README says the
    refusal names the nearest) and not where either value came from."""
    with pytest.raises(ConfigError, match=r"^grad_accum_steps: 3 \(command line\) does not divide batch_size 32 "
                                          r"\(configs/pretrain/demo\.yaml: line \d+\): every micro-batch takes the same "
                                          r"rows\. Use grad_accum_steps 2 or 4, or batch_size 30 or 33\.$"):
        load_config(PretrainConfig, ['--grad_accum_steps', '3'], preset_dir='configs/pretrain')
    preset = tmp_path / 'ga.yaml'
    preset.write_text('grad_accum_steps: 4\nbatch_size: 30\n')
    with pytest.raises(ConfigError, match=rf"^grad_accum_steps: 4 \({re.escape(str(preset))}: line 1\) does not "
                                          rf"divide batch_size 30 \({re.escape(str(preset))}: line 2\): .* Use "
                                          r"grad_accum_steps 3 or 5, or batch_size 28 or 32\.$"):
        load_config(PretrainConfig, ['--config', str(preset)], preset_dir='configs/pretrain')


def test_corruption_probabilities_over_one_name_both_values_their_sources_and_a_fix():
    """R29b-2: --random_token_prob 0.3 alone was refused as 'mask_token_prob: mask_token_prob + random_token_prob must
    be at most 1.', blaming the key not typed, with no values, sources or fix."""
    with pytest.raises(ConfigError, match=r"^random_token_prob: 0\.3 \(command line\) with mask_token_prob 0\.85 "
                                          r"\(default\) makes 1\.15 of the chosen tokens: the two must sum to at most 1 "
                                          r"\(the rest are kept\)\. Lower mask_token_prob to 0\.7 or less \(BERT's "
                                          r"corruption: --mask_token_prob 0\.8 --random_token_prob 0\.1\)\.$"):
        load_config(PretrainConfig, ['--random_token_prob', '0.3'], preset_dir='configs/pretrain')
    with pytest.raises(ConfigError, match=r"^mask_token_prob: 0\.9 \(command line\) with random_token_prob 0\.2 "
                                          r"\(command line\) makes 1\.1 .* Lower random_token_prob to 0\.1 or less"):
        load_config(PretrainConfig, ['--mask_token_prob', '0.9', '--random_token_prob', '0.2'],
                    preset_dir='configs/pretrain')
