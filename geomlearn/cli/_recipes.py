r"""The data the command line trains and evaluates on, by system name.

A system with a recipe in `RECIPES` uses it: the papers' data sets of
`geomlearn.datasets` where a paper prescribes one, and otherwise many initial states
drawn from a stated range with a reference accurate to a relative 1e-8 per stored step
(`geomlearn.datasets.reference_data`). Any other system is integrated from its
`default_initial_conditions()` with `DEFAULT_DT` for `DEFAULT_STEPS` steps by the
6th-order Gauss–Legendre method, to the same accuracy. The recipes that integrate their
trajectories take a stride $S$: they integrate $S$ times as many steps and keep every
$S$-th row, so the data have as many rows at $S\,\Delta t$.
"""

from __future__ import annotations

import jax
import numpy as np

from ..data import TrajectoryData
from ..datasets import (
    REFERENCE_TOLERANCE,
    coupled_oscillator_lst,
    damped_pendulum,
    double_pendulum,
    duffing,
    forced_mass_spring,
    forced_rigid_body,
    harmonic_oscillator,
    henon_heiles,
    kepler,
    lennard_jones,
    parametric_pendulum,
    pendulum_sympnets,
    reference_data,
    rigid_body_vpt_initial_conditions,
    three_body,
)
from .._format import fmt
from .._validation import check_int
from ..integrators import GaussLegendre6, fastest_frequency
from ._frequency import frequency_states
from ._own_data import DataFile
from ._system_names import SYSTEMS

__all__ = ["for_system", "phase_space", "RECIPES", "CLOCK_DROPPED", "DEFAULT_DT", "DEFAULT_STEPS",
           "ORDER_DEPENDENT_SEQ_LENGTH", "strided_systems", "stride_report",
           "SAMPLED_TRAJECTORIES", "SAMPLED_STEPS", "MAX_TRAJECTORIES"]

#: Time step and number of steps of the generic recipe (any system without its own).
DEFAULT_DT, DEFAULT_STEPS = 0.1, 200

#: Window length of the order-dependent recipes (the command line's default --seq-length).
ORDER_DEPENDENT_SEQ_LENGTH = 3

#: Trajectories and steps of the sampled recipes by default (`--n-trajectories` changes
#: the first, up to `MAX_TRAJECTORIES`).
SAMPLED_TRAJECTORIES, SAMPLED_STEPS = 20, 100
MAX_TRAJECTORIES = 10_000


def _count(n: int | None, default: int, maximum: int = MAX_TRAJECTORIES) -> int:
    n = default if n is None else n
    if not 1 <= n <= maximum:
        raise ValueError(f"n_trajectories must be between 1 and {maximum}, got {n}")
    return n


def _strided(data: TrajectoryData, stride: int) -> TrajectoryData:
    """Every `stride`-th row of `data` (a reference without start times or names), at
    `dt·stride`."""
    if stride == 1:
        return data
    return TrajectoryData(data.states[:, ::stride], data.dt * stride, labels=data.labels)


def _grid(dt: float, stride: int) -> str:
    """The sampling of a recipe's data: `dt=0.1`, or `every 8th of dt=0.1 (stride 8,
    Δt = 0.8)`."""
    if stride == 1:
        return f"dt={dt}"
    suffix = ("th" if 10 <= stride % 100 <= 20
              else {1: "st", 2: "nd", 3: "rd"}.get(stride % 10, "th"))
    return f"every {stride}{suffix} of dt={dt} (stride {stride}, Δt = {dt * stride:g})"


def _takes_stride(recipe):
    """Mark `recipe` as one that integrates its trajectories (`strided_systems`)."""
    recipe.takes_stride = True
    return recipe


def _pendulum_recipe(system, *, n_trajectories, key, dtype):
    train, test = pendulum_sympnets(dtype=dtype)
    if n_trajectories is not None:
        raise ValueError("the pendulum data set has one trajectory; n_trajectories does not apply")
    return train, test, "SympNets pendulum: train on 40 steps, evaluate on the next 100"


def _rigid_body_recipe(system, *, n_trajectories, key, dtype):
    z0 = rigid_body_vpt_initial_conditions(dtype=dtype)
    n = _count(n_trajectories, 64, maximum=z0.shape[0])
    idx = np.unique(np.linspace(0, z0.shape[0] - 1, n).round().astype(int))
    data = TrajectoryData.from_system(system, z0[idx], 0.2, 100, method="implicit_midpoint")
    return data, None, (
        f"volume-preserving transformer rigid body ({len(idx)} of its 1238 trajectories, "
        "evenly spaced in its parameter)"
    )


def _coupled_oscillator_recipe(system, *, n_trajectories, key, dtype):
    n = _count(n_trajectories, 5)
    data = coupled_oscillator_lst(key, n_trajectories=n, dtype=dtype)
    return data, None, (f"linear symplectic transformer coupled oscillator ({n} initial states "
                        "uniform in [0, 1)^4, implicit midpoint at dt=0.3 as in the tutorial)")


