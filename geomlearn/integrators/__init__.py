r"""Classical reference integrators, vectorised over initial conditions.

`integrate(system, z0, dt, n_steps, method=...)` advances a state `(dim,)` or a batch
`(B, dim)` by `n_steps` steps of size `dt` in one jit-compiled, vmapped `lax.scan`. A
method is an `AbstractIntegrator` (which says its `order` and whether it is `symplectic`,
`implicit` or needs a `separable` system) or its name, turned into the object once:

| object | name | order | symplectic | needs |
|---|---|---|---|---|
| `Euler()` | `"euler"` | 1 | no | — |
| `RK4()` | `"rk4"` | 4 | no | — |
| `SymplecticEuler()` | `"symplectic_euler"` | 1 | yes | separable $H$ |
| `StormerVerlet()` | `"stormer_verlet"` | 2 | yes | separable $H$ |
| `Yoshida4()` | `"yoshida4"` | 4 | yes | separable $H$ |
| `Yoshida6()` | `"yoshida6"` | 6 | yes | separable $H$ |
| `ImplicitMidpoint()` | `"implicit_midpoint"` | 2 | yes | — |
| `GaussLegendre4()` | `"gauss_legendre4"` | 4 | yes | — |
| `GaussLegendre6()` | `"gauss_legendre6"` | 6 | yes | — |

"Symplectic" means symplectic for canonical Hamiltonian systems (none of these methods
is exactly volume-preserving for general divergence-free fields). The implicit
Runge–Kutta methods (implicit midpoint is the one-stage Gauss–Legendre method) also keep
every quadratic invariant (the rigid body's Casimir $|z|^2$ and energy) up to the
accuracy of the stage solve and round-off.

Explicit symplectic methods use $\nabla T$ and $\nabla V$ of a separable system
(`AbstractSeparableSystem`); on any other system they raise `ValueError`. Their step is
stable only below a multiple of $1/\omega_{\max}$, the fastest linearised frequency
(`fastest_frequency(system, states)`: Störmer–Verlet for $h\,\omega_{\max} < 2$).
The implicit methods solve their stage equations by a bounded fixed-point iteration (at most
`MAX_FIXED_POINT_ITERATIONS` per step) down to the round-off floor; a step whose last
update still changed the state by more than `128·eps` of its size raises
`IntegrationError` naming the step and trajectory (use a smaller `dt` or more `substeps`).

Reference: Hairer, Lubich, Wanner, *Geometric Numerical Integration*, 2nd ed., Springer 2006.

```python
>>> from geomlearn.systems import Pendulum
>>> states = integrate(Pendulum(), jnp.array([1.0, 0.0]), 0.1, 100)  # (101, 2)
>>> states = integrate(Pendulum(), jnp.array([1.0, 0.0]), 0.1, 100, method=Yoshida4())
```
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._typing import Array, Float, Point
from .._validation import check_int, check_time_step, float_dtype
from ..systems import AbstractSystem
from ._base import AbstractImplicitIntegrator, AbstractIntegrator, AbstractSeparableIntegrator
from ._explicit import RK4, Euler
from ._gauss import (
    MAX_FIXED_POINT_ITERATIONS,
    AbstractGaussLegendre,
    GaussLegendre4,
    GaussLegendre6,
    ImplicitMidpoint,
)
from ._splitting import AbstractComposition, StormerVerlet, SymplecticEuler, Yoshida4, Yoshida6
from ._stability import fastest_frequency

__all__ = [
    "integrate",
    "step",
    "implicit_step",
    "as_integrator",
    "fastest_frequency",
    "IntegrationError",
    "METHODS",
    "ORDERS",
    "SYMPLECTIC_METHODS",
    "SEPARABLE_METHODS",
    "IMPLICIT_METHODS",
    "MAX_FIXED_POINT_ITERATIONS",
    "AbstractIntegrator",
    "AbstractSeparableIntegrator",
    "AbstractImplicitIntegrator",
    "AbstractComposition",
    "AbstractGaussLegendre",
    "Euler",
    "RK4",
    "SymplecticEuler",
    "StormerVerlet",
    "Yoshida4",
    "Yoshida6",
    "ImplicitMidpoint",
    "GaussLegendre4",
    "GaussLegendre6",
]

_BY_NAME: dict[str, AbstractIntegrator] = {
    method.name: method
    for method in (
        Euler(),
        RK4(),
        SymplecticEuler(),
        StormerVerlet(),
        Yoshida4(),
        Yoshida6(),
        ImplicitMidpoint(),
        GaussLegendre4(),
        GaussLegendre6(),
    )
}

METHODS: tuple[str, ...] = tuple(_BY_NAME)
"""The names accepted by `integrate(..., method=...)`."""

ORDERS: dict[str, int] = {name: method.order for name, method in _BY_NAME.items()}
"""The classical order of each method (global error $O(\\Delta t^{p})$)."""

SYMPLECTIC_METHODS: frozenset[str] = frozenset(n for n, m in _BY_NAME.items() if m.symplectic)
"""Methods whose step is a symplectic map for canonical Hamiltonian systems."""

SEPARABLE_METHODS: frozenset[str] = frozenset(n for n, m in _BY_NAME.items() if m.separable)
"""Explicit methods that need a separable system $H = T(p) + V(q)$."""

IMPLICIT_METHODS: frozenset[str] = frozenset(n for n, m in _BY_NAME.items() if m.implicit)
"""Methods that solve their stage equations by (bounded) fixed-point iteration."""


class IntegrationError(RuntimeError):
    """An integration failed: a non-finite state, or an implicit solve that did not
    converge. The message names the method, the step and the trajectory."""


def as_integrator(method: str | AbstractIntegrator) -> AbstractIntegrator:
    """The integrator object for `method`: an `AbstractIntegrator` itself, or one of the
    names `METHODS`; `ValueError` naming the choices otherwise."""
    if isinstance(method, AbstractIntegrator):
        return method
    try:
        return _BY_NAME[method]
    except (KeyError, TypeError):
        raise ValueError(
            f"method must be one of {METHODS} or an AbstractIntegrator, got {method!r}"
        ) from None


def _as_implicit(method) -> AbstractImplicitIntegrator:
    found = _BY_NAME.get(method) if isinstance(method, str) else method
    if not isinstance(found, AbstractImplicitIntegrator):
        raise ValueError(
            f"method must be one of {sorted(IMPLICIT_METHODS)} or an "
            f"AbstractImplicitIntegrator, got {method!r}"
        )
    return found


# --- argument checks -------------------------------------------------------------------


def _checked_method(system, method) -> AbstractIntegrator:
    if not isinstance(system, AbstractSystem):
        raise TypeError(
            f"system must be a geomlearn.systems.AbstractSystem, got {type(system).__name__}"
        )
    integrator = as_integrator(method)
    integrator.check_system(system)
    return integrator


def _as_states(system, z0, name="z0"):
    z0 = jnp.asarray(z0)
    if jnp.issubdtype(z0.dtype, jnp.integer) or z0.dtype == jnp.bool_:
        z0 = z0.astype(float_dtype(None))
    if not jnp.issubdtype(z0.dtype, jnp.floating):
        raise TypeError(f"{name} must be real-valued, got dtype {z0.dtype}")
    if z0.ndim not in (1, 2) or z0.shape[-1] != system.dim:
        raise ValueError(
            f"{name} must have shape ({system.dim},) or (B, {system.dim}) for "
            f"{type(system).__name__}, got shape {z0.shape}"
        )
    return z0


def _check_finite(batch) -> None:
    finite = np.isfinite(np.asarray(batch)).all(axis=-1)
    if not finite.all():
        i = int(np.argmin(finite))
        raise ValueError(f"z0 has a non-finite entry (NaN or inf) in trajectory {i}")


# --- the jit-compiled core -------------------------------------------------------------


@eqx.filter_jit
def _integrate_batch(system, z0, dt, substeps, n_steps, integrator):
    """`z0` (B, d) → states (B, n_steps + 1, d), first non-finite and first unconverged
    step per trajectory (-1 where none)."""
    h = dt / substeps.astype(z0.dtype)
    none = jnp.asarray(-1, dtype=jnp.int32)

    def trajectory(z_init):
        def substep(_, carry):
            z, ok = carry
            z, converged = integrator.step(system, z, h)
            return z, ok & converged

        def body(carry, k):
            z, bad, failed = carry
            z, ok = lax.fori_loop(0, substeps, substep, (z, jnp.array(True)))
            finite = jnp.all(jnp.isfinite(z))
            bad = jnp.where((bad < 0) & ~finite, k, bad)
            failed = jnp.where((failed < 0) & ~ok, k, failed)
            return (z, bad, failed), z

        steps = jnp.arange(1, n_steps + 1, dtype=jnp.int32)
        (_, bad, failed), zs = lax.scan(body, (z_init, none, none), steps)
        return jnp.concatenate([z_init[None, :], zs], axis=0), bad, failed

    return jax.vmap(trajectory)(z0)


def _report(name, dt, substeps, bad, failed) -> None:
    bad, failed = np.asarray(bad, dtype=np.int64), np.asarray(failed, dtype=np.int64)
    big = np.iinfo(np.int64).max
    first_bad = np.where(bad >= 0, bad, big)
    first_failed = np.where(failed >= 0, failed, big)
    where = f"(method {name!r}, dt={dt}, substeps={substeps})"
    if first_failed.min() < big and first_failed.min() <= first_bad.min():
        i = int(np.argmin(first_failed))
        k = int(first_failed[i])
        how = "diverged to a non-finite state" if first_bad[i] == k else "did not converge"
        raise IntegrationError(
            f"the implicit solve {how} within {MAX_FIXED_POINT_ITERATIONS} fixed-point "
            f"iterations at step {k} of trajectory {i} {where}; reduce dt or increase "
            f"substeps"
        )
    if first_bad.min() < big:
        i = int(np.argmin(first_bad))
        raise IntegrationError(
            f"non-finite state (NaN or inf) at step {int(first_bad[i])} of trajectory {i} "
            f"{where}: the integration blew up; reduce dt or increase substeps"
        )


def _check_traced(states, name, bad, failed):
    """Inside a user's transformation: a runtime check instead of an eager one."""
    states = eqx.error_if(
        states,
        jnp.any(failed >= 0),
        f"integrate: an implicit solve did not converge ({name}); reduce dt",
    )
    return eqx.error_if(
        states,
        jnp.any(bad >= 0),
        f"integrate: non-finite state during integration ({name}); reduce dt",
    )


