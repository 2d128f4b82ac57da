r"""Identical particles: relabelling them, and the rigid motions of a cluster.

A configuration $q \in \mathbb{R}^n$ holds $N$ particles of $k$ coordinates each,
particle after particle (`q.reshape(N, k)`), and $p$ alike (the layout of
`geomlearn.systems.LennardJonesCluster`). A permutation $\pi$ of identical particles
relabels positions and momenta together, $(q_i, p_i) \mapsto (q_{\pi(i)}, p_{\pi(i)})$:
a symplectic linear map. It is a discrete group, so it has no momentum map; a map that
commutes with it treats identical particles alike. `Particles` joins the permutations of
all $N$ particles with the translations and the orthogonal transformations of space.
Every feature is a polynomial in the coordinates (no square root), so potentials built
on them are smooth everywhere, coincident particles included.
"""

from __future__ import annotations

import itertools
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from ._base import AbstractSymmetry
from ._groups import index_argument, particle_dim_argument, sequence_argument

__all__ = ["Permutation", "Particles", "pair_indices"]

#: The highest power of the power means that make features invariant under relabelling.
_MAX_POWER = 3


def pair_indices(n_particles: int) -> tuple[np.ndarray, np.ndarray]:
    """`(i, j)`: the index arrays of the pairs $i < j$ of `n_particles` particles, in
    `np.triu_indices` order (int32)."""
    i, j = np.triu_indices(n_particles, 1)
    return i.astype(np.int32), j.astype(np.int32)


def _power_sums(values: Array, count: int) -> Array:
    """$\\operatorname{asinh}\\big(\\frac1N \\sum_a v_a^m\\big)$ over the leading axis of
    `values` ($N$ entries), $m = 1, …, $ `count`: the power means, symmetric in the $v_a$,
    through a smooth bijection of the reals that grows like a logarithm — the raw sums
    grow like $|v|^m$ with the number of terms, and a network's kicks, their gradients,
    would grow with them far beyond the data's scale."""
    return jnp.concatenate([jnp.arcsinh(jnp.mean(values ** m, axis=0)).ravel()
                            for m in range(1, count + 1)])


def _rotate(R: Array, X: Array) -> Array:
    """The rows of `X` `(N, k)` turned by `R` `(k, k)`: $R x_a$ (products written out, in
    the input's precision)."""
    return jnp.sum(R[None, :, :] * X[:, None, :], axis=-1)


def _relabel(z: Array, perm, k: int) -> Array:
    """`z = (q, p)` with particle `a` of the result the particle `perm[a]` of `z`."""
    n = z.shape[0] // 2
    perm = np.asarray(perm)
    return jnp.concatenate([z[:n].reshape(-1, k)[perm].ravel(), z[n:].reshape(-1, k)[perm].ravel()])


