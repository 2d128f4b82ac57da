r"""Port-Hamiltonian neural networks: a learned energy, a learned positive
semi-definite dissipation and an optional learned external force, trained through a
discrete-gradient step that keeps the energy balance exactly.

A port-Hamiltonian system $\dot x = (\mathbb{J} - R(x))\nabla H(x) + F(x, t)$ with
$R \succeq 0$ obeys $dH/dt = -\nabla H^\top R\,\nabla H + \nabla H^\top F$: energy is
only lost through $R$ and exchanged through $F$ (van der Schaft and Jeltsema,
*Port-Hamiltonian systems theory: an introductory overview*, Found. Trends Syst.
Control 1, 2014). Desai et al. (*Port-Hamiltonian neural networks for learning explicit
time-dependent dynamical systems*, Phys. Rev. E 104, 034312, 2021) learn $H$, a
damping and a time-dependent force with neural networks; here the step the network is
trained through and rolled out with is a discrete-gradient method, so the balance holds
for the discrete trajectory too (see `geomlearn.models._discrete_gradient`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._nn import check_point
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_bool, check_int, check_stored_dt, float_dtype
from ..geometry import jacobian, symplectic_matrix
from ._base import scan_rollout
from ._discrete_gradient import (
    MAX_ITERATIONS,
    AbstractForcing,
    discrete_gradient,
    forcing_named,
    rounding_level,
    solve_step,
)
from ._integrators import AbstractPointModel, solve_failure, step_or_field_samples
from ._task import (
    Pairs,
    StepResiduals,
    Task,
    require_dt,
    samples_named,
    step_size_task,
)

__all__ = ["PortHamiltonianNN"]


def _mlp_params(key, sizes, dtype, out_scale=1.0):
    keys = jax.random.split(key, len(sizes) - 1)
    weights = tuple(
        math.sqrt(2.0 / (a + b)) * jax.random.normal(k, (b, a), dtype)
        for k, a, b in zip(keys, sizes[:-1], sizes[1:]))
    weights = weights[:-1] + (out_scale * weights[-1],)
    return weights, tuple(jnp.zeros((b,), dtype) for b in sizes[1:])


def _mlp(weights, biases, x, sigma):
    dtype = x.dtype
    for W, b in zip(weights[:-1], biases[:-1]):
        x = sigma(W.astype(dtype) @ x + b.astype(dtype))
    return weights[-1].astype(dtype) @ x + biases[-1].astype(dtype)


def _gradient_magnitude(weights, biases, x, sigma):
    r"""$|W_1|^\top(|\sigma'(z_1)| \odot |W_2|^\top(\cdots |W_L|^\top))$ of a scalar
    MLP at `x`: the gradient's back-propagation with every factor replaced by its
    absolute value, whose size bounds the gradient's rounding ($\varepsilon$ times it).
    Near a critical point the gradient itself is small while its terms are not."""
    dtype = x.dtype
    slopes = []
    for W, b in zip(weights[:-1], biases[:-1]):
        z = W.astype(dtype) @ x + b.astype(dtype)
        slopes.append(jnp.abs(jax.vmap(jax.grad(sigma))(z)))
        x = sigma(z)
    v = jnp.abs(weights[-1].astype(dtype))[0]
    for W, slope in zip(reversed(weights[:-1]), reversed(slopes)):
        v = jnp.abs(W.astype(dtype)).T @ (slope * v)
    return v


_SAMPLE_FORMS = (StepResiduals(), Pairs())
_SOLVE = f"the discrete-gradient solve (Newton, at most {MAX_ITERATIONS} iterations)"


def _sample_form(form):
    """The training sample form of `PortHamiltonianNN`: `StepResiduals` or `Pairs` (or
    their names); `ValueError` naming the two otherwise."""
    names = tuple(f.name for f in _SAMPLE_FORMS)
    try:
        resolved = samples_named(form)
    except (TypeError, ValueError):
        resolved = None
    if resolved not in _SAMPLE_FORMS:
        raise ValueError(f"sample_form must be one of {names}, got {form!r}")
    return resolved


class PortHamiltonianNN(AbstractPointModel):
    r"""A port-Hamiltonian network: $\dot x = (\mathbb{J} - R_\theta(x))\nabla
    H_\theta(x) + F_\theta(x, t)$ on $x = (q, p) \in \mathbb{R}^{2n}$.

    $H_\theta$ is a perceptron (`depth` hidden layers of `width` units); $R_\theta =
    L_\theta L_\theta^\top \succeq 0$, $L_\theta$ lower triangular, one matrix or
    (`state_dependent_dissipation`) a perceptron of $x$; $F_\theta = (0, f_\theta)$ a
    force on the momenta, by `forcing` ($R = 0$, $F = 0$: `HamiltonianNeuralNetwork`).
    **State:** with a forcing the time last, $z = (q, p, t)$, `dim = 2n + 1`, a step
    advancing $t$ by $h$; without, $z = x$, `dim = 2n`.

    **Iterated map** (`discrete_gradient_step`): with Gonzalez's discrete gradient
    $\bar\nabla H_\theta(x, y)$ and $\bar x = (x + y)/2$,
    $y = x + h\big[(\mathbb{J} - R_\theta(\bar x))\,\bar\nabla H_\theta(x, y) +
    F_\theta(\bar x, t + h/2)\big]$, solved to round-off. For every parameter value it
    obeys $H_\theta(y) - H_\theta(x) = -h\,\bar\nabla H_\theta^\top R_\theta\,\bar\nabla
    H_\theta + h\,\bar\nabla H_\theta^\top F_\theta$, the structure `"energy-balance"`.

    **Training** on one-step pairs $(x, y)$, by `sample_form`: `"step_residual"`
    (default) fits the step's equation at the data's pair, no solve — the same
    minimisers as the solved step where the network fits exactly, errors weighed alike
    up to $O(h)$ otherwise; `"pairs"` fits the solved step's prediction (Newton inside
    the loss, differentiated implicitly). On arrays $(z, \dot z)$ it regresses the field.
    **Both forms assume noise-free states**: noise in the states is fitted as extra
    contraction (an attenuated regression), which $R_\theta$ absorbs: too large a damping.

    **Arguments:** `dim`; `width`, `depth` ($\ge 1$; the force and a state-dependent
    dissipation use the same width); `key`; `forcing`: `None` (default), `"time"`,
    `"state-time"` or an option object (`NoForcing()`, `TimeForcing()`,
    `StateTimeForcing()`); `state_dependent_dissipation`; `activation` (default tanh);
    `dt` (the stored step, or `None`); `sample_form` (`"step_residual"`, `"pairs"` or
    `StepResiduals()`, `Pairs()`: the loss only, never the rolled-out map); `dtype`.

    **Methods:** `hamiltonian(x)`, `dissipation(x)`, `force(x, t)`, `model(x, t=0.0)`
    (the field), `discrete_gradient_step(x, dt, t=0.0)`, `energy_balance_residual`.

    ```python
    model = PortHamiltonianNN(3, width=16, depth=2, forcing="time", key=jax.random.PRNGKey(0))
    y = model.discrete_gradient_step(jnp.array([1.0, 0.0]), 0.1, t=0.0)
    ```
    """

    structure: ClassVar[str] = "energy-balance"

    h_weights: tuple[Float[Array, "out in"], ...]
    h_biases: tuple[Float[Array, " out"], ...]
    r_weights: tuple[Float[Array, "out in"], ...]
    r_biases: tuple[Float[Array, " out"], ...]
    f_weights: tuple[Float[Array, "out in"], ...]
    f_biases: tuple[Float[Array, " out"], ...]
    dim: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    forcing: str | None = eqx.field(static=True)
    force_option: AbstractForcing = eqx.field(static=True)
    state_dependent_dissipation: bool = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    dt: float | None = eqx.field(static=True)
    sample_form: str = eqx.field(static=True)

    def __init__(self, dim: int, *, width: int, depth: int, key: PRNGKeyArray, forcing=None,
                 state_dependent_dissipation: bool = False,
                 activation: Callable | str = jnp.tanh, dt: float | None = None,
                 sample_form="step_residual", dtype=None):
        option = forcing_named(forcing)
        self.sample_form = _sample_form(sample_form).name
        self.force_option, self.forcing = option, option.name
        self.dim = check_int("dim", dim, minimum=2)
        n2 = self.dim - int(option.carries_time)
        if n2 < 2 or n2 % 2:
            raise ValueError(
                f"dim must be 2n (even) without forcing and 2n + 1 (odd, the time last) with "
                f"forcing={self.forcing!r}; got dim={dim}")
        self.width = check_int("width", width, minimum=1)
        self.depth = check_int("depth", depth, minimum=1)
        self.state_dependent_dissipation = check_bool(
            "state_dependent_dissipation", state_dependent_dissipation)
        resolve_activation(activation)
        self.activation = activation
        self.dt = check_stored_dt(dt)
        dtype = float_dtype(dtype)
        kh, kr, kf = jax.random.split(key, 3)
        self.h_weights, self.h_biases = _mlp_params(kh, [n2] + [self.width] * self.depth + [1], dtype)
        if self.state_dependent_dissipation:
            self.r_weights, self.r_biases = _mlp_params(kr, [n2, self.width, n2 * n2], dtype, 0.1)
        else:
            self.r_weights = ()
            self.r_biases = (0.1 * jax.random.normal(kr, (n2 * n2,), dtype),)
        n_in = option.n_inputs(n2)
        self.f_weights, self.f_biases = (
            _mlp_params(kf, [n_in, self.width, self.width, n2 // 2], dtype, 0.1) if n_in else ((), ()))

    # ------------------------------------------------------------------ the model

    @property
    def phase_dim(self) -> int:
        """The phase-space dimension `2n` (`dim`, less the time with a forcing)."""
        return self.dim - int(self.force_option.carries_time)

    def _sigma(self):
        return resolve_activation(self.activation)

    def hamiltonian(self, x: Float[Array, " n2"]) -> Float[Array, ""]:
        r"""The learned energy $H_\theta(x)$ at one phase-space point `(2n,)`."""
        check_point(type(self).__name__, x, self.phase_dim)
        return _mlp(self.h_weights, self.h_biases, x, self._sigma())[0]

    def dissipation(self, x: Float[Array, " n2"]) -> Float[Array, "n2 n2"]:
        r"""The learned dissipation $R_\theta(x) = L_\theta L_\theta^\top \succeq 0$
        `(2n, 2n)`."""
        check_point(type(self).__name__, x, self.phase_dim)
        n2 = self.phase_dim
        if self.r_weights:
            flat = _mlp(self.r_weights, self.r_biases, x, self._sigma())
        else:
            flat = self.r_biases[0].astype(x.dtype)
        L = jnp.tril(flat.reshape(n2, n2))
        return L @ L.T

    def force(self, x: Float[Array, " n2"], t=0.0) -> Float[Array, " n2"]:
        r"""The learned external force $F_\theta(x, t) = (0, f_\theta)$ `(2n,)` (zero
        without forcing)."""
        check_point(type(self).__name__, x, self.phase_dim)
        n = self.phase_dim // 2
        if not self.f_weights:
            return jnp.zeros_like(x)
        t = jnp.asarray(t, x.dtype)
        f = _mlp(self.f_weights, self.f_biases, self.force_option.inputs(x, t), self._sigma())
        return jnp.concatenate([jnp.zeros((n,), x.dtype), f])

    def __call__(self, x: Float[Array, " n2"], t=0.0) -> Float[Array, " n2"]:
        r"""The vector field $(\mathbb{J} - R_\theta(x))\nabla H_\theta(x) + F_\theta(x, t)$."""
        J = symplectic_matrix(self.phase_dim // 2, dtype=x.dtype)
        g = jax.grad(self.hamiltonian)(x)
        return (J - self.dissipation(x)) @ g + self.force(x, t)

    def discrete_gradient(self, x, y):
        r"""Gonzalez's discrete gradient $\bar\nabla H_\theta(x, y)$ `(2n,)`."""
        return discrete_gradient(self.hamiltonian, x, y)

    def _averaged_field(self, x, y, t, h):
        m = 0.5 * (x + y)
        J = symplectic_matrix(self.phase_dim // 2, dtype=x.dtype)
        return (J - self.dissipation(m)) @ self.discrete_gradient(x, y) + self.force(m, t + 0.5 * h)

    def _solve(self, x, h, t):
        check_point(type(self).__name__, x, self.phase_dim)
        h = jnp.asarray(h, x.dtype)
        t = jnp.asarray(t, x.dtype)
        J = symplectic_matrix(self.phase_dim // 2, dtype=x.dtype)
        norm = jnp.max(jnp.sum(jnp.abs(J - self.dissipation(x)), axis=1))
        hx = self.hamiltonian(x)

        def rounding(y):
            terms = _gradient_magnitude(self.h_weights, self.h_biases, 0.5 * (x + y),
                                        self._sigma())
            return rounding_level(x, y, hx, self.hamiltonian(y), terms, norm)

        return solve_step(lambda y: self._averaged_field(x, y, t, h), x, h, rounding)

    def discrete_gradient_step(self, x: Float[Array, " n2"], dt, t=0.0) -> Float[Array, " n2"]:
        r"""One discrete-gradient step of size `dt` from the phase-space point `x` at the
        time `t` (see the class documentation), solved to round-off; an unconverged solve
        raises at run time, one line naming the solve, `dt` and the dtype with what to try."""
        y, ok = self._solve(x, dt, t)
        return eqx.error_if(y, ~ok, solve_failure(self, _SOLVE, dt, x.dtype))

    def energy_balance_residual(self, x, y, dt, t=0.0) -> Float[Array, ""]:
        r"""$|H(y) - H(x) + h\,\bar\nabla H^\top R\,\bar\nabla H - h\,\bar\nabla H^\top F|$
        relative to $|H(x)| + |H(y)| + h|\bar\nabla H^\top R\bar\nabla H| +
        h|\bar\nabla H^\top F|$, with $\bar\nabla H = \bar\nabla H_\theta(x, y)$ and $R$,
        $F$ at $\bar x$ and $t + h/2$: zero to round-off for a discrete-gradient step."""
        h = jnp.asarray(dt, x.dtype)
        m = 0.5 * (x + y)
        g = self.discrete_gradient(x, y)
        lost = h * (g @ (self.dissipation(m) @ g))
        supplied = h * (g @ self.force(m, jnp.asarray(t, x.dtype) + 0.5 * h))
        hx, hy = self.hamiltonian(x), self.hamiltonian(y)
        scale = jnp.abs(hx) + jnp.abs(hy) + jnp.abs(lost) + jnp.abs(supplied)
        return jnp.abs(hy - hx + lost - supplied) / (scale + jnp.finfo(x.dtype).tiny)

    def dissipation_spectrum(self) -> np.ndarray:
        r"""The eigenvalues of the constant $R_\theta$ in increasing order (NumPy
        float64); `ValueError` for a state-dependent dissipation."""
        if self.state_dependent_dissipation:
            raise ValueError("the dissipation is state-dependent: evaluate dissipation(x)")
        x = jnp.zeros((self.phase_dim,), self.r_biases[0].dtype)
        return np.linalg.eigvalsh(np.asarray(self.dissipation(x), np.float64))

    def learned_damping(self) -> dict:
        """`{"spectrum": the eigenvalues of R_θ}` (constant dissipation; `{}` otherwise)."""
        if self.state_dependent_dissipation:
            return {}
        return {"spectrum": [float(v) for v in self.dissipation_spectrum()]}

    # ----------------------------------------------------------------- protocol

    def _split(self, state):
        n2 = self.phase_dim
        t = state[n2] if self.dim > n2 else jnp.zeros((), state.dtype)
        return state[:n2], t

    def _join(self, x, t):
        return jnp.concatenate([x, jnp.reshape(t, (1,))]) if self.dim > self.phase_dim else x

    def with_dt(self, dt: float | None) -> PortHamiltonianNN:
        """A copy with the time step `dt` (stored in its file, as `HamiltonianNeuralNetwork`)."""
        new = copy.copy(self)
        object.__setattr__(new, "dt", check_stored_dt(dt))
        return new

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        if dt is None and data_dt is None:
            dt = self.dt
        return step_size_task(self, seq_length=seq_length, prediction_window=prediction_window,
                              dt=dt, data_dt=data_dt, samples=Pairs())

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return require_dt(self, self.task(prediction_window=prediction_window, dt=dt),
                          "it is integrated by a discrete-gradient step")

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """One-step pairs of a `TrajectoryData` in the model's `sample_form` (with the
        data's `dt`; as `StepResiduals` the input is the pair `(M, 2, dim)`), or a tuple
        `(z, ż)` of arrays `(M, dim)` (vector-field regression)."""
        form = _sample_form(self.sample_form)
        x, y, task = step_or_field_samples(self, data, task, form, what=what)
        if task.samples == StepResiduals():
            x = jnp.stack([x, y], axis=1)
        return x, y, task

    def state_field(self, state):
        """The time derivative of a state `(dim,)` (with $\\dot t = 1$ when it carries the time)."""
        x, t = self._split(state)
        return self._join(self(x, t), jnp.ones((), state.dtype))

    def predict(self, x, task: Task):
        if task.samples.derivatives:
            return self.state_field(x)
        if task.samples == StepResiduals():
            # the right-hand side of the step's equation at the data's pair
            h = jnp.asarray(task.dt, x.dtype)
            (phase, t), (after, _) = self._split(x[0]), self._split(x[1])
            return self._join(phase + h * self._averaged_field(phase, after, t, h), t + h)
        # an unconverged solve gives NaN (a rejected Levenberg–Marquardt trial step)
        phase, t = self._split(x)
        y, ok = self._solve(phase, task.dt, t)
        y = jnp.where(ok, y, jnp.asarray(jnp.nan, y.dtype))
        return self._join(y, t + task.dt)

    def target(self, y, task: Task):
        return y

    def step(self, state, task: Task):
        if task.dt is None:
            raise ValueError(f"rolling out {type(self).__name__} needs the time step dt")
        phase, t = self._split(state)
        y, ok = self._solve(phase, task.dt, t)
        if task.nan_on_failure:
            y = jnp.where(ok, y, jnp.asarray(jnp.nan, y.dtype))
        else:
            y = eqx.error_if(y, ~ok, solve_failure(self, _SOLVE, task.dt, state.dtype))
        return self._join(y, t + task.dt)

    def rollout(self, initial, n_points: int, task: Task):
        return scan_rollout(lambda z: self.step(z, task), initial, n_points)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"energy_balance", "condition"}`: the largest relative energy-balance residual
        of `step` at `points` and the largest condition number of its Jacobian."""
        def one(state):
            x, t = self._split(state)
            y = self._split(self.step(state, task))[0]
            return {"energy_balance": self.energy_balance_residual(x, y, task.dt, t),
                    "condition": jnp.linalg.cond(jacobian(lambda s: self.step(s, task), state))}

        values = jax.jit(jax.vmap(one))(points)
        return {k: float(np.max(np.asarray(v, np.float64))) for k, v in values.items()}

    def describe_step(self, task: Task) -> str:
        return (f"one discrete-gradient (Gonzalez) step with dt={task.dt}, solved to round-off; "
                "H(z') − H(z) = −h ∇̄Hᵀ R ∇̄H + h ∇̄Hᵀ F")
