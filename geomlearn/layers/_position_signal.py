r"""Where the position signal of a transformer integrator enters: one object per placement.

A transformer integrator maps a window $Z \in \mathbb{R}^{T \times d}$ (row $t$ the
state at time $t$) to a window. Its attention and row-wise layers are
permutation-equivariant along time, so without a position signal the model cannot tell
the order of its rows. `positional_encoding` of every transformer names one of these
placements, each of which keeps the model's structure (symplectic or volume-preserving)
exactly, for every parameter value:

| `positional_encoding` | object | the model map |
|---|---|---|
| `False` | `NoSignal` | $F(Z)$ |
| `"input"` | `InputTable` | $F(Z + P)$, with the sinusoidal table $P$ (a translation) |
| `"scaled"` | `ScaledTable` | $F(Z + s P_{\text{short}})$, $s = 0.1$, frequencies $2^{-j}$ |
| `"conjugate"` | `Conjugate` | $F(Z + P) - P$ (conjugation by a translation) |
| `"bias"` (`True` of the VPT until 2026-12-03, in files of layout 1, which load as it) | `PositionBias()` | a bias $G e_t$ of row $t$, once per unit, with $m = 2$ features |
| `"bias-light"` | `PositionBias(2, every_layer=True)` | two features in every row-wise layer (the symplectic transformers: a shift of each gradient layer's argument; `True` of the symplectic and standard transformers in files of layout 2, which load as it) |
| `"bias-every-layer"` | `PositionBias(8, every_layer=True, shift=False)` | a bias $G e_t$ in every row-wise layer, $m = 8$ (the earlier bias design, what `True` meant in files of layout 1, which load as it) |
| `"amplitude"` (`True` of the symplectic, the linear symplectic and the standard transformer) | `PositionAmplitude()` | the increment of every row-wise layer scaled by $h_t = 1 + g^\top e_t$ on row $t$, two parameters per layer |
| `"split-amplitude"` (`True` of the VPT) | `PositionSplitAmplitude()` | the same with one step for the lower and one for the upper triangular layers of a unit, four parameters per unit (the volume-preserving transformer only) |

The string (or bool) is turned into its object once, in the model's constructor
(`parse_positional_encoding`), and the model asks the object; it never compares the
name again. Each object builds its parts — the parameterless
[`PositionalEncoding`][geomlearn.PositionalEncoding] a translation adds, or the
zero-initialised gains $G$ of the position bias — and applies the translation in front
(`encode`) and behind (`decode`) of the model's own map, and undoes them for an exact
inverse (`undo_encode`, `undo_decode`).

**The position bias.** A layer $x \mapsto x + \sigma(Wx + b)$ applied to row $t$ becomes
$x_t \mapsto x_t + \sigma(Wx_t + b + G e_t)$ with features $e_t \in \mathbb{R}^m$ of the
row (`position_bias`). The Jacobian of every row is the layer's own with a shifted
argument, so a gradient layer stays the gradient of a potential (symplectic) and a
triangular shear stays unit triangular (volume-preserving). The gains start at zero,
so at initialisation the model is bit for bit the one without encoding.

**Where, and how many.** Each gain adds (rows × $m$) parameters, and a
Levenberg–Marquardt iteration costs $\propto P^2$ in the parameter count $P$ (the
Gauss–Newton matrix $J^\top J$), so the position bias takes $m = 2$ features
$e_t = (\sin t, \cos t) - \text{mean}$: `PositionBias()` (`"bias"`) **once per unit**
(`PositionBias.select` names the layers; the models document where and how many
parameters that is) — after the first biased layer the row's state carries the position
on, though through the command line that gained nothing on the driven pendulum for the
volume-preserving transformer at one unit, whose `True` became `"split-amplitude"`;
`PositionBias(2, every_layer=True)` (`"bias-light"`) in every row-wise layer (the
standard transformer's `True` until 2026-12-04; measured:
docs/concepts/positional_encoding.md), at $2n$ parameters per gradient layer of a
symplectic transformer (a shift of its argument, whatever its width).
`PositionBias(8, every_layer=True, shift=False)` (`"bias-every-layer"`) is the earlier
bias design, a gain of eight features in every row-wise layer.

**The position amplitude.** `PositionAmplitude()` (`"amplitude"`) does not move a
layer's argument; it scales its increment on row $t$ by the step
$h_t = 1 + g_l^\top e_t$ (`position_amplitude`), with one gain $g_l \in \mathbb{R}^2$
per row-wise layer $l$, whatever the state dimension and width: two parameters per layer.
A gradient layer with a step $h_t$ is still the gradient of the potential
$h_t \sum_i a_i \Sigma\big((Kx + b)_i\big)$ of its unchanged half (a symplectic
shear), a triangular layer $x + h_t\,\sigma(Wx + b)$ still has a unit triangular
Jacobian, and $h_t$ depends on the row's index only, never on the state. A forcing that
modulates the strength of a potential — the driven pendulum's
$(1 + \varepsilon\cos\Omega t)(1 - \cos q)$ — is of this form. The gains start at
zero ($h_t = 1$: the model without encoding).

`PositionSplitAmplitude()` (`"split-amplitude"`, the volume-preserving transformer's
`True`) ties the steps by halves: a feed-forward network of that model alternates lower
and upper triangular shears, and all lower layers of a unit take one step, all upper
ones another — four parameters per unit, whatever the number of layers (the per-layer
amplitude: four per block). Through the command line on the driven pendulum it gained
7.0× where the per-layer amplitude gained 19× (24 parameters added) and `"bias"`
nothing (4 added, as by the halves; benchmarks/RESULTS.md).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._activations import resolve_activation
from .positional import PositionalEncoding
from .positional import positional_encoding as _position_table

__all__ = [
    "AbstractPositionSignal",
    "NoSignal",
    "InputTable",
    "ScaledTable",
    "Conjugate",
    "PositionBias",
    "PositionAmplitude",
    "PositionSplitAmplitude",
    "PLACEMENTS",
    "SHARED_PLACEMENTS",
    "DEFAULT_PLACEMENT",
    "N_POSITION_FEATURES",
    "N_LAYERWISE_FEATURES",
    "SCALED_AMPLITUDE",
    "parse_positional_encoding",
    "position_bias",
    "position_amplitude",
    "gradient_layer_with_bias",
    "resnet_layer_with_bias",
]

#: The static amplitude $s$ of the `"scaled"` placement's table.
SCALED_AMPLITUDE = 0.1
#: The number $m$ of position features $e_t \in \mathbb{R}^m$ of the `"bias"` placement:
#: one sine/cosine pair, $e_t = (\sin t, \cos t)$ centred.
N_POSITION_FEATURES = 2
#: The number of features of the `"bias-every-layer"` placement (the earlier bias design).
N_LAYERWISE_FEATURES = 8


def _short_base(m: int) -> float:
    r"""The base for which the $m$ columns of the sinusoidal table have the frequencies
    $\omega_j = 2^{-j}$ ($j = 0, 1, \dots$): wavelengths $2\pi, 4\pi, 8\pi, \dots$ rows,
    matched to windows of a few rows (with base $10^4$ a window of 3–8 rows sees almost
    one frequency)."""
    return float(2.0 ** (m / 2.0))


def _position_features(T: int, dtype, m: int):
    r"""The features $e_t \in \mathbb{R}^m$ of the rows $t = 0, \dots, T-1$, shape
    `(T, m)`: the sinusoidal table with frequencies $2^{-j}$, **centred over the window**
    (its mean row subtracted). The constant part of a bias is the layer's own $b$;
    centring keeps the gains from duplicating it (a redundant direction that slows
    least-squares training)."""
    E = _position_table(T, m, dtype=dtype, base=_short_base(m))
    return E - jnp.mean(E, axis=0, keepdims=True)


def position_bias(gain, T: int):
    r"""The per-row bias $c_t = G e_t$, shape `(T, rows)`, in the gain's dtype (the number
    of features $m$ is the gain's second dimension)."""
    E = _position_features(T, gain.dtype, gain.shape[-1])
    return E @ gain.T


