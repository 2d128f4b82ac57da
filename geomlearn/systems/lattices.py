r"""Large Hamiltonian lattices: the periodic Toda lattice and the finite-difference linear
wave, the test problems of model reduction, with their bump initial condition.

Their dimension is a constructor argument (`dim = 2N`), so `dim` and `labels` are
properties of an instance rather than class variables.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._typing import Point, Scalar
from .._validation import check_int
from ._base import AbstractSeparableSystem
from ._parameters import check_positive, initial_conditions

__all__ = ["bump", "TodaLattice", "LinearWave"]


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


class _AbstractRing(AbstractSeparableSystem):
    r"""$N$ sites on a ring, `z = (q_1..q_N, p_1..p_N)`, `dim = 2N`, with the kinetic
    energy $T(p) = \tfrac12\sum_i p_i^2$ and a potential invariant under the shift
    $q \mapsto q + c$, so the total momentum is conserved with the energy."""

    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = (
        ("energy", "hamiltonian"), ("momentum", "momentum")
    )
    particle_dimension: ClassVar[int] = 1

    @property
    @abc.abstractmethod
    def _sites(self) -> int:
        """The number of sites $N$."""

    @property
    def dim(self) -> int:  # type: ignore[override]
        return 2 * self._sites

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        N = self._sites
        return tuple(f"q{i + 1}" for i in range(N)) + tuple(f"p{i + 1}" for i in range(N))

    def kinetic(self, p):
        p = self._check_point(p, size=self._sites, what="momentum p")
        return 0.5 * jnp.sum(p * p)

    def momentum(self, z: Point) -> Scalar:
        r"""The total momentum $\sum_i p_i$ (conserved: $H$ is invariant under $q \mapsto
        q + c$)."""
        z = self._check_point(z)
        return jnp.sum(z[self._sites :])


class TodaLattice(_AbstractRing):
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
        self.n_particles = check_int("n_particles", n_particles, minimum=2)
        self.alpha = check_positive("alpha", alpha)
        self.mu = check_positive("mu", mu)

    @property
    def _sites(self) -> int:
        return self.n_particles

    def potential(self, q):
        q = self._check_point(q, size=self.n_particles, what="position q")
        return self.alpha * jnp.sum(jnp.exp(q - jnp.roll(q, -1)))

    def default_initial_conditions(self, dtype=None):
        xi = np.linspace(-0.5, 0.5, self.n_particles)
        q, _ = bump(xi, self.mu)
        return initial_conditions([np.concatenate([q, np.zeros_like(q)])], dtype)


class LinearWave(_AbstractRing):
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
        self.n_points = check_int("n_points", n_points, minimum=3)
        self.c = check_positive("c", c)
        self.mu = check_positive("mu", mu)

    @property
    def _sites(self) -> int:
        return self.n_points

    def potential(self, q):
        q = self._check_point(q, size=self.n_points, what="position q")
        k = 0.5 * (self.c * self.n_points) ** 2
        dq = jnp.roll(q, -1) - q
        return k * jnp.sum(dq * dq)

    def default_initial_conditions(self, dtype=None):
        xi = -0.5 + np.arange(self.n_points) / self.n_points
        q, dq = bump(xi, self.mu)
        return initial_conditions([np.concatenate([q, -self.c * dq])], dtype)
