r"""A SympNet of identical particles that keeps translations, rotations and relabellings.

For clusters and molecules of $N$ identical particles in $k$ dimensions (state
$z = (q, p)$, $q = (q_1, …, q_N)$, $q_a \in \mathbb{R}^k$ stored particle after
particle, $p$ alike: the layout of `geomlearn.systems.LennardJonesCluster`).
"""

from __future__ import annotations

from typing import Callable, ClassVar

import equinox as eqx
import jax.numpy as jnp

from .._typing import PRNGKeyArray
from .._validation import check_bool, check_int
from ..layers.pair import PairBlock, check_particles
from ..symmetries import Particles
from .sympnet import AbstractStackedSympNet, stacked_layers

__all__ = ["PairSympNet"]


class PairSympNet(AbstractStackedSympNet):
    r"""Pair SympNet: `n_layers` blocks of a pair-potential kick and a kinetic drift.

    $$\Phi_\theta = B_{L} \circ \cdots \circ B_1, \qquad B_\ell = D_\ell \circ K_\ell,$$

    $K_\ell$: $p \leftarrow p - h\nabla V_\ell(q)$, $V_\ell = \sum_{a<b}
    \varphi_\ell(|q_a - q_b|^2)$; $D_\ell$: $q \leftarrow q + h\nabla T_\ell(p)$,
    $T_\ell = \sum_a \psi_\ell(|p_a|^2)$, with $\varphi_\ell, \psi_\ell$ scalar networks
    of `width` units (`geomlearn.layers.pair.PairBlock`). Each shear is the
    exact flow of a Hamiltonian invariant under $G$ = translations, orthogonal maps and
    relabellings of the particles, so for **every parameter value and step** the model is
    symplectic, commutes with $G$ ($\Phi(g z) = g\,\Phi(z)$: rotated, relabelled or
    $q$-translated inputs give the same motion of the outputs) and conserves the total
    and the angular momentum exactly (Noether's theorem; Arnold, *Mathematical Methods
    of Classical Mechanics*, §20). The blocks are stacked and run as one `lax.scan`.
    `group` is `Particles(n_particles, spatial_dim)` (its `momentum_map` gives the
    conserved momenta), `symmetry` its spec; both fixed by construction.

    **Parameters:** $6\, n_\text{layers}\, w$ ($w$ = `width`), whatever $N$ and $k$.

    **Arguments:**

    - `n_particles` $N \ge 2$, `spatial_dim` $k \ge 1$: `dim` $= 2Nk$.
    - `n_layers`: blocks, `≥ 1` (default 2); `width`: units of each scalar network
      (default 8); `activation`: a callable or a name, smooth (default `jnp.tanh`).
    - `symmetric`: the reversible composition $R\,\Phi_{h/2}^{-1} R\,\Phi_{h/2}$ (see
      `geomlearn.models.sympnet`; $R$ commutes with $G$, so $G$ is kept); default `False`.
    - `identity_init`: start as exactly the identity (every output weight $a = 0$).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Call:** `model(z, h=None)` on one point `(dim,)`; `model.inverse(z, h=None)` is
    the exact inverse. A state of another length is a `ValueError`.

    ```python
    model = PairSympNet(7, 3, n_layers=4, width=16, key=jax.random.PRNGKey(0))
    model.group.momentum_map(model(z))   # == model.group.momentum_map(z)
    ```
    """

    structure: ClassVar[str] = "symplectic"
    symmetry_field: ClassVar[str] = "group"

    layers: PairBlock
    dim: int = eqx.field(static=True)
    n_particles: int = eqx.field(static=True)
    spatial_dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)
    identity_init: bool = eqx.field(static=True)

    def __init__(
        self,
        n_particles: int,
        spatial_dim: int,
        *,
        n_layers: int = 2,
        width: int = 8,
        activation: Callable | str = jnp.tanh,
        symmetric: bool = False,
        identity_init: bool = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.n_particles, self.spatial_dim = check_particles(n_particles, spatial_dim)
        self.dim = 2 * self.n_particles * self.spatial_dim
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = check_int("width", width, minimum=1)
        layers = stacked_layers(
            lambda k, dt: PairBlock(self.n_particles, self.spatial_dim, self.width, activation, key=k, dtype=dt),
            self.n_layers, key, dtype)
        self.activation = activation
        self.symmetric = check_bool("symmetric", symmetric)
        self.identity_init = check_bool("identity_init", identity_init)
        if self.identity_init:  # a = 0 in every kick and drift: each shear is the identity
            layers = eqx.tree_at(lambda m: (m.kick.a, m.drift.a), layers,
                                 (jnp.zeros_like(layers.kick.a), jnp.zeros_like(layers.drift.a)))
        self.layers = layers

    @property
    def group(self) -> Particles:
        """The symmetry kept by construction: `Particles(n_particles, spatial_dim)`."""
        return Particles(self.n_particles, self.spatial_dim)

    @property
    def symmetry(self) -> str:
        """The spec of `group`."""
        return self.group.spec

