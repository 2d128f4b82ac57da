r"""Shears of particle systems that keep translations, rotations and relabellings.

The state of $N$ particles in $k$ dimensions is $z = (q, p)$, $q = (q_1, …, q_N)$ with
$q_a \in \mathbb{R}^k$ stored particle after particle, $p$ alike. Two shears, each the
exact time-$h$ flow of a Hamiltonian of $q$ alone or of $p$ alone:

$$\text{kick: } p \leftarrow p - h\,\nabla V(q),\quad V(q) = \sum_{a<b} \varphi(|q_a - q_b|^2);
\qquad \text{drift: } q \leftarrow q + h\,\nabla T(p),\quad T(p) = \sum_a \psi(|p_a|^2),$$

with $\varphi, \psi: \mathbb{R} \to \mathbb{R}$ small scalar networks
$\varphi(s) = \sum_m a_m\, \sigma(w_m s + b_m)$ ($\sigma$ the activation; a smooth one
keeps the forces smooth), whose derivative $\varphi'(s) = \sum_m a_m w_m\,
\sigma'(w_m s + b_m)$ is evaluated in closed form (a forward derivative of $\sigma$).
A pair contributes $2\varphi'(r_{ab}^2)(q_a - q_b)$ to
$\nabla_{q_a} V$ and the opposite to $\nabla_{q_b} V$: forces along the pair directions.

Each shear is **symplectic for every parameter value** (the gradient of a scalar). $V$
is invariant under translations, orthogonal maps and relabellings of the particles; $T$
under orthogonal maps and relabellings (and $q$-translations do not enter it). So each
shear commutes with the group, and by Noether's theorem conserves the total momentum
$\sum_a p_a$ (the pair forces cancel; a drift leaves $p$ alone) and the angular momentum
(a pair force is along $q_a - q_b$; a drift moves $q_a$ along $p_a$). Squared distances
keep both networks smooth everywhere, coincident particles included (no square root).
The pair index arrays are built once in NumPy; no loop over particles is traced.
"""

from __future__ import annotations

from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._nn import output_weights
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, float_dtype
from ..symmetries._particles import pair_indices
from ._symplectic import AbstractSymplecticLayer
from .sympnet import AbstractShear

__all__ = ["PairPotentialKick", "KineticDrift", "PairBlock", "check_particles"]


def check_particles(n_particles, spatial_dim) -> tuple[int, int]:
    """`(N, k)` checked: `N >= 2` particles of `k >= 1` coordinates."""
    return check_int("n_particles", n_particles, minimum=2), check_int("spatial_dim", spatial_dim, minimum=1)


class _AbstractPairShear(AbstractShear):
    """A shear built on one scalar network $s \\mapsto \\sum_m a_m \\sigma(w_m s + b_m)$
    of squared lengths; `_slope(s)` is its derivative at each entry of `s`."""

    w: Float[Array, " width"]
    a: Float[Array, " width"]
    b: Float[Array, " width"]
    dim: int = eqx.field(static=True)
    n_particles: int = eqx.field(static=True)
    spatial_dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(self, n_particles: int, spatial_dim: int, width: int,
                 activation: Callable | str = jnp.tanh, *, key: PRNGKeyArray, dtype=None):
        self.n_particles, self.spatial_dim = check_particles(n_particles, spatial_dim)
        self.dim = 2 * self.n_particles * self.spatial_dim
        self.width = check_int("width", width, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        w_key, b_key, a_key = jax.random.split(key, 3)
        self.w = jax.random.normal(w_key, (self.width,), dtype)
        self.b = jax.random.normal(b_key, (self.width,), dtype)
        self.a = output_weights(a_key, self.width, dtype)

    def _slope(self, s: Array) -> Array:
        """$\\varphi'(s)$ for each entry of `s` `(M,)`, in `s`'s dtype."""
        dtype = s.dtype
        w, b, a = self.w.astype(dtype), self.b.astype(dtype), self.a.astype(dtype)
        pre = s[:, None] * w[None, :] + b[None, :]
        _, dsigma = jax.jvp(resolve_activation(self.activation), (pre,), (jnp.ones_like(pre),))
        return jnp.sum(dsigma * (a * w)[None, :], axis=-1)


class PairPotentialKick(_AbstractPairShear):
    r"""Kick by a pair potential: $p \leftarrow p - h\,\nabla V(q)$, $V(q) = \sum_{a<b}
    \varphi(|q_a - q_b|^2)$ (see the module documentation).

    Symplectic for every parameter value and `h`; commutes with translations, orthogonal
    maps and relabellings of the particles, and conserves the total and the angular
    momentum. **Parameters:** $w, a, b \in \mathbb{R}^{\text{width}}$ ($a$ the output
    weights, small at initialisation; $w, b \sim \mathcal{N}(0, 1)$).

    **Arguments:** `n_particles` $N \ge 2$, `spatial_dim` $k \ge 1$ (`dim` $= 2Nk$),
    `width`, `activation` (a callable or a name; default `jnp.tanh`), `key`
    (keyword-only), `dtype`.

    **Call:** `layer(z, h=None)` on one point `(dim,)`; `layer.inverse(z, h=None)`.
    """

    _changes_q: ClassVar[bool] = False

    def _increment(self, q):
        i, j = pair_indices(self.n_particles)
        X = q.reshape(self.n_particles, self.spatial_dim)
        d = X[i] - X[j]
        g = (2 * self._slope(jnp.sum(d * d, axis=-1)))[:, None] * d  # dφ(r²)/dq_a of each pair
        grad = jnp.zeros_like(X).at[i].add(g).at[j].add(-g)
        return -grad.ravel()


class KineticDrift(_AbstractPairShear):
    r"""Drift by a kinetic energy: $q \leftarrow q + h\,\nabla T(p)$, $T(p) = \sum_a
    \psi(|p_a|^2)$, so $q_a$ moves by $2h\,\psi'(|p_a|^2)\,p_a$.

    Symplectic for every parameter value and `h`; commutes with orthogonal maps,
    relabellings and translations of $q$, and conserves the total and the angular
    momentum. Parameters, arguments and call as for `PairPotentialKick`.
    """

    _changes_q: ClassVar[bool] = True

    def _increment(self, p):
        Y = p.reshape(self.n_particles, self.spatial_dim)
        return (2 * self._slope(jnp.sum(Y * Y, axis=-1))[:, None] * Y).ravel()


class PairBlock(AbstractSymplecticLayer):
    """A kick then a drift: `drift(kick(z, h), h)` (symplectic, with the group kept);
    `inverse` undoes them in reverse order. Arguments as for `PairPotentialKick`."""

    kick: PairPotentialKick
    drift: KineticDrift
    dim: int = eqx.field(static=True)

    def __init__(self, n_particles: int, spatial_dim: int, width: int,
                 activation: Callable | str = jnp.tanh, *, key: PRNGKeyArray, dtype=None):
        k_key, d_key = jax.random.split(key)
        self.kick = PairPotentialKick(n_particles, spatial_dim, width, activation, key=k_key, dtype=dtype)
        self.drift = KineticDrift(n_particles, spatial_dim, width, activation, key=d_key, dtype=dtype)
        self.dim = self.kick.dim

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        return self.drift(self.kick(z, h), h)

    def inverse(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        return self.kick.inverse(self.drift.inverse(z, h), h)
