"""The robustness sweep: bad inputs and faults tried on the drivers as a user meets them, one small case at a time.

    python benchmarks/robustness_sweep/sweep.py                      # every case, in series; results.json + table
    python benchmarks/robustness_sweep/sweep.py --only P01,F03 -v    # some cases, with their stderr
    python benchmarks/robustness_sweep/sweep.py --list               # the cases

Each case runs a real command (`pretrain.py`, `finetune.py`, `python -m electra.experiments.compare`,
`python -m electra.convert`, `python -m electra.tools.notebooks`, a notebook through nbclient) on a tiny setup made
for it, and records what the user sees: the exit status, the first `error:`/`warning:`/`stopped:` line of stderr (else
its last line), whether a traceback appears, and, where a case checks its outputs, what was wrong with them. Cases
that kill a process (`kill -9`) or fill a disk (a small tmpfs; needs root) are real. The verdict per case:

- `refused`: the expected refusal, `error: ...` with status 2 and no traceback (how clear the line is, is read by eye)
- `ok`: a case that should work worked, its outputs checked
- `wrong`: it ran to status 0 where it should have stopped, or its outputs are wrong
- `traceback`: a Python traceback reached the user
- `unclear`: any other ending (another status, no `error:` line)

The cases are in cases.py (the first sweep) and cases_trust.py (the second; all of it: `--only 'ranges,names,metrics,
data values,edited,scripts,encodings,auto,two at once'`). It is a tool, not a test: the tests in tests/ hold each
fixed case. Fixtures (a 20-step demo pretraining, the demo
tasks) are built once under --work and reused. See docs/robustness.md for the results.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases  # noqa: E402,F401  (registers the cases)
import cases_trust  # noqa: E402,F401  (the second sweep's cases)
from harness import CASES, Case, Ctx, Proc, Record, said, verdict  # noqa: E402

def run_case(c: Case, base: Path, work: Path) -> Record:
    folder = work / c.id
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.monotonic()
    try: p = c.fn(Ctx(base, folder))
    except subprocess.TimeoutExpired as e:
        p = Proc(-9, '', (e.stderr or b'').decode(errors='replace') if isinstance(e.stderr, bytes) else (e.stderr or ''),
                 note='timed out')
    except Exception:  # the case itself is broken: recorded, the sweep goes on
        p = Proc(-1, '', traceback.format_exc(), note='case error')
    tb = 'Traceback (most recent call last)' in p.stderr
    v = 'case error' if p.note == 'case error' else verdict(c.expect, p, tb)
    return Record(c.id, c.area, c.fault, c.expect, p.rc, said(p.stderr)[:300], tb, p.wrong, v,
                  round(time.monotonic() - start, 1), p.note, p.stderr.splitlines()[-15:])


# -- fixtures, built once

def build_base(base: Path) -> None:
    "A 20-step demo pretraining (checkpoint, export, tokenizer), the demo GLUE tasks and the demo task files."
    done = base / 'done'
    if done.is_file(): return
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    c = Ctx(base, base)
    p = c.run(c.cmd(['pretrain.py'], '--run_name', 'tiny', '--steps', 20, '--batch_size', 8, '--log_every', 10,
                    '--warmup_steps', 2, '--eval_examples', 8, '--num_proc', 1, '--device', 'cpu',
                    '--output_dir', base / 'pt', '--cache_dir', base / 'cache'), timeout=600)
    assert p.rc == 0, p.stderr[-3000:]
    for code in (f"from electra.finetuning.tasks.glue.demo import write_demo_glue; write_demo_glue('{c.glue}')",
                 f"from electra.finetuning.tasks.demo import write_demo_tasks; write_demo_tasks('{c.tasks}')"):
        p = c.run([sys.executable, '-c', code])
        assert p.rc == 0, p.stderr[-3000:]
    done.write_text('ok\n')


def table(records: list[Record]) -> str:
    lines = ['| # | area | input or fault | verdict | rc | what the user saw |', '|---|---|---|---|---|---|']
    for r in records:
        seen = r.said.replace('|', '\\|') + (' (traceback)' if r.traceback else '') + (f' WRONG: {r.wrong}' if r.wrong else '')
        lines.append(f'| {r.id} | {r.area} | {r.fault.replace("|", chr(92) + "|")} | {r.verdict} | {r.rc} | {seen} |')
    return '\n'.join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--work', default='/tmp/robustness_sweep', help='fixtures and the cases\' folders')
    ap.add_argument('--only', default='', help='comma-separated case ids or areas')
    ap.add_argument('--out', default='', help='results JSON (default: <work>/results.json), written after each case; '
                    'the cases already in it are not run again (delete it to start over)')
    ap.add_argument('--list', action='store_true')
    ap.add_argument('-v', '--verbose', action='store_true', help="print each case's stderr tail")
    args = ap.parse_args(argv)
    chosen = set(filter(None, args.only.split(',')))
    todo = [c for c in CASES if not chosen or c.id in chosen or c.area in chosen]
    if args.list:
        for c in todo: print(f'{c.id}\t{c.area}\t{c.expect}\t{c.fault}')
        return 0
    work = Path(args.work)
    build_base(work / 'base')
    out = Path(args.out or work / 'results.json')
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {r['id']: Record(**r) for r in json.loads(out.read_text())} if out.is_file() else {}
    for c in (c for c in todo if c.id not in done):
        r = done[c.id] = run_case(c, work / 'base', work / 'cases')
        print(f'{r.id} [{r.verdict}] rc={r.rc} {r.seconds}s {r.fault}: {r.said}{" WRONG: " + r.wrong if r.wrong else ""}',
              flush=True)
        if args.verbose: print('    ' + '\n    '.join(r.stderr_tail))
        out.write_text(json.dumps([asdict(r) for r in done.values()], indent=1))
    records = [done[c.id] for c in todo]
    counts = {v: sum(r.verdict == v for r in records) for v in ('ok', 'refused', 'wrong', 'traceback', 'unclear', 'case error')}
    print(table(records))
    print(f'{len(records)} cases: ' + ', '.join(f'{n} {v}' for v, n in counts.items()))
    return 0


if __name__ == '__main__':
    sys.exit(main())

