"""The package's layering and the product's text, measured from the source by
`tools/architecture.py`: no import cycles, imports only pointing down, no function-local
imports outside the command line, options as objects, modules, functions and docstrings of
a readable size, `__all__` complete, only abstract methods overridden, one list per
concept, no duplicated code, and a README, docs, RESULTS.md and docstrings without dates,
quoted figures, control characters or words about how the work was organised.

Each criterion is asserted against its goal, and the measuring functions are themselves
checked on small synthetic packages (negative controls), so a broken measurement cannot
pass silently."""

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    spec = importlib.util.spec_from_file_location("_architecture", ROOT / "tools" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


arch = _load_tool()
MEASURED = arch.measure()


@pytest.mark.parametrize("label", list(MEASURED))
def test_goal_holds(label):
    rows, goal = MEASURED[label]
    n = arch.count(rows)
    places = "" if isinstance(rows, int) else "\n" + "\n".join(map(str, rows))
    assert n <= goal, f"{label}: {n} > {goal}{places}"


def _module(name, source, *, package=False):
    tree = ast.parse(source)
    return arch.Module(name, Path(name.replace(".", "/") + ".py"), tree,
                       len(source.splitlines()), package, text=source)


def _package(sources: dict, packages=()):
    """Modules from `{name: source}`, imports resolved as `load` resolves them."""
    return _link({name: _module(name, src, package=name in packages) for name, src in sources.items()})


def _link(modules):
    for mod in modules.values():
        for node, local in arch._walk_imports(mod.tree):
            for target in arch.resolve(mod, node, modules):
                if target != mod.name:
                    mod.imports.append((target, node.lineno, local))
    return modules


def test_a_cycle_through_a_local_import_is_found():
    modules = _link({
        "geomlearn.io": _module("geomlearn.io", "from .models import x\n"),
        "geomlearn.models": _module("geomlearn.models", "def f():\n    from ..io import y\n",
                                    package=True),
    })
    assert arch.cycles(modules) == [["geomlearn.io", "geomlearn.models"]]
    assert arch.local_imports(modules) == ["geomlearn.models:2 imports geomlearn.io"]
    assert arch.against_layering(modules)  # models (3) -> io (4) points up


def test_downward_imports_and_the_command_line_pass():
    modules = _link({
        "geomlearn.cli": _module("geomlearn.cli", "def f():\n    from ..models import x\n",
                                 package=True),
        "geomlearn.models": _module("geomlearn.models", "from ..layers import y\n", package=True),
        "geomlearn.layers": _module("geomlearn.layers", "", package=True),
    })
    assert arch.cycles(modules) == []
    assert arch.local_imports(modules) == []
    assert arch.against_layering(modules) == []


def test_string_switches_and_trainer_types_are_found():
    modules = {
        "geomlearn.models.x": _module("geomlearn.models.x", (
            "def f(self, placement):\n"
            "    if placement == 'bias':\n        pass\n"
            "    if self.weighting in ('skew', 'arbitrary'):\n        pass\n"
            "    if isinstance(o, LevenbergMarquardt):\n        pass\n"
            "    if name == 'bias':\n        pass\n"  # not an option name: not counted
        )),
    }
    assert len(arch.string_switches(modules)) == 2
    assert len(arch.trainer_isinstance(modules)) == 1


def test_sizes_and_missing_exports_are_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(arch.MAX_BODY_LINES + 1))
    modules = {
        "geomlearn.layers.y": _module("geomlearn.layers.y", (
            "__all__ = ['A']\nclass A: pass\nclass B: pass\nC = 1\n_D = 2\n"
            f"def long():\n    '''doc'''\n{body}\n"
        )),
    }
    assert arch.missing_from_all(modules) == ["geomlearn.layers.y.B", "geomlearn.layers.y.C",
                                              "geomlearn.layers.y.long"]
    assert arch.long_bodies(modules) == [f"geomlearn.layers.y.long: {arch.MAX_BODY_LINES + 1} lines"]


def test_an_all_of_submodules_is_read_from_the_source():
    modules = _package({
        "geomlearn.layers": "from . import a\n__all__ = [*a.__all__, 'B']\nB = 1\nC = 2\n",
        "geomlearn.layers.a": "__all__ = ['A']\nA = 1\n",
        "geomlearn.layers.b": "D = 1\n__all__ = sorted(n for n in dir() if n.isupper())\n",
    }, packages={"geomlearn.layers"})
    assert arch._all_of(modules["geomlearn.layers"], modules) == {"A", "B"}
    assert arch._all_of(modules["geomlearn.layers.b"], modules) is None  # computed: complete
    assert arch.missing_from_all(modules) == ["geomlearn.layers.C"]


