"""What an epoch does: a first-order Optax trainer, or a damped least-squares trainer.

`fit` wraps its `optimizer` argument once, by `as_trainer`, into one of the trainers
here; from then on the pipeline asks the trainer (its initial state, one epoch, the
learning rate it exposes, its name in checkpoints) and never the optimiser's type.

Trainers are frozen dataclasses, not `eqx.Module`s: a trainer is part of the compilation
key of the training loop, and an Optax optimiser's `init` is left out of its equality
and hash. That `init` may hold run-specific constants (the default optimiser's planned
number of updates) that must not force a new compilation.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from typing import Any, Callable, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ..second_order import AbstractDampedLeastSquares
from ._losses import AbstractLoss
from ._optimizer import (
    default_learning_rate,
    default_optimizer,
    default_riemannian,
    default_update,
)


#: What an epoch reports besides its loss (an `int32` in the compiled loop): nothing,
#: an iteration that lowered no loss (a stall), or a loss at round-off (converged).
CONTINUE, STALLED, CONVERGED = 0, 1, 2


class Run(NamedTuple):
    """Everything static about a training run: part of the compilation key (hashable)."""

    task: Any
    loss: AbstractLoss
    M: int
    B: int
    n_batches: int
    trainer: AbstractTrainer
    batch_sharding: Any
    has_val: bool
    #: the `NamedSharding` of the samples when each process holds only its own
    #: (`fit(..., per_process=True)`); `None` when every device holds all of them
    data_sharding: Any = None


def batch_loss(params, static, run: Run, xb, yb, target_sq):
    model = eqx.combine(params, static)
    pred = jax.vmap(lambda s: model.predict(s, run.task))(xb)
    target = jax.vmap(lambda s: model.target(s, run.task))(yb)
    return run.loss(pred, target, target_sq)


class AbstractTrainer(abc.ABC):
    """How `fit` trains: the optimiser state, one epoch, and what the history shows."""

    #: the trainer's name in checkpoints (a resume must use the same kind of trainer)
    name: ClassVar[str]

    @abc.abstractmethod
    def init(self, params):
        """The initial optimiser state for `params`."""

    #: consecutive `STALLED` epochs after which `fit` stops (`None`: never)
    patience: ClassVar[int | None] = None
    #: what to try when the training loss becomes non-finite (ends the error message)
    non_finite_hint: ClassVar[str] = "lower the learning rate, or check the data for outliers"

    @abc.abstractmethod
    def epoch(self, params, state, epoch, key, x, y, target_sq, static, run: Run):
        """One epoch (traced): `(params, state, loss, signal)`, the loss being the
        epoch's training loss and `signal` one of `CONTINUE`, `STALLED`, `CONVERGED`."""

    @abc.abstractmethod
    def learning_rate(self, state):
        """The learning rate held in `state` (traced), or `None` when there is none to
        read in the compiled loop (decided at trace time, so it costs nothing then)."""

    @abc.abstractmethod
    def history_learning_rate(self, state, n_batches: int) -> Callable | None:
        """`rate(epochs)`: the learning rates at the start of the given epochs, computed
        on the host, or `None` when the compiled loop reads them (`learning_rate`)."""

    @abc.abstractmethod
    def check(self, model, loss: AbstractLoss, on_manifold: bool) -> None:
        """Refuse a model or a loss that this trainer cannot train (`ValueError`)."""

    def replan(self, state, total_updates: int):
        """`state` planned for `total_updates` optimiser updates in all (a run whose
        epochs follow from its time budget); unchanged for a trainer without a plan."""
        return state


