"""Training a transformer without its position signal first, then with it
(`geomlearn.training.fit_position_last`, what `geomlearn train` does under LM)."""

from __future__ import annotations

import json
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.datasets import parametric_pendulum
from geomlearn.training import fit_position_last, plain_twin, trains_position_last

from _helpers import normal

T = 4


def strict_json(path):
    return json.loads(pathlib.Path(path).read_text(), parse_constant=_refuse)


def _refuse(name):
    raise ValueError(f"not strict JSON: {name}")


def small(placement, key):
    return gl.SymplecticTransformer(2, n_sympnet=1, width=3, L=1,
                                    positional_encoding=placement, key=key)


@pytest.fixture
def data():
    return parametric_pendulum(jax.random.PRNGKey(3), seq_length=T, n_trajectories=4,
                               n_periods=3, dtype=jnp.float64)


def test_the_plain_twin_is_the_model_without_its_gains_holding_its_arrays(key):
    rng = np.random.default_rng(0)
    model = small(True, key())
    # the shared arrays moved away from a fresh model's, so a twin built afresh (not
    # holding the model's arrays) would differ
    model = eqx.tree_at(lambda m: m.layers, model,
                        jax.tree_util.tree_map(
                            lambda a: a + 0.3 if eqx.is_inexact_array(a) else a, model.layers))
    twin = plain_twin(model)
    assert twin.positional_encoding is None and twin.position_gains is None
    assert twin.config() == {**model.config(), "positional_encoding": None}
    Z = normal(rng, (T, 2))
    np.testing.assert_array_equal(twin(Z), model(Z))  # zero gains: the same map
    # negative control: once the gains act, the encoded map is not the twin's
    moved = eqx.tree_at(lambda m: m.position_gains, model,
                        jax.tree_util.tree_map(lambda g: g + 0.5, model.position_gains))
    assert float(jnp.max(jnp.abs(moved(Z) - twin(Z)))) > 1e-3


@pytest.mark.parametrize("placement", [False, "input", "conjugate", "rotary", "rotary-fixed"])
def test_no_twin_without_trainable_gains(placement, key):
    """No signal, a translation or a rotation (learned frequencies included): the model
    does not start as the model without encoding, so there is no twin to warm-start."""
    model = small(placement, key())
    with pytest.raises(ValueError, match="no position signal|does not start as the model"):
        plain_twin(model)
    assert not trains_position_last(model, gl.LevenbergMarquardt())


def test_it_applies_under_damped_least_squares_only(key):
    model = small(True, key())
    assert trains_position_last(model, gl.LevenbergMarquardt())
    assert trains_position_last(model, gl.GaussNewton())
    assert not trains_position_last(model, None)  # the default Adam
    assert not trains_position_last(gl.GSympNet(2, n_layers=2, width=3, key=key()),
                                    gl.LevenbergMarquardt())


def test_two_stages_handed_over_without_a_jump(key, data):
    """The second stage starts where the first ended (the gains start at zero): the LM
    loss, which never rises, does not rise at the hand-over; the history is one run."""
    model = small(True, key())
    trained, history = fit_position_last(model, data, epochs=6, optimizer=gl.LevenbergMarquardt(),
                                         seq_length=T, prediction_window=T, key=key(),
                                         progress=False)
    assert history["plain_epochs"] == 3 and history["epoch"] == [1, 2, 3, 4, 5, 6]
    assert np.all(np.diff(history["time"]) > 0) and history["stop_reason"] == "epochs"
    loss = np.asarray(history["loss"])
    assert np.all(np.diff(loss) <= 1e-12 * loss[:-1])
    # the first stage trained the shared arrays, the second the gains as well
    assert not all(np.array_equal(a, b) for a, b in zip(
        jax.tree_util.tree_leaves(plain_twin(model)), jax.tree_util.tree_leaves(plain_twin(trained))))
    assert any(np.any(np.asarray(g)) for g in jax.tree_util.tree_leaves(trained.position_gains))
    assert trained.positional_encoding == "amplitude"  # True, resolved


def test_a_time_budget_is_shared(key, data):
    _, history = fit_position_last(small(True, key()), data, time_budget=60.0, epochs=4,
                                   optimizer=gl.LevenbergMarquardt(), seq_length=T,
                                   prediction_window=T, key=key(), progress=False)
    assert history["plain_epochs"] == 2 and len(history["epoch"]) == 4


@pytest.mark.parametrize("options, message", [
    ({"epochs": 4, "checkpoint": "x.ckpt"}, "does not support checkpoint"),
    ({}, "needs epochs or time_budget"),
])
def test_refusals(options, message, key, data):
    with pytest.raises(ValueError, match=message):
        fit_position_last(small(True, key()), data, optimizer=gl.LevenbergMarquardt(),
                          key=key(), **options)


@pytest.mark.slow  # command-line trainings
def test_the_command_line_trains_position_last_under_lm_only(tmp_path):
    """The symplectic transformer under LM trains position-last; under Adam, and the
    standard transformer, from the start."""
    argv = ["train", "--system", "parametric_pendulum", "--model", "symplectic-transformer",
            "--positional-encoding", "--epochs", "4", "--horizon", "0"]
    assert cli.main(argv + ["--out", str(tmp_path / "lm")]) in (0, 4)  # 4: too short to learn
    assert strict_json(tmp_path / "lm" / "history.json")["plain_epochs"] == 2
    assert "position-last" in strict_json(tmp_path / "lm" / "run.json")["trainer"]
    assert cli.main(argv + ["--trainer", "adam", "--out", str(tmp_path / "adam")]) in (0, 4)  # 4: too short to learn
    assert "plain_epochs" not in strict_json(tmp_path / "adam" / "history.json")
    assert "position-last" not in strict_json(tmp_path / "adam" / "run.json")["trainer"]
    # the standard transformer trains its gains from the start (measured: position-last
    # took most of its gain on the driven pendulum)
    tf = ["train", "--system", "parametric_pendulum", "--model", "transformer",
          "--positional-encoding", "--epochs", "2", "--horizon", "0", "--out", str(tmp_path / "tf")]
    assert cli.main(tf) in (0, 4)  # 4: too short to learn
    assert "plain_epochs" not in strict_json(tmp_path / "tf" / "history.json")
