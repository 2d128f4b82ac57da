r"""Classical reference integrators, vectorised over initial conditions.

`integrate(system, z0, dt, n_steps, method=...)` advances one state `(dim,)` or a batch
`(B, dim)` by `n_steps` steps of size `dt`, in one jit-compiled `lax.scan` vectorised
with `jax.vmap`. The methods (their order in `ORDERS`):

| method | order | symplectic | needs |
|---|---|---|---|
| `"euler"` (explicit) | 1 | no | — |
| `"rk4"` (classical Runge–Kutta) | 4 | no | — |
| `"symplectic_euler"` | 1 | yes | separable $H$ |
| `"stormer_verlet"` | 2 | yes | separable $H$ |
| `"yoshida4"` | 4 | yes | separable $H$ |
| `"yoshida6"` | 6 | yes | separable $H$ |
| `"implicit_midpoint"` | 2 | yes | — |
| `"gauss_legendre4"` | 4 | yes | — |
| `"gauss_legendre6"` | 6 | yes | — |

"Symplectic" means symplectic for canonical Hamiltonian systems. The implicit
Runge–Kutta methods (implicit midpoint is the one-stage Gauss–Legendre method) also
preserve every quadratic invariant exactly — the rigid body's Casimir $|z|^2$ and
energy — up to the accuracy of the stage solve and round-off. (None of these methods
is exactly volume-preserving for general divergence-free fields.)

Implementation notes (written here by hand because no maintained JAX library provides
symplectic methods):

- Explicit symplectic methods use $\nabla T$ and $\nabla V$ of a separable system
  (`AbstractSeparableSystem`); asking for one on any other system raises `ValueError`.
  Symplectic Euler is the variant
  $p_{n+1} = p_n - h\nabla V(q_n)$, $q_{n+1} = q_n + h\nabla T(p_{n+1})$;
  Störmer–Verlet is kick–drift–kick (velocity Verlet).
- `"yoshida4"` is the triple-jump composition of Störmer–Verlet with weights
  $\gamma_1 = \gamma_3 = 1/(2 - 2^{1/3})$, $\gamma_2 = 1 - 2\gamma_1$; `"yoshida6"` applies
  the same construction to `"yoshida4"` with $2^{1/5}$ (nine Störmer–Verlet steps)
  (H. Yoshida, *Construction of higher order symplectic integrators*, Phys. Lett. A 150,
  1990).
- Gauss–Legendre stages $K$ solve $K_i = f(z_n + h\sum_j a_{ij}K_j)$. They are found
  by fixed-point iteration from $K_i = f(z_n)$, down to the round-off floor. It needs no
  linear algebra — on CPU it ran about ten times faster than Newton's method with a
  small dense solve per iteration — and contracts when
  $h\,\rho(A)\,\mathrm{Lip}(f) < 1$, which holds for any step that resolves the
  dynamics; it is bounded by `MAX_FIXED_POINT_ITERATIONS`. A step whose last update
  still changed the state by more than `128·eps` of its size raises `IntegrationError`
  naming the step and trajectory — an unconverged state is never returned silently
  (stiff problems need a smaller `dt` or more `substeps`). Derivatives of a step (e.g.
  its Jacobian, to check symplecticity) follow from the implicit function theorem
  (`jax.lax.custom_root`), not from differentiating the iterations.

Reference: E. Hairer, C. Lubich, G. Wanner, *Geometric Numerical Integration*, 2nd ed.,
Springer 2006 (chapters II, VI).

```python
>>> from geomlearn.systems import Pendulum
>>> states = integrate(Pendulum(), jnp.array([1.0, 0.0]), 0.1, 100)
>>> states.shape
(101, 2)
```
"""

from __future__ import annotations

import math
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._typing import Array, Float, Point
from ._validation import check_int, check_time_step, float_dtype
from .systems import AbstractSeparableSystem, AbstractSystem

__all__ = [
    "integrate",
    "step",
    "implicit_step",
    "IntegrationError",
    "METHODS",
    "ORDERS",
    "SYMPLECTIC_METHODS",
    "SEPARABLE_METHODS",
    "IMPLICIT_METHODS",
    "MAX_FIXED_POINT_ITERATIONS",
]

METHODS: tuple[str, ...] = (
    "euler",
    "rk4",
    "symplectic_euler",
    "stormer_verlet",
    "yoshida4",
    "yoshida6",
    "implicit_midpoint",
    "gauss_legendre4",
    "gauss_legendre6",
)
"""The names accepted by `integrate(..., method=...)`."""

