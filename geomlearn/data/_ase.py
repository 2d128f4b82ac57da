r"""Trajectories of ASE, the Atomic Simulation Environment: frames of `ase.Atoms` as the
`Parts` of one trajectory, for `TrajectoryData.from_ase` and the `.traj` files that
`TrajectoryData.read` reads.

Frame $k$ of $N$ atoms becomes the state

$$z_k = (x_1, y_1, z_1, \dots, x_N, y_N, z_N,\; p_{x,1}, p_{y,1}, p_{z,1}, \dots,
p_{z,N}),$$

positions first, each atom's three components consecutive — the layout of
`geomlearn.systems.LennardJonesCluster` in 3-D, with its labels `x1, y1, z1, …, px1,
py1, pz1, …`. Values are in ASE's units as stored: positions in Å, momenta in amu·Å per
ASE time unit, times in ASE time units ($\text{Å}\sqrt{\text{amu}/\text{eV}}$, about
10.18 fs), so that $H = \sum_i |p_i|^2 / 2m_i + V(x)$ is in eV.

ASE is an optional dependency: it is imported when a trajectory is read, and a missing
ASE is an `ImportError` naming `pip install ase`.
"""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np

from .._validation import check_int, check_time_step
from ._files import IRREGULAR_HINT, STEP_RTOL, Parts, read_parts, step_of

__all__ = ["FromASE", "ase_parts", "read_any", "particle_labels"]

#: The key of `atoms.info` that holds a frame's time.
TIME_KEY = "time"


def _ase():
    """The `ase` package (with `ase.io`), or a one-line `ImportError` naming the install."""
    # A function-local import on purpose: ASE is an optional dependency (the `test` and
    # `bench` extras), so geomlearn imports, and reads its own formats, without it.
    try:
        import ase
        import ase.io
    except ImportError:
        raise ImportError("reading ASE trajectories needs ASE, which is not installed: "
                          "pip install ase") from None
    return ase


def particle_labels(n_atoms: int) -> tuple[str, ...]:
    """`x1, y1, z1, …, xN, yN, zN, px1, py1, pz1, …`: the names of the state of `n_atoms`
    particles in 3-D (those of `LennardJonesCluster(n_atoms, 3).labels`)."""
    q = tuple(f"{axis}{i + 1}" for i in range(n_atoms) for axis in "xyz")
    return q + tuple(f"p{label}" for label in q)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _md_step(description) -> float | None:
    """The time between the frames of a `.traj` file written by an ASE MD object
    (`trajectory=`): its header's `timestep` times `interval`; `None` for another file."""
    d = description if isinstance(description, dict) else {}
    if d.get("type") != "molecular-dynamics" or "timestep" not in d:
        return None
    return float(d["timestep"]) * int(d.get("interval", 1))


def _frames(ase, trajectory, where) -> tuple[list, float | None]:
    """The frames of `trajectory` (a path, or a sequence of `ase.Atoms`) and the time
    between them that a `.traj` header gives (`None` without one)."""
    if isinstance(trajectory, (str, os.PathLike)):
        path = os.fspath(trajectory)
        if not os.path.isfile(path):
            why = "no such file" if not os.path.exists(path) else "not a file"
            raise ValueError(f"{where}cannot read it ({why})")
        try:
            if path.lower().endswith(".traj"):
                with ase.io.Trajectory(path) as traj:
                    return list(traj), _md_step(traj.description)
            return list(ase.io.read(path, index=":")), None
        except Exception as e:  # ASE's readers raise many kinds for a file they cannot read
            raise ValueError(f"{where}cannot read it as an ASE trajectory ({_one_line(e)})") \
                from None
    if isinstance(trajectory, ase.Atoms):
        raise TypeError("trajectory is one ase.Atoms (one frame); expected a path or a "
                        "sequence of ase.Atoms, one per frame")
    try:
        frames = list(trajectory)
    except TypeError:
        raise TypeError(f"trajectory must be a path or a sequence of ase.Atoms, got "
                        f"{type(trajectory).__name__}") from None
    bad = next((i for i, f in enumerate(frames) if not isinstance(f, ase.Atoms)), None)
    if bad is not None:
        raise TypeError(f"frame {bad} is a {type(frames[bad]).__name__}; expected ase.Atoms")
    return frames, None


