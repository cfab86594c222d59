"""The speed work, for correctness only (timings are in BENCHMARKS.md): the fast step computes the baseline's
loss, a padded vocabulary changes nothing a user can see, compilation falls back cleanly, the FLOP formula is right,
and the real step never makes the host wait for the device."""
import copy
import dataclasses
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from electra.config.base import ConfigError, RunWarning, config_to_dict, load_config
from electra.config.pretrain import PretrainConfig
from electra.objective.masking import mask_tokens, max_predictions
from electra.objective.model import build_pretraining_model, padded_vocab_size
from electra.objective.sampling import sample_tokens
from electra.tools.bench import baseline, cli, flops, runners
from electra.training.device import resolve_precision
from electra.training.speed import DevicePrefetcher, HostSyncCounter, try_compile

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, embedding_size=24,
            generator_size=0.5, batch_size=4, max_length=16, checkpoint_at=[], steps=1000, warmup_steps=10)
V = 120  # vocabulary of the tiny tests: BERT's special ids (pad 0, [CLS] 101, [SEP] 102, [MASK] 103), words 104..119


def tiny_cfg(**kw) -> PretrainConfig:
    return PretrainConfig(**{**TINY, **kw})


def tiny_model(cfg, vocab=V):
    torch.manual_seed(0)
    return build_pretraining_model(cfg, vocab, 0)


def batches(cfg, n=2):
    return baseline.synthetic_batches(n, cfg.batch_size, cfg.max_length, V, seed=3)


def test_synthetic_batches_look_like_examples():
    (ids, tt), = baseline.synthetic_batches(1, 64, 32, 30522, seed=1)
    assert ids.shape == tt.shape == (64, 32) and ids.dtype == torch.int64
    assert (ids[:, 0] == 101).all() and ((ids == 102).sum(1) == 2).all()
    real = ids != 0
    assert (tt[~real] == 0).all() and (tt[real].sum() > 0)


@pytest.mark.parametrize('mode', ['fixed', 'bernoulli'])
def test_fast_loss_equals_baseline(mode):
    "Same weights, batch, masks, sampling and dropout streams: the project's step and HF's classes as-is agree."
    cfg = tiny_cfg(mask_mode=mode)
    model = tiny_model(cfg)
    (ids, tt), _ = batches(cfg)
    check = baseline.loss_check(cfg, model, (ids, tt), torch.device('cpu'), seed=5)
    fast, base = check['fast'], check['baseline']
    assert fast[1] == pytest.approx(base[1], rel=1e-5) and fast[2] == pytest.approx(base[2], rel=1e-5)
    assert fast[0] == pytest.approx(base[0], rel=1e-5)


def first_step_losses(cfg, precision: str):
    """The real Learner's (pretraining_learner) first (generator, discriminator) losses, and the fp32 baseline's on the
    same batch, masks and samples."""
    model = tiny_model(cfg)
    ref = copy.deepcopy(model)
    data = batches(cfg, n=1)
    runner = runners.LearnerRunner(precision, cfg, model, data, torch.device('cpu'), precision)
    runner.loader.n = 1
    runner.learn.fit(1)
    # MaskingCallback: one generator seeded cfg.seed masks the batch, then samples
    rng = torch.Generator().manual_seed(cfg.seed)
    ids, tt = data[0]
    m = mask_tokens(ids, torch.tensor([101, 102, 103, 0]), 0, 103, V, cfg.mask_prob, cfg.mask_mode,
                    cfg.mask_token_prob, cfg.random_token_prob, rng)
    with torch.no_grad():
        _, gen, disc = baseline.baseline_pretrain_loss(ref.generator.train(), ref.discriminator.train(), cfg, m, tt, rng)
    return runner.learn.loss_func.last, (gen, disc)  # ElectraLoss keeps its last (gen, disc) pair


def test_real_learner_step_loss_equals_baseline():
    "The first step of the real Learner computes the baseline's loss on the same batch and masks."
    (fast_gen, fast_disc), (gen, disc) = first_step_losses(tiny_cfg(dropout=0.0), 'fp32')
    assert float(fast_gen) == pytest.approx(float(gen), rel=1e-5)
    assert float(fast_disc) == pytest.approx(float(disc), rel=1e-5)


def test_cpu_bf16_learner_step_loss_close_to_fp32_baseline():
    """bf16 autocast changes rounding only: the real step's first loss stays within 1% of the fp32 baseline's. The
    job offers bf16 on CPUs that multiply it natively; the numerics are the same where torch emulates it, so this
    runs on every CPU."""
    (fast_gen, fast_disc), (gen, disc) = first_step_losses(tiny_cfg(dropout=0.0), 'bf16')
    assert fast_gen.dtype == torch.float32 and float(fast_gen) == pytest.approx(float(gen), rel=1e-2)
    assert float(fast_disc) == pytest.approx(float(disc), rel=1e-2)