_BASES = {
    "geomlearn.models._base": (
        "import abc\nimport equinox as eqx\n"
        "class AbstractModel(eqx.Module):\n"
        "    @abc.abstractmethod\n    def step(self, z): ...\n"
        "    def describe(self): return 'a model'\n"
        "    def __call__(self, z): return self.step(z)\n"),
    "geomlearn.models.a": (
        "from abc import abstractmethod\nimport equinox as eqx\n"
        "from ._base import AbstractModel\n"
        "class A(AbstractModel):\n"
        "    def step(self, z): return z\n"          # abstract in the base: fine
        "    def __call__(self, z): return z\n"      # a dunder: not counted
        "    def __init__(self): pass\n"
        "class Wrapper(eqx.Module):\n"
        "    def tree_flatten(self): ...\n"),        # base outside the package: not counted
}


def test_a_concrete_override_is_found_and_an_abstract_one_is_not():
    assert arch.concrete_overrides(_package(_BASES)) == []
    bad = dict(_BASES)
    bad["geomlearn.models.b"] = (
        "from . import a\n"
        "class B(a.A):\n"                            # through an attribute of a module
        "    def step(self, z): return 2 * z\n"      # concrete in A
        "    def describe(self): return 'b'\n")      # concrete in AbstractModel
    assert arch.concrete_overrides(_package(bad)) == [
        "geomlearn.models.b.B.step overrides geomlearn.models.a.A.step",
        "geomlearn.models.b.B.describe overrides geomlearn.models._base.AbstractModel.describe",
    ]


def test_long_docstrings_dates_and_quoted_figures_are_found():
    body = "\n".join(f"    line {i}" for i in range(arch.MAX_DOCSTRING_LINES - 2))
    ok = f'def f():\n    """Summary.\n{body}\n    """\n'  # exactly the limit
    long = f'def g():\n    """Summary.\n{body}\n    one more\n    """\n'
    modules = {"geomlearn.layers.x": _module("geomlearn.layers.x", ok + long)}
    assert [r.split(":")[0] for r in arch.long_docstrings(modules)] == ["geomlearn.layers.x.g"]
    source = ('"""Point to `benchmarks/RESULTS.md`, "Training throughput"; version 0.1.0."""\n'
              "x = 1\n"
              "# faster by 4.6× (benchmarks/RESULTS.md)\n"
              "# see benchmarks/RESULTS.md:\n# 30 % between runs\n"
              "# the size since 2026-12-03\n")
    modules = {"geomlearn.layers.y": _module("geomlearn.layers.y", source)}
    assert [r.split(":")[1] for r in arch.results_citations(modules)] == ["3", "4"]
    assert [r.split(":")[1] for r in arch.dated_lines(modules)] == ["6"]


def test_duplicated_code_is_found_and_boilerplate_is_not():
    work = ("    y = x @ self.weight\n    y = y + self.bias\n    y = jnp.tanh(y)\n"
            "    z = y.sum(axis=0)\n    z = z / n\n    return z * self.scale\n")
    signature = ("    dim: int = eqx.field(static=True)\n    width: int = eqx.field(static=True)\n"
                 "    def __init__(\n        self,\n        dim: int,\n        *,\n"
                 "        key: PRNGKeyArray,\n        dtype=None,\n    ):\n        pass\n")
    pairs = arch.duplicated_pairs({
        "p.a": f"def f(x, n):\n{work}",
        "p.b": f"def g(x, n):\n    # a comment differs\n{work}",
        "p.c": f"class C:\n{signature}",
        "p.d": f"class D:\n{signature}",
        "p.e": "def h(x, n):\n" + "".join(work.splitlines(True)[:5]),  # five lines only
    })
    assert [p.split(" ~ ")[0].split(":")[0] + "~" + p.split(" ~ ")[1].split(":")[0]
            for p in pairs] == ["p.a~p.b"]