ORDERS: dict[str, int] = {
    "euler": 1,
    "rk4": 4,
    "symplectic_euler": 1,
    "stormer_verlet": 2,
    "yoshida4": 4,
    "yoshida6": 6,
    "implicit_midpoint": 2,
    "gauss_legendre4": 4,
    "gauss_legendre6": 6,
}
"""The classical order of each method (global error $O(\\Delta t^{p})$)."""

SYMPLECTIC_METHODS: frozenset[str] = frozenset(
    {
        "symplectic_euler",
        "stormer_verlet",
        "yoshida4",
        "yoshida6",
        "implicit_midpoint",
        "gauss_legendre4",
        "gauss_legendre6",
    }
)
"""Methods whose step is a symplectic map for canonical Hamiltonian systems."""

SEPARABLE_METHODS: frozenset[str] = frozenset(
    {"symplectic_euler", "stormer_verlet", "yoshida4", "yoshida6"}
)
"""Explicit methods that need a separable system $H = T(p) + V(q)$."""

IMPLICIT_METHODS: frozenset[str] = frozenset(
    {"implicit_midpoint", "gauss_legendre4", "gauss_legendre6"}
)
"""Methods that solve their stage equations by (bounded) fixed-point iteration."""

MAX_FIXED_POINT_ITERATIONS = 50
"""The most fixed-point iterations per step of an implicit method (typically 6–15 are
used; needing more means the step is too large for the iteration to contract)."""

_RTOL_EPS = 128  # convergence: update ≤ 128·eps relative to the state's size


class IntegrationError(RuntimeError):
    """An integration failed: a non-finite state, or an implicit solve that did not
    converge. The message names the method, the step and the trajectory."""


# --- Butcher tableaux (NumPy float64 constants, cast once to the state's dtype) ----------

_S3 = math.sqrt(3.0)
_S15 = math.sqrt(15.0)
_GAUSS = {
    "implicit_midpoint": (np.array([[0.5]]), np.array([1.0])),
    "gauss_legendre4": (
        np.array([[0.25, 0.25 - _S3 / 6.0], [0.25 + _S3 / 6.0, 0.25]]),
        np.array([0.5, 0.5]),
    ),
    "gauss_legendre6": (
        np.array(
            [
                [5.0 / 36.0, 2.0 / 9.0 - _S15 / 15.0, 5.0 / 36.0 - _S15 / 30.0],
                [5.0 / 36.0 + _S15 / 24.0, 2.0 / 9.0, 5.0 / 36.0 - _S15 / 24.0],
                [5.0 / 36.0 + _S15 / 30.0, 2.0 / 9.0 + _S15 / 15.0, 5.0 / 36.0],
            ]
        ),
        np.array([5.0 / 18.0, 4.0 / 9.0, 5.0 / 18.0]),
    ),
}


def _triple_jump(order: int) -> tuple[float, float, float]:
    """Weights that raise a symmetric method of order `order` to order `order + 2`."""
    root = 2.0 ** (1.0 / (order + 1))
    outer = 1.0 / (2.0 - root)
    return (outer, 1.0 - 2.0 * outer, outer)


_YOSHIDA4 = np.array(_triple_jump(2))
_YOSHIDA6 = np.outer(np.array(_triple_jump(4)), _YOSHIDA4).reshape(-1)
_COMPOSITIONS = {"stormer_verlet": np.array([1.0]), "yoshida4": _YOSHIDA4, "yoshida6": _YOSHIDA6}


# --- one step of each method: (system, z, h) -> (z_new, converged) ---------------------


def _euler(system, z, h):
    return z + h * system.vector_field(z), jnp.array(True)


def _rk4(system, z, h):
    f = system.vector_field
    k1 = f(z)
    k2 = f(z + (0.5 * h) * k1)
    k3 = f(z + (0.5 * h) * k2)
    k4 = f(z + h * k3)
    return z + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4), jnp.array(True)


def _split(z):
    n = z.shape[0] // 2
    return z[:n], z[n:]


def _symplectic_euler(system, z, h):
    q, p = _split(z)
    p = p - h * system.grad_potential(q)
    q = q + h * system.grad_kinetic(p)
    return jnp.concatenate([q, p]), jnp.array(True)


def _verlet(system, q, p, h):
    p = p - (0.5 * h) * system.grad_potential(q)
    q = q + h * system.grad_kinetic(p)
    p = p - (0.5 * h) * system.grad_potential(q)
    return q, p


def _composition(weights):
    def stepper(system, z, h):
        q, p = _split(z)
        for w in weights:  # a fixed, short composition: unrolled at trace time
            q, p = _verlet(system, q, p, jnp.asarray(w, dtype=z.dtype) * h)
        return jnp.concatenate([q, p]), jnp.array(True)

    return stepper


