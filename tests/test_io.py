"""Tests for geomlearn.save / geomlearn.load: exact round trips, loud failures."""

import ast
import hashlib
import inspect
import io
import json
import pathlib
import struct
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import _files
from geomlearn import io as gio
from geomlearn.io import PersistenceError
from geomlearn.models import AbstractFeedForwardIntegrator, AbstractModel, _base

from _cases import MODELS, output
from _tiny_models import TinyHamiltonian, TinyShear, TinyWindow

ROOT = pathlib.Path(__file__).resolve().parents[1]


def concrete_model_classes():
    """The concrete model classes the package exports by name: `geomlearn.models`'s and
    the reduction's (`geomlearn.reduction`)."""
    out = {}
    for module in (gl.models, gl.reduction):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, AbstractModel) and not inspect.isabstract(obj) \
                    and not name.startswith("Abstract"):
                out[name] = obj
    return out


def package_classes():
    """The registered classes defined in the package: its model families."""
    return {name: cls for name, cls in _base.model_classes().items() if cls.__module__.startswith("geomlearn.")}


def test_every_model_class_has_a_round_trip_case():
    assert sorted(concrete_model_classes()) == sorted(MODELS)
    assert sorted(package_classes()) == sorted(MODELS)


def test_the_registry_finds_every_model_class_and_names_them_for_an_unknown_one():
    for name, cls in concrete_model_classes().items():
        assert _base.model_class(name) is cls
    assert set(concrete_model_classes()) <= set(_base.model_classes())
    assert gio.register is _base.register and gl.register is _base.register
    with pytest.raises(ValueError, match="unknown model class 'MysteryNet'.*GSympNet.*register"):
        _base.model_class("MysteryNet")


def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def test_every_concrete_class_of_the_package_registers_itself_and_no_base_does():
    families, bases = [], []
    for cls in subclasses(AbstractModel):
        if cls.__module__.startswith("geomlearn."):
            private = inspect.isabstract(cls) or cls.__name__.startswith(("Abstract", "_"))
            (bases if private else families).append(cls)
    assert {"AbstractFeedForwardIntegrator", "AbstractStackedSympNet"} <= {c.__name__ for c in bases}
    for cls in families:
        assert _base.model_class(cls.__name__) is cls
    assert not {c.__name__ for c in bases} & set(_base.model_classes())


def test_a_class_defined_outside_the_package_loads_only_once_registered(key, tmp_path, monkeypatch):
    """A class of the same name as a family does not replace it unless registered, and an
    unregistered class fails to load with the error naming `register`."""
    monkeypatch.setattr(_base, "_CLASSES", dict(_base.model_classes()))

    class GSympNet(AbstractFeedForwardIntegrator):  # the name of a family, defined here
        structure: ClassVar[str] = "none"
        dim: int = eqx.field(static=True)

        def __init__(self, dim):
            self.dim = dim

        def __call__(self, z, h=None):
            return z

    class Elsewhere(GSympNet):
        pass

    assert _base.model_class("GSympNet") is gl.GSympNet
    gl.save(tmp_path / "e", Elsewhere(2))
    with pytest.raises(PersistenceError, match="unknown model class 'Elsewhere'.*register"):
        gl.load(tmp_path / "e")
    assert gio.register(Elsewhere) is Elsewhere
    assert type(gl.load(tmp_path / "e")) is Elsewhere
    gio.register(GSympNet)  # the negative control: registered, the name means this class
    assert _base.model_class("GSympNet") is GSympNet
    monkeypatch.undo()
    assert _base.model_class("GSympNet") is gl.GSympNet


def test_io_imports_no_model_family():
    """Persistence finds classes in the registry: from `geomlearn.models` it imports the
    protocol module `_base` only."""
    imported = set()
    for path in (ROOT / "geomlearn" / "io").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and "models" in node.module:
                imported.add(node.module)
    assert imported == {"models._base"}


def assert_same_model(a, b):
    assert type(a) is type(b)
    assert a.config() == b.config()
    la, ta = jax.tree_util.tree_flatten(eqx.filter(a, eqx.is_array))
    lb, tb = jax.tree_util.tree_flatten(eqx.filter(b, eqx.is_array))
    assert ta == tb
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trip_every_model_class(name, key, tmp_path):
    model = MODELS[name].round_trip(key())
    path = gl.save(tmp_path / "m.geomlearn", model)
    assert path == tmp_path / "m.geomlearn"
    loaded = gl.load(path)
    assert_same_model(model, loaded)
    x = np.random.default_rng(len(name))
    inputs = {}
    draw = lambda shape: inputs.setdefault(shape, jnp.asarray(x.standard_normal(shape)))  # noqa: E731
    np.testing.assert_array_equal(output(model, draw), output(loaded, draw))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_round_trip_keeps_the_dtype(dtype, key, tmp_path):
    for model in (TinyShear(2, key=key(), dtype=dtype), TinyWindow(3, seq_length=4, key=key(), dtype=dtype),
                  TinyHamiltonian(2, key=key(), dtype=dtype), gl.GSympNet(2, key=key(), dtype=dtype)):
        gl.save(tmp_path / "m", model)
        loaded = gl.load(tmp_path / "m")
        assert_same_model(model, loaded)
        assert loaded.config()["dtype"] == jnp.dtype(dtype)


def test_activation_is_stored_by_name(key, tmp_path):
    gl.save(tmp_path / "m", MODELS["GSympNet"].round_trip(key()))
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
