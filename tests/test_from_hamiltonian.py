"""`geomlearn.systems.from_hamiltonian`: a system of the user's own Hamiltonian function,
equal to the built-in system of the same H, checked for separability, compared with the
classical integrators like a built-in one, refused by `save`; and `geomlearn train
--data FILE --hamiltonian MODULE:FUNCTION` with its one-line errors."""

import json
import re
from pathlib import Path
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.integrators import StormerVerlet, integrate
from geomlearn.io import PersistenceError
from geomlearn.models import AbstractFeedForwardIntegrator
from geomlearn.systems import (DoublePendulum, HamiltonianFromFunction, Pendulum,
                               SeparableHamiltonianFromFunction, from_hamiltonian)
from test_cli_data import error_line, oscillators, write_csv


def pendulum_H(z):
    """The pendulum of `Pendulum()`'s defaults, H = p²/2 − cos q, as a user writes it."""
    return 0.5 * z[1] ** 2 - jnp.cos(z[0])


def mixed_H(z):
    """A kinetic energy that depends on the position: not separable."""
    return 0.5 * z[1] ** 2 * (1.0 + z[0] ** 2) - jnp.cos(z[0])


# ------------------------------------------------------------------------ the system


@pytest.mark.parametrize("separable", [True, False])
def test_vector_field_equals_the_built_in_pendulum(separable, rng):
    system = from_hamiltonian(pendulum_H, 2, separable=separable)
    cls = SeparableHamiltonianFromFunction if separable else HamiltonianFromFunction
    assert type(system) is cls and system.separable is separable and system.canonical
    assert system.dim == 2 and system.labels == ("q1", "p1")
    z = jnp.asarray(rng.normal(size=(16, 2)) * 2)
    ours, theirs = jax.vmap(system.vector_field)(z), jax.vmap(Pendulum().vector_field)(z)
    np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(system.hamiltonian)(z),
                               jax.vmap(Pendulum().hamiltonian)(z), rtol=1e-14, atol=1e-15)
    assert system.invariants.keys() == {"energy"}


def test_split_gradients_of_a_separable_H_are_its_partial_derivatives(rng):
    """∇T and ∇V, taken at the anchor state, are ∂H/∂p and ∂H/∂q at every state; the
    explicit methods then step exactly as on the built-in pendulum."""
    system = from_hamiltonian(pendulum_H, 2, separable=True, initial_conditions=[[0.7, -0.2]])
    z = rng.normal(size=(8, 2))
    for q, p in z:
        np.testing.assert_allclose(system.grad_kinetic(jnp.array([p])), [p], rtol=1e-15)
        np.testing.assert_allclose(system.grad_potential(jnp.array([q])), [np.sin(q)], rtol=1e-14)
    z0 = jnp.asarray(z)
    ours = integrate(system, z0, 0.1, 50, method="yoshida4")
    theirs = integrate(Pendulum(), z0, 0.1, 50, method="yoshida4")
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(system.default_initial_conditions(), [[0.7, -0.2]])


def test_a_general_H_equals_the_double_pendulum_and_takes_implicit_methods_only(rng):
    system = from_hamiltonian(DoublePendulum().hamiltonian, 4, labels=("a", "b", "pa", "pb"))
    z = jnp.asarray(rng.normal(size=(8, 4)))
    np.testing.assert_allclose(jax.vmap(system.vector_field)(z),
                               jax.vmap(DoublePendulum().vector_field)(z), rtol=1e-13, atol=1e-14)
    assert system.labels == ("a", "b", "pa", "pb")
    with pytest.raises(ValueError, match="needs a separable canonical system"):
        StormerVerlet().check_system(system)
    integrate(system, z[:2] * 0.1, 0.05, 5, method="implicit_midpoint")  # applies


def test_separability_is_checked_with_a_negative_control():
    from_hamiltonian(pendulum_H, 2, separable=True)  # separable: accepted
    for H, dim in ((mixed_H, 2), (DoublePendulum().hamiltonian, 4)):
        with pytest.raises(ValueError, match="is not separable: the mixed derivative"):
            from_hamiltonian(H, dim, separable=True)
        from_hamiltonian(H, dim)  # the same H as a general Hamiltonian: accepted
    # mixed only away from the zero state (d²H/dq dp = p there): the probes find it
    with pytest.raises(ValueError, match="not separable"):
        from_hamiltonian(lambda z: 0.5 * z[1] ** 2 * z[0] + z[0] ** 2, 2, separable=True)


