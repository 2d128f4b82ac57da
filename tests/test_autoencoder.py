"""SymplecticAutoencoder and ReducedIntegrator: immersion property, training, persistence."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.manifolds import StiefelMatrix, orthonormality_residual, riemannian_adam
from geomlearn.reduction import (
    immersion_residual,
    latent_vector_field_error,
    projection_error,
    proper_symplectic_decomposition,
)

from _helpers import randomize


def _small(key, dtype=jnp.float64, full=24, reduced=4):
    return gl.SymplecticAutoencoder(full, reduced, width=5, n_encoder_layers=2,
                                    n_encoder_blocks=2, n_decoder_layers=2,
                                    n_decoder_blocks=2, key=key, dtype=dtype)


def _random_on_manifold(model, seed):
    """Every plain array random (Gaussian); every Stiefel matrix random on the manifold."""
    rng = np.random.default_rng(seed)
    model = randomize(model, rng, scale=0.5)  # also scrambles the Stiefel values
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 100))
    return jax.tree_util.tree_map(
        lambda x: StiefelMatrix.random(*x.value.shape, key=next(keys), dtype=x.value.dtype)
        if isinstance(x, StiefelMatrix) else x,
        model, is_leaf=lambda x: isinstance(x, StiefelMatrix))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decoder_is_a_symplectic_immersion_for_random_parameters(seed):
    ae = _random_on_manifold(_small(jax.random.PRNGKey(seed)), seed)
    for y in jax.random.normal(jax.random.PRNGKey(seed + 10), (3, 4), dtype=jnp.float64):
        assert float(immersion_residual(ae.decode, y)) <= 1e-12


def test_negative_control_off_manifold_parameters():
    ae = randomize(_small(jax.random.PRNGKey(0)), np.random.default_rng(0), scale=0.5)
    y = jnp.array([0.1, -0.3, 0.2, 0.5])
    assert float(immersion_residual(ae.decode, y)) > 1e-2


def test_shapes_dtype_and_jit(dtype, key):
    ae = _small(key(), dtype=dtype)
    z = jax.random.normal(key(), (24,), dtype=dtype)
    y = ae.encode(z)
    assert y.shape == (4,) and y.dtype == dtype and ae(z).dtype == dtype
    np.testing.assert_allclose(eqx.filter_jit(lambda m, x: m(x))(ae, z), ae(z), rtol=1e-5 if dtype == jnp.float32 else 1e-12,
                               atol=1e-6)
    with pytest.raises(ValueError):
        ae.encode(jnp.ones(23, dtype))
    with pytest.raises(ValueError):
        gl.SymplecticAutoencoder(24, 3, key=key())
    with pytest.raises(ValueError):
        gl.SymplecticAutoencoder(4, 8, key=key())


def test_an_autoencoder_is_not_an_integrator(key):
    ae = _small(key())
    with pytest.raises(TypeError):
        gl.iterate(ae, jnp.ones(24), 3)


@pytest.fixture(scope="module")
def toda_snapshots():
    toda = gl.systems.TodaLattice(n_particles=12)
    X = gl.integrators.integrate(toda, toda.default_initial_conditions(jnp.float64)[0], 0.1, 300)
    return toda, X


@pytest.mark.slow  # a training run
def test_fit_trains_and_keeps_the_structure(toda_snapshots):
    toda, X = toda_snapshots
    ae = _small(jax.random.PRNGKey(3), full=24, reduced=2)
    ae = gl.reduction.initialize_from_psd(ae, X)
    psd = proper_symplectic_decomposition(X, 2, centred=True)  # where it starts
    e0 = float(projection_error(ae, X))
    np.testing.assert_allclose(e0, float(projection_error(psd, X)), rtol=0.2)
    data = gl.TrajectoryData(X[None], 0.1)
    ae, hist = gl.fit(ae, data, epochs=150, optimizer=riemannian_adam(3e-3),
                      key=jax.random.PRNGKey(4), progress=False)
    assert float(projection_error(ae, X)) < e0
    for x in jax.tree_util.tree_leaves(ae, is_leaf=lambda x: isinstance(x, StiefelMatrix)):
        if isinstance(x, StiefelMatrix):
            assert float(orthonormality_residual(x.value)) <= 1e-12
    for z in X[::100]:
        assert float(immersion_residual(ae.decode, ae.encode(z))) <= 1e-12
    res = ae.structure_residuals(X[::100], ae.task())
    assert res["immersion"] <= 1e-12


@pytest.mark.slow  # a training run
def test_reduced_integrator_trains_rolls_out_and_round_trips(toda_snapshots, tmp_path):
    toda, X = toda_snapshots
    model = gl.ReducedIntegrator(24, 2, n_layers=2, width=4, autoencoder_width=4,
                                 n_encoder_blocks=1, n_decoder_blocks=1,
                                 key=jax.random.PRNGKey(0), dtype=jnp.float64)
    ae_before = eqx.filter(model.autoencoder, eqx.is_array)
    data = gl.TrajectoryData(X[None], 0.1)
    model, hist = gl.fit(model, data, epochs=20, key=jax.random.PRNGKey(1), progress=False)
    assert hist["loss"][-1] < hist["loss"][0]
    # the autoencoder is frozen (train_autoencoder=False)
    for a, b in zip(jax.tree_util.tree_leaves(ae_before),
                    jax.tree_util.tree_leaves(eqx.filter(model.autoencoder, eqx.is_array))):
        np.testing.assert_array_equal(a, b)
    traj = gl.iterate(model, X[0], 10)
    assert traj.shape[-1] == 24
    ys = model.reduced_rollout(model.encode(X[0]), 10)
    np.testing.assert_allclose(traj[-1], model.decode(ys[-1]), atol=1e-12)
    assert model.structure == "none" and model.reduced_structure == "symplectic"
    gl.save(tmp_path / "m", model)
    loaded = gl.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded(X[5]), model(X[5]))
    # from_parts
    again = gl.ReducedIntegrator.from_parts(model.autoencoder, model.integrator_net)
    np.testing.assert_array_equal(again(X[5]), model(X[5]))


def test_reduced_integrator_by_name(key):
    sizes = dict(n_layers=2, width=4, autoencoder_width=4, n_encoder_layers=1,
                 n_encoder_blocks=1, n_decoder_blocks=1)
    for name, cls in (("gsympnet", gl.GSympNet), ("lasympnet", gl.LASympNet), ("resnet", gl.ResNet)):
        model = gl.ReducedIntegrator(8, 2, integrator=name, **sizes, key=key())
        assert type(model.integrator_net) is cls and model.config()["integrator"] == name
        assert model.reduced_structure == cls.structure and model.structure == "none"
    # rollout_at: a rollout in the reduced space, decoding only the requested states
    z = jnp.linspace(-0.5, 0.5, 8)
    every, some = eqx.filter_jit(lambda m, z: (m.rollout(z, 6, m.task()),
                                               m.rollout_at(z, [5, 0, 2])))(model, z)
    np.testing.assert_allclose(some, every[jnp.array([5, 0, 2])], rtol=1e-5, atol=1e-6)
    for bad in ([], [-1], [1.5]):
        with pytest.raises(ValueError, match="steps"):
            model.rollout_at(z, bad)
    with pytest.raises(ValueError, match=r"integrator must be one of \('gsympnet', 'lasympnet', 'resnet'\), got 'sympnet'"):
        gl.ReducedIntegrator(8, 2, integrator="sympnet", **sizes, key=key())


# ------------------------------------------------ reference state and loss weights


def test_reference_state_and_block_weights_from_the_psd(toda_snapshots, tmp_path):
    """`initialize_from_psd` centres the autoencoder on the snapshot mean and weighs the
    positions and momenta by their variation; the decoder stays a symplectic immersion,
    and the training loss is the per-block relative error of the centred parts."""
    _, X = toda_snapshots
    fresh = _small(jax.random.PRNGKey(5), full=24, reduced=2)
    assert float(jnp.max(jnp.abs(fresh.reference))) == 0.0
    np.testing.assert_array_equal(fresh.loss_weights, jnp.ones(2))
    ae = gl.reduction.initialize_from_psd(fresh, X)
    np.testing.assert_allclose(ae.reference, jnp.mean(X, axis=0), rtol=1e-13)
    C = X - jnp.mean(X, axis=0, keepdims=True)
    np.testing.assert_allclose(ae.loss_weights, [1 / jnp.sqrt(jnp.mean(C[:, :12] ** 2)),
                                                 1 / jnp.sqrt(jnp.mean(C[:, 12:] ** 2))], rtol=1e-12)
    assert float(immersion_residual(ae.decode, ae.encode(X[7]))) <= 1e-12
    # the relative loss of predict/target is ‖w⊙(x̂ − x)‖ / ‖w⊙(x − x̄)‖, per block

    @eqx.filter_jit
    def measured(ae, X):
        task = ae.task()
        pred = jax.vmap(lambda x: ae.predict(x, task))(X)
        targ = jax.vmap(lambda x: ae.target(x, task))(X)
        return jnp.linalg.norm(pred - targ) / jnp.linalg.norm(targ), jax.vmap(ae)(X)

    loss, rec = measured(ae, X)
    w = jnp.repeat(ae.loss_weights, 12)[None, :]
    np.testing.assert_allclose(loss, jnp.linalg.norm(w * (rec - X)) / jnp.linalg.norm(w * C),
                               rtol=1e-10)
    # it starts near the centred PSD, far below the plain PSD (the conserved mean of q)
    err = float(jnp.linalg.norm(rec - X) / jnp.linalg.norm(X))
    centred = proper_symplectic_decomposition(X, 2, centred=True)
    plain = proper_symplectic_decomposition(X, 2)
    assert err < 0.8 * float(projection_error(plain, X))
    np.testing.assert_allclose(err, float(projection_error(centred, X)), rtol=0.2)
    # negative control: the plain start keeps a zero reference and unit weights
    plain_ae = gl.reduction.initialize_from_psd(fresh, X, centred=False, normalise=False)
    assert float(jnp.max(jnp.abs(plain_ae.reference))) == 0.0
    np.testing.assert_array_equal(plain_ae.loss_weights, jnp.ones(2))
    # saved and loaded with its reference and weights
    gl.save(tmp_path / "ae", ae)
    back = gl.load(tmp_path / "ae")
    np.testing.assert_array_equal(back.reference, ae.reference)
    np.testing.assert_array_equal(back(X[3]), ae(X[3]))


def test_a_file_without_a_reference_state_loads_with_zero():
    """Files written before the reference state (layout 1) load with x̄ = 0 and unit loss
    weights: the map they computed."""
    import pathlib

    here = pathlib.Path(__file__).parent / "data" / "models"
    for name in ("SymplecticAutoencoder", "ReducedIntegrator"):
        model = gl.load(here / f"{name}.geomlearn")
        ae = getattr(model, "autoencoder", model)
        assert ae.reference.shape == (8,) and float(jnp.max(jnp.abs(ae.reference))) == 0.0
        np.testing.assert_array_equal(ae.loss_weights, jnp.ones(2, ae.loss_weights.dtype))



# ------------------------------------------------- the latent vector-field objective


def test_fit_autoencoder_loss_is_reconstruction_plus_weighted_field_error(toda_snapshots):
    """With a zero learning rate the recorded loss is the objective at the start: its
    square is the squared relative (weighted, centred) reconstruction error plus λ times
    the squared latent field error — each computed here independently (NumPy, and
    `latent_vector_field_error`). Negative control: λ = 0 gives the reconstruction alone."""
    toda, X = toda_snapshots
    ae = gl.reduction.initialize_from_psd(_small(jax.random.PRNGKey(3), full=24, reduced=2), X)
    ae = _random_on_manifold(ae, 5)  # away from the PSD, so both terms are sizeable
    data = gl.TrajectoryData(X[None], 0.1)
    Xn = np.asarray(X)
    w = np.repeat(np.asarray(ae.loss_weights), 12)
    rec = np.asarray(jax.vmap(ae)(X))
    rec_rel2 = np.sum((w * (rec - Xn)) ** 2) / np.sum((w * (Xn - np.asarray(ae.reference))) ** 2)
    vf = float(latent_vector_field_error(ae, toda, X))
    assert rec_rel2 > 1e-3 and vf > 1e-2
    for lam in (2.5, 0.0):
        trained, history = gl.training.fit_autoencoder(
            ae, data, system=toda, field_weight=lam, epochs=1, optimizer=riemannian_adam(0.0),
            key=jax.random.PRNGKey(0), progress=False)
        assert history["loss"][0] ** 2 == pytest.approx(rec_rel2 + lam * vf ** 2, rel=1e-9)
        assert isinstance(trained, gl.SymplecticAutoencoder)


def test_fit_autoencoder_argument_errors(toda_snapshots, tmp_path):
    toda, X = toda_snapshots
    ae = _small(jax.random.PRNGKey(3), full=24, reduced=2)
    data = gl.TrajectoryData(X[None], 0.1)
    fit = gl.training.fit_autoencoder
    with pytest.raises(ValueError, match="field_weight must be finite and >= 0"):
        fit(ae, data, system=toda, field_weight=-1.0, epochs=1, key=jax.random.PRNGKey(0))
    with pytest.raises(TypeError, match="must be a SymplecticAutoencoder, got GSympNet"):
        fit(gl.GSympNet(24, key=jax.random.PRNGKey(0)), data, system=toda, epochs=1, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="system must have dim=24"):
        fit(ae, data, system=gl.systems.TodaLattice(n_particles=5), epochs=1, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="cannot be checkpointed"):
        fit(ae, data, system=toda, epochs=1, key=jax.random.PRNGKey(0), checkpoint=tmp_path / "c")


def test_the_field_term_makes_the_reduced_flow_follow_the_codes(toda_snapshots):
    """Trained 30 epochs from the centred PSD, the autoencoder's latent field error ends
    lower with the field term (λ = 1) than the same training without it (λ = 0, the
    negative control), whose reconstruction-only objective lets it grow."""
    toda, X = toda_snapshots
    ae = gl.reduction.initialize_from_psd(_small(jax.random.PRNGKey(3), full=24, reduced=2), X)
    data = gl.TrajectoryData(X[None], 0.1)
    start = float(latent_vector_field_error(ae, toda, X))
    ends = {}
    for lam in (0.0, 1.0):
        trained, _ = gl.training.fit_autoencoder(
            ae, data, system=toda, field_weight=lam, epochs=30, optimizer=riemannian_adam(3e-3),
            key=jax.random.PRNGKey(4), progress=False)
        ends[lam] = float(latent_vector_field_error(trained, toda, X))
        assert float(immersion_residual(trained.decode, trained.encode(X[7]))) <= 1e-12
    assert ends[1.0] < 0.5 * ends[0.0] and ends[1.0] < start
