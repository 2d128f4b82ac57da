r"""Gauss–Legendre collocation methods (implicit midpoint is the one-stage one), with a
checked fixed-point solve of their stage equations.

An $s$-stage method with Butcher tableau $(A, b)$ takes the step $z_{n+1} = z_n +
h\sum_i b_i K_i$, where the stage derivatives $K$ solve $K_i = f(z_n + h\sum_j a_{ij}
K_j)$. These methods are symplectic for canonical Hamiltonian systems and preserve
every quadratic invariant exactly (the rigid body's Casimir $|z|^2$ and energy), up to
the accuracy of the stage solve and round-off (E. Hairer, C. Lubich, G. Wanner,
*Geometric Numerical Integration*, 2nd ed., Springer 2006, chapters II, VI).

The stages are found by fixed-point iteration from $K_i = f(z_n)$, down to the
round-off floor. It needs no linear algebra (no maintained JAX library provides these
methods, so it is written here) and contracts when $h\,\rho(A)\,\mathrm{Lip}(f) < 1$,
which holds for any step that resolves the dynamics; it is bounded by
`MAX_FIXED_POINT_ITERATIONS`. A step reports whether its last update changed the state
by at most $128\,\varepsilon\,(|z| + h|K| + 1)$: relative to the state's size with an
absolute floor (a unit state size), so that a state near zero — near an equilibrium of a
learned field, where the field's rounding does not shrink with the state — is not judged
against its own tiny size. The test reads only the state's own values, so a state gets
the same verdict batched and alone. The drivers turn a step that did not converge into
an error, so an unconverged state is never returned silently. Derivatives of a step
(e.g. its Jacobian, to check symplecticity) follow from the implicit function theorem
(`jax.lax.custom_root`), not from differentiating the iterations.
"""

from __future__ import annotations

import math
from functools import partial
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._base import AbstractImplicitIntegrator

__all__ = [
    "MAX_FIXED_POINT_ITERATIONS",
    "AbstractGaussLegendre",
    "ImplicitMidpoint",
    "GaussLegendre4",
    "GaussLegendre6",
]

MAX_FIXED_POINT_ITERATIONS = 50
"""The most fixed-point iterations per step of an implicit method (typically 6–15 are
used; needing more means the step is too large for the iteration to contract)."""

_RTOL_EPS = 128  # convergence: update ≤ 128·eps relative to the state's size plus _SCALE
_SCALE = 1.0  # the absolute floor of the convergence test, a unit state size

_S3 = math.sqrt(3.0)
_S15 = math.sqrt(15.0)


class AbstractGaussLegendre(AbstractImplicitIntegrator):
    r"""A Gauss–Legendre method given by its Butcher tableau: `tableau_a` $A$
    `(s, s)` and `tableau_b` $b$ `(s,)` (class variables, NumPy float64, cast once to
    the state's dtype)."""

    symplectic: ClassVar[bool] = True
    tableau_a: eqx.AbstractClassVar[np.ndarray]
    tableau_b: eqx.AbstractClassVar[np.ndarray]

    def solve(self, vector_field, z, h):
        dtype = z.dtype
        s, d = self.tableau_b.shape[0], z.shape[0]
        A = jnp.asarray(self.tableau_a, dtype=dtype)
        b = jnp.asarray(self.tableau_b, dtype=dtype)
        f = vector_field

        def residual(K):  # K: (s, d) stage derivatives; G(K) = K - f(z + h A K) = 0
            return K - jax.vmap(f)(z[None, :] + h * (A @ K))

        K0 = jnp.broadcast_to(f(z)[None, :], (s, d))
        # The derivative of the stages with respect to z and h comes from the implicit
        # function theorem (lax.custom_root), not from differentiating the iterations.
        solve = partial(_solve_stages, z=lax.stop_gradient(z), h=lax.stop_gradient(h))
        K, last = lax.custom_root(residual, K0, solve, _tangent_solve, has_aux=True)
        converged = lax.stop_gradient(last) <= _RTOL_EPS * jnp.finfo(dtype).eps
        return z + h * (b @ K), converged


