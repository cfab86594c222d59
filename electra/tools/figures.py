"""A notebook's figures as files: the notebook executed top to bottom in a fresh Jupyter kernel (nbclient), its config
cell's `overrides` set, and the picture each cell tagged `figure:<name>` displays written to `<out>/<name>.png`. The
figures under docs/figures, which the README shows, are the Explore notebook's on the demo, written by:

    python pretrain.py && python finetune.py                  # the demo's pretraining and fine-tuning
    python -m electra.tools.figures --out docs/figures        # notebooks/Explore.ipynb executed, its figures saved

A cell's picture is the last PNG it displays (a matplotlib figure, or a token view, which displays as HTML in
Jupyter and carries a PNG of itself beside it).
"""
from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

from electra.config.errors import ConfigError
from electra.config.version import command_parser
from electra.runtime.errors import friendly_errors

__all__ = ['execute_notebook', 'notebook_figures', 'save_figures', 'main']

ROOT = Path(__file__).resolve().parents[2]
TAG = 'figure:'


def execute_notebook(path: str | Path, overrides: dict, cwd: str | Path, time_bound: float = 600,
                     env: dict | None = None, epilogue: str = ''):
    """Execute notebook `path` in a fresh `python3` kernel started in `cwd` (Jupyter starts it in the notebook's
    folder), `overrides = {...}` run right after the cell tagged `parameters` (as papermill injects parameters) and
    `epilogue`, when given, as a last cell. Each cell's timeout is what is left of `time_bound` seconds, so the whole
    notebook runs within it or fails. Returns the executed notebook and the seconds it took."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(str(path), as_version=4)
    at = [i for i, c in enumerate(nb.cells) if 'parameters' in c.metadata.get('tags', [])]
    if len(at) != 1: raise ConfigError(f'{path}: expected one cell tagged "parameters", found {len(at)}')
    nb.cells.insert(at[0] + 1, nbformat.v4.new_code_cell(f'overrides = {overrides!r}  # injected'))
    if epilogue: nb.cells.append(nbformat.v4.new_code_cell(epilogue))
    start = time.monotonic()
    client = NotebookClient(nb, kernel_name='python3', resources={'metadata': {'path': str(cwd)}}, startup_timeout=120,
                            timeout_func=lambda cell: max(1, int(time_bound - (time.monotonic() - start))))
    client.execute(env={**os.environ, **(env or {})})
    return nb, time.monotonic() - start


def notebook_figures(nb) -> dict[str, bytes]:
    "name -> the PNG bytes of the last picture each cell tagged `figure:<name>` of an executed notebook displayed."
    out = {}
    for cell in nb.cells:
        names = [t[len(TAG):] for t in cell.metadata.get('tags', []) if t.startswith(TAG)]
        pngs = [o['data']['image/png'] for o in cell.get('outputs', []) if 'image/png' in o.get('data', {})]
        for name in names:
            if pngs: out[name] = base64.b64decode(pngs[-1])
    return out


def save_figures(nb, out_dir: str | Path) -> list[Path]:
    "Write each figure of an executed notebook to `out_dir/<name>.png`; the paths, in the notebook's order."
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, png in notebook_figures(nb).items():
        (out_dir / f'{name}.png').write_bytes(png)
        paths.append(out_dir / f'{name}.png')
    return paths


def _overrides(text: str) -> dict:
    try: value = json.loads(text)
    except ValueError as e: raise ConfigError(f'--overrides: not JSON ({e}); e.g. --overrides \'{{"k": 5}}\'') from None
    if not isinstance(value, dict): raise ConfigError(f'--overrides: a JSON object of config keys, got {text!r}')
    return value


def main(argv: list[str] | None = None) -> int:
    from nbclient.exceptions import CellExecutionError
    parser = command_parser('python -m electra.tools.figures', __doc__)
    parser.add_argument('--notebook', default=str(ROOT / 'notebooks' / 'Explore.ipynb'), help='the notebook to execute')
    parser.add_argument('--out', default=str(ROOT / 'docs' / 'figures'), help='where to write <name>.png')
    parser.add_argument('--overrides', default='{}', help="the notebook's config overrides, a JSON object")
    args = parser.parse_args(argv)
    overrides, notebook = _overrides(args.overrides), Path(args.notebook)
    if not notebook.is_file(): raise ConfigError(f'--notebook: {notebook} not found; give a .ipynb file.')
    try: nb, seconds = execute_notebook(notebook, overrides, notebook.parent)
    except CellExecutionError as e:  # the cell's own error (its traceback is coloured for a terminal: left out)
        raise ConfigError(f'{notebook} failed: {e.ename}: {e.evalue}') from None
    paths = save_figures(nb, args.out)
    if not paths: raise ConfigError(f'{notebook} has no cell tagged "{TAG}<name>" that displayed a picture.')
    for p in paths: print(f'wrote {p}')
    print(f'{len(paths)} figures of {notebook.name}, executed in {seconds:.0f} s')
    return 0


if __name__ == '__main__':
    friendly_errors()
    raise SystemExit(main())
