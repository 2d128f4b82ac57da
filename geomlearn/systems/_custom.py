r"""A canonical system from a Hamiltonian function of the user's: `from_hamiltonian(H, dim)`.

`H` maps one state `z = (q, p)` of shape `(dim,)`, positions first, to a scalar, written
in `jax.numpy`; the vector field is $\mathbb{J}\nabla H$ by `jax.grad`. A separable
$H(q, p) = T(p) + V(q)$ also gets the explicit splitting methods, which use
$\nabla T(p) = \partial_p H(q_0, p)$ and $\nabla V(q) = \partial_q H(q, p_0)$ at an anchor
state $(q_0, p_0)$: for a separable $H$ these are its partial derivatives at every state.

```python
>>> import jax.numpy as jnp
>>> from geomlearn.systems import from_hamiltonian
>>> pendulum = from_hamiltonian(lambda z: 0.5 * z[1] ** 2 - jnp.cos(z[0]), 2, separable=True)
>>> pendulum.vector_field(jnp.array([1.0, 0.0]))
Array([ 0.       , -0.84147096], dtype=float32)
```
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Point
from .._validation import check_int, float_dtype
from ._base import AbstractHamiltonianSystem, AbstractSeparableSystem, AbstractSystem
from ._parameters import initial_conditions as _initial_conditions

__all__ = ["from_hamiltonian", "AbstractHamiltonianFromFunction", "HamiltonianFromFunction",
           "SeparableHamiltonianFromFunction"]

#: How many of the given initial states `H` is checked at (finite value and gradient).
_CHECKED_STATES = 8
#: Extra states, the first state plus standard normal draws (seed 0), at which a separable
#: `H`'s mixed derivative is checked.
_PROBES = 4
SEPARABILITY_TOLERANCE = 1e3
"""A separable `H`'s mixed derivative $\\partial^2 H/\\partial q\\,\\partial p$ may be at
most this many machine epsilons of the Hessian's largest entry (at least 1)."""


def _one_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _checked_states(initial_conditions, dim: int) -> np.ndarray | None:
    """The initial conditions as float64 rows `(B, dim)` (`None` stays `None`)."""
    if initial_conditions is None:
        return None
    z = np.asarray(initial_conditions, dtype=np.float64)
    z = z[None] if z.ndim == 1 else z
    if z.ndim != 2 or z.shape[1] != dim or z.shape[0] == 0:
        raise ValueError(f"initial_conditions must have shape (B, {dim}) or ({dim},), got "
                         f"shape {np.shape(initial_conditions)}")
    if not np.all(np.isfinite(z)):
        raise ValueError("initial_conditions must be finite (NaN or inf found)")
    return z


def _check_function(H, dim: int, states: np.ndarray, *, given: bool, name: str) -> None:
    """`ValueError` (one line) unless `H` maps a state `(dim,)` to a floating scalar, is
    differentiable by `jax.grad` under `jit`/`vmap`, and is finite with its gradient at
    the first `_CHECKED_STATES` `states` (the zero state when none were `given`)."""
    dtype = float_dtype(None)
    try:
        out = jax.eval_shape(H, jax.ShapeDtypeStruct((dim,), dtype))
    except Exception as e:  # the user's function: any error means it does not take the state
        raise ValueError(f"{name} failed on a state of shape ({dim},): {_one_line(e)}") from None
    shape = getattr(out, "shape", None)
    if shape != ():
        got = f"shape {shape}" if shape is not None else f"{type(out).__name__}"
        raise ValueError(f"{name} must map a state of shape ({dim},) to a scalar, got {got}")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(f"{name} must return a floating scalar, got dtype {out.dtype}")
    z = jnp.asarray(states[:_CHECKED_STATES], dtype)
    try:
        values, grads = jax.jit(jax.vmap(jax.value_and_grad(H)))(z)
    except Exception as e:
        raise ValueError(f"{name} must be written in jax.numpy, differentiable by jax.grad "
                         f"under jax.jit and jax.vmap: {_one_line(e)}") from None
    finite = np.isfinite(np.asarray(values)) & np.all(np.isfinite(np.asarray(grads)), axis=-1)
    if not finite.all():
        i = int(np.argmin(finite))
        where = f"initial state {i}" if given else "the zero state"
        raise ValueError(f"{name} or its gradient is not finite at {where} (H = "
                         f"{float(values[i])})" + ("" if given else "; give initial_conditions= "
                                                   "(states where H is finite)"))


