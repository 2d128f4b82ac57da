r"""The inference form of a composition of triangular shears: the same map, rearranged
so that repeated evaluation (a rollout) does the parameter-only work once."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .._typing import Array, Float
from ._linalg import small_matmul, triangular_matrix

__all__ = ["fuse_shears"]


def _rowwise_bias(v: Array, ndim: int) -> Array:
    """`v` `(k,)` reshaped to broadcast against a point (`ndim = 1`) or a window."""
    return v.reshape((1,) * (ndim - 1) + v.shape)


class _FusedShears(eqx.Module):
    r"""A composition of triangular shears, rearranged for fast repeated evaluation.

    Built by `fuse_shears` from a sequence of
    `VolumePreservingLowerLayer`/`VolumePreservingUpperLayer` (step size `h = 1`). Each
    run of linear layers $x \mapsto xM_k + c_k$ is composed into one affine map
    $x \mapsto xM + c$ ($M$ a product of unit-triangular matrices, $\det M = 1$), and that
    map is **folded into the pre-activation** of the nonlinear layer that follows it:
    with $y = xM + c$ and the layer $y \mapsto y + \sigma(yW^\top + b)$,
    $$\big[\,y \;\big|\; yW^\top + b\,\big] = x\,\big[\,M \;\big|\; MW^\top\,\big]
      + \big[\,c \;\big|\; cW^\top + b\,\big],$$
    whose matrices and biases are computed once (applied as two $d \times d$ products:
    slicing the result of one $d \times 2d$ product cost XLA an extra kernel in a
    rollout loop). A stage is therefore
    $x \mapsto y + \sigma(\text{pre})$, and a trailing linear run is one affine map.
    Every matrix is formed from the parameters when the form is built, not per call.

    The map equals the layer-by-layer composition up to rounding (the products are
    re-associated), and its Jacobian is still a product of unit-triangular matrices
    ($M$, then $I + \operatorname{diag}(\sigma')W$ per stage), so it preserves volume
    exactly in exact arithmetic.
    """

    matrices: tuple[Array, ...]
    biases: tuple[Array, ...]
    final: tuple[Array, Array] | None
    dim: int = eqx.field(static=True)
    activations: tuple = eqx.field(static=True)
    with_affine: tuple[bool, ...] = eqx.field(static=True)

    def __call__(self, z: Float[Array, "*T dim"]) -> Float[Array, "*T dim"]:
        d, dtype = self.dim, z.dtype
        for A, a, act, affine in zip(self.matrices, self.biases, self.activations, self.with_affine):
            A, a = A.astype(dtype), a.astype(dtype)
            # [y | pre] = x [M | M W^T] + [c | c W^T + b], as two products: slicing one
            # (d, 2d) product's result costs XLA an extra kernel per step in a rollout
            pre = small_matmul(z, A[:, d:] if affine else A) + _rowwise_bias(a[d:] if affine else a, z.ndim)
            y = small_matmul(z, A[:, :d]) + _rowwise_bias(a[:d], z.ndim) if affine else z
            sigma = (lambda v: v) if act is None else resolve_activation(act)
            z = y + sigma(pre)
        if self.final is not None:
            Mt, c = self.final
            z = small_matmul(z, Mt.astype(dtype)) + _rowwise_bias(c.astype(dtype), z.ndim)
        return z

    def step(self, state, task=None):
        """One rollout step of a feed-forward integrator (the model protocol): `self(state)`."""
        return self(state)


def fuse_shears(layers) -> _FusedShears:
    r"""The composition of a sequence of triangular shears (step size $h = 1$) in the
    form for repeated evaluation: each run of linear layers composed into one affine map
    and folded into the pre-activation of the nonlinear layer after it, every matrix
    formed once, now. Equal to the layer-by-layer composition up to rounding and
    volume-preserving like it (see `_FusedShears`).

    **Arguments:** `layers`, a non-empty sequence of `VolumePreservingLowerLayer` /
    `VolumePreservingUpperLayer` of one `dim`.

    **Returns:** a module mapping a point `(dim,)` or a window `(T, dim)` like the
    composition.
    """
    if not layers:
        raise ValueError("fuse_shears needs at least one layer, got none")
    d = layers[0].dim
    dtype = layers[0].weight.dtype
    eye = jnp.asarray(np.eye(d), dtype=dtype)
    matrices, biases, activations, with_affine = [], [], [], []
    pending = None  # (Mt, c): the linear run since the last nonlinear layer
    for layer in layers:
        if layer.dim != d:
            raise ValueError(f"all layers must have dim={d}, got a layer with dim={layer.dim}")
        Wt = triangular_matrix(layer.weight, d, layer.is_lower, transpose=True)
        b = jnp.zeros((d,), dtype) if layer.bias is None else layer.bias
        if layer.activation is None:
            Mt = eye + Wt
            pending = (Mt, b) if pending is None else (small_matmul(pending[0], Mt), small_matmul(pending[1], Mt) + b)
            continue
        if pending is None:
            matrices.append(Wt)
            biases.append(b)
            with_affine.append(False)
        else:
            Mt, c = pending
            matrices.append(jnp.concatenate([Mt, small_matmul(Mt, Wt)], axis=1))
            biases.append(jnp.concatenate([c, small_matmul(c, Wt) + b]))
            with_affine.append(True)
            pending = None
        activations.append(layer.activation)
    return _FusedShears(
        matrices=tuple(matrices),
        biases=tuple(biases),
        final=pending,
        dim=d,
        activations=tuple(activations),
        with_affine=tuple(with_affine),
    )

