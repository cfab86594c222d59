"""`python -m benchmarks.bench pretrain|finetune|scaling ...`: the arguments and their defaults per device
(`scaling` has its own, in `benchmarks.bench.scaling`)."""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch

from benchmarks.bench.jobs import bench_finetune, bench_pretrain
from benchmarks.bench.scaling import bench_scaling, scaling_args
from electra.training.device import cpu_bf16_supported

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['scaling']: return scaling_args(argv)  # launches jobs: none of the step benchmarks' options apply
    p = argparse.ArgumentParser(prog='python -m benchmarks.bench', description=__doc__.split('\n\n')[0])
    p.add_argument('what', choices=['pretrain', 'finetune', 'scaling'], help='scaling: data-parallel throughput over '
                   'several processes; its options: python -m benchmarks.bench scaling --help')
    p.add_argument('--preset', default='small', help='model preset in configs/pretrain (small, small++, base, large, demo)')
    p.add_argument('--batch_size', type=int, default=None, help='default: the preset\'s (pretrain), 32 (finetune)')
    p.add_argument('--max_length', type=int, default=None, help='default: the preset\'s (pretrain), 128 (finetune)')
    p.add_argument('--vocab_size', type=int, default=30522, help='tokenizer vocabulary (BERT uncased: 30522)')
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--precision', default='auto', help='fast path precision: fp32, bf16, fp16 or auto, the fastest the '
                   'device does natively: bf16 on GPUs that have it (else fp16) and on CPUs with AVX512-BF16/AMX, '
                   'else fp32 (the baseline is always fp32)')
    p.add_argument('--compile', action='store_true', help='torch.compile the fast path (the `compile` config key)')
    p.add_argument('--compile_mode', default=None, help="torch.compile mode, e.g. 'max-autotune' (default: the default mode)")
    p.add_argument('--compile_scope', default=None, choices=['model', 'step'], help="with --compile: 'step' compiles the "
                   "whole step as one graph (the `compile_scope` config key; default: the preset's)")
    p.add_argument('--pad_vocab_multiple', type=int, default=None, help='default: 64 on GPU, 0 on CPU')
    p.add_argument('--steps', type=int, default=None, help='timed steps per round (default: 50 on GPU; on CPU 1 '
                   'pretraining, 3 fine-tuning)')
    p.add_argument('--warmup', type=int, default=None, help='untimed steps first (default: 20 on GPU, 1 on CPU)')
    p.add_argument('--rounds', type=int, default=None, help='interleaved rounds (default: 5)')
    p.add_argument('--n_batches', type=int, default=4, help='distinct synthetic batches, cycled')
    p.add_argument('--ablations', action='store_true', help='also time the in-between steps (per-item breakdown)')
    p.add_argument('--variants', default=None, help='with --ablations: only these in-between steps, comma-separated '
                   '(+masked_head, +fused_adam, +no_sync, +bf16, learner_fp32, learner_eager, learner_compiled, '
                   'fast_model_scope, counter_draws)')
    p.add_argument('--check_sync', action='store_true', help='count host synchronisations in the real step')
    p.add_argument('--profile', action='store_true', help='after timing, print torch.profiler\'s top ops of the fast step')
    p.add_argument('--peak_tflops', type=float, default=None, help='peak FLOP/s for MFU (default: known GPUs only)')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s)')
    p.add_argument('--json', default=None, help='also write the results to this JSON file')
    args = p.parse_args(argv)
    if args.what == 'scaling': p.error('scaling comes first: python -m benchmarks.bench scaling [options]')
    args.argv = argv
    gpu = args.device.startswith('cuda')
    if args.what == 'finetune':
        args.batch_size = args.batch_size or 32
        args.max_length = args.max_length or 128
    cpu_steps = 3 if args.what == 'finetune' else 1
    for key, on_gpu, on_cpu in [('steps', 50, cpu_steps), ('warmup', 20, 1), ('rounds', 5, 5), ('pad_vocab_multiple', 64, 0)]:
        if getattr(args, key) is None: setattr(args, key, on_gpu if gpu else on_cpu)
    args.precision_reason = 'as asked (--precision)'
    if args.precision == 'auto':
        if gpu: args.precision_reason = 'auto: the GPU\'s tensor-core precision'
        elif cpu_bf16_supported():
            args.precision, args.precision_reason = 'bf16', 'auto: this CPU multiplies bf16 natively (AVX512-BF16/AMX)'
        else: args.precision_reason = 'auto: this CPU has no native bf16, so fp32'
    return args


def main(argv=None):
    args = parse_args(argv)
    if getattr(args, 'threads', None): torch.set_num_threads(args.threads)
    warnings.filterwarnings('ignore', message='.*torch.jit.script.*')
    out = {'pretrain': bench_pretrain, 'finetune': bench_finetune, 'scaling': bench_scaling}[args.what](args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
        print(f'results written to {args.json}')
    return out


if __name__ == '__main__':
    main()
