r"""Structure-preserving model reduction of large Hamiltonian systems.

A *reduction* of a canonical system on $\mathbb{R}^{2N}$ is a pair of maps, an encoder
$\Psi^e: \mathbb{R}^{2N} \to \mathbb{R}^{2n}$ and a decoder $\Psi^d: \mathbb{R}^{2n} \to
\mathbb{R}^{2N}$, $n \ll N$. It is **symplectic** when the decoder is a *symplectic
immersion*,

$$ (D\Psi^d(y))^\top\, \mathbb{J}_{2N}\, D\Psi^d(y) = \mathbb{J}_{2n}
\quad\text{for every } y, $$

so that the reduced system with Hamiltonian $\tilde H = H \circ \Psi^d$ is again
canonical and conserves $\tilde H$ (Peng & Mohseni, *Symplectic model reduction of
Hamiltonian systems*, SIAM J. Sci. Comput. 38 (2016); Buchfink, Glas & Haasdonk,
*Symplectic model reduction of Hamiltonian systems on nonlinear manifolds*, 2023).

This module has

- [`PSD`][geomlearn.reduction.PSD] and
  [`proper_symplectic_decomposition`][geomlearn.reduction.proper_symplectic_decomposition]:
  the *cotangent lift* $\Psi^d(y) = \bar x + A y$, $A = \operatorname{diag}(\Phi,
  \Phi)$, with $\Phi$ the leading left singular vectors of the snapshot matrix $[Q \mid
  P]$ and a reference state $\bar x$ (zero: the plain PSD; the snapshot mean,
  [`snapshot_mean`][geomlearn.reduction.snapshot_mean]: the centred PSD);
- [`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem]: the reduced
  system of a full system and any reduction (linear or a
  [`SymplecticAutoencoder`][geomlearn.models.SymplecticAutoencoder]), integrable by `integrate`;
- error measures: [`projection_error`][geomlearn.reduction.projection_error] (and its
  position and momentum parts,
  [`projection_error_parts`][geomlearn.reduction.projection_error_parts]),
  [`reduction_error`][geomlearn.reduction.reduction_error], [`latent_vector_field_error`][geomlearn.reduction.latent_vector_field_error]
  (the reduced field against the encoded dynamics), and
  [`immersion_residual`][geomlearn.reduction.immersion_residual] (the defect of the
  identity above);
- the symplectic area of an orbit: [`orbit_period`][geomlearn.reduction.orbit_period]
  and [`loop_action`][geomlearn.reduction.loop_action], $\oint p\cdot dq$ over one
  period — which a latent Hamiltonian flow behind a symplectic decoder must reproduce in
  the latent space to follow the data.

`geomlearn.evaluate_reduction` measures a reduction against a full solution.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._typing import Array, Float, Point, Scalar
from ._validation import check_int, check_point
from .geometry import symplectic_matrix
from .systems import AbstractHamiltonianSystem, AbstractSystem

__all__ = [
    "PSD",
    "AbstractReduction",
    "ReducedHamiltonianSystem",
    "immersion_residual",
    "loop_action",
    "orbit_period",
    "projection_error",
    "projection_error_parts",
    "latent_vector_field_error",
    "proper_symplectic_decomposition",
    "reduction_error",
    "snapshot_mean",
    "symplectic_inverse",
]


class AbstractReduction(eqx.Module):
    """An encoder/decoder pair between $\\mathbb{R}^{2N}$ (`full_dim`) and
    $\\mathbb{R}^{2n}$ (`reduced_dim`): `encode(z)`, `decode(y)` on one point each, and
    `__call__(z) = decode(encode(z))`."""

    full_dim: eqx.AbstractVar[int]
    reduced_dim: eqx.AbstractVar[int]

    def encode(self, z: Point) -> Point:
        raise NotImplementedError

    def decode(self, y: Point) -> Point:
        raise NotImplementedError

    def __call__(self, z: Point) -> Point:
        return self.decode(self.encode(z))


class PSD(AbstractReduction):
    r"""The cotangent-lift proper symplectic decomposition: a linear (or affine)
    symplectic reduction.

    With a basis $\Phi \in \mathbb{R}^{N\times n}$, $\Phi^\top\Phi = I_n$, and a
    reference state $\bar x = (\bar q, \bar p) \in \mathbb{R}^{2N}$,

    $$\Psi^e(q, p) = (\Phi^\top (q - \bar q),\ \Phi^\top (p - \bar p)), \qquad
    \Psi^d(\tilde q, \tilde p) = \bar x + (\Phi\tilde q,\ \Phi\tilde p) = \bar x + A y,\quad
    A = \begin{pmatrix}\Phi & 0\\ 0 & \Phi\end{pmatrix}.$$

    $A^\top \mathbb{J}_{2N} A = \mathbb{J}_{2n}$ holds exactly because $\Phi^\top\Phi =
    I$, and the encoder is the symplectic inverse $A^+ = \mathbb{J}_{2n}^\top A^\top
    \mathbb{J}_{2N} = A^\top$ (Peng & Mohseni 2016). A translation is a symplectic map,
    so the affine decoder is a symplectic immersion for every $\bar x$; with $\bar x = 0$
    (the default) it is the plain, linear PSD. Build one from snapshots with
    [`proper_symplectic_decomposition`][geomlearn.reduction.proper_symplectic_decomposition].

    **Arguments:** `basis`, the matrix $\Phi$ `(N, n)` (orthonormal columns; not
    checked); `reference`, $\bar x$ `(2N,)` (default zero).
    """

    basis: Float[Array, "N n"]
    reference: Float[Array, " 2N"]
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)

    def __init__(self, basis, reference=None):
        basis = jnp.asarray(basis)
        if basis.ndim != 2 or basis.shape[1] > basis.shape[0]:
            raise ValueError(f"basis must be an (N, n) matrix with n <= N, got {basis.shape}")
        self.basis = basis
        self.full_dim = 2 * basis.shape[0]
        self.reduced_dim = 2 * basis.shape[1]
        if reference is None:
            reference = jnp.zeros(self.full_dim, basis.dtype)
        reference = jnp.asarray(reference)
        if reference.shape != (self.full_dim,):
            raise ValueError(
                f"reference must be one state of shape ({self.full_dim},), got {reference.shape}"
            )
        self.reference = reference

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        r"""$(\Phi^\top (q - \bar q), \Phi^\top (p - \bar p))$ for one state `z = (q, p)`."""
        check_point("PSD.encode", z, self.full_dim)
        N = self.full_dim // 2
        Phi = self.basis.astype(z.dtype)
        z = z - self.reference.astype(z.dtype)
        return jnp.concatenate([Phi.T @ z[:N], Phi.T @ z[N:]])

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        r"""$\bar x + (\Phi \tilde q, \Phi \tilde p)$ for one reduced state `y`."""
        check_point("PSD.decode", y, self.reduced_dim)
        n = self.reduced_dim // 2
        Phi = self.basis.astype(y.dtype)
        return self.reference.astype(y.dtype) + jnp.concatenate([Phi @ y[:n], Phi @ y[n:]])

    def decoder_matrix(self) -> Float[Array, "2N 2n"]:
        r"""$A = \operatorname{diag}(\Phi, \Phi)$ (the Jacobian of the decoder)."""
        Phi = self.basis
        Z = jnp.zeros_like(Phi)
        return jnp.concatenate(
            [jnp.concatenate([Phi, Z], axis=1), jnp.concatenate([Z, Phi], axis=1)], axis=0
        )


def snapshot_mean(snapshots: Float[Array, "*B 2N"]) -> Float[Array, " 2N"]:
    r"""$\bar x = \frac1M\sum_i x_i$, the mean of the snapshots (rows; any leading axes):
    the reference state of a centred reduction. It removes what the data keep constant on
    average — for the Toda lattice the conserved mean position $\frac1N\sum_i q_i$,
    which otherwise takes the first PSD mode."""
    X = jnp.asarray(snapshots)
    return X.reshape(-1, X.shape[-1]).mean(axis=0)


def proper_symplectic_decomposition(
    snapshots: Float[Array, "M 2N"], reduced_dim: int, *, centred: bool = False,
    reference=None,
) -> PSD:
    r"""The cotangent-lift PSD of `snapshots` (one state per row) of size `reduced_dim = 2n`.

    One thin SVD of the snapshot matrix $[Q \mid P] \in \mathbb{R}^{N\times 2M}$ (positions
    and momenta of all snapshots side by side, each minus the reference state $\bar x$);
    $\Phi$ is its $n$ leading left singular vectors, the $n$-dimensional subspace that best
    represents positions *and* momenta at once (Peng & Mohseni 2016, Algorithm 1). The
    SVD is computed in the snapshots' dtype.

    **Arguments:** `snapshots` `(M, 2N)` (or `(B, M, 2N)`, flattened), `reduced_dim` even,
    `2 ≤ reduced_dim ≤ min(2N, 4M)`; `centred`: `True` takes the snapshot mean
    ([`snapshot_mean`][geomlearn.reduction.snapshot_mean]) as $\bar x$ (the *centred*
    PSD), `False` (default) $\bar x = 0$ (the plain PSD); or `reference`, a given
    $\bar x$ `(2N,)` (not with `centred=True`).

    **Returns:** a [`PSD`][geomlearn.reduction.PSD].
    """
    X = jnp.asarray(snapshots)
    X = X.reshape(-1, X.shape[-1])
    full_dim = X.shape[-1]
    reduced_dim = check_int("reduced_dim", reduced_dim, minimum=2)
    if full_dim % 2 or reduced_dim % 2:
        raise ValueError(
            f"PSD needs even full and reduced dimensions, got {full_dim} and {reduced_dim}"
        )
    N, n = full_dim // 2, reduced_dim // 2
    if n > min(N, 2 * X.shape[0]):
        raise ValueError(f"reduced_dim={reduced_dim} is too large for snapshots {X.shape}")
    if not isinstance(centred, bool):
        raise TypeError(f"centred must be a bool, got {centred!r}")
    if centred and reference is not None:
        raise ValueError("give either centred=True or a reference state, not both")
    ref = snapshot_mean(X) if centred else (
        jnp.zeros(full_dim, X.dtype) if reference is None else jnp.asarray(reference, X.dtype))
    if ref.shape != (full_dim,):
        raise ValueError(f"reference must be one state of shape ({full_dim},), got {ref.shape}")
    C = X - ref[None, :]
    QP = jnp.concatenate([C[:, :N].T, C[:, N:].T], axis=1)  # (N, 2M)
    U, _, _ = jnp.linalg.svd(QP, full_matrices=False)
    return PSD(U[:, :n], ref)


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
      [`SymplecticAutoencoder`][geomlearn.models.SymplecticAutoencoder] or any module with
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


# Names that lived here before the evaluation of reductions moved to geomlearn.evaluation
# (which imports this module, so this module cannot re-export them).
_MOVED_TO_EVALUATION = frozenset(
    {"evaluate_reduction", "check_immersion", "ImmersionCheck", "ReductionEvaluation",
     "IMMERSION_TOLERANCE"}
)


def __getattr__(name):
    if name in _MOVED_TO_EVALUATION:
        raise AttributeError(
            f"geomlearn.reduction.{name} has moved: use geomlearn.evaluation.{name} "
            f"(or geomlearn.{name})"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
