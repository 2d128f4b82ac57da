"""`geomlearn predict`: roll a trained model out from initial states, write the trajectories.

The initial states come from a trajectory file (`--from-data`: each trajectory's first
state, or its first `T` states for a transformer) or from a table of states
(`--initial`: a `.csv` whose rows are states — grouped into windows by an optional
`trajectory` column — with an optional `t` column, or an `.npz` with `states` `(B, d)` or
`(B, T, d)` and optional start times `t`). All rollouts are one compiled, batched call
(`geomlearn.models` rollout, vectorised over the initial states). The output has the
formats `geomlearn.TrajectoryData.read` reads, chosen by the suffix of `--out`: `.csv`
(`trajectory`, `t`, then the state columns) or `.npz` (`traj_i`, `t_i`); its time column
continues from each initial state's time with the run's time step. It is written
atomically, and only after everything has been checked and computed.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
import re
import sys
import tempfile
import time

import equinox as eqx
import numpy as np

from .._files import check_writable
from ..data import TrajectoryData
from ..models._base import model_rollout
from ._errors import CLIError, user
from ._options import TrainOptions
from ._own_data import read_trajectories, state_names
from ._runs import load_run, read_run_json

__all__ = ["predict", "predict_arguments", "Starts", "read_initial", "write_trajectories"]

OUT_SUFFIXES = (".csv", ".npz")


@dataclasses.dataclass(frozen=True)
class Starts:
    """Initial states of rollouts: `states` `(B, n, d)` (the first `n` states of each),
    `times` `(B,)` (the time of each first state) and `labels` (a name per rollout)."""

    states: np.ndarray
    times: np.ndarray
    labels: tuple


def predict_arguments(p) -> None:
    """The options of `geomlearn predict`."""
    p.add_argument("dir", metavar="RUN", help="a folder written by geomlearn train")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--initial", metavar="PATH", help="a .csv of states (rows; an optional "
                        "trajectory column groups a transformer's T rows, an optional t column "
                        "gives the start time) or an .npz with states (B, d) or (B, T, d)")
    source.add_argument("--from-data", metavar="PATH", help="a trajectory file (.npz or .csv, as "
                        "for train --data): start from each trajectory's first state(s)")
    p.add_argument("--steps", type=int, required=True, help="steps to predict after the initial state(s)")
    p.add_argument("--out", required=True, metavar="FILE", help="the output file, .csv or .npz")
    p.add_argument("--q-columns", nargs="+", default=None, metavar="NAME", help="as for train --data")
    p.add_argument("--p-columns", nargs="+", default=None, metavar="NAME", help="as for train --data")


# ----------------------------------------------------------------------- reading


def _csv_rows(path: pathlib.Path):
    """`(header, rows)` of a CSV file with a header (blank lines skipped)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    if not rows:
        raise CLIError(f"--initial {path}: the file is empty (expected a header and rows of states)")
    if len(rows) < 2:
        raise CLIError(f"--initial {path}: a header but no states")
    return [h.strip() for h in rows[0]], rows[1:]


def _state_columns(path, header, named):
    """Indices of the state columns: the named ones, or every column but `trajectory`/`t`."""
    lower = [h.lower() for h in header]
    if named:
        missing = [n for n in named if n not in header]
        if missing:
            raise CLIError(f"--initial {path}: no column {missing[0]!r} (columns: {', '.join(header)})")
        return [header.index(n) for n in named]
    return [i for i, h in enumerate(lower) if h not in ("trajectory", "t")]


def _initial_from_csv(path, n_init: int, named) -> Starts:
    header, rows = _csv_rows(path)
    lower = [h.lower() for h in header]
    label_col = lower.index("trajectory") if "trajectory" in lower else None
    t_col = lower.index("t") if "t" in lower else None
    cols = _state_columns(path, header, named)
    groups: dict = {}
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise CLIError(f"--initial {path}: line {line} has {len(row)} fields, the header {len(header)}")
        try:
            values = [float(row[i]) for i in cols] + [float(row[t_col]) if t_col is not None else 0.0]
        except ValueError:
            raise CLIError(f"--initial {path}: line {line} has a field that is not a number") from None
        if not np.all(np.isfinite(values)):
            raise CLIError(f"--initial {path}: line {line} has a non-finite value")
        label = row[label_col].strip() if label_col is not None else str(line - 2)
        groups.setdefault(label, []).append(values)
    short = [k for k, v in groups.items() if len(v) < n_init]
    if short:
        raise CLIError(f"--initial {path}: trajectory {short[0]!r} has {len(groups[short[0]])} "
                       f"state(s); the run's model starts from {n_init} consecutive states"
                       + ("" if label_col is not None else " (add a trajectory column to group rows)"))
    table = np.asarray([v[:n_init] for v in groups.values()], dtype=np.float64)
    return Starts(table[:, :, :-1], table[:, 0, -1], tuple(groups))


def _initial_from_npz(path, n_init: int) -> Starts:
    with np.load(path, allow_pickle=False) as archive:
        if "states" not in archive.files:
            raise CLIError(f"--initial {path}: no array 'states' (found {sorted(archive.files)}); "
                           "use --from-data for a trajectory file")
        states = np.asarray(archive["states"], dtype=np.float64)
        times = np.asarray(archive["t"], dtype=np.float64) if "t" in archive.files else None
    states = states[None] if states.ndim == 1 else states
    states = states[:, None] if states.ndim == 2 else states
    if states.ndim != 3 or states.shape[1] < n_init or states.shape[0] < 1:
        raise CLIError(f"--initial {path}: states has shape {states.shape}; expected (B, d), or "
                       f"(B, T, d) with T >= {n_init} for this run's model")
    if not np.all(np.isfinite(states)):
        raise CLIError(f"--initial {path}: states has a non-finite value")
    times = np.zeros(states.shape[0]) if times is None else np.broadcast_to(times, states.shape[:1])
    return Starts(states[:, :n_init], np.array(times), tuple(range(states.shape[0])))


