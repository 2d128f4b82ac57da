r"""Second-order least squares: Levenberg–Marquardt and Gauss–Newton, chunked.

Structure-preserving integrators are small networks fitted to very redundant data: a
small **nonlinear least-squares** problem
$\min_\theta S(\theta) = \sum_{i=1}^{M} \|r_i(\theta)\|^2$,
$r_i(\theta) = \hat y_i(\theta) - y_i \in \mathbb{R}^R$. One iteration linearises the
residuals, $r_i(\theta+\delta) \approx r_i(\theta) + J_i\delta$ with the per-sample
Jacobian $J_i = \partial r_i/\partial\theta$ ($R \times P$), and solves

$$
\bigl(A + \lambda D\bigr)\,\delta = -g, \qquad
A = \sum_i J_i^\top J_i, \quad g = \sum_i J_i^\top r_i .
$$

**Levenberg–Marquardt** damps with $D = \operatorname{diag}(A)$ (Marquardt's scaling,
invariant to a rescaling of the parameters) or $D = I$ (Levenberg's). A trial step is
**accepted only if it lowers** $S$; then $\lambda \leftarrow \lambda/\text{decrease}$,
otherwise $\lambda \leftarrow \lambda\cdot\text{increase}$ and a new step is tried, up to
`max_tries` times. **Gauss–Newton** is the undamped case $\lambda = 0$: the minimum-norm
solution of $A\delta = -g$ over the singular values of $A$ above `rcond` × the largest
(a truncated-SVD step), halved ($\delta, \delta/2, \dots$) until it lowers $S$.

**Memory that does not grow with the data.** $A$ and $g$ are sums over samples,
accumulated over chunks of $c$ = `chunk_size` samples by a `lax.scan` (the last chunk
overlaps the previous one and is masked; the data are not copied). Peak memory besides
data and parameters is about $P^2 + c\,R\,P + c\times$(activations of one sample)
numbers, independent of $M$. Per-sample Jacobians come from `jax.jacrev` when $R < P$,
else from `jax.jacfwd`. With `subset=n` each iteration uses a fresh random subset of $n$
samples.

**Across devices and processes.** When the samples are sharded along devices (each
process of a `jax.distributed` job holding its own $M_k$ samples; `step(...,
sharding=...)`, `geomlearn.fit(..., per_process=True)`), each shard accumulates
$A_k = \sum_{i \in k} J_i^\top J_i$, $g_k = \sum_{i \in k} J_i^\top r_i$ and
$S_k = \sum_{i \in k} \|r_i\|^2$ over its own residuals only (a `shard_map` with the
chunked scan inside), and **one all-reduce** (`lax.psum`) of the $P^2 + P + 1$ packed
numbers gives $A = \sum_k A_k$, $g$, $S$ on every device; each trial step's $S$ costs
one more all-reduce of one number. The damped $P \times P$ solve is then computed
replicated, the same on every device. Memory per device:
$P^2 + \min(c, M_k)\,R\,P$ besides its own data; the result equals the unsharded one to
round-off (only the order of the sums differs).

**Precision.** $A = J^\top J$ has the squared condition number of $J$: float32 leaves
about 3–4 significant digits on ill-conditioned problems; compute in float64 for the
best final losses. **Size.** The solve costs $P^3/3$: fine for $P \lesssim$ a few
thousand; models above `max_params` are refused with a `ValueError`.

Written here rather than taken from Optimistix: `optimistix.LevenbergMarquardt`
linearises all $M\cdot R$ residuals at once (memory $M\cdot R\cdot P$, growing with the
data), damps by $\lambda I$ only, and runs a whole solve, where a training loop wants one
iteration at a time. The linear solves use `lineax` (Cholesky for the damped system, SVD
for the undamped one).
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
