r"""Reading and writing trajectory files: `.npz` and `.csv` (ASE's `.traj`: `_ase`).

A reader returns `Parts` — NumPy arrays and the metadata — and `TrajectoryData` builds
itself from them, so that every format goes through the same checks. Every error is a
one-line `ValueError` that starts with the file's path and names the trajectory (and
for CSV the line) and what was expected.

**`.npz`**

- `states` `(N, T, d)` and `dt` (what `TrajectoryData.save` writes), or
- `traj_0, traj_1, …` each `(T_i, d)`, and `dt` (a scalar) or `t_0, t_1, …` (the
  times of each trajectory; with `dt` too, they must agree); optional `t0` `(N,)` start
  times, `columns` `(d,)` and `trajectories` `(N,)` names (strings), `format_version`.

**`.csv`** — a header, then one row per state: a `trajectory` column (any label), a `t`
column and the state columns; the rows of a trajectory in time order.

The state columns (of a CSV file, or named by an `.npz`'s `columns`) are read by name,
positions first (`geomlearn.data._columns`).

The time step must be the same, to a relative $10^{-6}$, between all consecutive rows of
all trajectories of a file — unless the reader is asked for `irregular` data: then the
times a file stores (the CSV `t` column; an `.npz`'s `t_0, t_1, …`, when every
trajectory has one) are returned per row (`Parts.times`), and `TrajectoryData` checks
that they increase strictly. Irregular data are written with their times: `t_i` without
`dt` (`.npz`), the `t` column to 17 significant digits (`.csv`).
"""

from __future__ import annotations

import csv
import os
import re
import zipfile
from typing import NamedTuple

import numpy as np

from ._columns import NOT_STATE, column_layout, warn_layout

__all__ = ["Parts", "read_parts", "write_npz", "write_csv", "save_states", "load_states",
           "step_of", "state_columns", "file_columns", "layout_of", "FORMAT_VERSION",
           "STEP_RTOL", "IRREGULAR_HINT"]

FORMAT_VERSION = 1
#: Relative tolerance on the uniformity of the time step within a file.
STEP_RTOL = 1e-6
#: The end of the message that refuses a non-uniform time step.
IRREGULAR_HINT = "(pass irregular=True, or --irregular at the command line, to keep per-row times)"

_TRAJ = re.compile(r"traj_(\d+)\Z")
_TIME = re.compile(r"t_(\d+)\Z")


class Parts(NamedTuple):
    """What a reader found: per-trajectory arrays `(T_i, d)`, the time step, the start
    times `(N,)`, the column and trajectory names (or `None`), the particles' masses
    (an ASE trajectory's; else `None`) and, for irregular data, the times of each
    trajectory's rows (else `None`)."""

    arrays: list
    dt: float
    t0: np.ndarray
    labels: tuple | None
    names: tuple | None
    masses: np.ndarray | None = None
    times: list | None = None


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _who(names, i: int) -> str:
    if names is None or names[i] == str(i):
        return f"trajectory {i}"
    return f"trajectory {names[i]!r}"


# ------------------------------------------------------------------------- times


def step_of(times_list, names, where: str, hint: str = "") -> tuple[float, np.ndarray]:
    """`(dt, t0)` from the time arrays of all trajectories; `ValueError` naming the first
    trajectory whose steps are not the common step (to `STEP_RTOL`), ending with `hint`
    when one is given."""
    longest = max(range(len(times_list)), key=lambda i: len(times_list[i]))
    ref = np.asarray(times_list[longest], dtype=np.float64)
    dt = float((ref[-1] - ref[0]) / (len(ref) - 1))
    dt = float(f"{dt:.12g}") if np.isfinite(dt) else dt  # 0.1, not 0.09999999999999999
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"{where}{_who(names, longest)}: times must increase (rows in time "
                         f"order), got t from {ref[0]:g} to {ref[-1]:g}")
    t0 = np.empty(len(times_list))
    for i, times in enumerate(times_list):
        t = np.asarray(times, dtype=np.float64)
        if not np.isfinite(t).all():
            raise ValueError(f"{where}{_who(names, i)}: a time is not finite; expected "
                             "finite times")
        steps = np.diff(t)
        slack = STEP_RTOL * dt + 8 * np.finfo(np.float64).eps * np.abs(t[1:])
        bad = np.flatnonzero(np.abs(steps - dt) > slack)
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"{where}{_who(names, i)}: the time step from t = {t[k]:.10g} to "
                f"{t[k + 1]:.10g} is {steps[k]:.10g}, expected {dt:.10g} (time steps must be "
                f"uniform within the file to a relative {STEP_RTOL:g}, rows in time order)"
                + (f" {hint}" if hint else ""))
        t0[i] = t[0]
    return dt, t0


