"""The two benchmarks, `pretrain` and `finetune`: build the runners, time them, print and return the table."""
from __future__ import annotations

import copy
import dataclasses
import os
import platform
import resource
import statistics
from pathlib import Path

import torch

from electra.config.cli import load_config
from electra.config.pretrain import PretrainConfig
from electra.objective.masking import max_predictions
from electra.objective.model import build_pretraining_model, padded_vocab_size
from tests.support.baseline import BERT_IDS, bert_ids, loss_check, padded_like, synthetic_batches
from benchmarks.bench.flops import GLUE_TRAIN, device_peak_tflops, finetune_flops, pretrain_flops
from benchmarks.bench.runners import (FinetuneBaselineRunner, FinetuneLearnerRunner, PretrainLoopRunner, interleaved,
                                      profile_steps, ratio_per_round, sync_check)
from tests.support.runners import LearnerRunner, Runner
from electra.training.device import AUTOCAST_DTYPES, resolve_precision

__all__ = ['environment', 'ablation_runners', 'pretrain_summary', 'bench_pretrain', 'bench_finetune', 'PRESET_DIR',
           'FINETUNE_PRESET_DIR']

PRESET_DIR = Path(__file__).resolve().parents[2] / 'configs' / 'pretrain'
FINETUNE_PRESET_DIR = PRESET_DIR.parent / 'finetune'

def environment(device: torch.device) -> dict:
    import fastai
    import transformers
    env = {'python': platform.python_version(), 'torch': torch.__version__, 'transformers': transformers.__version__,
           'fastai': fastai.__version__, 'threads': torch.get_num_threads(), 'device': str(device)}
    if device.type == 'cuda':
        env['gpu'] = torch.cuda.get_device_name(device)
    cpu = platform.processor()
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'): cpu = line.split(':', 1)[1].strip(); break
    except OSError: pass
    env['cpu'], env['cpu_count'] = cpu, os.cpu_count()
    return env


def _fmt_mem(b): return '-' if b is None else f'{b / 2**30:.2f} GiB'


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


# ---------------------------------------------------------------- pretrain

def _pretrain_cfg(args) -> PretrainConfig:
    "The preset's config with the benchmark's batch shape and speed options; no checkpoints, metrics every 100 steps."
    cfg = load_config(PretrainConfig, ['--config', args.preset], preset_dir=PRESET_DIR)
    over = {'batch_size': args.batch_size, 'max_length': args.max_length, 'compile': args.compile,
            'compile_mode': args.compile_mode, 'compile_scope': args.compile_scope,
            'pad_vocab_multiple': args.pad_vocab_multiple, 'checkpoint_at': [], 'log_every': 100, 'logger': ['none']}
    cfg = dataclasses.replace(cfg, **{k: v for k, v in over.items() if v is not None})
    cfg.validate()
    return cfg


def _finetune_cfg(preset: str, batch_size: int, max_length: int):
    "The fine-tuning preset of this model size (small's recipe for sizes without one), one epoch of the given shape."
    from electra.config.finetune import FinetuneConfig
    name = preset if (FINETUNE_PRESET_DIR / f'{preset}.yaml').is_file() else 'small'
    cfg = load_config(FinetuneConfig, ['--config', name], preset_dir=FINETUNE_PRESET_DIR)
    return dataclasses.replace(cfg, batch_size=batch_size, max_length=max_length, epochs=1, task_overrides={})


