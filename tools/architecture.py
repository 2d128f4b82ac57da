"""Measure the package's architecture and the product's text from the source alone (no
import of geomlearn): the layering, the size of modules, functions and docstrings, the
lists kept in many places, and what a user reads (README, docs, RESULTS.md, docstrings).

    python tools/architecture.py            # a table of the figures
    python tools/architecture.py --details  # and the places behind each figure

The layering (imports only point down; within a layer, any acyclic import is allowed):

    0  leaf helpers       geomlearn/_*.py
    1  foundations        geometry, manifolds, systems, integrators, data, datasets,
                          second_order, reduction._psd, reduction._reduced_system,
                          reduction._lift
    2  layers             geomlearn/layers/
    3  models             geomlearn/models/, reduction._latent, reduction._autoencoder,
                          reduction._integrators, reduction (its package), cotangent_lift
    4  pipeline           rollout, evaluation, training, io, reduction._evaluation,
                          reduction._training
    5  plotting           plotting
    6  command line       cli/  (the only place allowed function-local imports)

A module's layer is that of the longest prefix of its name in `LAYERS`: the reduction
wing (`geomlearn/reduction/`) keeps a feature's modules together across the layers.

The package façade `geomlearn/__init__.py` sits above all of them.

Each criterion is a list of places (or, for a size, a number) with a goal; the table
prints the count, the goal and whether it is met. How each one is measured is in the
docstring of its function: `concrete_overrides`, `long_docstrings`, `dated_lines`,
`results_citations`, `duplicated_pairs`, `control_characters` and `docstring_escapes`,
`process_words`, `ratios_and_dates`, `io_family_imports`, `family_lists`, `model_tables`.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "geomlearn"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

LAYERS = {
    "geometry": 1, "manifolds": 1, "systems": 1, "integrators": 1, "data": 1,
    "datasets": 1, "second_order": 1, "structures": 1, "symmetries": 1,
    "layers": 2,
    "models": 3,
    "rollout": 4, "evaluation": 4, "training": 4, "io": 4,
    "plotting": 5,
    "cli": 6,
    # The reduction wing spans layers: each of its modules has its own, and the package
    # (which re-exports its reductions and models) sits at the top of what it imports.
    "reduction._psd": 1, "reduction._reduced_system": 1, "reduction._lift": 1,
    "reduction._latent": 3, "reduction._autoencoder": 3, "reduction._integrators": 3,
    "reduction._evaluation": 4, "reduction._training": 4,
    "reduction": 3, "cotangent_lift": 3,
}
LAYER_NAMES = {0: "leaf helpers", 1: "foundations", 2: "layers", 3: "models",
               4: "pipeline", 5: "plotting", 6: "command line", 7: "facade"}
# Names whose comparison with a string literal selects behaviour (an option as a string).
OPTION_NAMES = ("placement", "weighting", "samples", "integrator", "structure", "method",
                "solver", "trainer", "loss")
TRAINER_TYPES = ("LevenbergMarquardt", "GaussNewton", "AbstractDampedLeastSquares",
                 "AbstractSecondOrder")
SIZE_EXEMPT: set[str] = set()
MAX_MODULE_LINES = 500
MAX_BODY_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The layer of a package module: that of the longest dotted prefix of its name (below
    the package) in `LAYERS` (`reduction._psd` before `reduction`); 0 for a leaf helper
    (`geomlearn._…`), 7 for the façade."""
    parts = module.split(".")
    if len(parts) == 1:
        return 7  # the façade
    if parts[1].startswith("_"):
        return 0
    for end in range(len(parts), 1, -1):
        key = ".".join(parts[1:end])
        if key in LAYERS:
            return LAYERS[key]
    raise KeyError(f"{module}: no layer assigned; add {parts[1]!r} to LAYERS")


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int
    is_package: bool
    imports: list = field(default_factory=list)  # (target, lineno, local)
    text: str = ""


def resolve(mod: Module, node: ast.ImportFrom | ast.Import, modules: dict) -> list[str]:
    """The package modules an import statement reads (a `from pkg import sub` reads the
    submodule when there is one, else the package)."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == PACKAGE:
                out.append(alias.name)
        return out
    target = _from_target(mod, node)
    if target.split(".")[0] != PACKAGE:
        return out
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in modules else target)
    return out


def _from_target(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute module a `from … import` statement reads from."""
    if not node.level:
        return node.module or ""
    base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def load() -> dict[str, Module]:
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        name = module_name(path)
        modules[name] = Module(name, path, tree, len(text.splitlines()), path.name == "__init__.py",
                               text=text)
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


