"""The sampling's Gumbel noise alone, by random source (`random_draws`), side by side in one run: the generator's draws
made and handed in, or counter draws computed where the noise is used; eager and compiled (inductor), interleaved.

    python -m benchmarks.draws_bench [--shape 8 19 30522] [--rounds 5] [--threads 1] [--device cpu]

ELECTRA-Small's noise is [128, 19, 30522] a step; the default is its batch of 8 (the CPU's patience).
"""
import argparse
import statistics
import time

import torch

from electra.objective.draws import CounterDraws
from electra.objective.sampling import sample_tokens


def sources(shape, device):
    "name -> a function sampling one token per row of fixed logits [shape] with that source's noise."
    logits = torch.randn(shape, device=device)
    g = torch.Generator(device=device).manual_seed(0)
    step = torch.zeros((), dtype=torch.int64, device=device)
    handed = torch.compile(lambda u: sample_tokens(logits, noise_draws=u), fullgraph=True, dynamic=False)
    counted = torch.compile(lambda s: sample_tokens(logits, noise_draws=CounterDraws(11081, s)), fullgraph=True,
                            dynamic=False)
    return {'generator eager': lambda: sample_tokens(logits, noise_draws=torch.rand(shape, device=device, generator=g)),
            'counter eager': lambda: sample_tokens(logits, noise_draws=CounterDraws(11081, 5)),
            'generator compiled (draws copied in)': lambda: handed(torch.rand(shape, device=device, generator=g)),
            'counter compiled (in the graph)': lambda: counted(step)}


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m benchmarks.draws_bench', description=__doc__.split('\n\n')[0])
    p.add_argument('--shape', type=int, nargs=3, default=[8, 19, 30522], help='noise shape [B, P, V]')
    p.add_argument('--rounds', type=int, default=5)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--device', default='cpu')
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device, shape = torch.device(args.device), tuple(args.shape)
    fns = sources(shape, device)
    for f in fns.values(): f()  # compiles
    times = {name: [] for name in fns}
    for _ in range(args.rounds):
        for name, f in fns.items():
            if device.type == 'cuda': torch.cuda.synchronize()
            t = time.perf_counter()
            f()
            if device.type == 'cuda': torch.cuda.synchronize()
            times[name].append(time.perf_counter() - t)
    for name, ts in times.items():
        print(f'{name:40s} median {statistics.median(ts) * 1e3:9.2f} ms   noise {list(shape)}, {args.rounds} rounds, '
              f'{args.device}, {args.threads} thread(s)')


if __name__ == '__main__':
    main()
