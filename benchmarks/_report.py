"""Render recorded benchmark results as Markdown: `python -m benchmarks._report [DIR]`.

Reads `<DIR>/<name>.json` (default `benchmarks/results/`) for every benchmark that has
one and prints, per benchmark, its exact command, date, wall time, tables and targets.
`benchmarks/RESULTS.md` is this output plus the discussion of each result.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import BENCHMARKS
from ._common import DEFAULT_OUT, render_markdown


def machine_markdown(machine: dict) -> str:
    return "\n".join(
        [
            f"- CPU: {machine['cpu_model']}, {machine['logical_cores']} logical cores",
            f"- {machine['platform']}, Python {machine['python']}",
            f"- JAX {machine['jax']} (jaxlib {machine['jaxlib']}), Equinox "
            f"{machine['equinox']}, Optax {machine['optax']}, NumPy {machine['numpy']}; "
            f"backend {machine['jax_backend']}",
        ]
    )


def render(results_dir=None) -> str:
    results_dir = DEFAULT_OUT if results_dir is None else Path(results_dir)
    parts = []
    machine = None
    for name in BENCHMARKS:
        path = results_dir / f"{name}.json"
        if not path.exists():
            continue
        payload = json.loads(path.read_text())
        if machine is None or payload["machine"].get("cores_available", 0) > machine.get(
            "cores_available", 0
        ):
            machine = payload["machine"]
        head = [
            f"## {name}",
            "",
            f"`{payload['command']}` — {payload['date']}, {payload['wall_s'] / 60:.1f} min"
            + (" (**quick run**)" if payload["quick"] else ""),
        ]
        parts.append("\n".join(head) + "\n\n" + render_markdown(payload, level=3))
    if machine is not None:
        parts.insert(0, "## Machine\n\n" + machine_markdown(machine))
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render(sys.argv[1] if len(sys.argv) > 1 else None), end="")
