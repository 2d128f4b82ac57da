"""Test helpers shared by the layer/model test files: NumPy-drawn random data and
parameters (no per-shape compiles of JAX's random initialisers) and parameter counts."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def normal(rng, shape, dtype=jnp.float64, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal(shape), dtype=dtype)


def randomize(module, rng, scale=1.0):
    params, static = eqx.partition(module, eqx.is_inexact_array)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    new = [normal(rng, x.shape, x.dtype, scale) for x in leaves]
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, new), static)


def n_params(module):
    """Parameters of a module or of its `eqx.filter_eval_shape` skeleton (no arrays built)."""
    return sum(
        int(np.prod(x.shape))
        for x in jax.tree_util.tree_leaves(module)
        if eqx.is_inexact_array(x) or isinstance(x, jax.ShapeDtypeStruct)
    )
