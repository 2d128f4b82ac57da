"""`geomlearn predict`: roll a trained model out from initial states, write the trajectories.

The initial states come from a trajectory file (`--from-data`: each trajectory's first
state, or its first `T` states for a transformer) or from a table of states
(`--initial`: a `.csv` whose rows are states — grouped into windows by an optional
`trajectory` column — with an optional `t` column, or an `.npz` with `states` `(B, d)` or
`(B, T, d)`, optional start times `t` and state names `columns`). Columns are read by
name against the run's state (`run.json`'s `labels`), in any order. All rollouts are one
compiled, batched call (`geomlearn.models` rollout, vectorised over the initial states).
The output has the formats `geomlearn.TrajectoryData.read` reads, chosen by the suffix of
`--out`: `.csv` (`trajectory`, `t`, then the state columns) or `.npz` (`traj_i`, `t_i`);
its time column continues from each initial state's time with the run's time step.

With `--times FILE` (instead of `--steps`) every rollout is made at those real times
(`geomlearn.iterate(..., times=, dt=)`, `dt` the run's training step, for irregular data
its mean step): the first time(s) are the initial state's (window's), and the output's
time column holds the times.

Every rollout is kept: one that fails (a step of the model cannot be taken, or its state
is not finite) is written up to its last finite state, and `<out>.status.json` gives the
status of each (`status_record`); the exit status is 0 when all succeeded and
`SOME_FAILED` (5) otherwise. Files are written atomically, with the mode `train` uses.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys
import tempfile
import time

import equinox as eqx
import jax
import numpy as np

from .._files import check_writable, write_atomic, write_json
from ..data import TrajectoryData
from ..models._base import model_rollout
from ._errors import CLIError, user
from ._options import TrainOptions
from ._own_data import state_names
from ._predict_input import (
    OUT_SUFFIXES,
    Starts,
    check_steps_or_times,
    read_initial,
    rows_per_step,
    times_for,
)
from ._runs import load_run, read_run_json

__all__ = ["predict", "predict_arguments", "Starts", "Outcome", "read_initial",
           "write_trajectories", "roll_out", "status_path", "status_record",
           "SOME_FAILED"]

#: The exit status of `geomlearn predict` when some rollouts failed (all are written).
SOME_FAILED = 5


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One rollout: its `states` `(n, d)` up to the last finite one, its `status` (`"ok"`;
    `"non-finite"`: a state overflowed; `"failed"`: a step of the model could not be
    taken), and for a failure the `step` that failed and the `reason`."""

    states: np.ndarray
    status: str = "ok"
    step: int | None = None
    reason: str | None = None


def predict_arguments(p) -> None:
    """The options of `geomlearn predict`."""
    p.add_argument("dir", metavar="RUN", help="a folder written by geomlearn train")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--initial", metavar="PATH", help="a .csv of states (rows; columns "
                        "named as the run's state, in any order; an optional trajectory column "
                        "groups a transformer's T rows, an optional t column gives the start "
                        "time) or an .npz with states (B, d) or (B, T, d) (and optionally columns)")
    source.add_argument("--from-data", metavar="PATH", help="a trajectory file (.npz or .csv, as "
                        "for train --data): start from each trajectory's first state(s)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps to predict after the initial state(s), at the run's time step")
    p.add_argument("--times", metavar="FILE", default=None,
                   help="instead of --steps: the times of the rows of every rollout, a text "
                        "file of one time per line (blank lines and # comments skipped) or a "
                        ".npy 1-D array, strictly increasing; the first time is the initial "
                        "state's (the first T a transformer's window's), the others the times "
                        "to predict at (for a transformer a multiple of its prediction window), "
                        "and they make the output's t column. Feed-forward and transformer "
                        "integrators only (irregularly sampled output, as train --irregular)")
    p.add_argument("--out", required=True, metavar="FILE", help="the output file, .csv or .npz "
                   "(and FILE.status.json: the status of each rollout)")
    p.add_argument("--q-columns", nargs="+", default=None, metavar="NAME",
                   help="the position columns, in order, with --p-columns (default: the run's "
                        "state columns by name)")
    p.add_argument("--p-columns", nargs="+", default=None, metavar="NAME", help="as for train --data")


# ----------------------------------------------------------------------- reading


# ----------------------------------------------------------------------- rolling out


def _stopped(e: Exception) -> str:
    """The message of a failed runtime check, in one line."""
    found = re.search(r"EquinoxRuntimeError: (.*)", str(e))
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return found.group(1).strip() if found else lines[0] if lines else "a runtime check failed"


def _finite(states: np.ndarray, n_init: int) -> Outcome:
    """`states` `(N, d)` up to the last finite one."""
    bad = np.flatnonzero(~np.isfinite(states.reshape(states.shape[0], -1)).all(axis=1))
    if not bad.size:
        return Outcome(states)
    k = int(bad[0])
    step = k - n_init + 1
    return Outcome(states[:k], "non-finite", step, f"the state is not finite at step {step}")


