r"""Periodically driven systems written autonomously in extended phase space: the time
$\tau$ is a state component with $\dot\tau = 1$, next to an energy account $E$.

Cut into windows aligned with the drive's period, their data make the map from one
window to the next depend on the row, so these are the problems on which a sequence
model needs a position signal (`geomlearn.datasets.parametric_pendulum`,
`geomlearn.datasets.forced_rigid_body`).
"""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Point, Scalar
from ._base import AbstractSeparableSystem, AbstractSystem
from ._parameters import check_inertia, check_positive, check_real, initial_conditions

__all__ = ["ParametricPendulum", "ForcedOscillator", "ForcedRigidBody"]


class _AbstractClockedSeparable(AbstractSeparableSystem):
    r"""A periodically driven one-degree-of-freedom system in extended phase space,
    $z = (q, \tau, p, E)$, with $K = T(p, E) + V(q, \tau)$, $T = p^2/2 + E$: the clock
    $\tau$ advances at rate one and $E$ takes the energy given to the drive. Subclasses
    give the potential and the drive frequency `Omega`."""

    Omega: eqx.AbstractVar[float]

    dim: ClassVar[int] = 4
    labels: ClassVar[tuple[str, ...]] = ("q", "tau", "p", "E")

    @property
    def period(self) -> float:
        r"""The period $2\pi/\Omega$ of the drive."""
        return 2.0 * math.pi / self.Omega

    def kinetic(self, p):
        r"""$T(p, E) = p^2/2 + E$ for the momenta `(p, E)`."""
        p = self._check_point(p, size=2, what="momentum p")
        return 0.5 * p[0] * p[0] + p[1]


class ParametricPendulum(_AbstractClockedSeparable):
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


    def __init__(self, omega0: float = 1.0, epsilon: float = 0.5, Omega: float = 2.0):
        self.omega0 = check_positive("omega0", omega0)
        self.epsilon = check_real("epsilon", epsilon, minimum=0.0, strict=False)
        self.Omega = check_positive("Omega", Omega)

    def potential(self, q):
        r"""$V(q, \tau) = \omega_0^2 (1 + \varepsilon\cos\Omega\tau)(1 - \cos q)$ for the
        positions `(q, τ)`."""
        q = self._check_point(q, size=2, what="position q")
        drive = 1.0 + self.epsilon * jnp.cos(self.Omega * q[1])
        return self.omega0**2 * drive * (1.0 - jnp.cos(q[0]))

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0]], dtype)


class ForcedOscillator(_AbstractClockedSeparable):
    r"""A periodically forced Duffing oscillator without damping, written as an
    autonomous system in **extended phase space**.

    The physical system is $\ddot q + \omega_0^2 q + \beta q^3 = f_0\cos\Omega t$, with
    $H(q, p, t) = \tfrac12 p^2 + \tfrac12\omega_0^2 q^2 + \tfrac14\beta q^4 -
    f_0\,q\cos\Omega t$. As for
    [`ParametricPendulum`][geomlearn.systems.ParametricPendulum], time becomes a
    coordinate $\tau$ with conjugate momentum $E$: the state is $z = (q, \tau, p, E)$,
    `dim = 4`, and
    $$K = \underbrace{\tfrac12 p^2 + E}_{T(p, E)} + \underbrace{\tfrac12\omega_0^2 q^2
      + \tfrac14\beta q^4 - f_0\,q\cos\Omega\tau}_{V(q, \tau)}$$
    is separable and conserved, $\dot\tau = 1$. Started at $\tau = 0$, the $(q, p)$ rows
    are those of the forced oscillator: a map from one state to the next that depends on
    the drive's phase, the problem a time-aware model needs when the sampling is
    irregular (`geomlearn.datasets.irregular_trajectories`).

    **Arguments:** `omega0` ($\omega_0 > 0$, default `1.0`), `beta` (the cubic stiffness
    $\beta \ge 0$, default `0.5`), `f0` (the forcing amplitude, real, default `0.5`),
    `Omega` (the drive frequency $\Omega > 0$, default `1.5`).

    **Default initial conditions:** $(q, \tau, p, E) = (1, 0, 0, 0)$ and $(0, 0, 1, 0)$.
    """

    omega0: float = eqx.field(static=True)
    beta: float = eqx.field(static=True)
    f0: float = eqx.field(static=True)
    Omega: float = eqx.field(static=True)


    def __init__(self, omega0: float = 1.0, beta: float = 0.5, f0: float = 0.5,
                 Omega: float = 1.5):
        self.omega0 = check_positive("omega0", omega0)
        self.beta = check_real("beta", beta, minimum=0.0, strict=False)
        self.f0 = check_real("f0", f0)
        self.Omega = check_positive("Omega", Omega)

    def potential(self, q):
        r"""$V(q, \tau) = \omega_0^2 q^2/2 + \beta q^4/4 - f_0 q\cos\Omega\tau$ for the
        positions `(q, τ)`."""
        q = self._check_point(q, size=2, what="position q")
        x = q[0]
        return (0.5 * self.omega0**2 * x * x + 0.25 * self.beta * x**4
                - self.f0 * x * jnp.cos(self.Omega * q[1]))

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], dtype)


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
    labels: ClassVar[tuple[str, ...]] = ("z1", "z2", "z3", "tau", "E")
    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = (
        ("energy", "hamiltonian"), ("casimir", "casimir")
    )

    def __init__(
        self,
        inertia: tuple[float, float, float] = (2.0, 1.0, 2.0 / 3.0),
        epsilon: float = 0.5,
        Omega: float = 1.0,
    ):
        self.inertia = check_inertia(inertia)
        self.epsilon = check_real("epsilon", epsilon, minimum=0.0, strict=False)
        if self.epsilon >= 1.0:
            raise ValueError(f"epsilon must be < 1 (positive moments), got {self.epsilon}")
        self.Omega = check_positive("Omega", Omega)

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

    def default_initial_conditions(self, dtype=None):
        s, c = math.sin(1.1), math.cos(1.1)
        return initial_conditions([[s, 0.0, c, 0.0, 0.0], [0.0, s, c, 0.0, 0.0]], dtype)
