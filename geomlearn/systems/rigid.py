r"""The free rigid body: Euler's equations for the body angular momentum, a
non-canonical, volume-preserving flow with a Casimir."""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from .._typing import Point, Scalar
from ._base import AbstractSystem
from ._parameters import check_inertia, initial_conditions

__all__ = ["RigidBody"]


class RigidBody(AbstractSystem):
    r"""The free rigid body (Euler's equations) for the body angular momentum $z \in \mathbb{R}^3$.

    $$\dot z_1 = a z_2 z_3,\quad \dot z_2 = b z_1 z_3,\quad \dot z_3 = c z_1 z_2,\qquad
    a = \frac{I_2 - I_3}{I_2 I_3},\ b = \frac{I_3 - I_1}{I_3 I_1},\ c = \frac{I_1 - I_2}{I_1 I_2},$$

    i.e. $\dot z = z \times \nabla H(z)$ with the energy
    $H(z) = \tfrac12\sum_i z_i^2 / I_i$. The flow is divergence-free (volume-preserving),
    odd-dimensional and **not canonical**; it conserves $H$ and the Casimir $C(z) = |z|^2$
    (`invariants` has `"energy"` and `"casimir"`).

    At the default inertia $(2, 1, 2/3)$, $(a, b, c) = (1/2, -1, 1/2)$ — the system of the
    volume-preserving transformer paper (Brantner, de Romemont, Kraus & Li,
    *Volume-preserving transformers for learning time series data with structure*,
    arXiv:2312.11166).

    **Arguments:** `inertia`, the three principal moments $(I_1, I_2, I_3)$, all `> 0`.

    **Default initial conditions:** the paper's validation states
    $(\sin 1.1, 0, \cos 1.1)$ and $(0, \sin 1.1, \cos 1.1)$.

    ```python
    >>> RigidBody().coefficients
    (0.5, -1.0, 0.5)
    ```
    """

    inertia: tuple[float, float, float] = eqx.field(static=True)

    dim: ClassVar[int] = 3
    labels: ClassVar[tuple[str, ...]] = ("z1", "z2", "z3")
    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = (
        ("energy", "hamiltonian"), ("casimir", "casimir")
    )

    def __init__(self, inertia: tuple[float, float, float] = (2.0, 1.0, 2.0 / 3.0)):
        self.inertia = check_inertia(inertia)

    @property
    def coefficients(self) -> tuple[float, float, float]:
        """The coefficients `(a, b, c)` of Euler's equations."""
        # (I2 - I3)/(I2 I3) = 1/I3 - 1/I2, etc.: fewer roundings (exact at the defaults).
        r1, r2, r3 = (1.0 / i for i in self.inertia)
        return (r3 - r2, r1 - r3, r2 - r1)

    def vector_field(self, z):
        z = self._check_point(z)
        a, b, c = self.coefficients
        return jnp.stack([a * z[1] * z[2], b * z[0] * z[2], c * z[0] * z[1]])

    def hamiltonian(self, z):
        r"""The kinetic energy $H(z) = \tfrac12 \sum_i z_i^2 / I_i$."""
        z = self._check_point(z)
        i1, i2, i3 = self.inertia
        return 0.5 * (z[0] ** 2 / i1 + z[1] ** 2 / i2 + z[2] ** 2 / i3)

    def casimir(self, z: Point) -> Scalar:
        r"""The Casimir $C(z) = |z|^2 = z_1^2 + z_2^2 + z_3^2$."""
        z = self._check_point(z)
        return jnp.sum(z * z)

    def default_initial_conditions(self, dtype=None):
        s, c = math.sin(1.1), math.cos(1.1)
        return initial_conditions([[s, 0.0, c], [0.0, s, c]], dtype)
