r"""How the command line uses a model reduction: `ReductionSpec` (an encoder/decoder pair
such as the symplectic autoencoder) and `LiftSpec` (the manifold cotangent lift with a
learned latent integrator). See `geomlearn.cli._specs` for what a spec is."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax

from ..evaluation import check_immersion, evaluate_reduction
from ..manifolds import riemannian_adam
from ..models import initialize_from_psd
from ..plotting import reduction_report
from ..training import KeepBest, choose_trainer, fit
from ._specs import ModelSpec

__all__ = ["ReductionSpec", "LiftSpec"]


class ReductionSpec(ModelSpec):
    r"""A model reduction (an encoder/decoder pair, not an integrator), e.g. the
    `SymplecticAutoencoder`.

    The command line starts it from the centred PSD of the training snapshots, with the
    snapshot mean as reference state and per-block loss weights on the centred positions
    and momenta (`initialize_from_psd`), trains the reconstruction with Riemannian Adam under a
    cosine learning-rate schedule over the run (`epochs` default `default_epochs`),
    evaluates the projection and reduction errors (over the whole horizon too, and for the
    plain and the centred PSD of the same size), the code-loop action and the online
    speed-up against the full solution (`geomlearn.evaluation.evaluate_reduction`), draws the wave packet of the full and the
    reduced model (`geomlearn.plotting.reduction_report`), and checks that the decoder is
    a symplectic immersion, $(D\Psi^d)^\top\mathbb{J}_{2N}D\Psi^d = \mathbb{J}_{2n}$
    (`geomlearn.evaluation.check_immersion`).
    """

    default_epochs: int = 60
    learning_rate: float = 1e-2

    def prepare(self, model, task, sample, data):
        jax.eval_shape(model, sample)  # the reconstruction of one snapshot
        return initialize_from_psd(model, data.states)

    def trainer(self, model, n_samples: int, *, batch_size=256, trainer="auto", epochs=None,
                time_budget=None):
        if trainer == "lm":
            raise ValueError(f"{self.name} trains with Riemannian Adam (its Stiefel "
                             "matrices must stay on the manifold); --trainer lm does not apply")
        epochs = self.default_epochs if epochs is None else epochs
        steps = epochs * max(1, n_samples // batch_size)  # optimizer updates (fit drops the remainder)
        schedule = optax.cosine_decay_schedule(self.learning_rate, steps, alpha=1e-2)
        return riemannian_adam(schedule), epochs, time_budget, (
            f"Riemannian Adam, cosine learning rate {self.learning_rate:g} → "
            f"{self.learning_rate * 1e-2:g}, {epochs} epochs, started from the centred PSD "
            "(per-block loss weights)")

    def evaluate(self, model, system, data, **options):
        return evaluate_reduction(model, system, data)

    def report(self, path, *, run, history, evaluation) -> bool:
        return reduction_report(path, history=history, evaluation=evaluation,
                                loss_name=run.get("loss", "relative"))

    def check(self, model, points, *, prediction_window=None, dt=None):
        return check_immersion(model, points)


@dataclasses.dataclass(frozen=True)
class LiftSpec(ReductionSpec):
    r"""A learned integrator on the codes of a manifold cotangent lift
    (`geomlearn.models.LiftedIntegrator`).

    `prepare` fits the lift to all training states in closed form (no training); `fit`
    trains the latent GSympNet alone on the pairs of codes `stride` steps apart and, for
    `reduced_dim` above 2, `reduced_samples` pairs around them from the lift's reduced
    Hamiltonian system (`LiftedIntegrator.reduced_system_pairs`, `spread` 5 %), by the
    trainer `geomlearn.training.choose_trainer` picks for it (Levenberg–Marquardt: the
    lift's frozen arrays stay out of its normal equations); the evaluation is the
    reduction's (`ReductionSpec`) with the latent rollout's error and speed-up.

    The iterate kept is not the last one: every `select_every` iterations the latent
    rollout is scored (`LiftedIntegrator.latent_rollout_error`) on the validation data
    or, without them, over the first `select_fraction` (half) of each training
    trajectory's horizon, and the best-scoring network is kept
    (`geomlearn.training.KeepBest`; `history["kept_epoch"]` says which). The one-step loss
    does not rank rollouts: on the Toda bump at 2n = 4 the latent rollout's mean error
    swings between 0.03 and 0.7 from one iteration to the next while the loss falls
    (`benchmarks/RESULTS.md`).

    Why only above 2: in the plane the codes' closed loop is nearly invariant under the
    learned area-preserving map and separates its inside from its outside, so nearby
    codes cannot wander far; in $\mathbb{R}^{2n}$, $2n \ge 4$, a loop separates nothing,
    and trained on the loop alone the network's rollout leaves it and diverges. Measured
    on the Toda bump over three seeds (`benchmarks/RESULTS.md`): at 2n = 2 the latent
    rollout's mean error is 0.032–0.037 without the pairs around the loop and 0.033–0.051
    with them; at 2n = 4 they turn a divergence into 0.043–0.078.
    """

    reduced_samples: int = 4000
    spread: float = 0.05
    select_every: int = 5
    select_fraction: float = 0.5
    stride_above_2: int = 8

    def build(self, dim: int, *, key, **overrides):
        """The spec's model; for `reduced_dim` above 2 with `stride_above_2` data steps
        per application unless a stride is given. Measured on the Toda bump over three
        seeds (`benchmarks/RESULTS.md`): 16 steps are as accurate as 8 over the data's
        horizon at 2n = 2 and 4 and twice as fast, and at 2n = 2 the codes of 100,000
        latent applications stay in the data's range; at 2n = 4 with 16 steps one seed's
        codes left it after 909 applications (with 8, none of three within 100,000)."""
        reduced_dim = overrides.get("reduced_dim", self.defaults_for(dim).get("reduced_dim", 2))
        if reduced_dim > 2 and "stride" not in overrides:
            overrides = {**overrides, "stride": self.stride_above_2}
        return super().build(dim, key=key, **overrides)

    def prepare(self, model, task, sample, data):
        return model.with_lift(data)

    def trainer(self, model, n_samples: int, *, batch_size=None, **options):
        extra = self._reduced_samples(model)
        optimizer, epochs, budget, how = choose_trainer(
            model.integrator_net, n_samples + extra, **options)
        if getattr(optimizer, "subset", None) is not None:
            # every pair in each iteration: with random subsets of 4096 of the ~12,000 pairs
            # (2n = 2, with the reduced-system pairs) the latent network's rollout error was
            # 4.5x the full batch's
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
