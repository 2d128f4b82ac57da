import math
import os
import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import geomlearn
from geomlearn import PositionalEncoding, positional_encoding
from geomlearn.geometry import jacobian


def reference_table(T, d, base=10000.0):
    """An independent float64 reference, entry by entry with Python's math module."""
    out = np.empty((T, d), dtype=np.float64)
    for t in range(T):
        for c in range(d):
            j2 = c - (c % 2)
            angle = t * math.exp(-math.log(base) * j2 / d)
            out[t, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return out


def _spacing(x, dtype, info):
    # Distance to the next representable value above |x| in `dtype`, computed in float64.
    bits = x.view(np.uint16 if info.bits == 16 else np.uint32 if info.bits == 32 else np.uint64)
    nxt = (bits + 1).view(dtype)
    return np.abs(nxt.astype(np.float64) - x.astype(np.float64))


def test_first_row_and_formula_small():
    P = positional_encoding(6, 4, dtype=jnp.float64)
    np.testing.assert_array_equal(P[0], [0.0, 1.0, 0.0, 1.0])
    np.testing.assert_allclose(P, reference_table(6, 4), rtol=0, atol=1e-15)
    # Column 2: t / 10000**(2/4) = t / 100.
    np.testing.assert_allclose(P[5, 2], math.sin(0.05), rtol=1e-15)


def test_odd_dim_last_column_is_a_sine():
    P = np.asarray(positional_encoding(7, 3, dtype=jnp.float64))
    ref = reference_table(7, 3)
    np.testing.assert_allclose(P, ref, atol=1e-15)
    t = np.arange(7)
    np.testing.assert_allclose(P[:, 2], np.sin(t / 10000.0 ** (2 / 3)), atol=1e-15)
    assert P.shape == (7, 3)
    assert PositionalEncoding(3)(jnp.zeros((7, 3))).shape == (7, 3)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16])
def test_precision_is_float64_rounded_once(dtype):
    T, d = 5000, 512
    ref = reference_table_fast(T, d)
    P = np.asarray(positional_encoding(T, d, dtype=dtype)).astype(np.float64)
    err = np.abs(P - ref)
    assert np.all(err <= _spacing(np.abs(ref).astype(dtype), dtype, ml_dtypes.finfo(dtype)))


def test_float32_angle_would_fail_the_precision_test():
    """Negative control: the same check rejects a table whose angles are float32."""
    T, d = 5000, 512
    ref = reference_table_fast(T, d)
    t = np.arange(T, dtype=np.float32)[:, None]
    inv = (np.float32(10000.0) ** (-np.arange(0, d, 2, dtype=np.float32) / np.float32(d)))
    angles = t * inv  # float32 angles
    bad = np.empty((T, d), dtype=np.float32)
    bad[:, 0::2] = np.sin(angles)
    bad[:, 1::2] = np.cos(angles)
    err = np.abs(bad.astype(np.float64) - ref)
    spacing = _spacing(np.abs(ref).astype(np.float32), np.float32, ml_dtypes.finfo(np.float32))
    assert np.any(err > spacing)
    assert err.max() > 1e-4


