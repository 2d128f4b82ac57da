r"""The position signal of a transformer integrator: one final object per placement.

A transformer integrator maps a window $Z \in \mathbb{R}^{T \times d}$ (row $t$ the state
at time $t$) to a window; its attention and row-wise layers are permutation-equivariant
along time, so without a position signal it cannot tell the order of its rows. Every
signal keeps the model's structure (symplectic or volume-preserving) exactly:

| shorthand | object | the model map |
|---|---|---|
| `False` / `None` | `NoSignal()` | $F(Z)$ |
| `"input"` | `InputTable()` | $F(Z + P)$, the sinusoidal table $P$ (a translation) |
| `"scaled"` | `ScaledTable()` | $F(Z + s P_{\text{short}})$, $s = 0.1$, frequencies $2^{-j}$ |
| `"conjugate"` | `Conjugate()` | $F(Z + P) - P$ |
| `"bias"` | `PositionBias()` | $\sigma(Wx_t + b + G e_t)$ in the first row-wise layer of each unit |
| `"amplitude"` | `PositionAmplitude()` | $x_t + h_t f(x_t)$, $h_t = 1 + g_l^\top e_t$, every row-wise layer $l$ |
| `"split-amplitude"` | `PositionSplitAmplitude()` | one step per triangular half of a unit (VPT only) |
| `"rotary"` | `Rotary()` | $R_t^{-1} F(\mathcal{R}Z)_t$, row $t$ turned by $\omega_k t$ in each plane $(q_k, p_k)$, learned $\omega$ |
| `"rotary-fixed"` | `FixedRotary()` | the same with the frequencies $\omega$ fixed (`geomlearn.layers._rotary`) |

Here $e_t \in \mathbb{R}^2$ are the centred features $(\sin t, \cos t) - \text{mean}$ of
the window's rows ($t$ the row index, or the row's real time when the model is called
with `times`; every table is then evaluated at the times) and the gains $G$, $g$ start at zero, so that at initialisation the
model is the one without a signal. A row-dependent bias keeps a gradient layer the
gradient of a potential and a triangular shear unit triangular; a row-dependent step
scales a potential or a shear by a number. `True` means the family's default
(`default_placement` of the model class).

**Protocol.** The model describes its row-wise layers as `RowSlot`s; the signal builds
its gains for them (`init`), says per slot what enters on each row (`row_terms`: a shift
of the layer's argument, a bias of its pre-activation, a step of its increment), and
moves the window in front of and behind the model's map (`encode`, `decode`, their
inverses `undo_encode`, `undo_decode`). The model applies the terms; it never asks the
signal what kind it is.

**Names.** `resolve_position_signal` turns a bool, a shorthand or an object into the
object once, in the constructor; the model stores its `name` (never `True`; `None` for
no signal), so a saved file records what was built and a new default changes no file. Names that only files of earlier versions record are
registered by `geomlearn.io` (`register_retired_placement`); they are not shorthands.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .positional import PositionalEncoding
from .positional import positional_encoding as _position_table
from ._real_angles import table_at_times
from ._rotary import FixedRotary, Rotary
from ._signal_protocol import AbstractPositionSignal, RowSlot, RowTerms
from ._signal_protocol import no_terms as _no_terms

__all__ = [
    "AbstractPositionSignal",
    "AbstractPositionBias",
    "NoSignal",
    "InputTable",
    "ScaledTable",
    "Conjugate",
    "PositionBias",
    "PositionAmplitude",
    "PositionSplitAmplitude",
    "Rotary",
    "FixedRotary",
    "RowSlot",
    "RowTerms",
    "PLACEMENTS",
    "SHARED_PLACEMENTS",
    "N_POSITION_FEATURES",
    "SCALED_AMPLITUDE",
    "resolve_position_signal",
    "register_retired_placement",
    "retired_placements",
    "position_bias",
    "position_amplitude",
    "gradient_layer_with_bias",
    "resnet_layer_with_bias",
]

#: The static amplitude $s$ of the `"scaled"` table.
SCALED_AMPLITUDE = 0.1
#: The number $m$ of position features $e_t \in \mathbb{R}^m$: one sine/cosine pair.
N_POSITION_FEATURES = 2


def _short_base(m: int) -> float:
    r"""The base for which the $m$ columns of the sinusoidal table have the frequencies
    $\omega_j = 2^{-j}$: wavelengths $2\pi, 4\pi, \dots$ rows, matched to short windows."""
    return float(2.0 ** (m / 2.0))


def _position_features(T: int, dtype, m: int, times=None):
    r"""The features $e_t \in \mathbb{R}^m$ of the rows $t = 0, \dots, T-1$ (or of the
    real `times` `(T,)` of the rows), `(T, m)`: the table with frequencies $2^{-j}$,
    centred over the window (the constant part of a bias is the layer's own $b$;
    centring keeps the gains from duplicating it)."""
    if times is None:
        E = _position_table(T, m, dtype=dtype, base=_short_base(m))
    else:
        E = table_at_times(times, m, _short_base(m), dtype)
    return E - jnp.mean(E, axis=0, keepdims=True)


def position_bias(gain, T: int, times=None):
    r"""The per-row bias $c_t = G e_t$, `(T, rows)`, of a gain `(rows, m)`, in its dtype
    (the features of the rows' `times` when given)."""
    E = _position_features(T, gain.dtype, gain.shape[-1], times)
    return E @ gain.T


def position_amplitude(gain, T: int, times=None):
    r"""The per-row step $h_t = 1 + g^\top e_t$, `(T,)`, of a gain `(1, m)`, in its dtype."""
    return 1 + position_bias(gain, T, times)[:, 0]


def gradient_layer_with_bias(layer, z, c, h=None):
    r"""A gradient layer at one point `z` with its bias $b$ replaced by $b + c$ (and its
    increment scaled by the step `h`): still the gradient of the potential
    $\sum_i a_i \Sigma\big((Kx + b + c)_i\big)$ of its unchanged half $x$."""
    shifted = eqx.tree_at(lambda l: l.b, layer, layer.b + c)
    return shifted(z) if h is None else shifted(z, h)


def resnet_layer_with_bias(layer, Z, C=None, H=None):
    r"""A residual layer $x_t \mapsto x_t + h_t\,\sigma(W x_t + b + c_t)$ on every row
    $t$: biases `C` `(T, width)` and steps `H` `(T,)` (`None`: $c_t = 0$, $h_t = 1$)."""
    dtype = Z.dtype
    sigma = resolve_activation(layer.activation)
    pre = Z @ layer.weight.astype(dtype).T
    if layer.bias is not None:
        pre = pre + layer.bias.astype(dtype)[None, :]
    if C is not None:
        pre = pre + C.astype(dtype)
    increment = sigma(pre)
    if H is not None:
        increment = H.astype(dtype)[:, None] * increment
    return Z + increment


class _AbstractRowSignal(AbstractPositionSignal):
    """A signal that does not translate the window (it acts inside row-wise layers)."""

    def encoder(self, dim: int) -> None:
        return None

    def encode(self, encoder, Z, times=None):
        return Z

    def decode(self, encoder, Y, times=None):
        return Y

    def undo_encode(self, encoder, Z, times=None):
        return Z

    def undo_decode(self, encoder, Y, times=None):
        return Y


class _AbstractTranslation(AbstractPositionSignal):
    """A signal that translates the window by a sinusoidal table (no gains)."""

    starts_plain: ClassVar[bool] = False

    def init(self, slots, dtype) -> None:
        return None

    def row_terms(self, gains, slots, T, times=None):
        return _no_terms(slots)


class NoSignal(_AbstractRowSignal):
    """No position signal (`positional_encoding=False` or `None`): the map $F(Z)$."""

    name: ClassVar[None] = None

    def init(self, slots, dtype) -> None:
        return None

    def row_terms(self, gains, slots, T, times=None):
        return _no_terms(slots)


class AbstractPositionBias(_AbstractRowSignal):
    r"""A position bias $x_t \mapsto x_t + \sigma(Wx_t + b + G e_t)$ with zero-initialised
    gains $G$: in the first biased slot of each unit, or in every one (`every_layer`).
    With `through_argument`, a slot with an argument takes the shift $G e_t$ of it
    (a gradient layer: $K G e_t$ in its pre-activation), else the bias itself.
    The class variables fix the design: `features` ($m$), `every_layer`,
    `through_argument`."""

    features: eqx.AbstractClassVar[int]
    every_layer: eqx.AbstractClassVar[bool]
    through_argument: eqx.AbstractClassVar[bool]

    def _chosen(self, slots) -> tuple[int, ...]:
        seen, chosen = set(), []
        for i, slot in enumerate(slots):
            if slot.biased and (self.every_layer or slot.unit not in seen):
                chosen.append(i)
                seen.add(slot.unit)
        return tuple(chosen)

    def _shifts(self, slot) -> bool:
        return self.through_argument and slot.argument is not None

    def init(self, slots, dtype):
        return tuple(
            jnp.zeros((slots[i].argument if self._shifts(slots[i]) else slots[i].width,
                       self.features), dtype)
            for i in self._chosen(slots))

    def row_terms(self, gains, slots, T, times=None):
        terms = list(_no_terms(slots))
        for i, gain in zip(self._chosen(slots), gains):
            C = position_bias(gain, T, times)
            terms[i] = RowTerms(shift=C) if self._shifts(slots[i]) else RowTerms(bias=C)
        return tuple(terms)


class PositionBias(AbstractPositionBias):
    r"""The position bias (`"bias"`): two features $e_t$ in the first biased row-wise
    layer of each unit; a gradient layer takes them as a shift $G e_t \in \mathbb{R}^n$
    of its argument (the unchanged half), other layers as a bias $G e_t$."""

    name: ClassVar[str] = "bias"
    features: ClassVar[int] = N_POSITION_FEATURES
    every_layer: ClassVar[bool] = False
    through_argument: ClassVar[bool] = True


class PositionAmplitude(_AbstractRowSignal):
    r"""The position amplitude (`"amplitude"`): every row-wise layer with an increment,
    $x_t \mapsto x_t + f(x_t)$, becomes $x_t \mapsto x_t + h_t\,f(x_t)$ with the step
    $h_t = 1 + g_l^\top e_t$ and a gain $g_l \in \mathbb{R}^{1 \times 2}$ per layer,
    initialised to zero: two parameters per layer, whatever the dimension and width."""

    name: ClassVar[str] = "amplitude"

    def init(self, slots, dtype):
        return tuple(jnp.zeros((1, N_POSITION_FEATURES), dtype) for s in slots if s.steps)

    def row_terms(self, gains, slots, T, times=None):
        steps = iter(gains)
        return tuple(RowTerms(step=position_amplitude(next(steps), T, times)) if s.steps
                     else RowTerms() for s in slots)


class PositionSplitAmplitude(_AbstractRowSignal):
    r"""The position amplitude by halves (`"split-amplitude"`): the lower triangular
    layers of a unit take the step $h^{\mathrm{lo}}_t = 1 + g_{\mathrm{lo}}^\top e_t$, the
    upper ones $h^{\mathrm{up}}_t = 1 + g_{\mathrm{up}}^\top e_t$ — gains `(lower,
    upper)` per unit, four parameters. Only layers with halves (the volume-preserving
    transformer's shears) take it: `ValueError` for others."""

    name: ClassVar[str] = "split-amplitude"

    def _units(self, slots) -> tuple[int, ...]:
        if any(s.steps and s.lower is None for s in slots):
            raise ValueError("positional_encoding='split-amplitude' needs lower and upper "
                             "triangular layers (the volume-preserving transformer's)")
        return tuple(dict.fromkeys(s.unit for s in slots if s.steps))

    def init(self, slots, dtype):
        return tuple(jnp.zeros((1, N_POSITION_FEATURES), dtype)
                     for _ in self._units(slots) for _half in range(2))

    def row_terms(self, gains, slots, T, times=None):
        index = {u: 2 * k for k, u in enumerate(self._units(slots))}
        return tuple(
            RowTerms(step=position_amplitude(gains[index[s.unit] + (not s.lower)], T, times))
            if s.steps else RowTerms() for s in slots)


def _table_of(encoder: PositionalEncoding, Z, times):
    """The table `encoder(Z, times)` adds (rows `0..T-1` or the real `times`), in `Z`'s
    dtype, rounded once."""
    if times is None:
        return _position_table(Z.shape[0], encoder.dim, dtype=Z.dtype)
    return table_at_times(times, encoder.dim, encoder.base, Z.dtype)


class InputTable(_AbstractTranslation):
    r"""The table in front (`"input"`): $Z \mapsto F(Z + P)$, sinusoidal $P$ of base $10^4$."""

    name: ClassVar[str] = "input"

    def encoder(self, dim: int) -> PositionalEncoding:
        return PositionalEncoding(dim)

    def encode(self, encoder, Z, times=None):
        return encoder(Z, times)

    def decode(self, encoder, Y, times=None):
        return Y

    def undo_encode(self, encoder, Z, times=None):
        # The same float64 table, rounded once to Z's dtype, that the encoding added.
        return Z - _table_of(encoder, Z, times)

    def undo_decode(self, encoder, Y, times=None):
        return Y


class ScaledTable(_AbstractTranslation):
    r"""A small table in front (`"scaled"`): $Z \mapsto F(Z + s P_{\text{short}})$ with
    $s = 0.1$ and the frequencies $2^{-j}$ (wavelengths matched to short windows)."""

    name: ClassVar[str] = "scaled"

    def encoder(self, dim: int) -> PositionalEncoding:
        return PositionalEncoding(dim, base=_short_base(dim))

    def encode(self, encoder, Z, times=None):
        return Z + jnp.asarray(SCALED_AMPLITUDE, Z.dtype) * encoder(jnp.zeros_like(Z), times)

    def decode(self, encoder, Y, times=None):
        return Y

    def undo_encode(self, encoder, Z, times=None):
        return Z - self.encode(encoder, jnp.zeros_like(Z), times)

    def undo_decode(self, encoder, Y, times=None):
        return Y


class Conjugate(_AbstractTranslation):
    r"""Conjugation by the table (`"conjugate"`): $Z \mapsto F(Z + P) - P$."""

    name: ClassVar[str] = "conjugate"

    def encoder(self, dim: int) -> PositionalEncoding:
        return PositionalEncoding(dim)

    def encode(self, encoder, Z, times=None):
        return encoder(Z, times)

    def decode(self, encoder, Y, times=None):
        # The same table, rounded once to Y's dtype.
        return Y - _table_of(encoder, Y, times)

    def undo_encode(self, encoder, Z, times=None):
        return Z - _table_of(encoder, Z, times)

    def undo_decode(self, encoder, Y, times=None):
        return encoder(Y, times)


#: The shorthands `positional_encoding` accepts, in the order of the error message.
PLACEMENTS: dict[str, AbstractPositionSignal] = {
    s.name: s for s in (InputTable(), ScaledTable(), Conjugate(), PositionBias(),
                        PositionAmplitude(), PositionSplitAmplitude(), Rotary(), FixedRotary())
}
#: The shorthands of every family; `"split-amplitude"` needs the triangular halves of the
#: volume-preserving transformer's feed-forward networks.
SHARED_PLACEMENTS = tuple(name for name in PLACEMENTS if name != "split-amplitude")

# Signals that files of earlier versions record by name (`register_retired_placement`).
_RETIRED: dict[str, AbstractPositionSignal] = {}


def register_retired_placement(signal: AbstractPositionSignal) -> AbstractPositionSignal:
    """Accept `signal.name` as a name of `signal` in `resolve_position_signal` without
    offering it as a shorthand: a placement that only files of earlier versions record
    (`geomlearn.io` registers them). Returns `signal`."""
    if not isinstance(signal, AbstractPositionSignal) or not isinstance(signal.name, str):
        raise TypeError(f"expected a named position signal, got {signal!r}")
    if signal.name in PLACEMENTS:
        raise ValueError(f"{signal.name!r} is a shorthand, not a retired placement")
    _RETIRED[signal.name] = signal
    return signal


def retired_placements() -> dict[str, AbstractPositionSignal]:
    """The retired placements by name (a copy)."""
    return dict(_RETIRED)


def resolve_position_signal(value, default: str,
                            accepted: tuple[str, ...]) -> AbstractPositionSignal:
    """The signal `positional_encoding=value` means for a model family, resolved once.

    `value`: `True` (the family's `default`), `False` or `None` (`NoSignal()`), a
    shorthand in `accepted` (the family's), a retired name, or a signal object (its
    name in `accepted` or retired). `ValueError` naming the shorthands for an unknown
    name or an object the family cannot take, `TypeError` for anything else."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return PLACEMENTS[default] if value else NoSignal()
    choices = f"positional_encoding must be a bool or one of {tuple(accepted)} (or a signal object)"
    if isinstance(value, str):
        signal = PLACEMENTS.get(value) if value in accepted else _RETIRED.get(value)
        if signal is None:
            raise ValueError(f"{choices}, got {value!r}")
        return signal
    if isinstance(value, AbstractPositionSignal):
        if value.name is not None and value.name not in accepted and value.name not in _RETIRED:
            raise ValueError(f"{choices}, got {value!r}")
        return value
    raise TypeError(f"{choices}, got {value!r} ({type(value).__name__})")
