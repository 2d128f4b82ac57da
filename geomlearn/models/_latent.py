r"""The shared base of integrators that step in a reduced space: encode, a learned map of
the codes, decode (`ReducedIntegrator`, `LiftedIntegrator`)."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from ._base import map_residuals, scan_rollout
from ._integrators import AbstractPointModel
from ._task import Task, no_options

__all__ = ["AbstractLatentIntegrator"]


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

    def rollout(self, initial, n_points: int, task: Task):
        ys = self.reduced_rollout(self.encode(initial), n_points)
        return jax.vmap(self.decode)(ys)
