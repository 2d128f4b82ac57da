r"""The family bases of the model protocol: point models, feed-forward and transformer
integrators, Hamiltonian models (see `geomlearn.models._base` for the protocol)."""

import abc
import math
import numbers
import warnings
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._validation import check_int
from ..data import TrajectoryData
from ..integrators import MAX_FIXED_POINT_ITERATIONS, ImplicitMidpoint, implicit_step
from ..structures import NoStructure, structure_named
from ._base import (
    AbstractLearnedInvariants,
    AbstractModel,
    compensated_rollout,
    map_residuals,
    scan_rollout,
)
from ._timed import (
    pairs_rollout_at,
    relative_steps,
    split_pair,
    split_window,
    timed_pairs,
    timed_windows,
    windows_rollout_at,
)
from ._task import (
    MidpointPairs,
    Task,
    VectorFieldSamples,
    Windows,
    check_data_dim,
    no_options,
    require_dt,
    sample_arrays,
    step_size_task,
)

__all__ = [
    "AbstractPointModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
    "AbstractMapCheck",
    "JacobianCheck",
    "LearnedEnergy",
    "model_map_description",
    "point_pairs",
    "step_or_field_samples",
    "point_rollout",
    "solve_failure",
]


def point_pairs(model, data, task: Task, *, what: str = "data"):
    """`(x, y, task)`: one-step pairs `(M, dim)` of a `TrajectoryData`, or a tuple
    `(inputs, targets)` of such arrays, checked."""
    arrays = sample_arrays(data, what)
    if arrays is None:
        check_data_dim(model, data, what)
        x, y = data.pairs()
        return jnp.asarray(x), jnp.asarray(y), task
    x, y = arrays
    if x.ndim != 2 or x.shape[-1] != model.dim:
        raise ValueError(f"{what}: expected states of shape (M, {model.dim}), got {x.shape}")
    return x, y, task


def step_or_field_samples(model, data, task: Task, pairs, *, what: str = "data"):
    """`(x, y, task)` of a model trained either through a step of size `dt` or on its
    vector field: one-step pairs of a `TrajectoryData` in the sample form `pairs` (with
    the data's `dt`, which must equal the task's if it has one), or a tuple `(z, ż)` of
    arrays `(M, dim)` as `VectorFieldSamples`."""
    arrays = sample_arrays(data, what)
    if arrays is None:
        check_data_dim(model, data, what)
        x, y = data.pairs()
        dt = float(data.dt)
        if task.dt is not None and task.dt != dt:
            raise ValueError(f"{what} has dt={dt}, but the task has dt={task.dt}")
        return jnp.asarray(x), jnp.asarray(y), Task(dt=dt, samples=pairs)
    x, y = arrays
    if x.ndim != 2 or x.shape[-1] != model.dim:
        raise ValueError(f"{what}: expected states of shape (M, {model.dim}), got {x.shape}")
    return x, y, Task(dt=task.dt, samples=VectorFieldSamples())


def point_rollout(model, initial, n_points: int, task: Task):
    """The `lax.scan` of `model.step` (of its inference form) from one state; for a model
    that is `compensated`, the compensated scan of its `compensated_step`."""
    form = model.inference_form()
    if model.compensated:
        return compensated_rollout(form.compensated_step, initial, n_points)
    return scan_rollout(lambda z: form.step(z, task), initial, n_points)


def solve_failure(model, solve: str, dt, dtype) -> str:
    """The one-line message of a step of `model` whose implicit `solve` (e.g. `"the
    implicit-midpoint solve"`) did not converge or gave a non-finite state: the model, the
    solve, `dt` (when it is a number) and the dtype, then, after `"; try "`, what to try."""
    step = f" with dt={dt:g}" if isinstance(dt, numbers.Real) else ""
    dtype = jnp.dtype(dtype)
    wider = "float64 (jax_enable_x64; train with --x64), " if jnp.finfo(dtype).bits < 64 else ""
    return (f"{type(model).__name__}: {solve}{step} in {dtype.name} did not converge or gave "
            f"a non-finite state; try {wider}a smaller step at prediction (dt) or a different "
            "model")