def integrate(
    system: AbstractSystem,
    z0: Float[Array, "*B d"],
    dt: float,
    n_steps: int,
    *,
    method: str | AbstractIntegrator = "implicit_midpoint",
    substeps: int = 1,
) -> Float[Array, "*B N d"]:
    r"""Integrate `system` from `z0` for `n_steps` steps of size `dt`.

    Row `t` of the result is the state at time $t\,\Delta t$ (row 0 is `z0`). With
    `substeps = s`, each step is made of `s` steps of size $\Delta t / s$ and only every
    `s`-th state is kept — a more accurate trajectory on the same time grid.

    The whole integration is one jit-compiled `lax.scan`, vectorised over the batch with
    `jax.vmap`; it compiles once per system, method, `n_steps`, batch shape and dtype
    (`dt` and `substeps` are traced, so changing them does not recompile).

    **Arguments:**

    - `system`: a `geomlearn.systems.AbstractSystem`.
    - `z0`: the initial state `(dim,)` or a batch `(B, dim)`. Integer input is converted to
      JAX's default float; otherwise the dtype of `z0` is the dtype of the computation.
    - `dt`: the time step of the output grid, a finite number `> 0`.
    - `n_steps`: the number of steps, `>= 0`.
    - `method`: an `AbstractIntegrator` or one of the names `METHODS` (default
      `"implicit_midpoint"`).
    - `substeps`: integer `>= 1` (default `1`).

    **Returns:** the states, shape `(n_steps + 1, dim)`, or `(B, n_steps + 1, dim)` for a
    batch.

    **Raises:** `ValueError` for an unknown method, a method that needs separability on a
    non-separable system, a bad `dt`/`n_steps`/`substeps`, a wrongly shaped or non-finite
    `z0`; `IntegrationError` naming the step and trajectory when a state becomes NaN/inf or
    an implicit solve does not converge.

    ```python
    >>> from geomlearn.systems import Kepler
    >>> kepler = Kepler()
    >>> zs = integrate(kepler, kepler.default_initial_conditions(), 0.05, 1000,
    ...                method="stormer_verlet")
    >>> zs.shape
    (3, 1001, 4)
    ```
    """
    integrator = _checked_method(system, method)
    dt = check_time_step(dt)
    n_steps = check_int("n_steps", n_steps, minimum=0)
    substeps = check_int("substeps", substeps, minimum=1)
    z0 = _as_states(system, z0)
    single = z0.ndim == 1
    batch = z0[None, :] if single else z0
    traced = isinstance(batch, jax.core.Tracer)
    if not traced:
        _check_finite(batch)
    states, bad, failed = _integrate_batch(
        system,
        batch,
        jnp.asarray(dt, dtype=batch.dtype),
        jnp.asarray(substeps, dtype=jnp.int32),
        n_steps,
        integrator,
    )
    if traced:
        states = _check_traced(states, integrator.name, bad, failed)
    else:
        _report(integrator.name, dt, substeps, bad, failed)
    return states[0] if single else states


