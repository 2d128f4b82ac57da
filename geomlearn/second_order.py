r"""Second-order least squares: Levenberg–Marquardt and Gauss–Newton, chunked.

Structure-preserving integrators are small networks (a few hundred parameters) fitted to
very redundant data. Their training problem is a small **nonlinear least-squares**
problem

$$
\min_\theta\; S(\theta) = \sum_{i=1}^{M} \|r_i(\theta)\|^2,
\qquad r_i(\theta) = \hat y_i(\theta) - y_i \in \mathbb{R}^R,
$$

where second-order methods beat first-order ones by orders of magnitude. One
**Levenberg–Marquardt** iteration linearises the residuals, $r_i(\theta+\delta) \approx
r_i(\theta) + J_i\delta$ with the per-sample Jacobian $J_i = \partial r_i/\partial\theta$
($R \times P$), and solves the damped normal equations

$$
\bigl(A + \lambda D\bigr)\,\delta = -g, \qquad
A = \sum_i J_i^\top J_i, \quad g = \sum_i J_i^\top r_i,
$$

with $D = \operatorname{diag}(A)$ (Marquardt's scaling, invariant to a rescaling of the
parameters) or $D = I$ (Levenberg's). The trial step is **accepted only if it lowers**
$S$; then $\lambda \leftarrow \lambda/\text{decrease}$. Otherwise $\lambda \leftarrow
\lambda\cdot\text{increase}$ and a new step is tried, up to `max_tries` times per
iteration (a rejected iteration leaves the parameters unchanged and keeps the raised
$\lambda$). **Gauss–Newton** is the undamped case $\lambda = 0$: the step solves
$A\delta = -g$ (minimum-norm solution over the singular values of $A$ above `rcond` × the
largest: a truncated-SVD step, since $A$ of an over-parametrised network is nearly
singular), and a step that does not lower $S$ is halved (backtracking $\delta, \delta/2,
\delta/4, \dots$) up to `max_tries` times.

**Memory that does not grow with the data.** $A$ and $g$ are sums over samples, so they
are accumulated over chunks of `chunk_size` samples by a `lax.scan` (the last chunk
overlaps the previous one and is masked; the data are not copied). Peak memory, besides
the data and the parameters, is about

$$
P^2 \;+\; c\,R\,P \;+\; c \times (\text{activations of one sample}),
\qquad c = \text{chunk\_size},
$$

numbers: the normal matrix, one chunk of Jacobian rows and the chunk's forward pass. It
does not depend on $M$. Per-sample Jacobians come from `jax.jacrev` ($R$ vector–Jacobian
products) when $R < P$, else from `jax.jacfwd` ($P$ Jacobian–vector products); on the
rigid-body VPT ($R = 9$, $P = 162$) reverse mode measured about 5× faster. With
`subset=n` each iteration works on a fresh random subset of $n$ samples (drawn from the
iteration's key, without replacement), which costs proportionally less per step and, on
redundant data, loses little.

**Precision.** $A = J^\top J$ has the squared condition number of $J$, so float32
parameters leave the normal equations only about 3–4 significant digits on
ill-conditioned problems; compute in float64 (`jax.config.update("jax_enable_x64",
True)` and a float64 model) for the best final losses.

**When it applies.** The normal matrix has $P^2$ entries and its solve costs $P^3/3$:
fine for the small structure-preserving networks ($P \lesssim$ a few thousand), hopeless
beyond. `LevenbergMarquardt` refuses models with more than `max_params` parameters
(default 5000) with a `ValueError`; train those with a first-order optimiser (Adam, the
default of `geomlearn.fit`).

**Why not `optimistix.LevenbergMarquardt`.** Optimistix linearises the *whole* residual
function (`jax.linearize` over all $M\cdot R$ residuals, or `jax.jacrev` for
`jac="bwd"`) and solves the stacked least-squares problem $[J; \sqrt\lambda I]\delta =
[-r; 0]$ with QR (`lineax.QR` materialises that operator), so its memory is
$M\cdot R\cdot P$: 16,384 windows × 9 residuals × 162 parameters is already 24 million
numbers, and it grows with the data. Its damping is Levenberg's $\lambda I$ (no Marquardt
scaling), and `optimistix.least_squares` runs a whole solve, where a training loop wants
one iteration at a time with its own history and checkpoints. The chunked accumulation
of $A$ and $g$, the Marquardt damping and the step-acceptance loop are therefore written
here; the linear solves use `lineax` (Cholesky for the damped, positive-definite system;
a truncated SVD — the minimum-norm solution — for the undamped Gauss–Newton system, which
may be singular).
"""

