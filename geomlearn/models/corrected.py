r"""Corrected integrators: a classical symplectic step between learned symplectic maps.

A known, or approximately known, canonical Hamiltonian system $\dot z =
\mathbb{J}\nabla H(z)$ has classical symplectic one-step methods $S_h$ (Störmer–Verlet,
Yoshida's compositions, the Gauss–Legendre methods of `geomlearn.integrators`). A
`CorrectedIntegrator` keeps such a step and learns what it misses — the error of the
method at a coarse step, or the part of $H$ that is not known — as symplectic maps
composed with it:

$$\Phi_\theta = C^{\mathrm{after}}_\theta \circ \big(S_{h/s}\big)^{s} \circ
  C^{\mathrm{before}}_\theta,$$

with $s$ substeps of the method and the corrections $C$ symplectic networks (a
`GSympNet`, `LASympNet`, `HenonNet`, …). The **placement** says which corrections there
are: only $C^{\mathrm{before}}$ (`"before"`), only $C^{\mathrm{after}}$ (`"after"`), or
both, two networks with their own parameters (`"around"`); the classical processing of
a method, $P \circ S_h \circ P^{-1}$, is the special case $C^{\mathrm{after}} =
(C^{\mathrm{before}})^{-1}$ of the last (Hairer, Lubich and Wanner, *Geometric
Numerical Integration*, 2nd ed., Springer 2006, chapter V).

**Structure.** By the chain rule $D\Phi = DC^{\mathrm{after}}\, DS \cdots DS\,
DC^{\mathrm{before}}$, and every factor satisfies $M^\top\mathbb{J}M = \mathbb{J}$, so
$D\Phi^\top\mathbb{J}\,D\Phi = \mathbb{J}$: the model is symplectic for every parameter
value and every step $h$, as far as its factors are (an implicit method's stage solve
is converged to round-off).

**Start.** A correction built with `identity_init=True` is exactly the identity, so
the untrained model is exactly $(S_{h/s})^s$. **What is trained:** only the corrections'
parameters. The system enters the step through `jax.lax.stop_gradient` (the systems of
`geomlearn.systems` hold their parameters as constants and have no arrays at all). Where
only part of $H$ is known — the kinetic energy, a cheap approximate potential — the
method steps the known part and the corrections learn the rest of the data's map.

**Symmetry.** With `symmetry=` every correction keeps the group, so conserves its
momentum map $\mu$ for every parameter value, and the system's $H$ must be invariant
under it, so $\mu$ is a first integral of its field (Noether). Every symplectic method
here keeps $\mu$ then: a splitting composes exact flows of $T$ and $V$, each invariant
(the group acts on $q$ and $p$ apart), and a Gauss–Legendre method keeps every quadratic
first integral (Hairer, Lubich, Wanner, Thm IV.2.1). So $\Phi_\theta$ conserves $\mu$.
"""

from __future__ import annotations

import copy
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._nn import check_point
from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_int, check_stored_dt, float_dtype, step_size
from ..integrators import SYMPLECTIC_METHODS, AbstractIntegrator, StormerVerlet, as_integrator
from ..structures import structure_named
from ..symmetries import AbstractSymmetry, resolve_symmetry
from ..systems import AbstractSystem
from ._base import AbstractInferenceForm, AbstractModel, map_residuals
from ._integrators import (
    AbstractFeedForwardIntegrator,
    AbstractPointModel,
    point_pairs,
    point_rollout,
    solve_failure,
)
from ._task import Pairs, Task, require_dt, sample_arrays, step_size_task
from .sympnet import GSympNet

__all__ = [
    "AbstractPlacement",
    "Before",
    "After",
    "Around",
    "PLACEMENTS",
    "placement_named",
    "CorrectionForms",
    "CorrectedIntegrator",
]


class AbstractPlacement(eqx.Module):
    """Where the learned corrections of a `CorrectedIntegrator` act (no fields: a static
    option): `name` (what a file records), whether there is a correction `before` the
    classical step and one `after` it, and the composition it makes, `formula`."""

    name: eqx.AbstractClassVar[str]
    before: eqx.AbstractClassVar[bool]
    after: eqx.AbstractClassVar[bool]
    formula: eqx.AbstractClassVar[str]