class AbstractPointModel(AbstractModel):
    r"""A model whose state is one point `(dim,)`: a rollout starts from the first state
    of each reference trajectory, and the iterated map keeps the model's `structure`.

    The class variable `compensated` says whether its rollout carries the rounding of
    the map's additions $z + \Delta$: a class that sets it defines
    `compensated_step(z, c)` (see `geomlearn.models._base.compensated_rollout`)."""

    compensated: ClassVar[bool] = False

    def iterated_structure(self, task: Task) -> str:
        return self.structure

    def state_shape(self, task: Task) -> tuple[int, ...]:
        return (self.dim,)

    def initial_states(self, states, task: Task):
        return states[:, 0]

    def n_initial_points(self, task: Task) -> int:
        return 1


def model_map_description(model) -> str:
    """`"the model map z ↦ <Class>(z)"`: how reports name a feed-forward model's map."""
    return f"the model map z ↦ {type(model).__name__}(z)"


class AbstractMapCheck(eqx.Module):
    """How the structure of a feed-forward integrator's map is measured and described:
    the class variable `map_check` of the class, asked by its `structure_residuals` and
    `describe_step`."""

    @abc.abstractmethod
    def residuals(self, model, points) -> dict:
        """The structure residuals of the map `model` at `points` `(B, dim)`, each the
        maximum over the points."""

    @abc.abstractmethod
    def describe(self, model) -> str:
        """A short description of the map `model`, for reports."""


class JacobianCheck(AbstractMapCheck):
    """`{"symplecticity" (even dim), "volume", "condition"}` of the model map
    (`geomlearn.geometry.structure_residuals`): the check of a symplectic, a
    volume-preserving or an unstructured map."""

    def residuals(self, model, points) -> dict:
        return map_residuals(model, points, model.dim)

    def describe(self, model) -> str:
        return model_map_description(model)


class AbstractFeedForwardIntegrator(AbstractPointModel):
    """A one-step map `z_{t+1} = model(z_t, h)` on points of shape `(dim,)`, trained on
    one-step pairs.

    `h` is an optional step size (a scalar) that scales each layer's update (Jin et al.'s
    extended SympNets for irregularly sampled data); `h=None` means no scaling. The class
    variable `map_check` says how the map's structure is measured and described
    (`JacobianCheck` unless a family claims another structure).
    """

    map_check: ClassVar[AbstractMapCheck] = JacobianCheck()
    reads_times: ClassVar[bool] = True

    @abc.abstractmethod
    def __call__(self, z: jax.Array, h: jax.Array | float | None = None) -> jax.Array:
        raise NotImplementedError

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """The task of a one-point map: it takes none of the options."""
        no_options(self, seq_length=seq_length, prediction_window=prediction_window, dt=dt)
        return Task()

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return self.task(prediction_window=prediction_window, dt=dt)

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """One-step pairs of a `TrajectoryData` (`TimedPairs` of irregular data), or a
        tuple `(inputs, targets)` of arrays `(M, dim)`."""
        if isinstance(data, TrajectoryData) and data.irregular:
            check_data_dim(self, data, what)
            return timed_pairs(data, task)
        return point_pairs(self, data, task, what=what)

    def predict(self, x, task: Task):
        if task.samples.timed:
            return self(*split_pair(x, self.dim))
        return self(x)

    def rollout_at(self, initial, times, dt: float, task: Task):
        """The rollout from `initial` `(dim,)` at the real `times` `(n,)` (the first the
        initial state's), each step scaled by its length in units of `dt`."""
        return pairs_rollout_at(self.inference_form(), initial,
                                jnp.asarray(relative_steps(times, dt)))

    def target(self, y, task: Task):
        return y

    def step(self, state, task: Task):
        return self(state)

    def rollout(self, initial, n_points: int, task: Task):
        return point_rollout(self, initial, n_points, task)

    def structure_residuals(self, points, task: Task) -> dict:
        """The residuals of the model map that the class's `map_check` measures."""
        return self.map_check.residuals(self, points)

    def describe_step(self, task: Task) -> str:
        return self.map_check.describe(self)