def _alone(run, z0, first, n_points: int, per: int = 1) -> Outcome:
    r"""The rollout `run(z0, n)` of one initial state `z0` (`first`: its `n_init` states):
    whole, or up to the last step the model could take, found by bisection on the number
    of points (`n_init` plus a multiple of `per`)."""
    n_init = first.shape[0]
    try:
        return _finite(np.asarray(run(z0, n_points)), n_init)
    except eqx.EquinoxRuntimeError as e:
        reason = _stopped(e)
    good, lo, hi = first, 0, (n_points - n_init) // per
    while hi - lo > 1:  # a rollout of lo steps of `per` rows succeeds, one of hi fails
        mid = (lo + hi) // 2
        try:
            good, lo = np.asarray(run(z0, n_init + mid * per)), mid
        except eqx.EquinoxRuntimeError:
            hi = mid
    outcome = _finite(good, n_init)
    if outcome.status != "ok":
        return outcome
    step = lo * per + 1
    return Outcome(good, "failed", step, f"step {step} failed: {reason}")


def _runner(model, task, times, dt):
    """`(run, per)`: `run(z, n, *, batched=False)` the first `n` points of the rollout from
    `z` (at the first `n` of `times`, in units of `dt`, when given:
    `model.rollout_at`, as `geomlearn.iterate(..., times=)` computes it), `per` the rows
    a step appends."""
    def run(z, n, *, batched=False):
        if times is None:
            return model_rollout(model, z, n, task, batched=batched)
        one = lambda s: model.rollout_at(s, times[:n], dt, task)  # noqa: E731
        return jax.vmap(one)(z) if batched else one(z)

    return run, 1 if times is None else rows_per_step(model, task)


def roll_out(model, initial, first, n_points: int, task, *, times=None, dt=None) -> list[Outcome]:
    """The `Outcome` of each rollout of `initial` (`first`: the `n_init` first states of
    each), at the real `times` `(n_points,)` in units of the nominal step `dt` when given:
    one batched call; when a runtime check fails in it, each rollout alone, so that one
    failure does not lose the others."""
    n_init = first.shape[1]
    run, per = _runner(model, task, times, dt)
    try:
        batch = np.asarray(user(run, initial, n_points, batched=True))
        return [_finite(z, n_init) for z in batch]
    except eqx.EquinoxRuntimeError:
        pass
    return [_alone(run, initial[i], first[i], n_points, per) for i in range(len(first))]


# ----------------------------------------------------------------------- writing


def write_trajectories(path, trajectories, *, start_times, dt: float, labels, names,
                       times=None) -> pathlib.Path:
    r"""Write trajectories (each `(N_i, d)`) to `path` with `TrajectoryData.write` (`.csv` or
    `.npz` by its suffix): trajectory `i`, named `labels[i]`, at times
    $t_i + k\,\Delta t$, $k = 0 \dots N_i - 1$ — or at the first $N_i$ of `times` (the
    same for all: irregular data) — state columns `names`. Atomic, with the mode of every
    file a run writes (`geomlearn._files.write_atomic`)."""
    path = pathlib.Path(path)
    arrays, keep = [np.asarray(z) for z in trajectories], dict(
        labels=tuple(names), names=tuple(str(n) for n in labels))
    data = (TrajectoryData.from_arrays(arrays, dt, t0=start_times, **keep) if times is None
            else TrajectoryData.from_times(arrays, [times[:len(z)] for z in arrays], **keep))
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.stem}.") as folder:
        tmp = pathlib.Path(folder) / f"prediction{path.suffix}"
        data.write(tmp)
        write_atomic(path, tmp.read_bytes())
    return path


def status_path(out) -> pathlib.Path:
    """The status file of the prediction `out`: `<out>.status.json`."""
    out = pathlib.Path(out)
    return out.with_name(out.name + ".status.json")


def status_record(outcomes, starts: Starts, *, n_init: int, steps: int, dt: float, out,
                  times=None) -> dict:
    """What `<out>.status.json` holds: per rollout its `trajectory` name, `status`,
    `states` written and `steps` predicted, whether it is `in_file` (a trajectory of at
    least 2 states), and for a failure the `step` that failed, the `reason`, the
    `last_state` and its time `last_t` (of `times` when the rollout was made at them);
    the counts `succeeded` and `failed`."""
    rows = []
    for outcome, label, t0 in zip(outcomes, starts.labels, starts.times):
        n = outcome.states.shape[0]
        row = {"trajectory": str(label), "status": outcome.status, "states": n,
               "steps": n - n_init, "in_file": n >= 2}
        if outcome.status != "ok":
            row.update(step=outcome.step, reason=outcome.reason,
                       last_state=np.asarray(outcome.states[-1], np.float64).tolist(),
                       last_t=float(t0 + dt * (n - 1) if times is None else times[n - 1]))
        rows.append(row)
    failed = sum(o.status != "ok" for o in outcomes)
    return {"prediction": pathlib.Path(out).name, "steps": steps, "dt": dt,
            "succeeded": len(outcomes) - failed, "failed": failed, "trajectories": rows}


