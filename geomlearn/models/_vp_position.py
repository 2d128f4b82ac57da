r"""The position signal inside the volume-preserving transformer's feed-forward networks.

A [`VolumePreservingFeedForward`][geomlearn.VolumePreservingFeedForward] is a chain of
triangular shears $x \mapsto x + \sigma(Wx + b)$ ($W$ strictly triangular, $\sigma$ the
identity for a linear layer). The placements that live inside it change, on row $t$ of a
window, either the layer's bias or the size of its increment:

- a position bias (`"bias"`, `"bias-light"`, `"bias-every-layer"`):
  $x_t \mapsto x_t + \sigma(Wx_t + b + G e_t)$ in the layers with a bias;
- a position amplitude (`"amplitude"`): $x_t \mapsto x_t + h_t\,\sigma(Wx_t + b)$ with
  $h_t = 1 + g^\top e_t$ in the nonlinear layers, each its own gain $g$; by halves
  (`"split-amplitude"`, the default of `positional_encoding=True`) one gain for the
  lower and one for the upper triangular layers of a unit.

Either way the Jacobian of each row is unit triangular — the bias and the step depend on
the row's index, not on its state — so the volume is preserved for every parameter
value, and each layer is inverted row by row by substitution with its own bias or step.
"""

from __future__ import annotations

import equinox as eqx
import jax

from ..layers._linalg import small_matmul, triangular_matrix
from ..layers._position_signal import (
    AbstractPositionSignal,
    position_amplitude,
    position_bias,
)

__all__ = ["feedforward_inverse_with_position", "feedforward_with_position", "signal_layers"]


def signal_layers(ff, signal: AbstractPositionSignal) -> tuple:
    """Indices of the layers of the feed-forward network `ff` that take the position
    signal: of its layers with a bias (a position bias) or of its nonlinear layers (a
    position amplitude), those `signal.select` names — for the default `"bias"` the
    **first** (the first nonlinear layer, or a linear layer with a bias before it).

    One biased layer per unit, not all of them: a gain in every biased layer made each
    Levenberg–Marquardt iteration markedly dearer and converged slower on a Markov
    problem, while one gain of two features per unit still lets the model use the order
    (benchmarks/RESULTS.md). An amplitude costs two parameters per layer, whatever the
    dimension, and goes into every nonlinear layer (by halves: two gains per unit, one
    for the lower and one for the upper triangular layers)."""
    if signal.scales_increment():
        candidates = (i for i, layer in enumerate(ff.layers) if layer.activation is not None)
    else:
        candidates = (i for i, layer in enumerate(ff.layers) if layer.bias is not None)
    return signal.select(candidates)


def _row_signals(ff, signal, gains, T: int, dtype) -> tuple[dict, dict]:
    """`(biases, steps)`: the per-row bias `(T, d)` or step `(T,)` of each layer that takes
    the signal, by layer index."""
    indices = signal_layers(ff, signal)
    if signal.per_half():  # gains (lower, upper): each layer takes its half's step
        halves = {True: position_amplitude(gains[0], T).astype(dtype),
                  False: position_amplitude(gains[1], T).astype(dtype)}
        return {}, {i: halves[ff.layers[i].is_lower] for i in indices}
    if signal.scales_increment():
        return {}, {i: position_amplitude(g, T).astype(dtype) for i, g in zip(indices, gains)}
    return {i: position_bias(g, T).astype(dtype) for i, g in zip(indices, gains)}, {}


def feedforward_with_position(ff, Z, gains, signal: AbstractPositionSignal):
    r"""`ff` on a window `(T, d)` with the position signal of `signal` in the layers
    `signal_layers` names, from `gains` (one per such layer, in order): a bias
    $x_t \mapsto x_t + \sigma(W x_t + b + G e_t)$ or a step
    $x_t \mapsto x_t + h_t\,\sigma(W x_t + b)$. $W$ is strictly triangular, so every
    row's Jacobian is still unit triangular: the volume is preserved for every parameter
    value. Runs of linear layers are composed into one affine map, as in `ff` itself."""
    dtype = Z.dtype
    biases, steps = _row_signals(ff, signal, gains, Z.shape[0], dtype)
    affine = None
    for i, layer in enumerate(ff.layers):
        if layer.activation is None:  # runs of linear layers: one affine map, as in `ff`
            Mt, c = layer.affine_map(dtype, None)
            c = c[None, :]
            if i in biases:
                c = c + biases[i]
            affine = (Mt, c) if affine is None else (
                small_matmul(affine[0], Mt), small_matmul(affine[1], Mt) + c)
            continue
        if affine is not None:
            Z = small_matmul(Z, affine[0]) + affine[1]
            affine = None
        Wt = triangular_matrix(layer.weight.astype(dtype), layer.dim, layer.is_lower,
                               transpose=True)
        pre = small_matmul(Z, Wt) + layer.bias_term(dtype, Z.ndim)
        if i in biases:
            pre = pre + biases[i]
        increment = layer.activation_fn()(pre)
        Z = Z + (steps[i][:, None] * increment if i in steps else increment)
    if affine is not None:
        Z = small_matmul(Z, affine[0]) + affine[1]
    return Z


def feedforward_inverse_with_position(ff, Y, gains, signal: AbstractPositionSignal):
    """The exact inverse of `feedforward_with_position`: each layer is inverted row by row
    with its bias `b + G e_t` or its step `h_t` (substitution, as `layer.inverse`)."""
    biases, steps = _row_signals(ff, signal, gains, Y.shape[0], Y.dtype)
    for i in reversed(range(len(ff.layers))):
        layer = ff.layers[i]
        if i in steps:
            Y = jax.vmap(layer.inverse)(Y, steps[i])  # the step scales the increment
        elif i in biases:
            Y = jax.vmap(
                lambda y, c, layer=layer: eqx.tree_at(
                    lambda l: l.bias, layer, layer.bias + c
                ).inverse(y)
            )(Y, biases[i])
        else:
            Y = layer.inverse(Y)
    return Y