class AbstractTransformerIntegrator(AbstractModel):
    r"""A window map `(T, dim) -> (T, dim)`: an explicit multi-step method.

    `seq_length` is the one window length the model accepts, or `None` when any `T` works.

    **Training and rollout.** For the input rows $z_{t-T+1..t}$ the output rows are
    $z_{t-T+1+pw..t+pw}$; the last `pw` rows are the prediction (`pw`, the prediction
    window, defaults to `T`). A rollout iterates the window update
    $Z \mapsto [Z_{pw:},\ F(Z)_{T-pw:}]$. With `pw = T` that is the model map $F$
    itself and keeps its structure; with `pw < T` it mixes kept input rows with output
    rows and is **neither symplectic nor volume-preserving**, although $F$ is: allowed,
    but a structure-preserving model warns (`UserWarning`).
    """

    seq_length: eqx.AbstractVar[int | None]
    reads_times: ClassVar[bool] = True

    @abc.abstractmethod
    def __call__(self, Z: jax.Array, times=None, steps=None) -> jax.Array:
        """The window map; `times` `(T,)` for the position signal, `steps` `(T,)` the rows'
        relative steps (`geomlearn.layers._row_steps`)."""
        raise NotImplementedError

    def _resolve_window(self, T: int | None, pw) -> Task:
        if T is None:
            if pw is not None:
                check_int("prediction_window", pw, minimum=1)
            return Task(seq_length=None, prediction_window=pw, samples=Windows())
        pw = T if pw is None else check_int("prediction_window", pw, minimum=1)
        if pw > T:
            raise ValueError(
                f"prediction_window must be at most the window length T={T}, got {pw}"
            )
        if pw < T and structure_named(self.structure).preserves_anything:
            warnings.warn(
                f"{type(self).__name__} with prediction_window={pw} < seq_length={T}: the "
                f"iterated window update mixes kept input rows with predicted rows and is "
                f"not {self.structure}-preserving (the {self.structure} structure of the "
                "model map is lost in the rollout); use prediction_window=T to keep it",
                UserWarning,
                stacklevel=4,
            )
        return Task(seq_length=T, prediction_window=pw, samples=Windows())

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        no_options(self, dt=dt)
        T = self.seq_length
        if seq_length is not None:
            seq_length = check_int("seq_length", seq_length, minimum=1)
            if T is not None and seq_length != T:
                raise ValueError(
                    f"{type(self).__name__} reads windows of length {T} (seq_length={T}), "
                    f"got windows of length {seq_length}"
                )
            T = seq_length
        return self._resolve_window(T, prediction_window)

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        d = self.dim
        if len(initial_shape) not in (2, 3) or initial_shape[-1] != d:
            raise ValueError(
                f"{type(self).__name__} needs an initial window (T, {d}) or a batch "
                f"(B, T, {d}), got shape {tuple(initial_shape)}"
            )
        if initial_shape[-2] < 1:
            raise ValueError(f"the initial window is empty (shape {tuple(initial_shape)})")
        return self.task(
            seq_length=initial_shape[-2], prediction_window=prediction_window, dt=dt
        )

    def _need_T(self, task: Task) -> int:
        if task.seq_length is None:
            raise ValueError(
                f"{type(self).__name__} accepts windows of any length; pass seq_length=T "
                "to choose the window length"
            )
        return task.seq_length

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """Windows `(M, T, dim)` and the windows shifted by `pw` (see
        `TrajectoryData.windows`), or a tuple of such arrays."""
        arrays = sample_arrays(data, what)
        if arrays is None:
            check_data_dim(self, data, what)
            T = self._need_T(task)
            if data.irregular:
                return timed_windows(data, T, task)
            x, y = data.windows(T, task.prediction_window)
            return jnp.asarray(x), jnp.asarray(y), task
        x, y = arrays
        d = self.dim
        if x.ndim != 3 or x.shape[-1] != d:
            raise ValueError(f"{what}: expected windows of shape (M, T, {d}), got {x.shape}")
        if task.seq_length is not None and x.shape[1] != task.seq_length:
            raise ValueError(
                f"{what}: the model reads windows of length {task.seq_length}, got windows "
                f"of length {x.shape[1]}"
            )
        if task.seq_length is None:
            task = self._resolve_window(x.shape[1], task.prediction_window)
        return x, y, task

    def predict(self, x, task: Task):
        if task.samples.timed:
            Z, tau, s = split_window(x, self.dim)
            return self(Z, times=tau, steps=s)[x.shape[0] - task.prediction_window :]
        return self(x)[x.shape[0] - task.prediction_window :]

    def rollout_at(self, initial, times, dt: float, task: Task):
        """The window rollout from `initial` `(T, dim)` at the rows' real `times` `(n,)`
        (`geomlearn.models._timed.windows_rollout_at`)."""
        T, pw = initial.shape[0], task.prediction_window
        relative_steps(times, dt)  # checked: finite, increasing
        if (len(times) - T) % pw:
            raise ValueError(
                f"{type(self).__name__} appends {pw} rows per step (prediction_window), so "
                f"the times after the {T} of the initial window must be a multiple of {pw}, "
                f"got {len(times) - T}")
        return windows_rollout_at(self.inference_form(), initial, times, dt, pw)

    def target(self, y, task: Task):
        return y[y.shape[0] - task.prediction_window :]

    def step(self, state, task: Task):
        pw = task.prediction_window
        new = self(state)[state.shape[0] - pw :]
        return jnp.concatenate([state[pw:], new], axis=0)

    def iterated_structure(self, task: Task) -> str:
        T, pw = task.seq_length, task.prediction_window
        return self.structure if pw == T else NoStructure.name

    def state_shape(self, task: Task) -> tuple[int, ...]:
        return (self._need_T(task), self.dim)

    def initial_states(self, states, task: Task):
        T = self._need_T(task)
        if states.shape[1] < T:
            raise ValueError(
                f"the reference has {states.shape[1]} states, fewer than the window length {T}"
            )
        return states[:, :T]

    def n_initial_points(self, task: Task) -> int:
        return self._need_T(task)

    def rollout(self, initial, n_points: int, task: Task):
        T, d = initial.shape
        pw = task.prediction_window
        n_steps = math.ceil((n_points - T) / pw)
        form = self.inference_form()

        def body(window, _):
            new = form(window)[T - pw :]
            return jnp.concatenate([window[pw:], new], axis=0), new

        _, news = jax.lax.scan(body, initial, None, length=n_steps)
        return jnp.concatenate([initial, news.reshape(n_steps * pw, d)], axis=0)[:n_points]

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity" (even dim), "volume", "condition"}` of the iterated window
        update at `points` `(B, T, dim)`."""
        return map_residuals(lambda s: self.step(s, task), points, self.dim)

    def describe_step(self, task: Task) -> str:
        T, pw = task.seq_length, task.prediction_window
        if pw == T:
            return f"the window map Z ↦ {type(self).__name__}(Z) on ({T}, {self.dim}) windows (pw = T)"
        return (
            f"the window update Z ↦ [Z[{pw}:], F(Z)[{T - pw}:]] on ({T}, {self.dim}) windows "
            f"(pw = {pw} < T)"
        )


class LearnedEnergy(AbstractLearnedInvariants):
    r"""`{"learned_energy": H_θ}`: a model's learned Hamiltonian (its `hamiltonian`). The
    exact flow of the learned field conserves $H_\theta$; the implicit-midpoint rollout
    conserves it exactly only when it is quadratic and otherwise keeps its error bounded
    over long times (a symplectic method), which is what evaluations measure."""

    def of(self, model) -> dict:
        return {"learned_energy": model.hamiltonian}


class AbstractHamiltonianModel(AbstractPointModel):
    r"""A learned Hamiltonian `H_θ(z)` with vector field `J ∇H_θ(z)`.

    **Iterated map.** The implicit midpoint rule
    $z_{k+1} = z_k + h\,\mathbb{J}\nabla H_\theta\big((z_k + z_{k+1})/2\big)$ with the
    task's `dt`, solved by the fixed-point iteration of `geomlearn.integrators` to
    round-off (derivatives by the implicit function theorem). An unconverged solve raises
    one line naming the model, the solve, `dt` and the dtype, with what to try
    (`solve_failure`); with the task's `nan_on_failure` it gives NaN. It is a symplectic
    map for every $\theta$, so `structure` is `"symplectic"`.

    **Training.** On a `TrajectoryData`: one-step pairs, predicted by that step (with the
    data's `dt`; where the solve does not converge the prediction is NaN, so a
    Levenberg–Marquardt trial there is rejected and a first-order epoch stops with
    `NonFiniteLossError`); on a tuple `(z, ż)` of arrays: vector-field regression
    $\mathbb{J}\nabla H_\theta(z) \approx \dot z$.

    **Time step.** `dt` is the step the model stores (a field, or `None` as a class
    variable): the task's `dt` when neither the run nor the data gives one. Its learned
    invariant is $H_\theta$ (`learned = LearnedEnergy()`).
    """

    structure: ClassVar[str] = "symplectic"
    learned: ClassVar[AbstractLearnedInvariants] = LearnedEnergy()
    dt: eqx.AbstractVar[float | None]

    @abc.abstractmethod
    def hamiltonian(self, z: jax.Array) -> jax.Array:
        raise NotImplementedError

    @abc.abstractmethod
    def vector_field(self, z: jax.Array) -> jax.Array:
        raise NotImplementedError

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """A step-size task (implicit-midpoint pairs), with the model's stored `dt` where
        neither `dt` nor `data_dt` is given."""
        if dt is None and data_dt is None:
            dt = self.dt
        return step_size_task(self, seq_length=seq_length, prediction_window=prediction_window,
                              dt=dt, data_dt=data_dt, samples=MidpointPairs())

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return require_dt(self, self.task(prediction_window=prediction_window, dt=dt),
                          "its field is integrated with the implicit midpoint rule")

    def training_samples(self, data, task: Task, *, what: str = "data"):
        return step_or_field_samples(self, data, task, MidpointPairs(), what=what)

    def predict(self, x, task: Task):
        if task.samples.derivatives:
            return self.vector_field(x)
        # The same converged solve as `step`, but an unconverged one gives NaN instead of
        # raising: a Levenberg–Marquardt trial step there is rejected, and a first-order
        # epoch stops with NonFiniteLossError keeping the last good parameters.
        return implicit_step(self.vector_field, x, task.dt, on_failure="nan")

    def target(self, y, task: Task):
        return y

    def step(self, state, task: Task):
        if task.dt is None:
            raise ValueError(
                f"rolling out {type(self).__name__} needs the time step dt (its field is "
                "integrated with the implicit midpoint rule)"
            )
        z_new, converged = ImplicitMidpoint().solve(self.vector_field, state,
                                                    jnp.asarray(task.dt, state.dtype))
        if task.nan_on_failure:
            return jnp.where(converged, z_new, jnp.asarray(jnp.nan, z_new.dtype))
        solve = ("the implicit-midpoint solve (fixed-point iteration, at most "
                 f"{MAX_FIXED_POINT_ITERATIONS} iterations)")
        return eqx.error_if(z_new, ~converged, solve_failure(self, solve, task.dt, state.dtype))

    def rollout(self, initial, n_points: int, task: Task):
        return point_rollout(self, initial, n_points, task)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity", "volume", "condition"}` of the implicit-midpoint step."""
        return map_residuals(lambda s: self.step(s, task), points, self.dim)

    def describe_step(self, task: Task) -> str:
        return (
            f"one implicit-midpoint step of J∇H_θ with dt={task.dt}, solved to round-off "
            "(implicit function theorem for derivatives)"
        )