def _arrays(frames, kept, where):
    """Positions and momenta `(T, N, 3)` of the frames `kept` (indices), and the masses
    `(N,)`; `ValueError` naming the first frame without momenta or with other atoms."""
    first = frames[kept[0]]
    n, masses = len(first), np.asarray(first.get_masses(), dtype=np.float64)
    if n == 0:
        raise ValueError(f"{where}frame {kept[0]} has no atoms; expected at least one")
    x, p = [], []
    for i in kept:
        atoms = frames[i]
        if len(atoms) != n:
            raise ValueError(f"{where}frame {i} has {len(atoms)} atoms, frame {kept[0]} has "
                             f"{n}; expected the same atoms in every frame")
        if not atoms.has("momenta"):
            raise ValueError(f"{where}frame {i} has no momenta; expected frames with "
                             "velocities (an MD run stores them; or atoms.set_momenta)")
        if not np.array_equal(atoms.get_masses(), masses):
            raise ValueError(f"{where}frame {i} has other masses than frame {kept[0]}; "
                             "expected the same atoms in every frame")
        x.append(atoms.get_positions())
        p.append(atoms.get_momenta())
    return np.stack(x).astype(np.float64), np.stack(p).astype(np.float64), masses


def _frame_times(frames, kept, where) -> np.ndarray | None:
    """The times `info['time']` of the frames `kept`, or `None` when a frame has none."""
    if not all(TIME_KEY in frames[i].info for i in kept):
        return None
    try:
        return np.array([float(frames[i].info[TIME_KEY]) for i in kept])
    except (TypeError, ValueError):
        raise ValueError(f"{where}atoms.info[{TIME_KEY!r}] holds a non-number; expected "
                         "each frame's time") from None


def _step(frames, kept, md_step, dt, where, hint="") -> tuple[float, float]:
    """`(time between kept frames, time of the first)`: from the frames' `info['time']`
    (all of them), else from a `.traj` header's MD time step, else `dt`; a stored time
    step and `dt` must agree (to `STEP_RTOL`); `hint` ends the message that refuses
    non-uniform frame times."""
    stored, t0, stride = md_step, 0.0, kept[1] - kept[0]
    times = _frame_times(frames, kept, where)
    if times is not None:
        step, first = step_of([times], None, where, hint)
        stored, t0 = step / stride, float(first[0])
    if dt is None:
        if stored is None:
            raise ValueError(f"{where}the frames store no time (atoms.info[{TIME_KEY!r}] or "
                             "the MD time step of a .traj file written with trajectory=); "
                             "give dt=, the time between consecutive frames")
        return stored * stride, t0
    dt = check_time_step(dt)
    if stored is not None and not abs(stored - dt) <= STEP_RTOL * dt:
        raise ValueError(f"{where}dt={dt:.10g} but the frames store the time step "
                         f"{stored:.10g}; give the stored one, or none")
    return dt * stride, t0


def ase_parts(trajectory, *, stride=1, center_of_mass=False, dt=None, where="",
              irregular=None) -> Parts:
    """The `Parts` of one trajectory of ASE frames (see `TrajectoryData.from_ase`): the
    kept frames `0, stride, 2·stride, …` as states `(T, 6N)` in JAX's default float
    dtype, the time step, the start time, `particle_labels` and the masses `(N,)`;
    `where` prefixes errors (a file's path). `irregular=True` keeps the frames' times
    per row when they all have one (`TrajectoryData.read`); `False` refuses non-uniform
    ones with `IRREGULAR_HINT`; `None` (`from_ase`) without it."""
    stride = check_int("stride", stride, minimum=1)
    if not isinstance(center_of_mass, bool):
        raise TypeError(f"center_of_mass must be True or False, got {center_of_mass!r}")
    ase = _ase()
    frames, md_step = _frames(ase, trajectory, where)
    kept = list(range(0, len(frames), stride))
    if len(kept) < 2:
        raise ValueError(f"{where}{len(frames)} frame(s) with stride {stride} keep "
                         f"{len(kept)}; expected at least 2 states")
    x, p, masses = _arrays(frames, kept, where)
    times = _frame_times(frames, kept, where) if irregular else None
    if times is None:
        step, t0 = _step(frames, kept, md_step, dt, where,
                         IRREGULAR_HINT if irregular is False else "")
    else:  # a time per row: checked by TrajectoryData
        step, t0 = None, None
    if center_of_mass:
        m = masses[None, :, None] / masses.sum()
        x = x - np.sum(m * x, axis=1, keepdims=True)
        p = p - m * np.sum(p, axis=1, keepdims=True)
    states = np.concatenate([x.reshape(len(kept), -1), p.reshape(len(kept), -1)], axis=1)
    dtype = jnp.zeros(0).dtype  # ASE stores float64; read like text, in JAX's default
    return Parts([states.astype(dtype)], step, None if t0 is None else np.array([t0]),
                 particle_labels(len(masses)), None, masses,
                 None if times is None else [times])


