"""Shared helpers: timing, machine description, tables, JSON output, one-core subprocesses.

The benchmarks declare themselves with `benchmarks._harness.Benchmark` and run through its
one runner, which uses these helpers; a module written to the plain protocol of
`benchmarks` may call them directly (`make_payload`, `finish`, `run_pinned`, …).

Timing rules used by every benchmark:

- **compile time** is measured on its own: either ahead of time
  (`jax.jit(f).lower(...)` then `.compile()`, both timed) or as the first call of a
  function that compiles on first use, minus the median steady-state time of the calls
  after it (both are reported);
- **steady-state time** is the median of several timed calls after that first one, each
  ending with `jax.block_until_ready`, so asynchronous dispatch cannot hide work.

"One CPU core" means a subprocess pinned to a single core (`taskset -c <cpu>`, falling back
to `os.sched_setaffinity`) with `XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`, so XLA's
Eigen kernels run single-threaded too. The child reports the affinity it saw.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path(__file__).resolve().parent / "results"

#: XLA flags of the one-core subprocess (Eigen's thread pool off; affinity does the rest).
PINNED_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false"


# ----------------------------------------------------------------------------- JAX setup


def enable_x64() -> None:
    """Turn on float64 in JAX (benchmarks are scripts; the library never does this)."""
    import jax

    jax.config.update("jax_enable_x64", True)


def require_x64() -> None:
    """Raise unless float64 is enabled (the float64 cases need it)."""
    import jax

    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "the benchmarks need float64: call benchmarks._common.enable_x64() first "
            "(python -m benchmarks does this)"
        )


def block(x):
    """`jax.block_until_ready` on any pytree (arrays only)."""
    import jax

    return jax.block_until_ready(x)


# ----------------------------------------------------------------------------- timing


def timed(fn: Callable, *args, **kwargs) -> tuple[Any, float]:
    """`(result, seconds)` of one call, waiting for every array of the result."""
    t0 = time.perf_counter()
    out = block(fn(*args, **kwargs))
    return out, time.perf_counter() - t0


def summarize(times: Sequence[float]) -> dict:
    """Median, min, max and the individual runs (seconds)."""
    ordered = sorted(times)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    return {
        "median_s": median,
        "min_s": ordered[0],
        "max_s": ordered[-1],
        "runs_s": list(times),
    }


def repeat(fn: Callable, repeats: int, *args, **kwargs) -> dict:
    """Time `repeats` calls of `fn(*args, **kwargs)` (already compiled) → `summarize`."""
    times = [timed(fn, *args, **kwargs)[1] for _ in range(repeats)]
    return summarize(times)


def first_and_steady(fn: Callable, repeats: int, *args, **kwargs) -> dict:
    """Time a first call (trace + compile + run) and then `repeats` steady-state calls.

    Returns `first_s`, the steady-state summary, and `compile_s = first_s − median`
    (the compile cost of a function that compiles on first use, e.g. `eqx.filter_jit`).
    """
    out, first = timed(fn, *args, **kwargs)
    steady = repeat(fn, repeats, *args, **kwargs)
    return {
        "first_s": first,
        "compile_s": max(first - steady["median_s"], 0.0),
        **steady,
        "result": out,
    }


def aot_compile(jitted, *args) -> tuple[Any, dict]:
    """Lower and compile a `jax.jit` function ahead of time, timing both phases."""
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    return compiled, {"trace_lower_s": t1 - t0, "compile_s": t2 - t1, "total_s": t2 - t0}


class Deadline:
    """A wall-clock budget: `remaining()` seconds, `expired()`."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float:
        return self.seconds - self.elapsed()

    def expired(self) -> bool:
        return self.remaining() <= 0.0