from __future__ import annotations

from typing import Callable, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jax.flatten_util import ravel_pytree

#: The default singular-value cutoff of `GaussNewton` (relative, on $J^\top J$).
GAUSS_NEWTON_RCOND = 1e-6

__all__ = [
    "GaussNewton",
    "LevenbergMarquardt",
    "LMInfo",
    "LMState",
    "normal_equations",
]


class LMState(NamedTuple):
    """State of `LevenbergMarquardt` between iterations (a pytree of arrays: checkpointable).

    - `damping`: the current $\\lambda$ (a scalar in the parameters' dtype; 0 for
      Gauss–Newton).
    - `steps`: iterations done (`int32`).
    - `accepted`: iterations whose step was accepted (`int32`).
    - `rejected`: rejected trial steps, over all iterations (`int32`).
    """

    damping: jax.Array
    steps: jax.Array
    accepted: jax.Array
    rejected: jax.Array


class LMInfo(NamedTuple):
    r"""What one `LevenbergMarquardt.step` did (scalars; all over the same samples).

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
    - `stalled`: no trial was accepted and no further progress is expected from
      damping: $\lambda$ reached `max_damping` (LM), or all `max_tries` halvings failed
      (Gauss–Newton). A training loop may stop on it.
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


# ------------------------------------------------------------------ normal equations


def _ravel(params):
    """`ravel_pytree`, also for leaves of mixed dtypes under strict dtype promotion.

    The flat vector has the highest dtype of the leaves; `unravel` casts each leaf back
    to its own dtype.
    """
    with jax.numpy_dtype_promotion("standard"):
        flat, unravel_ = ravel_pytree(params)

    def unravel(theta):
        with jax.numpy_dtype_promotion("standard"):
            return unravel_(theta)

    return flat, unravel


def _flat_residual(residual_fn, unravel, dtype):
    def r1(theta, xi, yi):
        r = jnp.ravel(residual_fn(unravel(theta), xi, yi))
        return r.astype(dtype)

    return r1


def _chunked(x, y, chunk_size: int, body, init):
    """`lax.scan` of `body(carry, (xb, yb, mask))` over chunks of `chunk_size` samples.

    No copy of the data: chunk `k` is the slice starting at `min(k·c, M − c)`, so the
    last chunk overlaps the previous one when `c` does not divide `M`, and `mask` marks
    the samples not yet counted (requires `c <= M`).
    """
    M = x.shape[0]
    n_chunks = -(-M // chunk_size)
    offsets = jnp.arange(chunk_size)

    def step(carry, k):
        first_new = k * chunk_size
        start = jnp.minimum(first_new, M - chunk_size)
        xb = jax.lax.dynamic_slice_in_dim(x, start, chunk_size)
        yb = jax.lax.dynamic_slice_in_dim(y, start, chunk_size)
        mask = start + offsets >= first_new
        return body(carry, (xb, yb, mask))

    carry, _ = jax.lax.scan(step, init, jnp.arange(n_chunks))
    return carry


def _jacobian_mode(mode: str, n_residuals: int, n_params: int) -> str:
    if mode != "auto":
        return mode
    # jacrev costs one VJP per residual, jacfwd one JVP per parameter
    return "rev" if n_residuals < n_params else "fwd"


def _normal_equations_flat(r1, theta, x, y, chunk_size, jacobian, dtype):
    """$A = \\sum J_i^\\top J_i$, $g = \\sum J_i^\\top r_i$, $S = \\sum \\|r_i\\|^2$ (flat θ)."""
    P = theta.size
    R = jax.eval_shape(r1, theta, x[0], y[0]).shape[0]
    mode = _jacobian_mode(jacobian, R, P)

    def with_value(t, xi, yi):
        r = r1(t, xi, yi)
        return r, r

    jac = jax.jacrev(with_value, has_aux=True) if mode == "rev" else jax.jacfwd(
        with_value, has_aux=True
    )
    # full-precision products (no TF32/bf16 passes on accelerators): A squares the
    # conditioning of J, so its accumulation must not lose more
    hi = jax.lax.Precision.HIGHEST

    def body(carry, batch):
        A, g, S = carry
        xb, yb, mb = batch
        J, r = jax.vmap(jac, (None, 0, 0))(theta, xb, yb)  # (c, R, P), (c, R)
        # where, not a product: an uncounted sample must not leak a NaN/inf through 0·x
        J = jnp.where(mb[:, None, None], J, jnp.zeros((), dtype))
        r = jnp.where(mb[:, None], r, jnp.zeros((), dtype))
        J = J.reshape(-1, P)
        r = r.reshape(-1)
        A = A + jnp.matmul(J.T, J, precision=hi)
        g = g + jnp.matmul(J.T, r, precision=hi)
        return (A, g, S + jnp.sum(jnp.square(r))), None

    zero = (jnp.zeros((P, P), dtype), jnp.zeros((P,), dtype), jnp.zeros((), dtype))
    return _chunked(x, y, chunk_size, body, zero)


def _sum_squares_flat(r1, theta, x, y, chunk_size, dtype):
    def body(S, batch):
        xb, yb, mb = batch
        r = jax.vmap(r1, (None, 0, 0))(theta, xb, yb)
        r = jnp.where(mb[:, None], r, jnp.zeros((), dtype))
        return S + jnp.sum(jnp.square(r)), None

    return _chunked(x, y, chunk_size, body, jnp.zeros((), dtype))


def _compute_dtype(flat, residual_fn, params, x, y):
    r = jax.eval_shape(residual_fn, params, x[0], y[0])
    return jnp.result_type(flat.dtype, r.dtype)


def normal_equations(
    residual_fn: Callable,
    params,
    x,
    y,
    *,
    chunk_size: int = 1024,
    jacobian: Literal["auto", "fwd", "rev"] = "auto",
):
    r"""The Gauss–Newton normal equations of $S(\theta) = \sum_i \|r_i(\theta)\|^2$, chunked.

    $A = \sum_i J_i^\top J_i$ ($P \times P$), $g = \sum_i J_i^\top r_i$ ($P$) and
    $S = \sum_i \|r_i\|^2$, accumulated over chunks of `chunk_size` samples by a
    `lax.scan` (memory $P^2 + \text{chunk\_size}\cdot R\cdot P$, independent of $M$). The
    parameter vector is `jax.flatten_util.ravel_pytree(params)[0]`.

    **Arguments:**

    - `residual_fn`: `residual_fn(params, x_i, y_i)` → the residual of one sample (any
      shape; flattened to $R$ entries).
    - `params`: a pytree of floating-point arrays.
    - `x`, `y`: arrays with a leading sample axis of length $M \ge 1$.
    - `chunk_size`: samples per chunk (the last chunk is masked where it overlaps).
    - `jacobian`: per-sample Jacobians by `"rev"` (`jax.jacrev`, $R$ VJPs), `"fwd"`
      (`jax.jacfwd`, $P$ JVPs) or `"auto"` (reverse mode when $R < P$).

    **Returns:** `(A, g, S)` in the highest dtype of the parameters and residuals.
    """
    flat, unravel = _ravel(params)
    x, y = jnp.asarray(x), jnp.asarray(y)
    _check_samples(x, y)
    dtype = _compute_dtype(flat, residual_fn, params, x, y)
    r1 = _flat_residual(residual_fn, unravel, dtype)
    chunk = min(int(chunk_size), x.shape[0])
    return _normal_equations_flat(r1, flat.astype(dtype), x, y, chunk, jacobian, dtype)


def _check_samples(x, y):
    if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0] or x.shape[0] < 1:
        raise ValueError(
            "x and y must have the same leading (sample) axis of length >= 1, got shapes "
            f"{x.shape} and {y.shape}"
        )


# ---------------------------------------------------------------- the optimiser


class LevenbergMarquardt(eqx.Module):
    r"""Levenberg–Marquardt for $\min_\theta \sum_i \|r_i(\theta)\|^2$, one iteration per `step`.

    A frozen, hashable configuration (all fields static); the iteration state is an
    `LMState`. See the module documentation for the mathematics and the memory bound
    $P^2 + \text{chunk\_size}\cdot R\cdot P$.

    **Arguments:**

    - `damping`: the initial $\lambda$ ($\ge 0$; `0` gives Gauss–Newton with step halving;
      prefer `GaussNewton()`, which also sets the cutoff `rcond`).
    - `increase`: factor on $\lambda$ after a rejected trial step ($> 1$).
    - `decrease`: divisor of $\lambda$ after an accepted step ($> 1$).
    - `marquardt_scaling`: damp with $D = \operatorname{diag}(A)$ (default) or with
      $D = I$.
    - `min_damping`, `max_damping`: bounds on $\lambda$ (when damping).
    - `max_tries`: trial steps per iteration before giving up (the parameters are then
      unchanged and $\lambda$ stays raised).
    - `chunk_size`: samples per chunk of the accumulation of $J^\top J$ and $J^\top r$.
    - `subset`: `None` — every iteration uses all $M$ samples; an int $n$ — a fresh random
      subset of $\min(n, M)$ samples per iteration, drawn from the iteration's key.
    - `jacobian`: `"auto"`, `"fwd"` or `"rev"` (see `normal_equations`).
    - `max_params`: refuse models with more parameters than this (`ValueError`).
    - `rcond`: Gauss–Newton only: singular values of $A$ below `rcond` × the largest are
      treated as zero in the minimum-norm solve (`None`: machine precision × $P$, lineax's
      default; `GaussNewton()` sets $10^{-6}$). Over-parametrised networks have a nearly
      singular $A$; the cutoff keeps the undamped step off round-off directions.

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
    min_damping: float = eqx.field(default=1e-12, static=True)
    max_damping: float = eqx.field(default=1e12, static=True)
    max_tries: int = eqx.field(default=10, static=True)
    chunk_size: int = eqx.field(default=1024, static=True)
    subset: int | None = eqx.field(default=None, static=True)
    jacobian: str = eqx.field(default="auto", static=True)
    max_params: int = eqx.field(default=5000, static=True)
    rcond: float | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        def positive_int(name, value, minimum=1):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")

        if not (isinstance(self.damping, (int, float)) and self.damping >= 0):
            raise ValueError(f"damping must be a number >= 0, got {self.damping!r}")
        for name in ("increase", "decrease"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 1):
                raise ValueError(f"{name} must be a number > 1, got {v!r}")
        if not (0 < self.min_damping <= self.max_damping):
            raise ValueError(
                "expected 0 < min_damping <= max_damping, got "
                f"min_damping={self.min_damping!r}, max_damping={self.max_damping!r}"
            )
        positive_int("max_tries", self.max_tries)
        positive_int("chunk_size", self.chunk_size)
        positive_int("max_params", self.max_params)
        if self.subset is not None:
            positive_int("subset", self.subset)
        if self.rcond is not None and not (0 <= self.rcond < 1):
            raise ValueError(f"rcond must be None or in [0, 1), got {self.rcond!r}")
        if self.jacobian not in ("auto", "fwd", "rev"):
            raise ValueError(f"jacobian must be 'auto', 'fwd' or 'rev', got {self.jacobian!r}")

    @property
    def gauss_newton(self) -> bool:
        """Whether this is the undamped (Gauss–Newton) method."""
        return self.damping == 0

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
        flat, _ = _ravel(params)
        self._check_size(flat.size)
        if not jnp.issubdtype(flat.dtype, jnp.floating):
            raise ValueError(f"parameters must be floating-point, got dtype {flat.dtype}")
        zero = jnp.zeros((), jnp.int32)
        return LMState(
            damping=jnp.asarray(self.damping, flat.dtype),
            steps=zero,
            accepted=zero,
            rejected=zero,
        )

    def step(self, params, state: LMState, residual_fn: Callable, x, y, key=None):
        r"""One Levenberg–Marquardt iteration (pure JAX: usable under `jit`/`lax.scan`).

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

        **Returns:** `(params, state, info)`: the new parameters (unchanged when no trial
        step was accepted, each leaf in its own dtype), the new `LMState` and an
        `LMInfo`.
        """
        flat, unravel = _ravel(params)
        self._check_size(flat.size)
        x, y = jnp.asarray(x), jnp.asarray(y)
        _check_samples(x, y)
        dtype = _compute_dtype(flat, residual_fn, params, x, y)
        M = x.shape[0]
        if self.subset is not None and self.subset < M:
            if key is None:
                raise ValueError(f"subset={self.subset} needs a key, got key=None")
            idx = jax.random.choice(key, M, (self.subset,), replace=False)
            x, y = jnp.take(x, idx, axis=0), jnp.take(y, idx, axis=0)
        n = x.shape[0]
        chunk = min(self.chunk_size, n)
        r1 = _flat_residual(residual_fn, unravel, dtype)
        theta = flat.astype(dtype)

        A, g, S0 = _normal_equations_flat(r1, theta, x, y, chunk, self.jacobian, dtype)

        def loss(t):
            return _sum_squares_flat(r1, t, x, y, chunk, dtype)

        lam0 = state.damping.astype(dtype)
        if self.gauss_newton:
            # Undamped: A may be singular (over-parametrised model); the SVD gives the
            # minimum-norm solution (numpy.linalg.lstsq's on J δ = −r when rcond keeps
            # every direction), singular values below rcond × the largest dropped.
            op = lx.MatrixLinearOperator(A, lx.symmetric_tag)
            delta0 = lx.linear_solve(op, -g, lx.SVD(rcond=self.rcond), throw=False).value
            D = None
        else:
            delta0 = None
            d = jnp.diag(A) if self.marquardt_scaling else jnp.ones((A.shape[0],), dtype)
            # a floor keeps D positive where a parameter has no influence on the residuals
            D = d + jnp.asarray(1e-12, dtype) * jnp.maximum(jnp.max(d), jnp.ones((), dtype))

        def trial(lam, scale):
            if self.gauss_newton:
                return scale * delta0
            op = lx.MatrixLinearOperator(A + jnp.diag(lam * D), lx.positive_semidefinite_tag)
            return lx.linear_solve(op, -g, lx.Cholesky(), throw=False).value

        lo = jnp.asarray(self.min_damping, dtype)
        hi = jnp.asarray(self.max_damping, dtype)
        half = jnp.asarray(0.5, dtype)
        inc = jnp.asarray(self.increase, dtype)
        dec = jnp.asarray(self.decrease, dtype)

        def cond(c):
            tries, _, _, ok, _, _ = c
            return (~ok) & (tries < self.max_tries)

        def body(c):
            tries, lam, scale, _, best, S_best = c
            first = tries == 0
            if self.gauss_newton:  # backtracking: δ, δ/2, δ/4, …
                scale = jnp.where(first, scale, scale * half)
            else:  # after a rejected trial: raise λ
                lam = jnp.where(first, lam, jnp.minimum(lam * inc, hi))
            t = theta + trial(lam, scale)
            S_t = loss(t)
            ok = jnp.isfinite(S_t) & jnp.all(jnp.isfinite(t)) & (S_t < S0)
            best = jnp.where(ok, t, best)
            S_best = jnp.where(ok, S_t, S_best)
            return tries + 1, lam, scale, ok, best, S_best

        start = (
            jnp.zeros((), jnp.int32),
            lam0,
            jnp.ones((), dtype),
            jnp.zeros((), bool),
            theta,
            S0,
        )
        tries, lam_used, scale, ok, new_theta, S1 = jax.lax.while_loop(cond, body, start)
        # lam_used is the λ of the last trial (accepted or not); after an acceptance
        # it is decreased for the next iteration, after a failure it stays raised.
        if self.gauss_newton:
            next_lam = lam0
        else:
            next_lam = jnp.where(
                ok, jnp.maximum(lam_used / dec, lo), jnp.minimum(lam_used * inc, hi)
            )
        n_rejected = tries - ok.astype(jnp.int32)
        new_params = unravel(new_theta.astype(flat.dtype))
        # ravel/unravel keeps each leaf's dtype; make sure of it for mixed-dtype trees
        new_params = jax.tree_util.tree_map(
            lambda new, old: new.astype(old.dtype), new_params, params
        )
        Y = jnp.sum(jnp.square(y.astype(dtype)))
        safe_Y = jnp.where(Y > 0, Y, jnp.ones((), dtype))
        new_state = LMState(
            damping=next_lam.astype(state.damping.dtype),
            steps=state.steps + 1,
            accepted=state.accepted + ok.astype(jnp.int32),
            rejected=state.rejected + n_rejected,
        )
        info = LMInfo(
            loss=S0,
            new_loss=S1,
            relative_loss=jnp.sqrt(S0 / safe_Y),
            new_relative_loss=jnp.sqrt(S1 / safe_Y),
            target_sum_squares=Y,
            damping=lam_used,
            step_scale=scale,
            accepted=ok,
            tries=tries,
            n_samples=jnp.asarray(n, jnp.int32),
            stalled=(~ok) & (lam_used >= hi) if not self.gauss_newton else ~ok,
        )
        return new_params, new_state, info


