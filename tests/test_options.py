"""Options are objects at the public API: the position signals, the attention
weightings, the port-Hamiltonian forcings, the latent maps and the progress report are
final classes on abstract bases, accepted directly where a name is accepted (the name
stays a shorthand for the same object), and a model records the resolved option by
name. No final option overrides a concrete method (a negative control shows the check
finds one)."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import geomlearn as gl
from geomlearn import _progress
from geomlearn.io import _migrations
from geomlearn.layers import _position_signal, _vp_attention
from geomlearn.models import _discrete_gradient
from geomlearn.reduction import _latent

from _helpers import concrete_overrides

#: Every family of options: its abstract base, its finals.
FAMILIES = {
    "position signal": (gl.AbstractPositionSignal, [
        gl.NoSignal, gl.InputTable, gl.ScaledTable, gl.Conjugate, gl.PositionBias,
        gl.PositionAmplitude, gl.PositionSplitAmplitude, gl.Rotary, gl.FixedRotary,
        _migrations.PositionBiasEveryLayer,
        _migrations.WidePositionBiasEveryLayer]),
    "weighting": (gl.AbstractWeighting, [gl.SkewWeighting, gl.ArbitraryWeighting]),
    "forcing": (gl.AbstractForcing, [gl.NoForcing, gl.TimeForcing, gl.StateTimeForcing]),
    "latent map": (_latent.AbstractLatentMap, [
        _latent.LatentGSympNet, _latent.LatentLASympNet, _latent.LatentResNet]),
    "progress": (gl.AbstractProgress, [gl.TqdmProgress, gl.NoProgress]),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_options_are_abstract_or_final_without_concrete_overrides(family):
    base, finals = FAMILIES[family]
    assert inspect.isabstract(base)
    for cls in finals:
        assert issubclass(cls, base) and not inspect.isabstract(cls), cls
        assert concrete_overrides(cls) == [], cls

    # negative control: a subclass that replaces a method of a final is found
    final, method = next((cls, n) for cls in finals for n, v in vars(cls).items()
                         if callable(v) and not n.startswith("__"))
    overriding = type("Overriding", (final,), {method: lambda self, *a, **k: None})
    assert concrete_overrides(overriding) == [f"Overriding.{method} over {final.__name__}"]


def test_the_facade_and_the_layers_export_the_options():
    for name in ("PositionBias", "PositionAmplitude", "PositionSplitAmplitude", "NoSignal",
                 "InputTable", "ScaledTable", "Conjugate", "Rotary", "FixedRotary",
                 "AbstractPositionSignal",
                 "SkewWeighting", "ArbitraryWeighting", "AbstractWeighting"):
        assert getattr(gl, name) is getattr(gl.layers, name) is getattr(
            _position_signal if hasattr(_position_signal, name) else _vp_attention, name)
        assert name in gl.__all__ and name in gl.layers.__all__
    for name in ("TimeForcing", "StateTimeForcing", "NoForcing", "AbstractForcing"):
        assert getattr(gl, name) is getattr(_discrete_gradient, name) and name in gl.__all__
    for name in ("TqdmProgress", "NoProgress", "AbstractProgress"):
        assert getattr(gl, name) is getattr(_progress, name) and name in gl.__all__


def test_a_forcing_object_is_its_shorthand_and_the_model_records_the_name(key):
    k = key()
    for name, option in (("time", gl.TimeForcing()), ("state-time", gl.StateTimeForcing()),
                         (None, gl.NoForcing())):
        dim = 2 if name is None else 3
        by_name = gl.PortHamiltonianNN(dim, width=3, depth=1, forcing=name, key=k)
        by_object = gl.PortHamiltonianNN(dim, width=3, depth=1, forcing=option, key=k)
        assert eqx.tree_equal(by_name, by_object)
        assert by_object.config()["forcing"] == name and by_object.force_option == option
    assert gl.NoForcing().n_inputs(4) == 0 and gl.NoForcing().inputs(jnp.ones(4), 0.0).shape == (0,)
    assert gl.StateTimeForcing().n_inputs(4) == 5
    with pytest.raises(ValueError, match="forcing must be one of"):
        gl.PortHamiltonianNN(3, width=3, depth=1, forcing="wind", key=k)


def test_a_weighting_object_is_its_shorthand_and_the_model_records_the_name(key):
    k = key()
    by_name = gl.VolumePreservingTransformer(3, weighting="arbitrary", key=k)
    by_object = gl.VolumePreservingTransformer(3, weighting=gl.ArbitraryWeighting(), key=k)
    assert eqx.tree_equal(by_name, by_object)
    assert by_object.config()["weighting"] == "arbitrary" and by_object.structure == "none"
    skew = gl.VolumePreservingTransformer(3, weighting=gl.SkewWeighting(), key=k)
    assert skew.structure == "volume" and skew.config()["weighting"] == "skew"


def test_the_latent_maps_build_the_reduced_integrators_networks(key):
    k = key()
    assert _latent.latent_map_named("gsympnet") == _latent.LatentGSympNet()
    option = _latent.LatentResNet()
    assert _latent.latent_map_named(option) is option
    with pytest.raises(ValueError, match=r"integrator must be one of \('gsympnet', 'lasympnet', "
                                         r"'resnet'\), got 'sympnet'"):
        _latent.latent_map_named("sympnet")
    expected = {
        "gsympnet": gl.GSympNet(2, n_layers=3, width=5, activation="tanh", key=k),
        "lasympnet": gl.LASympNet(2, n_layers=3, key=k),
        "resnet": gl.ResNet(2, width=5, depth=3, activation="tanh", key=k),
    }
    for name, net in expected.items():
        option = _latent.LATENT_MAPS[name]
        built = option.build(2, n_layers=3, width=5, activation="tanh", key=k, dtype=None)
        assert option.name == name and eqx.tree_equal(built, net)
        assert option.sizes(built) == (3, 16 if name == "lasympnet" else 5)
    z = jnp.asarray([0.3, -0.2])
    assert jax.numpy.all(jnp.isfinite(expected["gsympnet"](z)))