def _check_separable(H, dim: int, states: np.ndarray, name: str) -> None:
    r"""`ValueError` unless the mixed block $\partial^2 H/\partial q\,\partial p$ of the
    Hessian vanishes to `SEPARABILITY_TOLERANCE` at the checked states and at `_PROBES`
    states drawn around the first (those where the Hessian is finite)."""
    n, dtype = dim // 2, float_dtype(None)
    draws = np.random.default_rng(0).standard_normal((_PROBES, dim))
    probes = np.concatenate([states[:_CHECKED_STATES], states[0] + draws])
    hessians = np.asarray(jax.jit(jax.vmap(jax.hessian(H)))(jnp.asarray(probes, dtype)),
                          np.float64)
    finite = np.all(np.isfinite(hessians), axis=(1, 2))
    mixed = np.abs(hessians[:, :n, n:])
    scale = np.maximum(1.0, np.max(np.abs(hessians), axis=(1, 2), where=finite[:, None, None],
                                   initial=0.0))
    worst = np.where(finite, np.max(mixed, axis=(1, 2)) / scale, 0.0)
    tolerance = SEPARABILITY_TOLERANCE * float(np.finfo(dtype).eps)
    if worst.max() > tolerance:
        i = int(np.argmax(worst))
        raise ValueError(
            f"{name} is not separable: the mixed derivative d2H/dq dp is {worst[i]:.3g} "
            f"(relative to the Hessian) at the state {np.round(probes[i], 4).tolist()}, not 0 "
            "to rounding; leave separable=False (implicit midpoint, Gauss–Legendre and RK4 "
            "integrate any H)")