# ----------------------------------------------------------------------------- machine


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or `platform.processor()` elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_revision() -> str | None:
    """The repository's commit (with `+dirty` when the work tree has changes), if known."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (rev + ("+dirty" if dirty else "")) or None


def machine_info() -> dict:
    """CPU model, cores, the cores this process may use, the load average, versions, XLA
    flags."""
    import equinox
    import jax
    import jaxlib
    import numpy
    import optax

    try:
        affinity = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = list(range(os.cpu_count() or 1))
    try:  # the machine's load when the run ends (1, 5 and 15 minutes)
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "cores_available": len(affinity),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "equinox": equinox.__version__,
        "optax": optax.__version__,
        "numpy": numpy.__version__,
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.config.jax_enable_x64),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "git": git_revision(),
        "load_average": load,
    }


# ----------------------------------------------------------------------------- output


def _fmt(value, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str) and spec not in ("", "bool"):
        return value  # e.g. "nan", as the JSON file stores non-finite numbers
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if spec == "":
        return str(value)
    if spec == "bool":
        return "met" if value else "NOT met"
    return format(value, spec)


def format_table(title: str, columns: Sequence[tuple[str, str, str]], rows: Sequence[dict]) -> str:
    """A plain-text table; `columns` are `(key, header, format spec)`."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([_fmt(row.get(key), spec) for key, _, spec in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [title, "=" * len(title)]
    for n, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if n else c.ljust(w) for c, w in zip(r, widths)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(columns: Sequence[tuple[str, str, str]], rows: Sequence[dict]) -> str:
    """The same table in Markdown."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    head = "| " + " | ".join(cell(h) for _, h, _ in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = [
        "| " + " | ".join(cell(_fmt(row.get(k), s)) for k, _, s in columns) + " |"
        for row in rows
    ]
    return "\n".join([head, rule, *body])


def target(name: str, goal: str, measured: float | None, met: bool | None, unit: str = "",
           note: str = "") -> dict:
    """One target of a benchmark, recorded as met / not met with the measured figure."""
    return {
        "target": name,
        "goal": goal,
        "measured": measured,
        "unit": unit,
        "met": None if met is None else bool(met),
        "note": note,
    }


def format_targets(targets: Sequence[dict]) -> str:
    cols = [
        ("target", "target", ""),
        ("goal", "goal", ""),
        ("measured_str", "measured", ""),
        ("met", "status", "bool"),
    ]
    rows = [dict(t, measured_str=_measured_str(t)) for t in targets]
    return format_table("Targets", cols, rows)


def _measured_str(t: dict) -> str:
    m = t.get("measured")
    if m is None:
        return "-"
    return f"{m:.4g} {t.get('unit', '')}".strip()


def command_line(name: str, quick: bool, options: dict) -> str:
    """The exact command that reproduces a run."""
    parts = ["python", "-m", "benchmarks", name]
    if quick:
        parts.append("--quick")
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        parts.append(flag if value is True else f"{flag} {value}")
    return " ".join(parts)


def jsonable(obj):
    """Convert NumPy/JAX scalars and arrays so that `json` can write them."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (str, bool, int)) or obj is None:
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if hasattr(obj, "dtype") and hasattr(obj, "shape"):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            return jsonable(arr.item())
        return jsonable(arr.tolist())
    return str(obj)


def table(title: str, columns: Sequence[tuple[str, str, str]], rows: Sequence[dict]) -> dict:
    """A table as stored in the JSON payload (printed and rendered to Markdown from it)."""
    return {"title": title, "columns": [list(c) for c in columns], "rows": list(rows)}


def render_text(payload: dict) -> str:
    """The plain-text tables, targets and notes of a payload (what a benchmark prints)."""
    parts = [format_table(t["title"], t["columns"], t["rows"]) for t in payload["tables"]]
    if payload["targets"]:
        parts.append(format_targets(payload["targets"]))
    parts += payload.get("notes", [])
    return "\n\n".join(parts)


def render_markdown(payload: dict, *, level: int = 3) -> str:
    """The tables and targets of a payload in Markdown (for RESULTS.md)."""
    h = "#" * level
    parts = []
    for t in payload["tables"]:
        parts.append(f"{h} {t['title']}\n\n" + markdown_table(t["columns"], t["rows"]))
    if payload["targets"]:
        cols = [("target", "target", ""), ("goal", "goal", ""),
                ("measured_str", "measured", ""), ("met", "status", "bool"),
                ("note", "note", "")]
        rows = [dict(t, measured_str=_measured_str(t)) for t in payload["targets"]]
        parts.append(f"{h} Targets\n\n" + markdown_table(cols, rows))
    if payload.get("notes"):
        parts.append("\n".join(f"- {note}" for note in payload["notes"]))
    return "\n\n".join(parts)