def test_control_characters_and_escaped_latex_are_found():
    assert arch.control_characters({"a.md": "$\bar x$ and a\ttab\n", "b.md": "plain\n"}) == [
        "a.md:1: '\\x08'"]
    modules = {"geomlearn.layers.z": _module("geomlearn.layers.z", (
        '"""Module.\nevery line starts after a newline; e.g. this one."""\n'
        'def ok():\n    r"""$\\nabla H$, $\\theta$, $\\beta$."""\n'
        'def escaped():\n    """$\\\\nabla H$ and $\\\\beta$."""\n'
        'def nabla():\n    """$\\nabla H$."""\n'
        'def beta():\n    """$\\beta$ and $\\frac{1}{2}$."""\n'
        'def theta():\n    """$\\theta$"""\n'))}
    rows = arch.docstring_escapes(modules)
    assert [r.split(":")[0] for r in rows] == [
        "geomlearn.layers.z.nabla", "geomlearn.layers.z.beta", "geomlearn.layers.z.theta"]


def test_process_words_are_found():
    flagged = ["measured this session", "Design (this change).", "A bump: tried, not kept",
               "within the issue's 10 %", "(issue 14)", "in this wave", "a working tree",
               "23:08 UTC", "commit a816725 loaded", "at 74b85dc."]
    clean = ["the linear wave equation", "an open issue tracker link", "sha256 " + "ab12" * 16,
             "Deadbeef cafe", "version 0.1.0, 12345678 steps", "final loss 2.233787e-02"]
    rows = arch.process_words({"x.md": "\n".join(flagged + clean)})
    assert sorted({int(r.split(":")[1]) for r in rows}) == list(range(1, len(flagged) + 1))


def test_ratios_and_dates_in_the_readme_are_found():
    text = "4.6× faster\nten times as fast\na 2 × 2 block\nsince 2026-12-03\n3x fewer\nx64 on\n"
    assert [int(r.split(":")[1]) for r in arch.ratios_and_dates(text)] == [1, 4, 5]


def test_io_may_import_the_model_base_only():
    sources = {
        "geomlearn.io": "from ..models._base import AbstractModel\n",
        "geomlearn.io._file": "from ..models._catalogue import model_class\n",
        "geomlearn.models": "", "geomlearn.models._base": "", "geomlearn.models._catalogue": "",
    }
    modules = _package(sources, packages={"geomlearn.io", "geomlearn.models"})
    assert arch.io_family_imports(modules) == [
        "geomlearn.io._file:1 imports geomlearn.models._catalogue"]


def _families(n):
    return {f"geomlearn.models.f{i}": ("from ._base import AbstractModel\n"
                                       f"class M{i}(AbstractModel):\n    pass\n") for i in range(n)}


def test_lists_of_model_families_are_found():
    base = {"geomlearn.models._base": _BASES["geomlearn.models._base"], **_families(4)}
    one_list = {**base, "geomlearn.models": "".join(
        f"from .f{i} import M{i}\n" for i in range(4))}  # explicit re-exports: one list
    assert len(arch.family_lists(_package(one_list, packages={"geomlearn.models"}))) == 1
    registered = {**base, "geomlearn.models": "from .f0 import M0\nfrom .f1 import M1\n"}
    assert arch.family_lists(_package(registered, packages={"geomlearn.models"})) == []
    catalogue = {**one_list, "geomlearn.models._catalogue": (
        "from . import f0, f1, f2\n_FAMILIES = (f0, f1, f2)\n")}
    rows = arch.family_lists(_package(catalogue, packages={"geomlearn.models"}))
    assert sorted(r.split(" ")[0] for r in rows) == [
        "geomlearn.models._catalogue:1", "geomlearn.models._catalogue:2", "geomlearn.models:"]


def test_tables_of_test_models_are_found():
    classes = {f"M{i}": f"geomlearn.models.f{i}" for i in range(arch.TABLE_FAMILIES + 1)}
    table = "CASES = {" + ", ".join(f"'M{i}': lambda k: gl.M{i}(key=k)"
                                    for i in range(arch.TABLE_FAMILIES)) + "}\n"
    small = "FEW = [" + ", ".join(f"gl.M{i}" for i in range(arch.TABLE_FAMILIES - 1)) + "]\n"
    inside = "def f():\n    " + table  # not module level
    rows = arch.model_tables({"tests/t.py": table + small + inside}, classes)
    assert rows == [f"tests/t.py:1 names {arch.TABLE_FAMILIES} model classes"]
    modules = _package({"geomlearn.models._base": _BASES["geomlearn.models._base"], **_families(2)})
    assert arch.model_classes(modules) == {"M0": "geomlearn.models.f0", "M1": "geomlearn.models.f1"}