def test_padded_vocab_equals_unpadded_and_never_samples_padding():
    cfg = tiny_cfg(dropout=0.0)
    plain = tiny_model(cfg).eval()
    padded = baseline.padded_like(plain, dataclasses.replace(cfg, pad_vocab_multiple=64), V).eval()
    assert padded_vocab_size(V, 64) == 128 and padded.generator.config.vocab_size == 128 and padded.vocab_size == V
    (ids, tt), _ = batches(cfg)
    m = mask_tokens(ids, torch.tensor([0, 101, 102, 103]), 0, 103, V, generator=torch.Generator().manual_seed(0))
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
    for uniform in (False, True):
        padded.uniform_generator = uniform
        padded.rng = torch.Generator().manual_seed(1)
        for _ in range(20):
            out = padded(m.input_ids, tt, m.positions, m.labels)
            assert (out['sampled'] < V).all()
    big = torch.zeros(4000, 128)
    big[:, V:] = float('-inf')
    assert (sample_tokens(big, uniform=True) < V).all()


def test_padded_vocab_export_loads_unpadded_with_identical_logits(tmp_path):
    from electra.data.tokenizer import load_tokenizer, tokenizer_state
    from electra.pretraining.export import export_pretrained, load_discriminator
    from electra.training.checkpoint import FORMAT
    from electra.training.files import atomic_save
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(V - 5)]) + '\n')
    tok = load_tokenizer(str(vocab))
    assert len(tok) == V
    cfg = tiny_cfg(dropout=0.0, pad_vocab_multiple=64)
    torch.manual_seed(0)
    model = build_pretraining_model(cfg, len(tok), tok.pad_token_id).eval()
    with torch.no_grad(): model.generator.generator_lm_head.bias.normal_()  # a zero bias would hide a lost one
    assert model.discriminator.config.vocab_size == 128
    paths = export_pretrained(model, tok, tmp_path / 'run')
    disc = ElectraForPreTraining.from_pretrained(paths['discriminator']).eval()
    gen = ElectraForMaskedLM.from_pretrained(paths['generator']).eval()
    assert disc.config.vocab_size == V and gen.config.vocab_size == V
    enc = tok(['w1 w2 w3', 'w4 w5'], padding=True, return_tensors='pt')
    with torch.no_grad():
        assert torch.allclose(disc(**enc).logits, model.discriminator(**enc).logits, atol=1e-6)
        assert torch.allclose(gen(**enc).logits, model.generator(**enc).logits[..., :V], atol=1e-5)
    # a pretraining checkpoint of the padded model loads as the unpadded discriminator too
    ckpt = tmp_path / 'run_1_100%.pth'
    atomic_save({'format': FORMAT, 'config': config_to_dict(cfg), 'tokenizer': tokenizer_state(tok),
                 'model': model.state_dict()}, ckpt)
    loaded, _ = load_discriminator(ckpt)
    with torch.no_grad(): assert torch.allclose(loaded.eval()(**enc).logits, disc(**enc).logits, atol=1e-6)
    with pytest.raises(ConfigError, match='pad_vocab_multiple'): tiny_cfg(pad_vocab_multiple=-1).validate()


