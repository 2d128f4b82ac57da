"""The rotary placements (`"rotary"`, `"rotary-fixed"`): the window map conjugated by
row-wise rotations in the (q_k, p_k) planes. The rotation is what the module says
(against an independent dense reference), the structure holds in float64 for random
frequencies and times, with negative controls (the rotation inside the attention alone,
a non-symplectic "rotation"); order becomes visible; the inverses are exact; the learned
frequencies train and the fixed ones do not; bad input, files and the command line."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn import cli
from geomlearn.cli._main import _parser
from geomlearn.cli._registry import resolve_model
from geomlearn.geometry import symplecticity_residual, volume_residual
from geomlearn.layers import _position_signal as signals
from geomlearn.layers._rotary import ROTARY_BASE, RotaryFrequencies, rotary_frequencies

from _helpers import normal, randomize

STRUCTURE_TOL = 1e-12  # float64, as every structure test of the suite
T = 5
TIMES = np.array([-0.7, 0.25, 1.5, 3.0, 7.75])  # real, strictly increasing


@pytest.fixture
def rng():
    return np.random.default_rng(20270311)


def reference_rotations(frequencies, t, d) -> np.ndarray:
    """The matrices R_t `(T, d, d)` written out: coordinate k turned with k + d // 2 by
    the angle frequencies[k] * t (NumPy, independent of the library)."""
    m = d // 2
    R = np.tile(np.eye(d), (len(t), 1, 1))
    for i, ti in enumerate(np.asarray(t, np.float64)):
        for k in range(m):
            c, s = np.cos(frequencies[k] * ti), np.sin(frequencies[k] * ti)
            R[i, k, k], R[i, k, k + m], R[i, k + m, k], R[i, k + m, k + m] = c, -s, s, c
    return R


def with_frequencies(model, frequencies):
    return eqx.tree_at(lambda m: m.encoder.frequencies, model,
                       jnp.asarray(frequencies, model.encoder.frequencies.dtype))


def random_frequencies(rng, m):
    """Non-zero frequencies of either sign, well away from the ladder."""
    return rng.uniform(0.3, 1.7, m) * rng.choice([-1.0, 1.0], m)


def random_times(rng):
    """Random real times, strictly increasing, of either sign."""
    return jnp.asarray(np.cumsum(rng.uniform(0.1, 2.0, T)) - 1.0)


def make(cls, dim, placement, key, rng):
    """A small model with random parameters and random non-zero frequencies."""
    if cls is gl.LinearSymplecticTransformer:
        model = cls(dim, T, n_sympnet=1, width=3, L=1, positional_encoding=placement, key=key)
    elif cls is gl.SymplecticTransformer:
        model = cls(dim, n_sympnet=1, width=3, L=1, positional_encoding=placement, key=key)
    else:
        model = cls(dim, L=1, positional_encoding=placement, key=key)
    model = randomize(model, rng, 0.3)
    return with_frequencies(model, random_frequencies(rng, dim // 2))


# --------------------------------------------------------------------- the rotation


def test_the_ladder_and_the_rotation_are_what_the_module_says(rng):
    enc = RotaryFrequencies(5)
    assert enc.frequencies.dtype == jnp.float64 and enc.frequencies.shape == (2,)
    np.testing.assert_array_equal(enc.frequencies, [1.0, ROTARY_BASE ** -0.5])
    w = rotary_frequencies(8)
    assert w[0] == 1.0 and np.allclose(w[1:] / w[:-1], ROTARY_BASE ** -0.25, rtol=1e-15)
    for d in (1, 3, 4):
        freqs = random_frequencies(rng, d // 2)
        enc = eqx.tree_at(lambda e: e.frequencies, RotaryFrequencies(d), jnp.asarray(freqs))
        Z = normal(rng, (T, d))
        for t, times in ((np.arange(T), None), (TIMES, jnp.asarray(TIMES))):
            expected = np.einsum("tij,tj->ti", reference_rotations(freqs, t, d), Z)
            np.testing.assert_allclose(gl.Rotary().encode(enc, Z, times), expected,
                                       rtol=0, atol=1e-14)
            np.testing.assert_allclose(gl.FixedRotary().decode(enc, Z, times),
                                       np.einsum("tji,tj->ti", reference_rotations(freqs, t, d), Z),
                                       rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="finite number above 1, got 0.5"):
        RotaryFrequencies(4, base=0.5)
    with pytest.raises(TypeError, match="base must be a real number"):
        RotaryFrequencies(4, base="100")
    # odd d: the last coordinate is left alone; row 0 (t = 0) is not turned
    Z = normal(rng, (T, 3))
    out = gl.Rotary().encode(RotaryFrequencies(3), Z)
    np.testing.assert_array_equal(out[:, 2], Z[:, 2])
    np.testing.assert_array_equal(out[0], Z[0])


def test_dtype_device_jit_vmap_and_leading_axes(rng):
    enc = RotaryFrequencies(4)
    Z = normal(rng, (3, T, 4))
    for dt in (jnp.float32, jnp.float64):
        assert gl.Rotary().encode(enc, Z.astype(dt)).dtype == dt
    batched = gl.Rotary().encode(enc, Z, TIMES)  # leading axes broadcast
    looped = jnp.stack([gl.Rotary().encode(enc, z, TIMES) for z in Z])
    np.testing.assert_allclose(batched, looped, rtol=0, atol=1e-15)
    jitted = jax.jit(lambda e, z, t: gl.Rotary().encode(e, z, t))(enc, Z[0], TIMES)
    np.testing.assert_allclose(jitted, looped[0], rtol=0, atol=1e-14)
    vmapped = jax.vmap(lambda z: gl.Rotary().encode(enc, z, TIMES))(Z)
    np.testing.assert_allclose(vmapped, looped, rtol=0, atol=1e-15)


def test_encode_decode_and_their_undos_are_exact_inverses(rng):
    for d in (3, 4):
        enc = eqx.tree_at(lambda e: e.frequencies, RotaryFrequencies(d),
                          jnp.asarray(random_frequencies(rng, d // 2)))
        Z = normal(rng, (T, d))
        for signal in (gl.Rotary(), gl.FixedRotary()):
            for times in (None, TIMES):
                np.testing.assert_allclose(
                    signal.undo_encode(enc, signal.encode(enc, Z, times), times), Z,
                    rtol=0, atol=1e-14)
                np.testing.assert_allclose(
                    signal.undo_decode(enc, signal.decode(enc, Z, times), times), Z,
                    rtol=0, atol=1e-14)
                # decode turns back what encode turned
                np.testing.assert_allclose(
                    signal.decode(enc, signal.encode(enc, Z, times), times), Z,
                    rtol=0, atol=1e-14)
                assert float(jnp.max(jnp.abs(signal.encode(enc, Z, times) - Z))) > 1e-2


# ------------------------------------------------------------------------- structure


@pytest.mark.parametrize("cls", [gl.SymplecticTransformer, gl.LinearSymplecticTransformer])
@pytest.mark.parametrize("placement", ["rotary", "rotary-fixed"])
def test_symplectic_for_every_frequency_and_times(cls, placement, key, rng):
    model = make(cls, 4, placement, key(), rng)
    assert type(model.signal) is signals.PLACEMENTS[placement].__class__
    Z = normal(rng, (T, 4), scale=0.5)
    for times in (None, jnp.asarray(TIMES), random_times(rng)):
        assert float(symplecticity_residual(lambda W: model(W, times), Z)) <= STRUCTURE_TOL
    # Negative control: the rows turned by a non-symplectic "rotation" A_t = S R_t (the
    # first coordinate stretched by 1.1) and turned back by its exact inverse: a
    # conjugation still, but not by a symplectic matrix.
    S = jnp.diag(jnp.asarray([1.1, 1.0, 1.0, 1.0]))
    S_inv = jnp.diag(jnp.asarray([1 / 1.1, 1.0, 1.0, 1.0]))
    signal, enc = model.signal, model.encoder
    plain = eqx.tree_at(lambda m: m.encoder.frequencies, model,
                        jnp.zeros_like(model.encoder.frequencies))

    def stretched(W):
        inner = plain(signal.encode(enc, W) @ S.T)
        return signal.decode(enc, inner @ S_inv.T)

    assert float(symplecticity_residual(stretched, Z)) > 1e-4


@pytest.mark.parametrize("dim", [3, 4])
@pytest.mark.parametrize("placement", ["rotary", "rotary-fixed"])
def test_volume_preserving_and_invertible_for_every_frequency(dim, placement, key, rng):
    model = make(gl.VolumePreservingTransformer, dim, placement, key(), rng)
    Z = normal(rng, (T, dim), scale=0.5)
    for times in (None, jnp.asarray(TIMES), random_times(rng)):
        assert float(volume_residual(lambda W: model(W, times), Z)) <= STRUCTURE_TOL
        np.testing.assert_allclose(model.inverse(model(Z, times), times), Z, rtol=0, atol=1e-12)
    # the inverse needs the same rotation: without it, it misses
    unrotated = eqx.tree_at(lambda m: m.encoder.frequencies, model,
                            jnp.zeros_like(model.encoder.frequencies))
    assert float(jnp.max(jnp.abs(unrotated.inverse(model(Z)) - Z))) > 1e-3


@pytest.mark.parametrize("dim", [3, 4])
def test_the_rotation_inside_the_attention_alone_breaks_the_volume(dim, key, rng):
    """The naive placement (RoFormer's: the weights from turned rows, applied to the rows
    as they are) is not volume-preserving; the same construction without a turn is the
    library's attention (positive control), and the conjugation keeps the volume."""
    model = make(gl.VolumePreservingTransformer, dim, "rotary", key(), rng)
    attention, enc = model.attention[0], model.encoder
    Z = normal(rng, (T, dim), scale=0.8)

    def naive(e):
        return lambda W: attention.weights(gl.Rotary().encode(e, W)).T @ W

    still = eqx.tree_at(lambda e: e.frequencies, enc, jnp.zeros_like(enc.frequencies))
    np.testing.assert_allclose(naive(still)(Z), attention(Z), rtol=0, atol=1e-13)
    assert float(volume_residual(naive(still), Z)) <= STRUCTURE_TOL
    assert float(volume_residual(naive(enc), Z)) > 1e-6
    conjugated = lambda W: gl.Rotary().decode(enc, attention(gl.Rotary().encode(enc, W)))  # noqa: E731
    assert float(volume_residual(conjugated, Z)) <= STRUCTURE_TOL