def read_any(path, *, q_columns=None, p_columns=None, irregular=False) -> Parts:
    """The `Parts` of a trajectory file: an ASE `.traj` file through `ase_parts` (its
    state is the atoms' positions and momenta: `q_columns`, `p_columns` do not apply),
    any other through `read_parts` (`.npz`, `.csv`); `irregular` keeps the times of
    every row that the file stores."""
    if not isinstance(irregular, bool):
        raise TypeError(f"irregular must be True or False, got {irregular!r}")
    if not (isinstance(path, (str, os.PathLike))
            and os.path.splitext(os.fspath(path))[1].lower() == ".traj"):
        return read_parts(path, q_columns=q_columns, p_columns=p_columns, irregular=irregular)
    where = f"{os.fspath(path)}: "
    if q_columns is not None or p_columns is not None:
        raise ValueError(f"{where}the state of a .traj file is its atoms' positions and "
                         "momenta; q_columns and p_columns do not apply")
    return ase_parts(path, where=where, irregular=irregular)


class FromASE:
    """The part of `TrajectoryData` that reads ASE: `from_ase` and the `masses`."""

    __slots__ = ("_masses",)

    @classmethod
    def from_ase(cls, trajectory, *, stride: int = 1, center_of_mass: bool = False,
                 dt: float | None = None):
        r"""One trajectory of $N$ atoms from ASE frames (ASE: `pip install ase`).

        Frame $k$ becomes $z_k = (x_1, y_1, z_1, \dots, z_N, p_{x,1}, \dots, p_{z,N})$ —
        all positions, then all momenta (`atoms.get_momenta()`), each atom's components
        consecutive, as in `systems.LennardJonesCluster`; labels `x1, y1, z1, …, px1, …`.
        Values are in ASE's units (Å, amu·Å per ASE time unit, ASE time units).

        **Arguments:**

        - `trajectory`: a path to a `.traj` file (or another file `ase.io.read` reads),
          or a sequence of `ase.Atoms`; every frame the same atoms, each with momenta.
        - `stride`: keep frames `0, stride, 2·stride, …` (`≥ 1`); the time step is
          `stride` times that between frames.
        - `center_of_mass`: subtract the centre of mass from each frame:
          $x_i \leftarrow x_i - \sum_j m_j x_j / M$, $p_i \leftarrow p_i - m_i P / M$
          ($M = \sum_j m_j$, $P = \sum_j p_j$), so both sums become 0.
        - `dt`: the time between consecutive frames, needed when they store none — the
          frames' `atoms.info["time"]`, or a `.traj` header written by an ASE MD object
          (`trajectory=`: `timestep` × `interval`); when stored, `dt` must agree.

        **Returns:** a `TrajectoryData` of one trajectory `(T, 6N)`, in JAX's default
        float dtype, starting at the first kept frame's time (else 0), with `masses`.

        **Raises:** `ImportError` without ASE; a one-line `ValueError` naming the frame
        without momenta or with other atoms (their number or masses), for fewer than 2
        kept frames or no time step; `ValueError`/`TypeError` for `stride < 1`.
        """
        path = isinstance(trajectory, (str, os.PathLike))
        where = f"{os.fspath(trajectory)}: " if path else ""
        parts = ase_parts(trajectory, stride=stride, center_of_mass=center_of_mass, dt=dt,
                          where=where)
        return cls._build(parts.arrays, parts.dt, t0=parts.t0, labels=parts.labels,
                          source=os.fspath(trajectory) if path else None, masses=parts.masses)

    @property
    def masses(self) -> np.ndarray | None:
        """The particles' masses `(N,)` float64 (a copy) of data from ASE (`from_ase`, a
        `.traj` file), kept by `split`, `shard`, `head`, not written by `write`; else
        `None`."""
        return None if self._masses is None else self._masses.copy()
