"""Throughput of the pretraining data build: `python -m benchmarks.data_bench`.

Builds the shared real corpora (../shared/data/corpus: wikipedia_leads.txt, one paragraph per line, and sotu/,
one address per file on a single line; both sentence-split by spaCy) from scratch with 1 and 2 processes, and
prints examples/s, tokens/s and MB/s of each build (end to end: planning, reading, sentence splitting,
tokenizing, building, writing and checksumming the Arrow shards), MB per CPU-second and the load average
(other users of the machine slow the wall-clock figures), then projects the time to build OpenWebText (about
40 GB of text, 8 million documents, read the same way as sotu/: raw documents, sentences split) on N cores. Builds go to a temporary directory
and are deleted; the cache of a run is never touched. Best of `--repeat` runs, as other work on the machine
only ever slows a build down.

In the same run, the build's parts alone, in this one process on each corpus's batches as the build reads them
(`electra.data.builder.read_batches`): the reading, spaCy's sentencizer, the WordPiece tokenizer; beside the
one-process build, whose time is their sum plus building, writing and checksumming examples. On a machine shared
with other work, compare the ratios within one run, not seconds across runs.

`--breakdown N`: then N rounds per corpus of the one-process build (`build_corpus`, as above) with timers around its
calls of the sentencizer and the tokenizer, each beside the parts alone (the order flipped every other round): where
the build's CPU-seconds go, and its own work (reading, building the examples, writing and hashing the shards,
planning, fingerprinting and checking the build) as what is left.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import electra.data.builder as builder
from electra.data.builder import encoding_backend, read_batches
from electra.data.cache import build_corpus, build_summary
from electra.data.corpus import BuildSettings, resolve_corpus
from electra.data.sentences import split_sentences
from electra.data.tokenizer import load_tokenizer, train_tokenizer

__all__ = ['SHARED_CORPORA', 'OWT_BYTES', 'OWT_DOCUMENTS', 'bench', 'parts', 'breakdown', 'project', 'main']

SHARED_CORPORA = Path(__file__).resolve().parents[2] / 'shared' / 'data' / 'corpus'
OWT_BYTES, OWT_DOCUMENTS = 40e9, 8_000_000


def _cpu_seconds() -> float:
    "CPU time of this process and its finished children (the build processes), user + system."
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def bench(corpus: str, tokenizer, settings: BuildSettings, num_proc: int, repeat: int, work: Path) -> dict:
    "The fastest of `repeat` fresh builds of `corpus`: its build record plus rates, wall-clock and per CPU-second."
    best = None
    for i in range(repeat):
        cache = work / f'cache-{num_proc}-{i}'
        source = resolve_corpus([corpus], work / 'entries', settings)[0]
        cpu = _cpu_seconds()
        info = build_summary(build_corpus(source, tokenizer, settings, cache, seed=0, num_proc=num_proc, progress=False))
        info['cpu_seconds'] = _cpu_seconds() - cpu
        shutil.rmtree(cache, ignore_errors=True)
        if best is None or info['seconds'] < best['seconds']: best = info
    s, c = best['seconds'], best['counts']
    return {'corpus': Path(corpus).name, 'num_proc': best['num_proc'], 'shards': best['n_shards'],
            'MB': c['bytes'] / 1e6, 'documents': c['documents'], 'sentences': c['sentences'],
            'tokens': c['tokens'], 'examples': best['n_examples'], 'seconds': s, 'cpu_seconds': best['cpu_seconds'],
            'examples_per_s': best['n_examples'] / s, 'tokens_per_s': c['tokens'] / s, 'MB_per_s': c['bytes'] / 1e6 / s,
            'MB_per_cpu_s': c['bytes'] / 1e6 / best['cpu_seconds'], 'load_average': os.getloadavg()[0]}


def _timed(fn, repeat: int) -> tuple[object, float, float]:
    "fn()'s result, and the wall-clock and CPU seconds of its fastest of `repeat` calls."
    best = None
    for _ in range(repeat):
        cpu, start = _cpu_seconds(), time.perf_counter()
        out = fn()
        took = (time.perf_counter() - start, _cpu_seconds() - cpu)
        if best is None or took[0] < best[0]: best = took
    return out, *best


def parts(corpus: str, tokenizer, settings: BuildSettings, repeat: int, work: Path) -> dict:
    """The build's parts alone, in this process, best of `repeat` each: reading `corpus` into the build's batches,
    spaCy's sentencizer on them, the tokenizer on their sentences (batch by batch, as the build calls each)."""
    source = resolve_corpus([corpus], work / 'entries', settings)[0]
    batches, read_s, read_cpu = _timed(lambda: list(read_batches(source, settings)), repeat)
    split, split_s, split_cpu = _timed(lambda: [
        [x for line in split_sentences([x for doc, _ in batch for x in doc], lang) for x in line]
        for lang, batch in batches], repeat)
    backend = encoding_backend(tokenizer)
    tokens, tok_s, tok_cpu = _timed(lambda: sum(len(e.ids) for sentences in split for e in
                                                backend.encode_batch_fast(sentences, add_special_tokens=False)), repeat)
    return {'corpus': Path(corpus).name, 'MB': source.total_bytes() / 1e6, 'sentences': sum(map(len, split)),
            'tokens': tokens, 'read_s': read_s, 'sentencizer_s': split_s, 'tokenizer_s': tok_s,
            'read_cpu_s': read_cpu, 'sentencizer_cpu_s': split_cpu, 'tokenizer_cpu_s': tok_cpu}


