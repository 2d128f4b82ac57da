r"""Dynamical systems that generate the trajectories geomlearn learns from.

Every system is a small immutable `eqx.Module` with

- `dim`: the dimension of its state `z`;
- `vector_field(z)`: the right-hand side of $\dot z = f(z)$ for **one** state `(dim,)`
  (use `jax.vmap` for batches);
- `hamiltonian(z)`: its energy, and `invariants`, a dict `name → callable(z) -> scalar`
  of every conserved quantity it knows (`"energy"` always);
- `default_initial_conditions()`: a documented array `(B, dim)` of starting states;
- the class flags `canonical` (`z = (q, p)` with the canonical form
  $\mathbb{J}$, so $f = \mathbb{J}\nabla H$) and `separable` ($H(q, p) = T(p) + V(q)$,
  which explicit symplectic methods need; separable systems also expose `kinetic(p)` and
  `potential(q)`).

Canonical states are laid out **q first**: $z = (q_1, \dots, q_n, p_1, \dots, p_n)$.
The rigid body is the one non-canonical system: its state is the body angular momentum
$z \in \mathbb{R}^3$ and its flow preserves volume and the Casimir $|z|^2$.

Parameters are plain Python floats (static fields): a system is a constant of the
computation, not something trained. Methods return the dtype of their input.

`SYSTEMS` maps the command-line names to the classes; every class is constructible with
no arguments (its documented defaults).

```python
>>> import jax.numpy as jnp
>>> from geomlearn.systems import Pendulum
>>> pendulum = Pendulum()
>>> pendulum.vector_field(jnp.array([1.0, 0.0]))   # (dq/dt, dp/dt) = (p, -sin q)
Array([ 0.       , -0.84147096], dtype=float32)
```

New systems subclass `AbstractSeparableSystem` (implement `kinetic`, `potential`),
`AbstractHamiltonianSystem` (implement `hamiltonian`) or `AbstractSystem`
(implement `vector_field` and `hamiltonian`), set the class variables and add a
`default_initial_conditions`.
"""

from __future__ import annotations

import abc
import math
import numbers
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._typing import Array, Float, Point, Scalar
from ._validation import float_dtype

__all__ = [
    "AbstractSystem",
    "AbstractHamiltonianSystem",
    "AbstractSeparableSystem",
    "HarmonicOscillator",
    "Pendulum",
    "DoublePendulum",
    "CoupledHarmonicOscillator",
    "HenonHeiles",
    "Kepler",
    "ThreeBody",
    "RigidBody",
    "ParametricPendulum",
    "ForcedRigidBody",
    "TodaLattice",
    "LinearWave",
    "AbstractPortHamiltonianSystem",
    "DampedPendulum",
    "Duffing",
    "ForcedMassSpring",
    "bump",
    "SYSTEMS",
    "resolve_system",
]


def resolve_system(name: str) -> str:
    """The `SYSTEMS` key of a system name or class name (case-insensitive, `-` or `_`);
    `ValueError` listing the valid names otherwise."""
    key = name.strip().lower().replace("-", "_")
    for sys_name, cls in SYSTEMS.items():
        if key in (sys_name, cls.__name__.lower()):
            return sys_name
    raise ValueError(f"unknown system {name!r}; valid systems: {', '.join(SYSTEMS)}")


