r"""The reference solution a long-horizon rollout is compared with, chunk by chunk.

`long_horizon` streams the model's rollout in chunks of `C` states; the valid time needs
the reference $r_t$ at the same steps. Two sources give it:

- `IntegratedReference`: the system integrated alongside the model, in the same scan,
  by a reference integrator at the data's $\Delta t$, from the last given state;
- `StoredReference`: trajectories the user measured or computed (`--reference FILE`),
  $r_t$ their state at step $t$ for $t < L$, their length; beyond it there is no
  reference, so no valid time is measured there (the step is flagged, as a failed
  reference step is).

Each source is an `eqx.Module` whose `start(states, n_init, padded)` gives the per-
trajectory scan state and whose `chunk(rstate, t)` gives `(r_t (C, d), ok (C,),
rstate)` for the steps `t (C,)` of one chunk of one trajectory (under `vmap`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["IntegratedReference", "StoredReference"]


class IntegratedReference(eqx.Module):
    """The system integrated by `integrator` at the step `dt`, alongside the model."""

    system: object
    integrator: object
    dt: jax.Array

    @property
    def name(self) -> str:
        return self.integrator.name

    def start(self, states, n_init: int, padded: int):
        """Per trajectory: the last given state and a flag that stays true while every
        reference step converged and stayed finite."""
        del padded
        return states[:, n_init - 1], jnp.ones(states.shape[0], bool)

    def chunk(self, rstate, t):
        def body(carry, _):
            r, ok = carry
            r, converged = self.integrator.step(self.system, r, self.dt)
            ok = ok & converged & jnp.all(jnp.isfinite(r))
            return (r, ok), (r, ok)

        rstate, (rs, oks) = jax.lax.scan(body, rstate, None, length=t.shape[0])
        return rs, oks, rstate


class StoredReference(eqx.Module):
    """The given trajectories `(B, L, d)` themselves: $r_t$ is the state of step `t`,
    for `t < L`; later steps have no reference (`ok` false)."""

    name = "the given trajectories"

    def start(self, states, n_init: int, padded: int):
        """Per trajectory: its states padded (with NaN) or cut to `padded` steps."""
        del n_init
        L = states.shape[1]
        if L >= padded:
            return states[:, :padded]
        fill = jnp.full((states.shape[0], padded - L, states.shape[2]), jnp.nan, states.dtype)
        return jnp.concatenate([states, fill], axis=1)

    def chunk(self, rstate, t):
        ref = rstate[t]
        return ref, jnp.all(jnp.isfinite(ref), axis=-1), rstate
