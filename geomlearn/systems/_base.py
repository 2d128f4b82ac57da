r"""The system protocol: `AbstractSystem` and its canonical refinements."""

from __future__ import annotations

import abc
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._typing import Array, Float, Point, Scalar
from ..symmetries import AbstractSymmetry


class AbstractSystem(eqx.Module):
    r"""An autonomous system $\dot z = f(z)$ on $\mathbb{R}^{d}$ with known invariants.

    A system is a small immutable module whose parameters are static Python floats (a
    constant of the computation, not something trained); its methods act on **one**
    state `z` of shape `(dim,)` (use `jax.vmap` for a batch) and return values of its dtype.

    **Protocol** (class variables, then the abstract methods):

    - `dim`: the dimension of the state;
    - `canonical`: `z = (q, p)`, positions first, with $f = \mathbb{J}\nabla H$;
    - `separable`: $H(q, p) = T(p) + V(q)$, which explicit symplectic methods need;
    - `driven`: the state is $(q, p, \tau)$, ending with the time of an external force
      ($\dot\tau = 1$; a driven port-Hamiltonian system);
    - `labels`: the names of the state components (for plots);
    - `particle_dimension`: `0`, or $k$ when the positions are particles in $k$
      dimensions under forces of their differences (the cluster drifts with its total
      momentum; long horizons measure escapes in its centre-of-mass frame);
    - `group`: `None`, or a symmetry of `geomlearn.symmetries` that $H$ is invariant
      under by construction (identical particles: `Particles(N, k)`), for tools that
      choose a network keeping it;
    - `invariant_methods`: the conserved quantities as `(name, method)` pairs; the
      energy `("energy", "hamiltonian")` unless the system dissipates it;
    - `vector_field(z)`, `hamiltonian(z)` and `default_initial_conditions(dtype)`, a
      documented array `(B, dim)` of starting states.

    A new system subclasses `AbstractSeparableSystem` (implement `kinetic` and
    `potential`), `AbstractHamiltonianSystem` (implement `hamiltonian`) or this class,
    sets the class variables and writes `default_initial_conditions`.
    """

    dim: ClassVar[int]
    canonical: ClassVar[bool] = False
    separable: ClassVar[bool] = False
    driven: ClassVar[bool] = False
    labels: ClassVar[tuple[str, ...]] = ()
    particle_dimension: ClassVar[int] = 0
    group: ClassVar[AbstractSymmetry | None] = None
    invariant_methods: ClassVar[tuple[tuple[str, str], ...]] = (("energy", "hamiltonian"),)

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
        """Conserved quantities by name, from `invariant_methods` (`{"energy":
        self.hamiltonian}` by default). Each maps one state `(dim,)` to a scalar."""
        return {name: getattr(self, method) for name, method in self.invariant_methods}

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

    Its vector field is $\mathbb{J}\nabla H = (\nabla T(p), -\nabla V(q))$. Explicit
    symplectic methods (symplectic Euler, Störmer–Verlet and its compositions) need
    exactly the two gradients $\nabla T$ and $\nabla V$, given here by `grad_kinetic`
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
