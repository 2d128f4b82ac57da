"""The declarative benchmark spec and its one runner.

A benchmark module declares *what* it measures as a `Benchmark`, and the runner does the
rest: settings → measure → payload → tables and targets → JSON file.

```python
from ._harness import Benchmark, Column, Option, Table

def measure(settings, ctx):            # the only code that measures
    ...
    return {"rows": [...]}             # JSON-serialisable results

SPEC = Benchmark(
    name="example",
    description="one line",
    full={"epochs": 2000},             # the settings of a full run …
    quick={"epochs": 5},               # … and of the smoke test (tiny sizes)
    measure=measure,
    tables=(Table("Example, {epochs} epochs", (Column("name", "network"),
                                                Column("loss", "loss", ".3e")), rows="rows"),),
    options=(Option("--epochs", int, "training epochs"),),
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run   # the module protocol of `benchmarks`
```

**Settings.** `full` or `quick` (deep-copied), then every command-line option that was
given (not `None`) overrides the setting of its name (`Option.setting`, default the
option's `dest`), converted by `Option.convert` when it has one. The settings are recorded
in the JSON file and passed to `measure`, so a run is described by them alone.

**Measure.** `measure(settings, ctx)` returns the results (a JSON-serialisable dict);
`ctx` is a `Context` with `quick`, the output directory `out` (for files a benchmark
writes next to its JSON, e.g. a figure) and `log` (progress lines; silent in quick
mode). With `one_core=True` it runs in a subprocess pinned to one CPU core
(`_common.run_pinned`); the payload then records that process's machine description.

**Report.** Each `Table` turns the results into rows (`rows`: a key of the results, or a
function `(settings, results) -> rows`); titles and headers are `str.format`ted with the
settings. `targets(settings, results)` returns `_common.target(...)` records (in a quick
run none is marked met or not); `notes(settings, results)` free-text lines.

Modules that do not use the spec keep working: `benchmarks/__main__.py` needs only the
module protocol (`DESCRIPTION`, optional `add_arguments(parser)` calling
`parser.add_argument`, `run(*, quick, out, **options)`).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from . import _common as C

__all__ = ["Benchmark", "Column", "Context", "Option", "Table", "REPEATS", "run_benchmark"]


@dataclasses.dataclass(frozen=True)
class Option:
    """A command-line option of a benchmark, overriding one setting.

    Several benchmarks may declare the same flag (e.g. `--repeats`): with
    `python -m benchmarks all` it is one option passed to each of them. Options default
    to `None` (= keep the setting of the full or quick run).
    """

    flag: str
    type: Callable = str
    help: str = ""
    choices: tuple | None = None
    setting: str | None = None  # the settings key it overrides (default: dest)
    convert: Callable | None = None  # command-line value -> setting value

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def key(self) -> str:
        return self.setting or self.dest

    def add_to(self, parser) -> None:
        kwargs: dict[str, Any] = {"type": self.type, "default": None, "help": self.help}
        if self.choices is not None:
            kwargs["choices"] = list(self.choices)
        parser.add_argument(self.flag, **kwargs)


#: `--repeats`, shared by the timing benchmarks.
REPEATS = Option("--repeats", int, "timed repeats per measurement (median)")


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: the row key, its header (formatted with the settings) and the
    format spec of its cells (`""`: `str`; `"bool"`: met / NOT met)."""

    key: str
    header: str
    fmt: str = ""


@dataclasses.dataclass(frozen=True)
class Table:
    """A table of the payload: `title` (formatted with the settings, or a function
    `(settings, results) -> str`), the columns, and where its rows come from."""

    title: str | Callable[[dict, dict], str]
    columns: tuple[Column, ...]
    rows: str | Callable[[dict, dict], list[dict]]

    def render(self, settings: dict, results: dict) -> dict:
        if callable(self.title):
            title = self.title(settings, results)
        else:
            title = self.title.format(**settings)
        rows = self.rows(settings, results) if callable(self.rows) else results[self.rows]
        cols = [(c.key, c.header.format(**settings), c.fmt) for c in self.columns]
        return C.table(title, cols, rows)


@dataclasses.dataclass(frozen=True)
class Context:
    """What `measure` gets besides the settings."""

    quick: bool
    out: Path

    def log(self, text: str) -> None:
        """A progress line (printed in full runs only)."""
        if not self.quick:
            C.emit(text)