def H_pair(z):
    q, p = z
    return 0.5 * p**2 - jnp.cos(q)


@pytest.mark.parametrize("H, dim, options, message", [
    (lambda z: z, 2, {}, r"^H must map a state of shape \(2,\) to a scalar, got shape \(2,\)$"),
    (lambda z: (z[0], z[1]), 2, {}, "to a scalar, got tuple"),
    (pendulum_H, 3, {}, "dim must be even"),
    (pendulum_H, 0, {}, "dim must be"),
    (H_pair, 4, {}, r"H_pair failed on a state of shape \(4,\): ValueError: too many values"),
    (lambda z: jnp.sum(z[:1]) + jnp.sum(z[1:] ** 2), 2, {}, None),  # a valid H: the control
    (lambda z: np.cos(np.asarray(z)[0]) + z[1] ** 2, 2, {}, "failed on a state|written in jax"),
    (lambda z: 1.0 / jnp.linalg.norm(z[:2]) + z[2:] @ z[2:], 4, {},
     "not finite at the zero state.*give initial_conditions="),
    (lambda z: jnp.sum(z ** 2), 2, {"initial_conditions": [[1.0, 2.0, 3.0]]},
     r"initial_conditions must have shape \(B, 2\)"),
    (lambda z: jnp.sum(z ** 2), 2, {"labels": ("q",)}, "labels must name the 2"),
    (lambda z: jnp.log(z[0]) + z[1] ** 2, 2, {"initial_conditions": [[1.0, 0.0], [-1.0, 0.0]]},
     "not finite at initial state 1"),
])
def test_bad_hamiltonians_are_refused_in_one_line(H, dim, options, message):
    if message is None:
        from_hamiltonian(H, dim, **options)
        return
    with pytest.raises(ValueError, match=message) as caught:
        from_hamiltonian(H, dim, **options)
    assert "\n" not in str(caught.value)


def test_H_must_be_callable():
    with pytest.raises(TypeError, match="H must be a function of one state"):
        from_hamiltonian("H", 2)


def test_a_model_holding_such_a_system_is_not_saved(tmp_path, key):
    correction = gl.GSympNet(2, n_layers=1, width=4, identity_init=True, key=key())
    built_in = gl.CorrectedIntegrator(Pendulum(), correction)
    gl.save(tmp_path / "ok.geomlearn", built_in)  # the control: a built-in system is stored
    own = gl.CorrectedIntegrator(from_hamiltonian(pendulum_H, 2, separable=True), correction)
    with pytest.raises(PersistenceError, match="made from a Python function") as caught:
        gl.save(tmp_path / "own.geomlearn", own)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "own.geomlearn").exists()
    # nor is a file naming the class read back as a system
    from geomlearn.io._model_file import _system_class
    assert _system_class("SeparableHamiltonianFromFunction") is None
    assert _system_class("Pendulum") is Pendulum


class SymplecticEuler(AbstractFeedForwardIntegrator):
    """A stand-in for a learned map: `SUBSTEPS` symplectic Euler steps of the pendulum,
    far slower than a classical run, so that where refinement ends depends on no timing."""

    SUBSTEPS: ClassVar[int] = 256

    structure: ClassVar[str] = "symplectic"
    dim: int = eqx.field(static=True)
    dt: float = eqx.field(static=True)

    def __init__(self, dt, *, key=None, dtype=None):
        self.dim, self.dt = 2, dt

    def __call__(self, z, h=None):
        h = self.dt / self.SUBSTEPS

        def step(_, z):
            p = z[1] - h * jnp.sin(z[0])
            return jnp.stack([z[0] + h * p, p])

        return jax.lax.fori_loop(0, self.SUBSTEPS, step, z)


