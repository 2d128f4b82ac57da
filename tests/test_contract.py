"""The contract every public layer and model keeps, checked once over the table of all of
them (`tests/_cases.py`): jit equals eager, vmap equals a loop, gradients are finite (and
not all zero), the output has the dtype of the input, and a wrongly shaped input is
rejected with a `ValueError`. Family-specific properties (structure, inverses, parameter counts) are
tested in the family's own test file."""

import inspect
import zlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl

from _cases import LAYERS, MODELS
from _helpers import random_module

# name -> (make(key, dtype), one input's shape, the function of (module, input) tested)
CASES = {name: (case.build, case.shape, case.call) for name, case in {**LAYERS, **MODELS}.items()}


#: Option objects exported next to the layers (position signals, attention weightings):
#: passed to a layer or a model and asked, not maps with a contract of their own.
OPTIONS = (gl.layers.AbstractPositionSignal, gl.layers.AbstractWeighting)

#: Of `geomlearn.reduction`, the models and the decoder layer have the contract; its
#: reductions fitted by least squares (`PSD`, `ManifoldCotangentLift`), its reduced
#: systems and its latent-map options are not maps of one sample with parameters.
REDUCTION_MAPS = (gl.models.AbstractModel, gl.reduction.PSDLayer)


def public_modules():
    out = []
    for mod in (gl.layers, gl.models, gl.reduction):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if (isinstance(obj, type) and issubclass(obj, eqx.Module) and not issubclass(obj, OPTIONS)
                    and not inspect.isabstract(obj) and not name.startswith("Abstract")
                    and (mod is not gl.reduction or issubclass(obj, REDUCTION_MAPS))):
                out.append(name)
    return out


def test_every_public_layer_and_model_is_in_the_table():
    assert sorted(set(public_modules()) - set(CASES)) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_contract(name, dtype, key, tol):
    make, shape, fn = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    k = key()
    module = random_module(lambda: make(k, dtype), rng, 0.3)
    xs_host = np.asarray(0.5 * rng.standard_normal((3, *shape)), dtype)
    xs = jnp.asarray(xs_host)
    close = dict(rtol=10 * tol(dtype), atol=10 * tol(dtype))

    eager = fn(module, jnp.asarray(xs_host[0]))
    assert eager.dtype == dtype  # dtype in = dtype out

    def loss(m, xs):
        batched = jax.vmap(lambda x: fn(m, x))(xs)
        return jnp.sum(batched**2), batched

    @eqx.filter_jit
    def program(m, xs):  # the batched call traced once: the loss's forward pass
        (_, batched), grads = eqx.filter_value_and_grad(loss, has_aux=True)(m, xs)
        return fn(m, xs[0]), batched, grads

    jitted, batched, grads = program(module, xs)
    np.testing.assert_allclose(jitted, eager, **close)  # jit == eager
    # (the loop and the gradient checks on the host: eager slicing and reductions would
    # compile a program per shape)
    looped = np.stack([fn(module, jnp.asarray(x)) for x in xs_host])
    np.testing.assert_allclose(batched, looped, **close)  # vmap == a loop
    leaves = [np.asarray(g) for g in jax.tree_util.tree_leaves(grads) if eqx.is_inexact_array(g)]
    if leaves:  # a parameterless layer (the positional encoding) has no gradients
        assert all(np.all(np.isfinite(g)) for g in leaves)
        assert any(np.max(np.abs(g)) > 0 for g in leaves)
    bad = jnp.zeros((*shape[:-1], shape[-1] + 1), dtype)
    with pytest.raises(ValueError):
        fn(module, bad)
