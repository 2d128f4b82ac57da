r"""How a model is used on data: the `Task` and the forms its training samples take.

A `Task` holds the run options that are not part of the model (window length,
prediction window, time step) and the **sample form**: what one training sample
`(x, y)` is. A model chooses the form in `training_samples` and reads it in `predict` and
`target`; the pipeline only passes the task along.

| form | `name` (as checkpoints record it) | a sample `(x, y)` |
|---|---|---|
| `Pairs` | `"pairs"` | one-step pairs $(z_t, z_{t+1})$ |
| `Windows` | `"windows"` | windows $(Z_t, Z_{t+pw})$ of `T` consecutive states |
| `MidpointPairs` | `"midpoint"` | one-step pairs, predicted by an implicit-midpoint step |
| `StepResiduals` | `"step_residual"` | one-step pairs stacked as the input `(2, dim)`: the equation of an implicit step at the pair, no solve |
| `VectorFieldSamples` | `"vector_field"` | $(z, \dot z)$: states and their time derivatives |
| `Accelerations` | `"acceleration"` | $((q, \dot q), \ddot q)$: states and accelerations |
| `Snapshots` | `"snapshots"` | $(z, z)$: a state and itself (reconstruction) |
| `TimedPairs` | `"timed_pairs"` | one-step pairs of irregular data, the input `(dim + 1,)` ending with the pair's relative step |
| `TimedWindows` | `"timed_windows"` | windows of irregular data, the input `(T, dim + 2)` ending with each row's time and step |

The timed forms (`timed` is `True`) are what irregularly sampled data give; their inputs
carry the times in trailing columns (see `geomlearn.models._timed`).
"""

import dataclasses
import math
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from ..data import TrajectoryData

__all__ = [
    "AbstractSamples",
    "Pairs",
    "Windows",
    "MidpointPairs",
    "StepResiduals",
    "VectorFieldSamples",
    "Accelerations",
    "Snapshots",
    "TimedPairs",
    "TimedWindows",
    "SAMPLE_NAMES",
    "samples_named",
    "Task",
    "sample_arrays",
    "check_data_dim",
    "no_options",
    "step_size_task",
    "require_dt",
]


class AbstractSamples(eqx.Module):
    """The form of a model's training samples (no fields: hashable, a static option).

    `name` is what a checkpoint records; `derivatives` says whether a target is the time
    derivative of its input (a regression of the vector field) rather than a state;
    `timed` whether an input ends with its times (irregularly sampled data).
    """

    name: eqx.AbstractClassVar[str]
    derivatives: eqx.AbstractClassVar[bool]
    timed: ClassVar[bool] = False


class Pairs(AbstractSamples):
    r"""One-step pairs $(z_t, z_{t+1})$ of a trajectory."""

    name: ClassVar[str] = "pairs"
    derivatives: ClassVar[bool] = False


class Windows(AbstractSamples):
    r"""Windows $(Z_t, Z_{t+pw})$: `T` consecutive states and the same window `pw`
    states later."""

    name: ClassVar[str] = "windows"
    derivatives: ClassVar[bool] = False


class MidpointPairs(AbstractSamples):
    r"""One-step pairs $(z_t, z_{t+1})$ predicted by an implicit-midpoint step of a
    learned field."""

    name: ClassVar[str] = "midpoint"
    derivatives: ClassVar[bool] = False


class StepResiduals(AbstractSamples):
    r"""One-step pairs stacked as the input, $x = (z_t, z_{t+1})$ `(2, dim)`, with the
    target $z_{t+1}$: a model whose step solves an implicit equation
    $z_{t+1} = z_t + h\,\bar f(z_t, z_{t+1})$ predicts its right-hand side at the data's
    pair, so the loss is the squared residual of the step's equation and training
    needs no solve (and no differentiation through one)."""

    name: ClassVar[str] = "step_residual"
    derivatives: ClassVar[bool] = False


