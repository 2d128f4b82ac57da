"""geomlearn benchmarks: speed against the published numbers, and reproductions.

Run one with `python -m benchmarks <name> [--quick] [--out DIR]`, all of them with
`python -m benchmarks all`, and list them with `python -m benchmarks`. Each benchmark
prints a table and writes `<name>.json` (default directory `benchmarks/results/`).
`benchmarks/RESULTS.md` holds the latest full results.

Every benchmark is a module of this package with

- `DESCRIPTION`: one line;
- `add_arguments(parser)` (optional): its own command-line options;
- `run(*, quick, out, **options) -> dict`: runs, prints its table, writes its JSON file and
  returns the payload.

The registry below is a mapping from name to module name, so listing the benchmarks does
not import JAX.
"""

from __future__ import annotations

import importlib

__all__ = ["BENCHMARKS", "load", "run"]

#: name → module (in the order `all` runs them).
BENCHMARKS: dict[str, str] = {
    "training_throughput": "benchmarks.training_throughput",
    "rollout_speed": "benchmarks.rollout_speed",
    "rigid_body": "benchmarks.rigid_body",
    "coupled_oscillator_lst": "benchmarks.coupled_oscillator_lst",
    "sympnets_pendulum": "benchmarks.sympnets_pendulum",
}

#: one-line descriptions, kept here so that `python -m benchmarks` lists without importing.
DESCRIPTIONS: dict[str, str] = {
    "training_throughput": "SympNets pendulum GSympNet: Adam iterations/s on one core "
    "(float64, float32), compile time; rigid-body VPT windows/s at batch 16384",
    "rollout_speed": "VPT rollout of 250,000 states vs implicit midpoint on one core; "
    "batched 1000 windows x 1000 steps",
    "rigid_body": "rigid-body reproduction (VPFF, VPT, standard transformer, VPT + "
    "positional encoding, VPT arbitrary weighting) within a wall-clock budget",
    "coupled_oscillator_lst": "coupled oscillator: linear symplectic transformer, "
    "symplectic transformer, standard transformer, GSympNet",
    "sympnets_pendulum": "SympNets pendulum: GSympNet, LASympNet, HenonNet, HNN, ResNet",
}


def load(name: str):
    """The module of benchmark `name` (`ValueError` listing the valid names otherwise)."""
    if name not in BENCHMARKS:
        raise ValueError(
            f"unknown benchmark {name!r}; valid names: {', '.join(BENCHMARKS)} (or 'all')"
        )
    return importlib.import_module(BENCHMARKS[name])


def run(name: str, *, quick: bool = False, out=None, **options) -> dict:
    """Run benchmark `name` and return its JSON payload (see the module docstring)."""
    return load(name).run(quick=quick, out=out, **options)