def _real(name: str, value, *, minimum: float | None = None, strict: bool = True) -> float:
    """`value` as a finite Python float; `ValueError` unless `value > minimum` (or `>=`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None:
        if strict and value <= minimum:
            raise ValueError(f"{name} must be > {minimum}, got {value}")
        if not strict and value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _positive(name: str, value) -> float:
    return _real(name, value, minimum=0.0, strict=True)


def _initial_conditions(rows, dtype) -> Float[Array, "B d"]:
    return jnp.asarray(np.asarray(rows, dtype=np.float64), dtype=float_dtype(dtype))


class AbstractSystem(eqx.Module):
    r"""An autonomous system $\dot z = f(z)$ on $\mathbb{R}^{d}$ with known invariants.

    Subclasses set the class variables `dim`, `canonical`, `separable` and `labels`
    (names of the state components, for plots) and implement `vector_field`,
    `hamiltonian` and `default_initial_conditions`.
    """

    dim: ClassVar[int]
    canonical: ClassVar[bool] = False
    separable: ClassVar[bool] = False
    labels: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def vector_field(self, z: Point) -> Point:
        """The time derivative $f(z)$ at one state `z` of shape `(dim,)`."""

    @abc.abstractmethod
    def hamiltonian(self, z: Point) -> Scalar:
        """The energy at one state `z` of shape `(dim,)`."""

    @abc.abstractmethod
    def default_initial_conditions(self, dtype=None) -> Float[Array, "B d"]:
        """A documented set of initial conditions, shape `(B, dim)`."""

    @property
    def invariants(self) -> dict[str, Callable[[Point], Scalar]]:
        """Conserved quantities by name: `{"energy": self.hamiltonian}` (and more for
        systems that have them). Each maps one state `(dim,)` to a scalar."""
        return {"energy": self.hamiltonian}

    def _check_point(self, z, *, size: int | None = None, what: str = "state z"):
        size = self.dim if size is None else size
        z = jnp.asarray(z)
        if z.shape != (size,):
            raise ValueError(
                f"{type(self).__name__}: expected a {what} of shape ({size},), got shape "
                f"{z.shape} (methods act on one state; use jax.vmap for a batch)"
            )
        if not jnp.issubdtype(z.dtype, jnp.floating):
            raise TypeError(
                f"{type(self).__name__}: the {what} must have a floating dtype, got {z.dtype}"
            )
        return z


class AbstractHamiltonianSystem(AbstractSystem):
    r"""A canonical Hamiltonian system: $z = (q, p)$, $\dot z = \mathbb{J}\nabla H(z)$.

    That is $\dot q = \partial H/\partial p$, $\dot p = -\partial H/\partial q$. The vector
    field is computed from `hamiltonian` by automatic differentiation, so a subclass only
    writes its energy.
    """

    canonical: ClassVar[bool] = True

    def vector_field(self, z: Point) -> Point:
        r"""$\mathbb{J}\nabla H(z) = (\partial_p H, -\partial_q H)$ at one state `(dim,)`."""
        z = self._check_point(z)
        n = self.dim // 2
        grad = jax.grad(self.hamiltonian)(z)
        return jnp.concatenate([grad[n:], -grad[:n]])


class AbstractSeparableSystem(AbstractHamiltonianSystem):
    r"""A separable canonical system, $H(q, p) = T(p) + V(q)$.

    Explicit symplectic methods (symplectic Euler, Störmer–Verlet and its compositions)
    need exactly the two gradients $\nabla T$ and $\nabla V$, given here by `grad_kinetic`
    and `grad_potential`.
    """

    separable: ClassVar[bool] = True

    @abc.abstractmethod
    def kinetic(self, p: Float[Array, " n"]) -> Scalar:
        """The kinetic energy $T(p)$ for momenta `p` of shape `(dim // 2,)`."""

    @abc.abstractmethod
    def potential(self, q: Float[Array, " n"]) -> Scalar:
        """The potential energy $V(q)$ for positions `q` of shape `(dim // 2,)`."""

    def hamiltonian(self, z: Point) -> Scalar:
        """$H(z) = T(p) + V(q)$ at one state `z = (q, p)`."""
        z = self._check_point(z)
        n = self.dim // 2
        return self.kinetic(z[n:]) + self.potential(z[:n])

    def grad_kinetic(self, p: Float[Array, " n"]) -> Float[Array, " n"]:
        r"""$\nabla T(p) = \dot q$."""
        p = self._check_point(p, size=self.dim // 2, what="momentum p")
        return jax.grad(self.kinetic)(p)

    def grad_potential(self, q: Float[Array, " n"]) -> Float[Array, " n"]:
        r"""$\nabla V(q) = -\dot p$."""
        q = self._check_point(q, size=self.dim // 2, what="position q")
        return jax.grad(self.potential)(q)

    def vector_field(self, z: Point) -> Point:
        r"""$(\nabla T(p), -\nabla V(q))$ at one state `z = (q, p)`."""
        z = self._check_point(z)
        n = self.dim // 2
        return jnp.concatenate([self.grad_kinetic(z[n:]), -self.grad_potential(z[:n])])


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
        self.m = _positive("m", m)
        self.k = _positive("k", k)

    def kinetic(self, p):
        p = self._check_point(p, size=1, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.m)

    def potential(self, q):
        q = self._check_point(q, size=1, what="position q")
        return 0.5 * self.k * jnp.sum(q * q)

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions([[1.0, 0.0], [0.0, 1.0], [0.5, -0.5]], dtype)


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
        self.m = _positive("m", m)
        self.l = _positive("l", l)
        self.g = _positive("g", g)

    def kinetic(self, p):
        p = self._check_point(p, size=1, what="momentum p")
        return jnp.sum(p * p) / (2.0 * self.m * self.l**2)

    def potential(self, q):
        q = self._check_point(q, size=1, what="position q")
        return -self.m * self.g * self.l * jnp.sum(jnp.cos(q))

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions([[1.0, 0.0], [2.0, 0.0], [0.0, 1.5]], dtype)


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
        self.m1 = _positive("m1", m1)
        self.m2 = _positive("m2", m2)
        self.l1 = _positive("l1", l1)
        self.l2 = _positive("l2", l2)
        self.g = _positive("g", g)

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
        return _initial_conditions(
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
        self.m1 = _positive("m1", m1)
        self.m2 = _positive("m2", m2)
        self.k1 = _positive("k1", k1)
        self.k2 = _positive("k2", k2)
        self.k = _real("k", k, minimum=0.0, strict=False)

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
        return _initial_conditions(
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
        self.lam = _real("lam", lam, minimum=0.0, strict=False)

    def kinetic(self, p):
        p = self._check_point(p, size=2, what="momentum p")
        return 0.5 * jnp.sum(p * p)

    def potential(self, q):
        q = self._check_point(q, size=2, what="position q")
        x, y = q[0], q[1]
        return 0.5 * (x**2 + y**2) + self.lam * (x**2 * y - y**3 / 3.0)

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions(
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

    def __init__(self, m: float = 1.0, k: float = 1.0):
        self.m = _positive("m", m)
        self.k = _positive("k", k)

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

    @property
    def invariants(self):
        return {"energy": self.hamiltonian, "angular_momentum": self.angular_momentum}

    def default_initial_conditions(self, dtype=None):
        mu = self.k / self.m
        rows = []
        for e in (0.0, 0.3, 0.6):
            rows.append([1.0 - e, 0.0, 0.0, self.m * math.sqrt(mu * (1.0 + e) / (1.0 - e))])
        return _initial_conditions(rows, dtype)


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

    def __init__(self, m: float = 1.0, G: float = 1.0):
        self.m = _positive("m", m)
        self.G = _positive("G", G)

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

    @property
    def invariants(self):
        return {
            "energy": self.hamiltonian,
            "momentum_x": self.momentum_x,
            "momentum_y": self.momentum_y,
            "angular_momentum": self.angular_momentum,
        }

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
        return _initial_conditions(rows, dtype)


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
    canonical: ClassVar[bool] = False
    separable: ClassVar[bool] = False
    labels: ClassVar[tuple[str, ...]] = ("z1", "z2", "z3")

    def __init__(self, inertia: tuple[float, float, float] = (2.0, 1.0, 2.0 / 3.0)):
        try:
            values = tuple(inertia)
        except TypeError:
            raise TypeError(
                f"inertia must be a sequence of three numbers, got {inertia!r}"
            ) from None
        if len(values) != 3:
            raise ValueError(f"inertia must have three entries (I1, I2, I3), got {len(values)}")
        self.inertia = tuple(_positive(f"inertia[{i}]", v) for i, v in enumerate(values))

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

    @property
    def invariants(self):
        return {"energy": self.hamiltonian, "casimir": self.casimir}

    def default_initial_conditions(self, dtype=None):
        s, c = math.sin(1.1), math.cos(1.1)
        return _initial_conditions([[s, 0.0, c], [0.0, s, c]], dtype)


# --------------------------------------------------------------- large lattices (PDEs)


def bump(xi, mu: float = 0.3):
    r"""The cubic-spline bump $u_0(\xi) = h(s(\xi, \mu))$ of the model-reduction examples.

    $$h(s) = \begin{cases} 1 - \tfrac32 s^2 + \tfrac34 s^3 & 0 \le s \le 1\\
    \tfrac14 (2 - s)^3 & 1 < s \le 2\\ 0 & \text{else,}\end{cases}
    \qquad s(\xi, \mu) = 20\mu\,\lvert \xi + \mu/2 \rvert ,$$

    a $C^2$ bump of half-width $1/(10\mu)$ centred at $\xi = -\mu/2$ (Buchfink, Glas &
    Haasdonk, *Symplectic model reduction of Hamiltonian systems on nonlinear
    manifolds*, 2023; also the initial condition of GeometricProblems.jl's Toda lattice
    and linear wave). Evaluated in NumPy float64 (a constant of the data, not traced).

    **Returns:** `(u0, du0)`, the bump and its derivative $\partial_\xi u_0$ at `xi`.
    """
    xi = np.asarray(xi, dtype=np.float64)
    s = 20.0 * mu * np.abs(xi + mu / 2.0)
    ds = 20.0 * mu * np.sign(xi + mu / 2.0)
    inner = s <= 1.0
    outer = (s > 1.0) & (s <= 2.0)
    h = np.where(inner, 1.0 - 1.5 * s**2 + 0.75 * s**3, np.where(outer, 0.25 * (2.0 - s) ** 3, 0.0))
    dh = np.where(inner, -3.0 * s + 2.25 * s**2, np.where(outer, -0.75 * (2.0 - s) ** 2, 0.0))
    return h, dh * ds


class TodaLattice(AbstractSeparableSystem):
    r"""The periodic Toda lattice of `n_particles` particles (Toda, 1967).

    State `z = (q_1..q_N, p_1..p_N)`, `dim = 2N`, and

    $$H(q, p) = \sum_{n=1}^{N} \frac{p_n^2}{2} + \alpha \sum_{n=1}^{N} e^{q_n - q_{n+1}},
    \qquad q_{N+1} = q_1 .$$

    A completely integrable lattice: besides the energy it conserves the total
    momentum $\sum_n p_n$ (`invariants`: `"energy"`, `"momentum"`). Small bumps travel as
    waves (solitons) around the ring — the standard large Hamiltonian test problem of
    nonlinear model reduction.

    **Arguments:**

    - `n_particles`: `N ≥ 2` (default `200`, `dim = 400`).
    - `alpha`: the interaction strength `> 0` (default `0.64`).
    - `mu`: the width parameter of the bump initial condition (default `0.3`).

    **Default initial conditions:** one state, the reference package's bump: $q_n =
    u_0(\xi_n)$ with [`bump`][geomlearn.systems.bump] on the grid $\xi_n$ of $N$ points
    from $-1/2$ to $1/2$, and $p = 0$ (GeometricMachineLearning.jl's symplectic
    autoencoder example; the parameters are those of GeometricProblems.jl).

    ```python
    >>> toda = TodaLattice()
    >>> toda.dim, toda.default_initial_conditions().shape
    (400, (1, 400))
    ```
    """

    n_particles: int = eqx.field(static=True)
    alpha: float = eqx.field(static=True)
    mu: float = eqx.field(static=True)

    def __init__(self, n_particles: int = 200, alpha: float = 0.64, mu: float = 0.3):
        if isinstance(n_particles, bool) or not isinstance(n_particles, numbers.Integral):
            raise TypeError(f"n_particles must be an integer, got {n_particles!r}")
        if n_particles < 2:
            raise ValueError(f"n_particles must be >= 2, got {n_particles}")
        self.n_particles = int(n_particles)
        self.alpha = _positive("alpha", alpha)
        self.mu = _positive("mu", mu)

    @property
    def dim(self) -> int:  # type: ignore[override]
        return 2 * self.n_particles

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        N = self.n_particles
        return tuple(f"q{i + 1}" for i in range(N)) + tuple(f"p{i + 1}" for i in range(N))

    def kinetic(self, p):
        p = self._check_point(p, size=self.n_particles, what="momentum p")
        return 0.5 * jnp.sum(p * p)

    def potential(self, q):
        q = self._check_point(q, size=self.n_particles, what="position q")
        return self.alpha * jnp.sum(jnp.exp(q - jnp.roll(q, -1)))

    def momentum(self, z: Point) -> Scalar:
        r"""The total momentum $\sum_n p_n$ (conserved: $H$ is invariant under $q \mapsto
        q + c$)."""
        z = self._check_point(z)
        return jnp.sum(z[self.n_particles :])

    @property
    def invariants(self):
        return {"energy": self.hamiltonian, "momentum": self.momentum}

    def default_initial_conditions(self, dtype=None):
        xi = np.linspace(-0.5, 0.5, self.n_particles)
        q, _ = bump(xi, self.mu)
        return _initial_conditions([np.concatenate([q, np.zeros_like(q)])], dtype)


class LinearWave(AbstractSeparableSystem):
    r"""The linear wave equation $u_{tt} = c^2 u_{\xi\xi}$ on the periodic interval
    $[-1/2, 1/2)$, semi-discretised by finite differences on `n_points` nodes.

    With $\Delta\xi = 1/N$, $q_i = u(\xi_i)$ and $p_i = u_t(\xi_i)$, the discretisation
    is the canonical Hamiltonian system (`dim = 2N`)

    $$H(q, p) = \sum_{i=1}^{N} \frac{p_i^2}{2} + \frac{c^2}{2\Delta\xi^2}
    \sum_{i=1}^{N} (q_{i+1} - q_i)^2, \qquad q_{N+1} = q_1,$$

    i.e. $\dot q = p$, $\dot p = c^2 D_2 q$ with the periodic second-difference matrix
    $D_2$ (the discrete energy is $\Delta\xi\,H$). Conserves the energy and the total
    momentum $\sum_i p_i$ (`invariants`: `"energy"`, `"momentum"`). Its flow is linear,
    so a linear symplectic reduction (PSD) is the natural reference.

    **Arguments:** `n_points` `N ≥ 3` (default `200`, `dim = 400`), wave speed `c > 0`
    (default `0.025`: the packet crosses the domain in $1/c = 40$ time units), bump width
    parameter `mu` (default `0.3`).

    **Stiffness.** The fastest mode has frequency $2cN$. The implicit methods of
    `geomlearn.integrators` solve their stages by fixed-point iteration, which converges
    for $\Delta t\, c N \lesssim 1$ (the defaults allow `dt = 0.1`); a faster wave or a
    finer grid needs a smaller step or `substeps`.

    **Default initial conditions:** one state, the right-travelling bump
    $u(\xi, t) = u_0(\xi - ct)$: $q_i = u_0(\xi_i)$, $p_i = -c\,u_0'(\xi_i)$ with
    [`bump`][geomlearn.systems.bump] on $\xi_i = -1/2 + i\Delta\xi$.
    """

    n_points: int = eqx.field(static=True)
    c: float = eqx.field(static=True)
    mu: float = eqx.field(static=True)

    def __init__(self, n_points: int = 200, c: float = 0.025, mu: float = 0.3):
        if isinstance(n_points, bool) or not isinstance(n_points, numbers.Integral):
            raise TypeError(f"n_points must be an integer, got {n_points!r}")
        if n_points < 3:
            raise ValueError(f"n_points must be >= 3, got {n_points}")
        self.n_points = int(n_points)
        self.c = _positive("c", c)
        self.mu = _positive("mu", mu)

    @property
    def dim(self) -> int:  # type: ignore[override]
        return 2 * self.n_points

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        N = self.n_points
        return tuple(f"q{i + 1}" for i in range(N)) + tuple(f"p{i + 1}" for i in range(N))

    def kinetic(self, p):
        p = self._check_point(p, size=self.n_points, what="momentum p")
        return 0.5 * jnp.sum(p * p)

    def potential(self, q):
        q = self._check_point(q, size=self.n_points, what="position q")
        k = 0.5 * (self.c * self.n_points) ** 2
        dq = jnp.roll(q, -1) - q
        return k * jnp.sum(dq * dq)

    def momentum(self, z: Point) -> Scalar:
        r"""The total momentum $\sum_i p_i$."""
        z = self._check_point(z)
        return jnp.sum(z[self.n_points :])

    @property
    def invariants(self):
        return {"energy": self.hamiltonian, "momentum": self.momentum}

    def default_initial_conditions(self, dtype=None):
        xi = -0.5 + np.arange(self.n_points) / self.n_points
        q, dq = bump(xi, self.mu)
        return _initial_conditions([np.concatenate([q, -self.c * dq])], dtype)


class ParametricPendulum(AbstractSeparableSystem):
    r"""A pendulum with a periodically driven pivot (a nonlinear Mathieu oscillator),
    written as an autonomous system in **extended phase space**.

    The physical system is non-autonomous,
    $$H(q, p, t) = \frac{p^2}{2} + \omega_0^2\,\big(1 + \varepsilon\cos\Omega t\big)
      \big(1 - \cos q\big)$$
    (for small $q$, the Mathieu equation $\ddot q + \omega_0^2(1 + \varepsilon\cos\Omega
    t)\,q = 0$). Time becomes a coordinate $\tau$ with a conjugate momentum $E$ (minus the
    energy given to the drive), so the state is $z = (q, \tau, p, E)$, `dim = 4`, and
    $$K(q, \tau, p, E) = \underbrace{\tfrac12 p^2 + E}_{T(p, E)} +
      \underbrace{\omega_0^2\,(1 + \varepsilon\cos\Omega\tau)(1 - \cos q)}_{V(q, \tau)}$$
    is separable and conserved: $\dot\tau = 1$ and $\dot E = -\partial_\tau V$. Started
    at $\tau = 0$, the $(q, p)$ rows of a trajectory are those of the driven pendulum.

    **Why it is in geomlearn.** Sampled with `dt` $= 2\pi/(\Omega T)$ and cut into windows
    of $T$ rows that start at multiples of the period $2\pi/\Omega$ (see
    `geomlearn.datasets.parametric_pendulum`), the map from row $i$ of a window to row
    $i$ of the next is the period map started at the drive phase $2\pi i/T$: it depends
    on $i$. A transformer integrator that does not know the order of its rows cannot
    represent it: a problem on which a positional encoding is needed.

    **Arguments:**

    - `omega0`: the small-oscillation frequency $\omega_0 > 0$ (default `1.0`).
    - `epsilon`: the relative drive amplitude $\varepsilon \ge 0$ (default `0.5`).
    - `Omega`: the drive frequency $\Omega > 0$ (default `2.0`, the principal parametric
      resonance $\Omega = 2\omega_0$, where the drive matters most).

    **Default initial conditions:** $(q, \tau, p, E) = (1, 0, 0, 0)$ and $(0.5, 0, 0.5, 0)$.

    ```python
    >>> ParametricPendulum().vector_field(jnp.array([0.0, 0.0, 1.0, 0.0]))[:2]  # (q̇, τ̇)
    Array([1., 1.], dtype=float32)
    ```
    """

    omega0: float = eqx.field(static=True)
    epsilon: float = eqx.field(static=True)
    Omega: float = eqx.field(static=True)

    dim: ClassVar[int] = 4
    labels: ClassVar[tuple[str, ...]] = ("q", "tau", "p", "E")

    def __init__(self, omega0: float = 1.0, epsilon: float = 0.5, Omega: float = 2.0):
        self.omega0 = _positive("omega0", omega0)
        self.epsilon = _real("epsilon", epsilon, minimum=0.0, strict=False)
        self.Omega = _positive("Omega", Omega)

    @property
    def period(self) -> float:
        r"""The period $2\pi/\Omega$ of the drive."""
        return 2.0 * math.pi / self.Omega

    def kinetic(self, p):
        r"""$T(p, E) = p^2/2 + E$ for the momenta `(p, E)`."""
        p = self._check_point(p, size=2, what="momentum p")
        return 0.5 * p[0] * p[0] + p[1]

    def potential(self, q):
        r"""$V(q, \tau) = \omega_0^2 (1 + \varepsilon\cos\Omega\tau)(1 - \cos q)$ for the
        positions `(q, τ)`."""
        q = self._check_point(q, size=2, what="position q")
        drive = 1.0 + self.epsilon * jnp.cos(self.Omega * q[1])
        return self.omega0**2 * drive * (1.0 - jnp.cos(q[0]))

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions([[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0]], dtype)


class ForcedRigidBody(AbstractSystem):
    r"""A rigid body whose moments of inertia pulsate periodically: a non-autonomous
    divergence-free flow, written autonomously in extended phase space.

    With inverse moments $r_k(t) = \frac{1}{I_k}\big(1 + \varepsilon\cos(\Omega t +
    2\pi k/3)\big)$, $k = 0, 1, 2$, the body angular momentum obeys Euler's equations
    $\dot z = z \times \nabla_z H(z, t)$, $H = \tfrac12\sum_k r_k(t) z_k^2$. Component
    $k$ of the field does not depend on $z_k$, so the flow preserves volume and the
    Casimir $|z|^2$ at every instant, but not the energy. The state is extended by the
    time $\tau$ ($\dot\tau = 1$) and an energy account $E$ ($\dot E = -\partial_\tau H$):
    $z = (z_1, z_2, z_3, \tau, E)$, `dim = 5`. The extended field is divergence-free and
    conserves $K = H(z, \tau) + E$ (`"energy"`) and $|z|^2$ over the first three
    components (`"casimir"`).

    It is the volume-preserving analogue of `ParametricPendulum`: windows of $T$ rows
    aligned with the period $2\pi/\Omega$ make the map between windows depend on the row
    (`geomlearn.datasets.forced_rigid_body`).

    **Arguments:**

    - `inertia`: the mean principal moments (default $(2, 1, 2/3)$, as `RigidBody`).
    - `epsilon`: the relative pulsation, $0 \le \varepsilon < 1$ (default `0.5`).
    - `Omega`: the pulsation frequency $\Omega > 0$ (default `1.0`).

    **Default initial conditions:** $(\sin 1.1, 0, \cos 1.1, 0, 0)$ and
    $(0, \sin 1.1, \cos 1.1, 0, 0)$.

    ```python
    >>> ForcedRigidBody().vector_field(jnp.array([0.0, 0.0, 1.0, 0.0, 0.0]))[3]  # τ̇
    Array(1., dtype=float32)
    ```
    """

    inertia: tuple[float, float, float] = eqx.field(static=True)
    epsilon: float = eqx.field(static=True)
    Omega: float = eqx.field(static=True)

    dim: ClassVar[int] = 5
    canonical: ClassVar[bool] = False
    separable: ClassVar[bool] = False
    labels: ClassVar[tuple[str, ...]] = ("z1", "z2", "z3", "tau", "E")

    def __init__(
        self,
        inertia: tuple[float, float, float] = (2.0, 1.0, 2.0 / 3.0),
        epsilon: float = 0.5,
        Omega: float = 1.0,
    ):
        self.inertia = RigidBody(inertia).inertia
        self.epsilon = _real("epsilon", epsilon, minimum=0.0, strict=False)
        if self.epsilon >= 1.0:
            raise ValueError(f"epsilon must be < 1 (positive moments), got {self.epsilon}")
        self.Omega = _positive("Omega", Omega)

    @property
    def period(self) -> float:
        r"""The period $2\pi/\Omega$ of the pulsation."""
        return 2.0 * math.pi / self.Omega

    def _inverse_moments(self, tau):
        dtype = jnp.result_type(tau)
        phases = jnp.asarray(np.array([0.0, 2.0, 4.0]) * (math.pi / 3.0), dtype)
        base = jnp.asarray(np.array([1.0 / i for i in self.inertia]), dtype)
        return base * (1.0 + self.epsilon * jnp.cos(self.Omega * tau + phases))

    def _energy(self, m, tau):
        return 0.5 * jnp.sum(self._inverse_moments(tau) * m * m)

    def vector_field(self, z):
        z = self._check_point(z)
        m, tau = z[:3], z[3]
        r = self._inverse_moments(tau)
        rates = jnp.stack([
            (r[2] - r[1]) * m[1] * m[2],
            (r[0] - r[2]) * m[0] * m[2],
            (r[1] - r[0]) * m[0] * m[1],
        ])
        dE = -jax.grad(self._energy, argnums=1)(m, tau)
        return jnp.concatenate([rates, jnp.ones((1,), z.dtype), dE[None]])

    def hamiltonian(self, z):
        r"""The conserved $K = \tfrac12\sum_k r_k(\tau) z_k^2 + E$."""
        z = self._check_point(z)
        return self._energy(z[:3], z[3]) + z[4]

    def casimir(self, z: Point) -> Scalar:
        r"""The Casimir $|z|^2 = z_1^2 + z_2^2 + z_3^2$ (of the first three components)."""
        z = self._check_point(z)
        return jnp.sum(z[:3] * z[:3])

    @property
    def invariants(self):
        return {"energy": self.hamiltonian, "casimir": self.casimir}

    def default_initial_conditions(self, dtype=None):
        s, c = math.sin(1.1), math.cos(1.1)
        return _initial_conditions([[s, 0.0, c, 0.0, 0.0], [0.0, s, c, 0.0, 0.0]], dtype)


class AbstractPortHamiltonianSystem(AbstractSystem):
    r"""A damped and possibly driven mechanical system in port-Hamiltonian form,

    $$\dot x = \big(\mathbb{J} - R\big)\nabla H(x) + F(t), \qquad x = (q, p) \in
      \mathbb{R}^{2n},$$

    with the stored energy $H$ (`energy`), a constant dissipation matrix $R = R^\top
    \succeq 0$ (`dissipation_matrix`) and an external force $F(t)$ (`force`; zero for an
    undriven system). Its **energy balance** is exact:

    $$\frac{dH}{dt} = \nabla H^\top \dot x = -\underbrace{\nabla H^\top R\,\nabla H}_{
      \text{dissipated power}} + \underbrace{\nabla H^\top F(t)}_{\text{supplied power}}$$

    ($\nabla H^\top\mathbb{J}\nabla H = 0$): `dissipated_power(z)`, `supplied_power(z)`
    and their difference `energy_rate(z)`, in closed form.

    **State.** An undriven system has the state $z = x$, `dim = 2n`. A driven one is
    written autonomously with the time $\tau$ as its last component ($\dot\tau = 1$):
    $z = (q, p, \tau)$, `dim = 2n + 1`, so its trajectories start at $\tau = t_0$ and
    every state carries the time of the force. `hamiltonian(z)` is the stored energy
    $H(q, p)$; it is **not** conserved, so `invariants` is empty and evaluations report
    the energy balance instead of a drift.

    Subclasses set `n_dof` and `driven` and implement `energy`, `damping_coefficients`
    (the diagonal of $R$) and, when driven, `force`.
    """

    n_dof: ClassVar[int]
    driven: ClassVar[bool] = False
    canonical: ClassVar[bool] = False
    separable: ClassVar[bool] = False

    @abc.abstractmethod
    def energy(self, x: Point) -> Scalar:
        """The stored energy $H$ at one phase-space point `x = (q, p)` of shape `(2n,)`."""

    @abc.abstractmethod
    def damping_coefficients(self) -> tuple[float, ...]:
        """The diagonal of the constant dissipation matrix $R$ (length `2n`, each `≥ 0`)."""

    def force(self, t) -> Point:
        """The external force $F(t)$, shape `(2n,)` (zero here), in `t`'s dtype."""
        t = jnp.asarray(t)
        return jnp.zeros((2 * self.n_dof,), t.dtype)

    def dissipation_matrix(self, dtype=None) -> Float[Array, "2n 2n"]:
        """The constant dissipation matrix $R$ `(2n, 2n)`, symmetric positive
        semi-definite."""
        return jnp.asarray(np.diag(np.asarray(self.damping_coefficients(), np.float64)),
                           dtype=float_dtype(dtype))

    def split(self, z: Point) -> tuple[Point, Scalar]:
        """`(x, t)`: the phase-space point `(2n,)` of a state and its time (`0` for an
        undriven system)."""
        z = self._check_point(z)
        n2 = 2 * self.n_dof
        return z[:n2], (z[n2] if self.driven else jnp.zeros((), z.dtype))

    def _gradient(self, x):
        return jax.grad(self.energy)(x)

    def vector_field(self, z: Point) -> Point:
        r"""$(\mathbb{J} - R)\nabla H(x) + F(\tau)$, and $\dot\tau = 1$ when driven."""
        x, t = self.split(z)
        g = self._gradient(x)
        n = self.n_dof
        R = self.dissipation_matrix(z.dtype)
        xdot = jnp.concatenate([g[n:], -g[:n]]) - R @ g + self.force(t)
        return jnp.concatenate([xdot, jnp.ones((1,), z.dtype)]) if self.driven else xdot

    def hamiltonian(self, z: Point) -> Scalar:
        """The stored energy $H(q, p)$ of a state (not conserved)."""
        x, _ = self.split(z)
        return self.energy(x)

    def dissipated_power(self, z: Point) -> Scalar:
        r"""$\nabla H^\top R\,\nabla H \ge 0$, the power lost to friction."""
        x, _ = self.split(z)
        g = self._gradient(x)
        return g @ (self.dissipation_matrix(z.dtype) @ g)

    def supplied_power(self, z: Point) -> Scalar:
        r"""$\nabla H^\top F(t)$, the power the external force supplies."""
        x, t = self.split(z)
        return self._gradient(x) @ self.force(t)

    @property
    def damping_rate(self) -> float:
        r"""The rate $\gamma$ of the linear friction $\dot p = \dots - \gamma p$ (the flow
        of the undriven system is conformally symplectic with factor $e^{-\gamma t}$)."""
        raise NotImplementedError

    def learned_damping_reference(self) -> dict:
        """What a learned damping is compared with: `{"rate": damping_rate,
        "spectrum": the eigenvalues of R in increasing order}`."""
        spectrum = np.sort(np.asarray(self.damping_coefficients(), np.float64))
        return {"rate": float(self.damping_rate), "spectrum": [float(v) for v in spectrum]}

    def energy_rate(self, z: Point) -> Scalar:
        r"""The exact energy balance $dH/dt = -\nabla H^\top R\nabla H + \nabla H^\top F(t)$."""
        return self.supplied_power(z) - self.dissipated_power(z)

    @property
    def invariants(self):
        """None: the energy is dissipated and supplied (see `energy_rate`)."""
        return {}