class Before(AbstractPlacement):
    r"""$\Phi = S^s \circ C$: one correction, applied before the classical step."""

    name: ClassVar[str] = "before"
    before: ClassVar[bool] = True
    after: ClassVar[bool] = False
    formula: ClassVar[str] = "S ∘ C"


class After(AbstractPlacement):
    r"""$\Phi = C \circ S^s$: one correction, applied after the classical step."""

    name: ClassVar[str] = "after"
    before: ClassVar[bool] = False
    after: ClassVar[bool] = True
    formula: ClassVar[str] = "C ∘ S"


class Around(AbstractPlacement):
    r"""$\Phi = C^{\mathrm{after}} \circ S^s \circ C^{\mathrm{before}}$: two corrections
    with their own parameters, one on each side of the classical step."""

    name: ClassVar[str] = "around"
    before: ClassVar[bool] = True
    after: ClassVar[bool] = True
    formula: ClassVar[str] = "C_after ∘ S ∘ C_before"


_BY_NAME: dict[str, AbstractPlacement] = {p.name: p for p in (Before(), After(), Around())}

#: The names `placement` accepts.
PLACEMENTS: tuple[str, ...] = tuple(_BY_NAME)


def placement_named(placement: str | AbstractPlacement) -> AbstractPlacement:
    """The placement object for `placement` (an `AbstractPlacement` itself, or one of the
    names `PLACEMENTS`); `ValueError` naming the choices otherwise."""
    if isinstance(placement, AbstractPlacement):
        return placement
    try:
        return _BY_NAME[placement]
    except (KeyError, TypeError):
        raise ValueError(
            f"placement must be one of {PLACEMENTS} or an AbstractPlacement, got {placement!r}"
        ) from None


class CorrectionForms(AbstractInferenceForm):
    """The inference form of a corrected integrator: each correction in its own form."""

    def of(self, model):
        forms = tuple(None if c is None else c.inference_form() for c in (model.before, model.after))
        return eqx.tree_at(lambda m: (m.before, m.after), model, forms, is_leaf=lambda x: x is None)


def _checked_system(system) -> AbstractSystem:
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a geomlearn.systems.AbstractSystem, got {type(system).__name__}")
    if not system.canonical or system.driven:
        raise ValueError("system must be a canonical, autonomous Hamiltonian system z = (q, p): "
                         f"expected canonical=True and driven=False, got {type(system).__name__}")
    return system


def _checked_method(method, system) -> AbstractIntegrator:
    integrator = as_integrator(method)
    if not integrator.symplectic:
        raise ValueError(f"method must be a symplectic integrator: expected one of "
                         f"{sorted(SYMPLECTIC_METHODS)}, got {integrator.name!r}")
    integrator.check_system(system)
    return integrator


def _checked_correction(correction, dim: int):
    """`correction`, once it is a symplectic feed-forward integrator on `dim` states."""
    feed_forward = isinstance(correction, AbstractFeedForwardIntegrator)
    if not (feed_forward and structure_named(correction.structure).claims("symplecticity")):
        what = (f"structure {correction.structure!r}" if feed_forward else
                "a model that is not a feed-forward integrator" if isinstance(correction, AbstractModel)
                else "not a geomlearn model")
        raise ValueError("correction must be a symplectic feed-forward integrator (e.g. "
                         f"GSympNet(dim, identity_init=True)), got {type(correction).__name__} ({what})")
    if correction.dim != dim:
        raise ValueError(f"the correction must act on the system's states: expected dim={dim}, "
                         f"got a correction with dim={correction.dim}")
    return correction


#: The default correction (`correction=None`): `GSympNet(dim, identity_init=True)` of this size.
_DEFAULT_CORRECTION = {"n_layers": 2, "width": 16}

#: How many random states `_check_invariant` tests, and their seed.
_CHECK_STATES, _CHECK_SEED = 8, 0


