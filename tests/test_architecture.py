"""The import direction of the library (docs/architecture.md): every import of an electra module, at the top of a
module or inside a function (it is a dependency all the same), goes to the importer's own package or a lower
floor, never to another package of its floor, and no modules import each other in a cycle. An import inside a
function is kept for a reason (an optional dependency, a worker process) given in a comment beside or above it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / 'electra'
# floor of each package of electra/, bottom to top; the package itself (electra/__init__.py) is the public API on top
FLOORS = {'config': 0, 'runtime': 1, 'objective': 2, 'data': 2, 'training': 2, 'pretrained': 3, 'pretraining': 4,
          'finetuning': 4, 'experiments': 5, 'convert': 5, 'tools': 5, 'jobs': 6, '': 6}
MAX_IN_FUNCTIONS = 15


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob('*.py'))}


def _target(name: str) -> str | None:
    "The electra module an imported name lives in (`electra.a.b.name` -> `electra.a.b`), or None outside electra."
    while name and name not in MODULES: name = name.rpartition('.')[0]
    return name or None


def _imports(module: str) -> list[tuple[str, ast.stmt, bool]]:
    "(imported electra module, the import statement, whether it sits inside a function) of every import in `module`."
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding='utf-8'))
    package = module if path.name == '__init__.py' else module.rpartition('.')[0]
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if n is not f}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import): names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level: base = '.'.join(package.split('.')[:len(package.split('.')) - node.level + 1] + [base]).strip('.')
            names = [f'{base}.{a.name}' for a in node.names]
        else: continue
        for target in {_target(n) for n in names if n.split('.')[0] == 'electra'} - {None, module}:
            found.append((target, node, id(node) in inner))
    return found


IMPORTS = {m: _imports(m) for m in MODULES}


def _package(module: str) -> str:
    return module.split('.')[1] if '.' in module else ''


def test_every_import_goes_down_or_stays_in_its_package():
    wrong = []
    for module, imports in IMPORTS.items():
        for target, node, _ in imports:
            a, b = _package(module), _package(target)
            if FLOORS[b] > FLOORS[a] or (FLOORS[b] == FLOORS[a] and a != b):  # up, or sideways to another package
                wrong.append(f'{module}:{node.lineno} imports {target} (floor {FLOORS[a]} -> {FLOORS[b]})')
    assert not wrong, '\n'.join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    "The strongly connected components of more than one module (Tarjan's algorithm, iterative)."
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index: continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack: low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop(); on_stack.discard(w); component.append(w)
                    if w == v: break
                if len(component) > 1: found.append(sorted(component))
    return found


def test_cycles_are_found():
    assert _cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]
    assert _cycles({'a': {'b'}, 'b': set()}) == []


def test_no_modules_import_each_other_in_a_cycle():
    graph = {m: {t for t, _, _ in imports} for m, imports in IMPORTS.items()}
    cycles = _cycles(graph)
    assert not cycles, '\n'.join(f'a cycle of {len(c)}: {", ".join(c)}' for c in cycles)


def test_few_imports_inside_functions_each_with_its_reason():
    inner = sorted({(m, node.lineno) for m, imports in IMPORTS.items() for _, node, in_function in imports if in_function})
    assert len(inner) <= MAX_IN_FUNCTIONS, (f'{len(inner)} imports of electra modules inside functions (at most '
                                            f'{MAX_IN_FUNCTIONS}):\n' + '\n'.join(f'{m}:{n}' for m, n in inner))
    unexplained = []
    for module, line in inner:
        lines = MODULES[module].read_text(encoding='utf-8').splitlines()
        if '#' not in lines[line - 1] and not lines[line - 2].strip().startswith('#'):
            unexplained.append(f'{module}:{line}: {lines[line - 1].strip()}')
    assert not unexplained, 'imports inside functions without a comment giving the reason:\n' + '\n'.join(unexplained)


def test_config_imports_no_job_and_the_task_kinds_register_from_above():
    """The fine-tuning config loads without electra.finetuning; importing that fills the registries config reads, which
    the first config checked does by the name the package gives (config/registries.py)."""
    code = ('import sys; from electra.config.finetune import FinetuneConfig, _CATALOGUE; '
            'print(any(m.startswith("electra.finetuning") for m in sys.modules), len(_CATALOGUE)); '
            'from electra.config.values import config_from_dict; config_from_dict(FinetuneConfig, {"tasks": ["RTE"]}); '
            'from electra.finetuning.tasks.files import FILE_KIND_REGISTRY; '
            'from electra.finetuning.loading import HEAD_MODELS; '
            'print(len(_CATALOGUE), sorted(FILE_KIND_REGISTRY), sorted(HEAD_MODELS))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True,
                         cwd=ROOT.parent).stdout.split('\n')
    assert out[0] == 'False 0'
    assert out[1] == ("1 ['classification', 'mrqa', 'multilabel', 'regression', 'squad', 'tagging'] "
                      "['qa', 'tagging']")


def _imported_tops(path: Path) -> set[str]:
    "The top-level packages a file imports (absolute imports, at the top or inside functions)."
    tree = ast.parse(path.read_text(encoding='utf-8'))
    return ({a.name.split('.')[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            | {n.module.split('.')[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level})


def test_the_library_imports_no_tests_or_benchmarks_and_the_tests_no_benchmark():
    "The benchmarks' baseline and runners that tests use live in tests/support; only tests/benchmarks/ test the programs."
    repo = ROOT.parent
    wrong = [f'{p.relative_to(repo)} imports {t}' for p in sorted(ROOT.rglob('*.py'))
             for t in sorted(_imported_tops(p) & {'tests', 'benchmarks'})]
    wrong += [f'{p.relative_to(repo)} imports benchmarks' for p in sorted((repo / 'tests').rglob('*.py'))
              if 'benchmarks' in _imported_tops(p) and p.parent.name != 'benchmarks']
    assert not wrong, '\n'.join(wrong)
