"""The sweep's part of docs/robustness.md from two runs of the sweep: before the fixes (085ba17) and now.

    python benchmarks/robustness_sweep/report.py BEFORE.json NOW.json docs/robustness.md

rewrites the page's counts paragraph and its two sweep tables (cases wrong or unclear before the fixes, cases already
right), and keeps the rest, written by hand. NOW.json may hold only some cases (`sweep.py --only`): the others are
marked *not re-run*. The verdicts are the sweep's, except where `judged.py` reads a case by eye; the test holding
each case is named in `judged.py` too, and must be a test function of its file.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judged  # noqa: E402

WRONG, UNCLEAR = 'wrong', ('traceback', 'unclear')
REPO = Path(__file__).resolve().parents[2]


def shorten(text: str) -> str:
    "A line as the user read it, its machine-specific folders cut."
    text = text.replace(f'{REPO}/', '')
    text = re.sub(r'(/[\w.+-]+)+/cases/\w+/', '', text)  # the sweep's --work folder, wherever it was
    text = re.sub(r'(/[\w.+-]+)+/base/', 'base/', text)
    text = text.replace('|', '\\|').replace('`', "'")
    return text if len(text) <= 170 else text[:167] + '...'


def verdict(r: dict, when: str) -> str:
    "The sweep's verdict, or the one read by eye for this run ('before' or 'now')."
    return judged.VERDICT.get((r['id'], when), judged.VERDICT.get(r['id'], r['verdict']))


def seen(r: dict, when: str) -> str:
    "What the user saw: the status, the line, a traceback, a wrong result, and why where it was judged by eye."
    line = shorten(r['said'])
    if r['rc'] == 0:
        said = f": `{line}`" if line.startswith('warning:') else ''  # what a run that goes on says about its input
        text = 'status 0' + (f": WRONG: {shorten(r['wrong'])}" if r['wrong'] else ', ran on' if r['expect'] == 'error'
                             else ', works' + said)
    elif r['traceback']: text = f"status {r['rc']}, traceback: `{line}`"
    else: text = f"status {r['rc']}: `{line}`"
    why = judged.WORDS.get((r['id'], when), judged.WORDS.get(r['id']))
    return text + (f' ({why})' if why else '')


def check_tests(root: Path) -> None:
    "Every test judged.py names is a test function of its file, so the page never points at a test that is not there."
    for i, names in judged.TESTS.items():
        for name in names.split(', '):
            path, _, func = name.partition('::')
            text = (root / path).read_text() if (root / path).is_file() else ''
            if not re.search(rf'^def {re.escape(func)}\(', text, re.M):
                raise SystemExit(f'error: judged.py: {i}: {name} is not a test of the suite. Fix the name.')


def counts(before: dict, now: dict, ids: list[str]) -> str:
    "The counts paragraph: the sweep's verdicts before the fixes, and what the cases run again give now."
    v = {i: verdict(before[i], 'before') for i in ids}
    bad = [i for i in ids if v[i] in (WRONG, *UNCLEAR)]
    rerun = [i for i in bad if i in now]
    left = sorted(i for i in rerun if verdict(now[i], 'now') in (WRONG, *UNCLEAR)) + sorted(set(bad) - set(rerun))
    return judged.COUNTS.format(
        total=40 + len(ids), tried=len(ids), wrong=sum(x == WRONG for x in v.values()),
        unclear=sum(x in UNCLEAR for x in v.values()), tracebacks=sum(x == 'traceback' for x in v.values()),
        others=sum(x == 'unclear' for x in v.values()), right=len(ids) - len(bad), bad=len(bad), rerun=len(rerun),
        fixed=len(bad) - len(left), left=len(left), left_ids=f" ({', '.join(left)})" if left else '')


def tables(before: dict, now: dict, ids: list[str]) -> list[str]:
    "The two sweep tables: the cases wrong or unclear before the fixes (then and now), and those already right."
    bad = [i for i in ids if verdict(before[i], 'before') in (WRONG, *UNCLEAR)]
    lines = ['## The sweep: cases wrong or unclear before the fixes', '',
             '| # | area | input or fault | what the user saw before | what the user sees now | test |',
             '|---|---|---|---|---|---|']
    for i in bad:
        b = before[i]
        now_text = seen(now[i], 'now') if i in now else '*not re-run*'
        if now_text == seen(b, 'before'): now_text = 'the same'
        test = f'`{judged.TESTS[i]}`' if i in judged.TESTS else 'sweep only'
        lines.append(f"| {i} | {b['area']} | {shorten(b['fault'])} | {seen(b, 'before')} | {now_text} | {test} |")
    lines += ['', '## The sweep: cases that were already right', '',
              '| # | area | input or fault | what the user saw (before the fixes) | test |', '|---|---|---|---|---|']
    lines += [f"| {i} | {before[i]['area']} | {shorten(before[i]['fault'])} | {seen(before[i], 'before')} | "
              f"{f'`{judged.TESTS[i]}`' if i in judged.TESTS else 'sweep only'} |" for i in ids if i not in bad]
    return lines


def main(before_path: str, now_path: str, page_path: str) -> None:
    page = Path(page_path)
    check_tests(page.resolve().parents[1])
    before = {r['id']: r for r in json.loads(Path(before_path).read_text())}
    now = {r['id']: r for r in json.loads(Path(now_path).read_text())}
    ids = list(before)
    text = page.read_text()
    head = text[:text.index('## The sweep: cases wrong or unclear before the fixes')]
    head = re.sub(r'\*\*Counts\.\*\*.*?\n\n', lambda m: counts(before, now, ids) + '\n\n', head, count=1, flags=re.S)
    page.write_text(head + '\n'.join(tables(before, now, ids)) + '\n')


if __name__ == '__main__':
    if len(sys.argv) != 4: raise SystemExit('usage: report.py BEFORE.json NOW.json docs/robustness.md')
    main(*sys.argv[1:4])
