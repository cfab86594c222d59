"""docs/robustness.md from two runs of the sweep: before the fixes (085ba17) and now.

    python benchmarks/robustness_sweep/report.py BEFORE.json NOW.json > docs/robustness.md

The verdicts are the sweep's, except where `judged.py` reads a case by eye (a refusal whose line does not say what to
do, a case whose expectation was wrong); the test holding each case is named in `judged.py` too.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judged  # noqa: E402

WRONG, UNCLEAR = 'wrong', ('traceback', 'unclear')


def shorten(text: str) -> str:
    "A line as the user read it, its machine-specific folders cut."
    text = re.sub(r'/tmp/rs/\w+/work/cases/\w+/', '', text)
    text = re.sub(r'/tmp/rs/\w+/work/base/', 'base/', text)
    text = text.replace('|', '\\|').replace('`', "'")
    return text if len(text) <= 170 else text[:167] + '...'


def verdict(r: dict, when: str) -> str:
    "The sweep's verdict, or the one read by eye for this run ('before' or 'now')."
    return judged.VERDICT.get((r['id'], when), judged.VERDICT.get(r['id'], r['verdict']))


def seen(r: dict, when: str) -> str:
    "What the user saw: the status, the line, a traceback, a wrong result."
    v = verdict(r, when)
    line = shorten(r['said'])
    if r['rc'] == 0:
        text = 'status 0' + (f": WRONG: {shorten(r['wrong'])}" if r['wrong'] else ', ran on' if r['expect'] == 'error'
                             else ', works')
    elif r['traceback']: text = f"status {r['rc']}, traceback: `{line}`"
    else: text = f"status {r['rc']}: `{line}`"
    if v in judged.WORDS: text += f' ({judged.WORDS[v]})'
    return text


def main(before_path: str, now_path: str) -> str:
    before = {r['id']: r for r in json.loads(Path(before_path).read_text())}
    now = {r['id']: r for r in json.loads(Path(now_path).read_text())}
    ids = [i for i in now if i in before]
    bad_before = {i for i in ids if verdict(before[i], 'before') in (WRONG, *UNCLEAR)}
    still = {i for i in bad_before if verdict(now[i], 'now') in (WRONG, *UNCLEAR)}
    count = lambda vs, when: sum(verdict(before[i] if when == 'before' else now[i], when) in vs for i in ids)
    lines = [judged.HEAD.format(
        tried=len(ids), wrong=count((WRONG,), 'before'), unclear=count(UNCLEAR, 'before'),
        tracebacks=count(('traceback',), 'before'), fixed=len(bad_before - still), left=len(still),
        left_ids=', '.join(sorted(still)) or 'none', right=len(ids) - len(bad_before)), '']
    lines += ['| # | area | input or fault | what the user saw before | what the user sees now | test |',
              '|---|---|---|---|---|---|']
    for i in ids:
        b, n = before[i], now[i]
        now_text = seen(n, 'now')
        if now_text == seen(b, 'before'): now_text = 'the same'
        lines.append(f"| {i} | {n['area']} | {shorten(n['fault'])} | {seen(b, 'before')} | {now_text} | "
                     f"{judged.TESTS.get(i, 'sweep only')} |")
    return '\n'.join(lines) + '\n' + judged.TAIL


if __name__ == '__main__':
    print(main(*sys.argv[1:3]), end='')
