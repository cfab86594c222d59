"""The notebooks are the source of the driver scripts: `notebooks/Pretrain.ipynb` -> `pretrain.py` and
`notebooks/Finetune_GLUE.ipynb` -> `finetune.py`, exported with jupytext in its "percent" format (`# %%` marks a
code cell, `# %% [markdown]` a markdown cell), so a script reads top to bottom as its notebook does. Each script is
also written, byte for byte, to `electra/jobs/`: the copy the installed package ships and its commands
`electra-pretrain` and `electra-finetune` run (a package cannot hold files of the repository's root).

    python -m electra.tools.notebooks export        # notebooks -> scripts; also strips outputs from every notebook
    python -m electra.tools.notebooks check         # exit 1, naming each script that differs from its notebook's export
                                              # and each notebook stored with outputs or execution counts
    python -m electra.tools.notebooks from-scripts  # the other way, scripts -> notebooks (how the notebooks were made; takes
                                              # a script edited by hand into its notebook, replacing the notebook's cells)

The export is deterministic: a fixed header (no jupytext version), cells with only their `tags` metadata (the
config cell is tagged `parameters`, as papermill expects), nothing else. Notebooks are stored without outputs,
execution counts or per-run metadata; `export` removes them after a notebook was run and saved in Jupyter.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from electra.config.base import ConfigError
from electra.config.version import version_line
from electra.runtime.errors import friendly_errors

__all__ = ['PAIRS', 'JOBS_DIR', 'script_paths', 'NOTEBOOK_DIR', 'Problem', 'export_text', 'clean_notebook', 'export',
           'check', 'from_scripts', 'main']

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = 'notebooks'
PAIRS = (('notebooks/Pretrain.ipynb', 'pretrain.py'), ('notebooks/Finetune_GLUE.ipynb', 'finetune.py'))
JOBS_DIR = 'electra/jobs'  # where the package keeps its copy of each script (package data: pyproject.toml)


def script_paths(script_rel: str) -> tuple[str, str]:
    "Where the export writes `script_rel`: the repository root (the user-facing driver) and the package's copy."
    return script_rel, f'{JOBS_DIR}/{script_rel}'

_HEADER = """\
# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

"""
_FORMAT = {'extension': '.py', 'format_name': 'percent', 'notebook_metadata_filter': '-all',
           'cell_metadata_filter': 'tags'}
_KERNELSPEC = {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'}
_KEEP_CELL_METADATA = ('tags',)


@dataclass(frozen=True)
class Problem:
    "One reason `check` fails: the file and what is wrong with it."
    path: str
    message: str

    def __str__(self) -> str: return f'{self.path}: {self.message}'


def _read(path: Path, rel: str):
    "The notebook at `path` (`rel` in the repository); a ConfigError saying how to get it back when it is not one."
    import nbformat
    try: return nbformat.read(str(path), as_version=4)
    except (ValueError, OSError, nbformat.ValidationError) as e:  # NotJSONError is a ValueError
        raise ConfigError(f"{rel}: not a notebook ({str(e).splitlines()[0]}). Restore it with `git checkout -- {rel}`, "
                          "or write it from its script with `python -m electra.tools.notebooks from-scripts`.") from None


def clean_notebook(nb):
    """A copy of `nb` as it is stored: no outputs, no execution counts, cell metadata reduced to `tags`, notebook
    metadata reduced to the kernelspec, cell ids derived from the cells' text (stable diffs)."""
    nb = copy.deepcopy(nb)
    nb.metadata = {'kernelspec': dict(_KERNELSPEC), 'language_info': {'name': 'python'}}
    nb.nbformat, nb.nbformat_minor = 4, 5
    seen: set[str] = set()
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in _KEEP_CELL_METADATA}
        cell_id = base = hashlib.sha1(f'{cell.cell_type}\n{cell.source}'.encode()).hexdigest()[:12]
        n = 1
        while cell_id in seen: cell_id, n = f'{base}-{n}', n + 1
        cell.id = cell_id
        seen.add(cell_id)
        if cell.cell_type == 'code': cell.outputs, cell.execution_count = [], None
    return nb


def export_text(nb) -> str:
    "The script of notebook `nb`: jupytext percent format under a fixed header."
    import jupytext
    body = jupytext.writes(clean_notebook(nb), fmt=dict(_FORMAT))
    return _HEADER + body.lstrip('\n')


def _notebook_text(nb) -> str:
    import nbformat
    return nbformat.writes(nb) + '\n'


def _stored_problems(path: Path, nb, rel: str) -> list[Problem]:
    "Outputs, execution counts and run metadata a stored notebook must not have."
    problems = []
    with_outputs = [i for i, c in enumerate(nb.cells) if c.cell_type == 'code' and c.get('outputs')]
    counted = [i for i, c in enumerate(nb.cells) if c.cell_type == 'code' and c.get('execution_count') is not None]
    if with_outputs: problems.append(Problem(rel, f'stored with outputs (cells {with_outputs}); run `python -m electra.tools.notebooks export`'))
    if counted: problems.append(Problem(rel, f'stored with execution counts (cells {counted}); run `python -m electra.tools.notebooks export`'))
    if not problems and path.read_text(encoding='utf-8') != _notebook_text(clean_notebook(nb)):  # e.g. a stale cell id
        problems.append(Problem(rel, "not stored as `export` stores it (cell ids follow the cells' text); run "
                                     "`python -m electra.tools.notebooks export`"))
    return problems


