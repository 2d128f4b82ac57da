#!/usr/bin/env bash
# GPU readiness check for geomlearn (issue 16): run on a machine with an NVIDIA GPU.
#
#   bash benchmarks/device_check.sh            # results in ./device-results
#   OUT=/some/dir bash benchmarks/device_check.sh
#
# What it does, each step recorded under $OUT (a step that fails is recorded and the
# script goes on, so one run returns everything it could measure):
#
#   1. a fresh virtual environment with the CUDA build of JAX (`jax[cuda12]`, or
#      $JAX_SPEC) and this package with its test extras; `nvidia-smi`, `pip freeze` and
#      `jax.devices()` go to $OUT/environment.txt. No network on the machine? Put the
#      wheels in a folder and set WHEELS=/that/folder (pip then installs offline), or set
#      VENV=/an/existing/venv that already has them (nothing is installed then);
#   2. the structure tests (symplecticity / volume residuals, layers and models) and the
#      positional-encoding tests, with JUnit XML in $OUT;
#   3. the positional encoding on the GPU: the table is created on the input's device,
#      the long (100000, 256) table agrees with the CPU one to 1 float32 ulp, and its
#      first jitted call and steady cost ($OUT/positional_gpu.json);
#   4. the throughput and rollout benchmarks (`python -m benchmarks NAME --out $OUT`;
#      QUICK=1 runs their smoke-test sizes), JSON in $OUT.
#
# Nothing here assumes the CPU: JAX picks the GPU as its default backend, and the script
# stops early (exit 2) if it does not see one, unless ALLOW_CPU=1.
#
# Environment: OUT (default ./device-results), PYTHON (default python3), JAX_SPEC
# (default "jax[cuda12]"), WHEELS, VENV, QUICK, ALLOW_CPU, PYTEST_TIMEOUT (seconds per
# step, default 900).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
OUT="${OUT:-./device-results}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PYTHON="${PYTHON:-python3}"
JAX_SPEC="${JAX_SPEC:-jax[cuda12]}"
STEP_TIMEOUT="${PYTEST_TIMEOUT:-900}"
STATUS="$OUT/status.txt"
: > "$STATUS"

step() {  # step NAME COMMAND...: run, log to $OUT/NAME.log, record the exit status
    local name="$1"; shift
    echo "== $name: $*"
    local start=$SECONDS
    timeout "$STEP_TIMEOUT" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name rc=$rc seconds=$((SECONDS - start))" | tee -a "$STATUS"
    tail -n 5 "$OUT/$name.log"
    return 0
}

# 1. environment -------------------------------------------------------------------------
if [[ -n "${VENV:-}" ]]; then
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
else
    VENV="$(mktemp -d)/venv"
    "$PYTHON" -m venv "$VENV"
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
    pip_args=(--quiet)
    if [[ -n "${WHEELS:-}" ]]; then
        pip_args+=(--no-index --find-links "$WHEELS")
    else
        python -m pip install --quiet --upgrade pip
    fi
    python -m pip install "${pip_args[@]}" "$JAX_SPEC" || echo "install $JAX_SPEC failed" | tee -a "$STATUS"
    python -m pip install "${pip_args[@]}" -e ".[test]" || echo "install package failed" | tee -a "$STATUS"
fi

{
    date -u
    nvidia-smi 2>&1 || echo "nvidia-smi not available"
    python -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__); print('backend', jax.default_backend()); print('devices', jax.devices())"
    python -m pip freeze
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt" | head -n 30

backend="$(python -c 'import jax; print(jax.default_backend())' 2>/dev/null || echo none)"
echo "backend=$backend" | tee -a "$STATUS"
if [[ "$backend" != "gpu" && "${ALLOW_CPU:-0}" != "1" ]]; then
    echo "JAX does not see a GPU (backend: $backend); stopping (ALLOW_CPU=1 to go on)" | tee -a "$STATUS"
    exit 2
fi

# 2. structure tests and positional-encoding tests ----------------------------------------
step structure_tests python -m pytest -q -p no:cacheprovider --junitxml="$OUT/structure_tests.xml" \
    tests/test_geometry.py tests/test_volume_preserving.py tests/test_sympnet.py \
    tests/test_sympnet_layers.py tests/test_attention.py tests/test_transformer.py \
    tests/test_henon.py tests/test_symmetric.py tests/test_ridge_sympnet.py
step positional_tests python -m pytest -q -p no:cacheprovider --junitxml="$OUT/positional_tests.xml" \
    tests/test_positional.py

# 3. positional encoding on the GPU ---------------------------------------------------------
step positional_gpu python - "$OUT/positional_gpu.json" <<'PY'
import json, sys, time
import numpy as np
import jax, jax.numpy as jnp
from geomlearn import PositionalEncoding, positional_encoding

out = {"backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()]}
dev = jax.devices()[-1]  # the last accelerator: not necessarily the default device
T, d = 100_000, 256
x = jax.device_put(jnp.zeros((T, d), jnp.float32), dev)
x.block_until_ready()
pe = PositionalEncoding(d)
f = jax.jit(pe)
t0 = time.perf_counter(); y = f(x).block_until_ready(); out["first_call_s"] = time.perf_counter() - t0
steady = []
for _ in range(5):
    t0 = time.perf_counter(); f(x).block_until_ready(); steady.append(time.perf_counter() - t0)
out["steady_median_s"] = sorted(steady)[2]
out["output_devices"] = [str(v) for v in y.devices()]
out["on_input_device"] = list(y.devices()) == [dev]
eager = pe(x)
out["eager_on_input_device"] = list(eager.devices()) == [dev]
short = jax.device_put(jnp.ones((3, 3), jnp.float32), dev)
out["short_on_input_device"] = list(PositionalEncoding(3)(short).devices()) == [dev]
# the same table computed on the CPU: within one float32 ulp
cpu = jax.devices("cpu")[0]
with jax.default_device(cpu):
    ref = np.asarray(positional_encoding(T, d, dtype=jnp.float32))
gpu = np.asarray(y)
spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
diff = np.abs(gpu.astype(np.float64) - ref.astype(np.float64))
out["max_ulp_vs_cpu"] = float((diff / spacing).max())
out["identical_to_cpu"] = bool((gpu == ref).all())
out["program_chars"] = len(jax.jit(pe).lower(x).compile().as_text())
json.dump(out, open(sys.argv[1], "w"), indent=2)
print(json.dumps(out, indent=2))
ok = out["on_input_device"] and out["eager_on_input_device"] and out["max_ulp_vs_cpu"] <= 2.0
sys.exit(0 if ok else 1)
PY

# 4. benchmarks ----------------------------------------------------------------------------
quick=()
[[ "${QUICK:-0}" == "1" ]] && quick=(--quick)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
step rollout_speed python -m benchmarks rollout_speed "${quick[@]}" --out "$OUT"
step training_throughput python -m benchmarks training_throughput "${quick[@]}" --out "$OUT"

echo "results in $OUT:"
ls -l "$OUT"
cat "$STATUS"
