r"""Lagrangian neural networks (Cranmer, Greydanus, Hoyer, Battaglia, Spergel and Ho, 2020).

A `LagrangianNeuralNetwork` learns from positions and velocities (no canonical momenta).

**Why the kinetic prior.** The acceleration needs the inverse of the velocity Hessian
$\nabla_{\dot q}\nabla_{\dot q}^\top L_\theta = M + \nabla_{\dot q}\nabla_{\dot q}^\top
N_\theta$. For a bare MLP (Cranmer et al.'s form) at a Glorot initialisation this Hessian
is small and indefinite, so it is singular on a hypersurface of state space: the initial
accelerations are huge near it, the loss is dominated by a few samples, and training
steps into singular Hessians. With the prior, at initialisation the Hessian is $I$ plus a
small correction and $\ddot q \approx 0$: training starts from a well-posed "free
particle" and learns the potential and the configuration-dependent mass as the
correction $N_\theta$ (and a constant mass as $M$). A mechanical Lagrangian
$\tfrac12\dot q^\top M(q)\dot q - V(q)$ is of this form, with $N_\theta$ learning
$\tfrac12\dot q^\top (M(q) - M)\dot q - V(q)$. The prior restricts nothing: $M$ is
trained with the rest and may go to zero (which recovers the bare form).

**Singular Hessians.** The acceleration exists only where the velocity Hessian is
invertible. Where its condition number exceeds $1/(64\,\varepsilon)$ of the dtype or the
result is not finite, `acceleration` (and so training and rollouts) raises at run time
(`eqx.error_if`) with a message naming the condition.

**States and data.** A state is $z = (q, \dot q)$, shape `(2n,)` (`dim = 2n`).

- `fit` on a tuple `(states, accelerations)` of arrays `(M, 2n)` and `(M, n)` (or
  `(M, 2n)` time derivatives $(\dot q, \ddot q)$, of which $\ddot q$ is compared):
  acceleration regression, `(q, q̇) → q̈`, as in the paper.
- `fit` on a `TrajectoryData` of states $(q, \dot q)$: one-step pairs, predicted by one
  classical Runge–Kutta (RK4) step of the learned dynamics with the data's `dt`. (For a
  canonical system with $p \ne \dot q$, convert the momenta to velocities first.)
- `iterate(model, z0, N, dt=...)`: an RK4 rollout of the learned dynamics (needs `dt`).
"""

from __future__ import annotations

import warnings
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float, PRNGKeyArray
from .._nn import OUTPUT_INIT_SCALE, check_point
from .._validation import check_int, float_dtype
from ..data import TrajectoryData
from ._base import map_residuals
from ._integrators import AbstractPointModel, point_rollout
from ._task import Accelerations, Pairs, Task, check_data_dim, require_dt, step_size_task
from .hnn import energy_mlp

__all__ = ["LagrangianNeuralNetwork"]


def __getattr__(name: str):
    # The module constant of earlier versions, now `LagrangianNeuralNetwork.output_scale`.
    if name == "OUTPUT_SCALE":
        warnings.warn("geomlearn.models.lagrangian.OUTPUT_SCALE is deprecated; use "
                      "LagrangianNeuralNetwork.output_scale", DeprecationWarning, stacklevel=2)
        return LagrangianNeuralNetwork.output_scale
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _condition_limit(dtype) -> float:
    """Largest accepted condition number of the velocity Hessian in `dtype`."""
    return 1.0 / (64.0 * float(np.finfo(dtype).eps))


