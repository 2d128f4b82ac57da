r"""An experiment, not a placement of the library: the position signal as a row-dependent
**amplitude** of a gradient layer's potential.

`positional_encoding="bias-light"` shifts the argument of every gradient layer $l$ of a
symplectic transformer on row $t$, $\sigma(K(p_t + G_l e_t) + b)$. This experiment
instead scales the layer's potential on row $t$ by $1 + c_t$, $c_t = G_l e_t$:

$$q_t \leftarrow q_t + (1 + c_t)\,K^\top\big(a \odot \sigma(K p_t + b)\big),$$

the gradient of the potential $(1 + c_t)\sum_i a_i \Sigma\big((K p + b)_i\big)$ of row
$t$, so every layer stays a symplectic shear for every parameter value (a gradient layer
with the step $h_t = 1 + c_t$). The forcing of a driven pendulum,
$H = p^2/2 + (1 + \varepsilon\cos\Omega t)(1 - \cos q)$, modulates the amplitude of its
potential in the same way.

It runs only on the pendulums ($n = 1$), where the gains of `"bias"` and `"bias-light"`
have the shape $(1, 2)$ — one scalar $c_t$ per row — and reuses them: the process
replaces the two module-level functions of `geomlearn.models.symplectic_transformer`
that apply the position bias (`_layer_bias`, `gradient_layer_with_bias`) for its own
duration. `"bias"` then means the amplitude in the first gradient layer of each unit,
`"bias-light"` in every gradient layer. Each seed trains, back to back, the command
line's `symplectic-transformer` without the encoding and with both, by the benchmark
`positional_encoding_lm`'s `_train` (LM for `--budget-s` seconds after one untimed
epoch, float64), and writes the losses to a JSON file.

    XLA_FLAGS=--xla_cpu_multi_thread_eigen=false taskset -c 0 \
        python -m benchmarks.position_amplitude_experiment fast_driven_pendulum --out DIR

Recorded in `benchmarks/RESULTS.md` ("A row-dependent amplitude: an experiment, not a
placement of the library").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PROBLEMS = ("fast_driven_pendulum", "parametric_pendulum")


def _amplitude(layer, z, c):
    """The gradient layer on one point `z` with its potential scaled by `1 + c[0]`."""
    return layer(z, 1 + c[0])  # a gradient layer's second argument scales its increment


def _row_features(layer, gain, T: int, through_argument: bool):
    """$c_t = G e_t$, shape `(T, 1)`: one amplitude per row."""
    from geomlearn.layers._position_signal import position_bias

    return position_bias(gain, T)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", choices=PROBLEMS)
    parser.add_argument("--budget-s", type=float, default=20.0)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", True)  # as the benchmark's pinned child
    from geomlearn.models import symplectic_transformer as st

    from . import positional_encoding_lm as B

    st._layer_bias, st.gradient_layer_with_bias = _row_features, _amplitude
    data = B._problem_data(args.problem, None)
    if data[1].dim != 2:
        raise ValueError(f"the experiment needs n = 1 (dim 2), got dim {data[1].dim}")
    case = (args.problem, "ST", "default", "lm")
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        row = {"seed": seed, "without": B._train(case, False, data, args.budget_s, seed)}
        for placement in ("bias", "bias-light"):
            row[placement] = B._train(case, placement, data, args.budget_s, seed)
        rows.append(row)
        print(args.problem, seed, {
            k: (v["params"], v["epochs"], round(v["val_loss"] / row["without"]["val_loss"], 3))
            for k, v in row.items() if k != "seed"}, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"position_amplitude_{args.problem}.json"
    path.write_text(json.dumps({"problem": args.problem, "budget_s": args.budget_s,
                                "runs": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
