r"""The model protocol: abstract bases that tell the pipeline how to use a model.

`fit`, `iterate`, `evaluate`, `save`/`load` and the `geomlearn` command never ask what
*kind* of model they hold. Every public model is a final subclass of one of the bases
below, and the base says, by its methods,

| method | question it answers |
|---|---|
| `task(seq_length=, prediction_window=, dt=)` | which run options apply, validated into a frozen [`Task`][geomlearn.models.Task] |
| `training_samples(data, task)` | the training samples `(x, y)` taken from a `TrajectoryData` (or checked when given as arrays) |
| `predict(x, task)`, `target(y, task)` | the prediction of one sample and the part of its target it is compared with |
| `step(state, task)` | the one-step map that is **iterated** in a rollout — the map whose structure is checked |
| `iterated_structure(task)` | what that map preserves for every parameter value |
| `initial_states(states, task)`, `state_shape(task)` | how a rollout starts from reference trajectories |
| `rollout(initial, n_points, task)` | the trajectory of one initial state (a `lax.scan` over `step`) |
| `structure_residuals(points, task)` | the structure residuals of `step` at sample points |
| `inference_form()` | the same map with parameter-only work hoisted out of loops |

The three bases implement these for

- `AbstractFeedForwardIntegrator`: `z_{t+1} = model(z_t, h=None)` on one point `(d,)`;
- `AbstractTransformerIntegrator`: `model(Z)` maps a window `(T, d)` to a window of the
  same shape whose last `pw` rows are the prediction;
- `AbstractHamiltonianModel`: a learned scalar `H_θ(z)` whose field `J∇H_θ` is
  integrated by the implicit midpoint rule, solved to round-off.

A new family plugs in by subclassing one of them (or `AbstractModel` itself, overriding
the protocol methods); no pipeline module changes. Two more conventions make models
persistable and listable without per-class code:

- `structure` names what the model's iterated map preserves for every parameter value:
  `"symplectic"`, `"volume"` or `"none"`. It is read from the *instance* (a
  configuration can change it, e.g. the `"arbitrary"` attention weighting) and every
  concrete class must declare it (it is abstract here).
- Every constructor argument except `key` and `dtype` is stored in a field of the same
  name (sizes and flags are static fields), so `model.config()` recovers the arguments
  and `geomlearn.load` can rebuild the skeleton before reading the arrays.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import math
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_int

__all__ = [
    "Task",
    "AbstractModel",
    "AbstractFeedForwardIntegrator",
    "AbstractTransformerIntegrator",
    "AbstractHamiltonianModel",
    "STRUCTURES",
    "sample_arrays",
    "check_data_dim",
    "no_options",
    "scan_rollout",
    "step_size_task",
    "require_dt",
]

STRUCTURES = ("symplectic", "volume", "none")


@dataclasses.dataclass(frozen=True)
class Task:
    """How a model is used on data: the run options that are not part of the model.

    A frozen, hashable record (it is a static argument of compiled training and rollout
    code), created and validated by `model.task(...)` and completed by
    `model.training_samples(...)`.

    **Fields:**

    - `seq_length`: transformers, the window length `T` (`None` elsewhere).
    - `prediction_window`: transformers, the number `pw` of predicted rows per window.
    - `dt`: the time step where the model needs one (Hamiltonian networks).
    - `samples`: the form of the training samples, named by the model family
      (`"pairs"`, `"windows"`, `"midpoint"`, `"vector_field"`, …); only the model reads it.
    """

    seq_length: int | None = None
    prediction_window: int | None = None
    dt: float | None = None
    samples: str = "pairs"


def sample_arrays(data, what: str):
    """`(inputs, targets)` of a tuple `data`, checked to be two floating arrays of one
    shape; `None` when `data` is not a tuple (then it should be a `TrajectoryData`)."""
    if not isinstance(data, (tuple, list)):
        if not (hasattr(data, "pairs") and hasattr(data, "windows") and hasattr(data, "dt")):
            raise TypeError(
                f"{what} must be a TrajectoryData or a tuple (inputs, targets) of arrays, "
                f"got {type(data).__name__}"
            )
        return None
    if len(data) != 2:
        raise ValueError(f"{what} as a tuple must be (inputs, targets), got {len(data)} items")
    x, y = (jnp.asarray(a) for a in data)
    for name, a in (("inputs", x), ("targets", y)):
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise TypeError(f"{what} {name} must be floating-point, got {a.dtype}")
    if x.shape != y.shape:
        raise ValueError(
            f"{what}: inputs and targets must have the same shape, got {x.shape} and {y.shape}"
        )
    return x, y


def check_data_dim(model, data, what: str) -> None:
    """`ValueError` unless a `TrajectoryData`'s dimension is the model's."""
    if data.dim != model.dim:
        raise ValueError(f"{what} has dimension {data.dim}, but the model has dim={model.dim}")


def no_options(model, **options) -> None:
    """`ValueError` naming the first option given (not `None`) that `model` does not take."""
    for name, value in options.items():
        if value is not None:
            raise ValueError(
                f"{name} does not apply to {type(model).__name__} (got {name}={value!r})"
            )


def step_size_task(model, *, seq_length, prediction_window, dt, data_dt, samples: str) -> Task:
    """The `Task` of a model that takes a step size and no window options: `dt` (or the
    data's `data_dt`) validated as a finite number `> 0`, or `None`."""
    no_options(model, seq_length=seq_length, prediction_window=prediction_window)
    dt = data_dt if dt is None else dt
    if dt is not None:
        dt = float(dt)
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be a finite number > 0, got {dt}")
    return Task(dt=dt, samples=samples)


def require_dt(model, task: Task, how: str) -> Task:
    """`task`, or `ValueError` when a rollout of `model` has no time step (`how` says why
    it needs one)."""
    if task.dt is None:
        raise ValueError(f"rolling out {type(model).__name__} needs the time step dt ({how})")
    return task


def scan_rollout(step, z0, n_points: int):
    """`(n_points, d)`: `z0` and `n_points - 1` iterates of `step` (one `lax.scan`)."""

    def body(z, _):
        z = step(z)
        return z, z

    _, zs = jax.lax.scan(body, z0, None, length=n_points - 1)
    return jnp.concatenate([z0[None], zs], axis=0)


def _structure_residuals(fmap, points, dim: int) -> dict:
    """Max over `points` of the symplecticity residual (even `dim`), the volume residual
    and the condition number of the Jacobian of `fmap` (see `geomlearn.geometry`)."""
    from ..geometry import jacobian, symplecticity_residual, volume_residual

    def one(z):
        out = {"volume": volume_residual(fmap, z)}
        if dim % 2 == 0:
            out["symplecticity"] = symplecticity_residual(fmap, z)
        out["condition"] = jnp.linalg.cond(jacobian(fmap, z))
        return out

    values = jax.jit(jax.vmap(one))(points)
    res = {name: float(np.max(np.asarray(v, dtype=np.float64))) for name, v in values.items()}
    order = ["symplecticity", "volume", "condition"]
    return {k: res[k] for k in order if k in res}


class AbstractModel(eqx.Module):
    """Base of all geomlearn models: the protocol of the module documentation.

    Subclasses must declare `structure` and `dim`. The protocol methods here implement a
    one-point map `z ↦ step(z)` trained on one-step pairs; the other bases override what
    differs.
    """

    dim: eqx.AbstractVar[int]

    @property
    @abc.abstractmethod
    def structure(self) -> str:
        """What the model's iterated map preserves for every parameter value:
        `"symplectic"`, `"volume"` or `"none"` (declared by every concrete class)."""

    # ---------------------------------------------------------------- persistence

    def config(self) -> dict:
        """The constructor arguments of this model (without `key`), read from its fields.

        `dtype` is the dtype of the parameters (`None` for a model without any).
        """
        params = inspect.signature(type(self).__init__).parameters
        out = {}
        for name, p in params.items():
            if name in ("self", "key") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if name == "dtype":
                continue
            if not hasattr(self, name):
                raise AttributeError(
                    f"{type(self).__name__} does not store its constructor argument {name!r}"
                )
            out[name] = getattr(self, name)
        if "dtype" in params:
            leaves = [
                leaf for leaf in jax.tree_util.tree_leaves(self) if eqx.is_inexact_array(leaf)
            ]
            out["dtype"] = leaves[0].dtype if leaves else None
        return out

    # ------------------------------------------------------------------ protocol

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """Validate the run options that apply to this model into a `Task`.

        `seq_length`, `prediction_window` and `dt` are options a user chose (an option
        that does not apply to the model is an error); `data_dt` is the time step of the
        data at hand, which a model that needs a step size uses when `dt` is not given.
        The default (a one-point map) takes none of the options.
        """
        no_options(self, seq_length=seq_length, prediction_window=prediction_window, dt=dt)
        return Task()

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """`(x, y, task)`: the training samples and the completed task.

        `data` is a `TrajectoryData` (one-step pairs are taken from it) or a tuple
        `(inputs, targets)` of arrays `(M, dim)`.
        """
        arrays = sample_arrays(data, what)
        if arrays is None:
            check_data_dim(self, data, what)
            x, y = data.pairs()
            return jnp.asarray(x), jnp.asarray(y), task
        x, y = arrays
        if x.ndim != 2 or x.shape[-1] != self.dim:
            raise ValueError(f"{what}: expected states of shape (M, {self.dim}), got {x.shape}")
        return x, y, task

    def rollout_task(self, initial_shape: tuple[int, ...], *, prediction_window=None, dt=None) -> Task:
        """The `Task` of a rollout from initial states of shape `initial_shape` (one
        state, or a batch of them), with the options given to `iterate`."""
        return self.task(prediction_window=prediction_window, dt=dt)

    def predict(self, x, task: Task):
        """The model's prediction for one training input `x`."""
        return self.step(x, task)

    def target(self, y, task: Task):
        """The part of one training target `y` that `predict` is compared with."""
        return y

    def step(self, state, task: Task):
        """One step of the iterated map (the map a rollout iterates)."""
        raise TypeError(f"{type(self).__name__} is not an integrator: it has no one-step map")

    def iterated_structure(self, task: Task) -> str:
        """What `step` preserves for every parameter value under `task`."""
        return self.structure

    def state_shape(self, task: Task) -> tuple[int, ...]:
        """The shape of one state of the iterated map."""
        return (self.dim,)

    def initial_states(self, states, task: Task):
        """Initial states of rollouts that follow reference trajectories `(B, N, dim)`."""
        return states[:, 0]

    def n_initial_points(self, task: Task) -> int:
        """How many states of a trajectory an initial state holds."""
        return 1

    def rollout(self, initial, n_points: int, task: Task):
        """The trajectory `(n_points, dim)` of one initial state (its first rows)."""
        form = self.inference_form()
        return scan_rollout(lambda z: form.step(z, task), initial, n_points)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity" (even dim), "volume", "condition"}` of `step` at `points`
        (a batch of states of `state_shape(task)`), each the maximum over the points."""
        return _structure_residuals(lambda s: self.step(s, task), points, self.dim)

    def describe_step(self, task: Task) -> str:
        """A short description of the iterated map, for reports."""
        return f"the model map z ↦ {type(self).__name__}(z)"

    def inference_form(self):
        """The same map with parameter-only work hoisted (default: the model itself).

        Rollouts call this once, outside their loop, and iterate the result."""
        return self


class AbstractFeedForwardIntegrator(AbstractModel):
    """A one-step map `z_{t+1} = model(z_t, h)` on points of shape `(dim,)`.

    `h` is an optional step size (a scalar) that scales each layer's update (Jin et al.'s
    extended SympNets for irregularly sampled data); `h=None` means no scaling.
    """

    @abc.abstractmethod
    def __call__(self, z: jax.Array, h: jax.Array | float | None = None) -> jax.Array:
        raise NotImplementedError

    def step(self, state, task: Task):
        return self(state)


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

    @abc.abstractmethod
    def __call__(self, Z: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _resolve_window(self, T: int | None, pw) -> Task:
        if T is None:
            if pw is not None:
                check_int("prediction_window", pw, minimum=1)
            return Task(seq_length=None, prediction_window=pw, samples="windows")
        pw = T if pw is None else check_int("prediction_window", pw, minimum=1)
        if pw > T:
            raise ValueError(
                f"prediction_window must be at most the window length T={T}, got {pw}"
            )
        if pw < T and self.structure != "none":
            warnings.warn(
                f"{type(self).__name__} with prediction_window={pw} < seq_length={T}: the "
                f"iterated window update mixes kept input rows with predicted rows and is "
                f"not {self.structure}-preserving (the {self.structure} structure of the "
                "model map is lost in the rollout); use prediction_window=T to keep it",
                UserWarning,
                stacklevel=4,
            )
        return Task(seq_length=T, prediction_window=pw, samples="windows")

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
        return self(x)[x.shape[0] - task.prediction_window :]

    def target(self, y, task: Task):
        return y[y.shape[0] - task.prediction_window :]

    def step(self, state, task: Task):
        pw = task.prediction_window
        new = self(state)[state.shape[0] - pw :]
        return jnp.concatenate([state[pw:], new], axis=0)

    def iterated_structure(self, task: Task) -> str:
        T, pw = task.seq_length, task.prediction_window
        return self.structure if pw == T else "none"

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

    def describe_step(self, task: Task) -> str:
        T, pw = task.seq_length, task.prediction_window
        if pw == T:
            return f"the window map Z ↦ {type(self).__name__}(Z) on ({T}, {self.dim}) windows (pw = T)"
        return (
            f"the window update Z ↦ [Z[{pw}:], F(Z)[{T - pw}:]] on ({T}, {self.dim}) windows "
            f"(pw = {pw} < T)"
        )


class AbstractHamiltonianModel(AbstractModel):
    r"""A learned Hamiltonian `H_θ(z)` with vector field `J ∇H_θ(z)`.

    **Iterated map.** The implicit midpoint rule
    $z_{k+1} = z_k + h\,\mathbb{J}\nabla H_\theta\big((z_k + z_{k+1})/2\big)$ with the
    task's `dt`, solved by `geomlearn.integrators.implicit_step` to round-off (an
    unconverged solve raises; derivatives by the implicit function theorem). It is a
    symplectic map for every $\theta$, so `structure` is `"symplectic"`.

    **Training.** On a `TrajectoryData`: one-step pairs, predicted by that step (with the
    data's `dt`; where the solve does not converge the prediction is NaN, so a
    Levenberg–Marquardt trial there is rejected and a first-order epoch stops with
    `NonFiniteLossError`); on a tuple `(z, ż)` of arrays: vector-field regression
    $\mathbb{J}\nabla H_\theta(z) \approx \dot z$.
    """

    @property
    def structure(self) -> str:
        return "symplectic"

    @abc.abstractmethod
    def hamiltonian(self, z: jax.Array) -> jax.Array:
        raise NotImplementedError

    @abc.abstractmethod
    def vector_field(self, z: jax.Array) -> jax.Array:
        raise NotImplementedError

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        return step_size_task(self, seq_length=seq_length, prediction_window=prediction_window,
                              dt=dt, data_dt=data_dt, samples="midpoint")

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return require_dt(self, self.task(prediction_window=prediction_window, dt=dt),
                          "its field is integrated with the implicit midpoint rule")

    def training_samples(self, data, task: Task, *, what: str = "data"):
        arrays = sample_arrays(data, what)
        if arrays is None:
            check_data_dim(self, data, what)
            x, y = data.pairs()
            dt = float(data.dt)
            if task.dt is not None and task.dt != dt:
                raise ValueError(f"{what} has dt={dt}, but the task has dt={task.dt}")
            return jnp.asarray(x), jnp.asarray(y), Task(dt=dt, samples="midpoint")
        x, y = arrays
        if x.ndim != 2 or x.shape[-1] != self.dim:
            raise ValueError(f"{what}: expected states of shape (M, {self.dim}), got {x.shape}")
        return x, y, Task(dt=task.dt, samples="vector_field")

    def predict(self, x, task: Task):
        if task.samples == "vector_field":
            return self.vector_field(x)
        # The same converged solve as `step`, but an unconverged one gives NaN instead of
        # raising: a Levenberg–Marquardt trial step there is rejected, and a first-order
        # epoch stops with NonFiniteLossError keeping the last good parameters.
        from ..integrators import implicit_step

        return implicit_step(self.vector_field, x, task.dt, on_failure="nan")

    def step(self, state, task: Task):
        from ..integrators import implicit_step

        if task.dt is None:
            raise ValueError(
                f"rolling out {type(self).__name__} needs the time step dt (its field is "
                "integrated with the implicit midpoint rule)"
            )
        return implicit_step(self.vector_field, state, task.dt)

    def describe_step(self, task: Task) -> str:
        return (
            f"one implicit-midpoint step of J∇H_θ with dt={task.dt}, solved to round-off "
            "(implicit function theorem for derivatives)"
        )
