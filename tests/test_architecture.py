"""The package's layering, measured from its source by `tools/architecture.py`: no import
cycles, imports only pointing down, no function-local imports outside the command line,
options as objects, modules and functions of a readable size, `__all__` complete.

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
    assert len(rows) <= goal, f"{label}: {len(rows)} > {goal}\n" + "\n".join(map(str, rows))


def _module(name, source, *, package=False):
    tree = ast.parse(source)
    return arch.Module(name, Path(name.replace(".", "/") + ".py"), tree,
                       len(source.splitlines()), package)


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
