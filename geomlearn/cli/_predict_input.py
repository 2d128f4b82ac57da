"""The input of `geomlearn predict`: the initial states, read from a `.csv` or `.npz` by
the run's column names (`read_initial`), and the times of `--times FILE` (`read_times`)."""

from __future__ import annotations

import csv
import dataclasses
import pathlib

import numpy as np

from .._validation import first_not_increasing
from ._errors import CLIError, user
from ._own_data import read_as_run

__all__ = ["Starts", "read_initial", "read_times", "OUT_SUFFIXES", "check_steps_or_times",
           "rows_per_step", "times_for"]

#: The file formats of initial states and predictions.
OUT_SUFFIXES = (".csv", ".npz")


@dataclasses.dataclass(frozen=True)
class Starts:
    """Initial states of rollouts: `states` `(B, n, d)` (the first `n` states of each),
    `times` `(B,)` (the time of each first state) and `labels` (a name per rollout)."""

    states: np.ndarray
    times: np.ndarray
    labels: tuple


def _csv_rows(path: pathlib.Path):
    """`(header, rows)` of a CSV file with a header (blank lines skipped)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    if not rows:
        raise CLIError(f"--initial {path}: the file is empty (expected a header and rows of states)")
    if len(rows) < 2:
        raise CLIError(f"--initial {path}: a header but no states")
    return [h.strip() for h in rows[0]], rows[1:]


def _by_name(path, received, expected) -> list[int]:
    """Where each of the run's state columns `expected` is among the file's `received`;
    `CLIError` naming both unless they are the same names (in any order)."""
    missing = [n for n in expected if n not in received]
    extra = [n for n in received if n not in expected]
    if missing or extra or len(received) != len(expected):
        what = "; ".join([f"missing {', '.join(missing)}"] * bool(missing)
                         + [f"unexpected {', '.join(extra)}"] * bool(extra)) or "a name twice"
        raise CLIError(f"--initial {path}: the state columns {', '.join(received)} "
                       f"({len(received)} components) are not the run's {', '.join(expected)} "
                       f"({len(expected)} components): {what}; name them as the run does, in "
                       "any order, or map them with --q-columns/--p-columns")
    return [received.index(n) for n in expected]


def _state_columns(path, header, named, expected):
    """Indices of the state columns: the named ones, else every column but
    `trajectory`/`t`, ordered by name as the run's state `expected` (when known)."""
    lower = [h.lower() for h in header]
    if named:
        missing = [n for n in named if n not in header]
        if missing:
            raise CLIError(f"--initial {path}: no column {missing[0]!r} (columns: {', '.join(header)})")
        return [header.index(n) for n in named]
    cols = [i for i, h in enumerate(lower) if h not in ("trajectory", "t")]
    if expected is None:
        return cols
    return [cols[j] for j in _by_name(path, [header[i] for i in cols], expected)]


def _initial_from_csv(path, n_init: int, named, expected=None) -> Starts:
    header, rows = _csv_rows(path)
    lower = [h.lower() for h in header]
    label_col = lower.index("trajectory") if "trajectory" in lower else None
    t_col = lower.index("t") if "t" in lower else None
    cols = _state_columns(path, header, named, expected)
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


def _initial_from_npz(path, n_init: int, expected=None) -> Starts:
    with np.load(path, allow_pickle=False) as archive:
        if "states" not in archive.files:
            raise CLIError(f"--initial {path}: no array 'states' (found {sorted(archive.files)}); "
                           "use --from-data for a trajectory file")
        states = np.asarray(archive["states"], dtype=np.float64)
        times = np.asarray(archive["t"], dtype=np.float64) if "t" in archive.files else None
        columns = [str(c) for c in archive["columns"]] if "columns" in archive.files else None
    states = states[None] if states.ndim == 1 else states
    states = states[:, None] if states.ndim == 2 else states
    if states.ndim != 3 or states.shape[1] < n_init or states.shape[0] < 1:
        raise CLIError(f"--initial {path}: states has shape {states.shape}; expected (B, d), or "
                       f"(B, T, d) with T >= {n_init} for this run's model")
    if columns is not None and len(columns) != states.shape[-1]:
        raise CLIError(f"--initial {path}: columns names {len(columns)} components, states has "
                       f"{states.shape[-1]}")
    if columns is not None and expected is not None:
        states = states[..., _by_name(path, columns, expected)]
    if not np.all(np.isfinite(states)):
        raise CLIError(f"--initial {path}: states has a non-finite value")
    times = np.zeros(states.shape[0]) if times is None else np.broadcast_to(times, states.shape[:1])
    return Starts(states[:, :n_init], np.array(times), tuple(range(states.shape[0])))


def _initial_from_data(path, n_init: int, args, expected=None, *,
                       irregular: bool = False) -> Starts:
    data = read_as_run(path, expected, q_columns=args.q_columns, p_columns=args.p_columns,
                       flag="--from-data", irregular=irregular)
    arrays = [np.asarray(a) for a in data.trajectories]
    for name, a in zip(data.names, arrays):
        if a.shape[0] < n_init:
            raise CLIError(f"--from-data {path}: trajectory {name!r} has {a.shape[0]} states; "
                           f"the run's model starts from {n_init} consecutive states")
    states = np.stack([a[:n_init] for a in arrays]).astype(np.float64)
    return Starts(states, data.t0, tuple(data.names))


