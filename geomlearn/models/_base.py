r"""The model protocol: the abstract base that tells the pipeline how to use a model.

`fit`, `iterate`, `evaluate`, `save`/`load` and the `geomlearn` command never ask what
*kind* of model they hold. Every public model is a final subclass of `AbstractModel`
(through a family base of `geomlearn.models`), and the protocol says, by its methods,

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

The family bases implement these for one-point maps `z_{t+1} = model(z_t, h=None)`
(`AbstractFeedForwardIntegrator`), window maps `(T, d) → (T, d)` whose last `pw` rows
are the prediction (`AbstractTransformerIntegrator`) and learned Hamiltonians `H_θ`
whose field `J∇H_θ` is integrated by the implicit midpoint rule
(`AbstractHamiltonianModel`). A new family plugs in by subclassing one of them (or
`AbstractModel`); no pipeline module changes. Three conventions make models
persistable and listable without per-class code:

- `structure` names what the iterated map preserves for every parameter value (see
  `geomlearn.structures`): a class variable, or a property where a configuration changes
  it (e.g. the `"arbitrary"` attention weighting); it is read from the *instance*.
- Every constructor argument except `key` and `dtype` is stored in a field of the same
  name, so `model.config()` recovers the arguments and `geomlearn.load` can rebuild the
  skeleton before reading the arrays.
- Every concrete model class of the package registers itself by its class name when it
  is defined: the registry below is the one list of model families, where `load` finds
  a file's class (`model_class`); a class defined elsewhere is added with `register`.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from ..geometry import structure_residuals
from ..structures import STRUCTURE_NAMES
from ._task import Task

__all__ = [
    "AbstractModel",
    "AbstractInferenceForm",
    "ModelItself",
    "AbstractLearnedInvariants",
    "NoLearnedInvariants",
    "STRUCTURES",
    "Task",
    "check_model",
    "model_rollout",
    "scan_rollout",
    "compensated_rollout",
    "map_residuals",
    "register",
    "model_class",
    "model_classes",
]

#: The structure names a model may claim (`geomlearn.structures.STRUCTURE_NAMES`).
STRUCTURES = STRUCTURE_NAMES


def scan_rollout(step, z0, n_points: int):
    """`(n_points, d)`: `z0` and `n_points - 1` iterates of `step` (one `lax.scan`)."""

    def body(z, _):
        z = step(z)
        return z, z

    _, zs = jax.lax.scan(body, z0, None, length=n_points - 1)
    return jnp.concatenate([z0[None], zs], axis=0)


def compensated_rollout(step, z0, n_points: int):
    r"""`(n_points, d)`: `z0` and `n_points - 1` iterates of a map that carries the
    rounding of its additions (one `lax.scan`, like `scan_rollout`).

    `step(z, c)` returns the next pair `(z, c)`: the state and the rounding left over by
    its compensated (Kahan) additions $z + \Delta$, the pair standing for $z - c$. The
    scan starts from $c = 0$ and returns the states `z`. Carrying $c$ from step to step
    keeps the rounding of $z + \Delta$, the largest error of an unbiased step, from adding
    up: the error that is left grows like $\varepsilon |\Delta| \sqrt N$ over $N$ steps
    (Brouwer's law) instead of $\varepsilon |z| \sqrt N$.
    """

    def body(carry, _):
        carry = step(*carry)
        return carry, carry[0]

    _, zs = jax.lax.scan(body, (z0, jnp.zeros_like(z0)), None, length=n_points - 1)
    return jnp.concatenate([z0[None], zs], axis=0)


def map_residuals(fmap, points, dim: int) -> dict:
    """Max over `points` of the symplecticity residual (even `dim`), the volume residual
    and the condition number of the Jacobian of `fmap`: `geomlearn.geometry.
    structure_residuals`, the residuals every model reports."""
    return structure_residuals(fmap, points, dim)


class AbstractInferenceForm(eqx.Module):
    """How a model's map is arranged for rollouts: the class variable `inference` of a
    model class, asked by `AbstractModel.inference_form`."""

    @abc.abstractmethod
    def of(self, model):
        """The same map as `model` with parameter-only work hoisted out of loops."""


class ModelItself(AbstractInferenceForm):
    """Nothing to hoist: the inference form of a model is the model itself."""

    def of(self, model):
        return model


class AbstractLearnedInvariants(eqx.Module):
    """The quantities a model says its own flow conserves: the class variable
    `learned` of a model class, asked by `AbstractModel.learned_invariants`."""

    @abc.abstractmethod
    def of(self, model) -> dict:
        """The learned invariants of `model`, by name → function of one state."""


class NoLearnedInvariants(AbstractLearnedInvariants):
    """A model that says nothing about what its flow conserves."""

    def of(self, model) -> dict:
        return {}


# The registry of model classes: the one list of model families. A concrete class of the
# package is added when it is defined (`AbstractModel.__init_subclass__` queues it, and
# the queue is read on the next look-up, once the class is complete); `register` adds
# any class, replacing one of the same name.
_PACKAGE = __name__.partition(".")[0]
_CLASSES: dict[str, type] = {}
_DEFINED: list[type] = []


def _is_family(cls: type) -> bool:
    """A concrete, public model class of the package (not `Abstract…`, not `_private`)."""
    return (cls.__module__.partition(".")[0] == _PACKAGE and not inspect.isabstract(cls)
            and not cls.__name__.startswith(("Abstract", "_")))


def _registry() -> dict[str, type]:
    while _DEFINED:
        cls = _DEFINED.pop(0)
        if _is_family(cls):
            _CLASSES[cls.__name__] = cls
    return _CLASSES


class AbstractModel(eqx.Module):
    """Base of all geomlearn models: the protocol of the module documentation.

    Subclasses declare `structure` (a class variable, or a property where the
    configuration changes it) and `dim`, and implement the protocol methods; the family
    bases of `geomlearn.models` implement them for their kind of map. Two capabilities
    are class variables: `inference` (how `inference_form` arranges the map),
    `learned` (what `learned_invariants` reports) and `symmetry_field` (which field
    `kept_symmetry` returns).
    """

    dim: eqx.AbstractVar[int]
    inference: ClassVar[AbstractInferenceForm] = ModelItself()
    learned: ClassVar[AbstractLearnedInvariants] = NoLearnedInvariants()
    symmetry_field: ClassVar[str | None] = None
    #: Whether the model rolls out at real times (`rollout_at`; irregular data).
    reads_times: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _DEFINED.append(cls)

    @property
    @abc.abstractmethod
    def structure(self) -> str:
        """What the model's iterated map preserves for every parameter value:
        `"symplectic"`, `"volume"` or `"none"`. A concrete class declares it as a class
        variable, `structure: ClassVar[str] = "symplectic"`, or as a property where the
        configuration changes it."""

    # ---------------------------------------------------------------- persistence

    def config(self) -> dict:
        """The constructor arguments of this model (without `key`), read from its fields.

        `dtype` is the dtype of the parameters (`None` for a model without any).
        """
        params = inspect.signature(type(self).__init__).parameters
        out = {}
        for name, p in params.items():
            if name in ("self", "key", "dtype") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            try:
                out[name] = getattr(self, name)
            except AttributeError:
                raise AttributeError(
                    f"{type(self).__name__} does not store its constructor argument {name!r}"
                ) from None
        if "dtype" in params:
            leaves = [
                leaf for leaf in jax.tree_util.tree_leaves(self) if eqx.is_inexact_array(leaf)
            ]
            out["dtype"] = leaves[0].dtype if leaves else None
        return out

    # ------------------------------------------------------------------ protocol

    @abc.abstractmethod
    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """Validate the run options that apply to this model into a `Task`.

        `seq_length`, `prediction_window` and `dt` are options a user chose (an option
        that does not apply to the model is an error); `data_dt` is the time step of the
        data at hand, which a model that needs a step size uses when `dt` is not given.
        """

    @abc.abstractmethod
    def training_samples(self, data, task: Task, *, what: str = "data"):
        """`(x, y, task)`: the training samples of `data` (a `TrajectoryData` or a tuple
        of arrays) and the completed task."""

    @abc.abstractmethod
    def rollout_task(self, initial_shape: tuple[int, ...], *, prediction_window=None, dt=None) -> Task:
        """The `Task` of a rollout from initial states of shape `initial_shape` (one
        state, or a batch of them), with the options given to `iterate`."""

    @abc.abstractmethod
    def predict(self, x, task: Task):
        """The model's prediction for one training input `x`."""

    @abc.abstractmethod
    def target(self, y, task: Task):
        """The part of one training target `y` that `predict` is compared with."""

    @abc.abstractmethod
    def step(self, state, task: Task):
        """One step of the iterated map (the map a rollout iterates)."""

    @abc.abstractmethod
    def iterated_structure(self, task: Task) -> str:
        """What `step` preserves for every parameter value under `task`."""

    @abc.abstractmethod
    def state_shape(self, task: Task) -> tuple[int, ...]:
        """The shape of one state of the iterated map."""

    @abc.abstractmethod
    def initial_states(self, states, task: Task):
        """Initial states of rollouts that follow reference trajectories `(B, N, dim)`."""

    @abc.abstractmethod
    def n_initial_points(self, task: Task) -> int:
        """How many states of a trajectory an initial state holds."""

    @abc.abstractmethod
    def rollout(self, initial, n_points: int, task: Task):
        """The trajectory `(n_points, dim)` of one initial state (its first rows)."""

    @abc.abstractmethod
    def structure_residuals(self, points, task: Task) -> dict:
        """The structure residuals of `step` at `points` (a batch of states of
        `state_shape(task)`), each the maximum over the points."""

    @abc.abstractmethod
    def describe_step(self, task: Task) -> str:
        """A short description of the iterated map, for reports."""

    def learned_invariants(self) -> dict:
        """Quantities the model itself says its flow conserves, by name → function of a
        state, as the class variable `learned` says (none by default; a Hamiltonian
        network has its learned energy). Evaluations report their drift along rollouts
        when no system is known, and next to the system's invariants when one is."""
        return self.learned.of(self)

    def kept_symmetry(self):
        """The symmetry (`geomlearn.symmetries`) the model keeps by construction, whose
        momentum map its flow conserves for every parameter value: the field that the
        class variable `symmetry_field` names (`None`: none, the default). Evaluations
        report the momentum map's drift unasked."""
        return None if self.symmetry_field is None else getattr(self, self.symmetry_field)

    def inference_form(self):
        """The same map with parameter-only work hoisted, as the class variable
        `inference` says (by default the model itself).

        Rollouts call this once, outside their loop, and iterate the result. A model
        whose map builds matrices from its parameters on every call names a form that
        holds them built."""
        return self.inference.of(self)


def check_model(model) -> None:
    """`TypeError` unless `model` is a geomlearn model."""
    if not isinstance(model, AbstractModel):
        raise TypeError(
            f"expected a geomlearn model (a subclass of geomlearn.models.AbstractModel), got "
            f"{type(model).__name__}"
        )


@eqx.filter_jit
def _compiled_rollout(model, initial, n_points: int, task, batched: bool):
    run = lambda z0: model.rollout(z0, n_points, task)  # noqa: E731
    return jax.vmap(run)(initial) if batched else run(initial)


def model_rollout(model, initial, n_points: int, task, *, batched: bool = True):
    """`model.rollout` of a batch of initial states (or of one, `batched=False`) under a
    validated `task` (its `batch` set to the number of states), compiled once per model
    structure, shapes and `n_points`."""
    initial = jnp.asarray(initial)
    task = dataclasses.replace(task, batch=initial.shape[0] if batched else 1)
    return _compiled_rollout(model, initial, n_points, task, batched)


# ---------------------------------------------------------------------- the registry


def register(cls: type) -> type:
    """Make a model class defined outside the package loadable by `geomlearn.load`.

    The class must be a subclass of `geomlearn.models.AbstractModel` that stores its
    constructor arguments in fields of the same name (see `AbstractModel.config`). It is
    found by its class name, which then means this class (also over a class of
    `geomlearn.models` of the same name). The concrete classes of the package register
    themselves. Usable as a decorator; returns `cls`.
    """
    if not (isinstance(cls, type) and issubclass(cls, AbstractModel)):
        raise TypeError(f"register expects a subclass of AbstractModel, got {cls!r}")
    _registry()[cls.__name__] = cls
    return cls


def model_class(name: str) -> type:
    """The model class saved under `name`; `ValueError` naming the known classes otherwise."""
    classes = _registry()
    try:
        return classes[name]
    except KeyError:
        raise ValueError(
            f"unknown model class {name!r}; known classes: {sorted(classes)} "
            "(a class defined outside geomlearn.models must be registered with "
            "geomlearn.io.register before loading)"
        ) from None


def model_classes() -> dict[str, type]:
    """A copy of the registry: class name to model class."""
    return dict(_registry())
