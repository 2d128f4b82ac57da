r"""Translations and rotations of points and of particles, with their momentum maps.

A configuration $q \in \mathbb{R}^n$ is one point (`particle_dim=None`) or $N$ particles
of `particle_dim` $= d$ coordinates each, stored particle after particle
(`q.reshape(N, d)`), and $p$ alike. Every feature is a polynomial in the coordinates
(differences, dot products, determinants; no square root), so potentials built on them
are smooth everywhere, the origin and coincident particles included. Products are
written as elementwise multiplications and sums, not matrix products, so they are
computed in the input's precision on every device.
"""

from __future__ import annotations

import itertools
import numbers
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from .._typing import Array, Float
from ._base import AbstractSymmetry

__all__ = ["Translation", "Rotation", "Rotation3"]


def index_argument(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must hold non-negative integers, got {value!r}")
    return int(value)


def sequence_argument(name: str, values) -> tuple:
    if isinstance(values, numbers.Integral):
        return (values,)
    try:
        return tuple(values)
    except TypeError:
        raise ValueError(f"{name} must be integers, got {values!r}") from None


def _indices(name: str, values) -> tuple[int, ...]:
    values = sequence_argument(name, values)
    out = tuple(index_argument(name, v) for v in values)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"{name} must be distinct non-negative integers, at least one, got {values!r}")
    return out


def particle_dim_argument(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"particle_dim must be None or a positive integer, got {value!r}")
    return int(value)


def _check_blocks(owner: str, n: int, d: int | None, indices: tuple[int, ...]) -> int:
    """The block size (`n` for one point); `ValueError` when `n` is not a whole number of
    blocks or an index does not fit a block."""
    block = n if d is None else d
    if n % block:
        raise ValueError(f"{owner} needs a whole number of particles of {block} coordinates, "
                         f"got a configuration of {n} coordinates (phase-space dim {2 * n})")
    if max(indices) >= block:
        where = f"particles of {d} coordinates" if d else f"q of {n} coordinates"
        raise ValueError(f"{owner} does not fit {where} (phase-space dim {2 * n}): every "
                         f"index must be below {block}")
    return block


