r"""How the command line builds and trains a model: the `arguments` and `plan` policies of a
`ModelSpec`.

`arguments` says how the constructor is called for data of dimension `dim`
(`build`). `plan` says how the built model is prepared from the training data
(`prepare`), which trainer it gets (`trainer`: `(optimizer, epochs, time_budget,
description)`), how it is fitted (`fit`: `(model, history)`) and what its loss is
compared with (`start_loss`: the untrained model's; `identity_loss`: the do-nothing
predictor's).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ..manifolds import riemannian_adam
from ..models import Snapshots, StepResiduals
from ..reduction import initialize_from_psd
from ..training import KeepBest, fit, fit_position_last, trains_position_last
from ._policy import AbstractPolicy
from ._trainer_choice import budget_text, choose_trainer

__all__ = ["AbstractArguments", "AbstractSizing", "AsBuilt", "StateDimension", "DegreesOfFreedom",
           "ForcingWhenOdd", "LatentStride", "AbstractPlan", "IntegratorPlan", "ReductionPlan",
           "LiftPlan"]


# ------------------------------------------------------------------------ arguments


class AbstractArguments(AbstractPolicy):
    """How a model class is constructed for data of dimension `dim`; `holds_system`: the
    model holds the system it is built for (its file stores the system)."""

    holds_system: ClassVar[bool] = False

    @abc.abstractmethod
    def build(self, cls: type, dim: int, *, defaults: dict, overrides: dict, key, system=None):
        """The model `cls(...)` for states of dimension `dim`, from the spec's `defaults`
        for that dimension and the caller's `overrides` (which win); `system` is what the
        model is built for (a system, a `DataFile`, or `None` when only `dim` is known)."""


@dataclasses.dataclass(frozen=True)
class StateDimension(AbstractArguments):
    """`cls(dim, **defaults, **overrides, key=key)`: the first argument is the state
    dimension."""

    def build(self, cls, dim, *, defaults, overrides, key, system=None):
        return cls(dim, **{**defaults, **overrides}, key=key)


@dataclasses.dataclass(frozen=True)
class DegreesOfFreedom(AbstractArguments):
    r"""`cls(dim // 2, ...)`: the first argument is the number of degrees of freedom
    $n = \mathrm{dim}/2$ (a Lagrangian network of states $(q, \dot q)$)."""

    def build(self, cls, dim, *, defaults, overrides, key, system=None):
        return cls(dim // 2, **{**defaults, **overrides}, key=key)


@dataclasses.dataclass(frozen=True)
class ForcingWhenOdd(AbstractArguments):
    """`cls(dim, forcing=..., ...)`: a learned force of the time (`forcing="time"`) for an
    odd-dimensional state `(q, p, t)` of a driven system, none otherwise."""

    def build(self, cls, dim, *, defaults, overrides, key, system=None):
        forcing = "time" if dim % 2 else None
        return cls(dim, **{"forcing": forcing, **defaults, **overrides}, key=key)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LatentStride(AbstractArguments):
    """`cls(dim, ...)` of a latent integrator whose `stride` (data steps per application
    of the latent network) is `above_2` for a reduced dimension above 2, unless the
    caller gives one (measured on the Toda bump: the `toda_reduction` benchmark)."""

    above_2: int = 8

    def build(self, cls, dim, *, defaults, overrides, key, system=None):
        reduced_dim = overrides.get("reduced_dim", defaults.get("reduced_dim", 2))
        if reduced_dim > 2 and "stride" not in overrides:
            overrides = {**overrides, "stride": self.above_2}
        return cls(dim, **{**defaults, **overrides}, key=key)


class AbstractSizing(AbstractPolicy):
    """How a built model is sized by its training data, before it is prepared."""

    @abc.abstractmethod
    def for_data(self, model, data, overrides: dict):
        """The built `model` for its training `data` (a `TrajectoryData`); `overrides`
        are the caller's constructor arguments (`--model-option`), which a sizing keeps."""


@dataclasses.dataclass(frozen=True)
class AsBuilt(AbstractSizing):
    """The model as built, whatever the data."""

    def for_data(self, model, data, overrides):
        return model


# ---------------------------------------------------------------------------- plans


class AbstractPlan(AbstractPolicy):
    """How a built model is prepared, given a trainer, and fitted."""

    @abc.abstractmethod
    def prepare(self, model, task, sample, data):
        """The model to train on `data` (a `TrajectoryData`), once checked against a
        training `sample` of `task`."""

    @abc.abstractmethod
    def trainer(self, model, n_samples: int, *, name: str, batch_size=None, trainer="auto",
                epochs=None, time_budget=None):
        """`(optimizer, epochs, time_budget, description)` for `n_samples` training
        samples; `name` is the command-line name (for messages), `trainer` the
        `--trainer` choice; `epochs`/`time_budget` `None` take the plan's defaults."""

    @abc.abstractmethod
    def fit(self, model, data, *, system=None, **options):
        """`(model, history)`: the trained model; `system` is the built-in system of the
        data, `None` for a user's file; `options` go to `geomlearn.fit`."""

    def start_loss(self, model, data, *, fit_options: dict) -> float:
        r"""The relative loss $\|\hat Y - Y\|_F / \|Y\|_F$ of `model` as it is, before
        training, on its samples of `data` (the loss `fit` reports for validation data):
        what the run starts from; `inf` where a prediction is not finite."""
        x, y, task = model.training_samples(data, model.task(**fit_options), what="val_data")
        loss = float(_relative_loss(model, x, y, task))
        return loss if loss == loss else float("inf")

    @abc.abstractmethod
    def identity_loss(self, model, data, *, fit_options: dict) -> tuple[float | None, str]:
        """`(loss, why)`: the loss of the do-nothing predictor on the samples of `data`
        that the run's own loss is measured on, or `None` and why there is none (a
        model whose loss is not a prediction of later states)."""


