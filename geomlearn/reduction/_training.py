r"""`fit_autoencoder`: train a symplectic autoencoder on its reconstruction and, given the
full system, on its reduced dynamics (the latent vector-field term); published by
`geomlearn.training`."""

from __future__ import annotations

import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._typing import Array
from ..models import AbstractPointModel
from ..systems import AbstractSystem
from ..training._fit import fit
from ._autoencoder import SymplecticAutoencoder
from ._reduced_system import ReducedHamiltonianSystem

__all__ = ["fit_autoencoder"]


def _frozen(module):
    """`module` with a stopped gradient into its arrays (the full system's constants)."""
    params, static = eqx.partition(module, eqx.is_inexact_array)
    return eqx.combine(jax.lax.stop_gradient(params), static)


def _code_velocity(autoencoder, system, x):
    r"""`(y, ẏ)`: the code $\Psi^e(x)$ and its time derivative along the full flow,
    $D\Psi^e(x)\,X_H(x)$ (one Jacobian–vector product)."""
    return jax.jvp(autoencoder.encode, (x,), (system.vector_field(x),))


class _FieldObjective(AbstractPointModel):
    """What `fit` trains for `fit_autoencoder`: the autoencoder's weighted reconstruction
    followed by the scaled latent field residual, against the weighted state and zeros.
    Only the training half of the model protocol is its own (`predict`, `target`);
    the rest is the autoencoder's."""

    structure: ClassVar[str] = "symplectic"  # the decoder's immersion, as the autoencoder's
    autoencoder: SymplecticAutoencoder
    system: eqx.Module
    field_scale: Array
    dim: int = eqx.field(static=True)

    def __init__(self, autoencoder, system, field_scale):
        self.autoencoder, self.system, self.field_scale = autoencoder, system, field_scale
        self.dim = autoencoder.dim

    def rollout_task(self, initial_shape, **options):
        return self.autoencoder.rollout_task(initial_shape, **options)

    def step(self, state, task):
        return self.autoencoder.step(state, task)

    def rollout(self, initial, n_points: int, task):
        return self.autoencoder.rollout(initial, n_points, task)

    def structure_residuals(self, points, task) -> dict:
        return self.autoencoder.structure_residuals(points, task)

    def describe_step(self, task) -> str:
        return self.autoencoder.describe_step(task)

    def task(self, **options):
        return self.autoencoder.task(**options)

    def training_samples(self, data, task, *, what: str = "data"):
        return self.autoencoder.training_samples(data, task, what=what)

    def predict(self, x, task):
        ae, system = self.autoencoder, _frozen(self.system)
        y, ydot = _code_velocity(ae, system, x)
        field = ReducedHamiltonianSystem(system, ae).vector_field(y) - ydot
        scale = jax.lax.stop_gradient(self.field_scale).astype(field.dtype)
        # ae.target(z) is the weighted, centred state w ⊙ (z - x̄): of Ψ_dec(y) here, the
        # autoencoder's own prediction (its `predict`) without encoding twice
        return jnp.concatenate([ae.target(ae.decode(y), task), scale * field])

    def target(self, y, task):
        t = self.autoencoder.target(y, task)
        return jnp.concatenate([t, jnp.zeros(self.autoencoder.reduced_dim, t.dtype)])


