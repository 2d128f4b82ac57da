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
"""

from __future__ import annotations

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

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
    "ImmersionCheck",
    "check_immersion",
    "ReductionEvaluation",
    "evaluate_reduction",
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


# ------------------------------------------------------------ checks and evaluation

#: The pass/fail tolerance of `check_immersion` for a well-conditioned decoder Jacobian;
#: it grows with the condition number, as in `geomlearn.check_structure`.
IMMERSION_TOLERANCE = 1e-10


@dataclasses.dataclass(frozen=True)
class ImmersionCheck:
    r"""The verdict of [`check_immersion`][geomlearn.reduction.check_immersion]: is the
    decoder a symplectic immersion at the sample points?

    **Fields:** `map` (what was checked), `residual` (the largest
    $\lVert D^\top\mathbb{J}_{2N}D - \mathbb{J}_{2n}\rVert_F/\lVert\mathbb{J}_{2n}\rVert_F$
    over the points), `condition` (the largest condition number $\sigma_1/\sigma_{2n}$
    of $D = D\Psi^d(y)$), `tolerance`, `n_points`.
    """

    map: str
    residual: float
    condition: float
    tolerance: float
    n_points: int

    @property
    def passed(self) -> bool:
        """The residual is finite and at most `tolerance`."""
        return bool(np.isfinite(self.residual) and self.residual <= self.tolerance)

    def report(self, *, title: str) -> str:
        """The check as text (what `geomlearn check` prints)."""
        verdict = "PASS" if self.passed else "FAIL"
        return "\n".join([
            f"{title}: {self.map}; it claims a symplectic immersion, (DΨ_dec)ᵀ J DΨ_dec = J. "
            f"Residual at {self.n_points} points (encoded first; condition number of DΨ_dec "
            f"≤ {self.condition:.3g}; tolerance {self.tolerance:.2g})",
            f"  immersion      {self.residual:.3e}   {verdict}",
            verdict,
        ])


def check_immersion(reduction, points: Float[Array, "B 2N"]) -> ImmersionCheck:
    r"""Check that `reduction`'s decoder is a symplectic immersion at the sample points.

    Each full state $z$ of `points` is encoded, $y = \Psi^e(z)$, and the residual
    $\lVert D^\top\mathbb{J}_{2N}D - \mathbb{J}_{2n}\rVert_F / \lVert\mathbb{J}_{2n}\rVert_F$
    of $D = D\Psi^d(y)$ (forward-mode Jacobian) is computed in the points' dtype. As in
    `geomlearn.check_structure`, rounding perturbs $D^\top\mathbb{J}D$ relatively by
    about $N\varepsilon\kappa(D)$, so the tolerance is
    $\max(10^{-10},\ 64\cdot 2N\,\varepsilon\,\kappa)$ with $\kappa$ the largest
    condition number of $D$ at the points (for an immersion $\kappa \ge 1$).

    **Arguments:** `reduction` (a [`PSD`][geomlearn.reduction.PSD], a
    [`SymplecticAutoencoder`][geomlearn.models.SymplecticAutoencoder], any module with
    `encode`, `decode`, `full_dim`, `reduced_dim`); `points` `(B, full_dim)`.

    **Returns:** an [`ImmersionCheck`][geomlearn.reduction.ImmersionCheck].
    """
    points = jnp.asarray(points)
    if points.ndim != 2 or points.shape[-1] != reduction.full_dim:
        raise ValueError(
            f"points must be full states of shape (B, {reduction.full_dim}), got {points.shape}"
        )

    def one(z):
        y = reduction.encode(z)
        s = jnp.linalg.svd(jax.jacfwd(reduction.decode)(y), compute_uv=False)
        return immersion_residual(reduction.decode, y), s[0] / s[-1]

    res, cond = (np.asarray(a, dtype=np.float64) for a in jax.jit(jax.vmap(one))(points))
    condition = float(np.max(cond))
    eps = float(jnp.finfo(points.dtype).eps)
    tolerance = (max(IMMERSION_TOLERANCE, 64 * reduction.full_dim * eps * condition)
                 if np.isfinite(condition) else IMMERSION_TOLERANCE)
    return ImmersionCheck(
        map=(f"the decoder Ψ_dec: ℝ^{reduction.reduced_dim} → ℝ^{reduction.full_dim} of "
             f"{type(reduction).__name__} (a reduction has no iterated map)"),
        residual=float(np.max(res)), condition=condition, tolerance=float(tolerance),
        n_points=int(points.shape[0]),
    )


def _relative_rows(A, B) -> np.ndarray:
    """$\\lVert A_t - B_t\\rVert / \\lVert B_t\\rVert$ for every row `t`."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return np.linalg.norm(A - B, axis=-1) / np.linalg.norm(B, axis=-1)


