"""What a user adds to a run's evaluation, loaded and checked: `--invariants
MODULE:FUNCTION`, `--test-data FILE`, `--reference FILE` and `--plot-columns X Y` (of
`geomlearn train`, declared in `geomlearn.cli._long_flags`, recorded in `run.json` and
used again by `geomlearn evaluate`).

- `--invariants`: `FUNCTION()` returns `{name: f}`, each `f(z)` a real number of one
  state `(d,)` in `jax.numpy` (positions first); they are measured beside the system's
  invariants, in the summary, `metrics.json` and the report. Each is evaluated at the
  first held-out state before anything is written.
- `--test-data FILE`: independent trajectories (the own-data formats, the run's state
  columns by name) the long horizon starts from instead of the held-out ones; with a
  system the reference is integrated from them, without one there is no valid time.
- `--reference FILE`: long trajectories the long horizon starts from and is compared
  with over their length — the valid time beyond the training data's length, with or
  without a system.
- `--plot-columns X Y`: the two state columns of the report's phase-plane panel.

Every file is read, and every name checked against the run's state, before the run's
folder is made: a mistake is a one-line error with exit status 2 and nothing written.
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from ..evaluation import invariants_of
from ._errors import CLIError
from ._hamiltonian import load_hamiltonian
from ._own_data import check_lengths, read_as_run

__all__ = ["LongOptions", "check_long_options", "plot_indices", "horizon_options"]


@dataclasses.dataclass(frozen=True)
class LongOptions:
    """The evaluation options of a run, loaded: `invariants` (`{name: f}` or `None`) and
    the keyword arguments of `geomlearn.evaluate` for the long horizon's start
    (`horizon_data` or `horizon_reference`)."""

    invariants: dict | None = None
    starts: dict = dataclasses.field(default_factory=dict)

    def evaluate_options(self) -> dict:
        """The keyword arguments these options add to `geomlearn.evaluate`."""
        extra = dict(self.starts)
        if self.invariants is not None:
            extra["invariants"] = self.invariants
        return extra


def _load_invariants(reference: str) -> dict:
    """`{name: f}` of `FUNCTION()`; `CLIError` for a function that raises or does not
    return a mapping of names to functions."""
    factory = load_hamiltonian(reference, "--invariants")
    try:
        found = factory()
    except Exception as e:  # the user's function: any error while calling it
        raise CLIError(f"--invariants {reference}: calling it raised {type(e).__name__}: "
                       f"{' '.join(str(e).split())}") from None
    if not isinstance(found, dict) or not found:
        raise CLIError(f"--invariants {reference}: expected a non-empty dict {{name: f}} of "
                       f"functions of one state, got {type(found).__name__}")
    return found


def _trajectories(flag: str, path: str, *, labels, options, fit_options, dim: int, dt: float):
    """The trajectories of `path`, read with the run's state columns and checked against
    the run's dimension, time step and window."""
    if not pathlib.Path(path).is_file():
        raise CLIError(f"{flag} {path}: no such file")
    data = read_as_run(path, labels, q_columns=options.q_columns, p_columns=options.p_columns,
                       flag=flag)
    if data.dim != dim:
        raise CLIError(f"{flag} {path}: states of dimension {data.dim}; the run's have {dim}"
                       + (f" ({', '.join(labels)})" if labels else ""))
    if not np.isclose(float(data.dt), float(dt), rtol=1e-9, atol=0.0):
        raise CLIError(f"{flag} {path}: time step {float(data.dt):g}; the run's data have "
                       f"{float(dt):g}")
    check_lengths(data, fit_options, f"{flag} {path}")
    return data


def check_long_options(options, *, model, system, held_out, labels, fit_options,
                       evaluated: bool, horizon: int | None = None) -> LongOptions:
    """The evaluation options of `options` (a `TrainOptions`) loaded and checked against
    the run — the model, the system (or `None`), the held-out data, the state's `labels`;
    `evaluated` says whether the model's evaluation takes them (a reduction's does not);
    `horizon`: that of `geomlearn evaluate --horizon N` (0: no long horizon, so no start
    for it). `CLIError` (one line) for anything wrong; nothing is written."""
    if horizon == 0:
        options = dataclasses.replace(options, test_data=None, reference=None)
    given = [flag for flag, value in (("--invariants", options.invariants),
                                      ("--test-data", options.test_data),
                                      ("--reference", options.reference)) if value is not None]
    if given and not evaluated:
        raise CLIError(f"{given[0]} applies to integrators; the evaluation of {options.model} "
                       "(a model reduction) does not take it")
    if options.plot_columns is not None:
        plot_indices(options.plot_columns, labels)
    invariants = None
    if options.invariants is not None:
        invariants = _load_invariants(options.invariants)
        state = np.asarray(held_out.trajectories[0][0])
        try:
            invariants_of(model, system, invariants, state=state)
        except (ValueError, TypeError) as e:
            raise CLIError(f"--invariants {options.invariants}: {' '.join(str(e).split())}") \
                from None
    starts = {}
    for flag, value, key in (("--test-data", options.test_data, "horizon_data"),
                             ("--reference", options.reference, "horizon_reference")):
        if value is not None:
            starts[key] = _trajectories(flag, value, labels=labels, options=options,
                                        fit_options=fit_options, dim=held_out.dim,
                                        dt=held_out.dt)
    return LongOptions(invariants, starts)


def plot_indices(columns, labels) -> tuple[int, int] | None:
    """The indices in `labels` of the two `--plot-columns` names (`None`: not given);
    `CLIError` naming the state's columns for an unknown one."""
    if columns is None:
        return None
    labels = list(labels or ())
    missing = [c for c in columns if c not in labels]
    if missing:
        raise CLIError(f"--plot-columns: no state column {missing[0]!r}; the run's state is "
                       f"{', '.join(labels) if labels else 'unnamed'}")
    return labels.index(columns[0]), labels.index(columns[1])


def horizon_options(horizon, particles=None, added=None) -> dict:
    """The long-horizon options of `geomlearn.evaluate` for `--horizon N` (0: none) and
    `--particles K` (`None`: the system's), with what the user `added`
    (`LongOptions`: invariants, the long horizon's start)."""
    if horizon is not None and horizon < 0:
        raise CLIError(f"--horizon must be at least 0 (0: no long-horizon evaluation), got {horizon}")
    extra = {} if added is None else added.evaluate_options()
    if not horizon:
        return {k: v for k, v in extra.items() if k == "invariants"}
    options = {"horizon": horizon, **extra}
    return options if particles is None else {**options, "particles": particles}
