r"""The proper symplectic decomposition: the linear (affine) symplectic reduction
$\Psi^d(y) = \bar x + A y$, $A = \operatorname{diag}(\Phi, \Phi)$, fitted to snapshots by
one SVD (Peng & Mohseni, *Symplectic model reduction of Hamiltonian systems*, SIAM J. Sci.
Comput. 38 (2016)); and `AbstractReduction`, the encoder/decoder pair every reduction of
`geomlearn.reduction` is.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp

from .._typing import Array, Float, Point
from .._validation import check_int, check_point

__all__ = ["AbstractReduction", "PSD", "snapshot_mean", "proper_symplectic_decomposition"]


class AbstractReduction(eqx.Module):
    """An encoder/decoder pair between $\\mathbb{R}^{2N}$ (`full_dim`) and
    $\\mathbb{R}^{2n}$ (`reduced_dim`): `encode(z)`, `decode(y)` on one point each, and
    `__call__(z) = decode(encode(z))`."""

    full_dim: eqx.AbstractVar[int]
    reduced_dim: eqx.AbstractVar[int]

    @abc.abstractmethod
    def encode(self, z: Point) -> Point:
        r"""The reduced state $\Psi^e(z)$ `(reduced_dim,)` of one full state `z`."""

    @abc.abstractmethod
    def decode(self, y: Point) -> Point:
        r"""The full state $\Psi^d(y)$ `(full_dim,)` of one reduced state `y`."""

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