class VectorFieldSamples(AbstractSamples):
    r"""States and their time derivatives $(z, \dot z)$."""

    name: ClassVar[str] = "vector_field"
    derivatives: ClassVar[bool] = True


class Accelerations(AbstractSamples):
    r"""States $(q, \dot q)$ and their accelerations $\ddot q$ (or derivatives
    $(\dot q, \ddot q)$)."""

    name: ClassVar[str] = "acceleration"
    derivatives: ClassVar[bool] = True


class Snapshots(AbstractSamples):
    """A state and itself `(z, z)`: the target of a reconstruction."""

    name: ClassVar[str] = "snapshots"
    derivatives: ClassVar[bool] = False


class TimedPairs(AbstractSamples):
    r"""One-step pairs of irregularly sampled data: the input $(z_k, s_k)$ `(dim + 1,)`
    with the relative step $s_k = (t_{k+1} - t_k)/\overline{\Delta t}$, the target
    $z_{k+1}$."""

    name: ClassVar[str] = "timed_pairs"
    derivatives: ClassVar[bool] = False
    timed: ClassVar[bool] = True


class TimedWindows(AbstractSamples):
    r"""Windows of irregularly sampled data: the input `(T, dim + 2)`, each row a state,
    its time and its step to its target row, both in units of the nominal step
    $\overline{\Delta t}$; the target the window `pw` rows later."""

    name: ClassVar[str] = "timed_windows"
    derivatives: ClassVar[bool] = False
    timed: ClassVar[bool] = True


_BY_NAME: dict[str, AbstractSamples] = {
    form.name: form
    for form in (Pairs(), Windows(), MidpointPairs(), StepResiduals(), VectorFieldSamples(), Accelerations(),
                 Snapshots(), TimedPairs(), TimedWindows())
}

#: The names of the sample forms.
SAMPLE_NAMES: tuple[str, ...] = tuple(_BY_NAME)


def samples_named(samples: AbstractSamples | str) -> AbstractSamples:
    """The sample form `samples`, or the form of that name; `ValueError` naming the known
    names for an unknown one."""
    if isinstance(samples, AbstractSamples):
        return samples
    if not isinstance(samples, str):
        raise TypeError(f"samples must be a sample form or its name, got {samples!r}")
    try:
        return _BY_NAME[samples]
    except KeyError:
        raise ValueError(f"unknown sample form {samples!r}; expected one of {SAMPLE_NAMES}") from None


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
    - `samples`: the form of the training samples (a `Pairs`, `Windows`, … of
      `geomlearn.models`, or its name), chosen by the model family; only the model reads
      it.
    - `nan_on_failure`: a step that cannot be computed (an implicit solve that does not
      converge) gives NaN instead of raising. Off by default, so `iterate` never returns
      a silent wrong value; boundedness checks turn it on and count the NaN as an
      escape. A rollout option, not recorded in checkpoints.
    - `batch`: the number of states a rollout steps together (set by the rollout, `None`
      when not known); an inference form may choose by it how to compute (see
      `geomlearn.models._shear_forms`). A rollout option, not recorded in checkpoints.
    """

    seq_length: int | None = None
    prediction_window: int | None = None
    dt: float | None = None
    samples: AbstractSamples = Pairs()
    nan_on_failure: bool = False
    batch: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "samples", samples_named(self.samples))

    def as_dict(self) -> dict:
        """The task as JSON-able values, the sample form by its name (what a checkpoint
        records and a resume compares)."""
        return {"seq_length": self.seq_length, "prediction_window": self.prediction_window,
                "dt": self.dt, "samples": self.samples.name}


def sample_arrays(data, what: str):
    """`(inputs, targets)` of a tuple `data`, checked to be two floating arrays of one
    shape; `None` when `data` is not a tuple (then it should be a `TrajectoryData`)."""
    if not isinstance(data, (tuple, list)):
        if not isinstance(data, TrajectoryData):
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


def step_size_task(model, *, seq_length, prediction_window, dt, data_dt,
                   samples: AbstractSamples) -> Task:
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