def _gauss(A_np, b_np):
    s = b_np.shape[0]

    def stepper(system, z, h):
        dtype = z.dtype
        d = z.shape[0]
        A = jnp.asarray(A_np, dtype=dtype)
        b = jnp.asarray(b_np, dtype=dtype)
        f = system.vector_field

        def residual(K):  # K: (s, d) stage derivatives; G(K) = K - f(z + h A K) = 0
            return K - jax.vmap(f)(z[None, :] + h * (A @ K))

        K0 = jnp.broadcast_to(f(z)[None, :], (s, d))
        # The derivative of the stages with respect to z and h comes from the implicit
        # function theorem (lax.custom_root), not from differentiating the iterations.
        solve = partial(_solve_stages, z=lax.stop_gradient(z), h=lax.stop_gradient(h))
        K, last = lax.custom_root(residual, K0, solve, _tangent_solve, has_aux=True)
        converged = lax.stop_gradient(last) <= _RTOL_EPS * jnp.finfo(dtype).eps
        return z + h * (b @ K), converged

    return stepper


def _tangent_solve(g, y):
    jac = jax.jacfwd(g)(y).reshape(y.size, y.size)
    return jnp.linalg.solve(jac, y.reshape(-1)).reshape(y.shape)


def _solve_stages(residual, K0, *, z, h):
    """Solve `residual(K) = 0` for the stages by fixed-point iteration.

    The map `K ↦ K - residual(K) = f(z + h A K)` costs one evaluation of the vector field
    per stage and no linear algebra; it contracts at a rate of about
    `h·ρ(A)·Lip(f)` per iteration (a handful of iterations for the step sizes used in
    practice). It is bounded by `MAX_FIXED_POINT_ITERATIONS`.

    The change of an iteration is `h·max|ΔK|` relative to `max|z| + h·max|K|` (the size of
    the state). Iteration stops at the round-off floor — a change `≤ eps`, or a change
    `≤ 128·eps` that no longer decreases — and the solve has converged when its last
    change is `≤ 128·eps`. Returns the stages and that last change.
    """
    dtype = K0.dtype
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype=dtype)
    rtol = _RTOL_EPS * eps
    tiny = jnp.asarray(jnp.finfo(dtype).tiny, dtype=dtype)
    zsize = jnp.max(jnp.abs(z))

    def keep_going(carry):
        _, it, new, old = carry
        settled = (new <= eps) | ((new >= old) & (new <= rtol))
        return (it < MAX_FIXED_POINT_ITERATIONS) & ~settled & jnp.isfinite(new)

    def body(carry):
        K, it, new, _ = carry
        dK = -residual(K)
        K = K + dK
        change = h * jnp.max(jnp.abs(dK)) / (zsize + h * jnp.max(jnp.abs(K)) + tiny)
        return K, it + 1, change, new

    start = (
        K0,
        jnp.asarray(0, dtype=jnp.int32),
        jnp.asarray(jnp.finfo(dtype).max, dtype=dtype),  # "not yet iterated"
        jnp.asarray(jnp.inf, dtype=dtype),
    )
    K, _, last, _ = lax.while_loop(keep_going, body, start)
    return K, last  # (a float: custom_root cannot carry a boolean auxiliary output)


_STEPPERS = {
    "euler": _euler,
    "rk4": _rk4,
    "symplectic_euler": _symplectic_euler,
    **{name: _composition(w) for name, w in _COMPOSITIONS.items()},
    **{name: _gauss(A, b) for name, (A, b) in _GAUSS.items()},
}


# --- argument checks -------------------------------------------------------------------


def _check_system_method(system, method) -> None:
    if not isinstance(system, AbstractSystem):
        raise TypeError(
            f"system must be a geomlearn.systems.AbstractSystem, got {type(system).__name__}"
        )
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method in SEPARABLE_METHODS and not (
        system.separable and isinstance(system, AbstractSeparableSystem)
    ):
        raise ValueError(
            f"method {method!r} needs a separable canonical system H = T(p) + V(q); "
            f"{type(system).__name__} is not separable — use 'implicit_midpoint', "
            f"'gauss_legendre4' or 'gauss_legendre6'"
        )


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


# --- the jit-compiled core -------------------------------------------------------------


@eqx.filter_jit
def _integrate_batch(system, z0, dt, substeps, n_steps, method):
    """`z0` (B, d) → states (B, n_steps + 1, d), first non-finite and first unconverged
    step per trajectory (-1 where none)."""
    stepper = _STEPPERS[method]
    h = dt / substeps.astype(z0.dtype)
    none = jnp.asarray(-1, dtype=jnp.int32)

    def trajectory(z_init):
        def substep(_, carry):
            z, ok = carry
            z, converged = stepper(system, z, h)
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