def position_amplitude(gain, T: int):
    r"""The per-row step $h_t = 1 + g^\top e_t$, shape `(T,)`, of a gain `(1, m)` (in
    the gain's dtype): the factor `"amplitude"` scales a row-wise layer's increment by."""
    return 1 + position_bias(gain, T)[:, 0]


def gradient_layer_with_bias(layer, z, c):
    r"""A gradient layer with its bias $b$ replaced by $b + c$ for one point `z`.

    The increment is still the gradient of $\sum_i a_i \Sigma\big((Kx + b + c)_i\big)$, a
    potential of the unchanged half $x$, so the layer stays a symplectic shear."""
    return eqx.tree_at(lambda l: l.b, layer, layer.b + c)(z)


def resnet_layer_with_bias(layer, Z, C=None, H=None):
    r"""A residual layer $x_t \mapsto x_t + h_t\,\sigma(W x_t + b + c_t)$ on every row
    $t$: with the biases `C` `(T, width)` and the steps `H` `(T,)` (`None`: $c_t = 0$,
    $h_t = 1$)."""
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


# --------------------------------------------------------------------------------------


class AbstractPositionSignal(eqx.Module):
    """Where the position signal enters a transformer integrator (see the module
    documentation). Instances have only static fields: they are hashable and are stored
    as static fields of the models; the parts they build (a table, gains) are the
    model's fields."""

    @abc.abstractmethod
    def encoder(self, dim: int) -> PositionalEncoding | None:
        """The parameterless table a translation adds (`None`: no translation)."""

    @abc.abstractmethod
    def zero_gains(self, rows, dtype, m: int | None = None):
        """Zero gains `(r, m)` for every row count `r` in the pytree `rows` (the same
        pytree of arrays; `m` defaults to the placement's number of features), or `None`
        for a placement without a position bias."""

    def select(self, candidates) -> tuple:
        """Which of a unit's row-wise layers (`candidates`, in order) take a position
        bias: none (a placement without gains)."""
        return ()

    def layerwise(self) -> bool:
        """Whether the position bias is in every row-wise layer (`"bias-light"`,
        `"bias-every-layer"`) rather than once per unit."""
        return False

    def shifts_argument(self) -> bool:
        r"""Whether a gradient layer takes the bias as a shift $G e_t \in \mathbb{R}^n$ of
        its argument ($K G e_t$ in its pre-activation) rather than as $G e_t$ itself."""
        return False

    def scales_increment(self) -> bool:
        r"""Whether the position enters as a step $h_t = 1 + g^\top e_t$ scaling the
        selected layers' increments (gains `(1, m)`, `position_amplitude`) rather than as
        a bias."""
        return False

    def per_half(self) -> bool:
        """Whether the scaled layers of a unit share two steps, one for its lower and one
        for its upper triangular layers (the two halves of a splitting), rather than
        taking one step each (gains: one pair per unit)."""
        return False

    @abc.abstractmethod
    def encode(self, encoder, Z):
        """The window in front of the model's map (the translation, if any)."""

    @abc.abstractmethod
    def decode(self, encoder, Y):
        """The window behind the model's map (the translation back, if any)."""

    @abc.abstractmethod
    def undo_encode(self, encoder, Z):
        """The inverse of `encode`."""

    @abc.abstractmethod
    def undo_decode(self, encoder, Y):
        """The inverse of `decode`."""


