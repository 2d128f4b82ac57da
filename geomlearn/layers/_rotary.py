r"""The rotary position signal: the window map conjugated by row-wise rotations.

A window $Z \in \mathbb{R}^{T \times d}$ has row $z_t$ at the time $t$ (the row index,
or the row's real time when the model is called with `times`). With $m = \lfloor d/2
\rfloor$, coordinate $k < m$ is paired with coordinate $k + m$: for $d = 2n$ these are the
planes of $(q_k, p_k)$; for odd $d$ the last coordinate is left alone. Row $t$ is turned
in plane $k$ by the angle $\theta_{t,k} = \omega_k t$,
$$R_t = \begin{pmatrix} C_t & -S_t & \\ S_t & C_t & \\ & & 1 \end{pmatrix},\quad
C_t = \operatorname{diag}_k \cos\theta_{t,k},\; S_t = \operatorname{diag}_k
\sin\theta_{t,k},$$
(the last row and column only for odd $d$), and the model's map $F$ becomes
$$\Phi(Z)_t = R_t^{-1}\,F\big((R_s z_s)_{s}\big)_t, \qquad R_t^{-1} = R_t^\top,$$
a conjugation $\mathcal{R}^{-1} \circ F \circ \mathcal{R}$ by the block-diagonal
$\mathcal{R} = \operatorname{diag}_t R_t$.

**Structure for every frequency.** $\mathcal{R}$ is linear and does not depend on the
state, so $D\Phi = \mathcal{R}^{-1} DF\, \mathcal{R}$. Each $R_t$ is orthogonal with
$\det R_t = 1$, and it turns each plane $(q_k, p_k)$ by itself, so
$R_t^\top \mathbb{J} R_t = \mathbb{J}$ ($R_t \in \mathrm{Sp}(2n) \cap \mathrm{O}(2n)$,
$q + ip \mapsto e^{i\theta_t}(q + ip)$). Hence $\det D\Phi = \det DF$ and
$D\Phi^\top (I_T \otimes \mathbb{J}) D\Phi = I_T \otimes \mathbb{J}$ whenever $F$ has
it: the model keeps its structure exactly, whatever the $\omega_k$ and the times.

**Frequencies.** $\omega_k = b^{-k/m}$, $k = 0, \dots, m-1$, with $b = 100$
(`ROTARY_BASE`): the first turns one radian per row, the slowest a wavelength of at most
$2\pi b$ rows, so windows of a few to hundreds of rows see distinct angles. They are
built in NumPy float64 and stored in the parameter dtype (float64 under x64); the
rotation is computed in the window's dtype. `Rotary` learns them, `FixedRotary` keeps
them (`jax.lax.stop_gradient`).

**Why around the whole map.** Rotary embeddings (Su et al., *RoFormer*, 2021) turn the
queries and keys inside softmax attention. In a structure-preserving attention the
weights are built from the very rows they mix (a Cayley transform of a skew
correlation of $Z$); computing them from turned rows and applying them to unturned ones
breaks the volume-preserving and symplectic identities. Turning the whole window in and
back out is a change of coordinates, which keeps them.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float
from .._validation import check_int, float_dtype
from ._real_angles import check_times
from ._signal_protocol import AbstractPositionSignal, no_terms

__all__ = ["ROTARY_BASE", "rotary_frequencies", "RotaryFrequencies", "Rotary", "FixedRotary"]

#: The base $b$ of the frequency ladder $\omega_k = b^{-k/m}$.
ROTARY_BASE = 100.0


def rotary_frequencies(dim: int, base: float = ROTARY_BASE) -> np.ndarray:
    r"""The ladder $\omega_k = b^{-k/m}$, $k < m = \lfloor d/2 \rfloor$, float64 `(m,)`."""
    m = dim // 2
    return float(base) ** (-np.arange(m, dtype=np.float64) / max(m, 1))


class RotaryFrequencies(eqx.Module):
    r"""The frequencies $\omega \in \mathbb{R}^{\lfloor d/2 \rfloor}$ of the rotary signal
    for states of size `dim`: the model's `encoder` field under `"rotary"` and
    `"rotary-fixed"` (module documentation).

    **Arguments:** `dim` (the state size $d \ge 1$), `base` ($b$ of the ladder, default
    `ROTARY_BASE`), `dtype` (of the stored frequencies; default JAX's default float).

    **Raises:** `ValueError`/`TypeError` for a `dim` that is not a positive integer or a
    `base` that is not a finite number above one.
    """

    frequencies: Float[Array, " m"]
    dim: int = eqx.field(static=True)

    def __init__(self, dim: int, *, base: float = ROTARY_BASE, dtype=None):
        self.dim = check_int("dim", dim, minimum=1)
        if isinstance(base, bool) or not isinstance(base, (int, float, np.floating)):
            raise TypeError(f"base must be a real number, got {base!r}")
        if not (np.isfinite(base) and base > 1):
            raise ValueError(f"base must be a finite number above 1, got {base}")
        self.frequencies = jnp.asarray(rotary_frequencies(self.dim, base), float_dtype(dtype))

    def rotate(self, Z: Float[Array, "... T d"], times=None, *, inverse: bool = False,
               learned: bool = True) -> Float[Array, "... T d"]:
        r"""The rows of `Z` turned by $R_t$ (by $R_t^{-1}$ with `inverse`), in `Z`'s dtype:
        $(q_k, p_k) \mapsto (c\,q_k - s\,p_k,\; s\,q_k + c\,p_k)$, $c = \cos\theta_{t,k}$,
        $s = \pm\sin\theta_{t,k}$. Without `learned` no gradient reaches the frequencies.

        **Raises:** `ValueError` for a last axis other than `dim` or `times` not `(T,)`
        (see `check_times`), `TypeError` for non-real times.
        """
        if Z.ndim < 2 or Z.shape[-1] != self.dim:
            raise ValueError(f"the rotary signal expects windows (..., T, {self.dim}), "
                             f"got shape {tuple(Z.shape)}")
        T, m = Z.shape[-2], self.dim // 2
        if times is None:
            t = jnp.arange(T, dtype=Z.dtype)
        else:
            t = jnp.asarray(check_times(times, T, "the rotary signal")).astype(Z.dtype)
        omega = self.frequencies if learned else jax.lax.stop_gradient(self.frequencies)
        theta = t[:, None] * omega.astype(Z.dtype)[None, :]
        lead = (1,) * (Z.ndim - 2)
        c = jnp.cos(theta).reshape(lead + theta.shape)
        s = jnp.sin(theta).reshape(lead + theta.shape)
        if inverse:
            s = -s  # exactly the sine of -theta: R_t^{-1} = R_t^T
        q, p, rest = Z[..., :m], Z[..., m:2 * m], Z[..., 2 * m:]
        return jnp.concatenate([c * q - s * p, s * q + c * p, rest], axis=-1)


class _AbstractRotary(AbstractPositionSignal):
    r"""Conjugation by row-wise rotations, $Z \mapsto \mathcal{R}^{-1} F(\mathcal{R} Z)$
    (module documentation); `learned` says whether the frequencies train."""

    learned: eqx.AbstractClassVar[bool]
    starts_plain: ClassVar[bool] = False  # the rotations are not the identity

    def encoder(self, dim: int) -> RotaryFrequencies:
        return RotaryFrequencies(dim)

    def init(self, slots, dtype) -> None:
        return None

    def row_terms(self, gains, slots, T, times=None):
        return no_terms(slots)

    def encode(self, encoder, Z, times=None):
        return encoder.rotate(Z, times, learned=self.learned)

    def decode(self, encoder, Y, times=None):
        return encoder.rotate(Y, times, inverse=True, learned=self.learned)

    def undo_encode(self, encoder, Z, times=None):
        return encoder.rotate(Z, times, inverse=True, learned=self.learned)

    def undo_decode(self, encoder, Y, times=None):
        return encoder.rotate(Y, times, learned=self.learned)


class Rotary(_AbstractRotary):
    r"""Rotary conjugation with learned frequencies (`"rotary"`):
    $\Phi(Z)_t = R_t^{-1} F(\mathcal{R}Z)_t$, $R_t$ turning each plane $(q_k, p_k)$ by
    $\omega_k t$; the $\lfloor d/2 \rfloor$ frequencies (`model.encoder.frequencies`,
    started on the ladder $\omega_k = 100^{-k/m}$) are parameters of the model. Exactly
    symplectic and volume-preserving conjugation for every frequency."""

    name: ClassVar[str] = "rotary"
    learned: ClassVar[bool] = True


class FixedRotary(_AbstractRotary):
    r"""Rotary conjugation with fixed frequencies (`"rotary-fixed"`): as
    [`Rotary`][geomlearn.Rotary], but no gradient reaches the frequencies
    (`jax.lax.stop_gradient` in the call). They stay an array of the model, so a file
    records them and `eqx.tree_at` can set them (to a system's known periods, say); an
    optimiser with decoupled weight decay would still shrink them, so leave them out of
    its mask."""

    name: ClassVar[str] = "rotary-fixed"
    learned: ClassVar[bool] = False
