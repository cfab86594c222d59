"""The notebooks are the source of the driver scripts: `notebooks/Pretrain.ipynb` -> `pretrain.py` and
`notebooks/Finetune_GLUE.ipynb` -> `finetune.py`, exported with jupytext in its "percent" format (`# %%` marks a
code cell, `# %% [markdown]` a markdown cell), so a script reads top to bottom as its notebook does. The repository
holds one copy of each script, at its root; the package build puts it into the wheel as `electra/jobs/<script>`
(setup.py), where the commands `electra-pretrain` and `electra-finetune` run it.

    python -m electra.tools.notebooks export        # notebooks -> scripts; also strips outputs from every notebook
    python -m electra.tools.notebooks check         # exit 1, naming each script that differs from its notebook's export
                                              # and each notebook stored with outputs or execution counts
    python -m electra.tools.notebooks from-scripts  # the other way, scripts -> notebooks (how the notebooks were made; takes
                                              # a script edited by hand into its notebook, replacing the notebook's cells)

The export is deterministic: a fixed header (no jupytext version), cells with only their `tags` metadata (the
config cell is tagged `parameters`, as papermill expects), nothing else. Notebooks are stored without outputs,
execution counts or per-run metadata; `export` removes them after a notebook was run and saved in Jupyter.

The export writes nothing unless every script it would write parses and its imports (every `import` and `from ...
import` statement, those inside `if` blocks too) import with the library running the export: else one `error:` line
names the notebook and the cell (its position among the notebook's cells, from 1). And it never overwrites a script
changed since its last export: the line under each script's header records the sha256 of the code below it, a script
whose code no longer has it was edited by hand and is refused, naming it and how to bring the edit into the notebook
(`from-scripts`) or drop it.
"""
from __future__ import annotations

import ast
import copy
import hashlib
import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from electra.config.errors import ConfigError
from electra.config.version import command_parser
from electra.runtime.errors import friendly_errors

__all__ = ['PAIRS', 'NOTEBOOK_DIR', 'Problem', 'notebook_overrides', 'export_text', 'clean_notebook', 'export', 'check', 'from_scripts',
           'main']

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = 'notebooks'
PAIRS = (('notebooks/Pretrain.ipynb', 'pretrain.py'), ('notebooks/Finetune_GLUE.ipynb', 'finetune.py'))

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
# the line under the header: the notebook and the sha256 of the code below the blank line that follows
_RECORD = '# exported from {} by `python -m electra.tools.notebooks export` (edit the notebook, not this file): sha256 {}\n'
_RECORDED = re.compile(r'# exported from .* sha256 ([0-9a-f]{64})\n\n')
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


def _parameters_cell(nb):
    "The notebook's config cell (tagged `parameters`, as papermill expects), or None."
    return next((c for c in nb.cells if c.cell_type == 'code' and 'parameters' in c.metadata.get('tags', [])), None)


def notebook_overrides(nb) -> tuple[str, str]:
    """The `overrides` its parameters cell gives (as Python writes them; '' for none) and the cell's source with them
    as `{}`: a notebook's session settings, which its script does not take (it takes its command line)."""
    if (cell := _parameters_cell(nb)) is None: return '', ''
    try: tree = ast.parse(cell.source)
    except SyntaxError: return '', cell.source  # said by `_check_runs`, naming the cell
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ['overrides'] and \
                not (isinstance(node.value, ast.Dict) and not node.value.keys):
            lines = cell.source.splitlines(keepends=True)
            start = sum(map(len, lines[:node.value.lineno - 1])) + node.value.col_offset
            end = sum(map(len, lines[:node.value.end_lineno - 1])) + node.value.end_col_offset
            return ast.unparse(node.value), cell.source[:start] + '{}' + cell.source[end:]
    return '', cell.source


def export_text(nb, nb_rel: str) -> str:
    """The script of notebook `nb` (`nb_rel` in the repository): jupytext percent format under a fixed header and
    record; its parameters cell's `overrides` as `{}` (`notebook_overrides`)."""
    import jupytext
    nb = clean_notebook(nb)
    if (cell := _parameters_cell(nb)) is not None: cell.source = notebook_overrides(nb)[1]
    body = jupytext.writes(nb, fmt=dict(_FORMAT)).lstrip('\n')
    return _HEADER + _RECORD.format(nb_rel, _sha256(body)) + '\n' + body