def _initial_from_data(path, n_init: int, args) -> Starts:
    data = read_trajectories(path, q_columns=args.q_columns, p_columns=args.p_columns)
    arrays = [np.asarray(a) for a in data.trajectories]
    for name, a in zip(data.names, arrays):
        if a.shape[0] < n_init:
            raise CLIError(f"--from-data {path}: trajectory {name!r} has {a.shape[0]} states; "
                           f"the run's model starts from {n_init} consecutive states")
    states = np.stack([a[:n_init] for a in arrays]).astype(np.float64)
    return Starts(states, data.t0, tuple(data.names))


def read_initial(args, n_init: int) -> Starts:
    """The initial states that `--initial` or `--from-data` name (`CLIError` for a missing
    file, an unknown format, or states that cannot start the model)."""
    path = pathlib.Path(args.initial if args.initial is not None else args.from_data)
    flag = "--initial" if args.initial is not None else "--from-data"
    if not path.is_file():
        raise CLIError(f"{flag} {path}: no such file")
    if path.suffix.lower() not in OUT_SUFFIXES:
        raise CLIError(f"{flag} {path}: expected a .csv or .npz file, got {path.suffix or 'no suffix'!r}")
    if args.from_data is not None:
        return _initial_from_data(path, n_init, args)
    if path.suffix.lower() == ".csv":
        named = [c for part in (args.q_columns or []) + (args.p_columns or []) for c in part.split(",") if c]
        return _initial_from_csv(path, n_init, named)
    return user(_initial_from_npz, path, n_init)


# ----------------------------------------------------------------------- writing


def write_trajectories(path, trajectories, *, start_times, dt: float, labels, names) -> pathlib.Path:
    r"""Write trajectories `(B, N, d)` to `path` with `TrajectoryData.write` (`.csv` or
    `.npz` by its suffix): trajectory `i`, named `labels[i]`, at times
    $t_i + k\,\Delta t$, $k = 0 \dots N - 1$, state columns `names`. Atomic: a temporary
    file in the same folder, renamed over `path`."""
    path = pathlib.Path(path)
    data = TrajectoryData.from_arrays(list(np.asarray(trajectories)), dt, t0=start_times,
                                      labels=tuple(names), names=tuple(str(n) for n in labels))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        data.write(tmp)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    return user(check_writable, path, what="output file")


def _task(model, options: TrainOptions, dt):
    """`(task, n_init, state shape)` of the run's rollout (window length and prediction
    window as trained; the run's `dt` for a model that needs a step size)."""
    try:
        task = model.task(**options.task_options(), data_dt=dt)
        return task, model.n_initial_points(task), model.state_shape(task)
    except (ValueError, TypeError, AttributeError) as e:
        raise CLIError(f"cannot roll out {type(model).__name__}: {e}") from None


def _failed(why: str) -> int:
    """Exit status 1: the prediction itself failed (nothing written)."""
    print(f"geomlearn: prediction failed: {why}; nothing written", file=sys.stderr)
    return 1


def predict(args) -> int:
    """`geomlearn predict`: the trajectories of a run's model from given initial states."""
    if args.steps < 1:
        raise CLIError(f"--steps must be at least 1, got {args.steps}")
    out = _checked_out(args.out)
    folder, model, run = load_run(args.dir, need_run=True)
    options = user(TrainOptions.from_run, run)
    dt = _run_dt(folder, run)
    task, n_init, shape = _task(model, options, dt)
    starts = read_initial(args, n_init)
    d = starts.states.shape[-1]
    if d != model.dim:
        raise CLIError(f"the initial states have {d} components, but the run's {type(model).__name__} "
                       f"takes states of dimension {model.dim}")
    initial = starts.states.astype(run.get("dtype") or ("float64" if options.x64 else "float32"))
    initial = initial[:, 0] if len(shape) == 1 else initial
    started = time.perf_counter()
    try:
        rollout = np.asarray(user(model_rollout, model, initial, n_init + args.steps, task,
                                  batched=True))
    except eqx.EquinoxRuntimeError as e:  # e.g. an implicit step of a learned field that diverged
        found = re.search(r"EquinoxRuntimeError: (.*)", str(e))
        return _failed(f"the rollout stopped: {found.group(1) if found else 'a runtime check failed'}")
    seconds = time.perf_counter() - started
    bad = np.argwhere(~np.isfinite(rollout))
    if bad.size:
        i, k = int(bad[0][0]), int(bad[0][1])
        return _failed(f"the rollout of initial state {starts.labels[i]!r} is not finite at step {k}")
    names = tuple(run.get("labels") or ()) or state_names(None, d)
    names = names if len(names) == d else state_names(None, d)
    write_trajectories(out, rollout, start_times=starts.times, dt=dt, labels=starts.labels, names=names)
    print(f"geomlearn predict: {type(model).__name__}, {rollout.shape[0]} rollouts of {args.steps} "
          f"steps (dt={dt:g}) in {seconds:.3g} s; wrote {out}")
    return 0
