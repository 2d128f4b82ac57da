r"""Matrix manifolds as parameters of Equinox modules, and Riemannian optimisation.

A parameter constrained to a manifold is a small module holding one array, `value`:

- [`StiefelMatrix`][geomlearn.manifolds.StiefelMatrix]: $Y \in \mathbb{R}^{N \times n}$
  with orthonormal columns, $Y^\top Y = I_n$ (the Stiefel manifold $St(n, N)$);
- [`GrassmannMatrix`][geomlearn.manifolds.GrassmannMatrix]: a representative $Y$ of the
  subspace $\operatorname{span}(Y)$ (the Grassmann manifold $Gr(n, N)$), stored like a
  Stiefel matrix; functions of it should depend on $YY^\top$ only.

The Optax `GradientTransformation` [`riemannian_adam`][geomlearn.manifolds.riemannian_adam]
updates every manifold parameter *along* the manifold (Riemannian gradient, Adam moments
in the tangent space, a retraction) and every other array by plain Adam, so
`geomlearn.fit(model, data, optimizer=riemannian_adam(...))` trains Stiefel layers.

**Mathematics.** For the Stiefel manifold with the canonical metric the Riemannian
gradient of $f$ at $Y$ with Euclidean gradient $G$ is $\operatorname{grad} f = G - Y G^\top
Y$ (Edelman, Arias & Smith, *The geometry of algorithms with orthogonality constraints*,
1998). A tangent vector $\Delta$ ($Y^\top\Delta$ skew) moves $Y$ by a retraction:

- `"cayley"`: $Y \mapsto (I - \tfrac12 W)^{-1}(I + \tfrac12 W)\,Y$ with the skew matrix
  $W = P\Delta Y^\top - Y \Delta^\top P$, $P = I - \tfrac12 YY^\top$ (so $WY = \Delta$);
  evaluated in $O(Nn^2)$ through the Woodbury identity (Wen & Yin, 2013);
- `"exp"`: the geodesic of the canonical metric, $Y \mapsto [Y\ Q]\exp\begin{pmatrix} A &
  -R^\top\\ R & 0\end{pmatrix}\begin{pmatrix} I\\ 0\end{pmatrix}$ with $A = Y^\top\Delta$
  and $QR = (I - YY^\top)\Delta$ (Edelman et al., 1998).

Both map orthonormal $Y$ to orthonormal $Y$ up to round-off, whatever $\Delta$. For the
Grassmann manifold the gradient is the horizontal part $(I - YY^\top)G$ and the
retractions are the same formulas applied to a horizontal $\Delta$ (for which the
canonical geodesic is the Grassmann geodesic).

**Riemannian Adam** (Bécigneul & Ganea, *Riemannian adaptive optimization methods*,
ICLR 2019; Brantner, *Generalizing Adam to manifolds for efficiently training
transformers*, 2023): the first moment is a tangent vector, transported to the new point
by projection; the second moment is the element-wise square of the Riemannian gradient;
the Adam direction is projected onto the tangent space before the retraction (the
projection-transport variant, not Brantner's global tangent space). Written by hand: no
well-kept JAX library has Stiefel parameters in Equinox modules with an Optax optimiser.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from ._typing import Array, Float, PRNGKeyArray
from ._validation import check_int, float_dtype

__all__ = [
    "RiemannianAdamState",
    "AbstractManifoldMatrix",
    "StiefelMatrix",
    "GrassmannMatrix",
    "is_manifold_parameter",
    "stiefel_projection",
    "stiefel_tangent",
    "grassmann_projection",
    "cayley_retraction",
    "exp_retraction",
    "orthonormality_residual",
    "riemannian_adam",
    "RETRACTIONS",
]


def _sym(A):
    return 0.5 * (A + A.T)


def stiefel_projection(Y: Float[Array, "N n"], G: Float[Array, "N n"]) -> Float[Array, "N n"]:
    r"""The Riemannian gradient $G - Y G^\top Y$ of the canonical metric at `Y`: a tangent
    vector ($Y^\top\Delta$ skew) for any `G`."""
    return G - Y @ (G.T @ Y)


def stiefel_tangent(Y: Float[Array, "N n"], X: Float[Array, "N n"]) -> Float[Array, "N n"]:
    r"""The orthogonal projection $X - Y\operatorname{sym}(Y^\top X)$ onto the tangent
    space at `Y` (idempotent, unlike the gradient map `stiefel_projection`)."""
    return X - Y @ _sym(Y.T @ X)


def grassmann_projection(Y: Float[Array, "N n"], G: Float[Array, "N n"]) -> Float[Array, "N n"]:
    r"""The horizontal projection $(I - YY^\top)G$ (the Grassmann gradient at `Y`)."""
    return G - Y @ (Y.T @ G)


def cayley_retraction(Y: Float[Array, "N n"], D: Float[Array, "N n"]) -> Float[Array, "N n"]:
    r"""The Cayley retraction $(I - \tfrac12 W)^{-1}(I + \tfrac12 W)Y$, $W = P D Y^\top - Y
    D^\top P$, $P = I - \tfrac12 YY^\top$, of a tangent vector `D` at `Y`.

    Computed with $W = UV^\top$, $U = [PD,\ Y]$, $V = [Y,\ -PD]$ and the Woodbury
    identity, so only an $(2n \times 2n)$ system is solved. `W` is skew for *any* `D`,
    so the result has orthonormal columns to round-off even for a non-tangent `D`."""
    n = Y.shape[1]
    PD = D - 0.5 * (Y @ (Y.T @ D))
    U = jnp.concatenate([PD, Y], axis=1)
    V = jnp.concatenate([Y, -PD], axis=1)
    Z = Y + 0.5 * (U @ (V.T @ Y))  # (I + W/2) Y
    M = jnp.eye(2 * n, dtype=Y.dtype) - 0.5 * (V.T @ U)
    return Z + 0.5 * (U @ jnp.linalg.solve(M, V.T @ Z))


def exp_retraction(Y: Float[Array, "N n"], D: Float[Array, "N n"]) -> Float[Array, "N n"]:
    r"""The geodesic of the canonical metric of the Stiefel manifold from `Y` in the
    tangent direction `D` at time 1 (the Riemannian exponential; Edelman et al. 1998)."""
    n = Y.shape[1]
    A = Y.T @ D
    A = 0.5 * (A - A.T)  # the tangent part
    Q, R = jnp.linalg.qr(D - Y @ (Y.T @ D))
    zeros = jnp.zeros((n, n), dtype=Y.dtype)
    block = jnp.concatenate(
        [jnp.concatenate([A, -R.T], axis=1), jnp.concatenate([R, zeros], axis=1)], axis=0
    )
    E = jax.scipy.linalg.expm(block)
    return Y @ E[:n, :n] + Q @ E[n:, :n]


RETRACTIONS: dict[str, Callable] = {"cayley": cayley_retraction, "exp": exp_retraction}
"""The retractions by name."""


def orthonormality_residual(Y: Float[Array, "N n"]) -> Float[Array, ""]:
    r"""$\lVert Y^\top Y - I\rVert_F$ (zero on the Stiefel manifold)."""
    n = Y.shape[-1]
    return jnp.linalg.norm(Y.T @ Y - jnp.eye(n, dtype=Y.dtype))


def _random_orthonormal(key, N: int, n: int, dtype):
    A = jax.random.normal(key, (N, n), dtype=dtype)
    Q, R = jnp.linalg.qr(A)
    return Q * jnp.sign(jnp.diagonal(R))[None, :]


class AbstractManifoldMatrix(eqx.Module):
    """A matrix parameter constrained to a manifold (its one array field is `value`).

    `riemannian_adam` recognises these modules inside any model and moves `value` along
    the manifold. Subclasses define `project(Y, G)` (Euclidean → Riemannian gradient) and
    `tangent(Y, X)` (the idempotent projection onto the tangent space, used to transport
    moments and to make the Adam direction tangent)."""

    value: eqx.AbstractVar[jax.Array]

    @staticmethod
    def project(Y, G):
        raise NotImplementedError

    @staticmethod
    def tangent(Y, X):
        raise NotImplementedError

    def __jax_array__(self):  # pragma: no cover - convenience
        return self.value

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


def _check_value(name, value):
    value = jnp.asarray(value)
    if value.ndim != 2 or value.shape[0] < value.shape[1] or value.shape[1] < 1:
        raise ValueError(f"{name} needs an (N, n) matrix with N >= n >= 1, got shape {value.shape}")
    if not jnp.issubdtype(value.dtype, jnp.floating):
        raise TypeError(f"{name} must be floating-point, got {value.dtype}")
    return value


class StiefelMatrix(AbstractManifoldMatrix):
    r"""A matrix $Y \in \mathbb{R}^{N\times n}$ with orthonormal columns, $Y^\top Y = I_n$.

    **Construction:** `StiefelMatrix(value)` wraps a matrix that is already orthonormal
    (not checked: under `eqx.filter_eval_shape` or `jit` there is nothing to check);
    `StiefelMatrix.random(N, n, key=..., dtype=...)` draws one from the uniform (Haar)
    distribution (QR of a Gaussian matrix with the signs of $R$'s diagonal fixed).

    Use `Y.value` in computations. `riemannian_adam` keeps it on the manifold.
    """

    value: Float[Array, "N n"]

    def __init__(self, value):
        self.value = _check_value("StiefelMatrix", value)

    @classmethod
    def random(cls, N: int, n: int, *, key: PRNGKeyArray, dtype=None) -> "StiefelMatrix":
        N = check_int("N", N, minimum=1)
        n = check_int("n", n, minimum=1)
        if n > N:
            raise ValueError(f"a Stiefel matrix needs n <= N, got N={N}, n={n}")
        return cls(_random_orthonormal(key, N, n, float_dtype(dtype)))

    @staticmethod
    def project(Y, G):
        return stiefel_projection(Y, G)

    @staticmethod
    def tangent(Y, X):
        return stiefel_tangent(Y, X)


class GrassmannMatrix(AbstractManifoldMatrix):
    r"""A representative $Y$ (orthonormal columns) of an $n$-dimensional subspace of
    $\mathbb{R}^N$, a point of the Grassmann manifold $Gr(n, N)$.

    Stored and retracted like a `StiefelMatrix`; its gradient is the horizontal
    projection $(I - YY^\top)G$, so the optimiser never rotates the basis within the
    subspace. Functions of a Grassmann point should depend on $YY^\top$ only.
    """

    value: Float[Array, "N n"]

    def __init__(self, value):
        self.value = _check_value("GrassmannMatrix", value)

    @classmethod
    def random(cls, N: int, n: int, *, key: PRNGKeyArray, dtype=None) -> "GrassmannMatrix":
        N = check_int("N", N, minimum=1)
        n = check_int("n", n, minimum=1)
        if n > N:
            raise ValueError(f"a Grassmann point needs n <= N, got N={N}, n={n}")
        return cls(_random_orthonormal(key, N, n, float_dtype(dtype)))

    @staticmethod
    def project(Y, G):
        return grassmann_projection(Y, G)

    @staticmethod
    def tangent(Y, X):
        return grassmann_projection(Y, X)


def is_manifold_parameter(x) -> bool:
    """Whether `x` is a manifold parameter module (a leaf for `riemannian_adam`)."""
    return isinstance(x, AbstractManifoldMatrix)


class RiemannianAdamState(NamedTuple):
    """State of `riemannian_adam`: the update count, the moments of the manifold
    parameters (a list, in tree order) and the state of the Euclidean optimiser."""

    count: jax.Array
    mu: list
    nu: list
    euclidean: optax.OptState


def _split(tree):
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_manifold_parameter)
    manifold = [i for i, x in enumerate(leaves) if is_manifold_parameter(x)]
    return leaves, treedef, manifold


def riemannian_adam(
    learning_rate: float | optax.Schedule = 1e-3,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    *,
    retraction: str = "cayley",
    euclidean: optax.GradientTransformation | None = None,
) -> optax.GradientTransformation:
    r"""Adam on manifolds, as an Optax `GradientTransformation`.

    Every [`StiefelMatrix`][geomlearn.manifolds.StiefelMatrix] or
    [`GrassmannMatrix`][geomlearn.manifolds.GrassmannMatrix] in the parameter tree is
    updated by Riemannian Adam: with $g$ the Riemannian gradient at $Y$,
    $m \leftarrow \beta_1 m + (1-\beta_1) g$, $v \leftarrow \beta_2 v + (1-\beta_2) g\odot
    g$, $\Delta = -\eta\,\Pi_Y\big(\hat m / (\sqrt{\hat v} + \epsilon)\big)$ (bias-corrected
    moments, $\Pi_Y$ the tangent projection), $Y \leftarrow R_Y(\Delta)$ with the
    retraction $R$, and $m \leftarrow \Pi_{Y_{new}}(m)$ (transport by projection). The
    returned update of such a leaf is $R_Y(\Delta) - Y$, so `optax.apply_updates` lands on
    the manifold up to one rounding. Every other array is updated by `euclidean`
    (default: `optax.adam` with the same hyper-parameters).

    `update` needs `params` (as `geomlearn.fit` passes them).

    **Arguments:**

    - `learning_rate`: a float or an Optax schedule (a function of the update count).
    - `b1`, `b2`, `eps`: Adam's hyper-parameters.
    - `retraction`: `"cayley"` (default) or `"exp"` (the geodesic); see the module docs.
    - `euclidean`: the transformation for the plain arrays.

    ```python
    opt = riemannian_adam(1e-3)
    model, history = gl.fit(autoencoder, data, epochs=1000, optimizer=opt, key=key)
    ```
    """
    if retraction not in RETRACTIONS:
        raise ValueError(f"retraction must be one of {tuple(RETRACTIONS)}, got {retraction!r}")
    retract = RETRACTIONS[retraction]
    if euclidean is None:
        euclidean = optax.adam(learning_rate, b1=b1, b2=b2, eps=eps)
    lr_fn = learning_rate if callable(learning_rate) else (lambda count: learning_rate)

    def euclid_part(leaves, manifold):
        return [None if i in manifold else x for i, x in enumerate(leaves)]

    def init(params):
        with jax.numpy_dtype_promotion("standard"):  # Optax is not written for strict mode
            return _init(params)

    def update(updates, state, params=None):
        with jax.numpy_dtype_promotion("standard"):
            return _update(updates, state, params)

    def _init(params):
        leaves, _, manifold = _split(params)
        mu = [jnp.zeros_like(leaves[i].value) for i in manifold]
        nu = [jnp.zeros_like(leaves[i].value) for i in manifold]
        return RiemannianAdamState(
            jnp.zeros([], jnp.int32), mu, nu, euclidean.init(euclid_part(leaves, manifold))
        )

    def _update(updates, state, params=None):
        if params is None:
            raise ValueError("riemannian_adam needs params in update(updates, state, params)")
        g_leaves, treedef, manifold = _split(updates)
        p_leaves, _, p_manifold = _split(params)
        if manifold != p_manifold:
            raise ValueError("the gradient tree and the parameter tree do not match")
        e_updates, e_state = euclidean.update(
            euclid_part(g_leaves, manifold), state.euclidean, euclid_part(p_leaves, manifold)
        )
        count = state.count + 1
        out = list(e_updates)
        mus, nus = [], []
        for j, i in enumerate(manifold):
            param = p_leaves[i]
            Y = param.value
            dtype = Y.dtype
            G = g_leaves[i].value.astype(dtype)
            g = param.project(Y, G)
            m = b1 * state.mu[j] + (1 - b1) * g
            v = b2 * state.nu[j] + (1 - b2) * g * g
            c = count.astype(dtype)
            m_hat = m / (1 - b1**c)
            v_hat = v / (1 - b2**c)
            lr = jnp.asarray(lr_fn(state.count), dtype=dtype)
            D = -lr * param.tangent(Y, m_hat / (jnp.sqrt(v_hat) + eps))
            Y_new = retract(Y, D)
            mus.append(param.tangent(Y_new, m))
            nus.append(v)
            out[i] = eqx.tree_at(lambda t: t.value, g_leaves[i], Y_new - Y)
        new_updates = jax.tree_util.tree_unflatten(treedef, out)
        return new_updates, RiemannianAdamState(count, mus, nus, e_state)

    return optax.GradientTransformation(init, update)