class AbstractHamiltonianFromFunction(AbstractSystem):
    r"""A canonical system whose Hamiltonian is a function of the user's (made by
    `from_hamiltonian`, which documents its fields).

    A model that holds such a system cannot be saved: a model file stores a system by
    its class name and arguments, and a Python function is neither.
    """

    function: Callable = eqx.field(static=True)
    state_dim: int = eqx.field(static=True)
    state_labels: tuple[str, ...] = eqx.field(static=True)
    initial: tuple[tuple[float, ...], ...] | None = eqx.field(static=True)
    anchor: tuple[float, ...] = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(self, H, dim: int, *, labels=None, initial_conditions=None, name=None):
        if not callable(H):
            raise TypeError(f"H must be a function of one state (dim,) to a scalar, got "
                            f"{type(H).__name__}")
        dim = check_int("dim", dim, minimum=2)
        if dim % 2:
            raise ValueError(f"dim must be even (a state is q, then p: 2n components), got {dim}")
        name = name or getattr(H, "__name__", "H")
        self.name = "H" if name == "<lambda>" else str(name)
        given = _checked_states(initial_conditions, dim)
        states = np.zeros((1, dim)) if given is None else given
        _check_function(H, dim, states, given=given is not None, name=self.name)
        self.function, self.state_dim = H, dim
        self.state_labels = _labels(labels, dim)
        self.initial = None if given is None else tuple(map(tuple, given.tolist()))
        self.anchor = tuple(states[0].tolist())

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self.state_dim

    @property
    def labels(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.state_labels

    def default_initial_conditions(self, dtype=None):
        """The `initial_conditions` given to `from_hamiltonian`, `(B, dim)`; `ValueError`
        when none were given."""
        if self.initial is None:
            raise ValueError(f"{self.name}: no initial conditions were given "
                             "(from_hamiltonian(..., initial_conditions=...))")
        return _initial_conditions(self.initial, dtype)


def _labels(labels, dim: int) -> tuple[str, ...]:
    if labels is None:
        n = dim // 2
        return tuple([f"q{i + 1}" for i in range(n)] + [f"p{i + 1}" for i in range(n)])
    labels = tuple(str(label) for label in labels)
    if len(labels) != dim:
        raise ValueError(f"labels must name the {dim} state components, got {len(labels)}")
    return labels


class HamiltonianFromFunction(AbstractHamiltonianFromFunction, AbstractHamiltonianSystem):
    r"""A canonical system $\dot z = \mathbb{J}\nabla H(z)$ of a function `H` of the user's
    (`from_hamiltonian(H, dim)`): the implicit methods (implicit midpoint, Gauss–Legendre)
    and RK4 integrate it."""

    def hamiltonian(self, z: Point):
        """`H(z)` at one state `z = (q, p)`, in the dtype of `z`."""
        z = self._check_point(z)
        return jnp.asarray(self.function(z)).astype(z.dtype)


class SeparableHamiltonianFromFunction(AbstractHamiltonianFromFunction,
                                       AbstractSeparableSystem):
    r"""A separable canonical system $H(q, p) = T(p) + V(q)$ of a function `H` of the
    user's (`from_hamiltonian(H, dim, separable=True)`), checked to be separable.

    With the anchor state $(q_0, p_0)$ (the first initial condition, or 0):
    $T(p) = H(q_0, p)$ and $V(q) = H(q, p_0) - H(q_0, p_0)$, so $T + V = H$ (the energy,
    to rounding) and $\nabla T$, $\nabla V$ are the partial derivatives of $H$ that the
    explicit splitting methods use.
    """

    def __init__(self, H, dim: int, *, labels=None, initial_conditions=None, name=None):
        super().__init__(H, dim, labels=labels, initial_conditions=initial_conditions,
                         name=name)
        _check_separable(H, self.state_dim, np.array(self.initial or [self.anchor]), self.name)

    def _at(self, q, p):
        return self.function(jnp.concatenate([q, p]))

    def kinetic(self, p):
        p = self._check_point(p, size=self.state_dim // 2, what="momentum p")
        q0 = jnp.asarray(np.asarray(self.anchor[: self.state_dim // 2]), p.dtype)
        return jnp.asarray(self._at(q0, p)).astype(p.dtype)

    def potential(self, q):
        n = self.state_dim // 2
        q = self._check_point(q, size=n, what="position q")
        anchor = jnp.asarray(np.asarray(self.anchor), q.dtype)
        return jnp.asarray(self._at(q, anchor[n:]) - self.function(anchor)).astype(q.dtype)


def from_hamiltonian(H: Callable, dim: int, *, separable: bool = False, labels=None,
                     initial_conditions=None, name: str | None = None):
    r"""A canonical system $\dot z = \mathbb{J}\nabla H(z)$ of your own Hamiltonian.

    The state is $z = (q_1, \dots, q_n, p_1, \dots, p_n)$, `dim = 2n`; the vector field is
    $(\partial_p H, -\partial_q H)$ by `jax.grad`. The system works wherever a built-in
    one does: `geomlearn.integrators.integrate`, `geomlearn.evaluate` (its energy is
    `H`) and `geomlearn.work_precision`.

    **Arguments:**

    - `H`: a function of one state `(dim,)` to a scalar, written in `jax.numpy`.
    - `dim`: the state dimension, even and `≥ 2`.
    - `separable`: `H(q, p) = T(p) + V(q)`, checked (the mixed derivative
      $\partial^2 H/\partial q\,\partial p$ must vanish to rounding at the initial
      conditions and a few states around the first): the explicit symplectic methods
      (Störmer–Verlet, Yoshida) then apply too. Otherwise only the methods for general
      Hamiltonians do (implicit midpoint, Gauss–Legendre, RK4).
    - `labels`: the names of the `dim` state components (default `q1 … qn, p1 … pn`).
    - `initial_conditions`: states `(B, dim)` where `H` is finite; `H` is checked there
      (default: at the zero state) and `default_initial_conditions()` returns them.
    - `name`: the name in messages (default: the function's `__name__`, or `"H"`).

    **Returns:** a `SeparableHamiltonianFromFunction` or a `HamiltonianFromFunction`.

    **Raises:** `ValueError` (one line naming the expected and the received) for an odd
    `dim`, an `H` that does not map a state `(dim,)` to a finite scalar or that JAX
    cannot differentiate, or an `H` given as separable that is not; `TypeError` for an
    `H` that is not callable. A model holding such a system (`CorrectedIntegrator`)
    cannot be saved with `geomlearn.save`.

    ```python
    kepler = gl.systems.from_hamiltonian(
        lambda z: 0.5 * z[2:] @ z[2:] - 1 / jnp.linalg.norm(z[:2]), 4, separable=True,
        initial_conditions=[[1.0, 0.0, 0.0, 1.0]])
    ```
    """
    cls = SeparableHamiltonianFromFunction if separable else HamiltonianFromFunction
    return cls(H, dim, labels=labels, initial_conditions=initial_conditions, name=name)
