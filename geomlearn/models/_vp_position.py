r"""The position signal inside the volume-preserving transformer's feed-forward networks.

A [`VolumePreservingFeedForward`][geomlearn.VolumePreservingFeedForward] is a chain of
triangular shears $x \mapsto x + \sigma(Wx + b)$ ($W$ strictly triangular, $\sigma$ the
identity for a linear layer). Each layer is a `RowSlot` of the position signal (with a
bias or not, nonlinear or not, lower or upper), and the signal's terms change, on row
$t$ of a window, either the layer's bias, $x_t \mapsto x_t + \sigma(Wx_t + b + c_t)$, or
the size of its increment, $x_t \mapsto x_t + h_t\,\sigma(Wx_t + b)$. Either way the
Jacobian of each row is unit triangular — the bias and the step depend on the row's
index, not on its state — so the volume is preserved for every parameter value, and
each layer is inverted row by row by substitution with its own bias or step.
"""

from __future__ import annotations

import equinox as eqx
import jax

from ..layers._linalg import small_matmul, triangular_matrix
from ..layers._position_signal import AbstractPositionSignal, RowSlot
from ..layers._row_steps import with_row_steps

__all__ = ["feedforward_inverse_with_position", "feedforward_with_position", "signal_slots"]


def signal_slots(ff) -> tuple[RowSlot, ...]:
    """The layers of the feed-forward network `ff` as a position signal sees them: one
    unit; a bias where the layer has one, a step where it is nonlinear, its half."""
    return tuple(RowSlot(unit=0, width=ff.dim, biased=layer.bias is not None,
                         steps=layer.activation is not None, lower=layer.is_lower)
                 for layer in ff.layers)


def _row_terms(ff, signal: AbstractPositionSignal, gains, T: int, dtype, times=None,
               row_steps=None):
    """`(biases, steps)` of every layer of `ff` on `T` rows (`None` where none), in
    `dtype`, at the rows' real `times` when given; the nonlinear layers' steps times the
    rows' `row_steps` `(T,)` when given (`geomlearn.layers._row_steps`)."""
    slots = signal_slots(ff)
    terms = signal.row_terms(gains, slots, T, times)
    if row_steps is not None:
        terms = with_row_steps(terms, slots, row_steps)
    cast = lambda x: None if x is None else x.astype(dtype)  # noqa: E731
    return [cast(t.bias) for t in terms], [cast(t.step) for t in terms]


def feedforward_with_position(ff, Z, gains, signal: AbstractPositionSignal, times=None,
                              row_steps=None):
    r"""`ff` on a window `(T, d)` with the position signal's terms from `gains`: a bias
    $x_t \mapsto x_t + \sigma(W x_t + b + c_t)$ or a step
    $x_t \mapsto x_t + h_t\,\sigma(W x_t + b)$. $W$ is strictly triangular, so every
    row's Jacobian is still unit triangular: the volume is preserved for every parameter
    value. Runs of linear layers are composed into one affine map, as in `ff` itself.
    `times`: the rows' real times the terms are evaluated at (`None`: the indices).
    `row_steps` `(T,)`: every layer's increment on row $t$ also scaled by $s_t$ (the
    linear layers then one row at a time)."""
    dtype = Z.dtype
    biases, steps = _row_terms(ff, signal, gains, Z.shape[0], dtype, times, row_steps)
    affine = None
    for layer, bias, step in zip(ff.layers, biases, steps):
        if layer.activation is None and row_steps is not None:
            Z = _rows("__call__", layer, Z, bias, row_steps.astype(dtype))
            continue
        if layer.activation is None:  # runs of linear layers: one affine map, as in `ff`
            Mt, c = layer.affine_map(dtype, None)
            c = c[None, :] if bias is None else c[None, :] + bias
            affine = (Mt, c) if affine is None else (
                small_matmul(affine[0], Mt), small_matmul(affine[1], Mt) + c)
            continue
        if affine is not None:
            Z = small_matmul(Z, affine[0]) + affine[1]
            affine = None
        Wt = triangular_matrix(layer.weight.astype(dtype), layer.dim, layer.is_lower,
                               transpose=True)
        pre = small_matmul(Z, Wt) + layer.bias_term(dtype, Z.ndim)
        if bias is not None:
            pre = pre + bias
        increment = layer.activation_fn()(pre)
        Z = Z + (increment if step is None else step[:, None] * increment)
    if affine is not None:
        Z = small_matmul(Z, affine[0]) + affine[1]
    return Z


def feedforward_inverse_with_position(ff, Y, gains, signal: AbstractPositionSignal,
                                      times=None, row_steps=None):
    """The exact inverse of `feedforward_with_position`: each layer is inverted row by row
    with its bias `b + c_t` and its step `h_t` (substitution, as `layer.inverse`)."""
    biases, steps = _row_terms(ff, signal, gains, Y.shape[0], Y.dtype, times, row_steps)
    for layer, bias, step in reversed(tuple(zip(ff.layers, biases, steps))):
        if layer.activation is None and row_steps is not None:
            step = row_steps.astype(Y.dtype)
        if bias is None and step is None:
            Y = layer.inverse(Y)
        else:
            Y = _rows("inverse", layer, Y, bias, step)
    return Y


def _rows(method: str, layer, Z, bias, step):
    """`layer`'s map or inverse (`method`) on every row $t$ of `Z` with the bias
    $b + c_t$ (`bias` `(T, d)`, `None`: $b$) and the step $h_t$ (`step` `(T,)`, `None`:
    1)."""
    def one(z, c, h):
        at = layer if c is None else eqx.tree_at(lambda l: l.bias, layer, layer.bias + c)
        return getattr(at, method)(z, h)

    return jax.vmap(one)(Z, bias, step)
