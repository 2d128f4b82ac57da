r"""Irregularly sampled trajectories of a system: random steps around a nominal one.

For each trajectory, `n_steps` steps $h_1, \dots, h_n$ are drawn independently and
uniformly from $[(1 - j)\,\Delta t, (1 + j)\,\Delta t]$ (`jitter` $j$), the sample
times are $t_0 = 0$, $t_k = h_1 + \dots + h_k$, and the states are
$z_{k} = \Phi^{s}_{h_k}(z_{k-1})$: `substeps` $s$ steps of size $h_k / s$ of a classical
integrator — the same number of substeps for every interval, as the regular recipes
take a fixed number per step, so that the accuracy is comparable with theirs.
"""

from __future__ import annotations

import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._typing import Array, Float
from .._validation import check_int, check_time_step, float_dtype
from ..data import TrajectoryData
from ..integrators import GaussLegendre6, IntegrationError, Yoshida6, as_integrator
from ..systems import AbstractSeparableSystem, AbstractSystem

__all__ = ["irregular_trajectories"]


@eqx.filter_jit
def _integrate_intervals(system, z0, h, substeps: int, integrator):
    """`z0` `(B, d)` and substep sizes `h` `(B, n)` → states `(B, n + 1, d)` and whether
    every implicit solve of each trajectory converged `(B,)`."""

    def trajectory(z_init, hs):
        def interval(carry, hk):
            def substep(_, state):
                z, ok = state
                z, converged = integrator.step(system, z, hk)
                return z, ok & converged

            z, ok = lax.fori_loop(0, substeps, substep, carry)
            return (z, ok), z

        (_, ok), zs = lax.scan(interval, (z_init, jnp.array(True)), hs)
        return jnp.concatenate([z_init[None, :], zs], axis=0), ok

    return jax.vmap(trajectory)(z0, h)


def _initial_states(system, initial_conditions) -> jax.Array:
    z0 = jnp.asarray(initial_conditions)
    if not jnp.issubdtype(z0.dtype, jnp.floating):
        z0 = z0.astype(float_dtype(None))
    z0 = z0[None, :] if z0.ndim == 1 else z0
    if z0.ndim != 2 or z0.shape[-1] != system.dim:
        raise ValueError(f"initial_conditions must have shape ({system.dim},) or (B, "
                         f"{system.dim}) for {type(system).__name__}, got shape "
                         f"{jnp.shape(initial_conditions)}")
    finite = np.isfinite(np.asarray(z0)).all(axis=-1)
    if not finite.all():
        raise ValueError(f"initial_conditions has a non-finite entry (NaN or inf) in "
                         f"trajectory {int(np.argmin(finite))}")
    return z0


def irregular_trajectories(system, initial_conditions: Float[Array, "*B d"], dt: float,
                           n_steps: int, *, jitter: float = 0.5, seed: int = 0, method=None,
                           substeps: int = 10) -> TrajectoryData:
    r"""Trajectories of `system` sampled at random times, as irregular `TrajectoryData`.

    Each trajectory starts at $t_0 = 0$ and takes `n_steps` steps $h_k \sim
    U[(1 - j)\Delta t, (1 + j)\Delta t]$ (independent; NumPy's `default_rng(seed)`,
    trajectory after trajectory), each integrated with `substeps` steps of size
    $h_k / s$ (one `lax.scan` over the intervals). A system in extended phase space
    started at clock $\tau = 0$ (`ParametricPendulum`) has $\tau$ equal to each row's
    time, up to round-off.

    **Arguments:**

    - `system`: a `geomlearn.systems.AbstractSystem`.
    - `initial_conditions`: `(B, dim)`, or `(dim,)` for one trajectory; their dtype is
      the computation's (integers: JAX's default float).
    - `dt`: the nominal step $\Delta t > 0$; `n_steps`: steps per trajectory, `≥ 1`.
    - `jitter`: $j$, with $0 \le j < 1$ ($j = 0$: the regular grid); default `0.5`.
    - `seed`: the seed of the steps (the same seed gives the same times).
    - `method`: an integrator or its name; default `Yoshida6()` for a separable
      system and `GaussLegendre6()` otherwise (as the regular recipes).
    - `substeps`: substeps per interval, `≥ 1` (default 10).

    **Returns:** `TrajectoryData.from_times` of `B` trajectories of `n_steps + 1` states,
    `row_times` the sampled times.

    **Raises:** `ValueError` for a `jitter` outside $[0, 1)$, bad `dt`, `n_steps`,
    `substeps`, an unknown method or one that cannot integrate `system`, wrongly shaped
    or non-finite initial conditions; `IntegrationError` naming the trajectory when a
    state becomes non-finite or an implicit solve does not converge.
    """
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a geomlearn.systems.AbstractSystem, got "
                        f"{type(system).__name__}")
    separable = system.separable and isinstance(system, AbstractSeparableSystem)
    integrator = as_integrator((Yoshida6() if separable else GaussLegendre6())
                               if method is None else method)
    integrator.check_system(system)
    dt = check_time_step(dt)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    substeps = check_int("substeps", substeps, minimum=1)
    if isinstance(jitter, bool) or not isinstance(jitter, numbers.Real) \
            or not 0.0 <= float(jitter) < 1.0:
        raise ValueError(f"jitter must be a number in [0, 1) (steps drawn from "
                         f"[(1 - jitter) dt, (1 + jitter) dt]), got {jitter!r}")
    z0 = _initial_states(system, initial_conditions)
    rng = np.random.default_rng(seed)
    steps = rng.uniform((1 - jitter) * dt, (1 + jitter) * dt, size=(z0.shape[0], n_steps))
    h = jnp.asarray(steps / substeps, dtype=z0.dtype)
    states, ok = _integrate_intervals(system, z0, h, substeps, integrator)
    states, ok = np.asarray(states), np.asarray(ok)
    finite = np.isfinite(states).all(axis=(1, 2))
    if not (ok & finite).all():
        i = int(np.argmin(ok & finite))
        how = "an implicit solve did not converge" if not ok[i] else "a state became non-finite"
        raise IntegrationError(f"trajectory {i}: {how} (method {integrator.name!r}, dt={dt}, "
                               f"jitter={jitter}, substeps={substeps}); reduce dt or "
                               "increase substeps")
    times = np.concatenate([np.zeros((z0.shape[0], 1)), np.cumsum(steps, axis=1)], axis=1)
    labels = tuple(system.labels)
    return TrajectoryData.from_times(list(states), list(times),
                                     labels=labels if len(labels) == system.dim else None)