def _sampled_recipe(make, what):
    """A recipe of `geomlearn.datasets` that draws its initial states (`what` says how)."""
    return _drawn_recipe(make, what, SAMPLED_STEPS)


def _drawn_recipe(make, what, n_steps):
    """A recipe of `geomlearn.datasets` (conservative, damped or driven): `n_steps` steps
    from initial states drawn as `what` says, at a stride of the data set's step."""

    @_takes_stride
    def recipe(system, *, n_trajectories, key, dtype, stride=1):
        n = _count(n_trajectories, SAMPLED_TRAJECTORIES)
        data = make(key, n_trajectories=n, n_steps=n_steps * stride, system=system, dtype=dtype)
        grid = _grid(data.dt, stride)
        return _strided(data, stride), None, (
            f"{n} trajectories from {what}, {grid}, {n_steps} steps, "
            f"reference accurate to {REFERENCE_TOLERANCE:g} per step")

    return recipe


@_takes_stride
def _generic_recipe(system, *, n_trajectories, key, dtype, stride=1):
    z0 = system.default_initial_conditions(dtype=dtype)
    n = _count(n_trajectories, z0.shape[0], maximum=z0.shape[0])
    z0 = z0[np.unique(np.linspace(0, z0.shape[0] - 1, n).round().astype(int))]
    data, substeps, _ = reference_data(system, z0, DEFAULT_DT, DEFAULT_STEPS * stride,
                                       method=GaussLegendre6(), dtype=dtype)
    source = (f"default initial conditions, {_grid(DEFAULT_DT, stride)}, {DEFAULT_STEPS} steps, "
              f"Gauss–Legendre 6 with {substeps} substeps (accurate to "
              f"{REFERENCE_TOLERANCE:g} per step)")
    return _strided(data, stride), None, source