class DampedPendulum(AbstractPortHamiltonianSystem):
    r"""The pendulum with linear friction, $\dot q = p/(m l^2)$,
    $\dot p = -m g l\sin q - \gamma p$.

    State `z = (q, p)`, `dim = 2`; energy $H = p^2/(2 m l^2) - m g l\cos q$ (as
    `Pendulum`) and $R = \mathrm{diag}(0, \gamma m l^2)$, so
    $dH/dt = -\gamma p^2/(m l^2)$. Because the friction is linear in the momentum, the
    flow $\varphi_t$ is **conformally symplectic**: $D\varphi_t^\top \mathbb{J}
    D\varphi_t = e^{-\gamma t}\mathbb{J}$ (McLachlan and Perlmutter, *Conformal
    Hamiltonian systems*, J. Geom. Phys. 39, 2001), the structure of
    `geomlearn.ConformalSympNet`.

    **Arguments:**

    - `gamma`: the damping rate $\gamma \ge 0$ (default `0.1`).
    - `m`, `l`, `g`: mass, length and gravity, each `> 0` (default `1.0`).

    **Default initial conditions:** `(q, p) = (1, 0)`, `(2, 0)`, `(0, 1.5)` (as
    `Pendulum`).

    ```python
    >>> DampedPendulum().vector_field(jnp.array([0.0, 1.0]))   # (p, -sin q - γ p)
    Array([ 1. , -0.1], dtype=float32)
    ```
    """

    gamma: float = eqx.field(static=True)
    m: float = eqx.field(static=True)
    l: float = eqx.field(static=True)  # noqa: E741 (the usual symbol for a length)
    g: float = eqx.field(static=True)

    dim: ClassVar[int] = 2
    n_dof: ClassVar[int] = 1
    labels: ClassVar[tuple[str, ...]] = ("q", "p")

    def __init__(self, gamma: float = 0.1, m: float = 1.0, l: float = 1.0, g: float = 1.0):  # noqa: E741
        self.gamma = _real("gamma", gamma, minimum=0.0, strict=False)
        self.m = _positive("m", m)
        self.l = _positive("l", l)
        self.g = _positive("g", g)

    def energy(self, x):
        x = self._check_point(x, size=2, what="phase-space point (q, p)")
        return x[1] ** 2 / (2.0 * self.m * self.l**2) - self.m * self.g * self.l * jnp.cos(x[0])

    def damping_coefficients(self):
        return (0.0, self.gamma * self.m * self.l**2)

    @property
    def damping_rate(self) -> float:
        return self.gamma

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions([[1.0, 0.0], [2.0, 0.0], [0.0, 1.5]], dtype)