def reference_table_fast(T, d, base=10000.0):
    # Vectorised but independent of the library's expression: exp/log and Python floats
    # for the frequencies, checked against the entry-by-entry reference on a corner.
    freqs = np.array([math.exp(-math.log(base) * (c - c % 2) / d) for c in range(d)])
    angles = np.arange(T, dtype=np.float64)[:, None] * freqs[None, :]
    out = np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))
    for t, c in [(T - 1, d - 1), (T - 1, 0), (T // 2, d // 3), (1, 1)]:
        j2 = c - c % 2
        angle = t * math.exp(-math.log(base) * j2 / d)
        expected = math.sin(angle) if c % 2 == 0 else math.cos(angle)
        assert abs(out[t, c] - expected) <= 1e-15
    return out


def test_float64_table_matches_reference():
    P = np.asarray(positional_encoding(5000, 64, dtype=jnp.float64))
    # The angles themselves are rounded to float64 in two different ways, which can
    # differ by an ulp of ~5000 rad ≈ 1e-12.
    np.testing.assert_allclose(P, reference_table_fast(5000, 64), rtol=0, atol=5e-12)


def test_function_validates_arguments():
    assert positional_encoding(0, 4).shape == (0, 4)
    with pytest.raises(ValueError, match="seq_length must be >= 0, got -1"):
        positional_encoding(-1, 4)
    with pytest.raises(ValueError, match="dim must be >= 1, got 0"):
        positional_encoding(3, 0)
    with pytest.raises(ValueError, match="base must be a finite positive number, got 0"):
        positional_encoding(3, 4, base=0.0)
    with pytest.raises(ValueError, match="-2"):
        positional_encoding(3, 4, base=-2.0)
    with pytest.raises(TypeError, match="floating"):
        positional_encoding(3, 4, dtype=jnp.int32)
    assert positional_encoding(3, 4).dtype == jnp.float32  # the documented default


def test_layer_has_no_parameters_and_a_repr():
    pe = PositionalEncoding(4, base=500.0)
    assert jax.tree_util.tree_leaves(pe) == []
    assert jax.tree_util.tree_leaves(eqx.filter(pe, eqx.is_array)) == []
    assert repr(pe) == "PositionalEncoding(dim=4, base=500.0)"
    with pytest.raises(ValueError, match="dim"):
        PositionalEncoding(0)
    with pytest.raises(ValueError, match="base"):
        PositionalEncoding(4, base=-1.0)


def test_layer_reads_length_per_call():
    pe = PositionalEncoding(4)
    for T in (1, 3, 17, 100):
        x = jnp.zeros((T, 4), dtype=jnp.float64)
        np.testing.assert_array_equal(pe(x), positional_encoding(T, 4, dtype=jnp.float64))


def test_layer_adds_table_with_leading_axes(key):
    pe = PositionalEncoding(6)
    x = jax.random.normal(key(), (2, 3, 5, 6))
    out = pe(x)
    table = jnp.broadcast_to(positional_encoding(5, 6, dtype=jnp.float64), x.shape)
    np.testing.assert_allclose(out - x, table, rtol=0, atol=1e-15)


def test_layer_input_errors():
    pe = PositionalEncoding(4)
    with pytest.raises(ValueError, match=r"\(\.\.\., T, 4\).*\(4,\)"):
        pe(jnp.zeros(4))
    with pytest.raises(ValueError, match=r"last dimension 4.*\(3, 5\)"):
        pe(jnp.zeros((3, 5)))
    with pytest.raises(TypeError, match="floating"):
        pe(jnp.zeros((3, 4), dtype=jnp.int32))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64])
def test_layer_output_dtype_follows_input(dtype):
    x = jnp.ones((5, 3), dtype=dtype)
    out = PositionalEncoding(3)(x)
    assert out.dtype == dtype
    out_jit = jax.jit(PositionalEncoding(3))(x)
    assert out_jit.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out, np.float64), np.asarray(out_jit, np.float64))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_identity_jacobian_exactly(dtype, key):
    pe = PositionalEncoding(5)
    Z = jax.random.normal(key(), (7, 5), dtype=dtype)
    M = jacobian(pe, Z)
    assert M.dtype == dtype
    np.testing.assert_array_equal(M, np.eye(35))
    # A batch of windows: d out / d in is the identity on the whole batch too.
    B = jax.random.normal(key(), (3, 4, 5), dtype=dtype)
    Mb = jax.jacfwd(pe)(B)
    np.testing.assert_array_equal(Mb.reshape(60, 60), np.eye(60))


def test_jit_vmap_grad(key):
    pe = PositionalEncoding(4)
    X = jax.random.normal(key(), (6, 5, 4))
    np.testing.assert_array_equal(jax.jit(pe)(X), pe(X))
    np.testing.assert_array_equal(jax.vmap(pe)(X), pe(X))
    g = jax.grad(lambda x: jnp.sum(pe(x) ** 2))(X[0])
    np.testing.assert_allclose(g, 2 * (X[0] + positional_encoding(5, 4, dtype=jnp.float64)), rtol=1e-14)


def test_order_becomes_visible():
    """The point of the layer: permuted rows no longer give permuted outputs."""
    pe = PositionalEncoding(2)
    Z = jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    perm = jnp.array([2, 0, 1])
    assert not np.allclose(pe(Z[perm]), pe(Z)[perm])


def test_top_level_exports():
    assert geomlearn.PositionalEncoding is PositionalEncoding
    assert geomlearn.layers.positional_encoding is positional_encoding


def test_allocates_on_the_input_device():
    """An input committed to the second of two host devices yields an output there."""
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp
        from geomlearn import PositionalEncoding
        devs = jax.devices()
        assert len(devs) == 2, devs
        pe = PositionalEncoding(4)
        x = jax.device_put(jnp.ones((3, 4)), devs[1])
        eager = pe(x)
        jitted = jax.jit(pe)(x)
        print(sorted(eager.devices()) == [devs[1]], sorted(jitted.devices()) == [devs[1]])
        """
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