def _relative_all(A, B) -> float:
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


def _timed(fn):
    jax.block_until_ready(fn())  # warm-up: compile
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


class ReductionEvaluation(dict):
    r"""What [`evaluate_reduction`][geomlearn.reduction.evaluate_reduction] returns: the
    JSON-serialisable metrics as a `dict`, with the arrays behind them as attributes.

    **Attributes:** `times` `(N,)`; `full` (the full solution $X$, `(N, 2N)`);
    `projected` ($\Psi^d(\Psi^e(X))$); `reduced` (the reduced solution $Y$ `(N, 2n)`,
    `None` when its integration failed) and `decoded` ($\Psi^d(Y)$ or `None`); `series`,
    per time, `{"projection", "psd_projection", "reduction"}` relative errors (`(N,)`
    arrays; `"reduction"` is `None` when the integration failed).
    """

    def __init__(self, metrics, *, times, full, projected, reduced, decoded, series):
        super().__init__(metrics)
        self.times, self.full, self.projected = times, full, projected
        self.reduced, self.decoded, self.series = reduced, decoded, series

    def summary(self, *, title: str, extra=(), metrics=None) -> str:
        """An aligned text table of the metrics (what `geomlearn train` prints)."""
        from .evaluation import fmt

        m = self if metrics is None else metrics

        def at(errors):
            return "   ".join(f"{k}: {fmt(v)}" for k, v in errors.items())

        n = m["reduced_dim"]
        rows = list(extra) + [
            ("projection error", at(m["projection_error"])),
            (f"PSD (2n = {n}) proj.", at(m["psd_projection_error"])),
            ("reduction error", at(m["reduction_error"]) if m["reduction_failed"] is None
             else f"the reduced integration failed: {m['reduction_failed']}"),
            ("reduced energy", f"drift of H∘Ψ_dec along the reduced solution "
                               f"{fmt(m['reduced_energy_drift'])}"),
            ("immersion residual", f"{fmt(m['immersion_residual'])} (‖DᵀJD − J‖/‖J‖ of the "
                                   f"decoder at {m['immersion_points']} encoded data states)"),
            ("online phase", f"reduced implicit midpoint {fmt(m['reduced_seconds'])} s, full "
                             f"order {fmt(m['full_order_seconds'])} s ({m['n_steps']} steps)"),
        ]
        width = max(len(r[0]) for r in rows)
        return "\n".join([title] + [f"  {k:<{width}}  {v}" for k, v in rows])


def _horizons(n_steps: int) -> list[int]:
    """The steps at 1/8, 1/4, 1/2 and all of the horizon (distinct, at least 1)."""
    return sorted({max(1, round(n_steps * f)) for f in (0.125, 0.25, 0.5, 1.0)})


