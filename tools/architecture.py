"""Measure the package's architecture from its source: import cycles, imports against the
layering, function-local imports, string switches on options, module and function sizes,
and public-looking names missing from `__all__`.

    python tools/architecture.py            # a table of the figures
    python tools/architecture.py --details  # and the places behind each figure

The layering (imports only point down; within a layer, any acyclic import is allowed):

    0  leaf helpers       geomlearn/_*.py
    1  foundations        geometry, manifolds, systems, integrators, data, datasets,
                          second_order, reduction, cotangent_lift
    2  layers             geomlearn/layers/
    3  models             geomlearn/models/
    4  pipeline           rollout, evaluation, training, io
    5  plotting           plotting
    6  command line       cli/  (the only place allowed function-local imports)

The package façade `geomlearn/__init__.py` sits above all of them.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "geomlearn"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

LAYERS = {
    "geometry": 1, "manifolds": 1, "systems": 1, "integrators": 1, "data": 1,
    "datasets": 1, "second_order": 1, "reduction": 1, "cotangent_lift": 1, "structures": 1,
    "layers": 2,
    "models": 3,
    "rollout": 4, "evaluation": 4, "training": 4, "io": 4,
    "plotting": 5,
    "cli": 6,
}
LAYER_NAMES = {0: "leaf helpers", 1: "foundations", 2: "layers", 3: "models",
               4: "pipeline", 5: "plotting", 6: "command line", 7: "facade"}
# Names whose comparison with a string literal selects behaviour (an option as a string).
OPTION_NAMES = ("placement", "weighting", "samples", "integrator", "structure", "method",
                "solver", "trainer", "loss")
TRAINER_TYPES = ("LevenbergMarquardt", "GaussNewton", "AbstractDampedLeastSquares",
                 "AbstractSecondOrder")
SIZE_EXEMPT = {f"{PACKAGE}.systems"}
MAX_MODULE_LINES = 500
MAX_BODY_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return 7  # the façade
    top = parts[1]
    if top.startswith("_"):
        return 0
    if top not in LAYERS:
        raise KeyError(f"{module}: no layer assigned; add {top!r} to LAYERS")
    return LAYERS[top]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int
    is_package: bool
    imports: list = field(default_factory=list)  # (target, lineno, local)


def resolve(mod: Module, node: ast.ImportFrom | ast.Import, modules: dict) -> list[str]:
    """The package modules an import statement reads (a `from pkg import sub` reads the
    submodule when there is one, else the package)."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == PACKAGE:
                out.append(alias.name)
        return out
    if node.level:
        base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != PACKAGE:
        return out
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in modules else target)
    return out


def load() -> dict[str, Module]:
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        name = module_name(path)
        modules[name] = Module(name, path, tree, len(text.splitlines()), path.name == "__init__.py")
    for mod in modules.values():
        for node, local in _walk_imports(mod.tree):
            for target in resolve(mod, node, modules):
                if target != mod.name:
                    mod.imports.append((target, node.lineno, local))
    return modules


def _walk_imports(tree):
    """Import statements with a flag: inside a function (local) or not."""
    def visit(node, local):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, local
            inside = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from visit(child, inside)
    yield from visit(tree, False)


def _is_type_checking(node) -> bool:
    return False


