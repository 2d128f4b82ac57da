"""Training on a user's own trajectory file (`geomlearn train --data PATH`).

The file is read by `geomlearn.TrajectoryData.read`; validation trajectories are split off
by whole trajectories; a model is refused when the file's dimension does not fit it (a
canonical model needs an even dimension `2n`); `run.json` records the file's path, size
and SHA-256, so that `geomlearn evaluate` can split the same file again and notice when
it has changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import sys
import warnings

import jax
import numpy as np

from ..data import ColumnLayout, ColumnWarning, TrajectoryData, file_columns, layout_of
from ..evaluation import frame_projection
from ._errors import CLIError
from ._options import TrainOptions, column_names
from ._registry import MODELS

__all__ = ["DataFile", "OwnData", "file_record", "read_trajectories", "read_as_run",
           "state_names", "check_model_fits", "check_lengths", "split_by_trajectory",
           "from_file", "split_file", "held_out_of_run", "one_run_segments",
           "check_reads_times", "nominal_step"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataFile:
    """What the command line knows of a data file's phase space — its dimension, whether
    it can be read as canonical `z = (q, p)` (an even dimension), and the state names —
    in the place of a system for the registry's dimension checks and builders."""

    dim: int
    canonical: bool
    labels: tuple[str, ...]
    particle_dimension: int = 0


@dataclasses.dataclass(frozen=True)
class OwnData:
    """A trajectory file ready for training: `shape`, the `train` and `held_out` data, a
    one-line `description`, `record` (what `run.json` keeps about the file) and the
    `layout` of its state columns (`None`: an `.npz` that names none)."""

    shape: DataFile
    train: TrajectoryData
    held_out: TrajectoryData
    description: str
    record: dict
    layout: ColumnLayout | None = None


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def file_record(path) -> dict:
    """`{"path", "size", "sha256"}` of the file `path` (the absolute path, bytes, hex digest)."""
    path = pathlib.Path(path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(path.resolve()), "size": path.stat().st_size, "sha256": digest.hexdigest()}


def _list(names):
    return None if names is None else list(column_names(names) or ())