def ablation_runners(args, cfg: PretrainConfig, base_model, model, batches, device, precision) -> list[Runner]:
    """The baseline, then with `--ablations` the in-between steps that add one item at a time (kept to `--variants`
    when given); the caller appends the fast step."""
    autocast = AUTOCAST_DTYPES[precision]
    runners: list[Runner] = [PretrainLoopRunner('baseline', cfg, base_model, batches, device, 'hf', 'loop', True)]
    if not args.ablations: return runners
    runners += [
        PretrainLoopRunner('+masked_head', cfg, base_model, batches, device, 'project', 'loop', True),
        PretrainLoopRunner('+fused_adam', cfg, base_model, batches, device, 'project', 'electra', True),
        PretrainLoopRunner('+no_sync', cfg, base_model, batches, device, 'project', 'electra', False),
    ]
    if autocast is not None:
        runners.append(PretrainLoopRunner(f'+{precision}', cfg, base_model, batches, device, 'project', 'electra',
                                          False, autocast))
    eager = dataclasses.replace(cfg, compile=False)
    if precision != 'fp32':  # the real Learner in fp32, to isolate what mixed precision adds to it
        runners.append(LearnerRunner('learner_fp32', eager, copy.deepcopy(model), batches, device, 'fp32'))
    if cfg.compile:  # the real Learner without compile, to isolate what compile adds
        runners.append(LearnerRunner('learner_eager', eager, copy.deepcopy(model), batches, device, precision))
    if cfg.compile and cfg.compile_mode != 'default':  # compiled in the default mode, to isolate what the mode adds
        runners.append(LearnerRunner('learner_compiled', dataclasses.replace(cfg, compile_mode='default'),
                                     copy.deepcopy(model), batches, device, precision))
    if cfg.compile and cfg.compile_scope != 'model':  # the model and loss compiled, the rest on the host, as before
        runners.append(LearnerRunner('fast_model_scope', dataclasses.replace(cfg, compile_scope='model'),
                                     copy.deepcopy(model), batches, device, precision))
    # the fast step with its masking and sampling noise drawn from the seed and the step (`random_draws: counter`):
    # inside the compiled step rather than from the run's generator outside it
    runners.append(LearnerRunner('counter_draws', dataclasses.replace(cfg, random_draws='counter'),
                                 copy.deepcopy(model), batches, device, precision))
    if args.variants:  # keep only the named in-between steps (baseline and fast always run)
        keep = set(args.variants.split(','))
        runners = [r for r in runners if r.name in keep or r.name == 'baseline']
    return runners


def pretrain_summary(res: dict, runners: list[Runner], fl_fast: dict, fl_base: dict, peak, B: int, L: int):
    "Per runner: its medians, rates, FLOPs, MFU and speed-up over the baseline (a dict), and the printed table."
    table = [['step', 's/step (median)', 'steps/s', 'tokens/s', 'TFLOP/step', 'achieved TFLOP/s', 'MFU', 'x baseline',
              'peak mem']]
    summary = {}
    for r in runners:
        d = res[r.name]
        sps = 1.0 / d['median_s']
        flops = fl_base['train_step'] if r.name == 'baseline' else fl_fast['train_step']
        ratio, ratios = ratio_per_round(res, 'baseline', r.name)
        mfu = flops * sps / (peak * 1e12) if peak else None
        summary[r.name] = {'s_per_step': d['median_s'], 'cpu_s_per_step': d['median_cpu_s'], 'steps_per_s': sps,
                           'tokens_per_s': sps * B * L, 'train_flops_per_step': flops,
                           'achieved_tflops': flops * sps / 1e12, 'mfu': mfu, 'speedup_vs_baseline': ratio,
                           'speedup_per_round': ratios, 'peak_mem_bytes': d['peak_mem_bytes'],
                           'wall_per_round': d['wall'], 'cpu_per_round': d['cpu']}
        table.append([r.name, f'{d["median_s"]:.4f}', f'{sps:.3g}', f'{sps * B * L:,.0f}', f'{flops / 1e12:.3f}',
                      f'{flops * sps / 1e12:.3f}', '-' if mfu is None else f'{100 * mfu:.1f}%', f'{ratio:.2f}x',
                      _fmt_mem(d['peak_mem_bytes'])])
    return summary, _table(table)