class _AbstractRowSignal(AbstractPositionSignal):
    """A placement that does not translate the window."""

    def encoder(self, dim: int) -> None:
        return None

    def encode(self, encoder, Z):
        return Z

    def decode(self, encoder, Y):
        return Y

    def undo_encode(self, encoder, Z):
        return Z

    def undo_decode(self, encoder, Y):
        return Y


class _AbstractTranslation(AbstractPositionSignal):
    """A placement that translates the window by a sinusoidal table (no gains)."""

    def zero_gains(self, rows, dtype, m: int | None = None) -> None:
        return None


class NoSignal(_AbstractRowSignal):
    """No position signal (`positional_encoding=False`): the model map $F(Z)$."""

    def zero_gains(self, rows, dtype, m: int | None = None) -> None:
        return None


class PositionBias(_AbstractRowSignal):
    r"""The position bias: the layers the model names receive
    $x_t \mapsto x_t + \sigma(Wx_t + b + G e_t)$ on row $t$, with the centred sinusoidal
    features $e_t \in \mathbb{R}^m$ (frequencies $2^{-j}$) and learned gains $G$
    initialised to zero (`position_bias`).

    `PositionBias()` (`"bias"`, `positional_encoding=True` of the VPT): $m = 2$
    features, in the first row-wise layer of each unit (`select`).
    `PositionBias(2, every_layer=True)` (`"bias-light"`): in every row-wise layer.
    `PositionBias(8, every_layer=True, shift=False)` (`"bias-every-layer"`): $m = 8$
    features in every row-wise layer, a bias $G e_t$ in gradient layers too.

    **Fields** (static): `features` ($m \ge 1$), `every_layer` (bool), `shift` (bool:
    gradient layers take the bias as a shift of their argument, `shifts_argument`)."""

    features: int = eqx.field(static=True, default=N_POSITION_FEATURES)
    every_layer: bool = eqx.field(static=True, default=False)
    shift: bool = eqx.field(static=True, default=True)

    def select(self, candidates) -> tuple:
        """Which of a unit's row-wise layers (`candidates`, in order) take a bias: the
        first one, or every one when `every_layer`."""
        candidates = tuple(candidates)
        return candidates if self.every_layer else candidates[:1]

    def layerwise(self) -> bool:
        return self.every_layer

    def shifts_argument(self) -> bool:
        return self.shift

    def zero_gains(self, rows, dtype, m: int | None = None):
        m = self.features if m is None else m
        return jax.tree_util.tree_map(lambda r: jnp.zeros((r, m), dtype), rows)


