"""Files that outlive versions: every committed model file loads and predicts as it did.

The files under `tests/data/models/` were written by `tests/data/make_fixtures.py`; the
rule they enforce is in `docs/persistence.md`. A change that breaks one must migrate it
(`geomlearn/io/_migrations.py`), not rewrite it.
"""

import importlib.util
import inspect
import pathlib

import equinox as eqx
import jax
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import io as gio
from geomlearn.cli import main
from geomlearn.io import PersistenceError, _container, _migrations
from geomlearn.models import AbstractModel, MultiStep

DATA = pathlib.Path(__file__).parent / "data"
MODELS = DATA / "models"
_spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)
EXPECTED = dict(np.load(MODELS / "expected.npz"))


def public_families():
    out = []
    for module in (gl.models, gl.reduction):
        for name in module.__all__:
            obj = getattr(module, name)
            if (isinstance(obj, type) and issubclass(obj, AbstractModel) and not inspect.isabstract(obj)
                    and not name.startswith("Abstract")):
                out.append(name)
    return sorted(out)


def test_every_public_family_has_a_committed_file():
    missing = [n for n in public_families() if not (MODELS / f"{n}.geomlearn").exists()]
    assert not missing, f"run `python tests/data/make_fixtures.py` to add files for {missing}"
    assert set(public_families()) <= set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_committed_file_loads_and_predicts_as_when_it_was_written(name):
    model = gl.load(MODELS / f"{name}.geomlearn")
    family = name.split("-")[0]
    assert type(model).__name__ == family
    got = np.asarray(fixtures.output(model))
    # the parameters load bit for bit; only the compiled arithmetic may differ (float32)
    np.testing.assert_allclose(got, EXPECTED[name], rtol=1e-5, atol=1e-6)


def test_a_lagrangian_network_saved_without_mass_loads_with_the_identity(tmp_path):
    model = gl.load(MODELS / "LagrangianNeuralNetwork-layout1.geomlearn")
    np.testing.assert_array_equal(np.asarray(model.mass), np.eye(model.n, dtype=np.float32))
    header, _ = _container.read_container(MODELS / "LagrangianNeuralNetwork-layout1.geomlearn")
    assert "layout" not in header  # written as before layouts were recorded
    # and without the migration it would not load: the negative control
    saved = dict(_migrations.MIGRATIONS)
    try:
        _migrations.MIGRATIONS.clear()
        _migrations.LAYOUTS.pop("LagrangianNeuralNetwork")
        with pytest.raises(PersistenceError):
            gl.load(MODELS / "LagrangianNeuralNetwork-layout1.geomlearn")
    finally:
        _migrations.MIGRATIONS.update(saved)
        _migrations.LAYOUTS["LagrangianNeuralNetwork"] = 2
    # re-saved, it is written in today's layout
    gl.save(tmp_path / "lnn.geomlearn", model)
    assert _container.read_container(tmp_path / "lnn.geomlearn")[0]["layout"] == 2


def test_a_file_of_a_newer_format_or_layout_fails_in_one_line_naming_the_version(tmp_path):
    raw = (MODELS / "GSympNet.geomlearn").read_bytes()
    newer = bytearray(raw)
    newer[8:12] = (_container.FORMAT_VERSION + 1).to_bytes(4, "little")
    (tmp_path / "newer").write_bytes(bytes(newer))
    with pytest.raises(PersistenceError, match=r"format version 2, written by a newer .*upgrade") as e:
        gl.load(tmp_path / "newer")
    assert "\n" not in str(e.value)
    header, sections = _container.read_container(MODELS / "LagrangianNeuralNetwork.geomlearn")
    header.pop("sections")
    header["layout"] = 3
    _container.write_container(tmp_path / "layout3", header, sections)
    with pytest.raises(PersistenceError, match=r"layout 3, written by a newer geomlearn.*upgrade") as e:
        gl.load(tmp_path / "layout3")
    assert "\n" not in str(e.value)


def test_a_checkpoint_loads_without_the_training_state():
    path = MODELS / "GSympNet-checkpoint.geomlearn"
    like = gl.GSympNet(2, n_layers=1, width=2, key=jax.random.PRNGKey(0), dtype=np.float32)
    model, state, header = gl.load_checkpoint(path, like)
    assert state is None and header["epoch"] == 2 and len(header["history"]["loss"]) == 2
    assert eqx.tree_equal(model, gl.load(path))


def test_multistep_saves_and_loads_with_the_wrapped_model_nested(tmp_path):
    inner = gl.HenonNet(2, n_layers=2, width=3, key=jax.random.PRNGKey(0))
    multi = MultiStep(inner, 4)
    gl.save(tmp_path / "m", multi)
    header, _ = _container.read_container(tmp_path / "m")
    assert header["class"] == "MultiStep"
    assert header["config"]["model"]["__model__"]["class"] == "HenonNet"
    back = gl.load(tmp_path / "m")
    assert isinstance(back, MultiStep) and back.n_windows == 4
    assert eqx.tree_equal(back, multi)
    # a MultiStep of an older-layout model nests the migration too
    lnn = gl.load(MODELS / "LagrangianNeuralNetwork-layout1.geomlearn")
    gl.save(tmp_path / "ml", MultiStep(lnn, 2))
    assert eqx.tree_equal(gl.load(tmp_path / "ml").model, lnn)


# ----------------------------------------------------- a Hamiltonian network's dt


