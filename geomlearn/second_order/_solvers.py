r"""Damped least squares, one iteration per `step`: `LevenbergMarquardt` and `GaussNewton`.

Both share the iteration of `AbstractDampedLeastSquares.step`: the normal equations
$A\,\delta = -g$ at the current parameters, then trial steps until one lowers
$S = \sum_i \|r_i\|^2$ (at most `max_tries`). They differ in three places, which the two
final classes implement: how a trial step is solved, how the next trial after a
rejection differs (a raised $\lambda$, or a halved step) and how $\lambda$ is carried to
the next iteration.
"""

from __future__ import annotations

import abc
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx

from ._normal_equations import (
    check_jacobian,
    check_samples,
    check_sharded,
    compute_dtype,
    flat_residual,
    normal_equations_flat,
    over_shards,
    ravel,
    sum_squares_flat,
)
from ._state import LMInfo, LMState

__all__ = [
    "AbstractDampedLeastSquares",
    "GAUSS_NEWTON_RCOND",
    "GaussNewton",
    "LevenbergMarquardt",
    "LMInfo",
    "LMState",
]

GAUSS_NEWTON_RCOND = 1e-6
r"""The default singular-value cutoff of `GaussNewton` (relative, on $J^\top J$)."""


def _check_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


class AbstractDampedLeastSquares(eqx.Module):
    r"""A method for $\min_\theta \sum_i \|r_i(\theta)\|^2$, one iteration per `step`.

    A frozen, hashable configuration (all fields static); the iteration state is an
    `LMState`. Memory: $P^2 + \text{chunk\_size}\cdot R\cdot P$ numbers besides the data
    (see `geomlearn.second_order`). The finals are `LevenbergMarquardt` and `GaussNewton`.
    """

    damping: eqx.AbstractVar[float]
    max_tries: eqx.AbstractVar[int]
    chunk_size: eqx.AbstractVar[int]
    subset: eqx.AbstractVar[int | None]
    jacobian: eqx.AbstractVar[str]
    max_params: eqx.AbstractVar[int]
    patience: eqx.AbstractVar[int | None]

    def __check_init__(self):
        _check_int("max_tries", self.max_tries)
        if self.patience is not None:
            _check_int("patience", self.patience)
        _check_int("chunk_size", self.chunk_size)
        _check_int("max_params", self.max_params)
        if self.subset is not None:
            _check_int("subset", self.subset)
        check_jacobian(self.jacobian)

    # ------------------------------------------------ what the final classes decide

    @property
    @abc.abstractmethod
    def gauss_newton(self) -> bool:
        """Whether this is the undamped (Gauss–Newton) method."""

    @abc.abstractmethod
    def _trial_solver(self, A, g, scaling, dtype) -> Callable:
        """`solve(lam, scale) -> δ`: the trial step for damping `lam` and step scale
        `scale`, from the normal matrix `A`, gradient `g` and the running maximum
        `scaling` of its diagonal (`None` where the method keeps none)."""

    @abc.abstractmethod
    def _retry(self, lam, scale, dtype):
        """`(lam, scale)` of the next trial after a rejected one."""

    @abc.abstractmethod
    def _next_damping(self, lam_used, accepted, lam0, dtype):
        """The $\\lambda$ the next iteration starts from."""

    @abc.abstractmethod
    def _stalled(self, lam_used, accepted, tiny, dtype):
        """Whether no further progress is expected (see `LMInfo.stalled`); `tiny`: the
        last trial step was below round-off relative to the parameters."""

    @property
    def _keeps_scaling(self) -> bool:
        """Whether the state keeps the running maximum of diag(A) (`LMState.scaling`)."""
        return False

    # ----------------------------------------------------------------- shared

    def refuse(self, before: LMState, after: LMState) -> LMState:
        """The state after an iteration whose accepted step the caller refuses (e.g. a
        step judged on a random subset that is not finite on all samples): the step
        counts as one more rejected trial, and λ moves as after a failed
        iteration."""
        dtype = before.damping.dtype
        no = jnp.zeros((), bool)
        return LMState(
            damping=self._next_damping(before.damping, no, before.damping, dtype).astype(dtype),
            steps=after.steps,
            accepted=before.accepted,
            rejected=after.rejected + 1,
            scaling=after.scaling,
        )

    def stalled_after_refusal(self, state: LMState) -> jax.Array:
        r"""Whether an iteration whose step the caller refused (`refuse`, giving `state`)
        is a stall (see `LMInfo.stalled`): for Levenberg–Marquardt once $\lambda$ has
        reached `max_damping`; for Gauss–Newton always (nothing is left to raise)."""
        return jnp.ones((), bool)

    def _check_size(self, n_params: int):
        if n_params == 0:
            raise ValueError("Levenberg–Marquardt needs at least one parameter, got none")
        if n_params > self.max_params:
            bytes_ = 8 * n_params * n_params
            raise ValueError(
                f"Levenberg–Marquardt needs the {n_params} × {n_params} normal matrix "
                f"(≈ {bytes_ / 2**20:.0f} MiB in float64) and its O(P³) solve; the model "
                f"has P = {n_params} parameters, more than max_params = {self.max_params}. "
                "Train a model of this size with a first-order optimiser (Adam: "
                "optax.adam, the default of geomlearn.fit), or raise max_params if you "
                "know it fits."
            )

    def init(self, params) -> LMState:
        """The initial `LMState` for `params` (a pytree of floating-point arrays).

        **Raises:** `ValueError` when the number of parameters exceeds `max_params`.
        """
        flat, _ = ravel(params)
        self._check_size(flat.size)
        if not jnp.issubdtype(flat.dtype, jnp.floating):
            raise ValueError(f"parameters must be floating-point, got dtype {flat.dtype}")
        zero = jnp.zeros((), jnp.int32)
        return LMState(
            damping=jnp.asarray(self.damping, flat.dtype),
            steps=zero,
            accepted=zero,
            rejected=zero,
            scaling=jnp.zeros_like(flat) if self._keeps_scaling else None,
        )

    def _draw_subset(self, x, y, key):
        """A fresh random subset of `subset` samples (without replacement), or all."""
        M = x.shape[0]
        if self.subset is None or self.subset >= M:
            return x, y
        if key is None:
            raise ValueError(f"subset={self.subset} needs a key, got key=None")
        idx = jax.random.choice(key, M, (self.subset,), replace=False)
        return jnp.take(x, idx, axis=0), jnp.take(y, idx, axis=0)

    def _search(self, theta, S0, lam0, solve, loss, dtype):
        r"""Trial steps until one lowers `S0` or `max_tries` were made: a `while_loop`
        returning `(tries, lam, scale, accepted, theta, S, tiny)` of the last trial (θ
        and S unchanged when none was accepted; `tiny`: its step was below round-off,
        $\|\delta\| \le \varepsilon\,\|\theta\|$)."""
        eps = jnp.asarray(jnp.finfo(dtype).eps, dtype)
        size = jnp.linalg.norm(theta)

        def cond(c):
            tries, _, _, ok, _, _, _ = c
            return (~ok) & (tries < self.max_tries)

        def body(c):
            tries, lam, scale, _, best, S_best, _ = c
            first = tries == 0
            lam_next, scale_next = self._retry(lam, scale, dtype)
            lam = jnp.where(first, lam, lam_next)
            scale = jnp.where(first, scale, scale_next)
            delta = solve(lam, scale)
            t = theta + delta
            S_t = loss(t)
            ok = jnp.isfinite(S_t) & jnp.all(jnp.isfinite(t)) & (S_t < S0)
            best = jnp.where(ok, t, best)
            S_best = jnp.where(ok, S_t, S_best)
            return tries + 1, lam, scale, ok, best, S_best, jnp.linalg.norm(delta) <= eps * size

        start = (jnp.zeros((), jnp.int32), lam0, jnp.ones((), dtype), jnp.zeros((), bool),
                 theta, S0, jnp.zeros((), bool))
        return jax.lax.while_loop(cond, body, start)

    def step(self, params, state: LMState, residual_fn: Callable, x, y, key=None, *,
             sharding=None):
        r"""One iteration (pure JAX: usable under `jit`/`lax.scan`).

        **Arguments:**

        - `params`: a pytree of floating-point arrays (e.g. the `eqx.partition`ed
          parameters of a model); mixed dtypes are computed in the highest one.
        - `state`: the `LMState` from `init` or the previous `step`.
        - `residual_fn`: `residual_fn(params, x_i, y_i)` → the residual of **one**
          sample, prediction − target (any shape; flattened).
        - `x`, `y`: inputs and targets with a leading sample axis of length $M$. The
          relative loss in `info` divides by $\sqrt{\sum y^2}$, so pass as `y` exactly
          the targets the residual compares with.
        - `key`: a PRNG key; needed only with `subset` (the subset is drawn from it).
        - `sharding` (keyword-only): `None`, or the `jax.sharding.NamedSharding` splitting
          the sample axis of `x`, `y` over devices and processes (see
          `normal_equations`). Each shard then accumulates $J^\top J$, $J^\top r$ and
          every trial's $\sum r^2$ over its own samples only; the sums are all-reduced
          (one `psum` of $P^2 + P + 1$ numbers for the normal equations, one number per
          trial) and the damped $P \times P$ solve is computed replicated, the same on
          every device. The result equals the unsharded one to round-off (only the order
          of the sums differs). Memory per device: $P^2 + c\,R\,P$ with
          $c = \min(\text{chunk\_size}, M_k)$, $M_k$ its samples. $M$ (or `subset`) must
          be a multiple of the number of shards.

        **Returns:** `(params, state, info)`: the new parameters (unchanged when no trial
        step was accepted, each leaf in its own dtype), the new `LMState` and an
        `LMInfo`.
        """
        flat, unravel = ravel(params)
        self._check_size(flat.size)
        x, y = jnp.asarray(x), jnp.asarray(y)
        check_samples(x, y)
        dtype = compute_dtype(flat, residual_fn, params, x, y)
        x, y = self._draw_subset(x, y, key)
        check_sharded(x, sharding)
        r1 = flat_residual(residual_fn, unravel, dtype)
        theta = flat.astype(dtype)
        normal = over_shards(lambda t, xs, ys: normal_equations_flat(
            r1, t, xs, ys, self.chunk_size, self.jacobian, dtype), sharding)
        sum_squares = over_shards(lambda t, xs, ys: sum_squares_flat(
            r1, t, xs, ys, self.chunk_size, dtype), sharding)
        (A, g, S0), counts = normal(theta, x, y)
        lam0 = state.damping.astype(dtype)
        scaling = None
        if state.scaling is not None:  # Moré: the running maximum of diag(A); finite entries
            d = jnp.diag(A)
            scaling = jnp.maximum(state.scaling.astype(dtype), jnp.where(jnp.isfinite(d), d, 0))
        tries, lam, scale, ok, new_theta, S1, tiny = self._search(
            theta, S0, lam0, self._trial_solver(A, g, scaling, dtype),
            lambda t: sum_squares(t, x, y)[0][0], dtype)
        new_params = unravel(new_theta.astype(flat.dtype))
        # ravel/unravel keeps each leaf's dtype; make sure of it for mixed-dtype trees
        new_params = jax.tree_util.tree_map(lambda new, old: new.astype(old.dtype),
                                            new_params, params)
        new_state = LMState(
            damping=self._next_damping(lam, ok, lam0, dtype).astype(state.damping.dtype),
            steps=state.steps + 1,
            accepted=state.accepted + ok.astype(jnp.int32),
            rejected=state.rejected + tries - ok.astype(jnp.int32),
            scaling=None if scaling is None else scaling.astype(state.scaling.dtype),
        )
        Y = jnp.sum(jnp.square(y.astype(dtype)))
        safe_Y = jnp.where(Y > 0, Y, jnp.ones((), dtype))
        info = LMInfo(
            loss=S0, new_loss=S1, relative_loss=jnp.sqrt(S0 / safe_Y),
            new_relative_loss=jnp.sqrt(S1 / safe_Y), target_sum_squares=Y, damping=lam,
            step_scale=scale, accepted=ok, tries=tries,
            n_samples=jnp.asarray(x.shape[0], jnp.int32),
            stalled=self._stalled(lam, ok, tiny, dtype), shard_samples=counts,
        )
        return new_params, new_state, info