@dataclasses.dataclass(frozen=True)
class _AbstractFirstOrderTrainer(AbstractTrainer):
    """An Optax `GradientTransformation`: an epoch is a `lax.scan` over the shuffled
    minibatches with the optimiser's update inside."""

    update: Callable
    #: the optimiser takes Optax's extra arguments (`value`, `grad`, `value_fn`): e.g.
    #: `optax.lbfgs()`, whose line search evaluates the loss at trial parameters
    extra_args: bool
    init_fn: Callable = dataclasses.field(compare=False)

    name: ClassVar[str] = "first_order"

    def init(self, params):
        return self.init_fn(params)

    def check(self, model, loss, on_manifold):
        pass

    def _step(self, params, state, xb, yb, target_sq, static, run):
        """One minibatch: the loss and the optimiser's update."""
        if run.batch_sharding is not None:  # data parallel: shard the batch axis
            xb = jax.lax.with_sharding_constraint(xb, run.batch_sharding)
            yb = jax.lax.with_sharding_constraint(yb, run.batch_sharding)
        value, grads = jax.value_and_grad(batch_loss)(params, static, run, xb, yb, target_sq)
        # Optax is not written for strict dtype promotion; trace its update in the
        # standard mode (parameters keep their dtype through apply_updates).
        with jax.numpy_dtype_promotion("standard"):
            if self.extra_args:  # the minibatch's loss, for a line search (optax.lbfgs)
                updates, state = self.update(
                    grads, state, params, value=value, grad=grads,
                    value_fn=lambda q: batch_loss(q, static, run, xb, yb, target_sq))
            else:
                updates, state = self.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return params, state, value

    def epoch(self, params, state, epoch, key, x, y, target_sq, static, run):
        M, B, n_batches = run.M, run.B, run.n_batches

        def train_step(carry, batch):
            p, s, value = self._step(*carry, *batch, target_sq, static, run)
            return (p, s), value

        going = jnp.asarray(CONTINUE, jnp.int32)
        if n_batches == 1 and B == M:  # full batch: the order does not matter, no loop
            (params, state), loss = train_step((params, state), (x, y))
            return params, state, loss, going
        perm = jax.random.permutation(jax.random.fold_in(key, epoch), M)
        perm = perm[: n_batches * B].reshape(n_batches, B)
        batches = (jnp.take(x, perm, axis=0), jnp.take(y, perm, axis=0))
        (params, state), losses = jax.lax.scan(train_step, (params, state), batches)
        return params, state, jnp.mean(losses), going


@dataclasses.dataclass(frozen=True)
class _OptaxTrainer(_AbstractFirstOrderTrainer):
    """Any Optax optimiser; its learning rate is read where its state exposes one
    (`optax.inject_hyperparams`)."""

    def learning_rate(self, state):
        # Optax gives its states no protocol for a learning rate: the states of
        # `inject_hyperparams` (of different classes across Optax versions) hold it in a
        # `hyperparams` dict, so the state is searched for that attribute.
        for s in jax.tree_util.tree_leaves(state, is_leaf=lambda s: hasattr(s, "hyperparams")):
            hp = getattr(s, "hyperparams", None)
            if isinstance(hp, dict) and "learning_rate" in hp:
                return jnp.asarray(hp["learning_rate"], dtype=float)
        return None

    def history_learning_rate(self, state, n_batches):
        return None


@dataclasses.dataclass(frozen=True)
class _DefaultScheduleTrainer(_AbstractFirstOrderTrainer):
    """`default_optimizer`: its rate is a closed form of the update count, so the history
    computes it on the host instead of reading it out of every compiled epoch."""

    def learning_rate(self, state):
        return None

    def replan(self, state, total_updates):
        total = jnp.asarray(min(int(total_updates), 2**31 - 1), state.total.dtype)
        if len(jax.devices()) > 1:  # placed as the state was (another placement recompiles)
            total = jax.device_put(total, state.total.sharding)
        return state._replace(total=total)

    def history_learning_rate(self, state, n_batches):
        planned = int(state.total)  # the schedule the state was planned with (resumes too)
        return lambda epochs: default_learning_rate(epochs * n_batches, planned)