def make_payload(name: str, *, quick: bool, options: dict, settings: dict, results,
                 targets: Sequence[dict], started: float, tables: Sequence[dict] = (),
                 notes: Sequence[str] = (), machine: dict | None = None,
                 extra: dict | None = None) -> dict:
    """The JSON document every benchmark writes."""
    payload = {
        "benchmark": name,
        "quick": bool(quick),
        "command": command_line(name, quick, options),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - started,
        "machine": machine_info() if machine is None else machine,
        "settings": settings,
        "tables": list(tables),
        "targets": list(targets),
        "notes": list(notes),
        "results": results,
    }
    if extra:
        payload.update(extra)
    return jsonable(payload)


_jsonable = jsonable  # the former name


def out_dir(out) -> Path:
    """The output directory (`benchmarks/results` by default), created if missing."""
    out = DEFAULT_OUT if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_payload(out, name: str, payload: dict) -> Path:
    """Write `<out>/<name>.json` (creating `out`) atomically; returns the path."""
    from geomlearn._files import write_atomic  # the benchmark has imported geomlearn by now

    path = out_dir(out) / f"{name}.json"
    return write_atomic(path, (json.dumps(payload, indent=2) + "\n").encode())


def emit(text: str) -> None:
    print(text, flush=True)


def finish(out, payload: dict) -> dict:
    """Print a payload's tables, write its JSON file, and return it."""
    emit(render_text(payload))
    path = write_payload(out, payload["benchmark"], payload)
    emit(f"wrote {path}")
    return payload


def quick_targets(targets: Sequence[dict], quick: bool) -> list[dict]:
    """In a quick run no target is marked met or not (its figures measure nothing)."""
    targets = [dict(t) for t in targets]
    if quick:
        for t in targets:
            t["met"] = None
            t["note"] = (t["note"] + " " if t["note"] else "") + "(quick run: not a measurement)"
    return targets


# ----------------------------------------------------------------------------- one core


def _jax_strictness() -> dict:
    """The parent's dtype/rank promotion settings, so a child runs under the same rules."""
    if "jax" not in sys.modules:
        return {}
    import jax

    return {
        "jax_numpy_dtype_promotion": jax.config.jax_numpy_dtype_promotion,
        "jax_numpy_rank_promotion": jax.config.jax_numpy_rank_promotion,
    }


def pin_cpu() -> int:
    """The core a one-core subprocess runs on: the first one this process may use."""
    try:
        return min(os.sched_getaffinity(0))
    except AttributeError:
        return 0


def run_pinned(module: str, function: str, kwargs: dict, *, timeout: float | None = None,
               xla_flags: str = "") -> dict:
    """Call `module.function(**kwargs)` in a subprocess restricted to one CPU core.

    The subprocess runs under `taskset -c <cpu>` (when `taskset` exists; it also sets its
    own affinity with `os.sched_setaffinity`) with `XLA_FLAGS` adding
    `--xla_cpu_multi_thread_eigen=false` (and `xla_flags`), float64 enabled, and the
    parent's dtype/rank promotion rules. The function's return value must be
    JSON-serialisable; it comes back with the child's `machine_info()` under `"_machine"`.
    """
    cpu = pin_cpu()
    env = dict(os.environ)
    env["XLA_FLAGS"] = " ".join(f for f in (env.get("XLA_FLAGS", ""), PINNED_XLA_FLAGS,
                                            xla_flags) if f)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    env.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="geomlearn-bench-") as tmp:
        request = Path(tmp) / "request.json"
        result = Path(tmp) / "result.json"
        request.write_text(
            json.dumps(
                {
                    "module": module,
                    "function": function,
                    "kwargs": kwargs,
                    "cpu": cpu,
                    "config": _jax_strictness(),
                }
            )
        )
        cmd = [sys.executable, "-m", "benchmarks._pinned", str(request), str(result)]
        taskset = shutil.which("taskset")
        if taskset:
            cmd = [taskset, "-c", str(cpu), *cmd]
        proc = subprocess.run(
            cmd, env=env, cwd=str(REPO_ROOT), timeout=timeout, stdout=None, stderr=None
        )
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(
                f"one-core subprocess {module}.{function} failed with exit status "
                f"{proc.returncode}: {shlex.join(cmd)}"
            )
        out = json.loads(result.read_text())
    out["_pinning"] = {
        "cpu": cpu,
        "taskset": bool(taskset),
        "xla_flags": env["XLA_FLAGS"],
        "how": (f"taskset -c {cpu} " if taskset else "os.sched_setaffinity ")
        + f"+ XLA_FLAGS={env['XLA_FLAGS']}",
    }
    return out