class PositionAmplitude(_AbstractRowSignal):
    r"""The position amplitude (`"amplitude"`): every row-wise layer the model names
    ($x_t \mapsto x_t + f(x_t)$, a gradient, triangular or residual layer) becomes
    $x_t \mapsto x_t + h_t\,f(x_t)$ on row $t$, with the step
    $h_t = 1 + g_l^\top e_t$ (`position_amplitude`), the centred sinusoidal features
    $e_t \in \mathbb{R}^m$ and a gain $g_l \in \mathbb{R}^m$ per layer (stored as
    `(1, m)`) initialised to zero: $m$ parameters per layer, independent of the state
    dimension and the width. A step that depends on the row only keeps a gradient layer
    a symplectic shear and a triangular layer volume-preserving.

    **Fields** (static): `features` ($m \ge 1$, default 2)."""

    features: int = eqx.field(static=True, default=N_POSITION_FEATURES)

    def select(self, candidates) -> tuple:
        """Every candidate layer of a unit takes an amplitude."""
        return tuple(candidates)

    def layerwise(self) -> bool:
        return True

    def scales_increment(self) -> bool:
        return True

    def zero_gains(self, rows, dtype, m: int | None = None):
        """Zero gains `(1, m)`, one per entry of the pytree `rows` (its values, the row
        counts a bias would need, do not matter: a step is one scalar per row)."""
        m = self.features if m is None else m
        return jax.tree_util.tree_map(lambda r: jnp.zeros((1, m), dtype), rows)


class PositionSplitAmplitude(PositionAmplitude):
    r"""The position amplitude by halves (`"split-amplitude"`, `True` of the
    volume-preserving transformer): the nonlinear triangular layers of a unit take the
    step $h^{\mathrm{lo}}_t = 1 + g_{\mathrm{lo}}^\top e_t$ if lower and
    $h^{\mathrm{up}}_t = 1 + g_{\mathrm{up}}^\top e_t$ if upper triangular: the
    feed-forward network alternates lower and upper shears, the two halves of a
    splitting, and each half advances by its own row-dependent step — $2m$ parameters
    per unit, whatever the dimension and the number of blocks. Each layer stays a
    unit-triangular shear, so the volume is preserved for every parameter value, and at
    zero gains the model is the one without encoding.

    Only the volume-preserving transformer has the two halves; the other families refuse
    this name (`parse_positional_encoding`'s `accepted`)."""

    def per_half(self) -> bool:
        return True

    def zero_gains(self, rows, dtype, m: int | None = None):
        """Zero gains `((1, m), (1, m))` — lower, upper — for every unit, one per entry of
        the tuple `rows` (a unit's entry, its layers' row counts, does not matter)."""
        m = self.features if m is None else m
        return tuple((jnp.zeros((1, m), dtype), jnp.zeros((1, m), dtype)) for _ in rows)