class _Timed:
    "Calls of `fn` with their wall-clock and CPU seconds added up in `took` under `name`."

    def __init__(self, fn, name: str, took: dict):
        self.fn, self.name, self.took = fn, name, took

    def __call__(self, *args, **kwargs):
        cpu, start = _cpu_seconds(), time.perf_counter()
        try: return self.fn(*args, **kwargs)
        finally:
            wall, c = self.took.get(self.name, (0.0, 0.0))
            self.took[self.name] = (wall + time.perf_counter() - start, c + _cpu_seconds() - cpu)


class _TimedBackend:
    "A tokenizer backend whose `encode_batch_fast` calls are timed (`_Timed`)."

    def __init__(self, backend, took: dict):
        self.encode_batch_fast = _Timed(backend.encode_batch_fast, 'tokenizer', took)


@contextlib.contextmanager
def _build_timers(took: dict):
    "The builder's sentencizer and tokenizer calls timed into `took` while inside (in this process's builds only)."
    split, backend = builder.split_sentences, builder.encoding_backend
    builder.split_sentences = _Timed(split, 'sentencizer', took)
    builder.encoding_backend = lambda tokenizer: _TimedBackend(backend(tokenizer), took)
    try: yield
    finally: builder.split_sentences, builder.encoding_backend = split, backend


def breakdown(corpus: str, tokenizer, settings: BuildSettings, rounds: int, work: Path) -> list[dict]:
    """`rounds` rounds of the one-process build of `corpus` with its sentencizer and tokenizer calls timed, each beside
    the parts alone (`parts`, once), the order flipped every other round: per round, the build's CPU-seconds in all, in
    each call, and in the rest (its own work), and the parts' CPU-seconds."""
    out = []
    for i in range(rounds):
        row = {}
        for what in ('build', 'parts') if i % 2 == 0 else ('parts', 'build'):
            if what == 'parts':
                row['parts'] = parts(corpus, tokenizer, settings, 1, work)
                continue
            took, cache = {}, work / f'breakdown-{i}'
            source = resolve_corpus([corpus], work / 'entries', settings)[0]
            cpu, start = _cpu_seconds(), time.perf_counter()
            with _build_timers(took): build_corpus(source, tokenizer, settings, cache, seed=0, num_proc=1, progress=False)
            cpu, wall = _cpu_seconds() - cpu, time.perf_counter() - start
            shutil.rmtree(cache, ignore_errors=True)
            row.update(cpu_s=cpu, wall_s=wall, sentencizer_cpu_s=took['sentencizer'][1],
                       tokenizer_cpu_s=took['tokenizer'][1], rest_cpu_s=cpu - took['sentencizer'][1] - took['tokenizer'][1])
        out.append({'corpus': Path(corpus).name, 'round': i, **row})
    return out