def _pairs(N: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(N, offset)


def _gram(X: Array) -> Array:
    """The dot products $x_a \\cdot x_b$, $a \\le b$, of the rows of `X`."""
    rows, cols = _pairs(X.shape[0], 0)
    return jnp.sum(X[rows] * X[cols], axis=-1)


def _spec(kind: str, indices: tuple[int, ...], d: int | None) -> str:
    return f"{kind}:{','.join(map(str, indices))}" + ("" if d is None else f"/{d}")


class Translation(AbstractSymmetry):
    r"""Translations along `axes`: $q_{a,k} \mapsto q_{a,k} + c_k$ for every particle $a$
    and every axis $k$ in `axes`; momenta unchanged.

    The momentum map is the total momentum along the axes, $\mu_k = \sum_a p_{a,k}$
    (one point: $\mu_k = p_k$). Invariant features of a configuration are the
    differences $q_{a,k} - q_{0,k}$ ($a \ge 1$) along the axes and every other
    coordinate; a momentum is invariant as it is. A shear $p \leftarrow p + \nabla V(q)$
    with $V$ a function of these features has $\sum_a \partial V/\partial q_{a,k} = 0$
    (the derivative of $V$ along the translation), so it conserves $\mu$; a shear
    $q \leftarrow q + \nabla T(p)$ does not touch $p$. Noether's theorem: Arnold,
    *Mathematical Methods of Classical Mechanics*, §20; Marsden and Ratiu,
    *Introduction to Mechanics and Symmetry*, §11.4 (translations).

    **Arguments:**

    - `axes`: an index or a tuple of distinct indices into a particle's coordinates
      (one point: into $q$).
    - `particle_dim`: coordinates per particle, or `None` (default): $q$ is one point.

    `act(z, c)` translates by `c` `(len(axes),)`.

    ```python
    chain = Translation(axes=0, particle_dim=1)   # N particles on a line: total momentum
    ```
    """

    kind: ClassVar[str] = "translation"
    axes: tuple[int, ...] = eqx.field(static=True)
    particle_dim: int | None = eqx.field(static=True)

    def __init__(self, axes=0, particle_dim: int | None = None):
        self.axes = _indices("Translation axes", axes)
        self.particle_dim = particle_dim_argument(particle_dim)
        if self.particle_dim is not None and max(self.axes) >= self.particle_dim:
            raise ValueError(f"Translation axes {self.axes} must be below particle_dim={self.particle_dim}")

    def check(self, n: int) -> None:
        _check_blocks(f"Translation(axes={self.axes})", n, self.particle_dim, self.axes)

    def _blocks(self, x):
        return x.reshape(-1, self.particle_dim or x.shape[0])

    def features(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        X = self._blocks(x)
        rest = [k for k in range(X.shape[1]) if k not in self.axes]
        moved = X[:, list(self.axes)]
        return jnp.concatenate([(moved[1:] - moved[:1]).ravel(), X[:, rest].ravel()])

    def momentum_features(self, y: Float[Array, " n"]) -> Float[Array, " n"]:
        return y

    def momentum_map(self, z: Float[Array, " dim"]) -> Float[Array, " k"]:
        P = self._blocks(z[z.shape[0] // 2:])
        return jnp.sum(P[:, list(self.axes)], axis=0)

    def act(self, z, g):
        n = z.shape[0] // 2
        X = self._blocks(z[:n])
        X = X.at[:, list(self.axes)].add(jnp.asarray(g, z.dtype))
        return jnp.concatenate([X.ravel(), z[n:]])

    def shift_mask(self, n: int) -> np.ndarray:
        return np.ones(n)

    @property
    def spec(self) -> str:
        return _spec(self.kind, self.axes, self.particle_dim)


class Rotation(AbstractSymmetry):
    r"""Rotations in the plane of two coordinates `plane = (i, j)`, turning positions
    and momenta alike (of every particle, by the same angle).

    The momentum map is the angular momentum in that plane, $L = \sum_a (q_{a,i}
    p_{a,j} - q_{a,j} p_{a,i})$ (one point in 3-D with `plane=(0, 1)`: $L_z$). The
    invariant features are the dot products and the cross products
    $x_{a,i} x_{b,j} - x_{a,j} x_{b,i}$ of the particles' plane components (one point:
    $x_i^2 + x_j^2$) and every other coordinate; they generate the rotation-invariant
    polynomials (Weyl, *The Classical Groups*, II.9). For $V$ of these features,
    $\sum_a (q_{a,i}\,\partial_{a,j} V - q_{a,j}\,\partial_{a,i} V) = 0$, which is the change
    of $L$ under $p \leftarrow p + \nabla V(q)$; the $q$-shears are the same with $p$.
    Noether's theorem: Arnold, *Mathematical Methods of Classical Mechanics*, §20;
    Marsden and Ratiu, *Introduction to Mechanics and Symmetry*, §11.4.

    **Arguments:**

    - `plane`: two distinct indices `(i, j)` into a particle's coordinates (one point:
      into $q$); the rotation by $\theta$ takes $e_i$ towards $e_j$.
    - `particle_dim`: coordinates per particle, or `None` (default): $q$ is one point.

    `act(z, theta)` rotates by the angle `theta`.

    ```python
    axisymmetric = Rotation(plane=(0, 1))   # q = (x, y, z): L_z is conserved
    ```
    """

    kind: ClassVar[str] = "rotation"
    plane: tuple[int, int] = eqx.field(static=True)
    particle_dim: int | None = eqx.field(static=True)

    def __init__(self, plane=(0, 1), particle_dim: int | None = None):
        plane = sequence_argument("Rotation plane", plane)
        if len(plane) != 2:
            raise ValueError(f"Rotation plane must be two indices (i, j), got {plane!r}")
        i, j = (index_argument("Rotation plane", v) for v in plane)
        if i == j:
            raise ValueError(f"Rotation plane must be two different indices, got ({i}, {j})")
        self.plane = (i, j)
        self.particle_dim = particle_dim_argument(particle_dim)
        if self.particle_dim is not None and max(self.plane) >= self.particle_dim:
            raise ValueError(f"Rotation plane {self.plane} must be below particle_dim={self.particle_dim}")

    def check(self, n: int) -> None:
        _check_blocks(f"Rotation(plane={self.plane})", n, self.particle_dim, self.plane)

    def _blocks(self, x):
        return x.reshape(-1, self.particle_dim or x.shape[0])

    def features(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        X = self._blocks(x)
        i, j = self.plane
        rest = [k for k in range(X.shape[1]) if k not in self.plane]
        rows, cols = _pairs(X.shape[0], 1)
        cross = X[rows, i] * X[cols, j] - X[rows, j] * X[cols, i]
        return jnp.concatenate([_gram(X[:, [i, j]]), cross, X[:, rest].ravel()])

    def momentum_features(self, y: Float[Array, " n"]) -> Float[Array, " m"]:
        return self.features(y)

    def momentum_map(self, z: Float[Array, " dim"]) -> Float[Array, " 1"]:
        n = z.shape[0] // 2
        Q, P = self._blocks(z[:n]), self._blocks(z[n:])
        i, j = self.plane
        return jnp.sum(Q[:, i] * P[:, j] - Q[:, j] * P[:, i], keepdims=True)

    def act(self, z, g):
        n = z.shape[0] // 2
        c, s = jnp.cos(jnp.asarray(g, z.dtype)), jnp.sin(jnp.asarray(g, z.dtype))
        i, j = self.plane

        def turn(x):
            X = self._blocks(x)
            xi, xj = X[:, i], X[:, j]
            return X.at[:, i].set(c * xi - s * xj).at[:, j].set(s * xi + c * xj).ravel()

        return jnp.concatenate([turn(z[:n]), turn(z[n:])])

    def shift_mask(self, n: int) -> np.ndarray:
        mask = np.ones(n).reshape(-1, self.particle_dim or n)
        mask[:, list(self.plane)] = 0.0
        return mask.ravel()

    @property
    def spec(self) -> str:
        return _spec(self.kind, self.plane, self.particle_dim)


class Rotation3(AbstractSymmetry):
    r"""Rotations of particles in 3-D: $q_a \mapsto R q_a$, $p_a \mapsto R p_a$ for
    every particle $a$, one $R \in SO(3)$; $q$ holds $N = n/3$ particles of 3
    coordinates.

    The momentum map is the angular-momentum vector $L = \sum_a q_a \times p_a$. The
    invariant features are the dot products $q_a \cdot q_b$ ($a \le b$; the squared
    norms included) and the triple products $q_a \cdot (q_b \times q_c)$ ($a < b < c$),
    which generate the $SO(3)$-invariant polynomials (Weyl, *The Classical Groups*,
    II.9). For $V$ of these features, $\sum_a q_a \times \nabla_{q_a} V = 0$ (the
    derivative of $V$ along an infinitesimal rotation), which is the change of $L$
    under $p \leftarrow p + \nabla V(q)$; likewise for $q \leftarrow q + \nabla T(p)$.
    Noether's theorem: Arnold, *Mathematical Methods of Classical Mechanics*, §20;
    Marsden and Ratiu, *Introduction to Mechanics and Symmetry*, §11.4.

    `act(z, omega)` rotates by the rotation vector `omega` `(3,)`
    ($R = \exp[\omega]_\times$: the angle $|\omega|$ about $\omega$).

    ```python
    cluster = Rotation3()   # q = (x1, y1, z1, x2, y2, z2, ...): L conserved
    ```
    """

    kind: ClassVar[str] = "rotation3"

    def check(self, n: int) -> None:
        if n % 3:
            raise ValueError(f"Rotation3 needs particles of 3 coordinates, got a configuration of "
                             f"{n} coordinates (phase-space dim {2 * n})")

    def features(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        X = x.reshape(-1, 3)
        triples = np.array(list(itertools.combinations(range(X.shape[0]), 3)), dtype=np.int32)
        triples = triples.reshape(-1, 3)
        det = jnp.sum(X[triples[:, 0]] * jnp.cross(X[triples[:, 1]], X[triples[:, 2]]), axis=-1)
        return jnp.concatenate([_gram(X), det])

    def momentum_features(self, y: Float[Array, " n"]) -> Float[Array, " m"]:
        return self.features(y)

    def momentum_map(self, z: Float[Array, " dim"]) -> Float[Array, " 3"]:
        n = z.shape[0] // 2
        return jnp.sum(jnp.cross(z[:n].reshape(-1, 3), z[n:].reshape(-1, 3)), axis=0)

    def act(self, z, g):
        w = jnp.asarray(g, z.dtype)
        zero = jnp.zeros((), z.dtype)
        R = jsl.expm(jnp.stack([jnp.stack([zero, -w[2], w[1]]), jnp.stack([w[2], zero, -w[0]]),
                                jnp.stack([-w[1], w[0], zero])]))
        X = z.reshape(-1, 3)
        return jnp.sum(R[None, :, :] * X[:, None, :], axis=-1).ravel()

    def shift_mask(self, n: int) -> np.ndarray:
        return np.zeros(n)

    @property
    def spec(self) -> str:
        return self.kind
