"""The model protocol: the pipeline asks the model, never its kind."""

import re
import warnings
from pathlib import Path
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.models import AbstractFeedForwardIntegrator

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_example_of_a_model_defined_outside_the_package(tmp_path, monkeypatch):
    """docs/writing_a_model.md: fit, iterate, evaluate, save/load accept a new family."""
    page = (ROOT / "docs" / "writing_a_model.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "writing_a_model.md", "exec"), namespace)
    history, metrics, model = namespace["history"], namespace["metrics"], namespace["model"]
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert metrics["structure"] == "symplectic"
    assert metrics["structure_residual"]["symplecticity"] < 1e-12
    assert (tmp_path / "two_shears.geomlearn").exists()
    assert cli.main(["check", str(tmp_path / "two_shears.geomlearn"), "--points", "2"]) == 0


def test_structure_must_be_declared():
    class NoStructure(AbstractFeedForwardIntegrator):
        dim: int = 2

        def __call__(self, z, h=None):
            return z

    with pytest.raises(TypeError, match="abstract"):
        NoStructure()


def test_evaluate_and_check_read_the_instance_structure(key, tmp_path, capsys):
    """The "arbitrary" weighting does not preserve volume: reported as "none", never FAIL."""
    skew = gl.VolumePreservingTransformer(3, n_blocks=1, L=1, key=key())
    arbitrary = gl.VolumePreservingTransformer(3, n_blocks=1, L=1, weighting="arbitrary", key=key())
    assert type(arbitrary).structure == "volume" and arbitrary.structure == "none"
    rb = gl.systems.RigidBody()
    ref = gl.TrajectoryData.from_system(rb, rb.default_initial_conditions(), 0.2, 8)
    m_skew = gl.evaluate(skew, rb, ref, seq_length=3)
    m_arb = gl.evaluate(arbitrary, rb, ref, seq_length=3)
    assert m_skew["structure"] == "volume" and m_skew["structure_passed"]
    assert m_arb["structure"] == "none" and m_arb["iterated_structure"] == "none"
    assert m_arb["structure_residual"]["volume"] > 1e-6  # it really is not volume-preserving
    assert m_arb["structure_passed"]  # nothing is claimed, so nothing fails
    gl.save(tmp_path / "model.geomlearn", arbitrary)
    assert cli.main(["check", str(tmp_path), "--points", "2"]) == 3  # nothing to verify
    out = capsys.readouterr().out
    assert "no structure claimed; nothing to verify" in out and "FAIL" not in out
    gl.save(tmp_path / "model.geomlearn", skew)
    assert cli.main(["check", str(tmp_path), "--points", "2"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_prediction_window_below_T_warns_and_is_checked_as_iterated(key):
    model = gl.VolumePreservingTransformer(3, n_blocks=1, L=1, key=key())
    window = jax.random.normal(key(), (3, 3))
    with pytest.warns(UserWarning, match="not volume-preserving"):
        gl.iterate(model, window, 6, prediction_window=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gl.iterate(model, window, 6)  # pw = T: no warning
    points = jax.random.normal(key(), (3, 3, 3))
    with pytest.warns(UserWarning):
        mixed = gl.check_structure(model, points, prediction_window=1)
    full = gl.check_structure(model, points)
    assert mixed.structure == "none" and "pw = 1 < T" in mixed.map
    assert mixed.residuals["volume"] > 1e-3  # the window update is not volume-preserving
    assert full.structure == "volume" and full.passed and full.residuals["volume"] < 1e-12
    data = gl.TrajectoryData(jax.random.normal(key(), (2, 12, 3)), 0.1)
    with pytest.warns(UserWarning, match="prediction_window=2 < seq_length=3"):
        gl.fit(model, data, epochs=1, seq_length=3, prediction_window=2, key=key(),
               progress=False)


def test_check_tolerance_grows_with_the_condition_number(key):
    model = gl.VolumePreservingFeedForward(3, key=key())
    well = gl.check_structure(model, 0.1 * jax.random.normal(key(), (4, 3)))
    assert well.tolerance == pytest.approx(max(1e-10, 64 * 3 * np.finfo(np.float64).eps * well.condition))
    assert well.condition >= 1.0


def steep_hnn(key, scale):
    hnn = gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=key)
    return jax.tree_util.tree_map(lambda a: a * scale if a.ndim == 2 else a, hnn)


def test_hamiltonian_steps_are_converged_or_raise(key):
    hnn = steep_hnn(key(), 3.0)
    z = jnp.array([0.4, -0.3])
    # at a moderate step the midpoint equation holds to round-off
    dt = 0.05
    z1 = gl.iterate(hnn, z, 2, dt=dt)[1]
    residual = z1 - z - dt * hnn.vector_field(0.5 * (z + z1))
    assert float(jnp.max(jnp.abs(residual))) < 1e-13
    # twelve plain fixed-point iterations (the old rollout) are not converged at dt = 0.3 …
    dt = 0.3
    f = hnn.vector_field
    w = z + dt * f(z)
    for _ in range(12):
        w = z + dt * f(0.5 * (z + w))
    assert float(jnp.max(jnp.abs(w - z - dt * f(0.5 * (z + w))))) > 1e-8
    # … the checked solve either converges to round-off or raises
    try:
        z1 = gl.iterate(hnn, z, 2, dt=dt)[1]
    except Exception as e:  # eqx.error_if raises at run time
        assert "did not converge" in str(e)
    else:
        assert float(jnp.max(jnp.abs(z1 - z - dt * f(0.5 * (z + z1))))) < 1e-12
    # far too large a step diverges: an error, never a silent result
    with pytest.raises(Exception, match="did not converge"):
        gl.iterate(steep_hnn(key(), 20.0), z, 3, dt=2.0)


@pytest.mark.slow  # the README's end-to-end examples (300 LM iterations)
def test_the_readme_python_examples_run(tmp_path, monkeypatch):
    """Every Python block of the README runs as written (in a fresh folder)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(blocks) >= 1  # the README shows one Python example
    monkeypatch.chdir(tmp_path)
    namespaces = []
    for i, code in enumerate(blocks):
        namespaces.append({})
        exec(compile(code, f"README.md block {i}", "exec"), namespaces[-1])
    assert (tmp_path / "pendulum.geomlearn").exists()
    (history,) = [ns["history"] for ns in namespaces if "history" in ns]
    assert history["loss"][-1] < 1e-3  # Levenberg–Marquardt, 300 iterations


def test_no_module_uses_another_modules_private_names():
    """One private toolkit: shared helpers live in private modules under public names, so
    no module of geomlearn imports or reaches into another module's `_private` name."""
    import ast

    offences = []
    for path in sorted((ROOT / "geomlearn").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                offences += [f"{path.name}: import {a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and node.attr not in ("_replace", "_asdict", "_fields", "_make")
                    and isinstance(node.value, ast.Name) and node.value.id not in ("self", "cls")):
                offences.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert offences == []


def test_no_kind_switch_in_the_pipeline():
    """fit, iterate, evaluate and the command line ask the model, never its kind."""
    pipeline = ["training", "rollout", "evaluation", "cli"]
    for name in pipeline:
        where = ROOT / "geomlearn" / name  # a module, or a package of modules
        paths = sorted(where.rglob("*.py")) if where.is_dir() else [where.with_suffix(".py")]
        text = "\n".join(path.read_text() for path in paths)
        for pattern in ("kind ==", "mode ==", "_model_kind", "AbstractFeedForwardIntegrator",
                        "AbstractTransformerIntegrator", "AbstractHamiltonianModel"):
            assert pattern not in text, f"{name} switches on the model kind: {pattern!r}"
    for path in sorted((ROOT / "geomlearn" / "cli").rglob("*.py")):  # small command modules
        assert len(path.read_text().splitlines()) <= 350, path.name


def test_an_unconverged_training_step_is_nan_not_a_silent_result(key):
    """In training (`predict`) an implicit step that does not converge is NaN — the loss
    is then non-finite, never a silent wrong value — while `step` raises."""
    hnn = steep_hnn(key(), 20.0)
    z = jnp.array([0.4, -0.3])
    task = hnn.task(dt=2.0)
    assert bool(jnp.all(jnp.isnan(hnn.predict(z, task))))
    with pytest.raises(Exception, match="did not converge"):
        jax.block_until_ready(hnn.step(z, task))
    mild, ok = steep_hnn(key(), 3.0), hnn.task(dt=0.05)
    np.testing.assert_allclose(mild.predict(z, ok), mild.step(z, ok), rtol=0, atol=0)


def test_sample_forms_are_objects_recorded_by_name():
    """A task's sample form is an object; a name is turned into it once, and a checkpoint
    records the name."""
    from geomlearn.models import (Accelerations, MidpointPairs, Pairs, Snapshots,
                                  VectorFieldSamples, Windows)

    forms = [Pairs(), Windows(), MidpointPairs(), VectorFieldSamples(), Accelerations(), Snapshots()]
    names = ["pairs", "windows", "midpoint", "vector_field", "acceleration", "snapshots"]
    assert [form.name for form in forms] == names
    assert [form.derivatives for form in forms] == [False, False, False, True, True, False]
    for form, name in zip(forms, names):
        task = gl.Task(dt=0.1, samples=name)
        assert task.samples == form and task == gl.Task(dt=0.1, samples=form)
        assert hash(task) == hash(gl.Task(dt=0.1, samples=form))
        assert task.as_dict() == {"seq_length": None, "prediction_window": None, "dt": 0.1,
                                  "samples": name}
    assert len({gl.Task(samples=form) for form in forms}) == len(forms)
    assert gl.Task().samples == Pairs()
    with pytest.raises(ValueError, match=r"unknown sample form 'pair'; expected one of \('pairs'"):
        gl.Task(samples="pair")
    with pytest.raises(TypeError, match="samples must be a sample form or its name"):
        gl.Task(samples=3)


def test_each_family_chooses_its_sample_form(key):
    from geomlearn.models import (Accelerations, MidpointPairs, Pairs, Snapshots,
                                  VectorFieldSamples, Windows)

    data = gl.TrajectoryData(jax.random.normal(key(), (2, 8, 4)), 0.1)
    arrays = (jnp.ones((5, 4)), jnp.ones((5, 4)))
    sympnet = gl.GSympNet(4, key=key())
    hnn = gl.HamiltonianNeuralNetwork(4, width=4, depth=1, key=key())
    lnn = gl.LagrangianNeuralNetwork(2, width=4, depth=1, key=key())
    vpt = gl.VolumePreservingTransformer(4, n_blocks=1, L=1, key=key())
    ae = gl.SymplecticAutoencoder(4, 2, n_encoder_layers=1, n_encoder_blocks=1,
                                  n_decoder_blocks=1, width=2, key=key())
    cases = [(sympnet, {}, Pairs()), (hnn, {}, MidpointPairs()), (lnn, {}, Pairs()),
             (vpt, {"seq_length": 3}, Windows()), (ae, {}, Snapshots())]
    for model, options, form in cases:
        assert model.training_samples(data, model.task(**options))[2].samples == form
    assert hnn.training_samples(arrays, hnn.task())[2].samples == VectorFieldSamples()
    assert lnn.training_samples(arrays, lnn.task())[2].samples == Accelerations()


def test_structure_is_declared_once_per_class(key):
    """Every public model names its structure; a class variable unless the configuration
    changes it."""
    from geomlearn.structures import STRUCTURE_NAMES

    for module in (gl.models, gl.reduction):
        for name in module.__all__:
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, gl.AbstractModel) and not name.startswith("Abstract"):
                assert cls.structure in STRUCTURE_NAMES, name
    wrapped = gl.models.multistep.MultiStep(gl.ResNet(2, width=2, depth=1, key=key()), 2)
    assert wrapped.structure == "none" and wrapped.dim == 2


def concrete_overrides(cls) -> list[str]:
    """The concrete methods (and properties) of a geomlearn model base that `cls` or a
    class between them defines again."""
    out = []
    for i, owner in enumerate(cls.__mro__):
        for name, value in vars(owner).items():
            if name.startswith("__") or not (callable(value) or isinstance(value, property)):
                continue
            for base in cls.__mro__[i + 1:]:
                if base.__module__.startswith("geomlearn.") and name in vars(base):
                    inherited = vars(base)[name]
                    target = inherited.fget if isinstance(inherited, property) else inherited
                    if callable(target) and not getattr(target, "__isabstractmethod__", False):
                        out.append(f"{owner.__name__}.{name}")
                    break
    return sorted(set(out))


def test_families_vary_by_class_variables_not_by_overriding_concrete_methods(key):
    """The residual check of a feed-forward map, the inference form and the learned
    invariants are class variables (policy objects), so no model family redefines a
    concrete method of its base; the same walk finds a redefinition (negative control)."""
    from geomlearn.models import _base
    from geomlearn.models.conformal import ConformalCheck
    from geomlearn.models.lie_poisson import LiePoissonCheck

    families = [c for c in _base.model_classes().values() if c.__module__.startswith("geomlearn.")]
    assert len(families) >= 20
    assert {c.__name__: concrete_overrides(c) for c in families if concrete_overrides(c)} == {}

    class Overriding(gl.GSympNet):
        def learned_invariants(self):
            return {}

    assert concrete_overrides(Overriding) == ["Overriding.learned_invariants"]
    assert isinstance(gl.ConformalSympNet.map_check, ConformalCheck)
    assert isinstance(gl.LiePoissonNet.map_check, LiePoissonCheck)
    hnn = gl.HamiltonianNeuralNetwork(2, width=4, depth=1, dt=0.1, key=key())
    assert set(hnn.learned_invariants()) == {"learned_energy"} and gl.GSympNet.learned_invariants(
        gl.GSympNet(2, key=key())) == {}
    vpff = gl.VolumePreservingFeedForward(3, key=key())
    assert type(gl.MultiStep(vpff, 2).inference_form()) is type(vpff.inference_form())


def test_a_hamiltonian_model_declares_its_time_step():
    """`dt` is an abstract attribute of a Hamiltonian model: the task's step when neither
    the run nor the data gives one."""
    from geomlearn.models import AbstractHamiltonianModel

    class NoStep(AbstractHamiltonianModel):
        dim: int

        def hamiltonian(self, z):
            return 0.5 * jnp.sum(z**2)

        def vector_field(self, z):
            return jnp.concatenate([z[1:], -z[:1]])

    with pytest.raises(TypeError, match="abstract"):
        NoStep(2)

    class Stepless(NoStep):
        dt: ClassVar[None] = None

    class Stored(NoStep):
        dt: float

        def __init__(self, dt):
            self.dim, self.dt = 2, dt

    assert Stepless(2).task().dt is None and Stepless(2).task(data_dt=0.1).dt == 0.1
    assert Stored(0.25).task().dt == 0.25 and Stored(0.25).task(data_dt=0.1).dt == 0.1
    assert Stored(0.25).task(dt=0.5).dt == 0.5
