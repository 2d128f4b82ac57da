"""Long strides: data every S-th step of a recipe's time step, and the classical
integrators' stability limit reported next to it (`fastest_frequency`)."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from geomlearn import cli
from geomlearn.cli._options import TrainOptions
from geomlearn.cli._recipes import SAMPLED_STEPS, for_system, strided_systems
from geomlearn.integrators import fastest_frequency, integrate
from geomlearn.systems import DoublePendulum, HarmonicOscillator, Pendulum, RigidBody


def _relative(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("name, system, stride", [
    ("harmonic_oscillator", HarmonicOscillator(), 4),  # a sampled recipe (Yoshida 6)
    ("damped_pendulum", None, 2),                      # a dissipative one (Gauss–Legendre 6)
])
def test_strided_recipe_is_every_sth_row_of_a_longer_integration(name, system, stride):
    system = cli.SYSTEMS[name]() if system is None else system
    one, held_one, _ = for_system(name, system, n_trajectories=6, dtype=jnp.float64)
    many, held_many, source = for_system(name, system, n_trajectories=6, dtype=jnp.float64,
                                         stride=stride)
    assert many.dt == pytest.approx(stride * one.dt, rel=1e-15)
    assert many.states.shape == one.states.shape  # as many rows, at the longer step
    assert f"stride {stride}" in source and f"Δt = {stride * one.dt:g}" in source
    rows = (one.states.shape[1] - 1) // stride + 1
    for strided, every in ((many, one), (held_many, held_one)):
        # two integrations whose substeps were chosen separately, each to 1e-8 per step
        assert _relative(strided.states[:, :rows], every.states[:, ::stride]) < 1e-7
    assert _relative(many.states[:, 1], one.states[:, 1]) > 1e-3  # not the stride-1 rows


def test_generic_recipe_takes_a_stride():
    system = cli.SYSTEMS["linear_wave"]()
    one, _, _ = for_system("linear_wave", system, n_trajectories=1, dtype=jnp.float64)
    two, _, source = for_system("linear_wave", system, n_trajectories=1, dtype=jnp.float64,
                                stride=2)
    assert two.dt == pytest.approx(2 * one.dt) and "every 2nd of dt=0.1" in source
    assert _relative(two.states[:, :one.states.shape[1] // 2 + 1], one.states[:, ::2]) < 1e-7


@pytest.mark.parametrize("name", ["pendulum", "rigid_body", "coupled_oscillator",
                                  "parametric_pendulum", "forced_rigid_body", "toda_lattice"])
def test_fixed_data_sets_refuse_a_stride(name):
    with pytest.raises(ValueError, match=f"the {name} data set is fixed") as e:
        for_system(name, cli.SYSTEMS[name](), stride=2)
    assert "harmonic_oscillator" in str(e.value) and "linear_wave" in str(e.value)
    assert name not in strided_systems()


def test_strided_systems():
    assert set(strided_systems()) == {"harmonic_oscillator", "henon_heiles", "kepler",
                                      "three_body", "double_pendulum", "damped_pendulum",
                                      "duffing", "forced_mass_spring", "linear_wave",
                                      "lennard_jones"}


def test_train_options_stride():
    assert TrainOptions().stride == 1
    assert TrainOptions(system="kepler", stride=8).to_run()["stride"] == 8
    with pytest.raises(ValueError, match="--stride must be at least 1, got 0"):
        TrainOptions(stride=0)
    with pytest.raises(ValueError, match="--stride applies to a system's data"):
        TrainOptions(data="traj.csv", stride=2)
    assert TrainOptions(data="traj.csv").stride == 1
    old = TrainOptions(system="kepler").to_run()
    del old["stride"]  # a run written before the stride
    assert TrainOptions.from_run({"options": old}).stride == 1
    assert TrainOptions.from_run({"options": {**old, "stride": 4}}).stride == 4


@pytest.mark.parametrize("argv, message", [
    (["--stride", "1.5"], "invalid int value: '1.5'"),
    (["--stride", "0"], "--stride must be at least 1, got 0"),
    (["--system", "pendulum", "--stride", "8"], "the pendulum data set is fixed"),
    (["--data", "traj.csv", "--stride", "2"], "--stride applies to a system's data"),
])
def test_bad_stride_is_a_usage_error_that_writes_nothing(argv, message, tmp_path, capsys,
                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", *argv]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_fastest_frequency_of_harmonic_oscillators(rng):
    states = rng.normal(size=(7, 3, 2)) * 5
    assert fastest_frequency(HarmonicOscillator(), states) == pytest.approx(1.0, rel=1e-12)
    stiff = HarmonicOscillator(m=2.0, k=8.0)  # ω = sqrt(k/m)
    assert fastest_frequency(stiff, states[0, 0]) == pytest.approx(2.0, rel=1e-12)


def test_fastest_frequency_of_the_pendulum_is_largest_at_the_bottom():
    pendulum = Pendulum()
    bottom = fastest_frequency(pendulum, jnp.zeros(2))
    assert bottom == pytest.approx(np.sqrt(pendulum.g / pendulum.l), rel=1e-12)
    swinging = fastest_frequency(pendulum, jnp.array([[1.0, 0.3], [-1.2, 0.0]]))
    assert swinging == pytest.approx(np.sqrt(np.cos(1.0)), rel=1e-12) and swinging < bottom


@pytest.mark.parametrize("system", [DoublePendulum(), RigidBody()])
def test_fastest_frequency_needs_a_canonical_separable_system(system):
    with pytest.raises(ValueError, match="canonical separable system"):
        fastest_frequency(system, jnp.zeros(system.dim))


def test_verlet_is_stable_below_two_over_omega_and_not_above():
    oscillator = HarmonicOscillator(m=1.0, k=4.0)
    z0 = jnp.array([1.0, 0.0])
    limit = 2.0 / fastest_frequency(oscillator, z0)
    stable = integrate(oscillator, z0, 0.95 * limit, 1000, method="stormer_verlet")
    assert float(jnp.max(jnp.abs(stable))) < 10.0
    # the negative control: beyond the limit the amplitude grows by |λ| ≈ 1.9 per step
    unstable = integrate(oscillator, z0, 1.05 * limit, 100, method="stormer_verlet")
    assert float(jnp.max(jnp.abs(unstable))) > 1e20


@pytest.mark.slow  # a command-line training
def test_train_with_a_stride_records_it_and_the_stability_limit(tmp_path, capsys):
    out = tmp_path / "run"
    status = cli.main(["train", "--system", "harmonic_oscillator", "--stride", "4",
                       "--epochs", "2", "--horizon", "0", "--out", str(out)])
    assert status in (0, 4)
    printed = capsys.readouterr().out
    assert "4 × 0.1 = Δt 0.4; Störmer–Verlet stable for Δt < 2/ω_max = 2" in printed
    run = json.loads((out / "run.json").read_text())
    assert run["options"]["stride"] == 4
    one, _, _ = for_system("harmonic_oscillator", HarmonicOscillator(), n_trajectories=2)
    assert run["dt"] == pytest.approx(4 * one.dt) and one.states.shape[1] == SAMPLED_STEPS + 1
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stride"] == 4
    assert metrics["fastest_frequency"] == pytest.approx(1.0, rel=1e-5)
    assert metrics["verlet_stability_limit"] == pytest.approx(2.0, rel=1e-5)
    assert cli.main(["evaluate", str(out), "--horizon", "0"]) in (0, 4)  # rebuilt at the stride
    again = json.loads((out / "metrics.json").read_text())
    assert again["dt"] == pytest.approx(run["dt"]) and again["stride"] == 4