def fit_autoencoder(autoencoder: SymplecticAutoencoder, data, *, system=None,
                    field_weight: float = 1.0, key, **fit_options):
    r"""Train a [`SymplecticAutoencoder`][geomlearn.reduction.SymplecticAutoencoder] on its
    reconstruction and on its **reduced dynamics**; `(autoencoder, history)`.

    A reconstruction loss asks $\Psi^d(\Psi^e(x)) \approx x$ and nothing of the reduced
    Hamiltonian system $\dot y = \mathbb{J}_{2n}\nabla(H\circ\Psi^d)(y)$: an autoencoder
    that reconstructs the data well can still carry a reduced flow that leaves them.
    Given the full `system`, this adds the **latent vector-field term**, the mismatch
    between the reduced field at a state's code and the code's velocity along the flow,

    $$ r(x) = \mathbb{J}_{2n}\nabla(H\circ\Psi^d)(\Psi^e(x)) - D\Psi^e(x)\,X_H(x), $$

    so that with the default relative loss, on the whole data set,

    $$ \ell^2 \approx \frac{\sum_i \lVert w\odot(\Psi^d(\Psi^e(x_i)) - x_i)\rVert^2}
    {\sum_i \lVert w\odot(x_i - \bar x)\rVert^2} + \lambda\,
    \frac{\sum_i \lVert r(x_i)\rVert^2}{\sum_i \lVert D\Psi^e(x_i)\,X_H(x_i)\rVert^2} $$

    — the squared relative reconstruction error (the autoencoder's reference state
    $\bar x$ and per-block weights $w$, see `initialize_from_psd`) plus $\lambda$ =
    `field_weight` times the squared latent field error
    (`geomlearn.reduction.latent_vector_field_error`). The field's scale
    $\sum_i\lVert D\Psi^e X_H\rVert^2$ is measured once, with the autoencoder given, on
    the training samples (it is a constant of the objective, not trained).

    **Arguments:** `autoencoder`; `data` (a `TrajectoryData` or a tuple `(X, X)` of
    snapshots `(M, full_dim)`, as for `fit`); `system`: the full Hamiltonian system
    ($X_H$ and $H$; `None`: the reconstruction alone, which is `fit(autoencoder, data)`);
    `field_weight` $\lambda \ge 0$ (default 1; 0: the reconstruction alone); `key`; every
    other option is `fit`'s (`epochs`, `batch_size`, `optimizer` — by default Riemannian
    Adam, which keeps the Stiefel matrices on their manifold —, `val_data`, `callback`,
    `time_budget`, …) except `checkpoint` with the field term (the objective is not a
    model that can be saved; save the returned autoencoder).

    The field is a gradient and is differentiated again, so an epoch costs more than an
    epoch of the reconstruction alone.
    """
    lam = float(field_weight)
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"field_weight must be finite and >= 0, got {field_weight!r}")
    if not isinstance(autoencoder, SymplecticAutoencoder):
        raise TypeError(f"autoencoder must be a SymplecticAutoencoder, got {type(autoencoder).__name__}")
    if system is None or lam == 0.0:
        return fit(autoencoder, data, key=key, **fit_options)
    if not isinstance(system, AbstractSystem):
        raise TypeError(f"system must be a geomlearn.systems.AbstractSystem, got "
                        f"{type(system).__name__}")
    if system.dim != autoencoder.full_dim:
        raise ValueError(f"system must have dim={autoencoder.full_dim} like the autoencoder, got "
                         f"{type(system).__name__} with dim={system.dim}")
    if fit_options.get("checkpoint") is not None:
        raise ValueError("checkpoint: the field objective cannot be checkpointed; train without "
                         "a checkpoint (or with field_weight=0) and save the returned autoencoder")
    task = autoencoder.task()
    x = autoencoder.training_samples(data, task)[0]
    targets = jax.vmap(lambda z: autoencoder.target(z, task))(x)
    _, ydot = jax.jit(jax.vmap(lambda z: _code_velocity(autoencoder, system, z)))(x)
    scale = jnp.sqrt(lam * jnp.sum(targets ** 2) / jnp.sum(ydot ** 2))
    if not bool(jnp.isfinite(scale)) or float(scale) == 0.0:
        raise ValueError("the codes do not move along the full flow on these data (their "
                         "velocity D Psi_enc X_H is zero or not finite): no field term to fit")
    objective = _FieldObjective(autoencoder, system, scale)
    trained, history = fit(objective, data, key=key, **fit_options)
    return trained.autoencoder, dict(history, field_weight=lam)