class LagrangianNeuralNetwork(AbstractPointModel):
    r"""A learned Lagrangian $L_\theta(q, \dot q)$ and its Euler–Lagrange dynamics.

    A kinetic prior plus a multilayer perceptron $N_\theta$ of $(q, \dot q)$ with `depth`
    hidden layers of `width` units (Cranmer et al., *Lagrangian Neural Networks*, 2020),

    $$L_\theta(q, \dot q) = \tfrac12\,\dot q^\top M \dot q + N_\theta(q, \dot q),
      \qquad M = \tfrac12 (A + A^\top),$$

    with $A$ (the field `mass`) initialised to the identity and the output layer of
    $N_\theta$ at `output_scale` times the Glorot scale (the module documentation says
    why). The Euler–Lagrange equation solved for the acceleration,

    $$\ddot q = \big(\nabla_{\dot q}\nabla_{\dot q}^\top L\big)^{-1}
      \big(\nabla_q L - (\nabla_{\dot q}\nabla_q^\top L)\,\dot q\big),$$

    is computed with `jax.hessian` and a linear solve for one state `z = (q, q̇)`
    `(2n,)`; it raises where the velocity Hessian is singular. The flow conserves
    $E_\theta = \dot q\cdot\nabla_{\dot q}L_\theta - L_\theta$ exactly. `structure` is
    `"none"`: the flow keeps the Lagrangian 2-form, not the canonical form of
    $(q, \dot q)$, and the RK4 step of a rollout is not symplectic.

    **Arguments:**

    - `n`: the number of degrees of freedom ($q \in \mathbb{R}^n$).
    - `width`, `depth`: the hidden width and the number of hidden layers, both `≥ 1`.
    - `activation`: a callable or a name (default `"softplus"`, the paper's); it must be
      twice differentiable.
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Methods:** `lagrangian(q, qdot)`, `energy(q, qdot)` (scalars), `mass_matrix()`,
    `acceleration(q, qdot)` `(n,)`, and `model(z)` the time derivative
    $(\dot q, \ddot q)$ of a state.

    ```python
    lnn = LagrangianNeuralNetwork(2, width=64, depth=2, key=jax.random.PRNGKey(0))
    q, qdot = jnp.array([0.1, 0.2]), jnp.array([0.0, 0.3])
    lnn.acceleration(q, qdot), lnn.energy(q, qdot)
    ```
    """

    structure: ClassVar[str] = "none"
    #: Scale of the initial output layer of $N_\theta$ relative to Glorot's: at
    #: initialisation $N_\theta$ is a small correction to the kinetic prior.
    output_scale: ClassVar[float] = OUTPUT_INIT_SCALE

    mass: Float[Array, "n n"]
    weights: tuple[Float[Array, "out in"], ...]
    biases: tuple[Float[Array, " out"], ...]
    n: int = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(
        self,
        n: int,
        *,
        width: int,
        depth: int,
        activation: Callable | str = "softplus",
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.n = check_int("n", n, minimum=1)
        self.dim = 2 * self.n
        self.width = check_int("width", width, minimum=1)
        self.depth = check_int("depth", depth, minimum=1)
        resolve_activation(activation)
        self.activation = activation
        dtype = float_dtype(dtype)
        self.weights, self.biases = energy_mlp(self.dim, self.width, self.depth, key=key, dtype=dtype,
                                               output_scale=self.output_scale)
        self.mass = jnp.eye(self.n, dtype=dtype)

    # ------------------------------------------------------------------ the physics

    def _check_pair(self, q, qdot):
        check_point(f"{type(self).__name__} q", q, self.n)
        check_point(f"{type(self).__name__} qdot", qdot, self.n)
        if jnp.result_type(q) != jnp.result_type(qdot):
            raise ValueError(
                f"q and qdot must have the same dtype, got {jnp.result_type(q)} and "
                f"{jnp.result_type(qdot)}"
            )

    def mass_matrix(self) -> Float[Array, "n n"]:
        r"""The constant mass matrix $M = \tfrac12(A + A^\top)$ of the kinetic prior."""
        return 0.5 * (self.mass + self.mass.T)

    def _L(self, x):
        dtype = x.dtype
        qdot = x[self.n :]
        kinetic = 0.5 * jnp.dot(qdot, self.mass_matrix().astype(dtype) @ qdot)
        sigma = resolve_activation(self.activation)
        for W, b in zip(self.weights[:-1], self.biases[:-1]):
            x = sigma(W.astype(dtype) @ x + b.astype(dtype))
        return kinetic + (self.weights[-1].astype(dtype) @ x + self.biases[-1].astype(dtype))[0]

    def lagrangian(self, q: Float[Array, " n"], qdot: Float[Array, " n"]) -> Float[Array, ""]:
        r"""The learned Lagrangian $L_\theta(q, \dot q)$ (a scalar in `q`'s dtype)."""
        self._check_pair(q, qdot)
        return self._L(jnp.concatenate([q, qdot]))

    def energy(self, q: Float[Array, " n"], qdot: Float[Array, " n"]) -> Float[Array, ""]:
        r"""The energy $E_\theta = \dot q\cdot\nabla_{\dot q}L_\theta - L_\theta$, conserved by
        the learned dynamics."""
        self._check_pair(q, qdot)
        x = jnp.concatenate([q, qdot])
        grad = jax.grad(self._L)(x)
        return jnp.dot(qdot, grad[self.n :]) - self._L(x)

    def acceleration(self, q: Float[Array, " n"], qdot: Float[Array, " n"]) -> Float[Array, " n"]:
        r"""The Euler–Lagrange acceleration $\ddot q$ (see the class documentation); raises
        where the velocity Hessian is singular or badly conditioned."""
        self._check_pair(q, qdot)
        qddot, bad = self._acceleration(q, qdot)
        limit = _condition_limit(q.dtype)
        return eqx.error_if(
            qddot,
            bad,
            f"LagrangianNeuralNetwork: the velocity Hessian ∇_q̇∇_q̇ᵀL is singular or badly "
            f"conditioned at this state (expected a condition number <= {limit:.1e} in "
            f"{np.dtype(q.dtype).name}); the learned Lagrangian has no well-defined "
            "acceleration there",
        )

    def _acceleration(self, q, qdot):
        """`(q̈, bad)`: the Euler–Lagrange acceleration and whether the velocity Hessian is
        singular or badly conditioned there (or q̈ not finite)."""
        n = self.n
        x = jnp.concatenate([q, qdot])
        grad = jax.grad(self._L)(x)
        hess = jax.hessian(self._L)(x)
        H_vv = hess[n:, n:]
        rhs = grad[:n] - hess[n:, :n] @ qdot
        qddot = jnp.linalg.solve(H_vv, rhs)
        cond = jnp.linalg.cond(H_vv)
        bad = jnp.logical_not(cond <= _condition_limit(x.dtype)) | jnp.logical_not(
            jnp.all(jnp.isfinite(qddot)))
        return qddot, bad

    def _training_acceleration(self, q, qdot):
        # In training a badly conditioned Hessian makes the prediction NaN instead of
        # raising: a Levenberg–Marquardt trial step there is rejected, a first-order
        # epoch stops with NonFiniteLossError (and keeps the last good parameters).
        qddot, bad = self._acceleration(q, qdot)
        return jnp.where(bad, jnp.asarray(jnp.nan, qddot.dtype), qddot)

    def __call__(self, z: Float[Array, " dim"]) -> Float[Array, " dim"]:
        r"""The time derivative $(\dot q, \ddot q)$ of one state $z = (q, \dot q)$."""
        check_point(type(self).__name__, z, self.dim)
        q, qdot = z[: self.n], z[self.n :]
        return jnp.concatenate([qdot, self.acceleration(q, qdot)])

    def _rk4(self, state, dt, field):
        h = jnp.asarray(dt, state.dtype)
        k1 = field(state)
        k2 = field(state + (0.5 * h) * k1)
        k3 = field(state + (0.5 * h) * k2)
        k4 = field(state + h * k3)
        return state + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    # ------------------------------------------------------------------ the protocol

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        return step_size_task(self, seq_length=seq_length, prediction_window=prediction_window,
                              dt=dt, data_dt=data_dt, samples=Pairs())

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return require_dt(self, self.task(prediction_window=prediction_window, dt=dt),
                          "its dynamics is integrated with RK4")

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """One-step pairs of a `TrajectoryData` (RK4 steps with its `dt`), or a tuple
        `(states (M, 2n), accelerations (M, n) or derivatives (M, 2n))`."""
        if not isinstance(data, (tuple, list)):
            if not isinstance(data, TrajectoryData):
                raise TypeError(
                    f"{what} must be a TrajectoryData or a tuple (states, accelerations), "
                    f"got {type(data).__name__}"
                )
            check_data_dim(self, data, what)
            x, y = data.pairs()
            dt = float(data.dt)
            if task.dt is not None and task.dt != dt:
                raise ValueError(f"{what} has dt={dt}, but the task has dt={task.dt}")
            return jnp.asarray(x), jnp.asarray(y), Task(dt=dt, samples=Pairs())
        if len(data) != 2:
            raise ValueError(
                f"{what} as a tuple must be (states, accelerations), got {len(data)} items"
            )
        x, y = (jnp.asarray(a) for a in data)
        for name, a in (("states", x), ("accelerations", y)):
            if not jnp.issubdtype(a.dtype, jnp.floating):
                raise TypeError(f"{what} {name} must be floating-point, got {a.dtype}")
        if x.ndim != 2 or x.shape[-1] != self.dim:
            raise ValueError(
                f"{what}: expected states (q, q̇) of shape (M, {self.dim}), got {x.shape}"
            )
        if y.ndim != 2 or y.shape[0] != x.shape[0] or y.shape[-1] not in (self.n, self.dim):
            raise ValueError(
                f"{what}: expected accelerations of shape ({x.shape[0]}, {self.n}) or time "
                f"derivatives ({x.shape[0]}, {self.dim}), got {y.shape}"
            )
        return x, y, Task(dt=task.dt, samples=Accelerations())

    def predict(self, x, task: Task):
        n = self.n
        if task.samples.derivatives:
            return self._training_acceleration(x[:n], x[n:])
        field = lambda z: jnp.concatenate([z[n:], self._training_acceleration(z[:n], z[n:])])  # noqa: E731
        return self._rk4(x, task.dt, field)

    def target(self, y, task: Task):
        if task.samples.derivatives and y.shape[-1] == self.dim:
            return y[self.n :]
        return y

    def step(self, state, task: Task):
        """One RK4 step of the learned dynamics with the task's `dt`."""
        if task.dt is None:
            raise ValueError(
                f"stepping {type(self).__name__} needs the time step dt (RK4 of the learned "
                "dynamics)"
            )
        return self._rk4(state, task.dt, self)

    def describe_step(self, task: Task) -> str:
        return f"one RK4 step of the Euler–Lagrange dynamics of L_θ with dt={task.dt}"

    def rollout(self, initial, n_points: int, task: Task):
        return point_rollout(self, initial, n_points, task)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity", "volume", "condition"}` of the RK4 step (in the
        coordinates (q, q̇), where nothing is claimed)."""
        return map_residuals(lambda s: self.step(s, task), points, self.dim)
