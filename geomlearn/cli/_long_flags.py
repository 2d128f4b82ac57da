"""The flags of what a user adds to a run's evaluation (`geomlearn train`): declared and
read into `TrainOptions` fields here; loaded and checked against the run by
`geomlearn.cli._long_options`."""

from __future__ import annotations

import pathlib

from ._hamiltonian import hamiltonian_reference

__all__ = ["long_arguments", "long_option_values"]


def long_arguments(t) -> None:
    """The flags `--invariants`, `--test-data`, `--reference`, `--plot-columns`."""
    t.add_argument("--invariants", default=None, metavar="MODULE:FUNCTION",
                   help="your invariants: FUNCTION() returns {name: f}, f(z) a number of one "
                        "state (q first) in jax.numpy, from a .py file (my_system.py:"
                        "invariants) or a module; their drift is measured beside the system's")
    t.add_argument("--test-data", default=None, metavar="PATH",
                   help="independent trajectories (.npz or .csv, the run's state columns) the "
                        "long horizon starts from instead of the held-out ones")
    t.add_argument("--reference", default=None, metavar="PATH",
                   help="long reference trajectories (.npz or .csv): the long horizon starts "
                        "from them and measures the valid time against them over their length")
    t.add_argument("--plot-columns", nargs=2, default=None, metavar=("X", "Y"),
                   help="the state columns of the report's phase-plane panel (default q1 and p1)")


def _absolute(path):
    return None if path is None else str(pathlib.Path(path).resolve())


def long_option_values(args) -> dict:
    """`TrainOptions` fields of the parsed flags (paths made absolute, `--invariants`
    checked for its form)."""
    return dict(invariants=hamiltonian_reference(args.invariants, "--invariants",
                                                 "my_system.py:invariants"),
                test_data=_absolute(args.test_data), reference=_absolute(args.reference),
                plot_columns=None if args.plot_columns is None else tuple(args.plot_columns))