def _sha256(text: str) -> str: return hashlib.sha256(text.encode('utf-8')).hexdigest()


def _code(text: str) -> tuple[str | None, str | None]:
    """A script's recorded sha256 and its code below the record (None, code for a script exported before scripts had
    a record; None, None for a header not as the export writes it)."""
    if not text.startswith(_HEADER): return None, None
    rest = text[len(_HEADER):]
    if m := _RECORDED.match(rest): return m[1], rest[m.end():]
    return None, rest[1:] if rest.startswith('\n') else None


def _edited_by_hand(text: str, exported: str) -> bool:
    "Whether the script `text` was changed since its last export, `exported` being its notebook's export now."
    recorded, code = _code(text)
    return code is None or (recorded != _sha256(code) and code != _code(exported)[1])


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
        text = export_text(_read(root / nb_rel, nb_rel), nb_rel)
        if problem := _script_problem(root, script_rel, nb_rel, text): problems.append(problem)
    return problems


def _script_problem(root: Path, script_rel: str, nb_rel: str, text: str) -> Problem | None:
    "What is wrong with the script at `script_rel` whose notebook `nb_rel` exports as `text`; None when it is that."
    script = root / script_rel
    if not script.is_file():
        return Problem(script_rel, f'missing: run `python -m electra.tools.notebooks export` to write it from {nb_rel}')
    current = script.read_text(encoding='utf-8')
    if current == text: return None
    if _edited_by_hand(current, text):
        return Problem(script_rel, f'differs from the export of {nb_rel}: changed by hand since its last export. Bring '
                                   'the change into the notebook with `python -m electra.tools.notebooks from-scripts`, '
                                   f'or drop it with `git checkout -- {script_rel}`')
    return Problem(script_rel, f'differs from the export of {nb_rel}: the notebook changed since; run '
                               '`python -m electra.tools.notebooks export`')


def _write_if_changed(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text(encoding='utf-8') == text: return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.tmp')
    tmp.write_text(text, encoding='utf-8')
    tmp.replace(path)
    return True


def export(root: str | Path = ROOT, say: Callable[[str], None] = lambda line: None) -> list[Path]:
    """Write each paired script from its notebook and store every notebook cleaned of outputs; returns the files
    changed. Nothing is written unless every script parses, imports and was not changed by hand since its export.
    A notebook's `overrides` stay its own, said (`say`)."""
    root = Path(root)
    texts = {path: _notebook_text(clean_notebook(_read(path, str(path.relative_to(root))))) for path in _notebooks(root)}
    for nb_rel, script_rel in PAIRS:
        nb_path = root / nb_rel
        if not nb_path.is_file():
            raise ConfigError(f'{nb_rel}: missing, cannot export {script_rel}. Restore it with `git checkout -- {nb_rel}`, '
                              f'or write it from {script_rel} with `python -m electra.tools.notebooks from-scripts`.')
        nb = _read(nb_path, nb_rel)
        if kept := notebook_overrides(nb)[0]:
            say(f"{nb_rel}: its overrides ({kept}) stay the notebook's; {script_rel} is written with overrides = {{}}, "
                "as a script takes its settings from the command line")
        text = texts[root / script_rel] = export_text(nb, nb_rel)
        _check_runs(text, nb_rel, script_rel)
        _check_not_edited(root / script_rel, text, nb_rel, script_rel)
    return [path for path, text in texts.items() if _write_if_changed(path, text)]


def _cell_at(text: str, line: int) -> tuple[int, int]:
    "The cell (its position among the notebook's cells, from 1) of line `line` of a script, and the line in that cell."
    starts = [i + 1 for i, s in enumerate(text.splitlines()) if s.startswith('# %%')]  # a cell's marker line
    cell = sum(start <= line for start in starts)
    return cell, line - starts[cell - 1] if cell else line


def _check_runs(text: str, nb_rel: str, script_rel: str) -> None:
    "The script `text` parses and its imports import, else a ConfigError naming the notebook and the cell."
    try: tree = ast.parse(text, filename=script_rel)
    except SyntaxError as e:
        cell, line = _cell_at(text, e.lineno or 0)
        raise ConfigError(f'{nb_rel}: cell {cell}: its code does not parse ({e.msg}, line {line} of the cell: '
                          f'`{(e.text or "").strip()}`), so {script_rel} was not written. Fix the cell and export '
                          'again.') from None
    for node in (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))):
        try: _import(node)
        except Exception as e:  # an import can fail in any way; the driver would fail there at its first run
            cell, _ = _cell_at(text, node.lineno)
            raise ConfigError(f'{nb_rel}: cell {cell}: `{ast.unparse(node)}` fails ({type(e).__name__}: '
                              f'{str(e).splitlines()[0] if str(e) else ""}), so {script_rel} was not written. Fix the '
                              'cell (or the library) and export again.') from None