def _report(method, dt, substeps, bad, failed) -> None:
    bad, failed = np.asarray(bad, dtype=np.int64), np.asarray(failed, dtype=np.int64)
    big = np.iinfo(np.int64).max
    first_bad = np.where(bad >= 0, bad, big)
    first_failed = np.where(failed >= 0, failed, big)
    where = f"(method {method!r}, dt={dt}, substeps={substeps})"
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


def integrate(
    system: AbstractSystem,
    z0: Float[Array, "*B d"],
    dt: float,
    n_steps: int,
    *,
    method: str = "implicit_midpoint",
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
    - `method`: one of `METHODS` (default `"implicit_midpoint"`).
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
    _check_system_method(system, method)
    dt = check_time_step(dt)
    n_steps = check_int("n_steps", n_steps, minimum=0)
    substeps = check_int("substeps", substeps, minimum=1)
    z0 = _as_states(system, z0)
    single = z0.ndim == 1
    batch = z0[None, :] if single else z0

    traced = isinstance(batch, jax.core.Tracer)
    if not traced:
        finite = np.isfinite(np.asarray(batch)).all(axis=-1)
        if not finite.all():
            i = int(np.argmin(finite))
            raise ValueError(f"z0 has a non-finite entry (NaN or inf) in trajectory {i}")

    states, bad, failed = _integrate_batch(
        system,
        batch,
        jnp.asarray(dt, dtype=batch.dtype),
        jnp.asarray(substeps, dtype=jnp.int32),
        n_steps,
        method,
    )
    if traced:  # inside a user's transformation: a runtime check instead of an eager one
        states = eqx.error_if(
            states,
            jnp.any(failed >= 0),
            f"integrate: an implicit solve did not converge ({method}); reduce dt",
        )
        states = eqx.error_if(
            states,
            jnp.any(bad >= 0),
            f"integrate: non-finite state during integration ({method}); reduce dt",
        )
    else:
        _report(method, dt, substeps, bad, failed)
    return states[0] if single else states


def step(system: AbstractSystem, z: Point, dt, *, method: str = "implicit_midpoint") -> Point:
    r"""One step of size `dt` of `method` from the single state `z` `(dim,)`.

    Unlike `integrate` this is a plain traceable function (use it under `jit`, `vmap`,
    `lax.scan`): `dt` may be a traced scalar and is not validated. An implicit solve that
    does not converge raises through `eqx.error_if` at run time.

    **Returns:** the next state, same shape and dtype as `z`.
    """
    _check_system_method(system, method)
    z = jnp.asarray(z)
    if z.shape != (system.dim,):
        raise ValueError(
            f"step expects one state of shape ({system.dim},), got shape {z.shape}"
        )
    if not jnp.issubdtype(z.dtype, jnp.floating):
        raise TypeError(f"z must have a floating dtype, got {z.dtype}")
    z_new, converged = _STEPPERS[method](system, z, jnp.asarray(dt, dtype=z.dtype))
    if method in IMPLICIT_METHODS:
        z_new = eqx.error_if(
            z_new, ~converged, f"step: the implicit solve of {method!r} did not converge"
        )
    return z_new


class _Field:
    """A vector field as the `system` argument of a stepper (only `vector_field` is read)."""

    def __init__(self, vector_field):
        self.vector_field = vector_field


def implicit_step(vector_field, z: Point, dt, *, method: str = "implicit_midpoint",
                  on_failure: str = "raise") -> Point:
    r"""One step of an implicit Gauss–Legendre method for any vector field, solved to round-off.

    The stage equations of `method` (`"implicit_midpoint"`, `"gauss_legendre4"` or
    `"gauss_legendre6"`) for $\dot z = f(z)$ are solved by the same checked fixed-point
    iteration as `integrate` (stopping at the round-off floor, at most
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
    if on_failure not in ("raise", "nan"):
        raise ValueError(f"on_failure must be 'raise' or 'nan', got {on_failure!r}")
    if method not in IMPLICIT_METHODS:
        raise ValueError(f"method must be one of {sorted(IMPLICIT_METHODS)}, got {method!r}")
    z = jnp.asarray(z)
    if z.ndim != 1:
        raise ValueError(f"implicit_step expects one state of shape (d,), got shape {z.shape}")
    if not jnp.issubdtype(z.dtype, jnp.floating):
        raise TypeError(f"z must have a floating dtype, got {z.dtype}")
    z_new, converged = _STEPPERS[method](_Field(vector_field), z, jnp.asarray(dt, dtype=z.dtype))
    if on_failure == "nan":
        return jnp.where(converged, z_new, jnp.asarray(jnp.nan, z_new.dtype))
    return eqx.error_if(
        z_new,
        ~converged,
        f"implicit_step: the {method} solve did not converge within "
        f"{MAX_FIXED_POINT_ITERATIONS} fixed-point iterations; reduce dt",
    )
