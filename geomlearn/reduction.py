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
  the linear *cotangent lift* $\Psi^d(y) = A y$, $A = \operatorname{diag}(\Phi, \Phi)$,
  with $\Phi$ the leading left singular vectors of the snapshot matrix $[Q \mid P]$;
- [`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem]: the reduced
  system of a full system and any reduction (linear or a
  [`SymplecticAutoencoder`][geomlearn.models.SymplecticAutoencoder]), a
  `geomlearn.systems` system that `geomlearn.integrators.integrate` integrates;
- error measures: [`projection_error`][geomlearn.reduction.projection_error],
  [`reduction_error`][geomlearn.reduction.reduction_error], and
  [`immersion_residual`][geomlearn.reduction.immersion_residual] (the defect of the
  identity above).

Measuring a reduction against a full solution (`evaluate_reduction`,
`check_immersion`) is evaluation, in `geomlearn.evaluation` (also at the top level,
`geomlearn.evaluate_reduction`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ._typing import Array, Float, Point, Scalar
from ._validation import check_int
from .geometry import symplectic_matrix
from .systems import AbstractHamiltonianSystem, AbstractSystem

__all__ = [
    "AbstractReduction",
    "PSD",
    "proper_symplectic_decomposition",
    "ReducedHamiltonianSystem",
    "symplectic_inverse",
    "immersion_residual",
    "projection_error",
    "reduction_error",
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


def _check_vector(name, z, size):
    if z.shape != (size,):
        raise ValueError(
            f"{name}: expected one point of shape ({size},), got {z.shape} (use jax.vmap "
            "for a batch)"
        )


class PSD(AbstractReduction):
    r"""The cotangent-lift proper symplectic decomposition: a linear symplectic reduction.

    With a basis $\Phi \in \mathbb{R}^{N\times n}$, $\Phi^\top\Phi = I_n$,

    $$\Psi^e(q, p) = (\Phi^\top q,\ \Phi^\top p), \qquad
    \Psi^d(\tilde q, \tilde p) = (\Phi\tilde q,\ \Phi\tilde p) = A y,\quad
    A = \begin{pmatrix}\Phi & 0\\ 0 & \Phi\end{pmatrix}.$$

    $A^\top \mathbb{J}_{2N} A = \mathbb{J}_{2n}$ holds exactly because $\Phi^\top\Phi =
    I$, and the encoder is the symplectic inverse $A^+ = \mathbb{J}_{2n}^\top A^\top
    \mathbb{J}_{2N} = A^\top$ (Peng & Mohseni 2016). Build one from snapshots with
    [`proper_symplectic_decomposition`][geomlearn.reduction.proper_symplectic_decomposition].

    **Arguments:** `basis`, the matrix $\Phi$ `(N, n)` (orthonormal columns; not
    checked).
    """

    basis: Float[Array, "N n"]
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)

    def __init__(self, basis):
        basis = jnp.asarray(basis)
        if basis.ndim != 2 or basis.shape[1] > basis.shape[0]:
            raise ValueError(f"basis must be an (N, n) matrix with n <= N, got {basis.shape}")
        self.basis = basis
        self.full_dim = 2 * basis.shape[0]
        self.reduced_dim = 2 * basis.shape[1]

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        """$(\\Phi^\\top q, \\Phi^\\top p)$ for one state `z = (q, p)`."""
        _check_vector("PSD.encode", z, self.full_dim)
        N = self.full_dim // 2
        Phi = self.basis.astype(z.dtype)
        return jnp.concatenate([Phi.T @ z[:N], Phi.T @ z[N:]])

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        """$(\\Phi \\tilde q, \\Phi \\tilde p)$ for one reduced state `y`."""
        _check_vector("PSD.decode", y, self.reduced_dim)
        n = self.reduced_dim // 2
        Phi = self.basis.astype(y.dtype)
        return jnp.concatenate([Phi @ y[:n], Phi @ y[n:]])

    def decoder_matrix(self) -> Float[Array, "2N 2n"]:
        r"""$A = \operatorname{diag}(\Phi, \Phi)$."""
        Phi = self.basis
        Z = jnp.zeros_like(Phi)
        return jnp.concatenate(
            [jnp.concatenate([Phi, Z], axis=1), jnp.concatenate([Z, Phi], axis=1)], axis=0
        )


def proper_symplectic_decomposition(
    snapshots: Float[Array, "M 2N"], reduced_dim: int
) -> PSD:
    r"""The cotangent-lift PSD of `snapshots` (one state per row) of size `reduced_dim = 2n`.

    One thin SVD of the snapshot matrix $[Q \mid P] \in \mathbb{R}^{N\times 2M}$ (positions
    and momenta of all snapshots side by side); $\Phi$ is its $n$ leading left singular
    vectors, the $n$-dimensional subspace that best represents positions *and* momenta at
    once (Peng & Mohseni 2016, Algorithm 1). The SVD is computed in the snapshots' dtype.

    **Arguments:** `snapshots` `(M, 2N)` (or `(B, M, 2N)`, flattened), `reduced_dim` even,
    `2 ≤ reduced_dim ≤ min(2N, 4M)`.

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
    QP = jnp.concatenate([X[:, :N].T, X[:, N:].T], axis=1)  # (N, 2M)
    U, _, _ = jnp.linalg.svd(QP, full_matrices=False)
    return PSD(U[:, :n])


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


class ReducedHamiltonianSystem(AbstractHamiltonianSystem):
    r"""The reduced system $\dot y = \mathbb{J}_{2n}\nabla\tilde H(y)$, $\tilde H = H\circ\Psi^d$.

    For a symplectic immersion $\Psi^d$ this vector field equals the full field pulled
    back by the symplectic inverse of the decoder's Jacobian,
    $\mathbb{J}_{2n}\nabla\tilde H(y) = (D\Psi^d(y))^+\, X_H(\Psi^d(y))$ with $D^+ =
    \mathbb{J}_{2n}^\top D^\top\mathbb{J}_{2N}$ (`projected_vector_field` computes that
    form); it is Hamiltonian, so symplectic integrators conserve $\tilde H$ as well as
    they conserve any energy. Usable with `geomlearn.integrators.integrate` (the
    implicit methods; it is not separable).

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
        r"""$(D\Psi^d(y))^+ X_H(\Psi^d(y))$ (equal to `vector_field` for a symplectic
        immersion; a test of that identity)."""
        y = self._check_point(y)
        z, D = self.reduction.decode(y), jax.jacfwd(self.reduction.decode)(y)
        return symplectic_inverse(D) @ self.system.vector_field(z)

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