# ---------------------------------------------------------------------- order visible


def test_the_symplectic_transformer_sees_order_only_with_the_rotation(key, rng):
    k = key()
    rotary = make(gl.SymplecticTransformer, 4, "rotary", k, rng)
    plain = eqx.tree_at(lambda m: m.layers, gl.SymplecticTransformer(
        4, n_sympnet=1, width=3, L=1, key=k), rotary.layers)
    assert plain.signal == gl.NoSignal()
    Z = normal(rng, (T, 4))
    perm = np.roll(np.arange(T), 1)  # a cyclic shift: moves every row
    np.testing.assert_allclose(plain(Z[perm]), plain(Z)[perm], rtol=0, atol=1e-12)
    assert float(jnp.max(jnp.abs(rotary(Z[perm]) - rotary(Z)[perm]))) > 1e-3


# ------------------------------------------------------------------------- training


def test_learned_frequencies_train_and_fixed_ones_do_not(key, rng):
    Z, target = normal(rng, (T, 4)), normal(rng, (T, 4))
    k = key()
    for placement, moves in (("rotary", True), ("rotary-fixed", False)):
        model = make(gl.SymplecticTransformer, 4, placement, k, rng)

        @eqx.filter_grad
        def grad(m):
            return jnp.sum((m(Z, jnp.asarray(TIMES)) - target) ** 2)

        g = grad(model)
        g_freq = np.asarray(g.encoder.frequencies)
        if moves:
            assert np.all(np.abs(g_freq) > 1e-8), g_freq
        else:
            np.testing.assert_array_equal(g_freq, 0.0)
        # the other parameters train in both
        assert max(float(jnp.max(jnp.abs(x))) for x in jax.tree_util.tree_leaves(g.layers)) > 1e-6
        assert model.positional_encoding == placement


