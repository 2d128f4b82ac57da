"""The contract every public layer and model keeps, checked once over a registry of all
of them: jit equals eager, vmap equals a loop, gradients are finite (and not all zero),
the output has the dtype of the input, and a wrongly shaped input is rejected with a
`ValueError`. Family-specific properties (structure, inverses, parameter counts) are
tested in the family's own test file."""

import inspect
import zlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl

from _helpers import random_module

D, T = 4, 3


def _call(m, x):
    return m(x)


# name -> (make(key, dtype), one input's shape, the function of (module, input) tested)
CASES = {
    "PositionalEncoding": (lambda k, dt: gl.PositionalEncoding(D), (T, D), _call),
    "GradientLayerQ": (lambda k, dt: gl.GradientLayerQ(D, 5, key=k, dtype=dt), (D,), _call),
    "GradientLayerP": (lambda k, dt: gl.GradientLayerP(D, 5, key=k, dtype=dt), (D,), _call),
    "ActivationLayerQ": (lambda k, dt: gl.ActivationLayerQ(D, key=k, dtype=dt), (D,), _call),
    "ActivationLayerP": (lambda k, dt: gl.ActivationLayerP(D, key=k, dtype=dt), (D,), _call),
    "LinearLayerQ": (lambda k, dt: gl.LinearLayerQ(D, key=k, dtype=dt), (D,), _call),
    "LinearLayerP": (lambda k, dt: gl.LinearLayerP(D, key=k, dtype=dt), (D,), _call),
    "HenonLayer": (lambda k, dt: gl.HenonLayer(D, 5, key=k, dtype=dt), (D,), _call),
    "PolynomialRidgeLayer": (lambda k, dt: gl.PolynomialRidgeLayer(D, max_degree=3, key=k, dtype=dt), (D,), _call),
    "NeuralRidgeLayer": (lambda k, dt: gl.NeuralRidgeLayer(D, width=2, key=k, dtype=dt), (D,), _call),
    "ResNetLayer": (lambda k, dt: gl.ResNetLayer(D, key=k, dtype=dt), (D,), _call),
    "LiePoissonRidgeLayer": (lambda k, dt: gl.LiePoissonRidgeLayer(width=2, key=k, dtype=dt), (3,), _call),
    "VolumePreservingLowerLayer": (lambda k, dt: gl.VolumePreservingLowerLayer(D, "tanh", key=k, dtype=dt), (D,), _call),
    "VolumePreservingUpperLayer": (lambda k, dt: gl.VolumePreservingUpperLayer(D, "tanh", key=k, dtype=dt), (D,), _call),
    "VolumePreservingAttention": (lambda k, dt: gl.VolumePreservingAttention(D, key=k, dtype=dt), (T, D), _call),
    "MultiHeadAttention": (lambda k, dt: gl.MultiHeadAttention(D, 2, key=k, dtype=dt), (T, D), _call),
    "LinearSymplecticAttentionQ": (lambda k, dt: gl.LinearSymplecticAttentionQ(D, T, key=k, dtype=dt), (T, D), _call),
    "LinearSymplecticAttentionP": (lambda k, dt: gl.LinearSymplecticAttentionP(D, T, key=k, dtype=dt), (T, D), _call),
    "SymplecticAttentionQ": (lambda k, dt: gl.SymplecticAttentionQ(D, key=k, dtype=dt), (T, D), _call),
    "SymplecticAttentionP": (lambda k, dt: gl.SymplecticAttentionP(D, key=k, dtype=dt), (T, D), _call),
    "GSympNet": (lambda k, dt: gl.GSympNet(D, n_layers=2, width=5, key=k, dtype=dt), (D,), _call),
    "LASympNet": (lambda k, dt: gl.LASympNet(D, n_layers=2, n_linear=1, key=k, dtype=dt), (D,), _call),
    "HenonNet": (lambda k, dt: gl.HenonNet(D, n_layers=2, width=5, key=k, dtype=dt), (D,), _call),
    "PSympNet": (lambda k, dt: gl.PSympNet(D, n_layers=3, max_degree=3, key=k, dtype=dt), (D,), _call),
    "RSympNet": (lambda k, dt: gl.RSympNet(D, n_layers=3, width=2, key=k, dtype=dt), (D,), _call),
    "ResNet": (lambda k, dt: gl.ResNet(D, width=5, depth=2, key=k, dtype=dt), (D,), _call),
    "LiePoissonNet": (lambda k, dt: gl.LiePoissonNet(3, n_layers=3, width=2, key=k, dtype=dt), (3,), _call),
    "HamiltonianNeuralNetwork": (lambda k, dt: gl.HamiltonianNeuralNetwork(D, width=5, depth=2, key=k, dtype=dt),
                                 (D,), lambda m, z: m.vector_field(z)),
    "LagrangianNeuralNetwork": (lambda k, dt: gl.LagrangianNeuralNetwork(2, width=5, depth=2, key=k, dtype=dt),
                                (D,), lambda m, z: m.acceleration(z[:2], z[2:])),
    "VolumePreservingFeedForward": (lambda k, dt: gl.VolumePreservingFeedForward(D, n_blocks=2, key=k, dtype=dt), (D,), _call),
    "VolumePreservingTransformer": (lambda k, dt: gl.VolumePreservingTransformer(D, n_blocks=1, L=2, key=k, dtype=dt), (T, D), _call),
    "Transformer": (lambda k, dt: gl.Transformer(D, n_heads=2, L=1, key=k, dtype=dt), (T, D), _call),
    "LinearSymplecticTransformer": (lambda k, dt: gl.LinearSymplecticTransformer(D, T, L=1, key=k, dtype=dt), (T, D), _call),
    "SymplecticTransformer": (lambda k, dt: gl.SymplecticTransformer(D, L=1, key=k, dtype=dt), (T, D), _call),
    "MultiStep": (lambda k, dt: gl.MultiStep(gl.GSympNet(D, n_layers=2, width=5, key=k, dtype=dt), 2),
                  (D,), lambda m, z: m.predict(z, m.task())),
    "PSDLayer": (lambda k, dt: gl.PSDLayer(2, D, key=k, dtype=dt), (2,), lambda m, y: m.up(y)),
    "ConformalSympNet": (lambda k, dt: gl.ConformalSympNet(D, n_layers=2, width=5, dt=0.1, key=k, dtype=dt),
                         (D,), _call),
    "PortHamiltonianNN": (lambda k, dt: gl.PortHamiltonianNN(D + 1, width=5, depth=2, forcing="time", key=k,
                                                             dtype=dt),
                          (D,), lambda m, z: m(z, 0.3)),  # its vector field (the step: test_dissipative.py)
    "SymplecticAutoencoder": (lambda k, dt: gl.SymplecticAutoencoder(8, 2, n_encoder_layers=2, n_encoder_blocks=1,
                                                                      n_decoder_blocks=1, width=4, key=k, dtype=dt),
                              (8,), _call),
    "LiftedIntegrator": (lambda k, dt: gl.LiftedIntegrator(8, 2, n_features=3, stride=2, n_layers=2, width=4,
                                                           key=k, dtype=dt),
                         (8,), _call),
    "ReducedIntegrator": (lambda k, dt: gl.ReducedIntegrator(8, 2, n_layers=2, width=4, autoencoder_width=4,
                                                             n_encoder_layers=2, n_encoder_blocks=1,
                                                             n_decoder_blocks=1, key=k, dtype=dt),
                          (8,), lambda m, z: m.predict(z, m.task())),
}


def public_modules():
    out = []
    for mod in (gl.layers, gl.models):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if (isinstance(obj, type) and issubclass(obj, eqx.Module)
                    and not inspect.isabstract(obj) and not name.startswith("Abstract")):
                out.append(name)
    return out


def test_every_public_layer_and_model_is_in_the_registry():
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