def _order_dependent_recipe(make, name):
    def recipe(system, *, n_trajectories, key, dtype):
        T = ORDER_DEPENDENT_SEQ_LENGTH
        B = 64 if n_trajectories is None else n_trajectories
        k_train, k_held = jax.random.split(key)
        train = make(k_train, seq_length=T, n_trajectories=B, system=system, dtype=dtype)
        held = make(k_held, seq_length=T, n_trajectories=max(1, B // 4), system=system,
                    dtype=dtype)
        return train, held, (
            f"{name}: {B} training and {max(1, B // 4)} held-out trajectories from other "
            f"initial states, cut into period-aligned segments of 2T rows (T = {T}; train "
            f"with --seq-length {T} and prediction window T)"
        )

    return recipe


def _toda_lattice_recipe(system, *, n_trajectories, key, dtype):
    """The reference package's symplectic-autoencoder data: the bump, implicit midpoint,
    `dt = 0.1`, `t ∈ [0, 800]` (8000 steps; one trajectory)."""
    if n_trajectories not in (None, 1):
        raise ValueError("the Toda lattice data set has one trajectory (the bump)")
    z0 = system.default_initial_conditions(dtype=dtype)[:1]
    data = TrajectoryData.from_system(system, z0, 0.1, 8000, method="implicit_midpoint")
    return data, None, "Toda lattice bump (GeometricMachineLearning.jl), dt=0.1, t in [0, 800]"


#: Data recipes of `for_system`, by system name (`geomlearn.cli.SYSTEMS`). A recipe
#: `recipe(system, *, n_trajectories, key, dtype)` returns `(data, held_out or None,
#: description)`; `None` means "split `data` by trajectories". A recipe that integrates
#: its trajectories (`takes_stride`) takes `stride` too.
RECIPES = {
    "pendulum": _pendulum_recipe,
    "rigid_body": _rigid_body_recipe,
    "coupled_oscillator": _coupled_oscillator_recipe,
    "parametric_pendulum": _order_dependent_recipe(parametric_pendulum, "driven pendulum"),
    "forced_rigid_body": _order_dependent_recipe(forced_rigid_body, "pulsating rigid body"),
    "toda_lattice": _toda_lattice_recipe,
    "harmonic_oscillator": _sampled_recipe(harmonic_oscillator, "energies in [0.05, 0.5]"),
    "henon_heiles": _sampled_recipe(henon_heiles, "energies in [0.02, 0.12]"),
    "kepler": _sampled_recipe(kepler, "ellipses with a in [0.8, 1.2], e in [0, 0.5]"),
    "three_body": _sampled_recipe(three_body, "the figure-eight perturbed by up to 0.02"),
    "lennard_jones": _sampled_recipe(lennard_jones, "close-packed clusters at k_B T/ε in [0.02, 0.08]"),
    "double_pendulum": _sampled_recipe(double_pendulum, "angles in [-1, 1], momenta in [-0.5, 0.5]"),
    "damped_pendulum": _drawn_recipe(damped_pendulum, "q in [-2, 2], p in [-1, 1]", 200),
    "duffing": _drawn_recipe(duffing, "(q, p) in [-2.5, 2.5]^2 at t = 0 (Desai et al. 2021)",
                                   1000),
    "forced_mass_spring": _drawn_recipe(forced_mass_spring,
                                              "|(q, p)|^2 in [1, 4.5] at t = 0", 500),
}


#: The systems written in extended phase space whose recipe drops the clock $(\tau, E)$:
#: their data are the physical rows (the driven pendulum's $(q, p)$, the pulsating rigid
#: body's $z \in \mathbb{R}^3$), and the drive phase is in the row's place in a window.
CLOCK_DROPPED = frozenset({"parametric_pendulum", "forced_rigid_body"})
_CLOCK = ("tau", "E")


def phase_space(name: str, system):
    """What the command line's models for the system `name` act on: `system` itself, or,
    for a system in `CLOCK_DROPPED`, a `DataFile` of its components without the clock
    (dimension `system.dim - 2`, canonical when the system is). Such data have no system
    of their own dimension: the command line evaluates models trained on them against
    the data alone (`geomlearn.evaluate(..., system=None)`: rollout errors and the
    structure of the map, no invariants — the energy of a driven system is not conserved)."""
    if name not in CLOCK_DROPPED:
        return system
    keep = tuple(label for label in system.labels if label not in _CLOCK)
    if len(keep) != system.dim - len(_CLOCK):
        raise ValueError(f"{type(system).__name__} has no clock components {_CLOCK} among "
                         f"its labels {system.labels}")
    return DataFile(dim=len(keep), canonical=bool(system.canonical), labels=keep)


def strided_systems() -> list[str]:
    """The built-in systems (`SYSTEMS`) whose data take a stride: those whose recipe
    integrates its trajectories, and those without a recipe of their own."""
    return [name for name in SYSTEMS
            if getattr(RECIPES.get(name, _generic_recipe), "takes_stride", False)]


def for_system(name: str, system, *, n_trajectories: int | None = None, seed: int = 0,
               dtype=None, stride: int = 1) -> tuple[TrajectoryData, TrajectoryData, str]:
    r"""`(train, held_out, description)`: the data the command line trains and evaluates on.

    Systems with a recipe in `RECIPES` use it (the papers' data sets, or initial states
    drawn from a stated range with an accurate reference); any other system is integrated
    from its `default_initial_conditions()` with `DEFAULT_DT` for `DEFAULT_STEPS` steps
    (6th-order Gauss–Legendre, accurate to 1e-8 per step). With `n_trajectories`, that
    many trajectories are used: drawn (sampled recipes, up to `MAX_TRAJECTORIES`) or kept,
    evenly spaced (the rigid body integrates only those). When
    there are at least two trajectories, 80 % (by whole trajectories, chosen with `seed`)
    train and 20 % are held out for validation and evaluation; a single trajectory is
    trained and evaluated on.

    With `stride` $S > 1$, a recipe that integrates its trajectories integrates $S$ times
    as many steps of its `dt` and keeps every $S$-th row: as many rows at $S\,$`dt`. The
    fixed data sets (the papers' and the Toda lattice's) raise `ValueError` naming the
    systems that take a stride.
    """
    stride = check_int("stride", stride, minimum=1)
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 7)
    recipe = RECIPES.get(name, _generic_recipe)
    by_stride = {"stride": stride} if stride > 1 else {}
    if by_stride and not getattr(recipe, "takes_stride", False):
        raise ValueError(f"the {name} data set is fixed and takes no stride; a stride applies "
                         f"to {', '.join(strided_systems())}")
    data, held_out, source = recipe(
        system, n_trajectories=n_trajectories, key=jax.random.fold_in(key, 1), dtype=dtype,
        **by_stride)
    if held_out is not None:
        return data, held_out, source
    if data.n_trajectories >= 2:
        train, held_out = data.split(0.8, key=jax.random.fold_in(key, 2))
        how = f"{train.n_trajectories} training / {held_out.n_trajectories} held-out trajectories"
        return train, held_out, f"{source}: {how}"
    return data, data, f"{source}: 1 trajectory, trained and evaluated on it"


def stride_report(stride: int, system, data) -> tuple[dict, list[tuple[str, str]]]:
    r"""`(entries, rows)`: the stride, the fastest linearised frequency at the data and
    Störmer–Verlet's stability limit $2/\omega_{\max}$ (`fastest_frequency`; `None`
    for a system that is not canonical and separable, or none), for `metrics.json` and
    the summary (no row without a system)."""
    entries = {"stride": stride, "fastest_frequency": None, "verlet_stability_limit": None}
    if system is None:
        return entries, []
    row = f"{stride} × {fmt(data.dt / stride)} = Δt {fmt(data.dt)}"
    states = frequency_states(data)
    try:
        omega = fastest_frequency(system, states)
    except ValueError:  # not canonical and separable: no limit to report
        return entries, [("stride", row)]
    limit = 2.0 / omega if omega > 0 else None
    entries.update(fastest_frequency=omega, verlet_stability_limit=limit)
    where = f"(ω_max = {fmt(omega)} at {len(states)} data states)"
    row += (f"; Störmer–Verlet stable for Δt < 2/ω_max = {fmt(limit)} {where}" if limit
            else f"; Störmer–Verlet stable at every Δt {where}")
    return entries, [("stride", row)]