@eqx.filter_jit
def _momentum_rates(system, group: AbstractSymmetry, states):
    r"""$D\mu(z)\,f(z)$ `(B, k)` and $\|D\mu(z)\|\,\|f(z)\|$ `(B,)` at `states` `(B, dim)`."""

    def rate(z):
        f, jac = system.vector_field(z), jax.jacfwd(group.momentum_map)(z)
        return jnp.sum(jac * f[None, :], axis=-1), jnp.linalg.norm(jac) * jnp.linalg.norm(f)

    return jax.vmap(rate)(states)


def _check_invariant(system, group: AbstractSymmetry) -> None:
    r"""`ValueError` (one line) unless the momentum map $\mu$ of `group` is a first integral
    of `system`: $|D\mu(z)\,f(z)| \le \sqrt{\varepsilon}\,\|D\mu(z)\|\,\|f(z)\|$ at
    random states $z \sim \mathcal{N}(0, I)$, in the default float. That is the Poisson
    bracket $\{\mu, H\} = D\mu\,\mathbb{J}\nabla H$: zero exactly where $H$ is invariant
    under the group's continuous part. A group without a momentum map (a finite one)
    has nothing to check and is refused."""
    dim = system.dim
    if jax.eval_shape(group.momentum_map, jax.ShapeDtypeStruct((dim,), jnp.float32)).shape[0] == 0:
        raise ValueError(f"symmetry={group.spec!r} has no momentum map to check the system against "
                         "(a finite group); expected a continuous symmetry (translation, rotation, "
                         "rotation3, particles)")
    dtype = float_dtype(None)
    states = np.random.default_rng(_CHECK_SEED).standard_normal((_CHECK_STATES, dim))
    with jax.ensure_compile_time_eval():  # also inside `filter_eval_shape` (a model file)
        change, scale = (np.asarray(x) for x in _momentum_rates(system, group, jnp.asarray(states, dtype)))
    tol = float(np.sqrt(np.finfo(dtype).eps))
    with np.errstate(divide="ignore", invalid="ignore"):
        worst = float(np.max(np.where(scale > 0, np.max(np.abs(change), axis=-1) / scale, 0.0)))
    if not worst <= tol:  # NaN included
        raise ValueError(f"symmetry={group.spec!r} is not a symmetry of {type(system).__name__}: "
                         f"its momentum map changes along the flow (|dμ/dt| = {worst:.2g} of "
                         f"|Dμ||f| at a random state, expected at most {tol:.1g}); expected a "
                         "system whose Hamiltonian is invariant under the group")


def _correction_for(correction, group, dim: int, key):
    """The given `correction` (checked, and keeping `group` when there is one), or the
    default identity-initialised `GSympNet` keeping `group`, built with `key`."""
    if correction is None:
        if key is None:
            raise ValueError("CorrectedIntegrator needs a correction, or a key to build the default "
                             f"one (GSympNet(dim, identity_init=True, **{_DEFAULT_CORRECTION})); got neither")
        correction = GSympNet(dim, **_DEFAULT_CORRECTION, identity_init=True, symmetry=group, key=key)
    correction = _checked_correction(correction, dim)
    kept = correction.kept_symmetry()
    if group is not None and kept != group:
        got = "none" if kept is None else repr(kept.spec)
        raise ValueError(f"the correction must keep the symmetry {group.spec!r}: expected one built "
                         f"with symmetry={group.spec!r}, got {type(correction).__name__} keeping {got}")
    return correction


