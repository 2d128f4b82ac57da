"""One table of small cases, shared by the contract, round-trip and fixture tests.

`MODELS` has one row per model class of the package (the registry of
`geomlearn.models._base`), `LAYERS` one per public layer. A row (`Case`) holds

- `build(key, dtype)`: the instance `test_contract.py` checks (dimension 4 where the
  family allows it), `shape` the shape of one input of `call(module, x)`, the function
  the contract tests;
- models only: `saved(key)`, the instance whose file `tests/data/make_fixtures.py` writes
  with `jax.random.PRNGKey(seed)` (its file is committed: never change it), and
  `varied(key)`, the instance `test_io.py` saves and loads, with options other than the
  defaults (the `saved` one when not given).

`output(model, draw)` is what a model must reproduce after a save and a load: its map
(or its learned energy and field) at an input drawn by `draw(shape)`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomlearn as gl
from geomlearn.models import AbstractHamiltonianModel, AbstractTransformerIntegrator, MultiStep

D, T = 4, 3


def _call(m, x):
    return m(x)


@dataclasses.dataclass(frozen=True)
class Case:
    """The small instances of one class that the tests build (see the module docs)."""

    build: Callable
    shape: tuple[int, ...]
    call: Callable = _call
    saved: Callable | None = None
    seed: int | None = None
    varied: Callable | None = None

    def round_trip(self, key):
        """The instance `test_io.py` saves and loads."""
        return (self.varied or self.saved)(key)


def _curve():
    """Snapshots `(20, 8)` on a bent path (positions) with tangent momenta: what a
    manifold cotangent lift is fitted to."""
    s = np.linspace(-1.0, 1.0, 20)
    q = np.stack([s, s**2, np.sin(2 * s), 0.5 * s**3], axis=1)
    p = np.stack([np.ones_like(s), 2 * s, 2 * np.cos(2 * s), 1.5 * s**2], axis=1)
    return np.concatenate([q, 0.1 * p], axis=1)


LAYERS = {
    "PositionalEncoding": Case(lambda k, dt: gl.PositionalEncoding(D), (T, D)),
    "GradientLayerQ": Case(lambda k, dt: gl.GradientLayerQ(D, 5, key=k, dtype=dt), (D,)),
    "GradientLayerP": Case(lambda k, dt: gl.GradientLayerP(D, 5, key=k, dtype=dt), (D,)),
    "ActivationLayerQ": Case(lambda k, dt: gl.ActivationLayerQ(D, key=k, dtype=dt), (D,)),
    "ActivationLayerP": Case(lambda k, dt: gl.ActivationLayerP(D, key=k, dtype=dt), (D,)),
    "LinearLayerQ": Case(lambda k, dt: gl.LinearLayerQ(D, key=k, dtype=dt), (D,)),
    "LinearLayerP": Case(lambda k, dt: gl.LinearLayerP(D, key=k, dtype=dt), (D,)),
    "HenonLayer": Case(lambda k, dt: gl.HenonLayer(D, 5, key=k, dtype=dt), (D,)),
    "PolynomialRidgeLayer": Case(lambda k, dt: gl.PolynomialRidgeLayer(D, max_degree=3, key=k, dtype=dt), (D,)),
    "NeuralRidgeLayer": Case(lambda k, dt: gl.NeuralRidgeLayer(D, width=2, key=k, dtype=dt), (D,)),
    "ResNetLayer": Case(lambda k, dt: gl.ResNetLayer(D, key=k, dtype=dt), (D,)),
    "LiePoissonRidgeLayer": Case(lambda k, dt: gl.LiePoissonRidgeLayer(width=2, key=k, dtype=dt), (3,)),
    "VolumePreservingLowerLayer": Case(
        lambda k, dt: gl.VolumePreservingLowerLayer(D, "tanh", key=k, dtype=dt), (D,)),
    "VolumePreservingUpperLayer": Case(
        lambda k, dt: gl.VolumePreservingUpperLayer(D, "tanh", key=k, dtype=dt), (D,)),
    "VolumePreservingAttention": Case(lambda k, dt: gl.VolumePreservingAttention(D, key=k, dtype=dt), (T, D)),
    "MultiHeadAttention": Case(lambda k, dt: gl.MultiHeadAttention(D, 2, key=k, dtype=dt), (T, D)),
    "LinearSymplecticAttentionQ": Case(
        lambda k, dt: gl.LinearSymplecticAttentionQ(D, T, key=k, dtype=dt), (T, D)),
    "LinearSymplecticAttentionP": Case(
        lambda k, dt: gl.LinearSymplecticAttentionP(D, T, key=k, dtype=dt), (T, D)),
    "SymplecticAttentionQ": Case(lambda k, dt: gl.SymplecticAttentionQ(D, key=k, dtype=dt), (T, D)),
    "SymplecticAttentionP": Case(lambda k, dt: gl.SymplecticAttentionP(D, key=k, dtype=dt), (T, D)),
    "PSDLayer": Case(lambda k, dt: gl.PSDLayer(2, D, key=k, dtype=dt), (2,), lambda m, y: m.up(y)),
}

MODELS = {
    "GSympNet": Case(
        lambda k, dt: gl.GSympNet(D, n_layers=2, width=5, key=k, dtype=dt), (D,),
        saved=lambda k: gl.GSympNet(2, n_layers=2, width=3, activation="sigmoid", key=k), seed=0,
        varied=lambda k: gl.GSympNet(4, n_layers=3, width=3, activation=jax.nn.sigmoid,
                                     symmetry="rotation:0,1", key=k)),
    "LASympNet": Case(
        lambda k, dt: gl.LASympNet(D, n_layers=2, n_linear=1, key=k, dtype=dt), (D,),
        saved=lambda k: gl.LASympNet(4, n_layers=2, n_linear=2, key=k), seed=1),
    "HenonNet": Case(
        lambda k, dt: gl.HenonNet(D, n_layers=2, width=5, key=k, dtype=dt,
                                  symmetry=gl.symmetries.Rotation(plane=(0, 1))), (D,),
        saved=lambda k: gl.HenonNet(2, n_layers=2, width=3, key=k), seed=2,
        varied=lambda k: gl.HenonNet(4, n_layers=2, width=3, symmetry="translation:0", key=k)),
    "PairSympNet": Case(
        lambda k, dt: gl.models.PairSympNet(2, 1, n_layers=2, width=3, key=k, dtype=dt), (D,),
        saved=lambda k: gl.models.PairSympNet(3, 2, n_layers=2, width=3, key=k), seed=21,
        varied=lambda k: gl.models.PairSympNet(3, 2, n_layers=3, width=3, activation="softplus", symmetric=True,
                                               key=k)),
    "PSympNet": Case(
        lambda k, dt: gl.PSympNet(D, n_layers=3, max_degree=3, key=k, dtype=dt), (D,),
        saved=lambda k: gl.PSympNet(4, n_layers=2, max_degree=3, min_degree=1, symmetric=True, key=k), seed=3,
        varied=lambda k: gl.PSympNet(4, n_layers=3, max_degree=4, min_degree=1, symmetric=True, key=k)),
    "RSympNet": Case(
        lambda k, dt: gl.RSympNet(D, n_layers=3, width=2, key=k, dtype=dt), (D,),
        saved=lambda k: gl.RSympNet(2, n_layers=2, width=3, key=k), seed=4,
        varied=lambda k: gl.RSympNet(2, n_layers=2, width=3, activation="sigmoid", key=k)),
    "LiePoissonNet": Case(
        lambda k, dt: gl.LiePoissonNet(3, n_layers=3, width=2, key=k, dtype=dt), (3,),
        saved=lambda k: gl.models.LiePoissonNet(3, n_layers=2, width=2, key=k), seed=5),
    "LagrangianNeuralNetwork": Case(
        lambda k, dt: gl.LagrangianNeuralNetwork(2, width=5, depth=2, key=k, dtype=dt), (D,),
        lambda m, z: m.acceleration(z[:2], z[2:]),
        saved=lambda k: gl.LagrangianNeuralNetwork(2, width=4, depth=1, key=k), seed=6,
        varied=lambda k: gl.LagrangianNeuralNetwork(2, width=4, depth=2, key=k)),
    "ResNet": Case(
        lambda k, dt: gl.ResNet(D, width=5, depth=2, key=k, dtype=dt), (D,),
        saved=lambda k: gl.ResNet(3, width=4, depth=1, key=k), seed=7,
        varied=lambda k: gl.ResNet(3, width=4, depth=2, activation="sin", key=k)),
    "HamiltonianNeuralNetwork": Case(
        lambda k, dt: gl.HamiltonianNeuralNetwork(D, width=5, depth=2, key=k, dtype=dt), (D,),
        lambda m, z: m.vector_field(z),
        saved=lambda k: gl.HamiltonianNeuralNetwork(2, width=4, depth=1, dt=0.1, key=k), seed=8,
        varied=lambda k: gl.HamiltonianNeuralNetwork(2, width=4, depth=2, key=k)),
    "VolumePreservingFeedForward": Case(
        lambda k, dt: gl.VolumePreservingFeedForward(D, n_blocks=2, key=k, dtype=dt), (D,),
        saved=lambda k: gl.VolumePreservingFeedForward(3, n_blocks=1, key=k), seed=9,
        varied=lambda k: gl.VolumePreservingFeedForward(3, n_blocks=2, key=k)),
    "VolumePreservingTransformer": Case(
        lambda k, dt: gl.VolumePreservingTransformer(D, n_blocks=1, L=2, key=k, dtype=dt), (T, D),
        saved=lambda k: gl.VolumePreservingTransformer(3, n_blocks=1, L=2, key=k), seed=10,
        varied=lambda k: gl.VolumePreservingTransformer(3, n_blocks=1, L=2, positional_encoding=True, key=k)),
    "Transformer": Case(
        lambda k, dt: gl.Transformer(D, n_heads=2, L=1, key=k, dtype=dt), (T, D),
        saved=lambda k: gl.Transformer(4, n_heads=2, L=1, n_blocks=1, key=k), seed=11,
        varied=lambda k: gl.Transformer(4, n_heads=2, L=1, n_blocks=2, key=k)),
    "LinearSymplecticTransformer": Case(
        lambda k, dt: gl.LinearSymplecticTransformer(D, T, L=1, key=k, dtype=dt), (T, D),
        saved=lambda k: gl.LinearSymplecticTransformer(4, 3, key=k), seed=12),
    "SymplecticTransformer": Case(
        lambda k, dt: gl.SymplecticTransformer(D, L=1, key=k, dtype=dt), (T, D),
        saved=lambda k: gl.SymplecticTransformer(4, L=1, key=k), seed=13),
    "SymplecticAutoencoder": Case(
        lambda k, dt: gl.SymplecticAutoencoder(8, 2, n_encoder_layers=2, n_encoder_blocks=1, n_decoder_blocks=1,
                                               width=4, key=k, dtype=dt), (8,),
        saved=lambda k: gl.SymplecticAutoencoder(8, 2, width=3, n_encoder_blocks=1, n_decoder_blocks=1, key=k),
        seed=14,
        varied=lambda k: gl.SymplecticAutoencoder(8, 2, width=3, n_encoder_blocks=1, n_decoder_blocks=2,
                                                  activation="sigmoid", key=k)),
    "ReducedIntegrator": Case(
        lambda k, dt: gl.ReducedIntegrator(8, 2, n_layers=2, width=4, autoencoder_width=4, n_encoder_layers=2,
                                           n_encoder_blocks=1, n_decoder_blocks=1, key=k, dtype=dt), (8,),
        lambda m, z: m.predict(z, m.task()),
        saved=lambda k: gl.ReducedIntegrator(8, 2, n_layers=1, width=3, autoencoder_width=3, n_encoder_blocks=1,
                                             key=k), seed=15,
        varied=lambda k: gl.ReducedIntegrator(8, 2, n_layers=2, width=3, autoencoder_width=3, n_encoder_blocks=1,
                                              key=k)),
    "MultiStep": Case(
        lambda k, dt: gl.MultiStep(gl.GSympNet(D, n_layers=2, width=5, key=k, dtype=dt), 2), (D,),
        lambda m, z: m.predict(z, m.task()),
        saved=lambda k: MultiStep(gl.HenonNet(2, n_layers=1, width=2, key=k), 3), seed=16,
        varied=lambda k: MultiStep(gl.HenonNet(2, n_layers=2, width=3, key=k), 3)),
    "ConformalSympNet": Case(
        lambda k, dt: gl.ConformalSympNet(D, n_layers=2, width=5, dt=0.1, key=k, dtype=dt), (D,),
        saved=lambda k: gl.ConformalSympNet(2, n_layers=2, width=3, dt=0.1, key=k), seed=17),
    "PortHamiltonianNN": Case(  # its vector field (the step: test_dissipative.py)
        lambda k, dt: gl.PortHamiltonianNN(D + 1, width=5, depth=2, forcing="time", key=k, dtype=dt), (D,),
        lambda m, z: m(z, 0.3),
        saved=lambda k: gl.PortHamiltonianNN(3, width=3, depth=1, forcing="time", key=k), seed=18,
        varied=lambda k: gl.PortHamiltonianNN(3, width=3, depth=1, forcing="state-time",
                                              state_dependent_dissipation=True, dt=0.05, key=k)),
    "LiftedIntegrator": Case(
        lambda k, dt: gl.LiftedIntegrator(8, 2, n_features=3, stride=2, n_layers=2, width=4, key=k, dtype=dt),
        (8,),
        saved=lambda k: gl.LiftedIntegrator(8, 2, n_features=3, stride=2, n_layers=1, width=3,
                                            key=k).with_lift(_curve()), seed=19,
        varied=lambda k: gl.LiftedIntegrator(8, 2, n_features=3, stride=2, n_layers=2, width=3,
                                             activation="sigmoid", key=k)),
    "CorrectedIntegrator": Case(
        lambda k, dt: gl.CorrectedIntegrator(gl.systems.HenonHeiles(),
                                             gl.GSympNet(D, n_layers=2, width=5, key=k, dtype=dt), dt=0.1), (D,),
        saved=lambda k: gl.CorrectedIntegrator(gl.systems.Pendulum(g=0.8), gl.GSympNet(2, n_layers=2, width=3, key=k),
                                                dt=0.1), seed=20,
        varied=lambda k: gl.CorrectedIntegrator(gl.systems.Pendulum(l=1.5), gl.LASympNet(2, n_layers=2, n_linear=1, key=k),
                                                method="yoshida4", placement="after", substeps=2, dt=0.05)),
}


def output(model, draw):
    """The numbers a model must reproduce after a save and a load: its map at an input
    `draw(shape)` (a window of `seq_length` or 3 rows for a transformer), a Hamiltonian
    network's energy and field, a port-Hamiltonian network's energy, field and
    dissipation, a `MultiStep`'s wrapped model's. One compiled program per model
    structure: a loaded model reuses its original's."""
    if isinstance(model, MultiStep):
        return output(model.model, draw)
    if isinstance(model, AbstractTransformerIntegrator):
        shape = (model.seq_length or 3, model.dim)
    else:
        shape = (model.dim,)
    return _output(model, draw(shape))


@eqx.filter_jit
def _output(model, z):
    if isinstance(model, gl.PortHamiltonianNN):  # the state carries the time last
        x, t = z[:-1], z[-1]
        return jnp.concatenate([model.hamiltonian(x)[None], model(x, t), model.dissipation(x).ravel()])
    if isinstance(model, AbstractHamiltonianModel):
        return jnp.concatenate([model.hamiltonian(z)[None], model.vector_field(z)])
    return model(z)