def _all_of(mod: Module, modules, depth: int = 0) -> set[str] | None:
    """A module's `__all__` read from its source: string literals, `*sub.__all__` of an
    imported package module, `+` of these, a module-level list it names. An empty set when
    there is no `__all__`; None when it is computed otherwise (from `dir()`: complete by
    construction, so not checked)."""
    bound = _bindings(mod)[0]
    assigned = {t.id: node.value for node in mod.tree.body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            parts = [value(e.value if isinstance(e, ast.Starred) else e) for e in node.elts]
            return None if None in parts else set().union(*parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [value(node.left), value(node.right)]
            return None if None in parts else parts[0] | parts[1]
        if isinstance(node, ast.Name) and node.id in assigned and node.id != "__all__":
            return value(assigned[node.id])
        if isinstance(node, ast.Attribute) and node.attr == "__all__" and isinstance(node.value, ast.Name):
            target, attr = bound.get(node.value.id, ("", None))
            name = target if attr is None else f"{target}.{attr}"
            if name in modules and depth < 5:
                return _all_of(modules[name], modules, depth + 1)
        return None

    return value(assigned["__all__"]) if "__all__" in assigned else set()


def missing_from_all(modules):
    """In a public module (no `_` in its dotted path), names defined at module level that
    do not start with `_` and are not in `__all__`."""
    rows = []
    for mod in modules.values():
        if any(part.startswith("_") for part in mod.name.split(".")):
            continue
        defined = {n for n in _defined_names(mod.tree) if not n.startswith("_")}
        exported = _all_of(mod, modules)
        if exported is None:
            continue
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


# ---------------------------------------------------------------------------------------
# Classes: which package class a base expression names (AST only, following imports and
# re-exports inside the package), concrete overrides, the model classes and families.

MODEL_BASE = (f"{PACKAGE}.models._base", "AbstractModel")
ABSTRACT_DECORATORS = {"abstractmethod", "abstractproperty", "abstractclassmethod",
                       "abstractstaticmethod"}
TABLE_FAMILIES = 5  # a literal naming model classes of this many families is a table


class Symbols:
    """The module-level classes of the package and what each module's names mean."""

    def __init__(self, modules):
        self.modules = modules
        self.classes = {(m.name, node.name): node for m in modules.values()
                        for node in m.tree.body if isinstance(node, ast.ClassDef)}
        self.bound = {m.name: _bindings(m) for m in modules.values()}

    def lookup(self, module, name, depth=0):
        """`("class", (module, name))`, `("module", name)` or None."""
        if depth > 10:
            return None
        if (module, name) in self.classes:
            return "class", (module, name)
        names, stars = self.bound.get(module, ({}, []))
        if name in names:
            target, attr = names[name]
            if attr is None or f"{target}.{attr}" in self.modules:
                return "module", target if attr is None else f"{target}.{attr}"
            return self.lookup(target, attr, depth + 1)
        for star in stars:
            found = self.lookup(star, name, depth + 1)
            if found:
                return found
        return None

    def expr(self, module, node):
        if isinstance(node, ast.Name):
            return self.lookup(module, node.id)
        if isinstance(node, ast.Subscript):
            return self.expr(module, node.value)
        if isinstance(node, ast.Attribute):
            owner = self.expr(module, node.value)
            if owner and owner[0] == "module":
                sub = f"{owner[1]}.{node.attr}"
                return ("module", sub) if sub in self.modules else self.lookup(owner[1], node.attr)
        return None

    def ancestors(self, key) -> list:
        """The package classes `key` derives from, nearest first (depth first, left to
        right: C3 order for the single-inheritance chains of the package)."""
        out, seen = [], {key}

        def visit(k):
            for base in self.classes[k].bases:
                found = self.expr(k[0], base)
                if found and found[0] == "class" and found[1] not in seen:
                    seen.add(found[1])
                    out.append(found[1])
                    visit(found[1])
        visit(key)
        return out


def _bindings(mod: Module):
    """Names bound by imports from the package: name -> (module, attribute or None), and
    the modules star-imported."""
    if "_bound" in vars(mod):
        return mod._bound
    names, stars = {}, []
    for node, _ in _walk_imports(mod.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == PACKAGE:
                    names[a.asname or PACKAGE] = (a.name if a.asname else PACKAGE, None)
        elif isinstance(node, ast.ImportFrom):
            target = _from_target(mod, node)
            if target.split(".")[0] == PACKAGE:
                for a in node.names:
                    if a.name == "*":
                        stars.append(target)
                    else:
                        names[a.asname or a.name] = (target, a.name)
    mod._bound = names, stars
    return mod._bound


def _methods(cls: ast.ClassDef) -> dict:
    return {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _is_abstract(fn) -> bool:
    return any((d.id if isinstance(d, ast.Name) else getattr(d, "attr", None)) in ABSTRACT_DECORATORS
               for d in fn.decorator_list)


def concrete_overrides(modules):
    """Methods that override a non-abstract method of a package base class (the nearest
    definition up the bases; dunder methods such as `__init__` and `__call__` excepted)."""
    sym, rows = Symbols(modules), []
    for key, cls in sym.classes.items():
        ancestors = sym.ancestors(key)
        for name in _methods(cls):
            if name.startswith("__") and name.endswith("__"):
                continue
            for base in ancestors:
                defined = _methods(sym.classes[base]).get(name)
                if defined is not None:
                    if not _is_abstract(defined):
                        rows.append(f"{key[0]}.{key[1]}.{name} overrides {base[0]}.{base[1]}.{name}")
                    break
    return rows


def model_classes(modules) -> dict[str, str]:
    """The concrete model classes (derived from `AbstractModel`, not named `Abstract…` or
    `_…`): class name -> the module defining it, its family."""
    sym = Symbols(modules)
    return {name: mod for (mod, name) in sym.classes
            if not name.startswith(("Abstract", "_")) and MODEL_BASE in sym.ancestors((mod, name))}


def family_modules(modules) -> set[str]:
    """The modules defining a concrete model class, and the modules of `models/` (not
    packages) that import one by name (`models/autoencoder.py`)."""
    classes = model_classes(modules)
    out = set(classes.values())
    for mod in modules.values():
        if mod.name.startswith(f"{PACKAGE}.models.") and not mod.is_package:
            if any(isinstance(node, ast.ImportFrom) and any(a.name in classes for a in node.names)
                   for node in mod.tree.body):
                out.add(mod.name)
    return out


def family_lists(modules):
    """Places that enumerate model-family modules: (a) one import statement binding three
    or more family modules (`from . import sympnet, hnn, resnet`); (b) one other
    module-level statement naming three or more of them (`_FAMILIES = (…)`,
    `__all__ = [*sympnet.__all__, …]`); (c) a package `__init__` importing from three or
    more of them (re-exports by star or by name). A family registering itself is no list."""
    families, sym, rows = family_modules(modules), Symbols(modules), []
    for mod in modules.values():
        names = sym.bound[mod.name][0]
        bound = {local: (t if a is None else f"{t}.{a}") for local, (t, a) in names.items()}
        bound = {local: m for local, m in bound.items() if m in families}
        sources = set()
        for node in mod.tree.body:
            if isinstance(node, ast.ImportFrom):
                target = _from_target(mod, node)
                got = {f"{target}.{a.name}" for a in node.names} & families
                sources |= {target} & families
            elif isinstance(node, ast.Import):
                got = {a.name for a in node.names} & families
            else:
                got = {bound[n.id] for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in bound}
            if len(got) >= 3:
                rows.append(f"{mod.name}:{node.lineno} names {len(got)} family modules")
        if mod.is_package and len(sources) >= 3:
            rows.append(f"{mod.name}: imports from {len(sources)} family modules")
    return rows


def io_family_imports(modules):
    """Imports in `io/` of a model module other than `models._base` (or of the façade,
    which imports every family)."""
    io, base = f"{PACKAGE}.io", MODEL_BASE[0]
    return [f"{mod.name}:{line} imports {target}"
            for mod in modules.values() if mod.name == io or mod.name.startswith(io + ".")
            for target, line, _ in mod.imports
            if target == PACKAGE or (target.startswith(f"{PACKAGE}.models") and target != base)]


def model_tables(sources: dict[str, str], classes: dict[str, str]):
    """Module-level dict, list, tuple or set literals of test files whose entries name (as
    a name, an attribute or a string) concrete model classes of at least
    `TABLE_FAMILIES` families: a table of test models."""
    rows = []
    for label, text in sources.items():
        for node in ast.parse(text).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if not isinstance(value, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
                continue
            named = {c for c in _names_in(value) if c in classes}
            if len({classes[c] for c in named}) >= TABLE_FAMILIES:
                rows.append(f"{label}:{node.lineno} names {len(named)} model classes")
    return rows


def tables_of_test_models(modules):
    """`model_tables` over the files of `tests/`."""
    sources = {str(p.relative_to(REPO)): p.read_text() for p in sorted((REPO / "tests").rglob("*.py"))}
    return model_tables(sources, model_classes(modules))


# ---------------------------------------------------------------------------------------
# Docstrings and text: sizes, dates, RESULTS.md citations, control characters, words
# about how the work was done.

REPO = ROOT.parent
MAX_DOCSTRING_LINES = 40
DATE = re.compile(r"20\d\d-\d\d-\d\d")
# A measured figure: a decimal (not a version `0.1.0`), a percentage, a ratio (`4.6×`,
# `3x`) or a duration (`2 s`, `40 ms`, `3 min`).
FIGURE = re.compile(r"(?<![\d.])\d+\.\d+(?!\.\d)|\d\s?%|\d\s?×|\b\d+(\.\d+)?x\b"
                    r"|\b\d+(\.\d+)?\s?(s|ms|µs|min)\b")
RATIO = re.compile(r"\d\s?×(?!\s?\d)|\b\d+(\.\d+)?x\b")  # `4.6×`, `3x`; not `2 × 2`
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# LaTeX macros whose backslash, in a non-raw string, Python reads as a tab or a newline.
LATEX_TN = {"tau", "theta", "times", "text", "textbf", "textrm", "textit", "tilde", "to",
            "top", "tan", "tanh", "tfrac", "triangle", "therefore", "tr", "nabla", "nu", "neq",
            "ne", "not", "newline", "noindent", "ni", "neg", "nmid", "nleq", "ngeq"}
ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\([tn])([A-Za-z]*)")
# Words about how the work was organised, not about the product (case-insensitive).
PROCESS_WORDS = {
    "session": r"\bsessions?\b",
    "this change": r"\bthis change\b",
    "tried, not kept": r"\btried, not kept\b",
    "an issue by reference": r"\b(the|this|that) issue('s)?\b|\bissue\s*#?\d+|\(issue\b",
    "a wave of work": r"\b(this|next|previous|earlier|later|last) wave\b|\bwave \d+\b",
    "a working tree": r"\bworking tree\b",
    "a UTC timestamp": r"\bUTC\b",
    "a commit hash": r"(?<![\w.])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])([0-9a-f]{7,12}|[0-9a-f]{40})"
                     r"(?![\w-]|\.\d)",  # not the digits of 2.233787e-02
}
PROCESS = {k: re.compile(v, re.IGNORECASE if k != "a commit hash" else 0) for k, v in PROCESS_WORDS.items()}


def docstrings(tree):
    """(owner, string constant) for the module, class and function docstrings."""
    if not hasattr(tree, "_docstrings"):
        tree._docstrings = [
            (node, node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)]
    return tree._docstrings


def _where(mod, owner, const) -> str:
    return f"{mod.name}{'' if isinstance(owner, ast.Module) else '.' + owner.name}:{const.lineno}"


def long_docstrings(modules):
    """Module, class and function docstrings longer than `MAX_DOCSTRING_LINES` lines of
    source (the string literal, quotes included)."""
    return [f"{_where(mod, owner, const)}: {const.end_lineno - const.lineno + 1} lines"
            for mod in modules.values() for owner, const in docstrings(mod.tree)
            if const.end_lineno - const.lineno + 1 > MAX_DOCSTRING_LINES]


def dated_lines(modules):
    """Lines of code, comments or docstrings holding a date (`YYYY-MM-DD`)."""
    return [f"{mod.name}:{i}: {line.strip()[:80]}" for mod in modules.values()
            for i, line in enumerate(mod.text.splitlines(), 1) if DATE.search(line)]


def results_citations(modules):
    """Lines naming RESULTS.md with a measured figure on the line or the one after: a
    docstring or comment may point to a RESULTS section by name, not quote it."""
    rows = []
    for mod in modules.values():
        lines = mod.text.splitlines()
        for i, line in enumerate(lines):
            if "RESULTS" in line and FIGURE.search(" ".join(lines[i:i + 2])):
                rows.append(f"{mod.name}:{i + 1}: {line.strip()[:80]}")
    return rows


def product_texts(repo: Path = None) -> dict[str, str]:
    """What a user reads besides the docstrings: README.md, docs/**/*.md, RESULTS.md."""
    repo = repo or REPO
    paths = [repo / "README.md", *sorted((repo / "docs").rglob("*.md")), repo / "benchmarks" / "RESULTS.md"]
    return {str(p.relative_to(repo)): p.read_text() for p in paths if p.is_file()}


def control_characters(texts: dict[str, str]):
    """Lines holding a control character other than a tab or the line's end (a `\b` of
    `\beta` written through a non-raw string shows as backspace, `\r` of `\rho` as a
    carriage return)."""
    return [f"{label}:{i}: {CONTROL.search(line).group()!r}" for label, text in texts.items()
            for i, line in enumerate(text.split("\n"), 1) if CONTROL.search(line)]


def docstring_escapes(modules):
    """Docstrings whose value holds a control character (`\\b` of `\\beta`, `\\f` of
    `\\frac`, `\\v`, `\\a`, `\\r`, `\\x..`) or whose non-raw source reads a LaTeX macro's
    backslash as a tab or a newline (`\\theta`, `\\nabla`)."""
    rows = []
    for mod in modules.values():
        lines = mod.text.splitlines()
        for owner, const in docstrings(mod.tree):
            where = _where(mod, owner, const)
            if CONTROL.search(const.value):
                rows.append(f"{where}: control character {CONTROL.search(const.value).group()!r}")
            source = _source_of(lines, const)
            if "r" in re.match(r"[A-Za-z]*", source).group().lower():
                continue
            for m in ESCAPE.finditer(source):
                if m.group(1) + m.group(2) in LATEX_TN:
                    rows.append(f"{where}: \\{m.group(1) + m.group(2)} in a non-raw string")
    return rows


def _source_of(lines: list[str], node) -> str:
    """The source of a node (`ast.get_source_segment`, without splitting the text again)."""
    part = [line.encode() for line in lines[node.lineno - 1: node.end_lineno]]
    part[-1] = part[-1][: node.end_col_offset]
    part[0] = part[0][node.col_offset:]
    return b"\n".join(part).decode()


def process_words(texts: dict[str, str]):
    """Lines using a word of `PROCESS_WORDS`: how the work was organised (sessions,
    issues, "this change", "tried, not kept", waves, working trees, UTC timestamps,
    commit hashes) is git's and the tracker's business, not the product's."""
    return [f"{label}:{i}: {name} ({m.group()!r})" for label, text in texts.items()
            for i, line in enumerate(text.splitlines(), 1)
            for name, pattern in PROCESS.items() for m in [pattern.search(line)] if m]


def ratios_and_dates(text: str, label: str = "README.md"):
    """Lines with a date (`YYYY-MM-DD`) or a measured ratio (`4.6×`, `3x`)."""
    return [f"{label}:{i}: {line.strip()[:80]}" for i, line in enumerate(text.splitlines(), 1)
            if DATE.search(line) or RATIO.search(line)]


def _read(relative: str) -> str:
    path = REPO / relative
    return path.read_text() if path.is_file() else ""


def docstring_texts(modules) -> dict[str, str]:
    """Each module's docstrings alone, at their lines of the file (other lines blank)."""
    out = {}
    for mod in modules.values():
        lines = [""] * (mod.lines + 1)
        for _, const in docstrings(mod.tree):
            for k, line in enumerate(const.value.split("\n")[: const.end_lineno - const.lineno + 1]):
                lines[const.lineno - 1 + k] = line
        out[mod.name] = "\n".join(lines)
    return out


# ---------------------------------------------------------------------------------------
# Duplicated code.

DUP_RUN = 6          # a duplicate is a run of this many identical normalised code lines
DUP_SUBSTANTIAL = 4  # of which at least this many are not trivial
TRIVIAL = re.compile(
    r"[\s()\[\]{},:;*]*|pass|return|return None|else:|try:|finally:|continue|break|raise"
    r"|(from|import) .*|@.*"                             # imports, decorators
    r"|def __init__\(|\)( -> .*)?:|\*?\w+(: [^=]+?)?( ?= ?[^,]+)?,"  # one parameter a line
    r"|\w+: [^=()]+( = (eqx\.)?field\(.*\))?")            # a field declaration


def code_lines(text: str, tree: ast.Module = None) -> list[tuple[int, str]]:
    """(line number, code) of a module: stripped, inner whitespace collapsed; blank lines,
    comment lines and docstrings dropped."""
    skip = {i for _, const in docstrings(tree or ast.parse(text))
            for i in range(const.lineno, const.end_lineno + 1)}
    return [(i, code) for i, line in enumerate(text.splitlines(), 1)
            for code in [" ".join(line.split())] if code and not code.startswith("#") and i not in skip]


def duplicated_pairs(sources: dict[str, str], trees: dict = None):
    """Pairs of modules (a module with itself too) that share a run of `DUP_RUN` identical
    code lines (after `code_lines`) of which at least `DUP_SUBSTANTIAL` are not trivial
    (brackets and punctuation only, `pass`, a bare `return`, `else:`, `try:`, imports,
    decorators, a signature written one parameter a line, field declarations): boilerplate
    is not a duplicate."""
    places = {}
    for label, text in sources.items():
        lines = code_lines(text, (trees or {}).get(label))
        for k in range(len(lines) - DUP_RUN + 1):
            window = tuple(code for _, code in lines[k:k + DUP_RUN])
            if sum(not TRIVIAL.fullmatch(c) for c in window) >= DUP_SUBSTANTIAL:
                places.setdefault(window, []).append((label, lines[k][0]))
    pairs = {}
    for where in places.values():
        for x, (a, la) in enumerate(where):
            for b, lb in where[x + 1:]:
                if a != b or abs(la - lb) >= DUP_RUN:
                    (a, la), (b, lb) = sorted([(a, la), (b, lb)])
                    pairs.setdefault((a, b), []).append((la, lb))
    return [f"{a}:{ps[0][0]} ~ {b}:{ps[0][1]} ({len(ps)} window{'s' * (len(ps) > 1)} in common)"
            for (a, b), ps in sorted(pairs.items())]


def module_duplicates(modules):
    return duplicated_pairs({m.name: m.text for m in modules.values()},
                            {m.name: m.tree for m in modules.values()})


CRITERIA = [
    ("import cycles (function-local imports included)", lambda ms: cycles(ms), 0),
    ("imports against the layering", against_layering, 0),
    ("function-local imports of package modules outside cli/", local_imports, 0),
    ("string comparisons selecting behaviour", string_switches, 3),
    ("isinstance on trainer types in the pipeline", trainer_isinstance, 0),
    ("public-looking names missing from __all__", missing_from_all, 0),
    (f"modules over {MAX_MODULE_LINES} lines (systems exempt)", big_modules, 2),
    (f"function bodies over {MAX_BODY_LINES} lines", long_bodies, 2),
    ("concrete methods overridden by a subclass", concrete_overrides, 15),
    (f"docstrings over {MAX_DOCSTRING_LINES} lines in geomlearn/", long_docstrings, 5),
    ("dated lines in geomlearn/", dated_lines, 0),
    ("RESULTS.md citations in geomlearn/ quoting a figure", results_citations, 0),
    (f"duplicated code pairs in geomlearn/ (runs of {DUP_RUN} lines, not boilerplate)",
     module_duplicates, 5),
    ("control characters in the product (README, docs, RESULTS.md, docstrings)",
     lambda ms: control_characters(product_texts()) + docstring_escapes(ms), 0),
    ("process words in the product (README, docs, RESULTS.md, docstrings)",
     lambda ms: process_words(product_texts()) + process_words(docstring_texts(ms)), 0),
    ("README.md lines", lambda ms: len(_read("README.md").splitlines()), 120),
    ("benchmarks/RESULTS.md lines", lambda ms: len(_read("benchmarks/RESULTS.md").splitlines()), 800),
    ("ratios and dates in README.md", lambda ms: ratios_and_dates(_read("README.md")), 0),
    ("imports of model families from io/ (models._base only)", io_family_imports, 0),
    ("lists of model families", family_lists, 1),
    ("tables of test models in tests/", tables_of_test_models, 1),
]


def count(rows) -> int:
    """A figure: a size is a number, every other criterion a list of places."""
    return rows if isinstance(rows, int) else len(rows)


def measure() -> dict[str, tuple[list, int]]:
    modules = load()
    return {label: (fn(modules), goal) for label, fn, goal in CRITERIA}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true")
    args = parser.parse_args(argv)
    failed = 0
    print(f"{'met?':5}{'count':>6} {'goal':>6}  criterion")
    for label, (rows, goal) in measure().items():
        ok = count(rows) <= goal
        failed += not ok
        print(f"{'yes ' if ok else 'NO  '} {count(rows):6d} {'<= ' + str(goal):>6}  {label}")
        if args.details and not isinstance(rows, int):
            for row in rows:
                print(f"          {row}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
