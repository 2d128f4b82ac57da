"""Tests for geomlearn.save / geomlearn.load: exact round trips, loud failures."""

import hashlib
import inspect
import io
import json
import os
import struct

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import _files
from geomlearn import io as gio
from geomlearn.io import PersistenceError
from geomlearn.models import _catalogue
from geomlearn.models import (
    AbstractFeedForwardIntegrator,
    AbstractHamiltonianModel,
    AbstractModel,
    AbstractTransformerIntegrator,
)

from _tiny_models import TinyHamiltonian, TinyShear, TinyWindow

# Small constructor arguments for every model class of geomlearn.models.
CASES = {
    "GSympNet": lambda k: gl.GSympNet(2, n_layers=3, width=3, activation=jax.nn.sigmoid, key=k),
    "LASympNet": lambda k: gl.LASympNet(4, n_layers=2, n_linear=2, key=k),
    "HenonNet": lambda k: gl.HenonNet(2, n_layers=2, width=3, key=k),
    "PSympNet": lambda k: gl.PSympNet(4, n_layers=3, max_degree=4, min_degree=1, symmetric=True, key=k),
    "RSympNet": lambda k: gl.RSympNet(2, n_layers=2, width=3, activation="sigmoid", key=k),
    "LagrangianNeuralNetwork": lambda k: gl.LagrangianNeuralNetwork(2, width=4, depth=2, key=k),
    "ResNet": lambda k: gl.ResNet(3, width=4, depth=2, activation="sin", key=k),
    "HamiltonianNeuralNetwork": lambda k: gl.HamiltonianNeuralNetwork(2, width=4, depth=2, key=k),
    "VolumePreservingFeedForward": lambda k: gl.VolumePreservingFeedForward(3, n_blocks=2, key=k),
    "VolumePreservingTransformer": lambda k: gl.VolumePreservingTransformer(
        3, n_blocks=1, L=2, positional_encoding=True, key=k
    ),
    "Transformer": lambda k: gl.Transformer(4, n_heads=2, L=1, n_blocks=2, key=k),
    "LinearSymplecticTransformer": lambda k: gl.LinearSymplecticTransformer(4, 3, key=k),
    "SymplecticTransformer": lambda k: gl.SymplecticTransformer(4, L=1, key=k),
    "SymplecticAutoencoder": lambda k: gl.SymplecticAutoencoder(
        8, 2, width=3, n_encoder_blocks=1, n_decoder_blocks=2, activation="sigmoid", key=k
    ),
    "ReducedIntegrator": lambda k: gl.ReducedIntegrator(
        8, 2, n_layers=2, width=3, autoencoder_width=3, n_encoder_blocks=1, key=k
    ),
    "LiftedIntegrator": lambda k: gl.LiftedIntegrator(8, 2, n_features=3, stride=2, n_layers=2, width=3,
                                                      activation="sigmoid", key=k),
    "LiePoissonNet": lambda k: gl.models.LiePoissonNet(3, n_layers=2, width=2, key=k),
    "MultiStep": lambda k: gl.models.MultiStep(gl.HenonNet(2, n_layers=2, width=3, key=k), 3),
    "ConformalSympNet": lambda k: gl.ConformalSympNet(2, n_layers=2, width=3, dt=0.1, key=k),
    "PortHamiltonianNN": lambda k: gl.PortHamiltonianNN(
        3, width=3, depth=1, forcing="state-time", state_dependent_dissipation=True, dt=0.05, key=k),
}


def concrete_model_classes():
    out = []
    for name in gl.models.__all__:
        obj = getattr(gl.models, name)
        if isinstance(obj, type) and issubclass(obj, AbstractModel) and not inspect.isabstract(obj) \
                and not name.startswith("Abstract"):
            out.append(name)
    return out


def test_every_model_class_has_a_round_trip_case():
    assert sorted(concrete_model_classes()) == sorted(CASES)


def test_the_catalogue_finds_every_model_class_and_names_them_for_an_unknown_one():
    for name in concrete_model_classes():
        assert _catalogue.model_class(name) is getattr(gl.models, name)
    assert set(concrete_model_classes()) <= set(_catalogue.model_classes())
    assert gio.register is _catalogue.register
    with pytest.raises(ValueError, match="unknown model class 'MysteryNet'.*GSympNet.*register"):
        _catalogue.model_class("MysteryNet")


