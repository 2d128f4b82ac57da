r"""The shared base of integrators that step in a reduced space: encode, a learned map of
the codes, decode (`ReducedIntegrator`, `LiftedIntegrator`); and the learned map of the
codes as an option object (`LatentGSympNet`, `LatentLASympNet`, `LatentResNet` on
`AbstractLatentMap`), which a string names once, at the edge (`latent_map_named`)."""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from ..data import TrajectoryData
from ..models._base import map_residuals, scan_rollout
from ..models._integrators import AbstractPointModel
from ..models._task import Task, check_data_dim, no_options
from ..models.resnet import ResNet
from ..models.sympnet import GSympNet, LASympNet

__all__ = [
    "AbstractLatentIntegrator",
    "AbstractLatentMap",
    "LatentGSympNet",
    "LatentLASympNet",
    "LatentResNet",
    "LATENT_MAPS",
    "latent_map_named",
]


class AbstractLatentMap(eqx.Module):
    r"""Which feed-forward integrator $\mathcal{N}$ steps the codes of a latent
    integrator (an option chosen once; no fields). `name` is its spelling in a
    configuration, `network` the class it builds; `build` makes a fresh one on $\mathbb{R}^{2n}$; `sizes` reads back
    the `(n_layers, width)` a configuration records."""

    name: eqx.AbstractClassVar[str]
    network: eqx.AbstractClassVar[type]

    @abc.abstractmethod
    def build(self, dim: int, *, n_layers: int, width: int, activation, key: PRNGKeyArray,
              dtype) -> eqx.Module:
        """A fresh map of the codes, of dimension `dim`."""

    @abc.abstractmethod
    def sizes(self, net) -> tuple[int, int]:
        """`(n_layers, width)` of a map `net` this option builds."""


class LatentGSympNet(AbstractLatentMap):
    """A `GSympNet` of the codes (symplectic; `"gsympnet"`)."""

    name: ClassVar[str] = "gsympnet"
    network: ClassVar[type] = GSympNet

    def build(self, dim, *, n_layers, width, activation, key, dtype):
        return GSympNet(dim, n_layers=n_layers, width=width, activation=activation,
                        key=key, dtype=dtype)

    def sizes(self, net):
        return net.n_layers, net.width


class LatentLASympNet(AbstractLatentMap):
    """A `LASympNet` of the codes (symplectic; `"lasympnet"`;
    it has no width and ignores `width` and `activation`)."""

    name: ClassVar[str] = "lasympnet"
    network: ClassVar[type] = LASympNet

    def build(self, dim, *, n_layers, width, activation, key, dtype):
        return LASympNet(dim, n_layers=n_layers, key=key, dtype=dtype)

    def sizes(self, net):
        return net.n_layers, 16


class LatentResNet(AbstractLatentMap):
    """A `ResNet` of the codes (no structure; `"resnet"`; `n_layers`
    is its depth)."""

    name: ClassVar[str] = "resnet"
    network: ClassVar[type] = ResNet

    def build(self, dim, *, n_layers, width, activation, key, dtype):
        return ResNet(dim, width=width, depth=n_layers, activation=activation, key=key,
                      dtype=dtype)

    def sizes(self, net):
        return net.depth, net.width


#: The latent maps by name.
LATENT_MAPS: dict[str, AbstractLatentMap] = {
    m.name: m for m in (LatentGSympNet(), LatentLASympNet(), LatentResNet())
}


def latent_map_named(value) -> AbstractLatentMap:
    """The latent map `value` names (`"gsympnet"`, `"lasympnet"`, `"resnet"`) or `value`
    itself, an `AbstractLatentMap`; `ValueError` naming the choices otherwise."""
    if isinstance(value, AbstractLatentMap):
        return value
    try:
        return LATENT_MAPS[value]
    except (KeyError, TypeError):
        raise ValueError(f"integrator must be one of {tuple(LATENT_MAPS)}, got {value!r}") from None


