"""The hub copies of SQuAD (`rajpurkar/squad`, `rajpurkar/squad_v2`, or any dataset with their columns) written as the
official SQuAD JSON files, which a `kind: squad` task file then names:

    python -m electra.finetuning.tasks.qa.hub rajpurkar/squad_v2 data/squad2     # train.json, dev.json
    python -m electra.finetuning.tasks.qa.hub path/to/saved_copy data/squad2      # offline: parquet files or save_to_disk

Hub rows are one question each: `id`, `title`, `context`, `question`, `answers: {text: [...], answer_start: [...]}`
(empty lists for an unanswerable SQuAD 2.0 question). Questions of one context are grouped into one paragraph, in
row order, as the official files hold them; the `validation` split becomes `dev.json`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from electra.config.errors import ConfigError
from electra.config.version import command_parser
from electra.data.hub import hub_offline, hub_unreachable, shadowed_hub_name
from electra.runtime.errors import friendly_errors
from electra.runtime.files import atomic_write_text

__all__ = ['squad_json', 'load_hub_squad', 'write_hub_squad']

COLUMNS = ('id', 'title', 'context', 'question', 'answers')
SPLITS = {'train': 'train', 'validation': 'dev'}


def squad_json(rows, v2: bool) -> dict:
    "The official SQuAD JSON of hub rows: articles by title, paragraphs by context, in row order."
    articles: dict[str, dict[str, list]] = {}
    for r in rows:
        texts, starts = list(r['answers']['text']), [int(s) for s in r['answers']['answer_start']]
        qa = {'id': str(r['id']), 'question': r['question'],
              'answers': [{'text': t, 'answer_start': s} for t, s in zip(texts, starts)]}
        if v2: qa['is_impossible'] = not texts
        articles.setdefault(r['title'], {}).setdefault(r['context'], []).append(qa)
    data = [{'title': t, 'paragraphs': [{'context': c, 'qas': qas} for c, qas in pars.items()]}
            for t, pars in articles.items()]
    return {'version': 'v2.0' if v2 else '1.1', 'data': data}


def load_hub_squad(source: str):
    """A `DatasetDict` with `train` and `validation`: from a local directory (parquet files `<split>-*.parquet` or
    `save_to_disk` output), else from the hub (a clear error when it cannot be reached)."""
    import datasets
    path = Path(source)
    if path.is_dir():
        if (path / 'dataset_dict.json').is_file(): return datasets.load_from_disk(str(path))
        files = {s: sorted(str(f) for f in path.rglob(f'{s}-*.parquet')) for s in SPLITS}
        if not all(files.values()):
            raise ConfigError(f"{path}: no train-*.parquet and validation-*.parquet files, and not a save_to_disk copy.")
        return datasets.load_dataset('parquet', data_files=files)
    if shadow := shadowed_hub_name(source):  # a file: `datasets` would read it before the hub
        raise ConfigError(f"{source}: a file, not a directory of a hub copy, nor a hub name: {shadow}. Give a "
                          f"directory of its parquet files or of `save_to_disk` output, or a hub name.")
    why = 'HF_HUB_OFFLINE is set' if hub_offline() else hub_unreachable()
    if why:
        raise ConfigError(f"{source}: the hub cannot be reached ({why}). Give a local copy instead: a directory of "
                          f"its parquet files (train-*.parquet, validation-*.parquet) or of `save_to_disk` output.")
    return datasets.load_dataset(source)


def write_hub_squad(source: str, out: str | Path) -> list[Path]:
    "`<out>/train.json` and `<out>/dev.json` from a hub SQuAD dataset or a local copy of one; 2.0 when any row is unanswerable."
    ds = load_hub_squad(source)
    for split in SPLITS:
        if split not in ds: raise ConfigError(f"{source}: no '{split}' split (it has {', '.join(ds)}).")
        missing = [c for c in COLUMNS if c not in ds[split].column_names]
        if missing: raise ConfigError(f"{source}: split '{split}' has no column {', '.join(missing)}; not a SQuAD copy.")
    v2 = any(not a['text'] for s in SPLITS for a in ds[s]['answers'])
    written = []
    for split, name in SPLITS.items():
        written.append(atomic_write_text(json.dumps(squad_json(ds[split], v2), ensure_ascii=False), Path(out) / f'{name}.json'))
    return written


def main(argv: list[str] | None = None) -> int:
    "The command line: `python -m electra.finetuning.tasks.qa.hub DATASET_OR_DIR OUT_DIR`; its exit status."
    parser = command_parser('python -m electra.finetuning.tasks.qa.hub',
                            'A hub SQuAD dataset (or a local copy of one) as SQuAD JSON files.')
    parser.add_argument('source', metavar='DATASET_OR_DIR', help='a hub name (squad, squad_v2) or a saved copy')
    parser.add_argument('out', metavar='OUT_DIR', help='where train.json and dev.json are written')
    args = parser.parse_args(argv)
    for p in write_hub_squad(args.source, args.out): print(p)
    return 0


if __name__ == '__main__':
    friendly_errors()  # a bad source is one `error: ...` line with status 2, as in the other tools (it was status 1)
    sys.exit(main())