def test_work_precision_compares_as_with_the_built_in_system():
    """The same data and model: the reference, the model's errors and every classical
    run's errors are those of `Pendulum()` (only the timings differ)."""
    z0 = jnp.array([[1.0, 0.0], [0.5, 0.8], [-1.5, 0.2]])
    data = gl.TrajectoryData(integrate(Pendulum(), z0, 0.1, 5, method="gauss_legendre6"), 0.1)
    model = SymplecticEuler(0.1)
    options = dict(horizon=20, methods=["stormer_verlet", "implicit_midpoint"], max_refinement=4)
    theirs = gl.work_precision(model, Pendulum(), data, **options)
    ours = gl.work_precision(model, from_hamiltonian(pendulum_H, 2, separable=True), data,
                             **options)
    assert ours.reference_substeps == theirs.reference_substeps
    assert ours.reference_error == pytest.approx(theirs.reference_error, rel=1e-6, abs=1e-14)
    for a, b in zip((ours.model_point, *ours.points), (theirs.model_point, *theirs.points),
                    strict=True):
        assert (a.method, a.k) == (b.method, b.k)
        for name in ("error_median", "error_worst", "energy_error_median", "energy_error_worst"):
            assert getattr(a, name) is not None
            assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-8), name
    assert ours.system == "SeparableHamiltonianFromFunction" and len(ours.points) == 6


# ------------------------------------------------------------------- command line


@pytest.fixture
def own(tmp_path, monkeypatch):
    """A work folder (the current one) holding `traj.csv` (two uncoupled oscillators,
    4 columns), an odd 3-column file and `osc.py` with Hamiltonians."""
    data, code = tmp_path / "data", tmp_path / "work"
    data.mkdir(), code.mkdir()
    trajectories, times = oscillators()
    write_csv(data / "traj.csv", trajectories, times)
    write_csv(data / "odd.csv", [z[:, :3] for z in trajectories], times, header=("x", "y", "z"))
    (data / "osc.py").write_text(
        "import jax.numpy as jnp\n"
        "OMEGA = jnp.array([1.0, 1.3])\n"
        "def H(z):\n    return 0.5 * jnp.sum(z[2:] ** 2) + 0.5 * jnp.sum((OMEGA * z[:2]) ** 2)\n"
        "def H2(z):\n    q, p = z\n    return 0.5 * p ** 2 + 0.5 * q ** 2\n"
        "def mixed(z):\n    return 0.5 * jnp.sum(z[2:] ** 2) * (1 + z[0] ** 2)\n")
    (data / "broken.py").write_text("def H(z)\n    return z\n")
    monkeypatch.chdir(code)
    return data, code


def _bad(data: Path):
    csv, odd, osc = str(data / "traj.csv"), str(data / "odd.csv"), str(data / "osc.py")
    return {
        "not importable": (["--data", csv, "--hamiltonian", "no_such_module_xyz:H"],
                           "no module named 'no_such_module_xyz'"),
        "no such file": (["--data", csv, "--hamiltonian", str(data / "absent.py") + ":H"],
                         "no file"),
        "syntax error": (["--data", csv, "--hamiltonian", str(data / "broken.py") + ":H"],
                         "cannot import .*SyntaxError"),
        "missing function": (["--data", csv, "--hamiltonian", f"{osc}:G"], "has no function 'G'"),
        "not a function": (["--data", csv, "--hamiltonian", f"{osc}:OMEGA"], "not a function"),
        "malformed": (["--data", csv, "--hamiltonian", osc], "expects MODULE:FUNCTION"),
        "dimension": (["--data", csv, "--hamiltonian", f"{osc}:H2"],
                      r"the data's states have 4 components \(q1, q2, p1, p2\): H2 failed on a "
                      r"state of shape \(4,\)"),
        "odd dimension": (["--data", odd, "--hamiltonian", f"{osc}:H", "--model",
                           "vp-feedforward"], "3 components.*dim must be even"),
        "not separable": (["--data", csv, "--hamiltonian", f"{osc}:mixed",
                           "--hamiltonian-separable"], "mixed is not separable"),
        "with --system": (["--system", "pendulum", "--hamiltonian", f"{osc}:H"],
                          "--hamiltonian and --system exclude each other"),
        "without --data": (["--hamiltonian", f"{osc}:H"], "applies to your own data"),
        "separable alone": (["--data", csv, "--hamiltonian-separable"],
                            "--hamiltonian-separable applies to --hamiltonian"),
        "corrected": (["--data", csv, "--hamiltonian", f"{osc}:H", "--model", "corrected"],
                      "would hold your Hamiltonian"),
        "reduction": (["--data", csv, "--hamiltonian", f"{osc}:H", "--model",
                       "symplectic-autoencoder"], "a model reduction trains"),
        "stride not an integer": (["--system", "pendulum", "--stride", "1.5"],
                                  "invalid int value: '1.5'"),
    }


