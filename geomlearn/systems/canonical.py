r"""Canonical Hamiltonian systems of a few degrees of freedom: oscillators, pendulums,
Hénon–Heiles and gravitational problems.

Every state is laid out positions first, $z = (q_1, \dots, q_n, p_1, \dots, p_n)$, and
every class is constructible with no arguments (its documented defaults).

```python
>>> import jax.numpy as jnp
>>> from geomlearn.systems import Pendulum
>>> Pendulum().vector_field(jnp.array([1.0, 0.0]))   # (dq/dt, dp/dt) = (p, -sin q)
Array([ 0.       , -0.84147096], dtype=float32)
```
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Point, Scalar
from ._base import AbstractHamiltonianSystem, AbstractSeparableSystem
from ._parameters import check_positive, check_real, initial_conditions

__all__ = ["HarmonicOscillator", "Pendulum", "DoublePendulum", "CoupledHarmonicOscillator",
           "HenonHeiles", "Kepler", "ThreeBody"]


class HarmonicOscillator(AbstractSeparableSystem):
    r"""The harmonic oscillator $H(q, p) = \dfrac{p^2}{2m} + \dfrac{k q^2}{2}$.

    State `z = (q, p)`, `dim = 2`. The exact flow is a rotation in the scaled variables,
    with frequency $\omega = \sqrt{k/m}$:
    $q(t) = q_0\cos\omega t + \frac{p_0}{m\omega}\sin\omega t$,
    $p(t) = p_0\cos\omega t - m\omega q_0\sin\omega t$.

    **Arguments:**

    - `m`: the mass, `> 0` (default `1.0`).
    - `k`: the spring constant, `> 0` (default `1.0`).

    **Default initial conditions:** `(q, p) = (1, 0)`, `(0, 1)`, `(0.5, -0.5)`.

    ```python
    >>> HarmonicOscillator().hamiltonian(jnp.array([1.0, 0.0]))
    Array(0.5, dtype=float32)
    ```
    """

    m: float = eqx.field(static=True)
    k: float = eqx.field(static=True)

    dim: ClassVar[int] = 2
    labels: ClassVar[tuple[str, ...]] = ("q", "p")

    def __init__(self, m: float = 1.0, k: float = 1.0):
        self.m = check_positive("m", m)
        self.k = check_positive("k", k)

    def kinetic(self, p):
        p = self._check_point(p, size=1, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.m)

    def potential(self, q):
        q = self._check_point(q, size=1, what="position q")
        return 0.5 * self.k * jnp.sum(q * q)

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0], [0.0, 1.0], [0.5, -0.5]], dtype)


class Pendulum(AbstractSeparableSystem):
    r"""The mathematical pendulum $H(q, p) = \dfrac{p^2}{2 m l^2} - m g l \cos q$.

    State `z = (q, p)`, `dim = 2`: `q` the angle from the downward vertical, `p` the
    angular momentum. At the defaults $H = p^2/2 - \cos q$, the pendulum of the SympNets
    paper (Jin et al., *SympNets: intrinsic structure-preserving symplectic networks for
    identifying Hamiltonian systems*, Neural Networks 132, 2020).

    **Arguments:**

    - `m`: the mass, `> 0` (default `1.0`).
    - `l`: the length, `> 0` (default `1.0`).
    - `g`: the gravitational acceleration, `> 0` (default `1.0`).

    **Default initial conditions:** `(q, p) = (1, 0)` (the SympNets trajectory),
    `(2, 0)` (a large libration) and `(0, 1.5)`; all below the separatrix
    $H = mgl$ at the defaults.

    ```python
    >>> Pendulum().potential(jnp.array([0.0]))
    Array(-1., dtype=float32)
    ```
    """

    m: float = eqx.field(static=True)
    l: float = eqx.field(static=True)  # noqa: E741 (the usual symbol for a length)
    g: float = eqx.field(static=True)

    dim: ClassVar[int] = 2
    labels: ClassVar[tuple[str, ...]] = ("q", "p")

    def __init__(self, m: float = 1.0, l: float = 1.0, g: float = 1.0):  # noqa: E741
        self.m = check_positive("m", m)
        self.l = check_positive("l", l)
        self.g = check_positive("g", g)

    def kinetic(self, p):
        p = self._check_point(p, size=1, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.m * self.l**2)

    def potential(self, q):
        q = self._check_point(q, size=1, what="position q")
        return -self.m * self.g * self.l * jnp.sum(jnp.cos(q))

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0], [2.0, 0.0], [0.0, 1.5]], dtype)


class DoublePendulum(AbstractHamiltonianSystem):
    r"""The planar double pendulum in canonical coordinates (not separable).

    State `z = (θ1, θ2, p1, p2)`, `dim = 4`: the angles of the two rods from the downward
    vertical and their conjugate momenta. With $\Delta = \theta_1 - \theta_2$,

    $$H = \frac{m_2 l_2^2 p_1^2 + (m_1 + m_2) l_1^2 p_2^2 - 2 m_2 l_1 l_2 p_1 p_2 \cos\Delta}
    {2 m_2 l_1^2 l_2^2 \left(m_1 + m_2 \sin^2\Delta\right)}
    - (m_1 + m_2) g l_1 \cos\theta_1 - m_2 g l_2 \cos\theta_2 .$$

    The kinetic energy depends on the angles, so explicit symplectic methods do not apply
    (use `"implicit_midpoint"` or a Gauss–Legendre method).

    **Arguments:** `m1, m2` the masses, `l1, l2` the rod lengths, `g` the gravitational
    acceleration; all `> 0`, default `1.0`.

    **Default initial conditions:** `(θ1, θ2, p1, p2) = (0.1, 0.2, 0, 0)` (small,
    nearly linear oscillation), `(π/4, -π/4, 0, 0)` and `(π/2, π/2, 0, 0)` (chaotic).
    """

    m1: float = eqx.field(static=True)
    m2: float = eqx.field(static=True)
    l1: float = eqx.field(static=True)
    l2: float = eqx.field(static=True)
    g: float = eqx.field(static=True)

    dim: ClassVar[int] = 4
    labels: ClassVar[tuple[str, ...]] = ("θ1", "θ2", "p1", "p2")

    def __init__(
        self, m1: float = 1.0, m2: float = 1.0, l1: float = 1.0, l2: float = 1.0, g: float = 1.0
    ):
        self.m1 = check_positive("m1", m1)
        self.m2 = check_positive("m2", m2)
        self.l1 = check_positive("l1", l1)
        self.l2 = check_positive("l2", l2)
        self.g = check_positive("g", g)

    def hamiltonian(self, z):
        z = self._check_point(z)
        t1, t2, p1, p2 = z[0], z[1], z[2], z[3]
        m1, m2, l1, l2, g = self.m1, self.m2, self.l1, self.l2, self.g
        delta = t1 - t2
        num = (
            m2 * l2**2 * p1**2
            + (m1 + m2) * l1**2 * p2**2
            - 2.0 * m2 * l1 * l2 * p1 * p2 * jnp.cos(delta)
        )
        den = 2.0 * m2 * l1**2 * l2**2 * (m1 + m2 * jnp.sin(delta) ** 2)
        return num / den - (m1 + m2) * g * l1 * jnp.cos(t1) - m2 * g * l2 * jnp.cos(t2)

    def default_initial_conditions(self, dtype=None):
        q = np.pi / 4
        return initial_conditions(
            [[0.1, 0.2, 0.0, 0.0], [q, -q, 0.0, 0.0], [2 * q, 2 * q, 0.0, 0.0]], dtype
        )


class CoupledHarmonicOscillator(AbstractSeparableSystem):
    r"""Two oscillators coupled by a spring whose stiffness is switched by a sigmoid.

    State `z = (q1, q2, p1, p2)`, `dim = 4`, and

    $$H = \frac{p_1^2}{2m_1} + \frac{p_2^2}{2m_2} + \frac{k_1 q_1^2}{2}
    + \frac{k_2 q_2^2}{2} + k\,\sigma(q_1)\frac{(q_2 - q_1)^2}{2},
    \qquad \sigma(x) = \frac{1}{1 + e^{-x}} .$$

    The defaults are the test system of the Julia package GeometricMachineLearning.jl
    (its linear symplectic transformer tutorial; see `geomlearn.datasets`).

    **Arguments:** masses `m1 = 2.0`, `m2 = 1.0` and spring constants `k1 = 1.5`,
    `k2 = 0.3` (all `> 0`); coupling `k = 1.0` (`>= 0`).

    **Default initial conditions:** `(q1, q2, p1, p2) = (1, 0, 0, 0)`, `(0, 1, 0, 0)`,
    `(0.5, 0.3, 0.2, 0.4)`.
    """

    m1: float = eqx.field(static=True)
    m2: float = eqx.field(static=True)
    k1: float = eqx.field(static=True)
    k2: float = eqx.field(static=True)
    k: float = eqx.field(static=True)

    dim: ClassVar[int] = 4
    labels: ClassVar[tuple[str, ...]] = ("q1", "q2", "p1", "p2")

    def __init__(
        self, m1: float = 2.0, m2: float = 1.0, k1: float = 1.5, k2: float = 0.3, k: float = 1.0
    ):
        self.m1 = check_positive("m1", m1)
        self.m2 = check_positive("m2", m2)
        self.k1 = check_positive("k1", k1)
        self.k2 = check_positive("k2", k2)
        self.k = check_real("k", k, minimum=0.0, strict=False)

    def kinetic(self, p):
        p = self._check_point(p, size=2, what="momentum p")
        return p[0] ** 2 / (2.0 * self.m1) + p[1] ** 2 / (2.0 * self.m2)

    def potential(self, q):
        q = self._check_point(q, size=2, what="position q")
        q1, q2 = q[0], q[1]
        return (
            0.5 * self.k1 * q1**2
            + 0.5 * self.k2 * q2**2
            + 0.5 * self.k * jax.nn.sigmoid(q1) * (q2 - q1) ** 2
        )

    def default_initial_conditions(self, dtype=None):
        return initial_conditions(
            [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.5, 0.3, 0.2, 0.4]], dtype
        )


class HenonHeiles(AbstractSeparableSystem):
    r"""The Hénon–Heiles system (Hénon & Heiles, Astron. J. 69, 1964).

    State `z = (x, y, p_x, p_y)`, `dim = 4`, and

    $$H = \tfrac12 (p_x^2 + p_y^2) + \tfrac12 (x^2 + y^2)
    + \lambda\left(x^2 y - \tfrac{y^3}{3}\right).$$

    Orbits are bounded for energies below the escape energy $1/(6\lambda^2)$; near it,
    they are largely chaotic.

    **Arguments:** `lam`, the cubic coupling $\lambda \ge 0$ (default `1.0`).

    **Default initial conditions:** `(0, 0.1, 0.5, 0)` (energy ≈ 0.13), `(0, -0.2, 0.3, 0.2)`
    (≈ 0.088) and `(0.1, 0, 0, 0.2)` (0.025), all bounded at the default.
    """

    lam: float = eqx.field(static=True)

    dim: ClassVar[int] = 4
    labels: ClassVar[tuple[str, ...]] = ("x", "y", "p_x", "p_y")

    def __init__(self, lam: float = 1.0):
        self.lam = check_real("lam", lam, minimum=0.0, strict=False)

    def kinetic(self, p):
        p = self._check_point(p, size=2, what="momentum p")
        return 0.5 * jnp.sum(p * p)

    def potential(self, q):
        q = self._check_point(q, size=2, what="position q")
        x, y = q[0], q[1]
        return 0.5 * (x**2 + y**2) + self.lam * (x**2 * y - y**3 / 3.0)

    def default_initial_conditions(self, dtype=None):
        return initial_conditions(
            [[0.0, 0.1, 0.5, 0.0], [0.0, -0.2, 0.3, 0.2], [0.1, 0.0, 0.0, 0.2]], dtype
        )


class Kepler(AbstractSeparableSystem):
    r"""The planar two-body problem in relative coordinates (the Kepler problem).

    State `z = (x, y, p_x, p_y)`, `dim = 4`: the relative position and its conjugate
    momentum for the reduced mass $m$, with

    $$H = \frac{|p|^2}{2m} - \frac{k}{|q|}.$$

    Besides the energy it conserves the angular momentum $L = x p_y - y p_x$
    (`invariants["angular_momentum"]`).

    **Arguments:** `m`, the reduced mass, and `k`, the attraction constant ($G m_1 m_2$);
    both `> 0`, default `1.0`.

    **Default initial conditions:** orbits of semi-major axis 1 starting at the
    pericentre, $q = (1 - e, 0)$, $p = (0, m\sqrt{\mu(1+e)/(1-e)})$ with $\mu = k/m$, for
    eccentricities $e = 0, 0.3, 0.6$ (period $2\pi/\sqrt{\mu}$).
    """

    m: float = eqx.field(static=True)
    k: float = eqx.field(static=True)

    dim: ClassVar[int] = 4
    labels: ClassVar[tuple[str, ...]] = ("x", "y", "p_x", "p_y")
    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = (
        ("energy", "hamiltonian"), ("angular_momentum", "angular_momentum")
    )

    def __init__(self, m: float = 1.0, k: float = 1.0):
        self.m = check_positive("m", m)
        self.k = check_positive("k", k)

    def kinetic(self, p):
        p = self._check_point(p, size=2, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.m)

    def potential(self, q):
        q = self._check_point(q, size=2, what="position q")
        return -self.k / jnp.sqrt(jnp.sum(q * q))

    def angular_momentum(self, z: Point) -> Scalar:
        r"""$L = x p_y - y p_x$."""
        z = self._check_point(z)
        return z[0] * z[3] - z[1] * z[2]

    def default_initial_conditions(self, dtype=None):
        mu = self.k / self.m
        rows = []
        for e in (0.0, 0.3, 0.6):
            rows.append([1.0 - e, 0.0, 0.0, self.m * math.sqrt(mu * (1.0 + e) / (1.0 - e))])
        return initial_conditions(rows, dtype)


# The figure-eight choreography of three equal masses (G = m = 1): Chenciner & Montgomery,
# Annals of Mathematics 152 (2000); initial data as published there (after C. Moore, 1993).
_FIGURE_EIGHT_Q = (0.97000436, -0.24308753)
_FIGURE_EIGHT_V3 = (-0.93240737, -0.86473146)


class ThreeBody(AbstractSeparableSystem):
    r"""Three equal point masses in the plane under Newtonian gravity.

    State `z = (x1, y1, x2, y2, x3, y3, px1, py1, px2, py2, px3, py3)`, `dim = 12`
    (all positions, then all momenta, each body's pair in order), and

    $$H = \sum_{i=1}^{3}\frac{|p_i|^2}{2m} - \sum_{i<j}\frac{G m^2}{|q_i - q_j|}.$$

    Besides the energy it conserves the total momentum (`"momentum_x"`, `"momentum_y"`)
    and the angular momentum (`"angular_momentum"`).

    **Arguments:** `m`, the mass of each body, and `G`, the gravitational constant; both
    `> 0`, default `1.0`.

    **Default initial conditions:** the figure-eight choreography (Chenciner &
    Montgomery, Annals of Mathematics 152, 2000) and Lagrange's rotating equilateral
    triangle on the unit circle; velocities are scaled by $\sqrt{Gm}$ so both stay exact
    periodic solutions for any `m`, `G`. Both have zero total momentum.
    """

    m: float = eqx.field(static=True)
    G: float = eqx.field(static=True)

    dim: ClassVar[int] = 12
    labels: ClassVar[tuple[str, ...]] = (
        "x1", "y1", "x2", "y2", "x3", "y3", "px1", "py1", "px2", "py2", "px3", "py3"
    )  # fmt: skip
    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = (
        ("energy", "hamiltonian"), ("momentum_x", "momentum_x"), ("momentum_y", "momentum_y"),
        ("angular_momentum", "angular_momentum"),
    )

    def __init__(self, m: float = 1.0, G: float = 1.0):
        self.m = check_positive("m", m)
        self.G = check_positive("G", G)

    def kinetic(self, p):
        p = self._check_point(p, size=6, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.m)

    def potential(self, q):
        q = self._check_point(q, size=6, what="position q")
        r = q.reshape(3, 2)
        total = 0.0
        for i, j in ((0, 1), (0, 2), (1, 2)):
            d = r[i] - r[j]
            total = total - 1.0 / jnp.sqrt(jnp.sum(d * d))
        return self.G * self.m**2 * total

    def momentum_x(self, z: Point) -> Scalar:
        """Total momentum, x component."""
        z = self._check_point(z)
        return z[6] + z[8] + z[10]

    def momentum_y(self, z: Point) -> Scalar:
        """Total momentum, y component."""
        z = self._check_point(z)
        return z[7] + z[9] + z[11]

    def angular_momentum(self, z: Point) -> Scalar:
        r"""Total angular momentum $\sum_i x_i p_{y,i} - y_i p_{x,i}$."""
        z = self._check_point(z)
        q, p = z[:6].reshape(3, 2), z[6:].reshape(3, 2)
        return jnp.sum(q[:, 0] * p[:, 1] - q[:, 1] * p[:, 0])

    def default_initial_conditions(self, dtype=None):
        scale = math.sqrt(self.G * self.m)  # velocity scale for general G, m
        x, y = _FIGURE_EIGHT_Q
        vx3, vy3 = (scale * v for v in _FIGURE_EIGHT_V3)
        eight_q = [x, y, -x, -y, 0.0, 0.0]
        eight_v = [-vx3 / 2, -vy3 / 2, -vx3 / 2, -vy3 / 2, vx3, vy3]
        # Lagrange: side sqrt(3) on the unit circle, ω² = G m / (sqrt(3) R³), R = 1.
        omega = scale * 3.0**-0.25
        angles = [0.0, 2 * math.pi / 3, 4 * math.pi / 3]
        tri_q, tri_v = [], []
        for a in angles:
            tri_q += [math.cos(a), math.sin(a)]
            tri_v += [-omega * math.sin(a), omega * math.cos(a)]
        rows = [eight_q + [self.m * v for v in eight_v], tri_q + [self.m * v for v in tri_v]]
        return initial_conditions(rows, dtype)
