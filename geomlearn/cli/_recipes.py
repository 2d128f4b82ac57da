"""The data the command line trains and evaluates on, by system name.

A system with a recipe in `RECIPES` uses it (the papers' data sets of
`geomlearn.datasets`); any other system is integrated from its
`default_initial_conditions()` with `DEFAULT_DT` for `DEFAULT_STEPS` steps.
"""

from __future__ import annotations

import jax
import numpy as np

from ..data import TrajectoryData
from ..datasets import (
    coupled_oscillator_lst,
    forced_rigid_body,
    parametric_pendulum,
    pendulum_sympnets,
    rigid_body_vpt_initial_conditions,
)

__all__ = ["for_system", "RECIPES", "DEFAULT_DT", "DEFAULT_STEPS", "ORDER_DEPENDENT_SEQ_LENGTH"]

#: Time step and number of steps of the generic recipe (any system without its own).
DEFAULT_DT, DEFAULT_STEPS = 0.1, 200

#: Window length of the order-dependent recipes (the command line's default --seq-length).
ORDER_DEPENDENT_SEQ_LENGTH = 3


def _select(data: TrajectoryData, n: int | None) -> TrajectoryData:
    """`n` trajectories of `data`, evenly spaced (all of them for `None`)."""
    if n is None:
        return data
    n_total = data.n_trajectories
    if not 1 <= n <= n_total:
        raise ValueError(f"n_trajectories must be between 1 and {n_total}, got {n}")
    idx = np.unique(np.linspace(0, n_total - 1, n).round().astype(int))
    return TrajectoryData(data.states[idx], data.dt)


def _pendulum_recipe(system, *, n_trajectories, key, dtype):
    train, test = pendulum_sympnets(dtype=dtype)
    if n_trajectories is not None:
        raise ValueError("the pendulum data set has one trajectory; n_trajectories does not apply")
    return train, test, "SympNets pendulum: train on 40 steps, evaluate on the next 100"


def _rigid_body_recipe(system, *, n_trajectories, key, dtype):
    z0 = rigid_body_vpt_initial_conditions(dtype=dtype)
    n = 64 if n_trajectories is None else n_trajectories
    if not 1 <= n <= z0.shape[0]:
        raise ValueError(f"n_trajectories must be between 1 and {z0.shape[0]}, got {n}")
    idx = np.unique(np.linspace(0, z0.shape[0] - 1, n).round().astype(int))
    data = TrajectoryData.from_system(system, z0[idx], 0.2, 100, method="implicit_midpoint")
    return data, None, (
        f"volume-preserving transformer rigid body ({len(idx)} of its 1238 trajectories, "
        "evenly spaced in its parameter)"
    )


def _coupled_oscillator_recipe(system, *, n_trajectories, key, dtype):
    data = _select(coupled_oscillator_lst(key, dtype=dtype), n_trajectories)
    return data, None, "linear symplectic transformer coupled oscillator"


def _generic_recipe(system, *, n_trajectories, key, dtype):
    z0 = system.default_initial_conditions(dtype=dtype)
    data = TrajectoryData.from_system(system, z0, DEFAULT_DT, DEFAULT_STEPS)
    source = f"default initial conditions, dt={DEFAULT_DT}, {DEFAULT_STEPS} steps"
    return _select(data, n_trajectories), None, source


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


#: Data recipes of `for_system`, by system name (`geomlearn.systems.SYSTEMS`). A recipe
#: `recipe(system, *, n_trajectories, key, dtype)` returns `(data, held_out or None,
#: description)`; `None` means "split `data` by trajectories".
RECIPES = {
    "pendulum": _pendulum_recipe,
    "rigid_body": _rigid_body_recipe,
    "coupled_oscillator": _coupled_oscillator_recipe,
    "parametric_pendulum": _order_dependent_recipe(parametric_pendulum, "driven pendulum"),
    "forced_rigid_body": _order_dependent_recipe(forced_rigid_body, "pulsating rigid body"),
    "toda_lattice": _toda_lattice_recipe,
}


def for_system(name: str, system, *, n_trajectories: int | None = None, seed: int = 0,
               dtype=None) -> tuple[TrajectoryData, TrajectoryData, str]:
    """`(train, held_out, description)`: the data the command line trains and evaluates on.

    Systems with a recipe in `RECIPES` use it (the papers' data sets); any other system is
    integrated from its `default_initial_conditions()` with `DEFAULT_DT` for
    `DEFAULT_STEPS` steps (implicit midpoint). With `n_trajectories`, that many
    trajectories are kept, evenly spaced (the rigid body integrates only those). When
    there are at least two trajectories, 80 % (by whole trajectories, chosen with `seed`)
    train and 20 % are held out for validation and evaluation; a single trajectory is
    trained and evaluated on.
    """
    key = jax.random.fold_in(jax.random.PRNGKey(seed), 7)
    recipe = RECIPES.get(name, _generic_recipe)
    data, held_out, source = recipe(
        system, n_trajectories=n_trajectories, key=jax.random.fold_in(key, 1), dtype=dtype
    )
    if held_out is not None:
        return data, held_out, source
    if data.n_trajectories >= 2:
        train, held_out = data.split(0.8, key=jax.random.fold_in(key, 2))
        how = f"{train.n_trajectories} training / {held_out.n_trajectories} held-out trajectories"
        return train, held_out, f"{source}: {how}"
    return data, data, f"{source}: 1 trajectory, trained and evaluated on it"