def cycles(modules) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), over all imports
    (function-local ones included). A package's `__init__` importing its own submodules
    is not an edge back from the submodule, so it is counted like any other import."""
    graph = {m: {t for t, _, _ in mod.imports if t in modules} for m, mod in modules.items()}
    # A submodule's import of its own package's __init__ (e.g. `from . import x`) resolves
    # to the submodule; a package __init__ importing its children is the normal re-export.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def against_layering(modules):
    rows = []
    for mod in modules.values():
        here = layer_of(mod.name)
        for target, line, _ in mod.imports:
            if target in modules and layer_of(target) > here and here != 7:
                rows.append(f"{mod.name}:{line} imports {target} "
                            f"({LAYER_NAMES[here]} -> {LAYER_NAMES[layer_of(target)]})")
    return rows


def local_imports(modules):
    return [f"{mod.name}:{line} imports {target}"
            for mod in modules.values() if layer_of(mod.name) != 6
            for target, line, local in mod.imports if local]


def _names_in(node) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            names.add(sub.value)  # getattr(x, "placement") or options["placement"]
    return names


def _option_name(names) -> str | None:
    for name in names:
        low = name.lower().lstrip("_")
        for option in OPTION_NAMES:
            if low == option or low.endswith("_" + option) or low.startswith(option + "_"):
                return option
    return None


def string_switches(modules):
    """Comparisons of an option-like name with a string literal (`==`, `!=`, `in`,
    `not in` against a tuple/set/list of strings), outside the command line."""
    rows = []
    for mod in modules.values():
        if layer_of(mod.name) == 6:
            continue
        for node in ast.walk(mod.tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            literal = any(_is_string_literal(s) for s in sides)
            if not literal:
                continue
            others = [s for s in sides if not _is_string_literal(s)]
            option = _option_name(set().union(*(_names_in(s) for s in others)) if others else set())
            if option:
                rows.append(f"{mod.name}:{node.lineno} compares {option!r} with a string")
    return rows


def _is_string_literal(node) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                       for e in node.elts)
    return False


def trainer_isinstance(modules):
    rows = []
    for mod in modules.values():
        if mod.name.startswith(f"{PACKAGE}.second_order") or layer_of(mod.name) == 6:
            continue
        for node in ast.walk(mod.tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
                if _names_in(node.args[1]) & set(TRAINER_TYPES):
                    rows.append(f"{mod.name}:{node.lineno} isinstance on a trainer type")
    return rows


def _defined_names(tree) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _all_of(mod: Module, modules) -> set[str] | None:
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                # `[*sub.__all__, ...]`: evaluate by importing (public modules are importable)
                import importlib
                return set(importlib.import_module(mod.name).__all__)
    return None


def missing_from_all(modules):
    """In a public module (no `_` in its dotted path), names defined at module level that
    do not start with `_` and are not in `__all__`."""
    rows = []
    for mod in modules.values():
        if any(part.startswith("_") for part in mod.name.split(".")):
            continue
        defined = {n for n in _defined_names(mod.tree) if not n.startswith("_")}
        exported = _all_of(mod, modules) or set()
        for name in sorted(defined - exported):
            rows.append(f"{mod.name}.{name}")
    return rows


def big_modules(modules):
    return [f"{m.name}: {m.lines} lines" for m in modules.values()
            if m.lines > MAX_MODULE_LINES and m.name not in SIZE_EXEMPT]


def long_bodies(modules):
    """Function bodies longer than the limit, counted from the first statement after the
    docstring to the last line of the function."""
    rows = []
    for mod in modules.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                        and isinstance(body[0].value.value, str)):
                    body = body[1:]
                if not body:
                    continue
                n = node.end_lineno - body[0].lineno + 1
                if n > MAX_BODY_LINES:
                    rows.append(f"{mod.name}.{node.name}: {n} lines")
    return rows


CRITERIA = [
    ("import cycles (function-local imports included)", lambda ms: cycles(ms), 0),
    ("imports against the layering", against_layering, 0),
    ("function-local imports of package modules outside cli/", local_imports, 0),
    ("string comparisons selecting behaviour", string_switches, 3),
    ("isinstance on trainer types in the pipeline", trainer_isinstance, 0),
    ("public-looking names missing from __all__", missing_from_all, 0),
    (f"modules over {MAX_MODULE_LINES} lines (systems exempt)", big_modules, 2),
    (f"function bodies over {MAX_BODY_LINES} lines", long_bodies, 2),
]


def measure() -> dict[str, tuple[list, int]]:
    modules = load()
    return {label: (fn(modules), goal) for label, fn, goal in CRITERIA}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true")
    args = parser.parse_args(argv)
    failed = 0
    for label, (rows, goal) in measure().items():
        ok = len(rows) <= goal
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {len(rows):4d} (goal <= {goal})  {label}")
        if args.details:
            for row in rows:
                print(f"          {row}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