@eqx.filter_jit
def _relative_loss(model, x, y, task):
    r"""$\|\hat Y - Y\|_F / \|Y\|_F$ of `model.predict` against `model.target` on samples."""
    guess = jax.vmap(lambda s: model.predict(s, task))(x)
    target = jax.vmap(lambda s: model.target(s, task))(y)
    return jnp.linalg.norm(guess - target) / jnp.linalg.norm(target)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IntegratorPlan(AbstractPlan):
    """An integrator: checked to have a one-step map, trained by the trainer
    `choose_trainer` picks, fitted by `geomlearn.fit`.

    **Arguments:**

    - `position_last`: with trainable position gains under Levenberg–Marquardt, train
      the model without its position signal for half the budget first
      (`geomlearn.training.fit_position_last`; measured per family: the
      `positional_encoding_cli` benchmark).
    - `step_from_data`: a model built without a time step takes the data's (a
      conformally symplectic network's step is the data's).
    """

    position_last: bool = False
    step_from_data: bool = False

    def prepare(self, model, task, sample, data):
        """Checks that the model can be iterated on a state of the samples' dtype
        (`TypeError` otherwise; a sample is not always a state: a port-Hamiltonian
        network's is a pair of states)."""
        state = jax.ShapeDtypeStruct(model.state_shape(task), sample.dtype)
        jax.eval_shape(lambda z: model.step(z, task), state)
        if self.step_from_data and model.dt is None:
            return model.with_dt(float(data.dt))
        return model

    def trainer(self, model, n_samples, *, name, batch_size=None, trainer="auto", epochs=None,
                time_budget=None):
        optimizer, epochs, budget, how = choose_trainer(
            model, n_samples, trainer=trainer, epochs=epochs, time_budget=time_budget)
        if self.position_last and trains_position_last(model, optimizer):
            how += "; position-last: the first half without the position signal"
        return optimizer, epochs, budget, how

    def fit(self, model, data, *, system=None, **options):
        if self.position_last and trains_position_last(model, options.get("optimizer")):
            return fit_position_last(model, data, **options)
        return fit(model, data, **options)

    def identity_loss(self, model, data, *, fit_options):
        r"""The relative loss $\|\hat Y - Y\|_F / \|Y\|_F$ of the identity map on the
        model's samples of `data`: each predicted state is the one its sample starts
        from ($z_{t+1} = z_t$; a window model's rows are those `pw` steps earlier, the
        window unchanged; the times of irregular data's samples dropped). `None` for
        samples whose targets are time derivatives or the input itself (nothing for the
        identity map to predict)."""
        x, y, task = model.training_samples(data, model.task(**fit_options), what="val_data")
        form = task.samples
        if form.derivatives:
            return None, (f"its {form.name} samples' targets are time derivatives, which "
                          "the identity map does not predict")
        if isinstance(form, Snapshots):
            return None, "it reconstructs its input, which the identity map does exactly"
        if isinstance(form, StepResiduals):  # the input is the pair (z_t, z_{t+1})
            x = x[:, 0]
        if form.timed:  # irregular data: the input's trailing columns are its times
            x = x[..., :model.dim]
        target = jax.vmap(lambda s: model.target(s, task))(y)
        guess = jax.vmap(lambda s: model.target(s, task))(x)
        return float(jnp.linalg.norm(guess - target) / jnp.linalg.norm(target)), ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReductionPlan(AbstractPlan):
    r"""A model reduction (an encoder/decoder pair such as the `SymplecticAutoencoder`).

    It starts from the centred PSD of the training snapshots, with the snapshot mean as
    reference state and per-block loss weights (`initialize_from_psd`), and trains the
    reconstruction with Riemannian Adam (its Stiefel matrices stay on the manifold) under
    a cosine learning-rate schedule from `learning_rate` to a hundredth of it over the
    run (`default_epochs` unless `--epochs`).
    """

    default_epochs: int = 60
    learning_rate: float = 1e-2

    def prepare(self, model, task, sample, data):
        jax.eval_shape(model, sample)  # the reconstruction of one snapshot
        return initialize_from_psd(model, data.states)

    def trainer(self, model, n_samples, *, name, batch_size=None, trainer="auto", epochs=None,
                time_budget=None):
        if trainer == "lm":
            raise ValueError(f"{name} trains with Riemannian Adam (its Stiefel "
                             "matrices must stay on the manifold); --trainer lm does not apply")
        batch_size = 256 if batch_size is None else batch_size
        epochs = self.default_epochs if epochs is None else epochs
        steps = epochs * max(1, n_samples // batch_size)  # optimizer updates (fit drops the remainder)
        schedule = optax.cosine_decay_schedule(self.learning_rate, steps, alpha=1e-2)
        return riemannian_adam(schedule), epochs, time_budget, (
            f"Riemannian Adam, cosine learning rate {self.learning_rate:g} → "
            f"{self.learning_rate * 1e-2:g}, {budget_text(epochs, time_budget, 'epochs')}, "
            "started from the centred PSD (per-block loss weights)")

    def fit(self, model, data, *, system=None, **options):
        return fit(model, data, **options)

    def identity_loss(self, model, data, *, fit_options):
        return None, "a reduction: its loss is a reconstruction's, which the identity map does exactly"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiftPlan(AbstractPlan):
    r"""A learned integrator on the codes of a manifold cotangent lift
    (`geomlearn.reduction.LiftedIntegrator`).

    `prepare` fits the lift to all training states in closed form (no training); `fit`
    trains the latent network alone on the pairs of codes `stride` steps apart and, for
    a reduced dimension above 2, `reduced_samples` pairs around them from the lift's
    reduced Hamiltonian system (`LiftedIntegrator.reduced_system_pairs`, relative
    `spread`), by the trainer `choose_trainer` picks for the latent network (the lift's
    frozen arrays stay out of Levenberg–Marquardt's normal equations).

    The iterate kept is the one whose latent rollout scores best
    (`LiftedIntegrator.latent_rollout_error`, `geomlearn.training.KeepBest`), scored every
    `select_every` iterations on the validation data or, without them, over the first
    `select_fraction` of each training trajectory's horizon: the one-step loss does not
    rank rollouts. Above 2 reduced dimensions a closed loop of codes separates nothing,
    so a network trained on the loop alone leaves it; the pairs around the loop keep it
    near (the `toda_reduction` benchmark).
    """

    reduced_samples: int = 4000
    spread: float = 0.05
    select_every: int = 5
    select_fraction: float = 0.5

    def prepare(self, model, task, sample, data):
        return model.with_lift(data)

    def trainer(self, model, n_samples, *, name, batch_size=None, trainer="auto", epochs=None,
                time_budget=None):
        extra = self._reduced_samples(model)
        optimizer, epochs, budget, how = choose_trainer(
            model.integrator_net, n_samples + extra, trainer=trainer, epochs=epochs,
            time_budget=time_budget)
        if getattr(optimizer, "subset", None) is not None:
            # every pair in each iteration: random subsets made the latent rollout worse
            # (the `toda_reduction` benchmark)
            optimizer = dataclasses.replace(optimizer, subset=None)
            how += ", every pair in each iteration"
        return optimizer, epochs, budget, (
            f"{how}; the latent GSympNet alone, on the pairs of codes {model.stride} steps "
            f"apart" + (f" and {extra} pairs around them from the reduced Hamiltonian system"
                        if extra else "") + " (the lift fitted to the training states in closed form); "
            f"the iterate kept is the one whose latent rollout follows the validation data best, "
            f"or the first {self.select_fraction:.0%} of the training trajectories "
            f"(scored every {self.select_every} iterations)")

    def _reduced_samples(self, model) -> int:
        return self.reduced_samples if model.reduced_dim > 2 else 0

    def identity_loss(self, model, data, *, fit_options):
        return None, ("a reduction: its loss is the latent network's on codes, and the iterate "
                      "kept is the one whose rollout scores best")

    def fit(self, model, data, *, system=None, val_data=None, key, **options):
        x, y = model.training_samples(data, model.task())[:2]
        if system is not None and self._reduced_samples(model):
            xr, yr = model.reduced_system_pairs(system, data, n_samples=self._reduced_samples(model),
                                                spread=self.spread, key=jax.random.fold_in(key, 1))
            x, y = jnp.concatenate([x, xr]), jnp.concatenate([y, yr])
        val = (None if val_data is None
               else model.training_samples(val_data, model.task(), what="val_data")[:2])
        if val_data is None:
            def score(net):  # the first part of the training trajectories' horizon
                return model.with_integrator(net).latent_rollout_error(data, fraction=self.select_fraction)
        else:
            def score(net):
                return model.with_integrator(net).latent_rollout_error(val_data)
        best = KeepBest(score, every=self.select_every)
        net, history = fit(model.integrator_net, (x, y), val_data=val, key=key, callback=best, **options)
        if best.model is None or len(history["epoch"]) % self.select_every:
            best.consider(net, len(history["epoch"]))  # the last epoch, if not scored yet
        history = dict(history, kept_epoch=best.epoch, kept_score=best.best,
                       kept_score_on="val_data" if val_data is not None
                       else f"first {self.select_fraction:.0%} of the training trajectories")
        return model.with_integrator(best.model), history
