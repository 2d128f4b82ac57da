r"""The manifold cotangent lift: a nonlinear symplectic reduction for mechanical systems.

For a Hamiltonian $H(q, p) = \tfrac12 p^\top p + V(q)$ the momenta are velocities,
$p = \dot q$, so along any trajectory $p$ is tangent to the curve (or surface) the
positions trace. A reduction that puts the positions on a nonlinear manifold
$q = f(Q)$, $Q \in \mathbb{R}^n$, and lifts the momenta with it,

$$\Psi^d(Q, P) = \Big(f(Q),\ \bar p + Df(Q)\,G(Q)^{-1} P\Big), \qquad
  G(Q) = Df(Q)^\top Df(Q),$$

is a **symplectic immersion** whenever $Df$ has full rank: it pulls the Liouville form
back to $p\cdot dq = \bar p\cdot df + P^\top G^{-1} Df^\top Df\, dQ = d(\bar p\cdot f) +
P\cdot dQ$, so $\omega = dq\wedge dp$ back to $dQ\wedge dP$ (Buchfink, Glas and Haasdonk,
*Symplectic model reduction of Hamiltonian systems on nonlinear manifolds and
approximation with weakly symplectic autoencoder*, SIAM J. Sci. Comput. 45, 2023, where
this construction is the *manifold cotangent lift*). With $f$ linear it is the PSD.

Here $f$ is the centred PSD plus a correction orthogonal to its basis that bends the
leading direction,

$$f(Q) = \bar q + \Phi Q + C^\top g(\xi), \qquad \xi = (Q_1 - c)/s, \qquad
  g_k(\xi) = \exp\!\big(-(\xi - \xi_k)^2 / w^2\big),$$

$K$ Gaussian bumps at equally spaced centres $\xi_k \in [-1, 1]$ of width $w = 2/(K-1)$,
$c$ and $s$ mapping the snapshots' range of $Q_1$ (plus a margin) onto $[-1, 1]$, and the
rows of $C$ orthogonal to $\Phi$. Then $\Phi^\top Df = I$, so $Df$ has full rank for
**every** coefficient matrix $C$, and the encoder

$$\Psi^e(q, p) = \big(\Phi^\top (q - \bar q),\ Df(Q)^\top (p - \bar p)\big)$$

is an exact left inverse of the decoder. $C$ is fitted by linear least squares
(`manifold_cotangent_lift`). The bumps fade beyond the data's range, where the decoder
returns to the affine PSD; their derivatives are closed-form.

Where the positions' path is a graph over the leading PSD coordinate (the Toda lattice's
travelling bump, which no low-dimensional subspace holds), $f$ can follow it, and the
trajectory then solves the reduced system $\tilde H = H\circ\Psi^d$ exactly
(`geomlearn.reduction.ReducedHamiltonianSystem`). The bend is one curve, fitted to one
orbit (see `manifold_cotangent_lift` and the concepts page on reduction).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import check_int, check_point
from ._psd import AbstractReduction, proper_symplectic_decomposition

__all__ = ["ManifoldCotangentLift", "manifold_cotangent_lift"]


def _bump_centres(n_features: int, dtype):
    return jnp.linspace(-1.0, 1.0, n_features, dtype=dtype)


def _check_orthonormal(basis):
    r"""`ValueError` naming the deviation $\lVert B^\top B - I\rVert_F$ of `basis` $B$
    `(N, n)` from orthonormal columns when it exceeds $\sqrt{\varepsilon}$ of its dtype
    (or is not finite)."""
    B = np.asarray(basis, np.float64)
    deviation = float(np.linalg.norm(B.T @ B - np.eye(B.shape[1])))
    tolerance = float(np.sqrt(np.finfo(basis.dtype).eps))
    if not deviation <= tolerance:
        raise ValueError(
            f"basis must have orthonormal columns: ‖BᵀB − I‖ = {deviation:.3g} > {tolerance:.2g} "
            "(orthonormalise it, e.g. with numpy.linalg.qr)")


class ManifoldCotangentLift(AbstractReduction):
    r"""The manifold cotangent lift of a bent PSD (see the module documentation): a
    nonlinear reduction whose decoder is a symplectic immersion for every coefficient
    value.

    Build one from snapshots with
    [`manifold_cotangent_lift`][geomlearn.reduction.manifold_cotangent_lift].

    **Arguments:**

    - `basis`: $\Phi$ `(N, n)` with orthonormal columns (the centred PSD's):
      `ValueError` when $\lVert\Phi^\top\Phi - I_n\rVert_F$ exceeds
      $\sqrt{\varepsilon}$ of its dtype (the decoder is a symplectic immersion, and the
      encoder its left inverse, only for an orthonormal basis).
    - `reference`: $\bar x = (\bar q, \bar p)$ `(2N,)`.
    - `coefficients`: $C$ `(K, N)`, one row per bump, `K ≥ 2` (the rows are projected
      orthogonal to $\Phi$ here, so the encoder stays an exact left inverse).
    - `centre`, `scale`: $c$ and $s > 0$, the map $\xi = (Q_1 - c)/s$.

    **Methods:** `encode(z)`, `decode(y)` (one state each), `positions(Q)` ($f$),
    `position_jacobian(Q)` ($Df$, `(N, n)`).
    """

    basis: Float[Array, "N n"]
    reference: Float[Array, " 2N"]
    coefficients: Float[Array, "K N"]
    centre: Float[Array, ""]
    scale: Float[Array, ""]
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)

    def __init__(self, basis, reference, coefficients, centre, scale):
        basis = jnp.asarray(basis)
        if basis.ndim != 2 or basis.shape[1] > basis.shape[0]:
            raise ValueError(f"basis must be an (N, n) matrix with n <= N, got {basis.shape}")
        N, n = basis.shape
        self.full_dim, self.reduced_dim = 2 * N, 2 * n
        reference = jnp.asarray(reference, basis.dtype)
        if reference.shape != (2 * N,):
            raise ValueError(f"reference must be one state of shape ({2 * N},), got {reference.shape}")
        if not isinstance(basis, jax.core.Tracer):  # traced when a file is loaded
            _check_orthonormal(basis)
        coefficients = jnp.asarray(coefficients, basis.dtype)
        if coefficients.ndim != 2 or coefficients.shape[1] != N or coefficients.shape[0] < 2:
            raise ValueError(f"coefficients must have shape (K, {N}) with K >= 2, got "
                             f"{coefficients.shape}")
        centre, scale = jnp.asarray(centre, basis.dtype), jnp.asarray(scale, basis.dtype)
        concrete = not isinstance(scale, jax.core.Tracer)  # traced when a file is loaded
        if centre.shape != () or scale.shape != () or (concrete and not float(scale) > 0):
            raise ValueError(f"centre and scale must be numbers, scale > 0; got {centre} and {scale}")
        self.basis, self.reference, self.centre, self.scale = basis, reference, centre, scale
        self.coefficients = coefficients - (coefficients @ basis) @ basis.T

    def _bumps(self, Q):
        r"""The bumps $g(\xi)$ `(K,)` and their derivatives with respect to $Q_1$."""
        K = self.coefficients.shape[0]
        xi_k = _bump_centres(K, Q.dtype)
        width = 2.0 / (K - 1)
        u = ((Q[0] - self.centre.astype(Q.dtype)) / self.scale.astype(Q.dtype) - xi_k) / width
        g = jnp.exp(-u * u)
        return g, g * (-2.0 * u / (width * self.scale.astype(Q.dtype)))

    def _positions_and_jacobian(self, Q):
        """`(f(Q), Df(Q), b)` with `b = Cᵀ g'` `(N,)`, the bend of the first column."""
        N = self.full_dim // 2
        g, dg = self._bumps(Q)
        C, Phi = self.coefficients.astype(Q.dtype), self.basis.astype(Q.dtype)
        q = self.reference[:N].astype(Q.dtype) + Phi @ Q + g @ C
        bend = dg @ C
        return q, Phi.at[:, 0].add(bend), bend

    def positions(self, Q: Float[Array, " n"]) -> Float[Array, " N"]:
        r"""$f(Q) = \bar q + \Phi Q + C^\top g(\xi(Q_1))$."""
        return self._positions_and_jacobian(Q)[0]

    def position_jacobian(self, Q: Float[Array, " n"]) -> Float[Array, "N n"]:
        r"""$Df(Q) = \Phi + C^\top g'(\xi)\, e_1^\top / s$ `(N, n)` (closed form)."""
        return self._positions_and_jacobian(Q)[1]

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        r"""$(\Phi^\top (q - \bar q),\ Df(Q)^\top (p - \bar p))$ for one state `z = (q, p)`."""
        check_point("ManifoldCotangentLift.encode", z, self.full_dim)
        N = self.full_dim // 2
        ref = self.reference.astype(z.dtype)
        Q = self.basis.astype(z.dtype).T @ (z[:N] - ref[:N])
        return jnp.concatenate([Q, self.position_jacobian(Q).T @ (z[N:] - ref[N:])])

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        r"""$(f(Q),\ \bar p + Df\,(Df^\top Df)^{-1} P)$ for one reduced state `y = (Q, P)`.

        The bend $b$ is orthogonal to $\Phi$, so $Df^\top Df = I + |b|^2 e_1 e_1^\top$
        and its inverse scales $P_1$ by $1 / (1 + |b|^2)$: no linear solve."""
        check_point("ManifoldCotangentLift.decode", y, self.reduced_dim)
        n, N = self.reduced_dim // 2, self.full_dim // 2
        Q, P = y[:n], y[n:]
        q, D, bend = self._positions_and_jacobian(Q)
        P = P.at[0].divide(1.0 + bend @ bend)
        return jnp.concatenate([q, self.reference[N:].astype(y.dtype) + D @ P])


def manifold_cotangent_lift(
    snapshots: Float[Array, "M 2N"], reduced_dim: int, *, n_features: int = 16,
    margin: float = 0.1, ridge: float = 0.0,
) -> ManifoldCotangentLift:
    r"""The manifold cotangent lift of `snapshots` (one state per row) of size
    `reduced_dim = 2n`: the centred PSD of that size
    ([`proper_symplectic_decomposition`][geomlearn.reduction.proper_symplectic_decomposition]
    with `centred=True`) and the coefficients $C$ that best fit the positions' residual
    $(I - \Phi\Phi^\top)(q_i - \bar q)$ by the bumps $g(\xi(Q_{i,1}))$ (linear least
    squares, in float64 on the host).

    **Arguments:**

    - `snapshots` `(M, 2N)` (or `(B, M, 2N)`, flattened), finite.
    - `reduced_dim`: even, `2 ≤ reduced_dim ≤ 2N`.
    - `n_features`: the number `K ≥ 2` of bumps (default 16), at most the number of
      snapshots.
    - `margin`: how far beyond the snapshots' range of $Q_1$ (a fraction of it, each
      side) the bumps reach (default 0.1).
    - `ridge`: a Tikhonov weight $\lambda \ge 0$ on $\lVert C\rVert^2$ (default 0).

    **One orbit.** The bumps bend $\Phi$ along one curve, so the lift assumes snapshots
    of one orbit whose positions' path is a graph over the leading coordinate $Q_1$.
    Snapshots of a family of orbits (several initial states) get an average bend that
    none of them follows: the projection error can then be below the centred PSD's while
    the reduced model is worse than the PSD's; and where the path folds over $Q_1$ no $f$
    of this form follows it. Judge a lift by its reduction error (the reduced system
    integrated, `geomlearn.evaluation.evaluate_reduction`), not by its projection error.

    **Returns:** a [`ManifoldCotangentLift`][geomlearn.reduction.ManifoldCotangentLift].
    """
    K = check_int("n_features", n_features, minimum=2)
    psd = proper_symplectic_decomposition(snapshots, reduced_dim, centred=True)
    margin, ridge = float(margin), float(ridge)
    if not (np.isfinite(margin) and margin >= 0) or not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"margin and ridge must be finite and >= 0, got {margin} and {ridge}")
    X = np.asarray(snapshots, np.float64)
    X = X.reshape(-1, X.shape[-1])
    if not np.all(np.isfinite(X)):
        raise ValueError("snapshots must be finite")
    if X.shape[0] < K:
        raise ValueError(f"{X.shape[0]} snapshots are too few for n_features={K}")
    N = X.shape[1] // 2
    Phi, ref = np.asarray(psd.basis, np.float64), np.asarray(psd.reference, np.float64)
    centred = X[:, :N] - ref[:N]
    Q1 = centred @ Phi[:, 0]
    residual = centred - (centred @ Phi) @ Phi.T
    lo, hi = float(Q1.min()), float(Q1.max())
    if not hi > lo:
        raise ValueError("the snapshots do not move along the leading reduced coordinate")
    centre, scale = 0.5 * (lo + hi), 0.5 * (hi - lo) * (1.0 + 2.0 * margin)
    width = 2.0 / (K - 1)
    u = ((Q1 - centre) / scale)[:, None] - np.linspace(-1.0, 1.0, K)[None, :]
    F = np.exp(-(u / width) ** 2)
    C = np.linalg.solve(F.T @ F + ridge * np.eye(K), F.T @ residual) if ridge > 0 else (
        np.linalg.lstsq(F, residual, rcond=None)[0])
    dtype = psd.basis.dtype
    return ManifoldCotangentLift(psd.basis, psd.reference, jnp.asarray(C, dtype), centre, scale)