# -------------------------------------------------------------------------- .npz


def _strings(archive, key, count, what, where):
    if key not in archive.files:
        return None
    value = archive[key]
    if value.ndim != 1 or value.shape[0] != count or value.dtype.kind not in "US":
        raise ValueError(f"{where}'{key}' must hold {count} {what} (strings), got an array of "
                         f"shape {value.shape} and dtype {value.dtype}")
    return tuple(str(v) for v in value)


def _start_times(archive, count, where):
    if "t0" not in archive.files:
        return np.zeros(count)
    t0 = np.asarray(archive["t0"], np.float64)
    if t0.shape != (count,) or not np.isfinite(t0).all():
        raise ValueError(f"{where}'t0' has shape {t0.shape}; expected ({count},) finite "
                         "start times, one per trajectory")
    return t0


def _npz_ragged(archive, where, irregular):
    files = archive.files
    numbers = sorted(int(m.group(1)) for f in files if (m := _TRAJ.match(f)))
    if numbers != list(range(len(numbers))):
        missing = next(i for i in range(len(numbers) + 1) if i not in numbers)
        raise ValueError(f"{where}traj_{missing} is missing; expected traj_0, traj_1, … "
                         "numbered without gaps")
    keys = [f"traj_{i}" for i in numbers]
    arrays = []
    for i, key in enumerate(keys):
        a = archive[key]
        if a.ndim != 2:
            raise ValueError(f"{where}{key} has shape {a.shape}; expected (T, d) "
                             "(one row per state)")
        arrays.append(a)
    times = [f"t_{i}" for i in range(len(keys))]
    given = [i for i, t in enumerate(times) if t in files]
    if "dt" not in files and len(given) < len(times):
        absent = next(t for t in times if t not in files)
        raise ValueError(f"{where}needs 'dt' (a scalar) or a time array per trajectory; "
                         f"{absent} is missing")
    for i in given:
        if archive[times[i]].shape != (arrays[i].shape[0],):
            raise ValueError(f"{where}{times[i]} has shape {archive[times[i]].shape}; expected "
                             f"({arrays[i].shape[0]},), one time per row of traj_{i}")
    if irregular and len(given) == len(times):  # a time per row: checked by TrajectoryData
        return arrays, None, None, [archive[t] for t in times]
    if "dt" not in files:
        dt, t0 = step_of([archive[t] for t in times], None, where, IRREGULAR_HINT)
        return arrays, dt, t0, None
    dt, t0 = float(archive["dt"]), _start_times(archive, len(keys), where)
    if given:
        first = _agree(dt, t0, [archive[times[i]] for i in given], given, "t0" in files, where)
        t0[given] = first
    return arrays, dt, t0, None


def _agree(dt, t0, times, which, has_t0, where) -> np.ndarray:
    """The first time of each of `times` (those of the trajectories `which`); `ValueError`
    when their step disagrees with `dt` (to `STEP_RTOL`) or, when the file has them, their
    first times with the start times `t0`."""
    step, first = step_of(times, [str(i) for i in which], where, IRREGULAR_HINT)
    if not abs(step - dt) <= STEP_RTOL * abs(dt):
        raise ValueError(f"{where}'dt' is {dt:.10g} but the times t_0, t_1, … have the step "
                         f"{step:.10g}; give one of them, or make them agree")
    bad = [k for k, i in enumerate(which) if has_t0 and not np.isclose(first[k], t0[i])]
    if bad:
        i = which[bad[0]]
        raise ValueError(f"{where}'t0' starts trajectory {i} at {t0[i]:.10g} but t_{i} "
                         f"starts at {first[bad[0]]:.10g}; give one of them, or make them agree")
    return first