def _trained_params(cfg, backend=None, steps=2):
    "Parameters after `steps` steps of the real Learner; `backend`: the CompileModel backend (cfg.compile on)."
    model = tiny_model(cfg)
    runner = runners.LearnerRunner('t', cfg, model, batches(cfg), torch.device('cpu'), 'fp32')
    if backend is not None: runner.learn.compile_model.backend = backend
    torch.manual_seed(0)
    runner.loader.n = steps
    runner.learn.fit(1)
    return runner, {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_compile_failure_falls_back_to_identical_eager_training():
    def broken_backend(gm, example_inputs): raise RuntimeError('simulated compiler failure')
    _, eager = _trained_params(tiny_cfg(num_hidden_layers=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        runner, fallback = _trained_params(tiny_cfg(num_hidden_layers=1, compile=True), backend=broken_backend)
    msgs = [str(w.message) for w in caught if 'compile:' in str(w.message)]
    assert len(msgs) == 1 and 'simulated compiler failure' in msgs[0] and 'running eagerly' in msgs[0]
    assert '\n' not in msgs[0]
    assert runner.compiled is False and runner.learn.model._compiled_call_impl is None
    for k in eager: assert torch.equal(eager[k], fallback[k]), k  # the failed trial step left no trace


def test_compile_success_keeps_state_dict_and_training():
    _, eager = _trained_params(tiny_cfg(num_hidden_layers=1, dropout=0.0))
    runner, compiled = _trained_params(tiny_cfg(num_hidden_layers=1, compile=True, dropout=0.0), backend='eager')
    assert runner.compiled is True and runner.learn.model._compiled_call_impl is not None
    assert compiled.keys() == eager.keys()                       # no `_orig_mod.` prefixes in checkpoints
    for k in eager: assert torch.allclose(eager[k], compiled[k], atol=1e-6), k


def test_cuda_graph_mode_marks_every_step_and_trains_as_eager(monkeypatch):
    "compile_mode reduce-overhead: each training step tells cudagraph trees a new step begins; the math is unchanged."
    marks = []
    monkeypatch.setattr(torch.compiler, 'cudagraph_mark_step_begin', lambda: marks.append(1))
    _, eager = _trained_params(tiny_cfg(num_hidden_layers=1, dropout=0.0), steps=3)
    runner, graphed = _trained_params(tiny_cfg(num_hidden_layers=1, compile=True, compile_mode='reduce-overhead',
                                               dropout=0.0), backend='eager', steps=3)
    assert runner.learn.compile_model.mode == 'reduce-overhead' and runner.compiled is True and len(marks) == 3
    for k in eager: assert torch.allclose(eager[k], graphed[k], atol=1e-6), k


def test_try_compile_reports_failure_of_trial():
    m = torch.nn.Linear(3, 3)
    def trial(): raise ValueError('boom')
    with pytest.warns(RunWarning, match='compile: torch.compile of the model failed \\(ValueError: boom\\)'):
        assert try_compile([m], trial, backend='eager') is False
    assert m._compiled_call_impl is None


def test_flop_formula_matches_hand_count_and_flop_counter():
    cfg = tiny_cfg(dropout=0.0)  # disc H 32, F 64, E 24, 2 layers; generator H 16, F 32, 1 head
    B, L, P = 2, 8, 3
    fl = flops.pretrain_flops(cfg, B, L, 97, P)
    T = B * L
    disc = 2 * T * 24 * 32 + 2 * (2 * T * 32 * 96 + 2 * T * 32 * 32 + 2 * 2 * B * L * L * 32 + 2 * 2 * T * 32 * 64)
    gen = 2 * T * 24 * 16 + 2 * (2 * T * 16 * 48 + 2 * T * 16 * 16 + 2 * 2 * B * L * L * 16 + 2 * 2 * T * 16 * 32)
    assert (disc, gen) == (581632, 159744)
    assert fl['discriminator_encoder'] == disc and fl['generator_encoder'] == gen
    assert fl['generator_head'] == 2 * B * P * 16 * 24 + 2 * B * P * 24 * 97
    assert fl['discriminator_head'] == 2 * T * 32 * 32 + 2 * T * 32
    assert fl['train_step'] == 3 * fl['forward'] == 3 * (disc + gen + fl['generator_head'] + fl['discriminator_head'])
    # torch's own FLOP counter over the model's forward (masked-only head at P positions) gives the same total. It is
    # a second opinion only where it sees every matmul: with eager attention (explicit Q K^T and P V matmuls); some
    # torch versions do not count fused SDPA kernels on the CPU.
    model = build_pretraining_model(cfg, 97, 0)
    for net in (model.generator, model.discriminator): net.set_attn_implementation('eager')
    model.rng = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 97, (B, L), generator=torch.Generator().manual_seed(0))
    positions = torch.tensor([[1, 2, 3], [4, 5, 6]])
    labels = ids.gather(1, positions)
    with FlopCounterMode(display=False) as counter:
        model(ids, torch.zeros_like(ids), positions, labels)
    assert counter.get_total_flops() == fl['forward']
    assert flops.pretrain_flops(cfg, B, L, 97, L)['generator_head'] == 2 * T * 16 * 24 + 2 * T * 24 * 97
    ft = flops.finetune_flops(cfg, B, L, 3)
    assert ft['forward'] == disc + 2 * B * 32 * 3 and ft['train_step'] == 3 * ft['forward']


@pytest.mark.parametrize('mode', ['fixed', 'bernoulli'])
def test_real_step_makes_no_host_sync(mode):
    "Masking, model, loss, clipping, optimizer, schedule and metrics: nothing reads the device between log steps."
    cfg = tiny_cfg(mask_mode=mode, log_every=100)
    runner = runners.LearnerRunner('t', cfg, tiny_model(cfg), batches(cfg), torch.device('cpu'), 'fp32')
    runner.run(1)
    counter = runners.count_host_syncs(runner.learn, 3)
    assert counter.total == 0, dict(counter.counts)
    # ... while the detector does see what the plain HF baseline does (mask test, boolean-mask loss, .item())
    model = tiny_model(cfg)
    (ids, tt), _ = batches(cfg)
    m = mask_tokens(ids, torch.tensor([0, 101, 102, 103]), 0, 103, V)
    with HostSyncCounter() as c:
        loss, _, _ = baseline.baseline_pretrain_loss(model.generator, model.discriminator, cfg, m, tt, None)
        loss.item()
    assert c.counts['aten::_local_scalar_dense'] >= 3 and c.counts['aten::index (boolean mask)'] >= 1


def test_sdpa_mask_gives_transformers_own_result():
    "The [B, 1, 1, L] mask the model passes (no host sync) gives what transformers computes from the 2-D mask."
    cfg = tiny_cfg(dropout=0.0)
    model = tiny_model(cfg).eval()
    (ids, tt), _ = batches(cfg)
    ids[0, 10:] = 0
    from electra.objective.model import sdpa_mask
    attn = ids != 0
    with torch.no_grad():
        ours = model.discriminator(ids, attention_mask=sdpa_mask(model.discriminator, attn), token_type_ids=tt).logits
        theirs = model.discriminator(ids, attention_mask=attn.long(), token_type_ids=tt).logits
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_prefetcher_passes_batches_through():
    data = [(torch.arange(3), torch.ones(3)), (torch.arange(3) + 1, torch.zeros(3))]
    p = DevicePrefetcher(data, 'cpu')
    assert len(p) == 2 and [tuple(map(torch.Tensor.tolist, b)) for b in p] == [tuple(map(torch.Tensor.tolist, b)) for b in data]


@pytest.mark.parametrize('what', ['pretrain', 'finetune'])
def test_bench_command_writes_parsable_results_and_profile(what, tmp_path, capsys):
    # the demo preset, tiny batches: checks the command's plumbing and its arithmetic, not any speed
    out = tmp_path / 'b.json'
    cli.main([what, '--preset', 'demo', '--batch_size', '4', '--max_length', '32', '--vocab_size', str(V),
                '--rounds', '2', '--steps', '1', '--precision', 'fp32', '--profile', '--device', 'cpu', '--json', str(out)])
    printed = capsys.readouterr().out
    res = __import__('json').loads(out.read_text())
    assert set(res['results']) == {'baseline', 'fast'} and res['env']['device'] == 'cpu'
    base, fast = res['results']['baseline'], res['results']['fast']
    # the headline ratio is the median of the per-round ratios of the walls the JSON also holds
    ratios = [b / f for b, f in zip(base['wall_per_round'], fast['wall_per_round'])]
    assert fast['speedup_per_round'] == pytest.approx(ratios) and len(ratios) == 2
    assert fast['speedup_vs_baseline'] == pytest.approx(sum(ratios) / 2)  # the median of two is their mean
    assert fast['s_per_step'] == pytest.approx(sorted(fast['wall_per_round'])[0] / 2 + sorted(fast['wall_per_round'])[1] / 2)
    assert 'profile of fast' in printed and 'aten::' in printed
    assert 'fast path fp32 (as asked (--precision)), baseline fp32' in printed
    assert res['config']['precision_reason'] == 'as asked (--precision)'
    if what == 'pretrain':
        cfg = load_config(PretrainConfig, ['--config', 'demo', '--batch_size', '4', '--max_length', '32'],
                                preset_dir='configs/pretrain')
        P = max_predictions(cfg.mask_prob, 32)
        assert res['flops']['fast'] == flops.pretrain_flops(cfg, 4, 32, V, P)
        assert fast['steps_per_s'] == pytest.approx(1 / fast['s_per_step'])
        assert fast['tokens_per_s'] == pytest.approx(4 * 32 / fast['s_per_step'])
        assert res['loss_check']['abs_diff'] < 1e-4 and res['config']['precision'] == 'fp32'
    else:
        assert fast['examples_per_s'] == pytest.approx(4 / fast['s_per_step'])


@pytest.mark.parametrize('native', [True, False])
def test_bench_says_which_precision_the_cpu_path_uses_and_why(monkeypatch, native):
    monkeypatch.setattr(cli, 'cpu_bf16_supported', lambda: native)
    args = cli.parse_args(['pretrain', '--device', 'cpu'])
    assert (args.precision, args.precision_reason) == (('bf16', 'auto: this CPU multiplies bf16 natively (AVX512-BF16/AMX)')
                                                       if native else ('auto', 'auto: this CPU has no native bf16, so fp32'))
    if not native: assert resolve_precision(args.precision, torch.device('cpu')) == 'fp32'