def bench_pretrain(args) -> dict:
    "The `pretrain` benchmark: checks that the two losses agree, times the runners, prints and returns the results."
    device = torch.device(args.device)
    cfg = _pretrain_cfg(args)
    precision = resolve_precision(args.precision, device)
    vocab, B, L = args.vocab_size, cfg.batch_size, cfg.max_length
    rows = padded_vocab_size(vocab, cfg.pad_vocab_multiple)
    torch.manual_seed(cfg.seed)
    # the baseline's HF classes at the tokenizer's vocabulary size; the fast model starts from the same weights
    base_model = build_pretraining_model(dataclasses.replace(cfg, pad_vocab_multiple=0), bert_ids(vocab))
    model = padded_like(base_model, cfg, vocab)
    batches = synthetic_batches(args.n_batches, B, L, vocab, cfg.seed, pin=device.type == 'cuda')
    log = print
    log(f'pretrain benchmark: preset {args.preset}, batch {B} x length {L}, vocab {vocab} (rows {rows}), {device}, '
        f'fast path {precision} ({args.precision_reason}), baseline fp32{", compile" if cfg.compile else ""}')
    check = loss_check(cfg, base_model, batches[0], device, dropout=device.type == 'cpu')
    log(f'  same batch, masks and random streams: fast loss {check["fast"][0]:.6f}, baseline loss '
        f'{check["baseline"][0]:.6f} (|diff| {check["abs_diff"]:.2e})')
    runners = ablation_runners(args, cfg, base_model, model, batches, device, precision)
    fast = LearnerRunner('fast', cfg, model.to(device), batches, device, precision)
    runners.append(fast)
    res = interleaved(runners, args.warmup, args.rounds, args.steps, log)
    if cfg.compile: log(f'  compile: {"compiled" if fast.compiled else "FAILED, fast path ran eagerly"}')

    P = max_predictions(cfg.mask_prob, L) if cfg.mask_mode != 'bernoulli' else L
    fl_fast, fl_base = pretrain_flops(cfg, B, L, vocab, min(P, L)), pretrain_flops(cfg, B, L, vocab, L)
    peak = device_peak_tflops(device, args.peak_tflops)
    summary, table = pretrain_summary(res, runners, fl_fast, fl_base, peak, B, L)
    cpu_ratio = statistics.median(a / b for a, b in zip(res['baseline']['cpu'], res['fast']['cpu']))
    log(f'\n{table}\n\nfast path: {summary["fast"]["steps_per_s"]:.3g} steps/s, '
        f'{summary["fast"]["speedup_vs_baseline"]:.2f}x the baseline (median of per-round ratios; by process CPU time '
        f'{cpu_ratio:.2f}x)' + ('' if peak else '; no MFU: no peak FLOP/s known for this device (give --peak_tflops)'))
    log(f'model FLOPs per step: fast {fl_fast["train_step"] / 1e12:.3f} TFLOP (masked-only generator head at {P} '
        f'positions), baseline {fl_base["train_step"] / 1e12:.3f} TFLOP (head at all {L} positions)')
    if device.type == 'cpu':
        log(f'process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (all steps)')
    out = {'command': 'python -m benchmarks.bench ' + ' '.join(args.argv), 'env': environment(device),
           'config': {'preset': args.preset, 'batch_size': B, 'max_length': L, 'vocab': vocab, 'vocab_rows': rows,
                      'precision': precision, 'precision_reason': args.precision_reason, 'compile': cfg.compile,
                      'compiled': fast.compiled, 'pad_vocab_multiple': cfg.pad_vocab_multiple, 'warmup': args.warmup,
                      'rounds': args.rounds, 'steps_per_round': args.steps},
           'loss_check': check, 'flops': {'fast': fl_fast, 'baseline': fl_base}, 'peak_tflops': peak,
           'results': summary, 'cpu_time_speedup': cpu_ratio}
    if args.check_sync: out['host_syncs'] = sync_check(cfg, model, batches, device, precision, log)
    if args.profile: log(profile_steps(fast, args.steps, device))
    return out


