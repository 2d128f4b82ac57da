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


@pytest.mark.slow  # starts a process
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


# --------------------------------------------------------------------------------------
# Any length: exact argument reduction, O(dim) program constants (issue 16)

# pi to 60 significant digits, written out (independent of the library's Machin series).
_PI_DIGITS = "3.14159265358979323846264338327950288419716939937510582097494"


def _exact_reference_rows(rows, d, base=10000.0):
    """Sin/cos entries for positions `rows` in long double, with an argument reduction
    independent of the library's: the angle t*w is split into two exact long-double
    products (w = w_hi + w_lo, w_hi of 32 bits) and reduced by pi/2 in three Cody-Waite
    pieces taken from a decimal string of pi. Accurate to about 1e-19 relative, far
    below a float32 ulp and below a float64 ulp. Needs an 80-bit long double."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    ld = np.longdouble
    half_pi = Decimal(_PI_DIGITS) / 2
    p1 = ld(float(half_pi))  # 53 bits; k * p1 is exact in long double for k < 2^11 ...
    # ... so use a 30-bit first piece instead: k < 2^34 keeps k * p1 exact (64 bits).
    p1 = ld(math.ldexp(math.floor(math.ldexp(float(half_pi), 29)), -29))
    rest = half_pi - Decimal(float(p1))
    p2 = ld(math.ldexp(math.floor(math.ldexp(float(rest), 60)), -60))
    p3 = ld(float(rest - Decimal(float(p2))))
    from geomlearn.layers.positional import angular_frequencies as _frequencies  # the definition of the table

    w = np.repeat(_frequencies(d, base), 2)[:d]
    w_hi = np.array([math.ldexp(math.floor(math.ldexp(v, 31 - math.frexp(v)[1])), math.frexp(v)[1] - 31) for v in w])
    w_lo = w - w_hi  # exact in float64
    t = np.asarray(rows, dtype=ld)[:, None]
    a1, a2 = t * w_hi.astype(ld)[None, :], t * w_lo.astype(ld)[None, :]  # both exact
    k = np.rint((a1 + a2) / (p1 + p2))
    r = ((a1 - k * p1) - k * p2) + a2 - k * p3
    q = (k.astype(np.int64) + (np.arange(d) % 2)[None, :]) % 4  # cos = sin shifted
    s, c = np.sin(r), np.cos(r)
    return np.where(q == 0, s, np.where(q == 1, c, np.where(q == 2, -s, -c)))


def _ulps(values, exact, dtype):
    """|values - exact| in units of the spacing of |exact| rounded to `dtype`."""
    dtype = np.dtype(dtype)
    rounded = np.abs(exact).astype(np.float64).astype(dtype)
    bits = rounded.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize])
    spacing = (bits + 1).view(dtype).astype(np.longdouble) - rounded.astype(np.longdouble)
    return np.abs(np.asarray(values).astype(np.longdouble) - exact) / spacing


needs_long_double = pytest.mark.skipif(
    np.finfo(np.longdouble).nmant < 63, reason="the reference needs an 80-bit long double"
)


def test_frequencies_and_constants_are_the_documented_ones():
    from geomlearn.layers import positional as P

    d = 256
    w = P.angular_frequencies(d, 10000.0)
    indep = np.array([math.exp(-math.log(10000.0) * 2 * j / d) for j in range((d + 1) // 2)])
    # exp(log(base) * x) amplifies the rounding of its argument: a few ulp apart at most
    np.testing.assert_allclose(w, indep, rtol=4e-15, atol=0)
    # 2/pi in fixed point against the decimal digits of pi
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    two_over_pi = Decimal(2) / Decimal(_PI_DIGITS)
    assert abs(Decimal(P.two_over_pi_fixed(180)) / Decimal(2**180) - two_over_pi) < Decimal(2) ** -178


@needs_long_double
def test_reference_is_accurate_on_a_corner():
    """The test's reference against Python's math on small angles (where the float64
    product t*w is exact enough): a check of the checker."""
    ref = _exact_reference_rows([0, 1, 7, 300], 6)
    from geomlearn.layers.positional import angular_frequencies as _frequencies

    w = _frequencies(6, 10000.0)
    for i, t in enumerate([0, 1, 7, 300]):
        for c in range(6):
            expected = (math.sin if c % 2 == 0 else math.cos)(t * w[c // 2])
            assert abs(float(ref[i, c]) - expected) <= 3e-16 * max(1.0, t)


@pytest.mark.slow
@needs_long_double
def test_one_ulp_at_T_100000():
    """The precision contract at T = 100,000, d = 256 (25.6 million entries): float32
    within 1 ulp of the exact value everywhere; float16/bfloat16 on every 8th row;
    float64 within 2 ulp on a sample of rows, including the most ill-conditioned ones."""
    T, d = 100_000, 256
    P32 = np.asarray(positional_encoding(T, d, dtype=jnp.float32))
    worst = 0.0
    for start in range(0, T, 10_000):
        rows = np.arange(start, min(T, start + 10_000))
        worst = max(worst, float(_ulps(P32[rows], _exact_reference_rows(rows, d), np.float32).max()))
    assert worst <= 1.0, worst
    rows = np.arange(0, T, 8)
    ref = _exact_reference_rows(rows, d)
    for dtype in (jnp.float16, jnp.bfloat16):
        P = np.asarray(positional_encoding(T, d, dtype=dtype))[rows]
        assert _ulps(P, ref, dtype).max() <= 1.0
    # float64: the 2000 rows holding the smallest |entries| and 2000 random rows
    P64 = np.asarray(positional_encoding(T, d, dtype=jnp.float64))
    small = np.unique(np.argsort(np.abs(P32).min(axis=1))[:2000])
    rows = np.unique(np.concatenate([small, np.random.default_rng(0).integers(0, T, 2000)]))
    assert _ulps(P64[rows], _exact_reference_rows(rows, d), np.float64).max() <= 2.0


@needs_long_double
def test_float64_angle_product_would_fail_at_long_lengths():
    """Negative control: the plain float64 formula sin(fl(t * w)), rounded to float32,
    violates the 1-ulp contract at T = 100,000 (the rounding of the angle alone is up to
    7e-12 rad), while the library's table passes on the same rows."""
    T, d = 100_000, 256
    from geomlearn.layers.positional import angular_frequencies as _frequencies

    P32 = np.asarray(positional_encoding(T, d, dtype=jnp.float32))
    rows = np.unique(np.argsort(np.abs(P32).min(axis=1))[:500])  # the smallest entries
    ref = _exact_reference_rows(rows, d)
    w = np.repeat(_frequencies(d, 10000.0), 2)[:d]
    angles = rows[:, None].astype(np.float64) * w[None, :]
    plain = np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles)).astype(np.float32)
    assert _ulps(plain, ref, np.float32).max() > 2.0
    assert _ulps(P32[rows], ref, np.float32).max() <= 1.0