class AbstractLatentIntegrator(AbstractPointModel):
    r"""A one-step map of full states $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$ through a
    reduced space $\mathbb{R}^{2n}$: an encoder/decoder pair $\Psi^{e,d}$ (`encode`,
    `decode`) and a learned map $\mathcal{N}$ of the codes (the field
    `integrator_net`). A subclass stores `full_dim`, `reduced_dim` and `integrator_net`,
    and says how it trains (`training_samples`, `predict`, `target`).

    The rollout encodes once, iterates $\mathcal{N}$ in the reduced space (a cost
    independent of the full dimension) and decodes; `rollout_at` decodes only the states
    asked for. `structure` is `"none"`: the full-space step has rank `reduced_dim`.
    """

    structure: ClassVar[str] = "none"
    #: Data steps per application of $\mathcal{N}$ (a family that trains on codes further
    #: apart stores its own `stride`).
    stride: ClassVar[int] = 1

    @abc.abstractmethod
    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        raise NotImplementedError

    @abc.abstractmethod
    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        raise NotImplementedError

    @property
    def dim(self) -> int:
        return self.full_dim

    @property
    def reduced_structure(self) -> str:
        """What the reduced map $\\mathcal{N}$ preserves."""
        return self.integrator_net.structure

    def __call__(self, z: Float[Array, " 2N"]) -> Float[Array, " 2N"]:
        """One step $\\Psi^d(\\mathcal{N}(\\Psi^e(z)))$ of one full state."""
        return self.decode(self.integrator_net(self.encode(z)))

    def task(self, *, seq_length=None, prediction_window=None, dt=None, data_dt=None) -> Task:
        """Takes none of the options: a one-step map of full states."""
        no_options(self, seq_length=seq_length, prediction_window=prediction_window, dt=dt)
        return Task()

    def rollout_task(self, initial_shape, *, prediction_window=None, dt=None) -> Task:
        return self.task(prediction_window=prediction_window, dt=dt)

    def step(self, state, task: Task):
        return self(state)

    def structure_residuals(self, points, task: Task) -> dict:
        """`{"symplecticity", "volume", "condition"}` of the full-space step (which claims
        nothing: its rank is `reduced_dim`)."""
        return map_residuals(self, points, self.dim)

    def reduced_rollout(self, y0: Float[Array, " 2n"], n_points: int) -> Float[Array, "T 2n"]:
        """`n_points` reduced states: `y0` and iterates of $\\mathcal{N}$ (one scan)."""
        return scan_rollout(self.integrator_net, y0, n_points)

    def rollout_at(self, initial: Float[Array, " 2N"], steps) -> Float[Array, "S 2N"]:
        """The full states after each number of steps in `steps` (a sequence of
        non-negative integers): one encode, a rollout in the reduced space to the largest
        step, and a decode of the requested states only (the online phase: its cost is
        `max(steps)` reduced steps and `len(steps)` decodes)."""
        idx = np.asarray(steps)
        if idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0:
            raise ValueError(f"steps must be a non-empty sequence of integers >= 0, got {steps!r}")
        ys = self.reduced_rollout(self.encode(initial), int(idx.max()) + 1)
        return jax.vmap(self.decode)(ys[jnp.asarray(idx)])

    def latent_rollout_error(self, data, *, fraction: float = 1.0) -> float:
        r"""The mean relative error of the latent rollout against `data` (a
        `TrajectoryData`): from the code of each trajectory's first state,
        $\mathcal{N}$ is iterated over the first `fraction` of its steps, and each
        produced state, decoded, is compared with the data's state at the same time,

        $$ \frac{1}{J}\sum_{j} \frac{\lVert \Psi^d(\mathcal{N}^j(\Psi^e(x_0))) -
        x_{jS}\rVert}{\lVert x_{jS}\rVert}, $$

        averaged over every produced state $j = 0, 1, \dots$ of every trajectory ($S$ the
        data steps per application: `stride`, or 1). `inf` when the rollout is not
        finite. The same measure as `evaluate_reduction`'s `latent_error_mean` on one
        trajectory with `fraction = 1`; a score for
        [`KeepBest`][geomlearn.training.KeepBest]."""
        f = float(fraction)
        if not 0.0 < f <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        if not isinstance(data, TrajectoryData):
            raise TypeError(f"data must be a TrajectoryData, got {type(data).__name__}")
        check_data_dim(self, data, "data")
        S = int(self.stride)
        rows = []
        for t in data.trajectories:
            n_apply = int(f * (t.shape[0] - 1)) // S
            if n_apply >= 1:
                rows.append(_latent_rows(self, t[0], t[: n_apply * S + 1: S]))
        if not rows:
            raise ValueError(f"data: no trajectory has {S} steps (one application) within the "
                             f"first fraction={f} of its length (lengths {data.lengths})")
        value = float(jnp.mean(jnp.concatenate(rows)))
        return value if np.isfinite(value) else float("inf")

    def rollout(self, initial, n_points: int, task: Task):
        ys = self.reduced_rollout(self.encode(initial), n_points)
        return jax.vmap(self.decode)(ys)


@eqx.filter_jit
def _latent_rows(model, x0, targets):
    """Relative errors of the decoded latent rollout from `x0` against `targets`, one per
    row (compiled once per model structure: `KeepBest` calls it every few epochs)."""
    Z = jax.vmap(model.decode)(model.reduced_rollout(model.encode(x0), targets.shape[0]))
    return jnp.linalg.norm(Z - targets, axis=-1) / jnp.linalg.norm(targets, axis=-1)