# ------------------------------------------------------------------------ the edges


def test_bad_times_and_windows_get_clear_errors(key, rng):
    model = make(gl.SymplecticTransformer, 4, "rotary", key(), rng)
    Z = normal(rng, (T, 4))
    with pytest.raises(ValueError, match=r"expects times of shape \(5,\), one per row"):
        model(Z, jnp.arange(4.0))
    vpt = make(gl.VolumePreservingTransformer, 3, "rotary-fixed", key(), rng)
    with pytest.raises(ValueError, match=r"expects times of shape \(5,\)"):
        vpt.inverse(normal(rng, (T, 3)), jnp.arange(6.0))
    enc = RotaryFrequencies(4)
    with pytest.raises(ValueError, match=r"rotary signal expects times of shape \(5,\)"):
        gl.Rotary().encode(enc, Z, jnp.arange(3.0))
    with pytest.raises(ValueError, match=r"expects windows \(\.\.\., T, 4\), got shape \(5, 3\)"):
        gl.Rotary().encode(enc, Z[:, :3])
    with pytest.raises(ValueError, match="strictly increasing"):
        gl.Rotary().decode(enc, Z, jnp.asarray([0.0, 2.0, 1.0, 3.0, 4.0]))


def test_shorthands_objects_and_families(key):
    k = key()
    for name, cls in (("rotary", gl.Rotary), ("rotary-fixed", gl.FixedRotary)):
        assert signals.PLACEMENTS[name] == cls() and cls().name == name
        assert name in signals.SHARED_PLACEMENTS
        assert name in gl.VolumePreservingTransformer.placements
        for family in (gl.SymplecticTransformer, gl.Transformer):
            assert name in family.placements
        small = dict(n_sympnet=1, width=3, L=1, key=k)
        by_name = gl.SymplecticTransformer(4, positional_encoding=name, **small)
        by_object = gl.SymplecticTransformer(4, positional_encoding=cls(), **small)
        assert eqx.tree_equal(by_name, by_object)
        assert by_object.config()["positional_encoding"] == name
        assert isinstance(by_name.encoder, RotaryFrequencies) and by_name.position_gains is None
    # the standard transformer takes it too (no structure to keep): the map depends on it
    tf = gl.Transformer(4, L=1, positional_encoding="rotary", key=k)
    Z = jnp.ones((T, 4))
    assert float(jnp.max(jnp.abs(tf(Z) - gl.Transformer(4, L=1, key=k)(Z)))) > 1e-6


