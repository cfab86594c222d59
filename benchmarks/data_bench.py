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
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from electra.data.builder import encoding_backend, read_batches
from electra.data.cache import build_corpus, build_summary
from electra.data.corpus import BuildSettings, resolve_corpus
from electra.data.sentences import split_sentences
from electra.data.tokenizer import load_tokenizer, train_tokenizer

__all__ = ['SHARED_CORPORA', 'OWT_BYTES', 'OWT_DOCUMENTS', 'bench', 'parts', 'project', 'main']

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
    lines = project(rows, [int(x) for x in args.cores.split(',')], args.sentence_split)
    print('\n'.join(lines))
    if found and any(r['num_proc'] == 1 for r in rows): print('\n'.join(_parts_lines(found, rows)))
    if args.json:
        Path(args.json).write_text(json.dumps({'settings': dataclasses.asdict(settings), 'rows': rows, 'parts': found,
                                               'projection': lines}, indent=1))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
