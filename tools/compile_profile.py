"""Where the test suite's time goes: a pytest plugin that records JAX's compilation
stages, and a report that merges what each process recorded.

Both tiers spend most of their time compiling, not computing: tracing a function to a
jaxpr, lowering the jaxpr to an MLIR module, and XLA's backend compilation. JAX reports
the duration of each stage through `jax.monitoring`; this plugin adds them up per stage,
per test, and, for the small programs that an operation outside `jit` compiles (one per
operation, shape and dtype: `jit(multiply)`, `jit(dynamic_slice)`, …), per call site
(the innermost frame in `geomlearn/` or `tests/`). Run it with

    PYTHONPATH=tools pytest -p compile_profile            # every xdist worker writes a file
    python tools/compile_profile.py                        # the merged report

`GEOMLEARN_COMPILE_PROFILE` names the folder of the files (default: `geomlearn-compile-
profile` in the system's temporary folder); a new run replaces the files of the last.
Timings are CPU seconds of the processes, so the numbers of two workers add up.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

STAGES = ("jaxpr_trace", "jaxpr_to_mlir_module", "backend_compile")
FOLDER = Path(os.environ.get("GEOMLEARN_COMPILE_PROFILE",
                             Path(tempfile.gettempdir()) / "geomlearn-compile-profile"))


def _operation_names() -> frozenset[str]:
    """Names of the programs an operation outside `jit` compiles (`jit(<name>)`)."""
    import jax.lax as lax
    import jax.numpy as jnp

    return frozenset(dir(jnp)) | frozenset(dir(lax)) | {"_normal", "_uniform", "_where"}


def _call_site(frame) -> str:
    """`path:line function` of the innermost frame in `geomlearn/` or `tests/`."""
    while frame is not None:
        name = frame.f_code.co_filename
        folder = next((f for f in ("/geomlearn/", "/tests/") if f in name), None)
        if folder is not None and "site-packages" not in name:
            tail = name[name.rfind(folder) + 1:]
            return f"{tail}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "(outside the package and the tests)"


class Recorder:
    """Adds up the durations JAX reports, per stage, per test and per eager call site."""

    def __init__(self, operations: frozenset[str]):
        self.operations = operations
        self.start = time.monotonic()
        self.test = "(outside a test)"
        self.ran = 0
        self.stages = collections.defaultdict(lambda: [0, 0.0])
        self.eager = collections.defaultdict(lambda: [0, 0.0])
        self.tests = collections.defaultdict(lambda: [0, 0.0])

    def __call__(self, event: str, duration: float, **kwargs) -> None:
        stage = event.rsplit("/", 1)[-1].removesuffix("_duration")
        if stage not in STAGES:
            return
        count = int(stage == "backend_compile")  # one per compiled program
        name = str(kwargs.get("fun_name", ""))
        name = name[4:-1] if name.startswith("jit(") else name
        for table, key in ((self.stages, stage), (self.tests, self.test)):
            table[key][0] += count
            table[key][1] += duration
        if name in self.operations and stage != "jaxpr_trace":
            row = self.eager[_call_site(sys._getframe(1))]
            row[0] += count
            row[1] += duration

    def result(self) -> dict:
        return {"wall_s": time.monotonic() - self.start, "stages": self.stages,
                "eager": self.eager, "tests": self.tests}


_RECORDER: Recorder | None = None


def pytest_configure(config):
    global _RECORDER
    import jax.monitoring

    if "PYTEST_XDIST_WORKER" not in os.environ:  # the first process: a new run
        for old in FOLDER.glob("*.json"):
            old.unlink()
    _RECORDER = Recorder(_operation_names())
    jax.monitoring.register_event_duration_secs_listener(_RECORDER)


def pytest_runtest_setup(item):
    _RECORDER.test = item.nodeid
    _RECORDER.ran += 1


def pytest_sessionfinish(session, exitstatus):
    if not _RECORDER.ran:  # the controller of xdist workers runs no test
        return
    FOLDER.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (FOLDER / f"{worker}.json").write_text(json.dumps(_RECORDER.result()))


def merge(records: list[dict]) -> dict:
    """The records of several processes added up: stages, eager sites and tests, each
    `name → [programs, seconds]`, and the processes' wall times."""
    out = {"wall_s": [r["wall_s"] for r in records]}
    for table in ("stages", "eager", "tests"):
        total = collections.defaultdict(lambda: [0, 0.0])
        for r in records:
            for key, (count, seconds) in r[table].items():
                total[key][0] += count
                total[key][1] += seconds
        out[table] = dict(total)
    return out


def report(merged: dict, top: int = 20) -> str:
    """A plain-text summary of `merge`'s result."""
    stages = merged["stages"]
    compiling = sum(s for _, s in stages.values())
    eager = sum(s for _, s in merged["eager"].values())
    walls = " + ".join(f"{w:.0f}" for w in merged["wall_s"])
    lines = [f"processes: {len(merged['wall_s'])}, wall {walls} s; compiling "
             f"{compiling:.0f} s, of which operations outside jit {eager:.0f} s"]
    lines += [f"  {stage:<22} {stages.get(stage, [0, 0.0])[1]:8.1f} s" for stage in STAGES]
    for title, table in (("operations outside jit, by call site", merged["eager"]),
                         ("compilation by test", merged["tests"])):
        lines.append(f"{title} (programs, seconds):")
        rows = sorted(table.items(), key=lambda kv: -kv[1][1])[:top]
        lines += [f"  {count:6d} {seconds:8.1f}  {key}" for key, (count, seconds) in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    folder = Path(argv[0]) if argv else FOLDER
    files = sorted(folder.glob("*.json"))
    if not files:
        print(f"no profile in {folder}: run PYTHONPATH=tools pytest -p compile_profile first",
              file=sys.stderr)
        return 2
    print(report(merge([json.loads(f.read_text()) for f in files])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