def _read_npz(path, where, irregular=False) -> Parts:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{where}cannot read it as a .npz archive ({_one_line(e)})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{where}is a single .npy array, not a .npz archive; expected "
                         "'states' and 'dt', or traj_0, traj_1, … with dt or t_0, t_1, …")
    with archive:
        files = archive.files
        if not files:
            raise ValueError(f"{where}the file is empty; expected 'states' and 'dt', or "
                             "traj_0, traj_1, … with dt or t_0, t_1, …")
        version = int(archive["format_version"]) if "format_version" in files else 1
        if version > FORMAT_VERSION:
            raise ValueError(f"{where}has format version {version}; this geomlearn reads "
                             f"up to {FORMAT_VERSION}")
        try:
            if "states" in files and "dt" in files:
                states = archive["states"]
                if states.ndim != 3:
                    raise ValueError(f"{where}'states' has shape {states.shape}; expected "
                                     "(n_trajectories, n_steps + 1, dim)")
                arrays, dt = list(states), float(archive["dt"])
                t0, times = _start_times(archive, len(arrays), where), None
            elif any(_TRAJ.match(f) for f in files):
                arrays, dt, t0, times = _npz_ragged(archive, where, irregular)
            else:
                raise ValueError(f"{where}expected 'states' and 'dt' (TrajectoryData.save) "
                                 f"or traj_0, traj_1, … with dt or t_0, t_1, …; found "
                                 f"{sorted(files)}")
            labels = _strings(archive, "columns", arrays[0].shape[-1], "column names", where)
            names = _strings(archive, "trajectories", len(arrays), "trajectory names", where)
        except (OSError, EOFError, zipfile.BadZipFile) as e:
            raise ValueError(f"{where}cannot read it as a .npz archive ({_one_line(e)})") \
                from None
        except ValueError as e:
            if str(e).startswith(where):
                raise
            raise ValueError(f"{where}cannot read it as a .npz archive ({_one_line(e)}); "
                             "expected numeric arrays") from None
    return Parts(arrays, dt, t0, labels, names, times=times)


def write_npz(path, arrays, dt, t0, labels, names, times=None) -> None:
    """`traj_i`, `dt` (or, with `times`, `t_i` instead), `t0`, `columns`, `trajectories`,
    `format_version`."""
    entries = {f"traj_{i}": np.asarray(a) for i, a in enumerate(arrays)}
    if times is None:
        entries["dt"] = np.asarray(dt, np.float64)
    else:
        entries.update({f"t_{i}": np.asarray(t, np.float64) for i, t in enumerate(times)})
    np.savez(path, **entries, t0=np.asarray(t0, np.float64),
             columns=np.asarray(labels, dtype=str), trajectories=np.asarray(names, dtype=str),
             format_version=np.asarray(FORMAT_VERSION))


# -------------------------------------------------------------------------- .csv


def _header(path, where):
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            line = f.readline()
            has_rows = any(row.strip() for row in f)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}cannot read it ({_one_line(e)})") from None
    if not line.strip():
        raise ValueError(f"{where}the file is empty; expected a header 'trajectory,t,q1,…,p1,…' "
                         "and one row per state")
    header = [h.strip() for h in next(csv.reader([line.rstrip("\r\n")]))]
    if not has_rows:
        raise ValueError(f"{where}has a header but no rows; expected one row per state")
    return header