# ----------------------------------------------------------------------- the command


def _run_dt(folder, run) -> float:
    dt = run.get("dt")
    if dt is None and (folder / "metrics.json").exists():
        dt = read_run_json(folder / "metrics.json").get("dt")
    if dt is None:
        raise CLIError(f"{folder}: neither run.json nor metrics.json records the time step dt")
    return float(dt)


def _checked_out(out) -> pathlib.Path:
    path = pathlib.Path(out)
    if path.suffix.lower() not in OUT_SUFFIXES:
        raise CLIError(f"--out {out}: expected a file ending in .csv or .npz")
    user(check_writable, status_path(path), what="status file")
    return user(check_writable, path, what="output file")


def _task(model, options: TrainOptions, dt):
    """`(task, n_init, state shape)` of the run's rollout (window length and prediction
    window as trained; the run's `dt` for a model that needs a step size)."""
    try:
        task = model.task(**options.task_options(), data_dt=dt)
        return task, model.n_initial_points(task), model.state_shape(task)
    except (ValueError, TypeError, AttributeError) as e:
        raise CLIError(f"cannot roll out {type(model).__name__}: {e}") from None


def _run_labels(run, dim: int):
    """The run's state column names (`run.json`'s `labels`), or `None` when it records
    none of the model's dimension."""
    labels = tuple(str(n) for n in run.get("labels") or ())
    return labels if len(labels) == dim else None


def _failed(why: str) -> int:
    """Exit status 1: the prediction itself failed (nothing written)."""
    print(f"geomlearn: prediction failed: {why}; nothing written", file=sys.stderr)
    return 1


def _report(out, outcomes, starts: Starts, *, n_init, steps, times, dt, names, headline) -> int:
    """Write every rollout of at least 2 states (at `times`, when given) and the status
    file; print the summary; the exit status (0, `SOME_FAILED`, or 1 when no rollout got
    past its first state)."""
    kept = [i for i, o in enumerate(outcomes) if o.states.shape[0] >= 2]
    failed = [(starts.labels[i], o) for i, o in enumerate(outcomes) if o.status != "ok"]
    if not kept:
        label, outcome = failed[0]
        return _failed(f"no rollout got past its initial state (initial state {label!r}: "
                       f"{outcome.reason})")
    write_trajectories(out, [outcomes[i].states for i in kept], start_times=starts.times[kept],
                       dt=dt, labels=[starts.labels[i] for i in kept], names=names,
                       times=times)
    status = write_json(status_path(out), status_record(
        outcomes, starts, n_init=n_init, steps=steps, dt=dt, out=out, times=times))
    verdict = ("all succeeded" if not failed else
               f"{len(outcomes) - len(failed)} succeeded, {len(failed)} failed")
    print(f"{headline}; {verdict}; wrote {out} and {status.name}")
    if not failed:
        return 0
    listed = "; ".join(f"{label!r}: {o.reason}" for label, o in failed[:3])
    print(f"geomlearn: {len(failed)} of {len(outcomes)} rollouts failed, each written up to its "
          f"last finite state (statuses in {status.name}): {listed}"
          + ("; …" if len(failed) > 3 else ""), file=sys.stderr)
    return SOME_FAILED


def predict(args) -> int:
    """`geomlearn predict`: the trajectories of a run's model from given initial states
    (at the times of `--times`, when given); exit status 0 when every rollout succeeded,
    `SOME_FAILED` when some failed."""
    check_steps_or_times(args)
    out = _checked_out(args.out)
    folder, model, run = load_run(args.dir, need_run=True)
    options = user(TrainOptions.from_run, run)
    dt = _run_dt(folder, run)
    task, n_init, shape = _task(model, options, dt)
    times = times_for(args.times, model, task, n_init)
    steps = args.steps if times is None else times.shape[0] - n_init
    expected = _run_labels(run, model.dim)
    starts = read_initial(args, n_init, expected, irregular=options.irregular)
    d = starts.states.shape[-1]
    if d != model.dim:
        raise CLIError(f"the initial states have {d} components, but the run's {type(model).__name__} "
                       f"takes states of dimension {model.dim}")
    first = starts.states.astype(run.get("dtype") or ("float64" if options.x64 else "float32"))
    initial = first[:, 0] if len(shape) == 1 else first
    started = time.perf_counter()
    outcomes = roll_out(model, initial, first, n_init + steps, task, times=times, dt=dt)
    at = (f"at the {times.shape[0]} times of {args.times} (nominal dt={dt:g})"
          if times is not None else f"of {steps} steps (dt={dt:g})")
    headline = (f"geomlearn predict: {type(model).__name__}, {len(outcomes)} rollouts {at} "
                f"in {time.perf_counter() - started:.3g} s")
    return _report(out, outcomes, starts, n_init=n_init, steps=steps, times=times, dt=dt,
                   names=expected or state_names(None, d), headline=headline)