def _check_perm(owner: str, perm, n_particles: int, groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """`perm` as an integer array; `ValueError` unless it is a permutation of the
    `n_particles` particles that maps each group onto itself and fixes the others."""
    perm = np.asarray(perm)
    if perm.shape != (n_particles,) or sorted(perm.tolist()) != list(range(n_particles)):
        raise ValueError(f"{owner}: a relabelling must be a permutation of range({n_particles}), got {perm.tolist()}")
    label = np.arange(n_particles)
    for g, members in enumerate(groups):
        label[list(members)] = n_particles + g
    if np.any(label[perm] != label):
        raise ValueError(f"{owner}: the relabelling {perm.tolist()} mixes particles of different "
                         f"kinds (groups {groups})")
    return perm


class Permutation(AbstractSymmetry):
    r"""Relabellings of identical particles: each group of `groups` holds the indices of
    particles of one kind; a group element permutes the particles within each group
    (positions and momenta together) and fixes the particles in no group.

    A finite group has no momentum map (`momentum_map` is empty): what a map that
    commutes with it keeps is that identical particles are treated alike,
    $\Phi \circ \pi = \pi \circ \Phi$. The invariant features are, for each group and
    each coordinate $c$, the power means $\frac{1}{|g|}\sum_{a \in g} x_{a,c}^m$, $m = 1,
    …, \min(|g|, 3)$, each through $\operatorname{asinh}$, and the coordinates of the particles in no group (invariant, not a
    complete set for particles of more than one coordinate).

    **Arguments:**

    - `groups`: a sequence of groups, each a sequence of distinct particle indices;
      the groups are disjoint.
    - `particle_dim`: coordinates per particle (default 1).

    `act(z, perm)` relabels: particle `a` of the result is particle `perm[a]` of `z`
    (`perm` a permutation of all particle indices that keeps each group).

    ```python
    water = Permutation([(1, 2)], particle_dim=3)   # O, H, H: the two H identical
    ```
    """

    kind: ClassVar[str] = "permutation"
    groups: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    particle_dim: int = eqx.field(static=True)

    def __init__(self, groups, particle_dim: int = 1):
        groups = tuple(tuple(index_argument("Permutation groups", v) for v in sequence_argument("Permutation groups", g))
                       for g in sequence_argument("Permutation groups", groups))
        flat = [a for g in groups for a in g]
        if not groups or any(not g for g in groups) or len(set(flat)) != len(flat):
            raise ValueError(f"Permutation groups must be disjoint, non-empty groups of distinct "
                             f"particle indices, got {groups!r}")
        self.groups = groups
        self.particle_dim = particle_dim_argument(particle_dim)

    def _count(self, n: int) -> int:
        return n // self.particle_dim

    def check(self, n: int) -> None:
        d = self.particle_dim
        if n % d or max(a for g in self.groups for a in g) >= n // d:
            raise ValueError(f"Permutation(groups={self.groups}) does not fit a configuration of {n} "
                             f"coordinates (phase-space dim {2 * n}) in particles of {d} coordinates")

    def features(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        X = x.reshape(-1, self.particle_dim)
        grouped = {a for g in self.groups for a in g}
        rest = np.array([a for a in range(X.shape[0]) if a not in grouped], dtype=np.int32)
        sums = [_power_sums(X[np.asarray(g)], min(len(g), _MAX_POWER)) for g in self.groups]
        return jnp.concatenate(sums + [X[rest].ravel()])

    def momentum_features(self, y: Float[Array, " n"]) -> Float[Array, " m"]:
        return self.features(y)

    def momentum_map(self, z: Float[Array, " dim"]) -> Float[Array, " 0"]:
        return jnp.zeros((0,), z.dtype)

    def act(self, z, g):
        self.check(z.shape[0] // 2)
        perm = _check_perm("Permutation", g, self._count(z.shape[0] // 2), self.groups)
        return _relabel(z, perm, self.particle_dim)

    def shift_mask(self, n: int) -> np.ndarray:
        mask = np.ones((self._count(n), self.particle_dim))
        mask[[a for g in self.groups for a in g]] = 0.0
        return mask.ravel()

    @property
    def spec(self) -> str:
        groups = ";".join(",".join(map(str, g)) for g in self.groups)
        return f"{self.kind}:{groups}/{self.particle_dim}"


class Particles(AbstractSymmetry):
    r"""$N$ identical particles in $k$ dimensions: translations, orthogonal maps and
    relabellings together, $q_a \mapsto R\,q_{\pi(a)} + c$, $p_a \mapsto R\,p_{\pi(a)}$.

    The momentum map is the total momentum $P = \sum_a p_a$ ($k$ components) followed by
    the angular momentum $L_{bc} = \sum_a (q_{a,b} p_{a,c} - q_{a,c} p_{a,b})$, $b < c$
    (in 2-D the scalar $q_x p_y - q_y p_x$; in 3-D the vector $\sum_a q_a \times p_a$
    in the order $x, y, z$). By Noether's theorem a symplectic map generated by
    Hamiltonians invariant under the group conserves both (Arnold, *Mathematical Methods
    of Classical Mechanics*, §20; Marsden and Ratiu, *Introduction to Mechanics and
    Symmetry*, §11.4). Invariant features of a configuration: the power means of the
    squared distances $r_{ab}^2 = |q_a - q_b|^2$, $\operatorname{asinh}$ of
    $\operatorname{mean}_{a<b} r_{ab}^{2m}$, $m \le 3$ (the transform keeps a network's
    kicks of the data's scale); of a momentum: those of $|p_a|^2$ and of $p_a \cdot p_b$ (invariant, not
    complete: `geomlearn.models.PairSympNet` keeps the group with pair potentials).

    **Arguments:** `n_particles` $N \ge 2$, `spatial_dim` $k \ge 1$.

    `act(z, (R, c, perm))` applies $R$ `(k, k)` orthogonal, the shift `c` `(k,)` and the
    relabelling `perm` (particle `a` of the result is particle `perm[a]`), in the order
    relabel, turn, shift; any of the three may be `None`.

    ```python
    cluster = Particles(7, 3)   # q = (x1, y1, z1, x2, ...): P and L conserved
    ```
    """

    kind: ClassVar[str] = "particles"
    n_particles: int = eqx.field(static=True)
    spatial_dim: int = eqx.field(static=True)

    def __init__(self, n_particles: int, spatial_dim: int):
        self.n_particles = index_argument("Particles n_particles", n_particles)
        self.spatial_dim = index_argument("Particles spatial_dim", spatial_dim)
        if self.n_particles < 2 or self.spatial_dim < 1:
            raise ValueError(f"Particles needs n_particles >= 2 and spatial_dim >= 1, got "
                             f"({self.n_particles}, {self.spatial_dim})")

    def check(self, n: int) -> None:
        N, k = self.n_particles, self.spatial_dim
        if n != N * k:
            raise ValueError(f"Particles({N}, {k}) needs a configuration of {N * k} coordinates "
                             f"(phase-space dim {2 * N * k}), got {n} (phase-space dim {2 * n})")

    def _blocks(self, x):
        return x.reshape(self.n_particles, self.spatial_dim)

    def features(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        i, j = pair_indices(self.n_particles)
        X = self._blocks(x)
        r2 = jnp.sum((X[i] - X[j]) ** 2, axis=-1)
        return _power_sums(r2, min(i.size, _MAX_POWER))

    def momentum_features(self, y: Float[Array, " n"]) -> Float[Array, " m"]:
        i, j = pair_indices(self.n_particles)
        Y = self._blocks(y)
        norms, dots = jnp.sum(Y * Y, axis=-1), jnp.sum(Y[i] * Y[j], axis=-1)
        return jnp.concatenate([_power_sums(norms, min(self.n_particles, _MAX_POWER)),
                                _power_sums(dots, min(i.size, _MAX_POWER))])

    def momentum_map(self, z: Float[Array, " dim"]) -> Float[Array, " m"]:
        n = z.shape[0] // 2
        Q, P = self._blocks(z[:n]), self._blocks(z[n:])
        if self.spatial_dim == 3:
            L = jnp.sum(jnp.cross(Q, P), axis=0)
        else:
            planes = list(itertools.combinations(range(self.spatial_dim), 2))
            L = jnp.stack([jnp.sum(Q[:, b] * P[:, c] - Q[:, c] * P[:, b]) for b, c in planes]) \
                if planes else jnp.zeros((0,), z.dtype)
        return jnp.concatenate([jnp.sum(P, axis=0), L])

    def act(self, z, g):
        R, c, perm = g
        self.check(z.shape[0] // 2)
        n = z.shape[0] // 2
        if perm is not None:
            everyone = (tuple(range(self.n_particles)),)
            z = _relabel(z, _check_perm("Particles", perm, self.n_particles, everyone), self.spatial_dim)
        Q, P = self._blocks(z[:n]), self._blocks(z[n:])
        if R is not None:
            R = jnp.asarray(R, z.dtype)
            Q, P = _rotate(R, Q), _rotate(R, P)
        if c is not None:
            Q = Q + jnp.asarray(c, z.dtype)[None, :]
        return jnp.concatenate([Q.ravel(), P.ravel()])

    def shift_mask(self, n: int) -> np.ndarray:
        return np.zeros(n)

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.n_particles}/{self.spatial_dim}"