def _no_lines(settings, results) -> list:
    return []


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A benchmark, declared: see the module documentation."""

    name: str
    description: str
    full: Mapping[str, Any]
    quick: Mapping[str, Any]
    measure: Callable[[dict, Context], dict]
    tables: tuple[Table, ...]
    targets: Callable[[dict, dict], list[dict]] = _no_lines
    notes: Callable[[dict, dict], list[str]] = _no_lines
    options: tuple[Option, ...] = ()
    one_core: bool = False

    def __post_init__(self):
        if set(self.full) != set(self.quick):
            raise ValueError(
                f"benchmark {self.name!r}: full and quick settings must have the same keys, "
                f"differing in {sorted(set(self.full) ^ set(self.quick))}"
            )
        for opt in self.options:
            if opt.key not in self.full:
                raise ValueError(f"benchmark {self.name!r}: option {opt.flag} sets the unknown "
                                 f"setting {opt.key!r}")

    # the module protocol of `benchmarks`
    def add_arguments(self, parser) -> None:
        for opt in self.options:
            opt.add_to(parser)

    def run(self, *, quick: bool = False, out=None, **options) -> dict:
        return run_benchmark(self, quick=quick, out=out, **options)

    def settings(self, *, quick: bool, options: Mapping[str, Any]) -> dict:
        """The settings of a run: `full` or `quick`, overridden by the given options."""
        by_dest = {opt.dest: opt for opt in self.options}
        unknown = sorted(set(options) - set(by_dest))
        if unknown:
            raise TypeError(f"benchmark {self.name!r} has no option(s) {unknown}; "
                            f"valid: {sorted(by_dest)}")
        settings = copy.deepcopy(dict(self.quick if quick else self.full))
        for dest, value in options.items():
            if value is not None:
                opt = by_dest[dest]
                settings[opt.key] = value if opt.convert is None else opt.convert(value)
        return settings


def measure_in_child(module: str, spec: str, settings: dict, quick: bool, out: str) -> dict:
    """The one-core subprocess's entry point: `module.spec.measure(settings, ctx)`."""
    benchmark = getattr(importlib.import_module(module), spec)
    return benchmark.measure(settings, Context(quick=quick, out=Path(out)))


def _spec_name(spec: Benchmark) -> tuple[str, str]:
    """`(module, attribute)` under which the child process finds `spec`."""
    module = importlib.import_module(spec.measure.__module__)
    for attr, value in vars(module).items():
        if value is spec:
            return module.__name__, attr
    raise ValueError(f"benchmark {spec.name!r}: its Benchmark must be a module-level name of "
                     f"{module.__name__} (the module of its measure function) to run on one core")


def run_benchmark(spec: Benchmark, *, quick: bool = False, out=None, **options) -> dict:
    """Run `spec`: settings → measure → payload; print its tables, write `<out>/<name>.json`,
    return the payload."""
    import time

    started = time.perf_counter()
    settings = spec.settings(quick=quick, options=options)
    out_path = C.out_dir(out)
    notes: list[str] = []
    if spec.one_core:
        module, attr = _spec_name(spec)
        results = C.run_pinned(
            __name__, "measure_in_child",
            {"module": module, "spec": attr, "settings": settings, "quick": bool(quick),
             "out": str(out_path)},
        )
        machine = results.pop("_machine")
        pinning = results.pop("_pinning")
        notes.append(f"one core: {pinning['how']}")
        recorded = {**settings, "pinning": pinning}
    else:
        C.require_x64()
        results = spec.measure(settings, Context(quick=quick, out=out_path))
        machine, recorded = None, settings
    # tables and targets are computed from what the JSON file holds
    results = C.jsonable(results)
    tables = [t.render(settings, results) for t in spec.tables]
    targets = C.quick_targets(list(spec.targets(settings, results)), quick)
    notes = list(spec.notes(settings, results)) + notes
    payload = C.make_payload(
        spec.name, quick=quick, options=options, settings=recorded, results=results,
        tables=tables, targets=targets, notes=notes, started=started, machine=machine,
    )
    return C.finish(out_path, payload)


def loss_at_times(curve: Sequence[Sequence[float]], times: Sequence[float]) -> list:
    """For a curve of `(seconds, loss)` points, the last loss recorded at or before each
    time (`None` before the first point, or when the curve ended more than 5 % earlier)."""
    out = []
    end = curve[-1][0] if curve else -1.0
    for t in times:
        before = [loss for s, loss in curve if s <= t]
        # a run that ended within 5 % of `t` (a budget of `t` seconds) still counts
        out.append(before[-1] if before and t <= 1.05 * end else None)
    return out