def _breakdown_lines(found: list[dict]) -> list[str]:
    "Per corpus, the medians over its rounds: the build's CPU-seconds by call beside the parts', and the ratio."
    lines = ['the one-process build by call, beside the parts alone, in rounds (CPU s, median of the rounds)',
             f"{'corpus':<22}{'round':>6}{'build':>8}{'in sentencizer':>16}{'in tokenizer':>14}{'rest':>7}"
             f"{'parts':>8}{'sentencizer':>13}{'tokenizer':>11}{'read':>7}{'build/parts':>13}"]
    keys = ('cpu_s', 'sentencizer_cpu_s', 'tokenizer_cpu_s', 'rest_cpu_s')
    part_keys = ('sentencizer_cpu_s', 'tokenizer_cpu_s', 'read_cpu_s')
    for corpus in dict.fromkeys(r['corpus'] for r in found):
        rows = [r for r in found if r['corpus'] == corpus]
        cells = [[r[k] for k in keys] + [sum(r['parts'][k] for k in part_keys)] + [r['parts'][k] for k in part_keys]
                 for r in rows]
        for r, c in zip(rows, cells): c.append(c[0] / c[4])
        cells.append([statistics.median(col) for col in zip(*cells)])
        for label, c in zip([str(r['round']) for r in rows] + ['median'], cells):
            lines.append(f'{corpus:<22}{label:>6}{c[0]:>8.2f}{c[1]:>16.2f}{c[2]:>14.2f}{c[3]:>7.2f}{c[4]:>8.2f}'
                         f'{c[5]:>13.2f}{c[6]:>11.2f}{c[7]:>7.2f}{c[8]:>13.2f}')
    return lines


def _parts_lines(found: list[dict], rows: list[dict]) -> list[str]:
    "Each corpus's parts beside its one-process build: seconds, and the build over the parts' sum."
    lines = ['the parts alone, in one process, beside the one-process build (wall-clock s; CPU s in brackets)',
             f"{'corpus':<22}{'read':>14}{'sentencizer':>16}{'tokenizer':>16}{'sum':>16}{'build':>16}"
             f"{'build/sum':>18}"]
    for f in found:
        b = next(r for r in rows if r['corpus'] == f['corpus'] and r['num_proc'] == 1)
        wall = [f['read_s'], f['sentencizer_s'], f['tokenizer_s']]
        cpu = [f['read_cpu_s'], f['sentencizer_cpu_s'], f['tokenizer_cpu_s']]
        cells = [*zip(wall, cpu), (sum(wall), sum(cpu)), (b['seconds'], b['cpu_seconds'])]
        lines.append(f"{f['corpus']:<22}" + ''.join(f'{w:>7.2f} ({c:>5.2f})' for w, c in cells) +
                     f"{b['seconds'] / sum(wall):>11.2f} ({b['cpu_seconds'] / sum(cpu):>4.2f})")
    return lines


