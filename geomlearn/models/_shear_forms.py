r"""Inference forms of the SympNet families: the rollout of a small network at the speed
of its arithmetic.

A rollout of a small network (a few phase-space dimensions, a width of tens) does so
little arithmetic per step that the number of kernels per step decides its speed. Each
gradient shear contracts a $w \times n$ matrix twice, $Kx$ and $K^\top v$. Under the
rollout's `jax.vmap` over $B$ states, a `dot` per contraction is a library call with its
own overhead; the same contraction written as a broadcast multiply and a sum over the
contracted axis is fused by XLA with the activation and the residual update around it.
The fused form wins while the broadcast product $B \cdot w \cdot n$ is small and loses by
far above (the product no longer stays in fast memory), so the form is **chosen by
size**: `broadcast_contractions(batch, w, n)` (the rollout's batch is the task's
`batch`). Both forms compute the same sums, so the states agree to round-off.

The forms also do the parameter-only work once: the symmetric matrices of the linear
shears are gathered when the form is built, and a Hénon net's stacked layers are
scanned with the gradient of each potential written out,
$\nabla V(y) = K^\top\big(a \odot \sigma'(Ky + b)\big)$, instead of `jax.grad` inside a
nested scan. Every form is the same composition of symplectic shears as its model (and
the same symmetrised composition when the model is `symmetric`).
"""

from __future__ import annotations

import abc
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .._activations import resolve_activation
from .._nn import check_point, scale_by_step
from .._typing import Array
from .._validation import step_size
from ._base import AbstractInferenceForm
from ._stack import symmetric_map

__all__ = [
    "BROADCAST_LIMIT",
    "broadcast_contractions",
    "GradientShearsForm",
    "HenonForm",
    "LinearActivationForm",
]

BROADCAST_LIMIT = 4096
"""The broadcast form is used while `batch · width · n` is below this many elements: on a
CPU it is the faster form up to 3,072 elements and several times slower from 4,096 on
(`benchmarks/rollout_speed.py`, the SympNet rows)."""


def broadcast_contractions(batch: int | None, width: int, n: int) -> bool:
    """Whether a rollout of `batch` states contracts its `(width, n)` matrices by a
    broadcast multiply and a sum (`True`) or by `dot` (`False`: also when the batch is
    not known, `None`, and for `n = 1`, where XLA already turns the `dot` into a
    multiply)."""
    return batch is not None and n > 1 and batch * width * n < BROADCAST_LIMIT


def matvec(K: Array, x: Array, broadcast: bool) -> Array:
    """$Kx$ for `K` `(w, n)` and one point `x` `(n,)`."""
    return jnp.sum(K * x[None, :], axis=-1) if broadcast else K @ x


def rmatvec(K: Array, v: Array, broadcast: bool) -> Array:
    """$K^\\top v$ for `K` `(w, n)` and `v` `(w,)`."""
    return jnp.sum(K * v[:, None], axis=0) if broadcast else v @ K


def _shear(z: Array, increment: Callable[[Array], Array], changes_q: bool, h, sign: int) -> Array:
    """`(q ± h f(p), p)` (`changes_q`) or `(q, p ± h f(q))` for the increment `f`."""
    n = z.shape[0] // 2
    q, p = z[:n], z[n:]
    d = scale_by_step(increment(p if changes_q else q), h)
    d = d if sign > 0 else -d
    return jnp.concatenate([q + d, p]) if changes_q else jnp.concatenate([q, p + d])


def _derivative(activation, x: Array) -> Array:
    """$\\sigma'(x)$ of an elementwise activation (forward mode: one pass, no graph)."""
    return jax.jvp(resolve_activation(activation), (x,), (jnp.ones_like(x),))[1]


class _AbstractShearForm(eqx.Module):
    """A composition of shears $\\Psi_h$ with its inverse, symmetrised like the model when
    `symmetric`; subclasses give `_forward`, `_backward` and `_contraction` (the `(w, n)`
    of their matrices)."""

    dim: eqx.AbstractVar[int]
    symmetric: eqx.AbstractVar[bool]

    @abc.abstractmethod
    def _forward(self, z, h, broadcast: bool): ...

    @abc.abstractmethod
    def _backward(self, z, h, broadcast: bool): ...

    @abc.abstractmethod
    def _contraction(self) -> tuple[int, int]: ...

    def _map(self, z, h, broadcast: bool):
        if self.symmetric:
            return symmetric_map(lambda x, s: self._forward(x, s, broadcast),
                                 lambda x, s: self._backward(x, s, broadcast), z, h, False)
        return self._forward(z, step_size(h, z.dtype), broadcast)

    def __call__(self, z, h=None):
        """The model map at one point `z` `(dim,)` (contractions by `dot`)."""
        check_point(type(self).__name__, z, self.dim)
        return self._map(z, h, False)

    def step(self, state, task):
        """One rollout step, contracting as `broadcast_contractions` says for the task's
        `batch`."""
        return self._map(state, None, broadcast_contractions(task.batch, *self._contraction()))


class GradientShearsForm(_AbstractShearForm):
    """The inference form of a `GSympNet`: its gradient shears, the Q/P sides in order."""

    K: tuple[Array, ...]
    a: tuple[Array, ...]
    b: tuple[Array, ...]
    changes_q: tuple[bool, ...] = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)

    def _contraction(self):
        return self.K[0].shape

    def _layers(self, z, reverse: bool):
        dtype = z.dtype
        layers = list(zip(self.K, self.a, self.b, self.changes_q))
        for K, a, b, q_side in reversed(layers) if reverse else layers:
            yield K.astype(dtype), a.astype(dtype), b.astype(dtype), q_side

    def _increment(self, K, a, b, broadcast):
        sigma = resolve_activation(self.activation)
        return lambda x: rmatvec(K, a * sigma(matvec(K, x, broadcast) + b), broadcast)

    def _forward(self, z, h, broadcast):
        for K, a, b, q_side in self._layers(z, False):
            z = _shear(z, self._increment(K, a, b, broadcast), q_side, h, +1)
        return z

    def _backward(self, z, h, broadcast):
        for K, a, b, q_side in self._layers(z, True):
            z = _shear(z, self._increment(K, a, b, broadcast), q_side, h, -1)
        return z


