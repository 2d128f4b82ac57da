r"""Interacting particles: the Lennard-Jones cluster, a problem whose force is expensive.

Every pair of particles interacts, so one force evaluation costs $O(N^2)$ (all pairs in
one vectorised expression), and the cluster's fastest vibrations bound a classical
integrator's step: the setting in which a learned map that takes one long stride in
place of many classical steps can pay.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, Point, Scalar
from .._validation import check_int
from ..symmetries import Particles
from ._base import AbstractSeparableSystem
from ._parameters import check_positive, check_real, initial_conditions

__all__ = ["LennardJonesCluster"]

_AXES = "xyz"

#: The temperatures $k_B T / \varepsilon$ of the default initial conditions.
_DEFAULT_TEMPERATURES = (0.02, 0.04, 0.06, 0.08)


def _close_packed_sites(n: int, k: int) -> np.ndarray:
    r"""The `n` sites of the close-packed lattice of unit nearest-neighbour spacing
    (triangular for `k = 2`, face-centred cubic for `k = 3`) nearest to the origin (a
    site), ties broken by the coordinates; `(n, k)` float64 with their mean at 0."""
    m = int(math.ceil(n ** (1.0 / k))) + 2
    grid = np.stack(np.meshgrid(*[np.arange(-m, m + 1)] * k, indexing="ij"), -1).reshape(-1, k)
    if k == 2:
        sites = grid @ np.array([[1.0, 0.0], [0.5, math.sqrt(3.0) / 2.0]])
    else:  # fcc: cubic cells of side sqrt(2), four sites each
        basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
        sites = math.sqrt(2.0) * (grid[:, None, :] + basis[None]).reshape(-1, 3)
    distance = np.round(np.linalg.norm(sites, axis=1), 9)
    order = np.lexsort(tuple(np.round(sites[:, ::-1].T, 9)) + (distance,))
    chosen = sites[order[:n]]
    return chosen - chosen.mean(axis=0)


def _without_rotation(x: np.ndarray, p: np.ndarray, mass: float) -> np.ndarray:
    r"""Momenta `p` `(n, k)` less the rigid rotation $m\,\omega \times x$ that carries the
    angular momentum about the origin (positions `x` centred), so the result has none."""
    if x.shape[1] == 2:
        L = np.sum(x[:, 0] * p[:, 1] - x[:, 1] * p[:, 0])
        omega = L / (mass * np.sum(x * x))
        return p - mass * omega * np.stack([-x[:, 1], x[:, 0]], axis=1)
    L = np.sum(np.cross(x, p), axis=0)
    inertia = mass * (np.sum(x * x) * np.eye(3) - x.T @ x)
    omega = np.linalg.solve(inertia, L)
    return p - mass * np.cross(omega, x)


class LennardJonesCluster(AbstractSeparableSystem):
    r"""A cluster of `n_particles` equal masses in 2 or 3 dimensions under the
    Lennard-Jones pair potential, every pair computed.

    State `z = (x_1, …, x_N, p_1, …, p_N)` with $x_i, p_i \in \mathbb{R}^k$ ($k$ =
    `spatial_dim`, each particle's components consecutive), `dim = 2kN`, and

    $$H = \sum_{i=1}^{N} \frac{|p_i|^2}{2m} + \sum_{i<j} 4\varepsilon\Big[
    \Big(\frac{\sigma}{r_{ij}}\Big)^{12} - \Big(\frac{\sigma}{r_{ij}}\Big)^{6}\Big],
    \qquad r_{ij} = |x_i - x_j| .$$

    The pair potential has its minimum $-\varepsilon$ at $r_m = 2^{1/6}\sigma$. The
    forces depend on differences only, so besides the energy the total momentum is
    conserved (`"momentum_x"`, `"momentum_y"`, and `"momentum_z"` in 3-D) and so is the
    angular momentum $\sum_i x_i \times p_i$ (`"angular_momentum"` in 2-D; its
    components `"angular_momentum_x"`, `…_y`, `…_z` in 3-D). `particle_dimension` is $k$;
    `group` is `Particles(N, k)`: $H$ is invariant under translations, orthogonal maps
    and relabellings of the particles.

    **Arguments:** `n_particles` $N \ge 2$ (default `13`: in 3-D a site and its twelve
    neighbours), `spatial_dim` $k \in \{2, 3\}$ (default `3`), and the well depth
    `epsilon`, the length `sigma` and the `mass`, each `> 0` (default `1.0`).

    **Default initial conditions:** `thermal_states((0.02, 0.04, 0.06, 0.08), seed=0)`:
    the $N$ sites of the close-packed lattice of spacing $r_m$ nearest to its centre
    (a compact solid cluster, energy far below 0), each displaced by up to $0.02\,r_m$
    per axis, with thermal momenta at $k_B T/\varepsilon$ = 0.02 … 0.08 (well below
    melting), no total momentum and no angular momentum: bound states.
    """

    n_particles: int = eqx.field(static=True)
    spatial_dim: int = eqx.field(static=True)
    epsilon: float = eqx.field(static=True)
    sigma: float = eqx.field(static=True)
    mass: float = eqx.field(static=True)

    def __init__(self, n_particles: int = 13, spatial_dim: int = 3, epsilon: float = 1.0,
                 sigma: float = 1.0, mass: float = 1.0):
        self.n_particles = check_int("n_particles", n_particles, minimum=2)
        self.spatial_dim = check_int("spatial_dim", spatial_dim)
        if self.spatial_dim not in (2, 3):
            raise ValueError(f"spatial_dim must be 2 or 3, got {self.spatial_dim}")
        self.epsilon = check_positive("epsilon", epsilon)
        self.sigma = check_positive("sigma", sigma)
        self.mass = check_positive("mass", mass)

    @property
    def dim(self) -> int:  # type: ignore[override]
        return 2 * self.spatial_dim * self.n_particles

    @property
    def particle_dimension(self) -> int:  # type: ignore[override]
        return self.spatial_dim

    @property
    def group(self) -> Particles:  # type: ignore[override]
        return Particles(self.n_particles, self.spatial_dim)

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        axes = _AXES[: self.spatial_dim]
        q = tuple(f"{a}{i + 1}" for i in range(self.n_particles) for a in axes)
        return q + tuple(f"p{label}" for label in q)

    @property
    def invariant_methods(self) -> tuple[tuple[str, str], ...]:  # type: ignore[override]
        axes = _AXES[: self.spatial_dim]
        angular = ("angular_momentum",) if self.spatial_dim == 2 else tuple(
            f"angular_momentum_{a}" for a in _AXES)
        names = ("energy",) + tuple(f"momentum_{a}" for a in axes) + angular
        return (("energy", "hamiltonian"),) + tuple((n, n) for n in names[1:])

    @property
    def minimum_distance(self) -> float:
        r"""$r_m = 2^{1/6}\sigma$, where the pair potential has its minimum $-\varepsilon$."""
        return 2.0 ** (1.0 / 6.0) * self.sigma

    def kinetic(self, p):
        p = self._check_point(p, size=self.dim // 2, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.mass)

    def potential(self, q):
        r"""$V(q) = \sum_{i<j} 4\varepsilon[(\sigma/r_{ij})^{12} - (\sigma/r_{ij})^6]$,
        as half the sum over ordered pairs $i \ne j$ of one $(N, N)$ array."""
        q = self._check_point(q, size=self.dim // 2, what="position q")
        x = q.reshape(self.n_particles, self.spatial_dim)
        diff = x[:, None, :] - x[None, :, :]
        # 1 on the diagonal keeps r_ii away from 0 (and its gradient finite); masked below
        r2 = jnp.sum(diff * diff, axis=-1) + jnp.eye(self.n_particles, dtype=q.dtype)
        s6 = (self.sigma**2 / r2) ** 3
        pairs = np.logical_not(np.eye(self.n_particles, dtype=bool))
        return 2.0 * self.epsilon * jnp.sum(jnp.where(pairs, s6 * s6 - s6, 0.0))

    def _momentum(self, z: Point) -> Float[Array, " k"]:
        z = self._check_point(z)
        return jnp.sum(z[self.dim // 2:].reshape(self.n_particles, self.spatial_dim), axis=0)

    def _angular(self, z: Point):
        z = self._check_point(z)
        n = self.dim // 2
        x = z[:n].reshape(self.n_particles, self.spatial_dim)
        p = z[n:].reshape(self.n_particles, self.spatial_dim)
        if self.spatial_dim == 2:
            return jnp.sum(x[:, 0] * p[:, 1] - x[:, 1] * p[:, 0])
        return jnp.sum(jnp.cross(x, p), axis=0)

    def momentum_x(self, z: Point) -> Scalar:
        """Total momentum, x component."""
        return self._momentum(z)[0]

    def momentum_y(self, z: Point) -> Scalar:
        """Total momentum, y component."""
        return self._momentum(z)[1]

    def momentum_z(self, z: Point) -> Scalar:
        """Total momentum, z component (3-D only)."""
        self._three_d("momentum_z")
        return self._momentum(z)[2]

    def angular_momentum(self, z: Point) -> Scalar:
        r"""Total angular momentum $\sum_i x_i p_{y,i} - y_i p_{x,i}$ (2-D only)."""
        if self.spatial_dim != 2:
            raise ValueError("angular_momentum is the 2-D invariant; in 3-D use "
                             "angular_momentum_x, angular_momentum_y, angular_momentum_z")
        return self._angular(z)

    def angular_momentum_x(self, z: Point) -> Scalar:
        r"""$\sum_i (x_i \times p_i)_x$ (3-D only)."""
        self._three_d("angular_momentum_x")
        return self._angular(z)[0]

    def angular_momentum_y(self, z: Point) -> Scalar:
        r"""$\sum_i (x_i \times p_i)_y$ (3-D only)."""
        self._three_d("angular_momentum_y")
        return self._angular(z)[1]

    def angular_momentum_z(self, z: Point) -> Scalar:
        r"""$\sum_i (x_i \times p_i)_z$ (3-D only)."""
        self._three_d("angular_momentum_z")
        return self._angular(z)[2]

    def _three_d(self, name: str) -> None:
        if self.spatial_dim != 3:
            raise ValueError(f"{name} is an invariant of a 3-D cluster; this one has "
                             f"spatial_dim={self.spatial_dim}")

    def thermal_states(self, temperatures, *, seed: int = 0,
                       displacement: float = 0.02) -> np.ndarray:
        r"""Bound states of the cluster, one per temperature, in NumPy float64 `(B, dim)`.

        Positions: the $N$ sites of the close-packed lattice (triangular in 2-D,
        face-centred cubic in 3-D) of spacing $r_m = 2^{1/6}\sigma$ nearest to a site,
        centred, each coordinate displaced by $u\,r_m$, $u \sim U(-d, d)$ ($d$ =
        `displacement`). Momenta: $\sqrt{m k_B T}$ times standard normals, less their
        mean and the rigid rotation (no total and no angular momentum), scaled so that
        the kinetic energy is $\tfrac12 f\,k_B T$ with $f = kN - k - \binom{k}{2}$ (the
        degrees of freedom left). Drawn in order from `numpy.random.default_rng(seed)`.

        **Arguments:** `temperatures` $k_B T / \varepsilon \ge 0$ (a sequence), `seed`,
        `displacement` $d \ge 0$.
        """
        temperatures = [check_real("temperature", t, minimum=0.0, strict=False)
                        for t in temperatures]
        d = check_real("displacement", displacement, minimum=0.0, strict=False)
        rng = np.random.default_rng(check_int("seed", seed, minimum=0))
        n, k, m = self.n_particles, self.spatial_dim, self.mass
        sites = self.minimum_distance * _close_packed_sites(n, k)
        freedom = k * n - k - k * (k - 1) // 2
        rows = []
        for t in temperatures:
            x = sites + self.minimum_distance * rng.uniform(-d, d, (n, k))
            x = x - x.mean(axis=0)
            p = math.sqrt(m * t) * rng.standard_normal((n, k))
            p = _without_rotation(x, p - p.mean(axis=0), m)
            kinetic = np.sum(p * p) / (2.0 * m)
            target = 0.5 * freedom * t * self.epsilon
            p = p * (math.sqrt(target / kinetic) if kinetic > 0 else 0.0)
            rows.append(np.concatenate([x.ravel(), p.ravel()]))
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), self.dim)

    def default_initial_conditions(self, dtype=None):
        return initial_conditions(self.thermal_states(_DEFAULT_TEMPERATURES), dtype)
