r"""Volume-preserving attention: a Cayley transform of a skew correlation mixes the rows.

The weighting of the correlation $C(Z)$ is an object chosen once, in the constructor:
`SkewWeighting` (volume-preserving) or `ArbitraryWeighting` (the non-preserving variant
of GeometricMachineLearning.jl), two finals on `AbstractWeighting`. The layer is
re-exported by `geomlearn.layers.volume_preserving`.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar, Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_floating, check_int, check_last_dim, float_dtype
from ._linalg import cayley, cayley_apply, small_matmul, triangular_matrix, uniform

__all__ = [
    "AbstractWeighting",
    "SkewWeighting",
    "ArbitraryWeighting",
    "VolumePreservingAttention",
    "check_window",
    "weighting_from",
]


def check_window(name: str, Z, dim: int) -> None:
    """`TypeError` unless `Z` is floating, `ValueError` unless it is one window
    `(T, dim)` with `T >= 1` (the check of the volume-preserving attention and
    transformer, `name` the class named in the message)."""
    check_floating(f"{name} input", Z)
    check_last_dim(name, Z, dim, ndim=(2,))
    if Z.shape[0] < 1:
        raise ValueError(f"{name} expects a window with T >= 1 rows, got shape {Z.shape}")


class AbstractWeighting(eqx.Module):
    r"""How [`VolumePreservingAttention`][geomlearn.VolumePreservingAttention] weighs the
    correlation $C(Z)$ of a window: its free parameters, the matrix $A$, the skew
    $T \times T$ matrix $C$, and whether the layer has a closed-form inverse.

    Instances have no fields (hashable, stored as a static field of the layer);
    `name` is the string the constructor accepts and `structure` what the layer
    preserves for every parameter value.
    """

    name: ClassVar[str]
    structure: ClassVar[str]

    @abc.abstractmethod
    def init(self, key: PRNGKeyArray, dim: int, dtype) -> Array:
        r"""The initial parameters, $U(-1/\sqrt d, 1/\sqrt d)$."""

    @abc.abstractmethod
    def n_params(self, dim: int) -> int:
        """The number of scalar parameters."""

    @abc.abstractmethod
    def matrix(self, weight: Array, dim: int) -> Float[Array, "dim dim"]:
        """The weighting matrix $A$."""

    @abc.abstractmethod
    def correlation(self, weight: Array, Z: Float[Array, "T dim"]) -> Float[Array, "T T"]:
        r"""The exactly skew $T \times T$ matrix $C(Z)$ (`weight` in `Z`'s dtype)."""

    @abc.abstractmethod
    def inverse(self, attention, Y: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        """The exact inverse of `attention` at `Y`, where one exists."""

    @abc.abstractmethod
    def inference_form(self, attention):
        """`attention` with its parameter-only work done once (for rollouts)."""


class SkewWeighting(AbstractWeighting):
    r"""The skew weighting (`weighting="skew"`, the default): $C = Z A Z^\top$ with a
    learnable skew-symmetric $A = S - S^\top$ ($d(d-1)/2$ parameters, the entries of
    the strictly lower triangular $S$ row by row), built as $C = K - K^\top$ with
    $K = Z S Z^\top$ so that it is skew exactly, also in floating point. $C(Z)$ is
    invariant under the layer, which gives volume preservation and the exact inverse
    $Z = \Lambda(Y)\,Y$."""

    name: ClassVar[str] = "skew"
    structure: ClassVar[str] = "volume"

    def init(self, key, dim, dtype):
        return uniform(key, (dim * (dim - 1) // 2,), dtype, 1.0 / math.sqrt(dim))

    def n_params(self, dim):
        return dim * (dim - 1) // 2

    def matrix(self, weight, dim):
        S = triangular_matrix(weight, dim, lower=True)
        return S - S.T

    def correlation(self, weight, Z):
        S = triangular_matrix(weight, Z.shape[-1], lower=True)
        K = small_matmul(small_matmul(Z, S), Z.T)
        return K - K.T

    def inverse(self, attention, Y):
        return cayley_apply(attention.correlation(Y), Y, transpose=False)

    def inference_form(self, attention):
        S = triangular_matrix(attention.weight, attention.dim, lower=True)
        return _SkewAttentionInference(S=S, dim=attention.dim)


class ArbitraryWeighting(AbstractWeighting):
    r"""The arbitrary weighting (`weighting="arbitrary"`, GeometricMachineLearning.jl's
    `skew_sym=false`): a full $d \times d$ matrix $A$ ($d^2$ parameters) and
    $C = L - L^\top$ from the strict lower triangle $L$ of $Z A Z^\top/\sqrt d$. $C$ is
    skew, so $\Lambda$ is orthogonal, but $C$ is not invariant: the layer does **not**
    preserve volume and has no closed-form inverse."""

    name: ClassVar[str] = "arbitrary"
    structure: ClassVar[str] = "none"

    def init(self, key, dim, dtype):
        return uniform(key, (dim, dim), dtype, 1.0 / math.sqrt(dim))

    def n_params(self, dim):
        return dim**2

    def matrix(self, weight, dim):
        return weight

    def correlation(self, weight, Z):
        T, d = Z.shape
        dtype = Z.dtype
        scale = jnp.asarray(np.float64(1.0 / math.sqrt(d)), dtype=dtype)
        mask = jnp.asarray(np.tri(T, k=-1), dtype=dtype)
        K = mask * (small_matmul(small_matmul(Z, weight), Z.T) * scale)
        return K - K.T

    def inverse(self, attention, Y):
        raise NotImplementedError(
            "VolumePreservingAttention(weighting='arbitrary') has no closed-form inverse; "
            "only weighting='skew' keeps C(Z) invariant"
        )

    def inference_form(self, attention):
        return attention


_WEIGHTINGS: dict[str, AbstractWeighting] = {
    "skew": SkewWeighting(),
    "arbitrary": ArbitraryWeighting(),
}


def weighting_from(weighting) -> AbstractWeighting:
    """The weighting object named by `weighting` (or `weighting` itself, an object);
    `ValueError` naming the choices for anything else."""
    if isinstance(weighting, AbstractWeighting):
        return weighting
    try:
        return _WEIGHTINGS[weighting]
    except (KeyError, TypeError):
        raise ValueError(
            f"weighting must be one of {tuple(_WEIGHTINGS)}, got {weighting!r}"
        ) from None


class VolumePreservingAttention(eqx.Module):
    r"""Volume-preserving attention: $Z \mapsto \Lambda(Z)^\top Z$ with a Cayley transform.

    For a window $Z \in \mathbb{R}^{T \times d}$ (rows $z_1, \dots, z_T$),
    $$C = Z A Z^\top \ (c_{ij} = z_i^\top A z_j), \qquad
      \Lambda = \operatorname{Cayley}(C) = (I - C)(I + C)^{-1},$$
    and the output is $\Lambda^\top Z$, $\tilde z_j = \sum_i \Lambda_{ij} z_i$ (no
    residual connection, no softmax). With `weighting="skew"` (default) $A$ is a learned
    skew-symmetric matrix ($d(d-1)/2$ parameters), $C$ is skew and $\Lambda$ orthogonal.
    *Volume.* $C$ is invariant, $C(\Lambda^\top Z) = \Lambda^\top C \Lambda = C$, so
    $f_s(Z) = \operatorname{Cayley}(sC(Z))^\top Z$, $s \in [0, 1]$, is the flow of
    $V_s(Y) = K_s(C(Y))\,Y$ with $K_s(C) = 2C(I - s^2C^2)^{-1}$, odd in $C$; a field
    $Y \mapsto C(Y)^m Y$ with $m$ odd has a divergence made of traces of odd powers of a
    skew matrix, which vanish, so $\operatorname{div} V_s = 0$ and, by Liouville's
    theorem, the layer preserves volume for every $A$, $T$ and $d$. The invariance also
    gives the exact inverse $Z = \Lambda(Y)\,Y$ (`inverse`).

    `weighting="arbitrary"` (GeometricMachineLearning.jl's `skew_sym=false`): a full
    $A$ ($d^2$ parameters) and $C = L - L^\top$ from the strict lower triangle $L$ of
    $Z A Z^\top/\sqrt d$; $\Lambda$ is orthogonal but $C$ is not invariant, so the layer
    does **not** preserve volume and has no closed-form inverse. The Cayley transform is
    the closed form $I + 2(C^2 - C)/(1 + \tfrac12\|C\|_F^2)$ for $T \le 3$ (no solve)
    and `jnp.linalg.solve` above.

    Brantner, de Romemont, Kraus, Li, *Volume-Preserving Transformers for Learning Time
    Series Data with Structure*, ESAIM: Proc. & Surveys 81 (2025), arXiv:2312.11166.

    **Arguments:** `dim` ($d \ge 1$); `weighting`: `"skew"`, `"arbitrary"` or a
    weighting object (`SkewWeighting()`, `ArbitraryWeighting()`), resolved once here;
    `key`; `dtype` (`None`: JAX's default float). Parameters `weight`, initialised
    $U(-1/\sqrt d, 1/\sqrt d)$: the entries of $A$ below the diagonal row by row
    (skew, $A = S - S^\top$) or the full matrix.

    **Call:** `attention(Z)`, `Z` `(T, dim)` with any `T ≥ 1`, returns
    $\Lambda(Z)^\top Z$ in `Z`'s shape and dtype; `weights(Z)` is $\Lambda(Z)$.

    ```python
    att = VolumePreservingAttention(3, key=jax.random.PRNGKey(0))
    att.inverse(att(Z))   # ≈ Z
    ```
    """

    weight: Float[Array, "..."]
    dim: int = eqx.field(static=True)
    scheme: AbstractWeighting = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        weighting: Literal["skew", "arbitrary"] | AbstractWeighting = "skew",
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_int("dim", dim, minimum=1)
        self.scheme = weighting_from(weighting)
        self.weight = self.scheme.init(key, self.dim, float_dtype(dtype))

    @property
    def weighting(self) -> str:
        """The name of the weighting: `"skew"` or `"arbitrary"`."""
        return self.scheme.name

    @property
    def n_params(self) -> int:
        """The number of scalar parameters: $d(d-1)/2$ (skew) or $d^2$ (arbitrary)."""
        return self.scheme.n_params(self.dim)

    def matrix(self) -> Float[Array, "dim dim"]:
        """The weighting matrix $A$ (skew-symmetric for `weighting="skew"`)."""
        return self.scheme.matrix(self.weight, self.dim)

    def correlation(self, Z: Float[Array, "T dim"]) -> Float[Array, "T T"]:
        r"""The skew $T \times T$ matrix $C(Z)$ that is fed to the Cayley transform.

        It is built so that it is skew-symmetric *exactly*, also in floating point:
        $C = K - K^\top$ with $K = Z S Z^\top$ (skew, where $A = S - S^\top$) or with
        $K$ the strict lower triangle of $Z A Z^\top/\sqrt d$ (arbitrary).
        """
        check_window(type(self).__name__, Z, self.dim)
        return self.scheme.correlation(self.weight.astype(Z.dtype), Z)

    def weights(self, Z: Float[Array, "T dim"]) -> Float[Array, "T T"]:
        r"""The attention matrix $\Lambda(Z) = (I - C)(I + C)^{-1}$, orthogonal with
        $\det \Lambda = 1$ (for both weightings)."""
        return cayley(self.correlation(Z))

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        r"""Map the window `Z` `(T, dim)` to $\Lambda(Z)^\top Z$ (same shape and dtype)."""
        return cayley_apply(self.correlation(Z), Z, transpose=True)

    def inverse(self, Y: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        r"""The exact inverse of the skew layer, $Z = \Lambda(Y)\,Y$.

        Since $C(\Lambda(Z)^\top Z) = C(Z)$, the output determines $\Lambda$, and the
        orthogonal $\Lambda$ is undone by its transpose. The `"arbitrary"` weighting has
        no such invariant and no closed-form inverse: `NotImplementedError`.
        """
        return self.scheme.inverse(self, Y)

    def inference_form(self):
        """The same map for rollouts: with the skew weighting the matrix $S$ is formed
        once, outside the rollout's loop; the arbitrary layer is returned as it is."""
        return self.scheme.inference_form(self)


class _SkewAttentionInference(eqx.Module):
    """`VolumePreservingAttention` (skew weighting) with its matrix $S$ formed once."""

    S: Array
    dim: int = eqx.field(static=True)

    def __call__(self, Z: Float[Array, "T dim"]) -> Float[Array, "T dim"]:
        S = self.S.astype(Z.dtype)
        K = small_matmul(small_matmul(Z, S), Z.T)
        return cayley_apply(K - K.T, Z, transpose=True)