def output(model, key):
    if isinstance(model, gl.models.MultiStep):
        return jnp.concatenate([output(model.model, key), jnp.asarray([model.n_windows], float)])
    if isinstance(model, AbstractTransformerIntegrator):
        T = model.seq_length or 3
        return model(jax.random.normal(key, (T, model.dim)))
    if isinstance(model, gl.PortHamiltonianNN):  # the state carries the time last
        z = jax.random.normal(key, (model.dim,))
        x, t = z[:-1], z[-1]
        return jnp.concatenate([model.hamiltonian(x)[None], model(x, t), model.dissipation(x).ravel()])
    if isinstance(model, AbstractHamiltonianModel):
        z = jax.random.normal(key, (model.dim,))
        return jnp.concatenate([model.hamiltonian(z)[None], model.vector_field(z)])
    return model(jax.random.normal(key, (model.dim,)))


def assert_same_model(a, b):
    assert type(a) is type(b)
    assert a.config() == b.config()
    la, ta = jax.tree_util.tree_flatten(eqx.filter(a, eqx.is_array))
    lb, tb = jax.tree_util.tree_flatten(eqx.filter(b, eqx.is_array))
    assert ta == tb
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_every_model_class(name, key, tmp_path):
    model = CASES[name](key())
    path = gl.save(tmp_path / "m.geomlearn", model)
    assert path == tmp_path / "m.geomlearn"
    loaded = gl.load(path)
    assert_same_model(model, loaded)
    k = key()
    np.testing.assert_array_equal(output(model, k), output(loaded, k))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_round_trip_keeps_the_dtype(dtype, key, tmp_path):
    for model in (TinyShear(2, key=key(), dtype=dtype), TinyWindow(3, seq_length=4, key=key(), dtype=dtype),
                  TinyHamiltonian(2, key=key(), dtype=dtype), gl.GSympNet(2, key=key(), dtype=dtype)):
        gl.save(tmp_path / "m", model)
        loaded = gl.load(tmp_path / "m")
        assert_same_model(model, loaded)
        assert loaded.config()["dtype"] == jnp.dtype(dtype)


def test_activation_is_stored_by_name(key, tmp_path):
    gl.save(tmp_path / "m", CASES["GSympNet"](key()))
    header, _ = gio._read_container(tmp_path / "m")
    assert header["config"]["activation"] == {"__activation__": "sigmoid"}
    assert header["class"] == "GSympNet" and header["dtype"] == "float64"
    assert gl.load(tmp_path / "m").activation is jax.nn.sigmoid
    unnamed = gl.GSympNet(2, activation=lambda x: jnp.tanh(2 * x), key=key())
    with pytest.raises(PersistenceError, match="no registered name"):
        gl.save(tmp_path / "u", unnamed)
    assert not (tmp_path / "u").exists()


def good_file(tmp_path, key):
    path = tmp_path / "good.geomlearn"
    gl.save(path, gl.GSympNet(2, key=key()))
    return path, path.read_bytes()


