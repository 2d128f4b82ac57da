"""geomlearn benchmarks: speed against the published numbers, and reproductions.

Run one with `python -m benchmarks <name> [--quick] [--out DIR]`, all of them with
`python -m benchmarks all`, and list them with `python -m benchmarks`. Each benchmark
prints a table and writes `<name>.json` (default directory `benchmarks/results/`).
`python -m benchmarks report` renders `benchmarks/RESULTS.md` from the result files and
the headers in `benchmarks._headers` (one section per benchmark).

Every benchmark is a module of this package with

- `DESCRIPTION`: one line;
- `add_arguments(parser)` (optional): its own command-line options;
- `run(*, quick, out, **options) -> dict`: runs, prints its table, writes its JSON file and
  returns the payload.

`add_arguments` may only call `parser.add_argument` (the runner records the calls, so that
an option several benchmarks declare, such as `--repeats`, is one option of `all`). The
declarative `benchmarks._harness.Benchmark` provides all three from a spec (settings of a
full and a quick run, a measure function, tables, targets) and one runner; see there.

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
    "toda_reduction": "benchmarks.toda_reduction",
    "new_families": "benchmarks.new_families",
    "positional_encoding": "benchmarks.positional_encoding",
    "positional_encoding_lm": "benchmarks.positional_encoding_lm",
    "positional_encoding_cli": "benchmarks.positional_encoding_cli",
    "positional_encoding_oracle": "benchmarks.positional_encoding_oracle",
    "long_rollout": "benchmarks.long_rollout",
    "dissipation": "benchmarks.dissipation",
    "distributed_lm": "benchmarks.distributed_lm",
    "brouwer": "benchmarks.brouwer",
    "sympnet_rollout": "benchmarks.sympnet_rollout",
    "work_precision": "benchmarks.work_precision",
    "data_driven_peers": "benchmarks.data_driven_peers",
}

#: one-line descriptions, kept here so that `python -m benchmarks` lists without importing.
DESCRIPTIONS: dict[str, str] = {
    "dissipation": "damped pendulum: ConformalSympNet vs GSympNet vs ResNet (γ recovery, "
    "1000-step rollout); forced Duffing: PortHamiltonianNN (damping, forcing amplitude)",
    "training_throughput": "SympNets pendulum GSympNet on one core: geomlearn.fit vs the "
    "bare lax.scan of the same Adam update (iterations/s, compile time); batch-size sweep",
    "rollout_speed": "VPT rollout of 250,000 states vs implicit midpoint on one core; "
    "batched 1000 windows x 1000 steps",
    "rigid_body": "rigid-body reproduction through geomlearn.fit: VPT and VPFF by "
    "Levenberg-Marquardt within 180 s; loss vs wall time of LM, Gauss-Newton, Adam, "
    "Adam + L-BFGS",
    "coupled_oscillator_lst": "coupled oscillator: linear symplectic transformer, "
    "symplectic transformer, standard transformer, GSympNet",
    "sympnets_pendulum": "SympNets pendulum: GSympNet, LASympNet, HenonNet, HNN, ResNet",
    "new_families": "P-SympNet SHO and 20-dim linear system, symmetric SympNets on the "
    "pendulum, Lagrangian network vs MLP on the double pendulum",
    "toda_reduction": "Toda lattice (400 dims): PSD vs symplectic autoencoder at reduced "
    "dims 2 and 8; reduced Hamiltonian system and a learned reduced SympNet vs full order",
    "positional_encoding": "positional encoding placements: order-dependent (driven "
    "pendulum, pulsating rigid body) vs Markov problems, equal budget, median of seeds",
    "positional_encoding_lm": "positional encoding with / without at equal wall time, LM and "
    "Adam, every transformer family, Markov and order-dependent problems",
    "positional_encoding_cli": "geomlearn train with / without --positional-encoding at the "
    "command line's defaults (float32, LM up to 500 iterations), Markov and order-dependent systems",
    "positional_encoding_oracle": "position signals against the oracle (the drive's phase as "
    "an exact input), regular and irregular sampling, and their cost on Markov problems",
    "distributed_lm": "Levenberg-Marquardt with per-process shards: 2 processes on 2 cores "
    "vs 1 on 1 core (per-process memory of data and accumulation, iteration time)",
    "work_precision": "Verlet corrected by learned G-SympNets vs classical integrators at equal "
    "cost: Lennard-Jones cluster (expensive force, long stride), Hénon–Heiles (control)",
    "sympnet_rollout": "rollout of the CLI's SympNets and Hénon nets on one core: inference forms vs "
    "the plain model map vs hand-written dot and broadcast forms, 1-512 trajectories",
    "brouwer": "LiePoissonNet Casimir over 1e5 steps, float32/float64, plain vs compensated",
    "data_driven_peers": "GSympNet (± symmetry) and HNN vs PySINDy and a Diffrax neural ODE "
    "at equal training time: valid time, escapes, energy and momentum drift on held-out orbits",
    "long_rollout": "bounded horizon of 1e5-state rollouts of VPT, SymT, LST, ST after LM "
    "training; multi-step (k-window) vs one-window loss at equal CPU time",
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