def state_columns(header, q_columns, p_columns, where) -> list[int]:
    """Indices of the state columns in `header`: `q_columns` then `p_columns`, or the
    columns chosen by name (`geomlearn.data._columns`)."""
    return list(column_layout(header, q_columns, p_columns, where=where).indices)


def _load_columns(path, where, cols, dtype):
    try:
        return np.loadtxt(path, delimiter=",", skiprows=1, usecols=cols, dtype=dtype,
                          comments=None, quotechar='"', ndmin=1 if dtype is str else 2,
                          encoding="utf-8-sig")
    except (ValueError, OSError, UnicodeDecodeError) as e:
        message = _one_line(e).replace("at row ", "at data row ")
        raise ValueError(f"{where}cannot read the rows ({message}); expected numbers in the "
                         "t and state columns of every row") from None


def _group(labels):
    """Row order that groups trajectories (in order of first appearance, rows kept in
    file order), the group sizes and the trajectory names."""
    uniq, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(uniq))
    order = np.argsort(rank[inverse], kind="stable")
    names = tuple(str(n) for n in uniq[np.argsort(first)])
    sizes = np.bincount(rank[inverse], minlength=len(uniq))
    return order, sizes, names


def _read_csv(path, where, q_columns, p_columns, irregular=False) -> Parts:
    header = _header(path, where)
    for required in ("trajectory", "t"):
        if required not in header:
            raise ValueError(f"{where}missing column {required!r}; expected a header "
                             f"'trajectory,t,<state columns>', got {','.join(header)}")
    layout = column_layout(header, q_columns, p_columns, where=where)
    warn_layout(layout, where, stacklevel=5)
    cols = list(layout.indices)
    if not cols:
        raise ValueError(f"{where}has no state columns; expected 'trajectory,t' followed by "
                         "the q columns, then the p columns")
    numbers = _load_columns(path, where, [header.index("t")] + cols, np.float64)
    labels = _load_columns(path, where, header.index("trajectory"), str)
    bad = ~np.isfinite(numbers)
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        column = "t" if col == 0 else header[cols[col - 1]]
        raise ValueError(f"{where}data row {row + 1} (trajectory {str(labels[row])!r}) has "
                         f"{numbers[row, col]} in column {column!r}; expected a finite number")
    order, sizes, names = _group(labels)
    numbers = numbers[order]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    pieces = [numbers[bounds[i]:bounds[i + 1]] for i in range(len(sizes))]
    for i, piece in enumerate(pieces):
        if piece.shape[0] < 2:
            raise ValueError(f"{where}{_who(names, i)} has 1 row; expected at least 2 states "
                             "per trajectory")
    labels = tuple(header[c] for c in cols)
    if irregular:  # a time per row: checked by TrajectoryData
        return Parts([p[:, 1:] for p in pieces], None, None, labels, names,
                     times=[p[:, 0] for p in pieces])
    dt, t0 = step_of([piece[:, 0] for piece in pieces], names, where, IRREGULAR_HINT)
    return Parts([piece[:, 1:] for piece in pieces], dt, t0, labels, names)


def _quoted(label: str) -> str:
    if any(c in label for c in ',"\n\r') or label != label.strip():
        label = '"' + label.replace('"', '""') + '"'
    return label


