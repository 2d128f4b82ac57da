r"""The state a damped least-squares solver carries between iterations, and what one
iteration reports: `LMState` and `LMInfo`."""

from __future__ import annotations

from typing import NamedTuple

import jax

__all__ = ["LMInfo", "LMState"]


class LMState(NamedTuple):
    r"""State of a damped least-squares solver between iterations (a pytree of arrays:
    checkpointable).

    - `damping`: the current $\lambda$ (a scalar in the parameters' dtype; 0 for
      Gauss–Newton).
    - `steps`: iterations done (`int32`).
    - `accepted`: iterations whose step was accepted (`int32`).
    - `rejected`: rejected trial steps, over all iterations (`int32`).
    - `scaling`: Levenberg–Marquardt with Marquardt's scaling: the running maximum of
      $\operatorname{diag}(J^\top J)$ over the iterations (Moré's), one entry per
      parameter; `None` for Gauss–Newton and $D = I$.
    """

    damping: jax.Array
    steps: jax.Array
    accepted: jax.Array
    rejected: jax.Array
    scaling: jax.Array | None = None


class LMInfo(NamedTuple):
    r"""What one `step` did (scalars; all over the same samples).

    - `loss`: $S(\theta) = \sum r^2$ before the step.
    - `new_loss`: $S$ after the step ($=$ `loss` when no trial was accepted).
    - `relative_loss`, `new_relative_loss`: $\sqrt{S} / \sqrt{\sum y^2}$ before and after,
      the relative loss of `geomlearn.fit` on those samples (when `y` holds exactly the
      targets that the residual compares with).
    - `target_sum_squares`: $\sum y^2$ over those samples.
    - `damping`: the $\lambda$ of the last trial step (0 for Gauss–Newton).
    - `step_scale`: the factor the Gauss–Newton step was scaled by (1 for LM).
    - `accepted`: whether a trial step was accepted.
    - `tries`: trial steps evaluated (`1 … max_tries`).
    - `n_samples`: samples used (`M`, or `subset`).
    - `shard_samples`: the samples each shard of the sample axis accumulated into
      $J^\top J$ (`int32`, one entry per shard: `(n_samples,)` without sharding; with
      `step(..., sharding=...)` one per device along the sample axis, each process
      holding its own entries) — what the memory and the work per device scale with.
    - `stalled`: no further progress is expected: no trial lowered $S$ (LM: with
      $\lambda$ raised `max_tries − 1` times by `increase`) and, for LM, the last trial
      had $\lambda$ at `max_damping` or a step below round-off, $\|\delta\| \le
      \varepsilon\,\|\theta\|$ (a larger $\lambda$ cannot help); Gauss–Newton: all
      halvings failed. An iteration whose trials failed at a smaller $\lambda$ is not a
      stall: the next one starts from a larger $\lambda$. `geomlearn.fit` stops after
      `patience` consecutive stalled iterations.
    """

    loss: jax.Array
    new_loss: jax.Array
    relative_loss: jax.Array
    new_relative_loss: jax.Array
    target_sum_squares: jax.Array
    damping: jax.Array
    step_scale: jax.Array
    accepted: jax.Array
    tries: jax.Array
    n_samples: jax.Array
    stalled: jax.Array
    shard_samples: jax.Array