class CorrectedIntegrator(AbstractPointModel):
    r"""A classical symplectic step composed with learned symplectic corrections.

    $$\Phi_\theta(z) = C^{\mathrm{after}}_\theta\Big(\big(S_{h/s}\big)^{s}
      \big(C^{\mathrm{before}}_\theta(z)\big)\Big),$$

    $S_{h/s}$ one step of `method` for `system` of size $h/s$ ($s$ = `substeps`), $h$
    the time step (the data's, else `dt`), and $C$ the corrections the placement names
    (module documentation). Symplectic for every parameter value; with an
    identity-initialised correction the untrained model is exactly the classical step.
    The corrections do not depend on $h$: roll out at the step the model was trained on.

    **Arguments:**

    - `system`: a canonical Hamiltonian system of `geomlearn.systems`, the known or
      approximate physics (files record its class name and constructor arguments).
    - `correction`: a symplectic feed-forward integrator on the system's `dim`, e.g.
      `GSympNet(dim, identity_init=True)`; `"around"` starts both corrections from it
      (two copies, each with its own parameters from then on). `None` (default): an
      identity-initialised `GSympNet(dim, n_layers=2, width=16)` built with `key`.
    - `method`: a symplectic `geomlearn.integrators` method or its name (default
      `StormerVerlet()`; an explicit method needs a separable system); stored by name.
    - `placement`: `"before"`, `"after"`, `"around"` (default) or an `AbstractPlacement`.
    - `substeps`: classical steps per model step, `≥ 1` (default 1).
    - `dt`: the step when neither a call, a run nor the data gives one (default `None`).
    - `symmetry`: `None` (default) or a continuous symmetry of `geomlearn.symmetries` (or
      its spec) that the system's $H$ keeps (else `ValueError`) and the corrections keep
      (the default one is built with it); the model then conserves its momentum map
      (module documentation). Stored as `symmetry` (the spec) and `group` (the object).
    - `key`: a PRNG key for the default correction (keyword-only; unused otherwise).

    **Call:** `model(z, h=None)` on one state `(dim,)`, one step of size `h` (else `dt`).
    **Returns:** the next state, in `z`'s shape and dtype. The corrections are the fields
    `before` and `after` (`None` where the placement has none).

    ```python
    model = gl.CorrectedIntegrator(gl.systems.Kepler(), symmetry="rotation:0,1", key=key)
    model, history = gl.fit(model, data, epochs=100, key=key)
    ```
    """

    structure: ClassVar[str] = "symplectic"
    inference: ClassVar[AbstractInferenceForm] = CorrectionForms()

    system: AbstractSystem
    before: AbstractFeedForwardIntegrator | None
    after: AbstractFeedForwardIntegrator | None
    dim: int = eqx.field(static=True)
    method: str = eqx.field(static=True)
    placement: str = eqx.field(static=True)
    substeps: int = eqx.field(static=True)
    dt: float | None = eqx.field(static=True)
    integrator: AbstractIntegrator = eqx.field(static=True)
    placing: AbstractPlacement = eqx.field(static=True)
    symmetry: str | None = eqx.field(static=True)
    group: AbstractSymmetry | None = eqx.field(static=True)
    symmetry_field: ClassVar[str] = "group"
    #: a finite group has no momentum map to check the system's invariance against
    finite_symmetries: ClassVar[bool] = False

    def __init__(
        self,
        system: AbstractSystem,
        correction: AbstractFeedForwardIntegrator | None = None,
        *,
        method: str | AbstractIntegrator = StormerVerlet(),
        placement: str | AbstractPlacement = "around",
        substeps: int = 1,
        dt: float | None = None,
        symmetry: AbstractSymmetry | str | None = None,
        key: PRNGKeyArray | None = None,
    ):
        self.system = _checked_system(system)
        self.dim = system.dim
        self.integrator = _checked_method(method, system)
        self.method = self.integrator.name
        self.group = resolve_symmetry(symmetry, self.dim // 2)
        self.symmetry = None if self.group is None else self.group.spec
        if self.group is not None:
            _check_invariant(self.system, self.group)
        correction = _correction_for(correction, self.group, self.dim, key)
        self.placing = placement_named(placement)
        self.placement = self.placing.name
        self.substeps = check_int("substeps", substeps, minimum=1)
        self.dt = check_stored_dt(dt)
        self.before = correction if self.placing.before else None
        self.after = correction if self.placing.after else None

    def _with_static(self, name: str, value) -> CorrectedIntegrator:
        new = copy.copy(self)
        object.__setattr__(new, name, value)  # a static field: not a leaf for eqx.tree_at
        return new

    def with_dt(self, dt: float | None) -> CorrectedIntegrator:
        """A copy with the time step `dt` (stored in its file; see `dt`)."""
        return self._with_static("dt", check_stored_dt(dt))

    def with_substeps(self, substeps: int) -> CorrectedIntegrator:
        """A copy taking `substeps` classical steps per model step (`≥ 1`)."""
        return self._with_static("substeps", check_int("substeps", substeps, minimum=1))

    @property
    def correction(self) -> AbstractFeedForwardIntegrator:
        """The first correction (`before`, else `after`): what the model is rebuilt from."""
        return self.after if self.before is None else self.before

    # ------------------------------------------------------------------ the map

    def _time_step(self, h, dtype):
        h = step_size(h, dtype)
        if h is not None:
            return h
        if self.dt is None:
            raise ValueError(f"{type(self).__name__} needs the time step: call it with h, pass "
                             "dt to the run, or build it with dt=...")
        return jnp.asarray(self.dt, dtype)

    def _classical(self, z, h):
        """`(z, converged)` after `substeps` steps of the method of size `h / substeps`."""
        arrays, rest = eqx.partition(self.system, eqx.is_array)
        system = eqx.combine(jax.lax.stop_gradient(arrays), rest)  # never trained
        sub = h / self.substeps

        def body(_, carry):
            z, ok = carry
            z, converged = self.integrator.step(system, z, sub)
            return z, ok & converged

        return jax.lax.fori_loop(0, self.substeps, body, (z, jnp.asarray(True)))

    def _map(self, z, h, nan_on_failure: bool, task: Task | None = None):
        # in a rollout (`task`), each correction takes its own rollout step
        correct = (lambda c, x: c(x)) if task is None else (lambda c, x: c.step(x, task))
        if self.before is not None:
            z = correct(self.before, z)
        z, converged = self._classical(z, h)
        if self.integrator.implicit:  # an unconverged solve is never returned as a state
            if nan_on_failure:
                z = jnp.where(converged, z, jnp.asarray(jnp.nan, z.dtype))
            else:
                z = eqx.error_if(z, ~converged, solve_failure(self, f"the {self.method} step", h, z.dtype))
        return z if self.after is None else correct(self.after, z)

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        """One step of size `h` (else the stored `dt`) from one state `z` `(dim,)`."""
        check_point(type(self).__name__, z, self.dim)
        return self._map(z, self._time_step(h, z.dtype), False)

    # ------------------------------------------------------------------ protocol

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """One-step pairs with a time step: `dt`, else the data's, else the stored `dt`."""
        given = self.dt if dt is None and data_dt is None else dt
        return step_size_task(self, seq_length=seq_length, prediction_window=prediction_window, dt=given,
                              data_dt=data_dt, samples=Pairs())

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return require_dt(self, self.task(prediction_window=prediction_window, dt=dt),
                          "the classical step is taken with it")

    def training_samples(self, data, task: Task, *, what: str = "data"):
        """One-step pairs of a `TrajectoryData` with its `dt` (which must be the task's, if
        the task has one), or a tuple `(inputs, targets)` of arrays `(M, dim)` with the
        task's `dt`."""
        if sample_arrays(data, what) is None:
            data_dt = float(data.dt)
            if task.dt is not None and task.dt != data_dt:
                raise ValueError(f"{what} has dt={data_dt}, but the task has dt={task.dt}")
            task = Task(dt=data_dt, samples=Pairs())
        x, y, _ = point_pairs(self, data, task, what=what)
        return x, y, require_dt(self, task, "pairs given as arrays are one step of dt apart")

    def predict(self, x, task: Task):
        # an unconverged implicit solve gives NaN: a Levenberg–Marquardt trial is rejected
        return self._map(x, self._time_step(task.dt, x.dtype), True)

    def target(self, y, task: Task):
        return y

    def step(self, state, task: Task):
        return self._map(state, self._time_step(task.dt, state.dtype), task.nan_on_failure, task)

    def rollout(self, initial, n_points: int, task: Task):
        return point_rollout(self, initial, n_points, task)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity", "volume", "condition"}` of the corrected step at `points`."""
        return map_residuals(lambda s: self.step(s, task), points, self.dim)

    def describe_step(self, task: Task) -> str:
        s = self.substeps
        classical = f"{s} {self.method} steps of dt/{s}" if s > 1 else f"one {self.method} step"
        return (f"the corrected step {self.placing.formula} ({self.placement}), S = {classical} of "
                f"{type(self.system).__name__} with dt={task.dt}")
