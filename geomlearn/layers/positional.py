r"""The sinusoidal positional encoding (Vaswani et al., 2017, §3.5)."""

from __future__ import annotations

import numbers

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import check_int

__all__ = ["PositionalEncoding", "positional_encoding"]


def _check_base(base) -> float:
    if isinstance(base, bool) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r}")
    base = float(base)
    if not (base > 0 and np.isfinite(base)):
        raise ValueError(f"base must be a finite positive number, got {base}")
    return base


def _table_float64(seq_length: int, dim: int, base: float) -> np.ndarray:
    """The encoding table in NumPy float64, independent of JAX's x64 flag."""
    t = np.arange(seq_length, dtype=np.float64)[:, None]
    j = np.arange(0, dim, 2, dtype=np.float64)  # 2j for the sine columns 0, 2, 4, ...
    inv_wavelength = base ** (-j / dim)
    angles = t * inv_wavelength[None, :]  # (T, ceil(dim/2)), float64
    table = np.empty((seq_length, dim), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : dim // 2])  # odd dim: last sine has no partner
    return table


def positional_encoding(
    seq_length: int, dim: int, *, dtype=jnp.float32, base: float = 10000.0
) -> Float[Array, "seq_length dim"]:
    r"""The sinusoidal position table of shape `(seq_length, dim)`.

    $$P_{t,2j} = \sin\!\big(t\,/\,\mathrm{base}^{2j/\mathrm{dim}}\big), \qquad
      P_{t,2j+1} = \cos\!\big(t\,/\,\mathrm{base}^{2j/\mathrm{dim}}\big),$$

    with positions counted from $t = 0$, so row 0 is $(0, 1, 0, 1, \dots)$. Column pair
    $(2j, 2j+1)$ oscillates with wavelength $2\pi\,\mathrm{base}^{2j/\mathrm{dim}}$, from
    $2\pi$ up to about $2\pi\,\mathrm{base}$.

    **Odd `dim`** is supported: the last column is a sine without a cosine partner. (Most
    libraries reject odd widths; geomlearn needs them for odd-dimensional systems such as
    the 3-dimensional rigid body.)

    **Precision:** the angles and their sines and cosines are computed in NumPy float64,
    whatever JAX's x64 flag says, and rounded *once* to `dtype`. (Computing the angle
    $t\cdot\mathrm{base}^{-2j/\mathrm{dim}}$ in float32 loses about $4\cdot10^{-4}$ at
    $t = 5000$ — far more than one float32 ulp of the result.)

    **Arguments:**

    - `seq_length`: the number of positions `T ≥ 0`.
    - `dim`: the feature dimension, `≥ 1`.
    - `dtype`: the floating dtype of the result (default float32).
    - `base`: the wavelength base, `> 0` (default 10000, as in Vaswani et al.).

    **Returns:** a JAX array of shape `(seq_length, dim)` and dtype `dtype`.
    """
    seq_length = check_int("seq_length", seq_length, minimum=0)
    dim = check_int("dim", dim, minimum=1)
    base = _check_base(base)
    dtype = np.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")
    return jnp.asarray(_table_float64(seq_length, dim, base).astype(dtype), dtype=dtype)


class PositionalEncoding(eqx.Module):
    r"""Add the sinusoidal position table to a window: $Z \mapsto Z + P_{[:T]}$.

    Attention layers are permutation-equivariant along time: shuffling the rows of the
    input window shuffles the output rows the same way, so a transformer integrator
    cannot tell the order of its states except through their values. Adding a fixed,
    position-dependent signal (Vaswani et al., *Attention is all you need*, NeurIPS 2017,
    §3.5) makes the order visible.

    Why this encoding belongs in a structure-preserving toolkit: it **adds a constant**,
    so its Jacobian is exactly the identity. A symplectic or volume-preserving network
    with this layer in front is exactly as symplectic or volume-preserving as it was
    (translations are symplectic and preserve volume).

    Design choices:

    - **Sinusoidal, not learned**: a learned table would add parameters without changing
      the geometry argument, and could not extrapolate to longer windows.
    - **No parameters**: `jax.tree_util.tree_leaves(PositionalEncoding(d)) == []`;
      there is nothing to train and nothing in a checkpoint.
    - **The length is read from each input**: there is no `max_len` and no cached table
      that can go stale; the table for `T = x.shape[-2]` is built by the call that adds it,
      so the result lives on `x`'s device and works under `jit`, `vmap` and `grad`.
    - **float64 trigonometry**: see [`positional_encoding`][geomlearn.positional_encoding].

    **Arguments:**

    - `dim`: the feature dimension `d` of the windows (odd allowed).
    - `base`: the wavelength base (default 10000).

    **Call:** `x` of shape `(..., T, dim)` with any number of leading axes and a floating
    dtype; returns `x + P[:T]` in `x.dtype`.

    ```python
    pe = PositionalEncoding(4)
    z = jnp.zeros((3, 4))
    pe(z)[0]   # (0, 1, 0, 1)
    ```
    """

    dim: int = eqx.field(static=True)
    base: float = eqx.field(static=True)

    def __init__(self, dim: int, *, base: float = 10000.0):
        self.dim = check_int("dim", dim, minimum=1)
        self.base = _check_base(base)

    def __call__(self, x: Float[Array, "... T dim"]) -> Float[Array, "... T dim"]:
        shape = jnp.shape(x)
        if len(shape) < 2:
            raise ValueError(
                f"PositionalEncoding expects an input of shape (..., T, {self.dim}), "
                f"got shape {shape}"
            )
        if shape[-1] != self.dim:
            raise ValueError(
                f"PositionalEncoding(dim={self.dim}) expects last dimension {self.dim}, "
                f"got shape {shape}"
            )
        dtype = jnp.result_type(x)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"PositionalEncoding expects a floating-point input, got {dtype}")
        # A NumPy constant of the input's dtype: added by the same computation, so the
        # result is placed wherever `x` is (and is a compile-time constant under jit).
        table = _table_float64(shape[-2], self.dim, self.base).astype(dtype)
        # Explicit rank match for the leading axes (no implicit rank promotion).
        return x + table.reshape((1,) * (len(shape) - 2) + table.shape)

    def __repr__(self) -> str:
        return f"PositionalEncoding(dim={self.dim}, base={self.base})"