def test_a_rotary_model_saves_and_loads_with_its_frequencies(tmp_path, key, rng):
    for placement, cls in (("rotary", gl.VolumePreservingTransformer),
                           ("rotary-fixed", gl.SymplecticTransformer)):
        model = make(cls, 4, placement, key(), rng)
        path = gl.save(tmp_path / f"{placement}.geomlearn", model)
        loaded = gl.load(path)
        assert loaded.positional_encoding == placement and loaded.signal == model.signal
        np.testing.assert_array_equal(loaded.encoder.frequencies, model.encoder.frequencies)
        assert not np.allclose(loaded.encoder.frequencies, rotary_frequencies(4))
        Z = normal(rng, (T, 4))
        np.testing.assert_array_equal(loaded(Z, jnp.asarray(TIMES)), model(Z, jnp.asarray(TIMES)))


def test_the_command_line_builds_a_rotary_transformer(key):
    args = _parser().parse_args(["train", "--system", "henon_heiles", "--model",
                                 "symplectic-transformer", "--positional-encoding", "rotary"])
    options = cli.TrainOptions.from_args(args)
    assert options.positional_encoding == "rotary"
    model, _ = resolve_model(options.model).build_for(
        gl.systems.HenonHeiles(), key=key(), seq_length=3,
        positional_encoding=options.positional_encoding)
    assert model.positional_encoding == "rotary" and isinstance(model.signal, gl.Rotary)