@pytest.mark.parametrize("T", [1, 4096, 4097, 20_000])
def test_short_and_long_paths_agree(T):
    """Short tables come from NumPy (float64 work), long ones from the traced program
    (float32 work): both are the same function to within an ulp of float32."""
    from geomlearn.layers import positional as P

    d = 5
    traced = np.asarray(P._traced_table_jit(seq_length=T, dim=d, base=10000.0, dtype=np.dtype(np.float32)))
    numpy_table = P._table(T, d, 10000.0, np.dtype(np.float64), np)
    ulps = _ulps(traced, numpy_table.astype(np.longdouble), np.float32)
    assert ulps.max() <= 1.0
    if T > 1:
        assert traced[1, 0] == np.float32(math.sin(1.0))


@pytest.mark.parametrize("dim", [1, 3, 256])
def test_long_windows_layer_equals_function_and_odd_dim(dim):
    T = 40_000  # above the NumPy-constant size for every dim here
    pe = PositionalEncoding(dim)
    x = jnp.zeros((2, T, dim), dtype=jnp.float32)
    out = pe(x)
    table = positional_encoding(T, dim, dtype=jnp.float32)
    assert out.shape == (2, T, dim) and out.dtype == jnp.float32
    np.testing.assert_array_equal(out[1], table)
    np.testing.assert_array_equal(jax.jit(pe)(x)[0], table)
    np.testing.assert_array_equal(table[0], np.tile([0.0, 1.0], dim)[:dim])
    if dim % 2:  # the last column is a sine
        assert abs(float(table[T - 1, dim - 1])) <= 1.0 and table[0, dim - 1] == 0.0


def test_long_window_program_holds_no_table():
    """The compiled program for T = 100,000, d = 256 is small: the table is computed,
    not embedded (a folded float32 table alone would be 100 MB)."""
    pe = PositionalEncoding(256)
    x = jax.ShapeDtypeStruct((100_000, 256), jnp.float32)
    text = jax.jit(pe).lower(x).compile().as_text()
    assert len(text) < 1_000_000


def test_identity_jacobian_and_grad_on_a_long_window(key):
    pe = PositionalEncoding(3)
    Z = jax.random.normal(key(), (20_000, 3), dtype=jnp.float64)
    g = jax.grad(lambda z: jnp.sum(pe(z) * Z))(Z)
    np.testing.assert_array_equal(g, Z)
    t, jvp = jax.jvp(pe, (Z,), (Z,))
    np.testing.assert_array_equal(jvp, Z)
    np.testing.assert_array_equal(t, Z + positional_encoding(20_000, 3, dtype=jnp.float64))
    np.testing.assert_array_equal(jax.vmap(pe)(Z[None])[0], pe(Z))


@pytest.mark.slow  # starts a process
def test_float32_table_without_x64_matches():
    """With x64 off (JAX's default) the long float32 table is the same bits."""
    code = textwrap.dedent(
        """
        import numpy as np, jax, jax.numpy as jnp
        from geomlearn import positional_encoding, PositionalEncoding
        assert not jax.config.jax_enable_x64
        P = positional_encoding(30000, 7)
        assert P.dtype == jnp.float32
        out = jax.jit(PositionalEncoding(7))(jnp.zeros((30000, 7), jnp.float32))
        assert (np.asarray(out) == np.asarray(P)).all()
        np.save(__import__("sys").argv[1], np.asarray(P))
        """
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.npy")
        env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", ""))
        env.pop("JAX_ENABLE_X64", None)
        out = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        np.testing.assert_array_equal(np.load(path), positional_encoding(30000, 7, dtype=jnp.float32))


@pytest.mark.slow  # starts a process
def test_long_table_allocates_on_the_input_device():
    """As `test_allocates_on_the_input_device`, for a window long enough that the table is
    computed in a program (eagerly: the small jitted program runs where the input is)."""
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp
        from geomlearn import PositionalEncoding
        devs = jax.devices()
        assert len(devs) == 2, devs
        pe = PositionalEncoding(4)
        x = jax.device_put(jnp.ones((20000, 4)), devs[1])
        eager = pe(x)
        jitted = jax.jit(pe)(x)
        print(sorted(eager.devices()) == [devs[1]], sorted(jitted.devices()) == [devs[1]])
        """
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