class HenonForm(_AbstractShearForm):
    r"""The inference form of a `HenonNet`: one `lax.scan` over the stacked layers, each
    four iterations of $(x, y) \mapsto (y + \eta, -x + h\nabla V(y))$ with $\nabla V$
    written out. A scan rather than the layers unrolled: its loop body is one layer, a
    program a few times smaller (see "Rollout of small symplectic networks" in
    `benchmarks/RESULTS.md`)."""

    K: Array
    a: Array
    b: Array
    eta: Array
    activation: Callable | str = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)

    def _contraction(self):
        return self.K.shape[1:]

    def _scan(self, z, h, broadcast: bool, reverse: bool):
        n, dtype = self.dim // 2, z.dtype

        def grad_v(K, a, b, y):
            return rmatvec(K, a * _derivative(self.activation, matvec(K, y, broadcast) + b), broadcast)

        def layer(xy, params):
            (x, y), (K, a, b, shift) = xy, params
            for _ in range(4):
                if reverse:
                    y_prev = x - shift
                    x, y = scale_by_step(grad_v(K, a, b, y_prev), h) - y, y_prev
                else:
                    x, y = y + shift, scale_by_step(grad_v(K, a, b, y), h) - x
            return (x, y), None

        params = tuple(p.astype(dtype) for p in (self.K, self.a, self.b, self.eta))
        (x, y), _ = jax.lax.scan(layer, (z[:n], z[n:]), params, reverse=reverse)
        return jnp.concatenate([x, y])

    def _forward(self, z, h, broadcast):
        return self._scan(z, h, broadcast, False)

    def _backward(self, z, h, broadcast):
        return self._scan(z, h, broadcast, True)


class LinearActivationForm(_AbstractShearForm):
    """The inference form of an `LASympNet`: the symmetric matrices gathered once; per
    module its linear shears, the bias, then the activation shear."""

    S: tuple[tuple[Array, ...], ...]
    biases: Array
    a: tuple[Array, ...]
    linear_q: tuple[tuple[bool, ...], ...] = eqx.field(static=True)
    activation_q: tuple[bool, ...] = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    dim: int = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)

    def _contraction(self):
        return (self.dim // 2, self.dim // 2)

    def _activation_increment(self, i, dtype):
        sigma, a = resolve_activation(self.activation), self.a[i].astype(dtype)
        return lambda x: a * sigma(x)

    def _forward(self, z, h, broadcast):
        biases = self.biases.astype(z.dtype)
        for i, (module, sides) in enumerate(zip(self.S, self.linear_q)):
            for S, q_side in zip(module, sides):
                S = S.astype(z.dtype)
                z = _shear(z, lambda x, S=S: matvec(S, x, broadcast), q_side, h, +1)
            z = z + scale_by_step(biases[i], h)
            if i < len(self.a):
                z = _shear(z, self._activation_increment(i, z.dtype), self.activation_q[i], h, +1)
        return z

    def _backward(self, z, h, broadcast):
        biases = self.biases.astype(z.dtype)
        for i in reversed(range(len(self.S))):
            if i < len(self.a):
                z = _shear(z, self._activation_increment(i, z.dtype), self.activation_q[i], h, -1)
            z = z - scale_by_step(biases[i], h)
            for S, q_side in zip(reversed(self.S[i]), reversed(self.linear_q[i])):
                S = S.astype(z.dtype)
                z = _shear(z, lambda x, S=S: matvec(S, x, broadcast), q_side, h, -1)
        return z


class GradientShears(AbstractInferenceForm):
    """`GSympNet.inference_form()`: a `GradientShearsForm` (the model itself when it keeps
    a symmetry: its shears differentiate through the invariant features)."""

    def of(self, model):
        if model.group is not None:
            return model
        layers = model.layers
        return GradientShearsForm(
            K=tuple(layer.K for layer in layers), a=tuple(layer.a for layer in layers),
            b=tuple(layer.b for layer in layers),
            changes_q=tuple(type(layer)._changes_q for layer in layers),
            activation=model.activation, dim=model.dim, symmetric=model.symmetric)


class HenonLayers(AbstractInferenceForm):
    """`HenonNet.inference_form()`: a `HenonForm` (the model itself when it keeps a
    symmetry: its potentials are functions of the invariant features)."""

    def of(self, model):
        if model.group is not None:
            return model
        stack = model.layers
        return HenonForm(K=stack.K, a=stack.a, b=stack.b, eta=stack.eta,
                         activation=model.activation, dim=model.dim, symmetric=model.symmetric)


class LinearActivationShears(AbstractInferenceForm):
    """`LASympNet.inference_form()`: a `LinearActivationForm`."""

    def of(self, model):
        return LinearActivationForm(
            S=tuple(tuple(layer.symmetric_matrix() for layer in module)
                    for module in model.linear_layers),
            biases=model.biases, a=tuple(layer.a for layer in model.activation_layers),
            linear_q=tuple(tuple(type(layer)._changes_q for layer in module)
                           for module in model.linear_layers),
            activation_q=tuple(type(layer)._changes_q for layer in model.activation_layers),
            activation=model.activation, dim=model.dim, symmetric=model.symmetric)