def evaluate_reduction(
    reduction,
    system,
    reference,
    *,
    horizons=None,
    n_immersion_points: int = 8,
    method: str = "implicit_midpoint",
) -> ReductionEvaluation:
    r"""Measure a reduction (a trained autoencoder or a PSD) against a full solution.

    With the full solution $X = (x_0, \dots, x_K)$ (the first trajectory of
    `reference`, time step $\Delta t$):

    - **projection error** at step $k$: $\lVert\Psi^d(\Psi^e(x_k)) - x_k\rVert /
      \lVert x_k\rVert$, and over all states $\lVert\Psi^d(\Psi^e(X)) - X\rVert_F /
      \lVert X\rVert_F$ (`"all"`); the same for the PSD of the same reduced dimension,
      fitted to the same states, as the linear baseline;
    - **reduction error**: the [`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem]
      $\dot y = \mathbb{J}_{2n}\nabla(H\circ\Psi^d)(y)$ is integrated from
      $y_0 = \Psi^e(x_0)$ by `method` with $\Delta t$ for $K$ steps and its decoded
      solution compared with $X$ in the same way;
    - the relative drift of $\tilde H = H\circ\Psi^d$ along the reduced solution, the
      immersion residual at encoded data states, and the wall time of the reduced and of
      the full-order integration over the same horizon (each timed on a second,
      compiled run).

    **Arguments:** `reduction`; `system` (the full canonical system); `reference` (a
    `TrajectoryData`, whose first trajectory and `dt` are used — the reduced
    integration needs $\Delta t$);
    `horizons` (steps; default $K/8, K/4, K/2, K$, reported as times `"t=…"`);
    `n_immersion_points`; `method`.

    **Returns:** a [`ReductionEvaluation`][geomlearn.reduction.ReductionEvaluation] with
    the keys `"model"`, `"system"`, `"structure"`, `"full_dim"`, `"reduced_dim"`,
    `"n_steps"`, `"dt"`, `"projection_error"`, `"psd_projection_error"`,
    `"reduction_error"` (each `{"t=…": e, …, "all": e}`), `"reduction_failed"` (`None`
    or why), `"reduced_energy_drift"`, `"immersion_residual"`, `"immersion_points"`,
    `"reduced_seconds"`, `"full_order_seconds"`, `"speedup"`.
    """
    from .integrators import IntegrationError, integrate

    if not (hasattr(reference, "states") and hasattr(reference, "dt")):
        raise TypeError(
            f"reference must be a TrajectoryData (the reduced integration needs its dt), "
            f"got {type(reference).__name__}"
        )
    if reduction.full_dim != system.dim:
        raise ValueError(
            f"the reduction has full_dim={reduction.full_dim}, the system dim={system.dim}"
        )
    X = jnp.asarray(reference.states)[0]
    dt, n_steps = float(reference.dt), int(X.shape[0]) - 1
    if n_steps < 1:
        raise ValueError("the reference trajectory needs at least 2 states")
    horizons = _horizons(n_steps) if horizons is None else [int(h) for h in horizons]
    if any(not 1 <= h <= n_steps for h in horizons):
        raise ValueError(f"horizons must be between 1 and {n_steps}, got {horizons}")
    times = np.arange(n_steps + 1) * dt
    label = [f"t={times[h]:g}" for h in horizons]

    def table(per_row, all_value):
        if per_row is None:
            return {**{k: None for k in label}, "all": None}
        return {**{k: float(per_row[h]) for k, h in zip(label, horizons)}, "all": all_value}

    P = jax.jit(jax.vmap(reduction))(X)
    psd = proper_symplectic_decomposition(X, reduction.reduced_dim)
    P_psd = jax.vmap(psd)(X)
    series = {"projection": _relative_rows(P, X), "psd_projection": _relative_rows(P_psd, X)}

    reduced_system = ReducedHamiltonianSystem(system, reduction)
    y0 = reduction.encode(X[0])
    failed, Y, decoded, reduced_seconds, drift = None, None, None, None, None
    try:
        Y, reduced_seconds = _timed(lambda: integrate(reduced_system, y0, dt, n_steps,
                                                      method=method))
    except IntegrationError as e:
        failed = str(e)
    if Y is not None:
        decoded = jax.jit(jax.vmap(reduction.decode))(Y)
        series["reduction"] = _relative_rows(decoded, X)
        H = np.asarray(jax.jit(jax.vmap(reduced_system.hamiltonian))(Y), dtype=np.float64)
        drift = float(np.max(np.abs(H - H[0])) / max(abs(H[0]), np.finfo(np.float64).tiny))
    else:
        series["reduction"] = None
    _, full_seconds = _timed(lambda: integrate(system, X[0], dt, n_steps, method=method))

    n_points = min(int(n_immersion_points), n_steps + 1)
    idx = np.linspace(0, n_steps, n_points).round().astype(int)
    check = check_immersion(reduction, X[idx])
    metrics = {
        "model": type(reduction).__name__,
        "system": type(system).__name__,
        "structure": "symplectic immersion (decoder)",
        "full_dim": int(reduction.full_dim),
        "reduced_dim": int(reduction.reduced_dim),
        "n_steps": n_steps,
        "dt": dt,
        "projection_error": table(series["projection"], _relative_all(P, X)),
        "psd_projection_error": table(series["psd_projection"], _relative_all(P_psd, X)),
        "reduction_error": table(series["reduction"],
                                 None if decoded is None else _relative_all(decoded, X)),
        "reduction_failed": failed,
        "reduced_energy_drift": drift,
        "immersion_residual": check.residual,
        "immersion_points": check.n_points,
        "immersion_passed": check.passed,
        "reduced_seconds": reduced_seconds,
        "full_order_seconds": full_seconds,
        "speedup": None if reduced_seconds is None else full_seconds / reduced_seconds,
        "reference_method": method,
    }
    return ReductionEvaluation(metrics, times=times, full=X, projected=P, reduced=Y,
                               decoded=decoded, series=series)