class InputTable(_AbstractTranslation):
    r"""The table in front (`"input"`): $Z \mapsto F(Z + P)$ with the sinusoidal table
    $P$ of base $10^4$."""

    def encoder(self, dim: int) -> PositionalEncoding:
        return PositionalEncoding(dim)

    def encode(self, encoder, Z):
        return encoder(Z)

    def decode(self, encoder, Y):
        return Y

    def undo_encode(self, encoder, Z):
        # The same float64 table, rounded once to Z's dtype, that the encoding added.
        return Z - _position_table(Z.shape[0], encoder.dim, dtype=Z.dtype)

    def undo_decode(self, encoder, Y):
        return Y


class ScaledTable(_AbstractTranslation):
    r"""A small table in front (`"scaled"`): $Z \mapsto F(Z + s P_{\text{short}})$ with
    $s = 0.1$ and the frequencies $2^{-j}$ (wavelengths matched to short windows)."""

    def encoder(self, dim: int) -> PositionalEncoding:
        return PositionalEncoding(dim, base=_short_base(dim))

    def encode(self, encoder, Z):
        return Z + jnp.asarray(SCALED_AMPLITUDE, Z.dtype) * encoder(jnp.zeros_like(Z))

    def decode(self, encoder, Y):
        return Y

    def undo_encode(self, encoder, Z):
        return Z - self.encode(encoder, jnp.zeros_like(Z))

    def undo_decode(self, encoder, Y):
        return Y


class Conjugate(_AbstractTranslation):
    r"""Conjugation by the table (`"conjugate"`): $Z \mapsto F(Z + P) - P$, so the output
    carries no offset."""

    def encoder(self, dim: int) -> PositionalEncoding:
        return PositionalEncoding(dim)

    def encode(self, encoder, Z):
        return encoder(Z)

    def decode(self, encoder, Y):
        # The same table, rounded once to Y's dtype.
        return Y - _position_table(Y.shape[0], encoder.dim, dtype=Y.dtype)

    def undo_encode(self, encoder, Z):
        return Z - _position_table(Z.shape[0], encoder.dim, dtype=Z.dtype)

    def undo_decode(self, encoder, Y):
        return encoder(Y)


#: The placements `positional_encoding` may name, in the order of the error message.
PLACEMENTS: dict[str, AbstractPositionSignal] = {
    "input": InputTable(),
    "scaled": ScaledTable(),
    "conjugate": Conjugate(),
    "bias": PositionBias(),
    "bias-light": PositionBias(N_POSITION_FEATURES, every_layer=True),
    "bias-every-layer": PositionBias(N_LAYERWISE_FEATURES, every_layer=True, shift=False),
    "amplitude": PositionAmplitude(),
    "split-amplitude": PositionSplitAmplitude(),
}
#: The placements of every family; `"split-amplitude"` needs the triangular halves of
#: the volume-preserving transformer's feed-forward networks.
SHARED_PLACEMENTS = tuple(name for name in PLACEMENTS if name != "split-amplitude")
#: What `positional_encoding=True` means unless a model family names its own
#: (`default_placement`: the symplectic transformers take `"amplitude"`, the standard
#: transformer too since 2026-12-04 (`"bias-light"` before), the volume-preserving
#: transformer `"split-amplitude"` since 2026-12-03 (`"bias"` before)).
DEFAULT_PLACEMENT = "bias"


def parse_positional_encoding(
    value, default: str = DEFAULT_PLACEMENT, accepted: tuple[str, ...] | None = None
) -> tuple[bool | str, AbstractPositionSignal]:
    """`positional_encoding` validated, and its placement object: `(value, signal)`.

    `value` is a bool (`True` means `default`, the model family's measured choice, a name
    in `accepted`) or a name in `accepted` (the family's placements; `None`: every name
    in `PLACEMENTS`); it is returned as given (a NumPy bool as a Python bool), for the
    model's `config()`.
    """
    names = tuple(PLACEMENTS) if accepted is None else tuple(accepted)
    if isinstance(value, (bool, np.bool_)):
        value = bool(value)
        return value, (PLACEMENTS[default] if value else NoSignal())
    if isinstance(value, str):
        if value not in names:
            raise ValueError(
                f"positional_encoding must be a bool or one of {names}, got {value!r}"
            )
        return value, PLACEMENTS[value]
    raise TypeError(
        f"positional_encoding must be a bool or one of {names}, got {value!r} "
        f"({type(value).__name__})"
    )
