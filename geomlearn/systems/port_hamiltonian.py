r"""Damped and driven mechanical systems in port-Hamiltonian form: the damped pendulum,
the forced Duffing oscillator and the forced mass–spring.

Their energy is not conserved; each states its exact energy balance (dissipated and
supplied power) instead, for the evaluation of models that learn dissipation.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, Point, Scalar
from .._validation import float_dtype
from ._base import AbstractSystem
from ._parameters import check_positive, check_real, initial_conditions

__all__ = ["AbstractPortHamiltonianSystem", "DampedPendulum", "Duffing", "ForcedMassSpring"]


def _sine_drive(amplitude: float, omega: float, t) -> Point:
    r"""$F(t) = (0, a\sin\omega t)$, a force on the momentum of one degree of freedom."""
    t = jnp.asarray(t)
    return jnp.stack([jnp.zeros((), t.dtype), amplitude * jnp.sin(omega * t)])


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
    (the diagonal of $R$), `damping_rate` and `force` (zero for an undriven system).
    """

    n_dof: ClassVar[int]
    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = ()

    @abc.abstractmethod
    def energy(self, x: Point) -> Scalar:
        """The stored energy $H$ at one phase-space point `x = (q, p)` of shape `(2n,)`."""

    @abc.abstractmethod
    def damping_coefficients(self) -> tuple[float, ...]:
        """The diagonal of the constant dissipation matrix $R$ (length `2n`, each `≥ 0`)."""

    @abc.abstractmethod
    def force(self, t) -> Point:
        """The external force $F(t)$, shape `(2n,)`, in `t`'s dtype."""

    @property
    @abc.abstractmethod
    def damping_rate(self) -> float:
        r"""The rate $\gamma$ of the linear friction $\dot p = \dots - \gamma p$ (the flow
        of the undriven system is conformally symplectic with factor $e^{-\gamma t}$)."""

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

    def learned_damping_reference(self) -> dict:
        """What a learned damping is compared with: `{"rate": damping_rate,
        "spectrum": the eigenvalues of R in increasing order}`."""
        spectrum = np.sort(np.asarray(self.damping_coefficients(), np.float64))
        return {"rate": float(self.damping_rate), "spectrum": [float(v) for v in spectrum]}

    def energy_rate(self, z: Point) -> Scalar:
        r"""The exact energy balance $dH/dt = -\nabla H^\top R\nabla H + \nabla H^\top F(t)$."""
        return self.supplied_power(z) - self.dissipated_power(z)


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
        self.gamma = check_real("gamma", gamma, minimum=0.0, strict=False)
        self.m = check_positive("m", m)
        self.l = check_positive("l", l)
        self.g = check_positive("g", g)

    def energy(self, x):
        x = self._check_point(x, size=2, what="phase-space point (q, p)")
        return x[1] ** 2 / (2.0 * self.m * self.l**2) - self.m * self.g * self.l * jnp.cos(x[0])

    def damping_coefficients(self):
        return (0.0, self.gamma * self.m * self.l**2)

    @property
    def damping_rate(self) -> float:
        return self.gamma

    def force(self, t):
        """No external force: zeros `(2,)` in `t`'s dtype."""
        t = jnp.asarray(t)
        return jnp.zeros((2 * self.n_dof,), t.dtype)

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0], [2.0, 0.0], [0.0, 1.5]], dtype)


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
        self.alpha = check_real("alpha", alpha)
        self.beta = check_real("beta", beta, minimum=0.0, strict=False)
        self.delta = check_real("delta", delta, minimum=0.0, strict=False)
        self.gamma = check_real("gamma", gamma)
        self.omega = check_positive("omega", omega)

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
        return _sine_drive(self.gamma, self.omega, t)

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0, 0.0], [-0.5, 1.0, 0.0], [2.0, -1.0, 0.0]], dtype)


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
        self.m = check_positive("m", m)
        self.k = check_positive("k", k)
        self.c = check_real("c", c, minimum=0.0, strict=False)
        self.f0 = check_real("f0", f0)
        self.omega = check_positive("omega", omega)

    def energy(self, x):
        x = self._check_point(x, size=2, what="phase-space point (q, p)")
        return x[1] ** 2 / (2.0 * self.m) + 0.5 * self.k * x[0] ** 2

    def damping_coefficients(self):
        return (0.0, self.c)

    @property
    def damping_rate(self) -> float:
        return self.c / self.m

    def force(self, t):
        return _sine_drive(self.f0, self.omega, t)

    def default_initial_conditions(self, dtype=None):
        return initial_conditions([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.5, 0.5, 0.0]], dtype)