class Duffing(AbstractPortHamiltonianSystem):
    r"""The damped, periodically forced Duffing oscillator
    $\ddot q + \delta\dot q + \alpha q + \beta q^3 = \gamma\sin(\omega t)$,
    with the parameters of Desai et al. (*Port-Hamiltonian neural networks for learning
    explicit time-dependent dynamical systems*, Phys. Rev. E 104, 034312, 2021, their
    Duffing experiment): $\alpha = -1$, $\beta = 1$ (a double well), $\delta = 0.3$,
    $\gamma = 0.2$, $\omega = 1.2$.

    State `z = (q, p, τ)`, `dim = 3` ($p = \dot q$, $\tau$ the time); energy
    $H = p^2/2 + \alpha q^2/2 + \beta q^4/4$, $R = \mathrm{diag}(0, \delta)$, force
    $F(\tau) = (0, \gamma\sin\omega\tau)$, so
    $dH/dt = -\delta p^2 + \gamma p\sin\omega\tau$.

    **Arguments:** `alpha`, `beta` (`β ≥ 0`), `delta` (the damping, `≥ 0`), `gamma` (the
    forcing amplitude), `omega` (the forcing frequency, `> 0`), as above.

    **Default initial conditions:** $(q, p, \tau) = (1, 0, 0)$, $(-0.5, 1, 0)$,
    $(2, -1, 0)$.

    ```python
    >>> Duffing().vector_field(jnp.array([1.0, 0.0, 0.0]))   # (p, q - q³ - δp + γ sin ωτ, 1)
    Array([0., 0., 1.], dtype=float32)
    ```
    """

    alpha: float = eqx.field(static=True)
    beta: float = eqx.field(static=True)
    delta: float = eqx.field(static=True)
    gamma: float = eqx.field(static=True)
    omega: float = eqx.field(static=True)

    dim: ClassVar[int] = 3
    n_dof: ClassVar[int] = 1
    driven: ClassVar[bool] = True
    labels: ClassVar[tuple[str, ...]] = ("q", "p", "t")

    def __init__(self, alpha: float = -1.0, beta: float = 1.0, delta: float = 0.3,
                 gamma: float = 0.2, omega: float = 1.2):
        self.alpha = _real("alpha", alpha)
        self.beta = _real("beta", beta, minimum=0.0, strict=False)
        self.delta = _real("delta", delta, minimum=0.0, strict=False)
        self.gamma = _real("gamma", gamma)
        self.omega = _positive("omega", omega)

    def energy(self, x):
        x = self._check_point(x, size=2, what="phase-space point (q, p)")
        q, p = x[0], x[1]
        return 0.5 * p * p + 0.5 * self.alpha * q * q + 0.25 * self.beta * q**4

    def damping_coefficients(self):
        return (0.0, self.delta)

    @property
    def damping_rate(self) -> float:
        return self.delta

    def force(self, t):
        t = jnp.asarray(t)
        return jnp.stack([jnp.zeros((), t.dtype), self.gamma * jnp.sin(self.omega * t)])

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions([[1.0, 0.0, 0.0], [-0.5, 1.0, 0.0], [2.0, -1.0, 0.0]], dtype)