class LevenbergMarquardt(AbstractDampedLeastSquares):
    r"""Levenberg–Marquardt for $\min_\theta \sum_i \|r_i(\theta)\|^2$, one iteration per `step`.

    Each trial solves $(A + \lambda D)\,\delta = -g$ by Cholesky; a rejected trial raises
    $\lambda$ by `increase`, an accepted step lowers it by `decrease` for the next
    iteration. See `geomlearn.second_order` for the mathematics and the memory bound.

    Marquardt's scaling is guarded: $D_{jj} = \max(A_{jj},\ \text{scaling\_keep}\cdot
    m_j,\ \text{scaling\_floor}\cdot\max_k m_k)$, with $m_j$ the largest $A_{jj}$ of
    this and every earlier iteration (Moré's running maximum, `LMState.scaling`), plus
    $10^{-12}\max(\max_k A_{kk}, 1)$ to keep it positive. A parameter that stops moving
    the residuals (a unit of a network that is switched off) has a column of $J$ near
    zero; unguarded, it is hardly damped and takes trial steps far out of the region
    where the linearisation holds. A column that stays above `scaling_keep` of its own
    largest size and `scaling_floor` of the largest column's keeps Marquardt's
    $D_{jj} = A_{jj}$.

    **Arguments:**

    - `damping`: the initial $\lambda$ ($> 0$; for the undamped method use `GaussNewton`).
    - `increase`: factor on $\lambda$ after a rejected trial step ($> 1$).
    - `decrease`: divisor of $\lambda$ after an accepted step ($> 1$).
    - `marquardt_scaling`: damp with $D = \operatorname{diag}(A)$, guarded (default), or
      $D = I$.
    - `scaling_keep`: the share of its running maximum an entry of $D$ keeps (in
      $(0, 1]$); `scaling_floor`: the least entry of $D$ relative to the largest running
      maximum (in $(0, 1]$).
    - `min_damping`, `max_damping`: bounds on $\lambda$.
    - `max_tries`: trial steps per iteration before giving up (the parameters are then
      unchanged and $\lambda$ stays raised).
    - `max_growth`: the next iteration starts from at most `max_growth` times this
      one's $\lambda$ (default 16), however far its trials raised it.
    - `patience`: `geomlearn.fit` stops after this many consecutive stalled iterations
      (no trial accepted with $\lambda$ at `max_damping` or a step below round-off; see
      `LMInfo.stalled`), with `history["stop_reason"] == "stalled"`; `None` never stops
      on a stall.
    - `chunk_size`: samples per chunk of the accumulation of $J^\top J$ and $J^\top r$.
    - `subset`: `None` — every iteration uses all $M$ samples; an int $n$ — a fresh random
      subset of $\min(n, M)$ samples per iteration, drawn from the iteration's key.
    - `jacobian`: `"auto"`, `"fwd"` or `"rev"` (see `normal_equations`).
    - `max_params`: refuse models with more parameters than this (`ValueError`).

    **Example** (fitting $y = a\,e^{b t}$):

    ```python
    t = jnp.linspace(0.0, 1.0, 50)
    y = 2.0 * jnp.exp(-1.5 * t)
    residual = lambda p, ti, yi: p["a"] * jnp.exp(p["b"] * ti) - yi
    params = {"a": jnp.array(1.0), "b": jnp.array(0.0)}
    lm = gl.LevenbergMarquardt()
    state = lm.init(params)
    step = jax.jit(lambda p, s, k: lm.step(p, s, residual, t, y, k))
    for k in jax.random.split(jax.random.PRNGKey(0), 20):
        params, state, info = step(params, state, k)
    ```
    """

    damping: float = eqx.field(default=1e-3, static=True)
    increase: float = eqx.field(default=4.0, static=True)
    decrease: float = eqx.field(default=3.0, static=True)
    marquardt_scaling: bool = eqx.field(default=True, static=True)
    scaling_keep: float = eqx.field(default=1e-3, static=True)
    scaling_floor: float = eqx.field(default=1e-9, static=True)
    min_damping: float = eqx.field(default=1e-12, static=True)
    max_damping: float = eqx.field(default=1e12, static=True)
    max_tries: int = eqx.field(default=10, static=True)
    max_growth: float = eqx.field(default=16.0, static=True)
    patience: int | None = eqx.field(default=3, static=True)
    chunk_size: int = eqx.field(default=1024, static=True)
    subset: int | None = eqx.field(default=None, static=True)
    jacobian: str = eqx.field(default="auto", static=True)
    max_params: int = eqx.field(default=5000, static=True)

    def __check_init__(self):
        if not (isinstance(self.damping, (int, float)) and self.damping > 0):
            raise ValueError(f"damping must be a number > 0 (for the undamped method use "
                             f"GaussNewton()), got {self.damping!r}")
        for name in ("increase", "decrease"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 1):
                raise ValueError(f"{name} must be a number > 1, got {v!r}")
        if not (isinstance(self.max_growth, (int, float)) and self.max_growth >= 1):
            raise ValueError(f"max_growth must be a number >= 1, got {self.max_growth!r}")
        for name in ("scaling_keep", "scaling_floor"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ValueError(f"{name} must be a number in (0, 1], got {v!r}")
        if not (0 < self.min_damping <= self.max_damping):
            raise ValueError(
                "expected 0 < min_damping <= max_damping, got "
                f"min_damping={self.min_damping!r}, max_damping={self.max_damping!r}"
            )

    @property
    def gauss_newton(self) -> bool:
        return False

    @property
    def _keeps_scaling(self) -> bool:
        return self.marquardt_scaling

    def _trial_solver(self, A, g, scaling, dtype):
        d = jnp.ones((A.shape[0],), dtype) if scaling is None else jnp.diag(A)
        if scaling is not None:  # the guards: of its own running maximum, of the largest
            d = jnp.maximum(d, jnp.asarray(self.scaling_keep, dtype) * scaling)
            d = jnp.maximum(d, jnp.asarray(self.scaling_floor, dtype) * jnp.max(scaling))
        # positive where no parameter moves the residuals
        D = d + jnp.asarray(1e-12, dtype) * jnp.maximum(jnp.max(d), jnp.ones((), dtype))

        def solve(lam, scale):
            op = lx.MatrixLinearOperator(A + jnp.diag(lam * D), lx.positive_semidefinite_tag)
            return lx.linear_solve(op, -g, lx.Cholesky(), throw=False).value

        return solve

    def _retry(self, lam, scale, dtype):
        hi = jnp.asarray(self.max_damping, dtype)
        return jnp.minimum(lam * jnp.asarray(self.increase, dtype), hi), scale

    def _next_damping(self, lam_used, accepted, lam0, dtype):
        # lam_used is the λ of the last trial: lowered after an acceptance, raised after
        # a failure, never more than max_growth × the λ this iteration started from
        lo = jnp.asarray(self.min_damping, dtype)
        hi = jnp.minimum(jnp.asarray(self.max_damping, dtype),
                         lam0 * jnp.asarray(self.max_growth, dtype))
        lowered = lam_used / jnp.asarray(self.decrease, dtype)
        raised = lam_used * jnp.asarray(self.increase, dtype)
        return jnp.clip(jnp.where(accepted, lowered, raised), lo, jnp.maximum(hi, lo))

    def _stalled(self, lam_used, accepted, tiny, dtype):
        return ~accepted & (tiny | (lam_used >= jnp.asarray(self.max_damping, dtype)))

    def stalled_after_refusal(self, state):
        return state.damping >= jnp.asarray(self.max_damping, state.damping.dtype)


class GaussNewton(AbstractDampedLeastSquares):
    r"""Gauss–Newton: the undamped iteration, with step halving and a truncated-SVD solve.

    Each iteration solves the undamped normal equations $J^\top J\,\delta = -J^\top r$
    (minimum-norm solution, by SVD, when $J^\top J$ is singular) and takes the first of
    $\delta, \delta/2, \delta/4, \dots$ (at most `max_tries`) that lowers
    $\sum\|r\|^2$; if none does, the parameters are unchanged. On a model whose residual
    is linear in the parameters one iteration reaches the least-squares solution.

    The normal matrix of an over-parametrised network is nearly singular, and the
    minimum-norm step then follows its round-off directions, which no halving rescues.
    So singular values of $J^\top J$ below `rcond` × the largest (default
    `GAUSS_NEWTON_RCOND` $= 10^{-6}$, i.e. those of $J$ below $10^{-3}$ × its largest)
    are dropped: a truncated-SVD Gauss–Newton step.

    **Arguments:** `max_tries`, `chunk_size`, `subset`, `jacobian`, `max_params`,
    `patience` as for `LevenbergMarquardt`; `rcond`: the relative cutoff (`None`: machine precision × $P$,
    lineax's default); `damping`: only `0` (the method is undamped).
    """

    max_tries: int = eqx.field(default=10, static=True)
    chunk_size: int = eqx.field(default=1024, static=True)
    subset: int | None = eqx.field(default=None, static=True)
    jacobian: str = eqx.field(default="auto", static=True)
    max_params: int = eqx.field(default=5000, static=True)
    patience: int | None = eqx.field(default=3, static=True)
    rcond: float | None = eqx.field(default=GAUSS_NEWTON_RCOND, static=True)
    damping: float = eqx.field(default=0.0, static=True)

    def __check_init__(self):
        if self.damping != 0:
            raise ValueError(
                f"GaussNewton is undamped (damping=0), got damping={self.damping!r}; "
                "use LevenbergMarquardt for a damped method"
            )
        if self.rcond is not None and not (0 <= self.rcond < 1):
            raise ValueError(f"rcond must be None or in [0, 1), got {self.rcond!r}")

    @property
    def gauss_newton(self) -> bool:
        return True

    def _trial_solver(self, A, g, scaling, dtype):
        # A may be singular (over-parametrised model); the SVD gives the minimum-norm
        # solution (numpy.linalg.lstsq's on J δ = −r when rcond keeps every direction),
        # singular values below rcond × the largest dropped. Solved once per iteration:
        # the trials only scale it.
        op = lx.MatrixLinearOperator(A, lx.symmetric_tag)
        delta = lx.linear_solve(op, -g, lx.SVD(rcond=self.rcond), throw=False).value
        return lambda lam, scale: scale * delta

    def _retry(self, lam, scale, dtype):
        return lam, scale * jnp.asarray(0.5, dtype)  # backtracking: δ, δ/2, δ/4, …

    def _next_damping(self, lam_used, accepted, lam0, dtype):
        return lam0

    def _stalled(self, lam_used, accepted, tiny, dtype):
        return ~accepted
