r"""Stacks of identical layers (one `lax.scan`), alternating Q/P layers and reversible
(symmetrised) compositions, shared by the SympNet families."""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from .._nn import check_point
from .._typing import Array, Float
from .._validation import check_int, step_size
from ._integrators import AbstractFeedForwardIntegrator

__all__ = [
    "half_step",
    "scan_stack",
    "stack_modules",
    "flip_momentum",
    "symmetric_map",
    "index_stack",
    "alternate",
    "AbstractSymmetrisableIntegrator",
]


@eqx.filter_jit
def scan_stack(stacked: eqx.Module, z: jax.Array, h: jax.Array | None, inverse: bool):
    """Apply a stack of identical layers (arrays with a leading layer axis) to `z` as one
    `lax.scan`: `z = layer(z, h)` in order, or `z = layer.inverse(z, h)` in reverse order.

    Wrapped in `filter_jit` so that eager calls reuse one compiled loop (a bare `lax.scan`
    called eagerly would be traced and compiled again on every call); under an outer
    `jit`/`vmap`/`grad` it is simply inlined.
    """
    params, static = eqx.partition(stacked, eqx.is_array)

    def body(carry, layer_params):
        layer = eqx.combine(layer_params, static)
        return (layer.inverse(carry, h) if inverse else layer(carry, h)), None

    out, _ = jax.lax.scan(body, z, params, reverse=inverse)
    return out


def stack_modules(modules: list[eqx.Module]) -> eqx.Module:
    """Stack identical modules into one whose arrays have a leading axis `len(modules)`.

    (Built one by one and stacked, rather than with `filter_vmap` over the constructor: the
    random initialisers then compile once per shape, not once per batched shape.)
    """
    params = [eqx.filter(m, eqx.is_array) for m in modules]
    static = eqx.filter(modules[0], eqx.is_array, inverse=True)
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *params)
    return eqx.combine(stacked, static)


def flip_momentum(z: jax.Array) -> jax.Array:
    """The time reversal R(q, p) = (q, −p) (an anti-symplectic involution)."""
    n = z.shape[-1] // 2
    return jnp.concatenate([z[:n], -z[n:]])


def half_step(h, dtype):
    """h/2 as a 0-d array of `dtype` (`h=None` means h = 1)."""
    h = step_size(h, dtype)
    return jnp.asarray(0.5, dtype) if h is None else 0.5 * h


def symmetric_map(forward, inverse, z, h, invert: bool):
    r"""The symmetrised composition $S_h = R \circ \Psi_{h/2}^{-1} \circ R \circ
    \Psi_{h/2}$ of a map $\Psi$ with exact inverse, $R(q, p) = (q, -p)$ (or $S_h^{-1} =
    \Psi_{h/2}^{-1} \circ R \circ \Psi_{h/2} \circ R$ when `invert`).

    $S_h$ is symplectic when $\Psi$ is ($R$ is anti-symplectic and appears twice) and
    reversible, $R \circ S_h \circ R = S_h^{-1}$, for every $\Psi$. Reversibility does not
    make it time-symmetric: in general $S_{-h} \circ S_h \ne \mathrm{id}$."""
    half = half_step(h, z.dtype)
    if invert:
        return inverse(flip_momentum(forward(flip_momentum(z), half)), half)
    return flip_momentum(inverse(flip_momentum(forward(z, half)), half))


def index_stack(stacked: eqx.Module, i: int, n: int) -> eqx.Module:
    """The `i`-th of `n` stacked modules (a negative `i` counts from the end)."""
    i = check_int("i", i)
    if not -n <= i < n:
        raise IndexError(f"layer index {i} out of range for {n} layers")
    params, static = eqx.partition(stacked, eqx.is_array)
    return eqx.combine(jax.tree_util.tree_map(lambda x: x[i], params), static)


def alternate(q_layer, p_layer, i: int, init_upper: bool):
    """The class of the `i`-th layer (from 0) of an alternating Q/P stack that starts with
    `q_layer` when `init_upper`, else with `p_layer`."""
    return q_layer if (i % 2 == 0) == init_upper else p_layer


class AbstractSymmetrisableIntegrator(AbstractFeedForwardIntegrator):
    r"""A feed-forward integrator $\Phi_h$ with an exact inverse, optionally symmetrised
    into a reversible map.

    Subclasses define `_forward(z, h)` ($\Phi_h$) and `_backward(z, h)` ($\Phi_h^{-1}$)
    and the flag `symmetric`. With `symmetric` the model map is
    $S_h = R \circ \Phi_{h/2}^{-1} \circ R \circ \Phi_{h/2}$ (see `symmetric_map`),
    symplectic when $\Phi$ is and reversible for every parameter value.
    """

    symmetric: eqx.AbstractVar[bool]

    @abc.abstractmethod
    def _forward(self, z, h):
        raise NotImplementedError

    @abc.abstractmethod
    def _backward(self, z, h):
        raise NotImplementedError

    def __call__(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        """The model map at one point `z` of shape `(dim,)`; `h` scales every update."""
        check_point(type(self).__name__, z, self.dim)
        if self.symmetric:
            return symmetric_map(self._forward, self._backward, z, h, False)
        return self._forward(z, h)

    def inverse(self, z: Float[Array, " dim"], h=None) -> Float[Array, " dim"]:
        """The exact inverse map: every step undone in reverse order."""
        check_point(type(self).__name__, z, self.dim)
        if self.symmetric:
            return symmetric_map(self._forward, self._backward, z, h, True)
        return self._backward(z, h)