def read_trajectories(path, *, q_columns=None, p_columns=None,
                      irregular: bool = False) -> TrajectoryData:
    """`TrajectoryData.read(path, ...)`, with any error of the file as a one-line `CLIError`
    naming it; the reader's `ColumnWarning`s are the caller's to report (`from_file`).
    `irregular`: keep each row's time (`--irregular`); without it a file whose time step
    is not uniform is refused, the reader's message naming the flag."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ColumnWarning)
            return TrajectoryData.read(path, q_columns=_list(q_columns),
                                       p_columns=_list(p_columns), irregular=irregular)
    except (ValueError, TypeError, OSError, KeyError, ImportError) as e:  # ImportError: ASE
        message = _one_line(e)
        raise CLIError(message if str(path) in message else f"{path}: {message}") from None


def read_as_run(path, labels, *, q_columns=None, p_columns=None, flag: str = "",
                irregular: bool = False) -> TrajectoryData:
    """The trajectories of `path` with the state columns of a run, by name: the columns
    `labels` (the run's state, in its order; others ignored) of a file that names its
    columns, or `q_columns`/`p_columns` when given; by position for a file without names
    or a run without `labels`. `CLIError` naming the expected and the received columns
    when the file lacks one; `flag` prefixes messages (`--from-data`); `irregular` as for
    `read_trajectories`."""
    if q_columns is not None or p_columns is not None or not labels:
        return read_trajectories(path, q_columns=q_columns, p_columns=p_columns,
                                 irregular=irregular)
    try:
        names = file_columns(path)
    except (ValueError, OSError):
        names = None  # reading the file reports what is wrong with it
    if names is None:
        return read_trajectories(path, irregular=irregular)
    missing = [n for n in labels if n not in names]
    if missing:
        raise CLIError(f"{flag + ' ' if flag else ''}{path}: no column {missing[0]!r}: the run's "
                       f"state is {', '.join(labels)}, the file has {', '.join(names)} (name "
                       "them with --q-columns/--p-columns)")
    return read_trajectories(path, q_columns=list(labels), p_columns=(), irregular=irregular)


def state_names(data, dim: int) -> tuple[str, ...]:
    """The names of the state components: the data's (`data.labels`), or `q1 … qn, p1 …
    pn` for an even dimension and `z1 … zd` otherwise."""
    names = getattr(data, "labels", None)
    if names is not None and len(names) == dim:
        return tuple(str(n) for n in names)
    if dim % 2 == 0:
        n = dim // 2
        return tuple([f"q{i + 1}" for i in range(n)] + [f"p{i + 1}" for i in range(n)])
    return tuple(f"z{i + 1}" for i in range(dim))


def check_model_fits(spec, shape: DataFile, source) -> None:
    """`CLIError` when `spec`'s model cannot be trained on states of `shape.dim` components
    (a data file's, or a built-in system's without its clock, `_recipes.phase_space`):
    a canonical (symplectic) model needs an even dimension, and the registry's other
    dimension checks (attention heads) apply; a model whose evaluation needs the system
    (a reduction) is refused."""
    if spec.evaluation.needs_system:
        raise CLIError(
            f"cannot train {spec.name} on {source}: a model reduction is evaluated by "
            "integrating the reduced Hamiltonian system, which needs the system's Hamiltonian "
            "(data without their system have none); train it in Python with a geomlearn.systems "
            "system")
    if spec.needs_canonical and shape.dim % 2:
        raise CLIError(
            f"cannot train {spec.name} on {source}: {spec.cls.__name__} needs a canonical phase "
            f"space z = (q, p) of even dimension 2n, and the states of {source} have {shape.dim} "
            "components; use a volume-preserving model (vp-feedforward, vp-transformer) or an "
            "unconstrained one (resnet, transformer)")
    why = spec.incompatibility(shape)  # a file has no dynamics: its dimensions are checked
    if why:
        raise CLIError(f"cannot train {spec.name} on {source}: {why}")


def check_lengths(data, fit_options: dict, source) -> None:
    """`CLIError` naming the first trajectory too short for the model's samples: a window
    model needs `T + pw` states (an input window and its target), any other model 2."""
    need = fit_options.get("seq_length", 1) + (fit_options.get("prediction_window") or 1)
    for name, n in zip(data.names, data.lengths):
        if n < need:
            raise CLIError(f"{source}: trajectory {name!r} has {n} states; the model needs at least "
                           f"{need} (" + ("an input window of T states and its target shifted by "
                           "the prediction window)" if "seq_length" in fit_options else
                           "a state and the next)"))


def split_by_trajectory(data: TrajectoryData, val_fraction: float, *, seed: int, source):
    """`(train, held_out, how)`: at least one trajectory held out, chosen with `seed`;
    `CLIError` for a file with one trajectory or a fraction outside `(0, 1)`."""
    if not 0.0 < val_fraction < 1.0:
        raise CLIError(f"--val-fraction must be between 0 and 1 (exclusive), got {val_fraction}")
    n = data.n_trajectories
    if n < 2:
        raise CLIError(
            f"{source} holds {n} trajectory; training on a file needs at least 2, so that "
            "validation is on a trajectory the model has not seen")
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 11)
    try:
        train, held_out = data.split(1.0 - val_fraction, key=key)
    except (ValueError, TypeError) as e:
        raise CLIError(f"{source}: {_one_line(e)}") from None
    how = f"{train.n_trajectories} training / {held_out.n_trajectories} held-out trajectories"
    return train, held_out, how


#: The suffix of ASE trajectory files: one run of 3-D particles (`TrajectoryData.from_ase`).
_ASE_SUFFIX = ".traj"


def one_run_segments(data: TrajectoryData, source, val_fraction: float) -> TrajectoryData:
    """The one run of an ASE `.traj` file cut into `max(2, round(1 / val_fraction))`
    consecutive segments of (nearly) equal length, neighbours sharing their boundary state,
    so that the split by trajectory holds out stretches of the run the model has not seen
    and every one-step pair lies in one segment (irregular data keep their rows' times);
    other data unchanged. `CLIError` for a run too short to cut."""
    if pathlib.Path(source).suffix.lower() != _ASE_SUFFIX or data.n_trajectories != 1 \
            or not 0.0 < val_fraction < 1.0:
        return data
    n = max(2, round(1.0 / val_fraction))
    z = np.asarray(data.trajectories[0])
    if len(z) <= n:
        raise CLIError(f"{source}: its run of {len(z)} states cannot be cut into {n} segments "
                       f"for --val-fraction {val_fraction} (each needs at least 2 states)")
    bounds = np.linspace(0, len(z) - 1, n + 1).round().astype(int)
    cuts = [slice(a, b + 1) for a, b in zip(bounds[:-1], bounds[1:])]
    pieces = [z[cut] for cut in cuts]
    if data.irregular:
        t = data.row_times[0]
        return TrajectoryData.from_times(pieces, [t[cut] for cut in cuts], labels=data.labels)
    return TrajectoryData.from_arrays(pieces, data.dt, t0=data.t0[0] + data.dt * bounds[:-1],
                                      labels=data.labels)


def check_reads_times(spec) -> None:
    """`CLIError` naming the model `spec` and the models that take irregularly sampled
    data (`--irregular`): those whose class reads times (`reads_times`: the feed-forward
    and transformer integrators)."""
    if spec.cls.reads_times:
        return
    able = ", ".join(name for name, s in MODELS.items() if s.cls.reads_times)
    raise CLIError(f"--irregular: {spec.name} ({spec.cls.__name__}) cannot be trained on "
                   "irregularly sampled data; the feed-forward and transformer integrators "
                   f"can: {able}")


def nominal_step(held_out: TrajectoryData, dt) -> dict:
    """`{"dt": dt}` for irregular held-out data, evaluated at their own times in units of
    the training data's (mean) step `dt`; `{}` for regular data (their own step). `CLIError`
    when the run records no step."""
    if not held_out.irregular:
        return {}
    if dt is None:
        raise CLIError("run.json records no time step dt, the step irregular data are "
                       "evaluated in")
    return {"dt": float(dt)}


def _layout(path, options: TrainOptions) -> ColumnLayout | None:
    """The layout of the state columns that `read_trajectories` read from `path`."""
    try:
        return layout_of(path, _list(options.q_columns), _list(options.p_columns))
    except ValueError as e:  # not reached: reading the file raised it first
        raise CLIError(_one_line(e)) from None


def from_file(options: TrainOptions, spec) -> OwnData:
    """The data of `geomlearn train --data PATH` for the model `spec`, read and checked
    (all of it in `train`; `split_file` splits it once the model is built); nothing is
    written."""
    if options.n_trajectories is not None:
        raise CLIError("--n-trajectories applies to --system data; with --data every trajectory "
                       "of the file is used")
    if options.irregular:
        check_reads_times(spec)
    source = pathlib.Path(options.data)
    data = read_trajectories(source, q_columns=options.q_columns, p_columns=options.p_columns,
                             irregular=options.irregular)
    data = one_run_segments(data, source, options.val_fraction)
    atoms = 3 if source.suffix.lower() == _ASE_SUFFIX else 0  # ASE: particles in 3-D
    shape = DataFile(dim=data.dim, canonical=data.dim % 2 == 0, labels=state_names(data, data.dim),
                     particle_dimension=options.particles or atoms)
    check_model_fits(spec, shape, source)
    if options.particles is not None:
        try:
            frame_projection(data.dim, (), options.particles)
        except ValueError as e:
            raise CLIError(f"--particles {options.particles}: {source.name}: {e}") from None
    if data.n_trajectories < 2:  # before building a model
        split_by_trajectory(data, options.val_fraction, seed=options.seed, source=source)
    return OwnData(shape, data, None, "", {}, _layout(source, options))


def split_file(options: TrainOptions, own: OwnData, fit_options: dict) -> OwnData:
    """`own` split by whole trajectories, after checking that every trajectory is long
    enough for the model's samples (`fit_options`); a warning line on stderr names the
    columns left out of the state as invariants."""
    data, source = own.train, pathlib.Path(options.data)
    check_lengths(data, fit_options, source)
    train, held_out, how = split_by_trajectory(data, options.val_fraction, seed=options.seed,
                                               source=source)
    record = {"data_file": file_record(source), "val_fraction": options.val_fraction,
              "q_columns": _list(options.q_columns), "p_columns": _list(options.p_columns),
              "dt": train.dt}  # irregular data: the training trajectories' mean step
    layout = own.layout
    columns = layout.describe() if layout is not None else "state by position (no column names)"
    step = (f"irregular times, mean step {train.dt:g} (training)" if data.irregular
            else f"dt={data.dt:g}")
    description = (f"{source.name}: {data.n_trajectories} trajectories of dimension {data.dim}, "
                   f"{step}; {columns}; {how}")
    if layout is not None and layout.left_out:
        record["left_out_columns"] = list(layout.left_out)
        print(f"geomlearn: warning: {source.name}: the columns {', '.join(layout.left_out)} look "
              "like invariants, not state components: left out of the state (name them with "
              "--q-columns/--p-columns to use them)", file=sys.stderr)
    return OwnData(own.shape, train, held_out, description, record, layout)


def held_out_of_run(run: dict, options: TrainOptions) -> TrajectoryData:
    """The held-out trajectories of a run trained with `--data` (`run.json` and its
    `options`): the file read with the run's state columns (`read_as_run`; with its
    row times when it was trained with `--irregular`) and split
    again as at training; `CLIError` when it is missing or its SHA-256 has changed."""
    recorded = run["data_file"]
    path = pathlib.Path(recorded.get("path", ""))
    if not path.is_file():
        raise CLIError(f"the run's data file {str(path)!r} no longer exists")
    if file_record(path)["sha256"] != recorded.get("sha256"):
        raise CLIError(f"the run's data file {path} has changed since training (its SHA-256 "
                       "differs from the one in run.json)")
    data = read_as_run(path, run.get("labels"), q_columns=options.q_columns,
                       p_columns=options.p_columns, irregular=options.irregular)
    data = one_run_segments(data, path, options.val_fraction)
    return split_by_trajectory(data, options.val_fraction, seed=options.seed, source=path)[1]
