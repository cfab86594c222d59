"""Readers of GLUE data from three sources, each a `TaskSource` returning the same `Examples` (`tasks/sources.py`):
the HF hub (`nyu-mll/glue`), a directory in the layout of the GLUE download script (`<dir>/CoLA/train.tsv`,
`<dir>/MNLI/dev_matched.tsv`, `<dir>/diagnostic/diagnostic.tsv`, ...), or saved copies of the hub dataset
(`<dir>/cola/` holding `save_to_disk` output or `<split>-*.parquet` files). TSV files are read as the official code
reads them: without quoting, CoLA's train/dev files without a header, test files with the example's own index.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from electra.config.errors import RunWarning
from electra.data.hub import hub_unreachable, shadowed_hub_name
from electra.finetuning.tasks.base import TaskInfo
from electra.finetuning.tasks.glue.tasks import GlueDataError, TASKS
from electra.finetuning.tasks.sources import Examples, TaskSource, read_delimited

__all__ = ['TsvSource', 'HubSource', 'SavedSource', 'open_source']


def _unique_indices(idx: np.ndarray, places: list, where: str, unit: str) -> None:
    "A test split's example indices must differ: the submission has one line per index."
    if len(np.unique(idx)) == len(idx): return
    first = {}
    for v, at in zip(idx.tolist(), places):
        if v in first:
            raise GlueDataError(f"{where} {unit} {at}: index {v} is also on {unit} {first[v]}; the submission file would "
                                "hold two predictions for it. Fix or re-download the file.")
        first[v] = at


def _label_ids(task: TaskInfo, raw: list[str], where: str, lines: np.ndarray, hint: str = '') -> np.ndarray:
    "Label strings of a TSV file as ids (class position in `task.labels`) or STS-B floats in [0, 5]."
    if task.is_regression:
        out = np.empty(len(raw), dtype=np.float32)
        for i, v in enumerate(raw):
            try: out[i] = float(v)
            except ValueError: out[i] = np.nan
            if not 0.0 <= out[i] <= 5.0:
                raise GlueDataError(f"{where} line {lines[i]}: label {v!r} is not a similarity score in [0, 5]. "
                                    f"Check that the file is {task.name}'s {where.rsplit('/', 1)[-1]} in the GLUE layout.")
        return out
    lookup = {s: i for i, s in enumerate(task.labels)}
    out = np.empty(len(raw), dtype=np.int64)
    for i, v in enumerate(raw):
        if v not in lookup:
            raise GlueDataError(f"{where} line {lines[i]}: unknown label {v!r} for {task.name}; expected one of "
                                f"{', '.join(task.labels)}.{hint} Fix the file or point --data at the GLUE download layout.")
        out[i] = lookup[v]
    return out


class TsvSource(TaskSource):
    "A directory in the layout of the GLUE download script."

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.description = f'GLUE TSV files in {self.root}'

    def has(self, task: TaskInfo, split: str) -> bool:
        return split in task.tsv and (self.root / task.tsv[split].path).is_file()

    def files(self, task: TaskInfo, split: str) -> list[Path]:
        path = self.root / task.tsv[split].path
        if not path.is_file():
            wanted = ', '.join(str(self.root / task.tsv[s].path) for s in task.splits)
            raise GlueDataError(f"{path}: file not found. {task.name} needs {wanted} (the GLUE download-script layout); "
                                f"or use --data hub, or drop {task.name} from --tasks.")
        return [path]

    def load(self, task: TaskInfo, split: str) -> Examples:
        layout = task.tsv[split]
        path, = self.files(task, split)
        cols, width, records = _columns(task, split, path, read_delimited(path))
        rows, lines = _whole_rows(task, split, path, records, width)
        text_a = [r[cols['text_a']] for r in rows]
        text_b = [r[cols['text_b']] for r in rows] if 'text_b' in cols else None
        if 'label' in cols:
            hint = '' if layout.header else f' ({task.name} {split} files have no header line.)'
            label = _label_ids(task, [r[cols['label']] for r in rows], str(path), lines, hint)
        else:
            label = np.full(len(rows), -1, dtype=np.float32 if task.is_regression else np.int64)
        if 'index' not in cols: return Examples(lines - (2 if layout.header else 1), text_a, text_b, label)
        try: idx = np.array([int(r[cols['index']]) for r in rows], dtype=np.int64)
        except ValueError as e:
            raise GlueDataError(f"{path}: column '{layout.index}' must hold integer example indices ({e}).") from None
        _unique_indices(idx, lines.tolist(), str(path), 'line')
        return Examples(idx, text_a, text_b, label)


def _columns(task: TaskInfo, split: str, path: Path, records: list) -> tuple[dict[str, int], int, list]:
    "Where each role's column is, how many fields a line has, and the records below the header (if the layout has one)."
    layout = task.tsv[split]
    if not layout.header:
        return ({r: getattr(layout, r) for r in ('text_a', 'text_b', 'label') if getattr(layout, r) is not None},
                layout.n_columns, records)
    if not records: raise GlueDataError(f"{path}: empty file; expected a header line and one row per example.")
    header, cols = records[0][1], {}
    for role in ('text_a', 'text_b', 'label', 'index'):
        name = getattr(layout, role)
        if name is None: continue
        if name not in header:
            raise GlueDataError(f"{path}: no column '{name}' in the header ({', '.join(header)}). {task.name} "
                                f"{split} files in the GLUE download layout have it; re-create the file with that column.")
        cols[role] = header.index(name)
    return cols, len(header), records[1:]


def _whole_rows(task: TaskInfo, split: str, path: Path, records: list, width: int) -> tuple[list[list[str]], np.ndarray]:
    """The rows with `width` fields and their lines. Columns are read by position, so one field more or less shifts
    the texts and the label: such a line of a training file with a header is skipped with a warning (the official
    reader skips the lines it cannot read; QQP's train.tsv has a few), in any other file it stops the job."""
    bad = [(n, len(r)) for n, r in records if len(r) != width]
    if not bad: return [r for _, r in records], np.array([n for n, _ in records], dtype=np.int64)
    (n, got), header = bad[0], task.tsv[split].header
    if split != 'train' or not header:
        expected = (f'the header has {width}' if header else
                    f'expected {width} ({task.name} {split} files have no header line)')
        raise GlueDataError(f"{path} line {n} has {got} fields, {expected}. A field holding a tab shifts the columns "
                            f"after it (the GLUE files are read without quoting); fix the line or re-download the file.")
    warnings.warn(f"{path}: skipped {len(bad)} line(s) whose fields do not match the header's {width} (first: line {n} "
                  f"has {got} fields), as the official reader skips lines it cannot read.", RunWarning, stacklevel=3)
    keep = [(n, r) for n, r in records if len(r) == width]
    return [r for _, r in keep], np.array([n for n, _ in keep], dtype=np.int64)


def _hf_split(split: str) -> str:
    return split.replace('dev', 'validation')


class _DatasetsSource(TaskSource):
    "Common conversion of an HF `datasets.Dataset` of nyu-mll/glue into `Examples`."

    def _convert(self, task: TaskInfo, split: str, ds, where: str) -> Examples:
        a, b = task.hf_text
        missing = [c for c in (a, b, 'label', 'idx') if c is not None and c not in ds.column_names]
        if missing:
            raise GlueDataError(f"{where}: no column(s) {', '.join(missing)} (found {', '.join(ds.column_names)}); "
                                f"expected a copy of nyu-mll/glue '{task.hf_config}'.")
        cols = ds.to_dict()
        is_test = split.startswith('test')
        if not is_test and None in cols['label']:  # a null label: numpy cannot make it a class id
            raise GlueDataError(f"{where} row {cols['label'].index(None)}: no label (null); expected a copy of "
                                f"nyu-mll/glue '{task.hf_config}', whose {split} rows all have one. Fix or re-save it.")
        label = np.asarray([-1 if v is None else v for v in cols['label']],
                           dtype=np.float32 if task.is_regression else np.int64)
        if not is_test:
            bad = ~((label >= 0) & (label <= 5)) if task.is_regression else ~((label >= 0) & (label < task.n_outputs))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise GlueDataError(f"{where} row {i}: label {label[i]} is out of range for {task.name} "
                                    f"({'a score in [0, 5]' if task.is_regression else f'ids 0..{task.n_outputs - 1}'}).")
        else:
            label = np.full(len(label), -1, dtype=label.dtype)
            _unique_indices(np.asarray(cols['idx'], dtype=np.int64), list(range(len(label))), where, 'row')
        return Examples(np.asarray(cols['idx'], dtype=np.int64), [str(t) for t in cols[a]],
                        None if b is None else [str(t) for t in cols[b]], label)


class HubSource(_DatasetsSource):
    "The HF hub dataset `nyu-mll/glue` (downloaded and cached by `datasets`)."
    description = 'the HF hub (nyu-mll/glue)'

    def __init__(self, name: str = 'nyu-mll/glue'):
        self.name, self._cache = name, {}

    def files(self, task: TaskInfo, split: str) -> list[Path]:
        "The Arrow files of the split in the `datasets` cache (the hub's copy as downloaded)."
        self.load(task, split)
        return [Path(f['filename']) for f in self._cache[task.hf_config][_hf_split(split)].cache_files]

    def load(self, task: TaskInfo, split: str) -> Examples:
        import datasets
        if task.hf_config not in self._cache:
            if shadow := shadowed_hub_name(self.name):
                raise GlueDataError(f"data: {self.name} is a hub dataset, but {shadow}. Give --data the folder's "
                                    f"path to read it, or start the job from another folder to read the hub's.")
            try:
                if unreachable := hub_unreachable(): raise ConnectionError(unreachable)  # at once, not after retries
                self._cache[task.hf_config] = datasets.load_dataset(self.name, task.hf_config)
            except (ConnectionError, OSError) as e:
                raise GlueDataError(f"data: cannot load {self.name}/{task.hf_config} from the HF hub ({e}). Offline, "
                                    "point --data at a directory of GLUE TSV files in the download-script layout "
                                    "(<dir>/CoLA/train.tsv, ...) or of saved copies of the hub dataset (<dir>/cola/ from "
                                    "save_to_disk or parquet files), or use --data demo for the built-in sample tasks.") from None
        return self._convert(task, split, self._cache[task.hf_config][_hf_split(split)], f'{self.name}/{task.hf_config}')


class SavedSource(_DatasetsSource):
    "Saved copies of nyu-mll/glue: `<dir>/<config>/` from `save_to_disk`, or `<dir>/<config>/<split>[-*].parquet`."

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.description = f'saved copies of nyu-mll/glue in {self.root}'

    def _parquet(self, task: TaskInfo, split: str) -> list[Path]:
        d, s = self.root / task.hf_config, _hf_split(split)
        return sorted(p for p in d.glob(f'{s}*.parquet') if p.stem == s or p.stem.startswith(f'{s}-'))

    def has(self, task: TaskInfo, split: str) -> bool:
        d = self.root / task.hf_config
        if (d / 'dataset_dict.json').is_file(): return (d / _hf_split(split)).is_dir()
        return bool(self._parquet(task, split))

    def files(self, task: TaskInfo, split: str) -> list[Path]:
        "The split's parquet files, or the Arrow files of its `save_to_disk` folder."
        d, s = self.root / task.hf_config, _hf_split(split)
        if (d / 'dataset_dict.json').is_file(): return sorted((d / s).glob('*.arrow'))
        return self._parquet(task, split)

    def load(self, task: TaskInfo, split: str) -> Examples:
        import datasets
        d, s = self.root / task.hf_config, _hf_split(split)
        if (d / 'dataset_dict.json').is_file():
            dsd = datasets.load_from_disk(str(d))
            if s not in dsd:
                raise GlueDataError(f"{d}: the saved dataset has no split '{s}' (found {', '.join(dsd)}); "
                                    f"save all splits of nyu-mll/glue '{task.hf_config}'.")
            return self._convert(task, split, dsd[s], f'{d}/{s}')
        files = self._parquet(task, split)
        if not files:
            raise GlueDataError(f"{d}: no '{s}' split: expected {d}/{s}-*.parquet (the hub layout) or a save_to_disk "
                                f"directory with dataset_dict.json; or use --data hub.")
        return self._convert(task, split, datasets.Dataset.from_parquet([str(f) for f in files]), str(files[0]))


def open_source(data: str) -> TaskSource:
    """`'hub'`, or a directory: the GLUE download layout when it has a task folder such as `CoLA/` or `STS-B/` with
    TSV files, saved hub copies when it has config folders such as `cola/` or `stsb/`. The `data` key's 'demo' (the
    sample tasks, written first) is `electra.resolve_data`'s."""
    if data == 'hub': return HubSource()
    if data == 'demo' and not Path(data).is_dir():
        raise GlueDataError("data: 'demo' names the project's sample tasks, written to a folder first: "
                            "electra.resolve_data('demo', cfg.cache_dir) writes them there and opens them, as "
                            "finetune.py does; open_source reads 'hub' or a folder.")
    root = Path(data)
    if not root.is_dir():
        raise GlueDataError(f"data: '{data}' is not a directory. Use 'hub', 'demo', a directory in the GLUE "
                            "download layout (<dir>/CoLA/train.tsv, ...) or one of saved copies of nyu-mll/glue (<dir>/cola/).")
    tsv = TsvSource(root)
    if any(tsv.has(t, s) for t in TASKS.values() for s in t.tsv): return tsv
    saved = SavedSource(root)
    if any(saved.has(t, s) for t in TASKS.values() for s in t.splits): return saved
    raise GlueDataError(f"data: {root} holds no GLUE data: expected task folders with TSV files (CoLA/train.tsv, "
                        f"STS-B/dev.tsv, MNLI/dev_matched.tsv, diagnostic/diagnostic.tsv, ...) or saved hub copies "
                        f"(cola/dataset_dict.json or cola/train-00000-of-00001.parquet, ...).")