class ForcedMassSpring(AbstractPortHamiltonianSystem):
    r"""A damped mass on a spring driven by a known force,
    $m\ddot q + c\dot q + k q = f_0\sin(\omega t)$ (the forced mass-spring of Desai et
    al., Phys. Rev. E 104, 2021, $f_0 = 1$, $\omega = 3$, with friction $c$ added).

    State `z = (q, p, τ)`, `dim = 3` ($p = m\dot q$, $\tau$ the time); energy
    $H = p^2/(2m) + k q^2/2$, $R = \mathrm{diag}(0, c)$, force
    $F(\tau) = (0, f_0\sin\omega\tau)$, so
    $dH/dt = -c\,(p/m)^2 + f_0 (p/m)\sin\omega\tau$.

    **Arguments:** `m`, `k` (`> 0`, default `1.0`), `c` (the friction, `≥ 0`, default
    `0.1`), `f0` (the force amplitude, default `1.0`), `omega` (`> 0`, default `3.0`).

    **Default initial conditions:** $(q, p, \tau) = (1, 0, 0)$, $(0, 1, 0)$,
    $(-1.5, 0.5, 0)$.

    ```python
    >>> ForcedMassSpring().energy(jnp.array([1.0, 0.0]))
    Array(0.5, dtype=float32)
    ```
    """

    m: float = eqx.field(static=True)
    k: float = eqx.field(static=True)
    c: float = eqx.field(static=True)
    f0: float = eqx.field(static=True)
    omega: float = eqx.field(static=True)

    dim: ClassVar[int] = 3
    n_dof: ClassVar[int] = 1
    driven: ClassVar[bool] = True
    labels: ClassVar[tuple[str, ...]] = ("q", "p", "t")

    def __init__(self, m: float = 1.0, k: float = 1.0, c: float = 0.1, f0: float = 1.0,
                 omega: float = 3.0):
        self.m = _positive("m", m)
        self.k = _positive("k", k)
        self.c = _real("c", c, minimum=0.0, strict=False)
        self.f0 = _real("f0", f0)
        self.omega = _positive("omega", omega)

    def energy(self, x):
        x = self._check_point(x, size=2, what="phase-space point (q, p)")
        return x[1] ** 2 / (2.0 * self.m) + 0.5 * self.k * x[0] ** 2

    def damping_coefficients(self):
        return (0.0, self.c)

    @property
    def damping_rate(self) -> float:
        return self.c / self.m

    def force(self, t):
        t = jnp.asarray(t)
        return jnp.stack([jnp.zeros((), t.dtype), self.f0 * jnp.sin(self.omega * t)])

    def default_initial_conditions(self, dtype=None):
        return _initial_conditions([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.5, 0.5, 0.0]], dtype)


SYSTEMS: dict[str, type[AbstractSystem]] = {
    "harmonic_oscillator": HarmonicOscillator,
    "pendulum": Pendulum,
    "double_pendulum": DoublePendulum,
    "coupled_oscillator": CoupledHarmonicOscillator,
    "henon_heiles": HenonHeiles,
    "kepler": Kepler,
    "three_body": ThreeBody,
    "rigid_body": RigidBody,
    "parametric_pendulum": ParametricPendulum,
    "forced_rigid_body": ForcedRigidBody,
    "toda_lattice": TodaLattice,
    "linear_wave": LinearWave,
    "damped_pendulum": DampedPendulum,
    "duffing": Duffing,
    "forced_mass_spring": ForcedMassSpring,
}
"""The systems by their command-line name; each class is constructible with no arguments."""