@dataclasses.dataclass(frozen=True)
class _DampedLeastSquaresTrainer(AbstractTrainer):
    """A `LevenbergMarquardt` or `GaussNewton` solver: an epoch is one iteration on all
    samples (or the solver's random subset); the loss reported is the training loss
    after it, on all samples.

    A step whose training loss on all samples (or whose parameters) is not finite —
    possible when the step was judged on a random subset, or a model's prediction
    fails at samples the trials did not see — is refused like a rejected trial: the
    parameters stay, λ rises (`AbstractDampedLeastSquares.refuse`). An epoch reports a
    stall when the solver says no further progress is expected (`LMInfo.stalled`, or
    `stalled_after_refusal` for a refused step: λ at its ceiling), and convergence when
    its relative loss is at round-off (at most the dtype's machine epsilon)."""

    solver: AbstractDampedLeastSquares  # with patience=None: the compiled loop never reads it
    #: the solver's `patience`, read by `fit` on the host (not part of the compilation key)
    stall_patience: int | None = dataclasses.field(default=None, compare=False)

    # the name checkpoints have always stored for both solvers, so that theirs resume
    name: ClassVar[str] = "LevenbergMarquardt"
    non_finite_hint: ClassVar[str] = (
        "the initial parameters give a non-finite loss; start from another initialisation "
        "or check the data for outliers")

    @property
    def patience(self):
        return self.stall_patience

    def init(self, params):
        return self.solver.init(params)

    def epoch(self, params, state, epoch, key, x, y, target_sq, static, run):
        def residual(p, xi, yi):
            model = eqx.combine(p, static)
            return (model.predict(xi, run.task) - model.target(yi, run.task)).ravel()

        # samples sharded across processes: JᵀJ and Jᵀr per shard, one all-reduce
        new_params, new_state, info = self.solver.step(params, state, residual, x, y,
                                                       jax.random.fold_in(key, epoch),
                                                       sharding=run.data_sharding)
        new_loss = batch_loss(new_params, static, run, x, y, target_sq)
        ok = jnp.isfinite(new_loss) & _all_finite(new_params)
        params, state, loss = jax.lax.cond(
            ok, lambda: (new_params, new_state, new_loss),
            lambda: (params, self.solver.refuse(state, new_state),
                     batch_loss(params, static, run, x, y, target_sq)))
        at_round_off = ok & (info.new_relative_loss <= jnp.finfo(info.new_relative_loss.dtype).eps)
        stalled = jnp.where(ok, info.stalled, self.solver.stalled_after_refusal(state))
        signal = jnp.where(at_round_off, CONVERGED,
                           jnp.where(stalled, STALLED, CONTINUE)).astype(jnp.int32)
        return params, state, loss, signal

    def learning_rate(self, state):
        return None

    def history_learning_rate(self, state, n_batches):
        return None

    def check(self, model, loss, on_manifold):
        if on_manifold:
            raise ValueError(
                f"{type(model).__name__} has manifold parameters (Stiefel/Grassmann "
                "matrices), which a LevenbergMarquardt step would move off their manifold; "
                "train it with optimizer=None (Riemannian Adam) or "
                "geomlearn.manifolds.riemannian_adam"
            )
        if not loss.sum_of_squares:
            raise ValueError(
                "a LevenbergMarquardt optimizer minimises a sum of squares: use "
                "loss='relative' or 'mse' (both have its minimiser), not a custom loss "
                "callable"
            )


def _all_finite(tree):
    leaves = [jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(tree)
              if jnp.issubdtype(a.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


# ------------------------------------------------------- the optimiser, wrapped once


@functools.singledispatch
def as_trainer(optimizer, *, on_manifold: bool, total_updates: int) -> AbstractTrainer:
    """The trainer for `fit`'s `optimizer` argument (`total_updates`: the planned number of
    optimiser updates, for the default schedule)."""
    raise TypeError(
        "optimizer must be an optax.GradientTransformation or a "
        f"geomlearn.LevenbergMarquardt, got {type(optimizer).__name__}"
    )


@as_trainer.register
def _(optimizer: optax.GradientTransformation, *, on_manifold, total_updates):
    if optimizer.update is default_update:  # `default_optimizer(...)` passed explicitly
        return _DefaultScheduleTrainer(optimizer.update, False, optimizer.init)
    extra = isinstance(optimizer, optax.GradientTransformationExtraArgs)
    return _OptaxTrainer(optimizer.update, extra, optimizer.init)


@as_trainer.register
def _(optimizer: AbstractDampedLeastSquares, *, on_manifold, total_updates):
    fields = {f.name: getattr(optimizer, f.name) for f in dataclasses.fields(optimizer) if f.init}
    compiled = type(optimizer)(**{**fields, "patience": None})  # one compile for any patience
    return _DampedLeastSquaresTrainer(compiled, optimizer.patience)


@as_trainer.register(type(None))
def _(optimizer, *, on_manifold, total_updates):
    if on_manifold:  # the same decay 1e-2 → 1e-6, Riemannian on manifold leaves
        return as_trainer(default_riemannian(total_updates), on_manifold=on_manifold,
                           total_updates=total_updates)
    return as_trainer(default_optimizer(total_updates), on_manifold=on_manifold,
                       total_updates=total_updates)