class ImplicitMidpoint(AbstractGaussLegendre):
    r"""The implicit midpoint rule $z_{n+1} = z_n + h f\big(\tfrac12(z_n + z_{n+1})\big)$,
    the one-stage Gauss–Legendre method (order 2)."""

    name: ClassVar[str] = "implicit_midpoint"
    order: ClassVar[int] = 2
    tableau_a: ClassVar[np.ndarray] = np.array([[0.5]])
    tableau_b: ClassVar[np.ndarray] = np.array([1.0])


class GaussLegendre4(AbstractGaussLegendre):
    r"""The two-stage Gauss–Legendre method (order 4)."""

    name: ClassVar[str] = "gauss_legendre4"
    order: ClassVar[int] = 4
    tableau_a: ClassVar[np.ndarray] = np.array(
        [[0.25, 0.25 - _S3 / 6.0], [0.25 + _S3 / 6.0, 0.25]]
    )
    tableau_b: ClassVar[np.ndarray] = np.array([0.5, 0.5])


class GaussLegendre6(AbstractGaussLegendre):
    r"""The three-stage Gauss–Legendre method (order 6)."""

    name: ClassVar[str] = "gauss_legendre6"
    order: ClassVar[int] = 6
    tableau_a: ClassVar[np.ndarray] = np.array(
        [
            [5.0 / 36.0, 2.0 / 9.0 - _S15 / 15.0, 5.0 / 36.0 - _S15 / 30.0],
            [5.0 / 36.0 + _S15 / 24.0, 2.0 / 9.0, 5.0 / 36.0 - _S15 / 24.0],
            [5.0 / 36.0 + _S15 / 30.0, 2.0 / 9.0 + _S15 / 15.0, 5.0 / 36.0],
        ]
    )
    tableau_b: ClassVar[np.ndarray] = np.array([5.0 / 18.0, 4.0 / 9.0, 5.0 / 18.0])


def _tangent_solve(g, y):
    jac = jax.jacfwd(g)(y).reshape(y.size, y.size)
    return jnp.linalg.solve(jac, y.reshape(-1)).reshape(y.shape)


def _solve_stages(residual, K0, *, z, h):
    """Solve `residual(K) = 0` for the stages by fixed-point iteration.

    The map `K ↦ K - residual(K) = f(z + h A K)` costs one evaluation of the vector field
    per stage and no linear algebra; it contracts at a rate of about
    `h·ρ(A)·Lip(f)` per iteration (a handful of iterations for the step sizes used in
    practice). It is bounded by `MAX_FIXED_POINT_ITERATIONS`.

    The change of an iteration is `h·max|ΔK|`; the state's size is `max|z| + h·max|K|`.
    Iteration stops at the round-off floor — a change `≤ eps` of the size, or a change
    `≤ 128·eps·(size + 1)` that no longer decreases — and the solve has converged when
    its last change is `≤ 128·eps·(size + 1)`. Returns the stages and that last change
    divided by `size + 1`. Every quantity is this state's own: under `vmap` the loop runs
    until every state has stopped, each frozen where its own test stopped it.
    """
    dtype = K0.dtype
    eps = jnp.asarray(jnp.finfo(dtype).eps, dtype=dtype)
    rtol = _RTOL_EPS * eps
    scale = jnp.asarray(_SCALE, dtype=dtype)
    zsize = jnp.max(jnp.abs(z))

    def size(K):
        return zsize + h * jnp.max(jnp.abs(K))

    def keep_going(carry):
        K, it, new, old = carry
        settled = (new <= eps * size(K)) | ((new >= old) & (new <= rtol * (size(K) + scale)))
        return (it < MAX_FIXED_POINT_ITERATIONS) & ~settled & jnp.isfinite(new)

    def body(carry):
        K, it, new, _ = carry
        dK = -residual(K)
        return K + dK, it + 1, h * jnp.max(jnp.abs(dK)), new

    start = (
        K0,
        jnp.asarray(0, dtype=jnp.int32),
        jnp.asarray(jnp.finfo(dtype).max, dtype=dtype),  # "not yet iterated"
        jnp.asarray(jnp.inf, dtype=dtype),
    )
    K, _, last, _ = lax.while_loop(keep_going, body, start)
    # (a float: custom_root cannot carry a boolean auxiliary output)
    return K, last / (size(K) + scale)