def _notebooks(root: Path) -> list[Path]:
    return sorted((root / NOTEBOOK_DIR).glob('*.ipynb'))


def check(root: str | Path = ROOT) -> list[Problem]:
    """Every reason the repository at `root` is out of sync: a script that differs from its notebook's export (or a
    missing file), a notebook stored with outputs or execution counts. Empty when all is well."""
    root = Path(root)
    problems: list[Problem] = []
    for path in _notebooks(root):
        rel = str(path.relative_to(root))
        problems += _stored_problems(path, _read(path, rel), rel)
    for nb_rel, script_rel in PAIRS:
        if not (root / nb_rel).is_file():
            problems.append(Problem(nb_rel, f'missing: the notebook that {script_rel} is exported from. Restore it with '
                                            f'`git checkout -- {nb_rel}`, or write it from {script_rel} with '
                                            '`python -m electra.tools.notebooks from-scripts`'))
            continue
        text = export_text(_read(root / nb_rel, nb_rel))
        problems += [p for path in script_paths(script_rel) if (p := _script_problem(root, path, nb_rel, text))]
    return problems


def _script_problem(root: Path, script_rel: str, nb_rel: str, text: str) -> Problem | None:
    "What is wrong with the script at `script_rel` whose notebook `nb_rel` exports as `text`; None when it is that."
    script = root / script_rel
    if not script.is_file():
        return Problem(script_rel, f'missing: run `python -m electra.tools.notebooks export` to write it from {nb_rel}')
    if script.read_text(encoding='utf-8') != text and script_rel.startswith(JOBS_DIR):  # a copy: nothing to keep
        return Problem(script_rel, f'differs from the export of {nb_rel}, of which it is the package\'s copy: run '
                                   '`python -m electra.tools.notebooks export` (edit the notebook, never this copy)')
    if script.read_text(encoding='utf-8') != text:
        return Problem(script_rel, f'differs from the export of {nb_rel}: edit the notebook and run '
                                   '`python -m electra.tools.notebooks export` (or, to keep the script\'s edit, '
                                   '`python -m electra.tools.notebooks from-scripts`)')
    return None


def _write_if_changed(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text(encoding='utf-8') == text: return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.tmp')
    tmp.write_text(text, encoding='utf-8')
    tmp.replace(path)
    return True


def export(root: str | Path = ROOT) -> list[Path]:
    "Write each paired script from its notebook and store every notebook cleaned of outputs; returns the files changed."
    root = Path(root)
    changed = []
    for path in _notebooks(root):
        if _write_if_changed(path, _notebook_text(clean_notebook(_read(path, str(path.relative_to(root)))))):
            changed.append(path)
    for nb_rel, script_rel in PAIRS:
        nb_path = root / nb_rel
        if not nb_path.is_file():
            raise ConfigError(f'{nb_rel}: missing, cannot export {script_rel}. Restore it with `git checkout -- {nb_rel}`, '
                              f'or write it from {script_rel} with `python -m electra.tools.notebooks from-scripts`.')
        text = export_text(_read(nb_path, nb_rel))
        changed += [root / path for path in script_paths(script_rel) if _write_if_changed(root / path, text)]
    return changed


def from_scripts(root: str | Path = ROOT) -> list[Path]:
    """Write each paired notebook from its script (its cells and markdown, no outputs), then export the scripts back
    from the notebooks so they are in the export's exact form; returns the files changed."""
    import jupytext
    root = Path(root)
    changed = []
    for nb_rel, script_rel in PAIRS:
        nb = jupytext.reads((root / script_rel).read_text(encoding='utf-8'), fmt='py:percent')
        (root / nb_rel).parent.mkdir(parents=True, exist_ok=True)
        if _write_if_changed(root / nb_rel, _notebook_text(clean_notebook(nb))): changed.append(root / nb_rel)
    return changed + [p for p in export(root) if p not in changed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m electra.tools.notebooks', description=__doc__.split('\n\n')[0])
    parser.add_argument('--version', action='version', version=version_line(parser.prog))
    parser.add_argument('command', choices=['export', 'check', 'from-scripts'])
    parser.add_argument('--root', default=str(ROOT), help='repository root (default: this checkout)')
    args = parser.parse_args(argv)
    root = Path(args.root)
    if args.command == 'check':
        problems = check(root)
        for p in problems: print(p, file=sys.stderr)
        if problems: return 1
        print(f"in sync: {', '.join(f'{s} <- {n}' for n, s in PAIRS)} (and their copies in {JOBS_DIR}/); notebooks "
              "stored without outputs")
        return 0
    changed = export(root) if args.command == 'export' else from_scripts(root)
    for path in changed: print(f'wrote {path.relative_to(root)}')
    if not changed: print('nothing to write: already in sync')
    return 0


if __name__ == '__main__':
    friendly_errors()
    raise SystemExit(main())