def project(rows: list[dict], cores: list[int], sentence_split: str = 'auto') -> list[str]:
    """Lines projecting the OpenWebText build from the raw-document corpus (sotu) rows. Shards are independent,
    so N processes with a core each build N times what one core does: the projection is N times the MB per
    CPU-second measured here (wall-clock speed-ups on a shared machine measure the other users too)."""
    raw = [r for r in rows if r['corpus'] == 'sotu'] or rows
    rate = max(r['MB_per_cpu_s'] for r in raw)
    ref = max(raw, key=lambda r: r['MB_per_cpu_s'])
    examples_per_mb = ref['examples'] / ref['MB']
    how = 'no sentence splitting' if sentence_split == 'none' else 'sentences split by spaCy'
    lines = [f"OpenWebText (~{OWT_BYTES / 1e9:.0f} GB, {OWT_DOCUMENTS / 1e6:.0f}M documents) at the rate of {ref['corpus']} "
             f"({how}): {rate:.2f} MB per CPU-second, about "
             f"{examples_per_mb * OWT_BYTES / 1e6 / 1e6:.0f}M examples of {ref['max_length']} tokens"]
    for n in cores:
        lines.append(f'  {n:>3} cores: {OWT_BYTES / 1e6 / (rate * n) / 3600:6.1f} h')
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog='python -m benchmarks.data_bench', description=__doc__.split('\n\n')[0])
    p.add_argument('--corpus', nargs='*', default=[str(SHARED_CORPORA / 'wikipedia_leads.txt'), str(SHARED_CORPORA / 'sotu')],
                   help='corpus entries to build (default: the shared wikipedia_leads.txt and sotu/)')
    p.add_argument('--num_proc', default='1,2', help='process counts to measure, comma-separated')
    p.add_argument('--max_length', type=int, default=128)
    p.add_argument('--sentence_split', default='auto', help="'auto' (spaCy for these corpora), 'none' or a language")
    p.add_argument('--tokenizer', default='', help='a vocab.txt or tokenizer directory; default: a 30522-token '
                                                   'WordPiece trained on the first corpus (not timed)')
    p.add_argument('--repeat', type=int, default=1, help='builds per setting; the fastest counts')
    p.add_argument('--cores', default='2,8,16,64', help='core counts for the OpenWebText projection')
    p.add_argument('--parts', type=int, default=1, help='1: also time the build\'s parts alone (reading, sentencizer, '
                                                       'tokenizer) beside the one-process build; 0: builds only')
    p.add_argument('--breakdown', type=int, default=0, help='then this many rounds per corpus of the one-process '
                                                             'build with its sentencizer and tokenizer calls timed, '
                                                             'each beside the parts alone (0: none)')
    p.add_argument('--json', default='', help='also write the rows and projection to this file')
    args = p.parse_args(argv)
    missing = [c for c in args.corpus if not Path(c).exists()]
    if missing:
        print(f"error: {', '.join(missing)} not found (the shared corpora live in {SHARED_CORPORA}).")
        return 2
    settings = BuildSettings(max_length=args.max_length, sentence_split=args.sentence_split)
    with tempfile.TemporaryDirectory(prefix='electra-data-bench-') as tmp:
        work = Path(tmp)
        if args.tokenizer: tokenizer = load_tokenizer(args.tokenizer)
        else:
            sources = resolve_corpus(args.corpus[:1], work / 'entries', settings)
            tokenizer = train_tokenizer([], 30522, True, work / 'tokenizer', sources)
        rows = []
        print(f"{'corpus':<22}{'procs':>6}{'shards':>7}{'MB':>7}{'docs':>8}{'examples':>10}{'seconds':>9}"
              f"{'examples/s':>12}{'tokens/s':>11}{'MB/s':>7}{'MB/cpu-s':>10}{'load':>6}")
        for corpus in args.corpus:
            for n in [int(x) for x in args.num_proc.split(',')]:
                r = bench(corpus, tokenizer, settings, n, args.repeat, work)
                r['max_length'] = args.max_length
                rows.append(r)
                print(f"{r['corpus']:<22}{r['num_proc']:>6}{r['shards']:>7}{r['MB']:>7.1f}{r['documents']:>8,}"
                      f"{r['examples']:>10,}{r['seconds']:>9.1f}{r['examples_per_s']:>12,.0f}{r['tokens_per_s']:>11,.0f}"
                      f"{r['MB_per_s']:>7.2f}{r['MB_per_cpu_s']:>10.2f}{r['load_average']:>6.1f}", flush=True)
        found = [parts(corpus, tokenizer, settings, args.repeat, work) for corpus in args.corpus] if args.parts else []
        rounds = [r for corpus in args.corpus for r in breakdown(corpus, tokenizer, settings, args.breakdown, work)]
    lines = project(rows, [int(x) for x in args.cores.split(',')], args.sentence_split)
    print('\n'.join(lines))
    if found and any(r['num_proc'] == 1 for r in rows): print('\n'.join(_parts_lines(found, rows)))
    if rounds: print('\n'.join(_breakdown_lines(rounds)))
    if args.json:
        Path(args.json).write_text(json.dumps({'settings': dataclasses.asdict(settings), 'rows': rows, 'parts': found,
                                               'breakdown': rounds, 'projection': lines}, indent=1))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