@pytest.mark.parametrize("case", list(_bad(Path("."))))
def test_bad_hamiltonian_input_is_one_line_exit_2_nothing_written(case, own, capsys):
    data, work = own
    argv, expected = _bad(data)[case]
    capsys.readouterr()
    assert cli.main(["train", *argv, "--epochs", "1", "--horizon", "0"]) == 2
    line = error_line(capsys) if case != "stride not an integer" else _argparse_line(capsys)
    assert re.search(expected, line), line
    assert list(work.iterdir()) == []  # no run folder, no runs/


def _argparse_line(capsys) -> str:
    """argparse's usage error: one line too (the usage is --help's)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and captured.out == "", captured.err
    return lines[0]


def test_help_and_list_mention_the_hamiltonian(capsys):
    assert cli.main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--hamiltonian MODULE:FUNCTION" in text and "--hamiltonian-separable" in text
    assert cli.main(["list"]) == 0
    assert "--hamiltonian MODULE:FUNCTION" in capsys.readouterr().out


def test_the_reference_is_recorded_with_an_absolute_path(own):
    data, _ = own
    options = cli.TrainOptions.from_args(cli._main._parser().parse_args(
        ["train", "--data", "traj.csv", "--hamiltonian", "../data/osc.py:H",
         "--hamiltonian-separable"]))
    assert options.hamiltonian == f"{(data / 'osc.py').resolve()}:H"
    recorded = cli.TrainOptions.from_run({"options": options.to_run()})
    assert recorded.hamiltonian == options.hamiltonian and recorded.hamiltonian_separable
    assert cli.TrainOptions.from_run({"options": {"data": "traj.csv"}}).hamiltonian is None


@pytest.mark.slow  # a command-line training run and its evaluation
def test_train_with_a_hamiltonian_compares_with_the_classical_integrators(own, capsys):
    data, work = own
    out = work / "run"
    status = cli.main(["train", "--data", str(data / "traj.csv"), "--hamiltonian",
                       "../data/osc.py:H", "--hamiltonian-separable", "--model", "resnet",
                       "--epochs", "3",
                       "--horizon", "20", "--out", str(out)])
    assert status in (0, 4)  # 4: too few iterations to learn
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["frontier_ratio"] is not None and metrics["equal_error_speedup"] is not None
    assert f"vs classical            {metrics['against_classical']}" in printed
    methods = {p["method"] for p in metrics["work_precision"]["points"]}
    assert {"stormer_verlet", "yoshida4", "implicit_midpoint", "rk4"} <= methods
    assert metrics["verlet_stability_limit"] == pytest.approx(2 / 1.3, rel=1e-3)
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run = json.loads((out / "run.json").read_text())
    assert run["system"] is None and run["options"]["hamiltonian"].endswith("osc.py:H")
    # evaluate imports the Hamiltonian again and compares once more
    (out / "metrics.json").unlink()
    assert cli.main(["evaluate", str(out), "--horizon", "20"]) in (0, 4)
    again = json.loads((out / "metrics.json").read_text())
    assert again["frontier_ratio"] is not None
    # the control: without --hamiltonian, the same file has nothing to compare with
    assert cli.main(["train", "--data", str(data / "traj.csv"), "--model", "resnet",
                     "--epochs", "1", "--horizon", "0", "--out", str(work / "plain")]) in (0, 4)
    plain = json.loads((work / "plain" / "metrics.json").read_text())
    assert "work_precision" not in plain and "against_classical" not in plain
    # a general (non-separable) Hamiltonian: only the methods for any H
    assert cli.main(["train", "--data", str(data / "traj.csv"), "--hamiltonian",
                     f"{data / 'osc.py'}:H", "--model", "resnet", "--epochs", "1",
                     "--horizon", "0",
                     "--out", str(work / "general")]) in (0, 4)
    general = json.loads((work / "general" / "metrics.json").read_text())
    methods = {p["method"] for p in general["work_precision"]["points"]}
    assert "stormer_verlet" not in methods and "implicit_midpoint" in methods
