r"""Attention layers for transformer integrators: standard and symplectic.

All layers here map one window $Z \in \mathbb{R}^{T \times d}$ (row $t$ the state at
time $t$) to a window of the same shape. The symplectic ones split the window into its
position and momentum halves, $Z = [\,Q \mid P\,]$ with $Q, P \in \mathbb{R}^{T \times n}$,
$d = 2n$, and are exactly symplectic in the product-space sense (the Jacobian on the
flattened window preserves $\Omega = I_T \otimes \mathbb{J}$; see `geomlearn.geometry`):

- [`LinearSymplecticAttentionQ`][geomlearn.layers.LinearSymplecticAttentionQ] /
  [`…P`][geomlearn.layers.LinearSymplecticAttentionP]: $Q \leftarrow Q + A P$ with a learned
  *symmetric* $T \times T$ matrix $A$ (a linear shear of the product space);
- [`SymplecticAttentionQ`][geomlearn.layers.SymplecticAttentionQ] /
  [`…P`][geomlearn.layers.SymplecticAttentionP]: $Q \leftarrow Q + \nabla_P F(P)$ with a
  "matrix-softmax" potential $F$ (a nonlinear shear).

A shear $Q \leftarrow Q + \nabla_P G(P)$ by the gradient of *any* scalar $G$ of the other
half is symplectic: its Jacobian is $\begin{pmatrix} I & \nabla^2 G \\ 0 & I\end{pmatrix}$
(in $(Q, P)$ coordinates) with a symmetric Hessian $\nabla^2 G$. Both symplectic layer
pairs are of this form; the linear one has $G(P) = \tfrac12 \operatorname{tr}(P^\top A P)$.

[`MultiHeadAttention`][geomlearn.layers.MultiHeadAttention] is the standard softmax attention
(Vaswani et al., 2017). It preserves no structure.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_floating, check_int, check_last_dim, float_dtype

__all__ = [
    "MultiHeadAttention",
    "LinearSymplecticAttentionQ",
    "LinearSymplecticAttentionP",
    "SymplecticAttentionQ",
    "SymplecticAttentionP",
]


# Scale of the attention matrices at initialisation (see the constructors).
_INIT_SCALE = 0.1


def _symmetric_index(m: int) -> np.ndarray:
    """Integer map `(m, m) -> m(m+1)/2` so that `v[idx]` is the symmetric matrix of `v`.

    `v` holds the upper triangle (diagonal included) row by row; entry `(i, j)` and
    `(j, i)` read the same element, so `v[idx]` is symmetric for every `v`.
    """
    rows, cols = np.triu_indices(m)
    idx = np.empty((m, m), dtype=np.int32)
    idx[rows, cols] = np.arange(rows.size, dtype=np.int32)
    idx[cols, rows] = np.arange(rows.size, dtype=np.int32)
    return idx


def _check_window(name: str, Z, dim: int) -> None:
    check_last_dim(name, Z, dim, ndim=(2,))
    check_floating(name + " input", Z)


def _const(value: float, dtype) -> Array:
    """A float64 Python/NumPy constant cast once to `dtype`."""
    return jnp.asarray(np.float64(value), dtype=dtype)


# --------------------------------------------------------------------------------------
# Standard multi-head attention
# --------------------------------------------------------------------------------------


class MultiHeadAttention(eqx.Module):
    r"""Multi-head softmax self-attention on a window (Vaswani et al., 2017).

    For each head $h = 1, \dots, H$ with projections
    $W_Q^h, W_K^h, W_V^h \in \mathbb{R}^{d \times d/H}$,

    $$\mathrm{head}_h(Z) = \operatorname{softmax}\!\Big(\frac{(Z W_Q^h)(Z W_K^h)^\top}
      {\sqrt{d/H}}\Big)\, Z W_V^h \in \mathbb{R}^{T \times d/H},$$

    with the softmax taken over the keys (each row of the $T \times T$ score matrix sums
    to one). The heads are concatenated along the feature axis, and the input is added
    when `add_connection` is true:

    $$Z \mapsto Z + [\,\mathrm{head}_1(Z) \mid \cdots \mid \mathrm{head}_H(Z)\,].$$

    **Scaling:** the scores are divided by $\sqrt{d/H}$, the per-head key dimension, as in
    Vaswani et al. (GeometricMachineLearning.jl divides by $\sqrt{d}$; the two differ by
    the constant $\sqrt{H}$, which the learned $W_Q$ can absorb).

    There is no output projection, so the layer has exactly $3d^2$ parameters. It is
    permutation-equivariant along time and preserves no geometric structure.

    **Arguments:**

    - `dim`: the feature dimension $d$.
    - `n_heads`: the number of heads $H$; must divide `dim`.
    - `add_connection`: add the input to the output (default `True`).
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: parameter dtype; `None` means JAX's default float.

    **Call:** a window `Z` of shape `(T, dim)`; returns `(T, dim)` in `Z`'s dtype.

    ```python
    mha = MultiHeadAttention(4, 2, key=jax.random.PRNGKey(0))
    mha(jnp.ones((5, 4))).shape   # (5, 4)
    ```

    Reference: A. Vaswani et al., *Attention is all you need*, NeurIPS 2017, §3.2.
    """

    W_Q: Float[Array, "n_heads dim head_dim"]
    W_K: Float[Array, "n_heads dim head_dim"]
    W_V: Float[Array, "n_heads dim head_dim"]
    dim: int = eqx.field(static=True)
    n_heads: int = eqx.field(static=True)
    add_connection: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        n_heads: int,
        *,
        add_connection: bool = True,
        key: PRNGKeyArray,
        dtype=None,
    ):
        dim = check_int("dim", dim, minimum=1)
        n_heads = check_int("n_heads", n_heads, minimum=1)
        if dim % n_heads:
            raise ValueError(
                f"n_heads must divide dim: got dim={dim}, n_heads={n_heads} "
                f"(dim % n_heads = {dim % n_heads}, expected 0)"
            )
        dtype = float_dtype(dtype)
        head_dim = dim // n_heads
        kq, kk, kv = jax.random.split(key, 3)
        std = 1.0 / math.sqrt(dim)
        shape = (n_heads, dim, head_dim)
        self.W_Q = std * jax.random.normal(kq, shape, dtype=dtype)
        self.W_K = std * jax.random.normal(kk, shape, dtype=dtype)
        self.W_V = std * jax.random.normal(kv, shape, dtype=dtype)
        self.dim = dim
        self.n_heads = n_heads
        self.add_connection = bool(add_connection)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        _check_window("MultiHeadAttention", Z, self.dim)
        dtype = jnp.result_type(Z)
        T = Z.shape[0]
        head_dim = self.dim // self.n_heads
        queries = jnp.einsum("td,hde->hte", Z, self.W_Q.astype(dtype))
        keys = jnp.einsum("td,hde->hte", Z, self.W_K.astype(dtype))
        values = jnp.einsum("td,hde->hte", Z, self.W_V.astype(dtype))
        scores = jnp.einsum("hse,hte->hst", queries, keys) * _const(
            1.0 / math.sqrt(head_dim), dtype
        )
        weights = jax.nn.softmax(scores, axis=-1)  # over the keys t
        heads = jnp.einsum("hst,hte->hse", weights, values)  # (H, T, head_dim)
        out = jnp.transpose(heads, (1, 0, 2)).reshape(T, self.dim)
        return Z + out if self.add_connection else out


# --------------------------------------------------------------------------------------
# Linear symplectic attention
# --------------------------------------------------------------------------------------


class _LinearSymplecticAttention(eqx.Module):
    """Shared parameters and checks of the linear symplectic attention pair."""


    weights: Float[Array, " n_entries"]
    dim: int = eqx.field(static=True)
    seq_length: int = eqx.field(static=True)

    def __init__(self, dim: int, seq_length: int, *, key: PRNGKeyArray, dtype=None):
        self.dim = check_even("dim", dim)
        self.seq_length = check_int("seq_length", seq_length, minimum=1)
        T = self.seq_length
        # Entries of A have standard deviation 0.1/T (‖A‖₂ ≈ 0.2/√T): a freshly built layer
        # is a small perturbation of the identity, like the SympNet layers it is stacked with.
        self.weights = (_INIT_SCALE / T) * jax.random.normal(
            key, (T * (T + 1) // 2,), dtype=float_dtype(dtype)
        )

    def matrix(self) -> Float[Array, "seq_length seq_length"]:
        """The symmetric $T \\times T$ matrix $A$ built from the `T(T+1)/2` weights."""
        return self.weights[_symmetric_index(self.seq_length)]

    def _split(self, Z):
        name = type(self).__name__
        _check_window(name, Z, self.dim)
        if Z.shape[0] != self.seq_length:
            raise ValueError(
                f"{name} was built for windows of length seq_length={self.seq_length}, "
                f"got a window of length {Z.shape[0]} (shape {Z.shape})"
            )
        n = self.dim // 2
        return Z[:, :n], Z[:, n:], self.matrix().astype(jnp.result_type(Z))

    @abc.abstractmethod
    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        raise NotImplementedError


class LinearSymplecticAttentionQ(_LinearSymplecticAttention):
    r"""Linear symplectic attention, $Q$ update: $Q \leftarrow Q + A P$, $A = A^\top$.

    With $Z = [\,Q \mid P\,]$, $Q, P \in \mathbb{R}^{T \times n}$, row $t$ of the update is
    $\sum_s A_{ts}\, p_s$: each position gets a fixed, learned combination of the momenta
    of all positions. $A \in \mathbb{R}^{T \times T}$ is symmetric by construction (built
    from $T(T+1)/2$ unconstrained weights), which is exactly what makes the map
    symplectic on the product space: it is the shear by the gradient of
    $G(P) = \tfrac12 \operatorname{tr}(P^\top A P)$. (A non-symmetric $A$ is not.)

    Because $A$ is indexed by position, the layer knows the order of the window (it is
    *not* permutation-equivariant) and accepts only windows of length `seq_length`.

    **Arguments:**

    - `dim`: the phase-space dimension $2n$ (even).
    - `seq_length`: the window length $T \ge 1$.
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: parameter dtype; `None` means JAX's default float.

    **Call:** a window `Z` of shape `(seq_length, dim)`; returns the same shape and dtype.
    A window of another length raises `ValueError` naming both lengths.

    ```python
    layer = LinearSymplecticAttentionQ(4, 3, key=jax.random.PRNGKey(0))
    layer(jnp.ones((3, 4))).shape   # (3, 4)
    ```

    Reference: the linear symplectic transformer of B. Brantner's dissertation and the
    GeometricMachineLearning.jl documentation (JuliaGNI).
    """

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        Q, P, A = self._split(Z)
        return jnp.concatenate([Q + A @ P, P], axis=1)


class LinearSymplecticAttentionP(_LinearSymplecticAttention):
    r"""Linear symplectic attention, $P$ update: $P \leftarrow P + A Q$, $A = A^\top$.

    The mirror image of [`LinearSymplecticAttentionQ`][geomlearn.layers.LinearSymplecticAttentionQ]
    (see there): a shear of the momenta by the gradient of
    $G(Q) = \tfrac12 \operatorname{tr}(Q^\top A Q)$, exactly symplectic on the product
    space, with $T(T+1)/2$ parameters.

    **Arguments:** as for `LinearSymplecticAttentionQ`.

    **Call:** a window `Z` of shape `(seq_length, dim)`; returns the same shape and dtype.

    ```python
    layer = LinearSymplecticAttentionP(4, 3, key=jax.random.PRNGKey(0))
    layer(jnp.ones((3, 4))).shape   # (3, 4)
    ```

    Reference: B. Brantner's dissertation and the GeometricMachineLearning.jl
    documentation (JuliaGNI).
    """

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        Q, P, A = self._split(Z)
        return jnp.concatenate([Q, P + A @ Q], axis=1)


# --------------------------------------------------------------------------------------
# Nonlinear symplectic attention
# --------------------------------------------------------------------------------------


def _matrix_softmax_potential(X: Float[Array, "T n"], A: Float[Array, "n n"]):
    r"""$F(X) = \tfrac{T}{2} \log \sum_{s,t} \exp\big((X A X^\top)_{st}\big)$ (stable logsumexp)."""
    C = X @ A @ X.T
    return jax.nn.logsumexp(C) * _const(X.shape[0] / 2.0, jnp.result_type(X))


class _SymplecticAttention(eqx.Module):
    """Shared parameters and potential of the nonlinear symplectic attention pair."""


    weights: Float[Array, " n_entries"]
    dim: int = eqx.field(static=True)

    def __init__(self, dim: int, *, key: PRNGKeyArray, dtype=None):
        self.dim = check_even("dim", dim)
        n = self.dim // 2
        # Entries of A have standard deviation 0.1/n (‖A‖₂ ≈ 0.2/√n): a freshly built layer
        # is a small perturbation of the identity, like the SympNet layers it is stacked
        # with. (The update is cubic in the states, so a stack of O(1) layers would grow
        # quickly.)
        self.weights = (_INIT_SCALE / n) * jax.random.normal(
            key, (n * (n + 1) // 2,), dtype=float_dtype(dtype)
        )

    def matrix(self) -> Float[Array, "n n"]:
        """The symmetric $n \\times n$ matrix $A$ built from the `n(n+1)/2` weights."""
        return self.weights[_symmetric_index(self.dim // 2)]

    def potential(self, X: Float[Array, "T n"]) -> Float[Array, ""]:
        r"""The scalar $F(X) = \tfrac{T}{2}\log\sum_{s,t}\exp\big((XAX^\top)_{st}\big)$."""
        return _matrix_softmax_potential(X, self.matrix().astype(jnp.result_type(X)))

    def _split(self, Z):
        _check_window(type(self).__name__, Z, self.dim)
        n = self.dim // 2
        return Z[:, :n], Z[:, n:]

    @abc.abstractmethod
    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        raise NotImplementedError


class SymplecticAttentionQ(_SymplecticAttention):
    r"""Nonlinear symplectic attention, $Q$ update: $Q \leftarrow Q + \nabla_P F(P)$.

    With $Z = [\,Q \mid P\,]$, $Q, P \in \mathbb{R}^{T \times n}$, the positions are
    sheared by the gradient of a scalar potential of the momenta ($X = P$ below), the
    "matrix softmax" of the correlation matrix $C = X A X^\top \in \mathbb{R}^{T\times T}$:

    $$F(X) = \frac{T}{2}\,\log \sum_{s,t=1}^{T} \exp\big(C_{st}\big), \qquad
      \nabla_X F(X) = T\, W X A, \qquad
      W_{st} = \frac{\exp(C_{st})}{\sum_{s',t'} \exp(C_{s't'})},$$

    with $A \in \mathbb{R}^{n \times n}$ symmetric (built from $n(n+1)/2$ unconstrained
    weights): row $t$ receives $\sum_s (T W_{ts})\, A x_s$, an attention over all
    positions. The update is a true gradient (`jax.grad` of $F$ with a stable
    logsumexp), so the layer is exactly symplectic on the product space for every $A$
    and every window length $T$, and permutation-equivariant along time. The factor $T$
    keeps the mean update bounded as $T$ grows (see the concepts page "Symplecticity and
    the product space").

    **Arguments:**

    - `dim`: the phase-space dimension $2n$ (even).
    - `key`: a JAX PRNG key (keyword-only).
    - `dtype`: parameter dtype; `None` means JAX's default float.

    **Call:** a window `Z` of shape `(T, dim)`, any `T ≥ 1`; returns the same shape and
    dtype.

    ```python
    layer = SymplecticAttentionQ(4, key=jax.random.PRNGKey(0))
    layer(jnp.ones((7, 4))).shape   # (7, 4)
    ```

    Reference: the symplectic transformer of B. Brantner's dissertation and the
    GeometricMachineLearning.jl documentation (JuliaGNI), whose "matrix softmax" this is.
    """

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        Q, P = self._split(Z)
        return jnp.concatenate([Q + jax.grad(self.potential)(P), P], axis=1)


class SymplecticAttentionP(_SymplecticAttention):
    r"""Nonlinear symplectic attention, $P$ update: $P \leftarrow P + \nabla_Q F(Q)$.

    With $Z = [\,Q \mid P\,]$, $Q, P \in \mathbb{R}^{T \times n}$, the momenta are sheared
    by the gradient of a scalar potential of the positions.

    Everything else (the potential $F$ and its gradient) is as for
    [`SymplecticAttentionQ`][geomlearn.layers.SymplecticAttentionQ], with $X = Q$:

    $$P \leftarrow P + T\, W Q A, \qquad
      W = \operatorname{softmax}_{\text{all } T^2 \text{ entries}}(Q A Q^\top).$$

    **Arguments:** as for
    [`SymplecticAttentionQ`][geomlearn.layers.SymplecticAttentionQ].

    **Call:** a window `Z` of shape `(T, dim)`, any `T ≥ 1`; returns the same shape and
    dtype.

    ```python
    layer = SymplecticAttentionP(4, key=jax.random.PRNGKey(0))
    layer(jnp.ones((7, 4))).shape   # (7, 4)
    ```

    Reference: B. Brantner's dissertation and the GeometricMachineLearning.jl
    documentation (JuliaGNI).
    """

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        Q, P = self._split(Z)
        return jnp.concatenate([Q, P + jax.grad(self.potential)(Q)], axis=1)