def step(
    system: AbstractSystem, z: Point, dt, *, method: str | AbstractIntegrator = "implicit_midpoint"
) -> Point:
    r"""One step of size `dt` of `method` from the single state `z` `(dim,)`.

    Unlike `integrate` this is a plain traceable function (use it under `jit`, `vmap`,
    `lax.scan`): `dt` may be a traced scalar and is not validated. An implicit solve that
    does not converge raises through `eqx.error_if` at run time.

    **Returns:** the next state, same shape and dtype as `z`.
    """
    integrator = _checked_method(system, method)
    z = jnp.asarray(z)
    if z.shape != (system.dim,):
        raise ValueError(
            f"step expects one state of shape ({system.dim},), got shape {z.shape}"
        )
    if not jnp.issubdtype(z.dtype, jnp.floating):
        raise TypeError(f"z must have a floating dtype, got {z.dtype}")
    z_new, converged = integrator.step(system, z, jnp.asarray(dt, dtype=z.dtype))
    if integrator.implicit:
        z_new = eqx.error_if(
            z_new, ~converged,
            f"step: the implicit solve of {integrator.name!r} did not converge",
        )
    return z_new


def implicit_step(
    vector_field,
    z: Point,
    dt,
    *,
    method: str | AbstractImplicitIntegrator = "implicit_midpoint",
    on_failure: str = "raise",
) -> Point:
    r"""One step of an implicit Gauss–Legendre method for any vector field, solved to round-off.

    The stage equations of `method` (`ImplicitMidpoint()`, `GaussLegendre4()`,
    `GaussLegendre6()` or their names) for $\dot z = f(z)$ are solved by the same checked
    fixed-point iteration as `integrate` (stopping at the round-off floor, at most
    `MAX_FIXED_POINT_ITERATIONS`); derivatives with respect to `z`, `dt` and anything
    `vector_field` closes over (e.g. a network's parameters) follow from the implicit
    function theorem, not from differentiating the iterations. A solve that has not
    converged raises at run time (`eqx.error_if`): an unconverged step is never returned.

    For a Hamiltonian field $f = \mathbb{J}\nabla H$ the step is a symplectic map.

    **Arguments:**

    - `vector_field`: a function `(d,) -> (d,)` (e.g. a Hamiltonian network's
      `vector_field`).
    - `z`: one state `(d,)`; `dt`: the step size (may be traced).
    - `method`: one of the implicit methods above.
    - `on_failure`: `"raise"` (default) or `"nan"` — an unconverged solve returns NaN
      instead (used in training, where a NaN loss rejects a Levenberg–Marquardt trial
      step or stops a first-order epoch with `NonFiniteLossError`).

    **Returns:** the next state, same shape and dtype as `z`.
    """
    nan_on_failure = {"raise": False, "nan": True}.get(on_failure)
    if nan_on_failure is None:
        raise ValueError(f"on_failure must be 'raise' or 'nan', got {on_failure!r}")
    integrator = _as_implicit(method)
    z = jnp.asarray(z)
    if z.ndim != 1:
        raise ValueError(f"implicit_step expects one state of shape (d,), got shape {z.shape}")
    if not jnp.issubdtype(z.dtype, jnp.floating):
        raise TypeError(f"z must have a floating dtype, got {z.dtype}")
    z_new, converged = integrator.solve(vector_field, z, jnp.asarray(dt, dtype=z.dtype))
    if nan_on_failure:
        return jnp.where(converged, z_new, jnp.asarray(jnp.nan, z_new.dtype))
    return eqx.error_if(
        z_new,
        ~converged,
        f"implicit_step: the {integrator.name} solve did not converge within "
        f"{MAX_FIXED_POINT_ITERATIONS} fixed-point iterations; reduce dt",
    )
