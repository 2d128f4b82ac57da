r"""Second-order least squares: Levenberg–Marquardt and Gauss–Newton, chunked.

Fitting a small network to redundant data is a **nonlinear least-squares** problem
$\min_\theta S(\theta) = \sum_{i=1}^{M} \|r_i(\theta)\|^2$, $r_i(\theta) = \hat
y_i(\theta) - y_i \in \mathbb{R}^R$. One iteration linearises the residuals with the
per-sample Jacobians $J_i = \partial r_i/\partial\theta$ ($R \times P$) and solves

$$
\bigl(A + \lambda D\bigr)\,\delta = -g, \qquad
A = \sum_i J_i^\top J_i, \quad g = \sum_i J_i^\top r_i .
$$

**Levenberg–Marquardt** damps with $D = \operatorname{diag}(A)$ (Marquardt's scaling,
invariant to a rescaling of the parameters), guarded where a column of $J$ fades (each
entry keeps a share of its running maximum over the iterations, and a floor relative to
the largest), or with $D = I$ (Levenberg's). A trial step is **accepted only if it lowers** $S$; then
$\lambda \leftarrow \lambda/\text{decrease}$, otherwise
$\lambda \leftarrow \lambda\cdot\text{increase}$ and a new step is tried, up to
`max_tries` times. An iteration whose trials all fail is a *stall* only once $\lambda$
has reached `max_damping` or the step is below round-off. **Gauss–Newton** ($\lambda = 0$) takes the minimum-norm solution
of $A\delta = -g$ over the singular values of $A$ above `rcond` × the largest (a
truncated-SVD step), halved ($\delta, \delta/2, \dots$) until it lowers $S$.

**Memory that does not grow with the data.** $A$ and $g$ are accumulated over chunks of
$c$ = `chunk_size` samples by a `lax.scan` (the data are not copied): besides data and
parameters about $P^2 + c\,R\,P + c\times$(activations of one sample) numbers,
independent of $M$. Jacobians come from `jax.jacrev` when $R < P$, else `jax.jacfwd`.
With `subset=n` each iteration uses a fresh random subset of $n$ samples.

**Across devices and processes** (`step(..., sharding=...)`, `geomlearn.fit(...,
per_process=True)`): each shard accumulates $A_k$, $g_k$ and $S_k$ over its own samples
(a `shard_map`), one all-reduce of the $P^2 + P + 1$ packed numbers sums them, and the
damped solve runs replicated; each trial step's $S$ costs one more all-reduce of one
number. The result equals the unsharded one to round-off.

**Precision and size.** $A = J^\top J$ has the squared condition number of $J$: compute
in float64 for the best final losses. The solve costs $P^3/3$; models above
`max_params` are refused with a `ValueError`.

Written here rather than taken from Optimistix, whose `LevenbergMarquardt` linearises
all $M\cdot R$ residuals at once (memory growing with the data) and runs a whole solve
where a training loop takes one iteration at a time. The linear solves use `lineax`.
"""

from ._normal_equations import JACOBIAN_MODES, normal_equations
from ._solvers import (
    GAUSS_NEWTON_RCOND,
    AbstractDampedLeastSquares,
    GaussNewton,
    LevenbergMarquardt,
    LMInfo,
    LMState,
)

__all__ = [
    "AbstractDampedLeastSquares",
    "GAUSS_NEWTON_RCOND",
    "GaussNewton",
    "JACOBIAN_MODES",
    "LevenbergMarquardt",
    "LMInfo",
    "LMState",
    "normal_equations",
]