def test_truncated_and_corrupted_files_fail_loudly(key, tmp_path):
    path, raw = good_file(tmp_path, key)
    bad = tmp_path / "bad"
    for cut in (0, 5, 20, len(raw) // 2, len(raw) - 1):
        bad.write_bytes(raw[:cut])
        with pytest.raises(PersistenceError, match="too short|truncated or corrupted"):
            gl.load(bad)
    for pos in (30, len(raw) // 2, len(raw) - 40):
        flipped = bytearray(raw)
        flipped[pos] ^= 0x01
        bad.write_bytes(bytes(flipped))
        with pytest.raises(PersistenceError, match="truncated or corrupted"):
            gl.load(bad)
    bad.write_bytes(b"PK\x03\x04" + raw[4:])
    with pytest.raises(PersistenceError, match="not a geomlearn file"):
        gl.load(bad)
    with pytest.raises(FileNotFoundError):
        gl.load(tmp_path / "missing")


def rewrite(header_edit, raw, payload=None):
    """A file with an edited header (and optionally another payload) and a valid checksum."""
    magic, version, n = struct.unpack_from("<8sIQ", raw, 0)
    header = json.loads(raw[20 : 20 + n])
    body = raw[20 + n : -32] if payload is None else payload
    header_edit(header)
    if payload is not None:
        header["sections"] = [["model", len(payload)]]
    hb = json.dumps(header).encode()
    out = struct.pack("<8sIQ", magic, version, len(hb)) + hb + body
    return out + hashlib.sha256(out).digest()


def test_wrong_version_unknown_class_and_mismatched_arrays(key, tmp_path):
    path, raw = good_file(tmp_path, key)
    bad = tmp_path / "bad"
    body = bytearray(raw[:-32])
    struct.pack_into("<I", body, 8, 99)
    bad.write_bytes(bytes(body) + hashlib.sha256(bytes(body)).digest())
    with pytest.raises(PersistenceError, match="format version 99"):
        gl.load(bad)

    def rename(h):
        h["class"] = "MysteryNet"

    bad.write_bytes(rewrite(rename, raw))
    with pytest.raises(PersistenceError, match="unknown model class 'MysteryNet'.*GSympNet"):
        gl.load(bad)

    def widen(h):
        h["config"]["width"] = 7

    bad.write_bytes(rewrite(widen, raw))
    with pytest.raises(PersistenceError, match="does not fit the rebuilt model"):
        gl.load(bad)

    def bad_arg(h):
        h["config"]["n_layers"] = -3

    bad.write_bytes(rewrite(bad_arg, raw))
    with pytest.raises(PersistenceError, match="cannot rebuild GSympNet"):
        gl.load(bad)

    def unknown_tag(h):
        h["config"]["activation"] = {"__function__": "tanh"}

    bad.write_bytes(rewrite(unknown_tag, raw))
    with pytest.raises(PersistenceError, match="unrecognised value in the saved config"):
        gl.load(bad)


def test_no_pickle_is_ever_unpickled(key, tmp_path):
    path, raw = good_file(tmp_path, key)
    n_arrays = len(jax.tree_util.tree_leaves(eqx.filter(gl.load(path), eqx.is_array)))
    buf = io.BytesIO()
    np.save(buf, np.array([object()], dtype=object), allow_pickle=True)  # a pickled record
    payload = buf.getvalue() * n_arrays
    bad = tmp_path / "pickled"
    bad.write_bytes(rewrite(lambda h: None, raw, payload))
    with pytest.raises(PersistenceError, match="dtype object does not fit"):
        gl.load(bad)
    # extra bytes after the last array are caught too
    bad.write_bytes(rewrite(lambda h: None, raw, raw[20 + struct.unpack_from("<8sIQ", raw)[2] : -32] + b"\0"))
    with pytest.raises(PersistenceError, match="left over"):
        gl.load(bad)


def test_save_is_atomic(key, tmp_path, monkeypatch):
    path, raw = good_file(tmp_path, key)
    other = gl.GSympNet(2, key=key())

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(_files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        gl.save(path, other)
    monkeypatch.undo()
    assert path.read_bytes() == raw  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.geomlearn"]  # no temp file left
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gl.save(tmp_path / "no" / "such" / "dir" / "m", other)


def test_save_rejects_non_models(tmp_path):
    with pytest.raises(TypeError, match="geomlearn model"):
        gl.save(tmp_path / "m", eqx.nn.Linear(2, 2, key=jax.random.PRNGKey(0)))
    with pytest.raises(TypeError, match="AbstractModel"):
        gio.register(int)


def test_load_reads_the_model_of_a_checkpoint(key, tmp_path):
    x = jax.random.normal(key(), (16, 2))
    model, _ = gl.fit(TinyShear(2, key=key()), (x, 0.9 * x), epochs=2, key=key(),
                      checkpoint=tmp_path / "c", progress=False)
    assert_same_model(model, gl.load(tmp_path / "c"))
    gl.save(tmp_path / "m", model)  # and load_checkpoint refuses a model file
    with pytest.raises(ValueError, match="is not a training checkpoint .it holds a model"):
        gio.load_checkpoint(tmp_path / "m", model, None, expect={})