def write_csv(path, arrays, dt, t0, labels, names, times=None) -> None:
    """A header `trajectory,t,<labels>` and one row per state; the times `t0 + k dt`
    (15 significant digits), or `times` (per trajectory, 17 significant digits)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(",".join(_quoted(s) for s in ("trajectory", "t", *labels)) + "\n")
        for i, (a, start, name) in enumerate(zip(arrays, t0, names)):
            a = np.asarray(a)
            digits = 9 if a.dtype.itemsize <= 4 else 17
            t = start + dt * np.arange(a.shape[0], dtype=np.float64) if times is None \
                else np.asarray(times[i], np.float64)
            block = np.concatenate([t[:, None], a.astype(np.float64)], axis=1)
            time_format = ",%.15g" if times is None else ",%.17g"
            fmt = _quoted(name).replace("%", "%%") + time_format + f",%.{digits}g" * a.shape[1]
            np.savetxt(f, block, fmt=fmt)


# ------------------------------------------------------------------------- reading


def read_parts(path, *, q_columns=None, p_columns=None, irregular=False) -> Parts:
    """The `Parts` of a `.npz` or `.csv` file (chosen by the suffix); with `irregular`
    the times of every row when the file stores them."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    where = f"{os.fspath(path)}: "
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if not os.path.isfile(path):
        why = "no such file" if not os.path.exists(path) else "not a file"
        raise ValueError(f"{where}cannot read it ({why})")
    if suffix == ".csv":
        return _read_csv(path, where, q_columns, p_columns, irregular)
    if suffix != ".npz":
        raise ValueError(f"{where}unknown file type {suffix or '(no suffix)'!r}; expected "
                         ".npz or .csv (or an ASE trajectory, .traj)")
    parts = _read_npz(path, where, irregular)
    if parts.labels is None:
        if q_columns is not None or p_columns is not None:
            raise ValueError(f"{where}has no column names ('columns'), so q_columns and "
                             "p_columns cannot select columns")
        return parts
    layout = column_layout(parts.labels, q_columns, p_columns, where=where, skip=())
    warn_layout(layout, where, stacklevel=4)
    cols = list(layout.indices)
    if cols != list(range(len(parts.labels))):
        parts = parts._replace(arrays=[a[:, cols] for a in parts.arrays],
                               labels=tuple(parts.labels[c] for c in cols))
    return parts


def file_columns(path) -> tuple[str, ...] | None:
    """The names of the columns of the file `path` that can be state components (a CSV
    header but `trajectory` and `t`; an `.npz`'s `columns`), or `None` when it names
    none; `ValueError` for a CSV file without a header."""
    where = f"{os.fspath(path)}: "
    if os.path.splitext(os.fspath(path))[1].lower() == ".csv":
        return tuple(h for h in _header(path, where) if h not in NOT_STATE)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if "columns" not in archive.files or archive["columns"].dtype.kind not in "US":
                return None
            return tuple(str(c).strip() for c in archive["columns"].reshape(-1))
    except (OSError, ValueError, EOFError, AttributeError, zipfile.BadZipFile):
        return None  # reading the file says what is wrong with it


def layout_of(path, q_columns=None, p_columns=None):
    """The `ColumnLayout` that `read_parts` reads the file `path` with (its indices: of the
    CSV header, or of the `.npz`'s `columns`); `None` for an `.npz` that names no columns
    (its state is its arrays' columns)."""
    where = f"{os.fspath(path)}: "
    if os.path.splitext(os.fspath(path))[1].lower() == ".csv":
        return column_layout(_header(path, where), q_columns, p_columns, where=where)
    names = file_columns(path)
    if names is None:
        return None
    return column_layout(names, q_columns, p_columns, where=where, skip=())


def save_states(path, states: np.ndarray, dt: float) -> None:
    """`states` `(N, T, d)`, `dt` and `format_version` (what `TrajectoryData.save` writes)."""
    np.savez(path, states=states, dt=np.asarray(dt, dtype=np.float64),
             format_version=np.asarray(FORMAT_VERSION))


def load_states(path) -> tuple[np.ndarray, float]:
    """`(states, dt)` of a file written by `save_states`; `ValueError` when the entries are
    missing or the format version is newer."""
    with np.load(path, allow_pickle=False) as archive:
        missing = {"states", "dt"} - set(archive.files)
        if missing:
            raise ValueError(
                f"{os.fspath(path)!r} is not a TrajectoryData file: missing "
                f"{sorted(missing)} (found {sorted(archive.files)})"
            )
        version = int(archive["format_version"]) if "format_version" in archive.files else 1
        if version > FORMAT_VERSION:
            raise ValueError(f"{os.fspath(path)!r} has format version {version}; this "
                             f"geomlearn reads up to {FORMAT_VERSION}")
        return archive["states"], float(archive["dt"])
