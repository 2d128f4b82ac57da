r"""The reduced Hamiltonian system of a reduction, $\dot y = \mathbb{J}_{2n}\nabla(H\circ
\Psi^d)(y)$, and the measures of a reduction: the immersion residual of its decoder, its
projection, reduction and latent vector-field errors, and the loop action
$\oint p\cdot dq$ of an orbit (with `orbit_period`, the period of sampled data).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, Point, Scalar
from ..geometry import symplectic_matrix
from ..systems import AbstractHamiltonianSystem, AbstractSystem

__all__ = [
    "ReducedHamiltonianSystem",
    "symplectic_inverse",
    "immersion_residual",
    "projection_error",
    "projection_error_parts",
    "reduction_error",
    "latent_vector_field_error",
    "orbit_period",
    "loop_action",
]


def symplectic_inverse(D: Float[Array, "2N 2n"]) -> Float[Array, "2n 2N"]:
    r"""$D^+ = \mathbb{J}_{2n}^\top D^\top \mathbb{J}_{2N}$, the left inverse ($D^+ D =
    I$) of the Jacobian $D$ of a symplectic immersion."""
    N2, n2 = D.shape
    J_N = symplectic_matrix(N2 // 2, D.dtype)
    J_n = symplectic_matrix(n2 // 2, D.dtype)
    return J_n.T @ D.T @ J_N


def immersion_residual(decode, y: Float[Array, " 2n"], full_dim: int | None = None) -> Scalar:
    r"""$\lVert (D\Psi^d)^\top \mathbb{J}_{2N} D\Psi^d - \mathbb{J}_{2n}\rVert_F /
    \lVert\mathbb{J}_{2n}\rVert_F$ at `y`: zero for a symplectic immersion (`decode` maps
    `(2n,)` to `(2N,)`; its Jacobian by forward-mode differentiation)."""
    D = jax.jacfwd(decode)(y)
    n2 = y.shape[0]
    J_N = symplectic_matrix(D.shape[0] // 2, y.dtype)
    J_n = symplectic_matrix(n2 // 2, y.dtype)
    return jnp.linalg.norm(D.T @ J_N @ D - J_n) / jnp.linalg.norm(J_n)


def projection_error(reduction, X: Float[Array, "*B 2N"]) -> Scalar:
    r"""$\lVert \Psi^d(\Psi^e(X)) - X\rVert_F / \lVert X\rVert_F$ over all states of `X`
    (rows; any leading axes)."""
    X = jnp.asarray(X)
    flat = X.reshape(-1, X.shape[-1])
    rec = jax.vmap(reduction)(flat)
    return jnp.linalg.norm(rec - flat) / jnp.linalg.norm(flat)


def reduction_error(reduction, full: Float[Array, "*B 2N"], reduced: Float[Array, "*B 2n"]) -> Scalar:
    r"""$\lVert \Psi^d(Y) - X\rVert_F / \lVert X\rVert_F$: a reduced solution `reduced`
    decoded against the full solution `full` on the same time grid."""
    X = jnp.asarray(full)
    Y = jnp.asarray(reduced)
    flatX = X.reshape(-1, X.shape[-1])
    dec = jax.vmap(reduction.decode)(Y.reshape(-1, Y.shape[-1]))
    return jnp.linalg.norm(dec - flatX) / jnp.linalg.norm(flatX)


def projection_error_parts(reduction, X: Float[Array, "*B 2N"]) -> tuple[Scalar, Scalar]:
    r"""The projection error of the positions and of the momenta apart,
    $\lVert \hat Q - Q\rVert_F / \lVert Q - \bar Q\rVert_F$ and
    $\lVert \hat P - P\rVert_F / \lVert P - \bar P\rVert_F$, with $\hat X =
    \Psi^d(\Psi^e(X))$ and $\bar Q$, $\bar P$ the snapshot means.

    Each block is measured against its own *variation*: a reduction that keeps the
    constant mean of $q$ but gets the motion wrong scores badly here, where the plain
    [`projection_error`][geomlearn.reduction.projection_error] (relative to
    $\lVert X\rVert_F$, dominated by that mean) can look small.

    **Returns:** `(q_error, p_error)`.
    """
    X = jnp.asarray(X)
    flat = X.reshape(-1, X.shape[-1])
    N = flat.shape[-1] // 2
    rec = jax.vmap(reduction)(flat)
    dev = flat - flat.mean(axis=0, keepdims=True)

    def part(s):
        return jnp.linalg.norm(rec[:, s] - flat[:, s]) / jnp.linalg.norm(dev[:, s])

    return part(slice(0, N)), part(slice(N, None))


def latent_vector_field_error(reduction, system, X: Float[Array, "*B 2N"]) -> Scalar:
    r"""How well the reduced Hamiltonian field matches the encoded dynamics on the data:

    $$\frac{\lVert \mathbb{J}_{2n}\nabla\tilde H(\Psi^e(x_i)) - D\Psi^e(x_i)\,X_H(x_i)
    \rVert_F}{\lVert D\Psi^e(x_i)\,X_H(x_i)\rVert_F}$$

    over the states $x_i$ of `X` ($\tilde H = H\circ\Psi^d$; $D\Psi^e X_H = \frac{d}{dt}
    \Psi^e(x(t))$ by one Jacobian–vector product). Zero when the reduced system moves the
    codes exactly as the full system moves the data; a reduced flow with a large error
    here cannot follow the data, however small the projection error.
    """
    X = jnp.asarray(X)
    flat = X.reshape(-1, X.shape[-1])
    reduced = ReducedHamiltonianSystem(system, reduction)

    def one(x):
        y, ydot = jax.jvp(reduction.encode, (x,), (system.vector_field(x),))
        return reduced.vector_field(y) - ydot, ydot

    diff, ydot = jax.vmap(one)(flat)
    return jnp.linalg.norm(diff) / jnp.linalg.norm(ydot)


def orbit_period(X: Float[Array, "K 2N"], *, tolerance: float = 0.1) -> int | None:
    r"""The first return of a sampled trajectory to its initial state, in steps, or
    `None` when it does not return.

    With $d_k = \lVert x_k - x_0\rVert$: the trajectory first leaves $x_0$ (the first
    $k_1$ with $d_{k_1} \ge \tfrac12\max d$), then its first dip back below
    `tolerance`$\cdot\max d$ is found, and the period is the step $K$ of the smallest
    $d_k$ in that dip. Returns `None` when $d$ never dips below the tolerance after
    leaving (not periodic within the data). The period is resolved to one time step.
    """
    Z = np.asarray(X, dtype=np.float64)
    d = np.linalg.norm(Z - Z[0], axis=-1)
    dmax = float(d.max()) if d.size else 0.0
    if not dmax > 0:
        return None
    k1 = int(np.argmax(d >= 0.5 * dmax))
    near = np.nonzero(d[k1:] <= tolerance * dmax)[0]
    if near.size == 0:
        return None
    start = end = k1 + int(near[0])
    while end < d.size and d[end] <= tolerance * dmax:
        end += 1
    return start + int(np.argmin(d[start:end]))


def loop_action(Z: Float[Array, "K 2m"]) -> float:
    r"""The action $\oint p\cdot dq$ of the closed polygon through the canonical states
    `Z = (q, p)` (rows, in order; the last joined back to the first), by the trapezoidal
    rule on each segment, $\sum_k \tfrac12(p_k + p_{k+1})\cdot(q_{k+1} - q_k)$.

    For one period of a periodic orbit this is the symplectic area it encloses. A
    symplectic immersion $\Psi^d$ preserves it: $\oint_{\Psi^d\circ\gamma} p\cdot dq
    = \oint_\gamma \tilde p\cdot d\tilde q$ for every closed curve $\gamma$ (the
    pull-back of $dq\wedge dp$ is $d\tilde q\wedge d\tilde p$; a translation adds an
    exact form, which integrates to zero).
    """
    Z = np.asarray(Z, dtype=np.float64)
    if Z.ndim != 2 or Z.shape[-1] % 2:
        raise ValueError(f"expected canonical states of shape (K, 2m), got {Z.shape}")
    m = Z.shape[-1] // 2
    q, p = Z[:, :m], Z[:, m:]
    dq = np.roll(q, -1, axis=0) - q
    pm = 0.5 * (p + np.roll(p, -1, axis=0))
    return float(np.sum(pm * dq))


class ReducedHamiltonianSystem(AbstractHamiltonianSystem):
    r"""The reduced system $\dot y = \mathbb{J}_{2n}\nabla\tilde H(y)$, $\tilde H = H\circ\Psi^d$.

    The vector field is $\mathbb{J}_{2n} D^\top \nabla H(\Psi^d(y))$, $D = D\Psi^d(y)$,
    computed by one reverse-mode pass through the decoder (a vector–Jacobian product:
    the $2N \times 2n$ Jacobian is never formed, so a step of an implicit method costs a
    few decoder evaluations and gradients, nothing of order $N \cdot 2n$ more). It is
    Hamiltonian, so symplectic integrators conserve $\tilde H$ as well as they conserve
    any energy. Usable with `geomlearn.integrators.integrate` (the implicit methods; it
    is not separable).

    It can also be written $D^+ X_H(\Psi^d(y))$ with $D^+ = \mathbb{J}_{2n}^\top
    D^\top\mathbb{J}_{2N}$ (`projected_vector_field`), but that holds for **every**
    decoder ($\mathbb{J}_{2N}^2 = -I$), immersion or not, so it checks nothing. What the
    immersion property adds is $D^+D = I$: where the full field is tangent to the
    decoder's image, $X_H(\Psi^d(y)) = D v$, the reduced field is exactly $v$, and the
    decoded reduced solution *is* the full one. `tangent_defect` measures how far the
    full field is from that, $\lVert D\,\dot y - X_H(\Psi^d(y))\rVert /
    \lVert X_H(\Psi^d(y))\rVert$ (zero on an invariant image).

    **Arguments:**

    - `system`: the full canonical system (`canonical`, `dim = 2N`).
    - `reduction`: a [`PSD`][geomlearn.reduction.PSD], a trained
      [`SymplecticAutoencoder`][geomlearn.reduction.SymplecticAutoencoder] or any module with
      `encode`, `decode`, `full_dim`, `reduced_dim`.

    **Default initial conditions:** the full system's, encoded.

    ```python
    toda = TodaLattice()
    X = integrate(toda, toda.default_initial_conditions()[0], 0.1, 1000)
    psd = proper_symplectic_decomposition(X, 8)
    reduced = ReducedHamiltonianSystem(toda, psd)
    Y = integrate(reduced, psd.encode(X[0]), 0.1, 1000)
    reduction_error(psd, X, Y)
    ```
    """

    system: AbstractSystem
    reduction: eqx.Module

    def __init__(self, system, reduction):
        if not isinstance(system, AbstractSystem) or not system.canonical:
            raise TypeError(
                f"system must be a canonical geomlearn system, got {type(system).__name__}"
            )
        if reduction.full_dim != system.dim:
            raise ValueError(
                f"the reduction has full_dim={reduction.full_dim}, the system dim={system.dim}"
            )
        self.system = system
        self.reduction = reduction

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self.reduction.reduced_dim

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        n = self.dim // 2
        return tuple(f"q~{i + 1}" for i in range(n)) + tuple(f"p~{i + 1}" for i in range(n))

    def hamiltonian(self, y: Point) -> Scalar:
        r"""$\tilde H(y) = H(\Psi^d(y))$."""
        y = self._check_point(y)
        return self.system.hamiltonian(self.reduction.decode(y))

    def projected_vector_field(self, y: Point) -> Point:
        r"""$(D\Psi^d(y))^+ X_H(\Psi^d(y))$: algebraically the same as `vector_field`
        for every decoder (see the class notes); it forms the Jacobian, so it is slow."""
        y = self._check_point(y)
        z, D = self.reduction.decode(y), jax.jacfwd(self.reduction.decode)(y)
        return symplectic_inverse(D) @ self.system.vector_field(z)

    def tangent_defect(self, y: Point) -> Scalar:
        r"""$\lVert D\Psi^d(y)\,\dot y - X_H(\Psi^d(y))\rVert /
        \lVert X_H(\Psi^d(y))\rVert$ with $\dot y$ the reduced vector field: zero
        exactly when the full vector field at $\Psi^d(y)$ is the decoded reduced one
        (the decoder's image is invariant there). One Jacobian–vector product."""
        y = self._check_point(y)
        z, pushed = jax.jvp(self.reduction.decode, (y,), (self.vector_field(y),))
        f = self.system.vector_field(z)
        return jnp.linalg.norm(pushed - f) / jnp.linalg.norm(f)

    def default_initial_conditions(self, dtype=None):
        z0 = self.system.default_initial_conditions(dtype)
        return jax.vmap(self.reduction.encode)(z0)