def test_a_hamiltonian_network_stores_its_dt_and_an_old_file_loads_without_it(tmp_path):
    hnn = gl.load(MODELS / "HamiltonianNeuralNetwork.geomlearn")
    assert hnn.dt == 0.1
    old = gl.load(MODELS / "HamiltonianNeuralNetwork-no-dt.geomlearn")
    assert old.dt is None
    assert hnn.with_dt(None).dt is None and old.with_dt(0.05).dt == 0.05
    with pytest.raises(ValueError, match="dt must be None or a finite number > 0"):
        old.with_dt(-1.0)
    # the stored dt is the rollout's: no dt= needed
    z0 = np.array([0.3, -0.2], np.float32)
    np.testing.assert_array_equal(gl.iterate(hnn, z0, 3), gl.iterate(old, z0, 3, dt=0.1))


def test_check_uses_the_stored_dt_and_asks_for_one_when_the_file_has_none(capsys):
    assert main(["check", str(MODELS / "HamiltonianNeuralNetwork.geomlearn"), "--points", "3"]) == 0
    out = capsys.readouterr().out
    assert "dt=0.1" in out and "standard normal" in out and "PASS" in out
    assert main(["check", str(MODELS / "HamiltonianNeuralNetwork-no-dt.geomlearn"), "--points", "3"]) == 2
    assert "pass it with --dt" in capsys.readouterr().err
    assert main(["check", str(MODELS / "HamiltonianNeuralNetwork-no-dt.geomlearn"), "--points", "3",
                 "--dt", "0.05"]) == 0
    assert "dt=0.05" in capsys.readouterr().out


def test_check_of_a_model_that_claims_no_structure_says_so_with_its_own_status(capsys):
    from geomlearn.cli._inspect import NOTHING_TO_CHECK

    assert NOTHING_TO_CHECK == 3
    assert main(["check", str(MODELS / "ResNet.geomlearn"), "--points", "3"]) == 3
    out = capsys.readouterr().out
    assert "no structure claimed; nothing to verify" in out and "PASS" not in out
    # a model that claims one is checked (exit 0), the negative control
    assert main(["check", str(MODELS / "GSympNet.geomlearn"), "--points", "3"]) == 0


def test_io_names_every_migration_it_knows():
    for (name, layout) in _migrations.MIGRATIONS:
        assert layout < _migrations.file_layout(name)
    assert gio.FORMAT_VERSION == 1


# ------------------------------------------------- claims that match the evidence

ROOT = pathlib.Path(__file__).parent.parent


def test_the_home_page_table_says_what_each_model_preserves():
    names = {"symplectic form": "symplectic", "symplectic form on windows": "symplectic",
             "volume": "volume", "nothing": "none"}
    text = (ROOT / "docs" / "index.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    seen = set()
    for row in rows:
        _, preserves, models = [c.strip() for c in row.strip("|").split("|")]
        claimed = names[preserves.split(" (")[0]]
        for name in models.split("`")[1::2]:
            assert gl.load(MODELS / f"{name}.geomlearn").structure == claimed, name
            seen.add(name)
    assert "HamiltonianNeuralNetwork" in seen


def test_the_comparison_counts_what_geomlearn_has():
    from geomlearn.integrators import METHODS
    from geomlearn.cli import SYSTEMS

    text = (ROOT / "docs" / "comparison.md").read_text()
    assert f"✓ ({len(SYSTEMS)} systems, {len(METHODS)} methods)" in text
    assert "no symplectic autoencoders" not in text
    for name in ("SymplecticAutoencoder", "riemannian_adam"):
        assert f"`{name}`" in text and hasattr(gl, name) or hasattr(gl.manifolds, name)


def test_symmetric_sympnets_are_reversible_and_only_some_time_symmetric():
    k = jax.random.PRNGKey(0)
    z = np.array([0.7, -0.4])
    flip = np.array([1.0, -1.0])
    families = [
        (gl.GSympNet(2, n_layers=2, width=4, symmetric=True, key=k), True),
        (gl.LASympNet(2, n_layers=2, symmetric=True, key=k), True),
        (gl.HenonNet(2, n_layers=2, width=4, symmetric=True, key=k), False),
        (gl.PSympNet(2, n_layers=2, max_degree=4, symmetric=True, key=k), False),
        (gl.RSympNet(2, n_layers=2, width=4, symmetric=True, key=k), False),
    ]
    for model, time_symmetric in families:
        h = 1.0
        reversed_twice = flip * model(flip * model(z, h), h)
        assert np.max(np.abs(reversed_twice - z)) < 1e-12, type(model).__name__
        back = model(model(z, h), -h)
        assert (np.max(np.abs(back - z)) < 1e-12) == time_symmetric, type(model).__name__


def test_a_reduced_integrator_refuses_levenberg_marquardt_as_its_docstring_says():
    model = gl.ReducedIntegrator(8, 2, n_layers=1, width=2, autoencoder_width=2,
                                 n_encoder_blocks=1, key=jax.random.PRNGKey(0))
    assert "is refused" in type(model).__doc__
    states = np.random.default_rng(0).standard_normal((2, 6, 8))
    with pytest.raises(ValueError, match="manifold parameters"):
        gl.fit(model, gl.TrajectoryData(states, 0.1), epochs=1, optimizer=gl.LevenbergMarquardt(),
               key=jax.random.PRNGKey(1), progress=False)


def test_the_positional_encoding_page_agrees_with_its_own_table():
    text = (ROOT / "docs" / "concepts" / "positional_encoding.md").read_text()
    assert "recovers part of the loss" not in text and "grew with the training budget" not in text
    for row in text.splitlines():
        if "`conjugate`" in row and row.startswith("| "):
            cells = [c.strip() for c in row.strip("|").split("|")]
            without = float(cells[4])
            other = dict(part.split() for part in cells[-1].replace("`", "").split(", "))
            # what the text says: conjugate worse than input, both worse than no encoding,
            # scaled within 0.75–1.2× of no encoding
            assert float(other["conjugate"]) > float(other["input"]) > without
            assert 0.75 <= round(float(other["scaled"]) / without, 2) <= 1.2