def GaussNewton(**kwargs) -> LevenbergMarquardt:
    r"""The Gauss–Newton method: `LevenbergMarquardt(damping=0, ...)`.

    Each iteration solves the undamped normal equations $J^\top J\,\delta = -J^\top r$
    (minimum-norm solution, by SVD, when $J^\top J$ is singular) and takes the first of
    $\delta, \delta/2, \delta/4, \dots$ (at most `max_tries`) that lowers
    $\sum\|r\|^2$; if none does, the parameters are unchanged. On a model whose residual
    is linear in the parameters one iteration reaches the least-squares solution.

    Without a cutoff the minimum-norm step of an over-parametrised network follows the
    round-off directions of the nearly singular $J^\top J$ and no halving rescues it
    (measured on the rigid-body VPT, 162 parameters: 2 of 259 trial steps accepted in a
    minute). So `GaussNewton` sets `rcond` to `GAUSS_NEWTON_RCOND` = $10^{-6}$ unless
    given: singular values of $J^\top J$ below $10^{-6}$ × the largest (of $J$ below
    $10^{-3}$ × its largest) are dropped — a truncated-SVD Gauss–Newton step.

    **Arguments:** the keyword arguments of `LevenbergMarquardt` except `damping`.

    **Returns:** a `LevenbergMarquardt` with `damping=0`.
    """
    if "damping" in kwargs:
        raise ValueError(
            f"GaussNewton is undamped (damping=0), got damping={kwargs['damping']!r}; "
            "use LevenbergMarquardt for a damped method"
        )
    kwargs.setdefault("rcond", GAUSS_NEWTON_RCOND)
    return LevenbergMarquardt(damping=0.0, **kwargs)