def bench_finetune(args) -> dict:
    device = torch.device(args.device)
    cfg = _pretrain_cfg(args)
    from transformers import ElectraModel

    from electra.finetuning.learner import device_and_autocast
    from electra.objective.model import discriminator_config
    _, autocast = device_and_autocast(str(device), args.precision)
    precision = 'fp32' if autocast is None else str(autocast).split('.')[-1]
    B, L = cfg.batch_size, cfg.max_length
    torch.manual_seed(cfg.seed)
    body = ElectraModel(discriminator_config(cfg, args.vocab_size, BERT_IDS['pad']))
    g = torch.Generator().manual_seed(cfg.seed)
    batches = [(ids, (ids != BERT_IDS['pad']).long(), types, torch.randint(2, (B,), generator=g))
               for ids, types in synthetic_batches(args.n_batches, B, L, args.vocab_size, cfg.seed)]
    ft = _finetune_cfg(args.preset, B, L)
    print(f'finetune benchmark: preset {args.preset} discriminator, batch {B} x length {L}, {device}, fast path '
          f'{precision} ({args.precision_reason}), baseline fp32{", compile" if args.compile else ""}')
    runners = [FinetuneBaselineRunner('baseline', body, batches, device, ft.lr, ft.layer_lr_decay),
               FinetuneLearnerRunner('fast', body, batches, device, ft, autocast,
                                     (args.compile_mode or 'default') if args.compile else None)]
    res = interleaved(runners, args.warmup, args.rounds, args.steps)
    fl = finetune_flops(cfg, B, L)
    peak = device_peak_tflops(device, args.peak_tflops)
    table = [['step', 's/step (median)', 'examples/s', 'TFLOP/step', 'MFU', 'x baseline', 'peak mem']]
    summary = {}
    glue_examples = 10 * sum(n * e for n, e in GLUE_TRAIN.values())
    for r in runners:
        d = res[r.name]
        eps = B / d['median_s']
        ratio, ratios = ratio_per_round(res, 'baseline', r.name)
        mfu = fl['train_step'] * eps / B / (peak * 1e12) if peak else None
        summary[r.name] = {'s_per_step': d['median_s'], 'examples_per_s': eps, 'mfu': mfu, 'speedup_vs_baseline': ratio,
                           'speedup_per_round': ratios, 'peak_mem_bytes': d['peak_mem_bytes'],
                           'glue_sweep_train_hours': glue_examples / eps / 3600, 'wall_per_round': d['wall']}
        table.append([r.name, f'{d["median_s"]:.4f}', f'{eps:,.1f}', f'{fl["train_step"] / 1e12:.3f}',
                      '-' if mfu is None else f'{100 * mfu:.1f}%', f'{ratio:.2f}x', _fmt_mem(d['peak_mem_bytes'])])
    print('\n' + _table(table))
    fast = summary['fast']
    print(f'\nfast path: {fast["examples_per_s"]:,.1f} examples/s, {fast["speedup_vs_baseline"]:.2f}x the baseline; '
          f'GLUE, all tasks x 10 runs ({glue_examples / 1e6:.1f}M training examples at length {L}): '
          f'{60 * fast["glue_sweep_train_hours"]:.1f} min of training steps at this rate (evaluation not included)')
    if args.compile: print(f'  compile: {"compiled" if runners[1].compiled else "FAILED, ran eagerly"}')
    if args.profile: print(profile_steps(runners[1], args.steps, device))
    return {'command': 'python -m benchmarks.bench ' + ' '.join(args.argv), 'env': environment(device),
            'config': {'preset': args.preset, 'batch_size': B, 'max_length': L, 'compile': args.compile,
                       'precision': precision, 'precision_reason': args.precision_reason,
                       'warmup': args.warmup, 'rounds': args.rounds, 'steps_per_round': args.steps},
            'flops': fl, 'peak_tflops': peak, 'results': summary}