def read_initial(args, n_init: int, expected=None, *, irregular: bool = False) -> Starts:
    """The initial states that `--initial` or `--from-data` name, their columns read by
    name as the run's state `expected` (a tuple of names; `None`: by position) unless
    `--q-columns`/`--p-columns` name them (`CLIError` for a missing file, an unknown
    format, columns that are not the run's, or states that cannot start the model);
    `irregular`: a `--from-data` file is read as the run's (`train --irregular`)."""
    path = pathlib.Path(args.initial if args.initial is not None else args.from_data)
    flag = "--initial" if args.initial is not None else "--from-data"
    if not path.is_file():
        raise CLIError(f"{flag} {path}: no such file")
    if args.from_data is not None and path.suffix.lower() == ".traj":  # an ASE trajectory
        return _initial_from_data(path, n_init, args, expected, irregular=irregular)
    if path.suffix.lower() not in OUT_SUFFIXES:
        allowed = ".csv or .npz file" + (" (or an ASE .traj)" if args.from_data else "")
        raise CLIError(f"{flag} {path}: expected a {allowed}, got {path.suffix or 'no suffix'!r}")
    if args.from_data is not None:
        return _initial_from_data(path, n_init, args, expected, irregular=irregular)
    if path.suffix.lower() == ".csv":
        named = [c for part in (args.q_columns or []) + (args.p_columns or []) for c in part.split(",") if c]
        return _initial_from_csv(path, n_init, named, expected)
    return user(_initial_from_npz, path, n_init, expected)


def _text_times(path: pathlib.Path) -> tuple[list, list]:
    """`(times, rows)` of a text file of one time a line (blank lines and `#` comments
    skipped); `rows` names the line of each."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CLIError(f"--times {path}: cannot read it as text ({' '.join(str(e).split())}); "
                       "expected one time per line, or a .npy array") from None
    times, rows = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        field = line.split("#", 1)[0].strip()
        if not field:
            continue
        try:
            times.append(float(field))
        except ValueError:
            raise CLIError(f"--times {path}: line {number} is not a number ({field[:40]!r}); "
                           "expected one time per line") from None
        rows.append(f"line {number}")
    return times, rows


def _npy_times(path: pathlib.Path) -> tuple[np.ndarray, list]:
    """`(times, rows)` of a `.npy` 1-D array of real numbers; `rows` names each index."""
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise CLIError(f"--times {path}: cannot read it as a .npy array "
                       f"({' '.join(str(e).split())})") from None
    real = np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)
    if values.ndim != 1 or not real:
        raise CLIError(f"--times {path}: expected a 1-D array of real times, got shape "
                       f"{values.shape} of {values.dtype}")
    return values, [f"index {i}" for i in range(values.shape[0])]


def read_times(path) -> np.ndarray:
    """The times of `geomlearn predict --times FILE`, float64 `(n,)`: a `.npy` 1-D array,
    or (any other suffix) a text file of one time a line, blank lines and `#` comments
    skipped. `CLIError` for a missing or unreadable file, a value that is not a number or
    not finite, fewer than 2 times, or times that do not increase strictly (naming the
    row: the line of a text file, the index of an array)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise CLIError(f"--times {path}: no such file")
    read = _npy_times if path.suffix.lower() == ".npy" else _text_times
    values, rows = read(path)
    times = np.asarray(values, dtype=np.float64).reshape(-1)
    if times.shape[0] < 2:
        raise CLIError(f"--times {path}: {times.shape[0]} time(s); expected the initial "
                       "state's time and at least one time to predict at")
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        raise CLIError(f"--times {path}: {rows[bad[0]]} is not finite ({times[bad[0]]})")
    i = first_not_increasing(times)
    if i is not None:
        raise CLIError(f"--times {path}: the times must increase strictly, but {rows[i + 1]} "
                       f"({times[i + 1]:.10g}) does not come after {rows[i]} ({times[i]:.10g})")
    return times


def rows_per_step(model, task) -> int:
    """The rows a step of the rollout appends: a window model's prediction window, else 1."""
    return (task.prediction_window or 1) if model.n_initial_points(task) > 1 else 1


def check_steps_or_times(args) -> None:
    """`CLIError` unless exactly one of `--steps N` (N ≥ 1) and `--times FILE` is given."""
    if args.steps is not None and args.times is not None:
        raise CLIError("--times and --steps exclude each other: the times set the number of "
                       "steps (one per time after the initial state's)")
    if args.steps is None and args.times is None:
        raise CLIError("give --steps N (steps after the initial state) or --times FILE (the "
                       "times of the rollout's rows)")
    if args.steps is not None and args.steps < 1:
        raise CLIError(f"--steps must be at least 1, got {args.steps}")


def times_for(path, model, task, n_init: int):
    """The times of `--times FILE` for the run's `model` (`None` without the flag);
    `CLIError` for a model that does not roll out at given times, or a number of times
    that does not fit its initial states and the rows each step appends."""
    if path is None:
        return None
    name = type(model).__name__
    if not model.reads_times:
        raise CLIError(f"--times: {name} does not roll out at given times; the feed-forward "
                       "and transformer integrators do")
    times = read_times(path)
    per = rows_per_step(model, task)
    extra = times.shape[0] - n_init
    if extra < 1 or extra % per:
        raise CLIError(
            f"--times {path}: {times.shape[0]} times; the run's {name} starts from {n_init} "
            f"state(s), whose times come first, and " + (
                f"appends {per} rows per step, so the times after them must be a positive "
                f"multiple of {per}, got {extra}" if per > 1 else "needs a time after them"))
    return times