def _import(node: ast.Import | ast.ImportFrom) -> None:
    "Run an import statement's imports here, as the script would: its modules, and the names it takes from them."
    if isinstance(node, ast.Import):
        for alias in node.names: importlib.import_module(alias.name)
        return
    module = importlib.import_module(node.module)  # the drivers import absolutely (level 0)
    for name in (a.name for a in node.names if a.name != '*'):
        if not hasattr(module, name):
            try: importlib.import_module(f'{node.module}.{name}')  # a submodule, which `from package import` loads
            except ModuleNotFoundError:
                raise ImportError(f"cannot import name '{name}' from '{node.module}'") from None


def _check_not_edited(path: Path, text: str, nb_rel: str, script_rel: str) -> None:
    "A ConfigError when the script at `path` was changed by hand since its last export (writing `text` would lose it)."
    if not path.is_file() or not _edited_by_hand(path.read_text(encoding='utf-8'), text): return
    raise ConfigError(f'{script_rel}: changed by hand since its last export from {nb_rel} (its code no longer has the '
                      'sha256 its header records), and export would overwrite the change: nothing was written. To keep '
                      'the change, bring it into the notebook: `python -m electra.tools.notebooks from-scripts` '
                      '(rewrites the notebooks from the scripts, then exports), or make the same edit in '
                      f'{nb_rel}. To drop it: `git checkout -- {script_rel}` (or delete {script_rel}), then export.')


def from_scripts(root: str | Path = ROOT) -> list[Path]:
    """Write each paired notebook from its script (its cells and markdown, no outputs), then export the scripts back
    from the notebooks so they are in the export's exact form; returns the files changed."""
    import jupytext
    root = Path(root)
    changed = []
    for nb_rel, script_rel in PAIRS:
        text = (root / script_rel).read_text(encoding='utf-8')
        _, code = _code(text)
        nb = jupytext.reads(text if code is None else code, fmt='py:percent')  # the cells, without header and record
        (root / nb_rel).parent.mkdir(parents=True, exist_ok=True)
        if _write_if_changed(root / nb_rel, _notebook_text(clean_notebook(nb))): changed.append(root / nb_rel)
    return changed + [p for p in export(root) if p not in changed]


def main(argv: list[str] | None = None) -> int:
    parser = command_parser('python -m electra.tools.notebooks', __doc__.split('\n\n')[0])
    parser.add_argument('command', choices=['export', 'check', 'from-scripts'])
    parser.add_argument('--root', default=str(ROOT), help='repository root (default: this checkout)')
    args = parser.parse_args(argv)
    root = Path(args.root)
    if args.command == 'check':
        problems = check(root)
        for p in problems: print(p, file=sys.stderr)
        if problems: return 1
        print(f"in sync: {', '.join(f'{s} <- {n}' for n, s in PAIRS)}; notebooks stored without outputs")
        return 0
    changed = export(root, print) if args.command == 'export' else from_scripts(root)
    for path in changed: print(f'wrote {path.relative_to(root)}')
    if not changed: print('nothing to write: already in sync')
    return 0


if __name__ == '__main__':
    friendly_errors()
    raise SystemExit(main())
