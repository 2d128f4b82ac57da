r"""Positional encoding through the command line: `geomlearn train` with and without `--positional-encoding`.

`benchmarks.positional_encoding_lm` trains every transformer family for an equal wall
time in float64. A user of the command line gets something else: float32 (the command
line's default precision), Levenberg–Marquardt for **at most 500 iterations** or 150 s,
stopping when it stalls (`geomlearn.cli.choose_trainer`), and the model sizes of
the registry. This benchmark runs exactly that — `geomlearn.cli.main(["train", "--system",
S, "--model", M, "--seed", s, ...])` in this process, once without and once with
`--positional-encoding [PLACEMENT]` per seed — and compares the final training and
validation losses the command prints (`fit`'s relative loss; validation on the held-out
trajectories of the command line's recipe).

| system | order matters? | models |
|---|---|---|
| `henon_heiles` | no (Markov) | all four transformers |
| `parametric_pendulum` (the driven pendulum's `(q, p)` rows, windows aligned with the drive) | yes | all four transformers |
| `forced_rigid_body` (the pulsating rigid body's `z` rows, aligned) | yes | transformer, vp-transformer |

`--size large` passes `--model-option` to give each family the larger size of
`benchmarks.positional_encoding_lm` (`LARGE`); `--size small` its small `default` size
(`SMALL`); the registry's sizes are the default.

`--positional-encoding` alone is each family's `True`; a placement by name
(`--encodings True,amplitude`) compares designs. The long-horizon evaluation is off
(`--horizon 0`): it does not change the losses.

With the encoding the command line trains the symplectic and the linear symplectic
transformer **position-last** under Levenberg–Marquardt (`fit_position_last`: half the
budget without the position signal, then with it), the others from the start;
`--training from-start` / `position-last` applies one way to every family.

    python -m benchmarks positional_encoding_cli                     # ~1 h on one core (28 min at the earlier sizes)
    python -m benchmarks positional_encoding_cli --encodings True,amplitude --seeds 0,1,2
    python -m benchmarks positional_encoding_cli --precision float64   # geomlearn train --x64
    python -m benchmarks positional_encoding_cli --time-budget 20      # --time-budget 20
    python -m benchmarks positional_encoding_cli --training from-start # gains from iteration 1
    python -m benchmarks positional_encoding_cli --size large --cases parametric_pendulum
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

from . import _common as C
from . import positional_encoding_lm as _lm
from ._harness import Benchmark, Column, Option, Table

#: (system, order matters)
PROBLEMS = {"henon_heiles": False, "parametric_pendulum": True, "forced_rigid_body": True}
CASES = (
    ("henon_heiles", "symplectic-transformer"),
    ("henon_heiles", "linear-symplectic-transformer"),
    ("henon_heiles", "transformer"),
    ("henon_heiles", "vp-transformer"),
    ("parametric_pendulum", "symplectic-transformer"),
    ("parametric_pendulum", "linear-symplectic-transformer"),
    ("parametric_pendulum", "transformer"),
    ("parametric_pendulum", "vp-transformer"),
    ("forced_rigid_body", "transformer"),
    ("forced_rigid_body", "vp-transformer"),
)
QUICK_CASES = (("parametric_pendulum", "symplectic-transformer"),)
#: `--size large`: the constructor arguments (`geomlearn train --model-option`) that give
#: each family the larger size of `benchmarks.positional_encoding_lm`
LARGE = {
    "symplectic-transformer": ["width=12", "L=2"],
    "linear-symplectic-transformer": ["width=12", "L=2"],
    "transformer": ["transformer_dim=8"],
    "vp-transformer": ["L=2"],
}


#: `--size small`: width `dim` and one unit for the symplectic transformers,
#: `transformer_dim = dim` (the VPT's is the registry's): the `default` size of
#: `benchmarks.positional_encoding_lm` spelled as `--model-option`
SMALL = {_lm.FAMILIES[family]: [f"{name}={value!r}" for name, value in options.items()]
         for family, options in _lm.DEFAULT.items()}
SIZES = {"large": LARGE, "small": SMALL}


def _select(cases, wanted: str | None):
    """The cases whose `system model` has every word of `wanted` (comma-separated
    alternatives)."""
    if not wanted:
        return list(cases)
    alternatives = [a.split() for a in wanted.split(",") if a.strip()]
    chosen = [c for c in cases if any(all(w in c for w in words) for words in alternatives)]
    if not chosen:
        raise ValueError(f"--cases {wanted!r} selects none of {[' '.join(c) for c in cases]}")
    return chosen


def _flag(encoding: str) -> list[str]:
    """The command line's spelling: `"False"` none, `"True"` the bare flag, else by name."""
    if encoding == "False":
        return []
    return ["--positional-encoding"] + ([] if encoding == "True" else [encoding])


@contextlib.contextmanager
def _training(model: str, training: str):
    """The command line's spec of `model` as `training` says: `"cli"` as registered,
    `"from-start"` / `"position-last"` with `position_last` off / on (every family)."""
    import dataclasses

    from geomlearn import cli

    spec = cli.MODELS[model]
    if training != "cli":
        cli.MODELS[model] = dataclasses.replace(
            spec, plan=dataclasses.replace(spec.plan, position_last=training == "position-last"))
    try:
        yield
    finally:
        cli.MODELS[model] = spec


def _train(case, encoding: str, seed: int, extra: list[str], training: str = "cli") -> dict:
    """One `geomlearn train` in this process (float32 as a user runs it, unless `extra`
    holds `--x64`); its printed output is captured and dropped, its files read back."""
    import jax

    import geomlearn as gl
    from geomlearn import cli
    from geomlearn._nn import count_parameters

    system, model = case
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        argv = ["train", "--system", system, "--model", model, "--seed", str(seed),
                "--horizon", "0", "--out", str(out), *_flag(encoding), *extra]
        # the pinned process runs in float64; the command line's default is float32
        with jax.enable_x64(False), _training(model, training), \
                contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            rc = cli.main(argv)
        if rc not in (0, cli.NOT_TRAINED):  # a run that did not learn is measured as such
            raise RuntimeError(f"geomlearn {' '.join(argv)} failed ({rc}): {err.getvalue()}")
        metrics = json.loads((out / "metrics.json").read_text())
        run = json.loads((out / "run.json").read_text())
        params = count_parameters(gl.load(out / "model.geomlearn"))
    return {
        "params": params, "loss": metrics["final_loss"], "val_loss": metrics["final_val_loss"],
        "epochs": metrics["epochs"], "seconds": metrics["training_seconds"],
        "stop_reason": metrics["stop_reason"], "trained": metrics["trained"],
        "dtype": run["dtype"],
        "error_last": list(metrics["trajectory_error"].values())[-1],
    }


def measure(settings: dict, ctx) -> dict:
    runs = []
    extra = list(settings["extra"]) + (["--x64"] if settings["precision"] == "float64" else [])
    if settings.get("time_budget"):
        extra += ["--time-budget", str(settings["time_budget"])]
    for case in _select([tuple(c) for c in settings["cases"]], settings["select"]):
        options = SIZES.get(settings.get("size"), {}).get(case[1])
        sized = extra + (["--model-option", *options] if options else [])
        for seed in settings["seeds"]:
            without = _train(case, "False", seed, sized)
            for encoding in settings["encodings"]:
                with_ = _train(case, encoding, seed, sized, settings.get("training", "cli"))
                runs.append({
                    "system": case[0], "model": case[1],
                    "order": "yes" if PROBLEMS[case[0]] else "no (Markov)",
                    "encoding": encoding, "seed": seed, "without": without, "with": with_,
                    "params": f"{without['params']} → {with_['params']}",
                    "epochs": f"{without['epochs']} / {with_['epochs']}",
                    "val_without": without["val_loss"], "val_with": with_["val_loss"],
                    "loss_ratio": with_["loss"] / without["loss"],
                    "val_ratio": with_["val_loss"] / without["val_loss"],
                })
                ctx.log(f"{case[0]} {case[1]} {encoding} seed {seed}: val "
                        f"{without['val_loss']:.3g} → {with_['val_loss']:.3g} "
                        f"({runs[-1]['epochs']} iterations)")
    return {"runs": runs}


def _medians(settings, results) -> list[dict]:
    """Per case and encoding: the medians over the seeds of the validation losses without
    and with, of the ratio, and how many seeds the encoding made worse."""
    import numpy as np

    groups: dict = {}
    for r in results["runs"]:
        groups.setdefault((r["system"], r["model"], r["encoding"]), []).append(r)
    rows = []
    for (system, model, encoding), runs in groups.items():
        ratios = [r["val_ratio"] for r in runs]
        rows.append({
            "system": system, "model": model, "order": runs[0]["order"], "encoding": encoding,
            "params": runs[0]["params"], "n_seeds": len(runs),
            "val_without": float(np.median([r["val_without"] for r in runs])),
            "val_with": float(np.median([r["val_with"] for r in runs])),
            "val_ratio": float(np.median(ratios)),
            "val_range": f"{min(ratios):.2f}–{max(ratios):.2f}",
            "worse": f"{sum(v > 1.2 for v in ratios)} of {len(ratios)}",
        })
    return rows


def _targets(settings, results) -> list:
    out = []
    how = {"default": "the command line's defaults", "large": "the larger sizes (--model-option)",
           "small": "the small sizes (--model-option)"}[
               settings.get("size", "default")]
    for r in _medians(settings, results):
        name = f"geomlearn train --system {r['system']} --model {r['model']}, {r['encoding']}"
        if r["order"] == "yes":
            out.append(C.target(f"{name}: gain", "median val(without) / val(with) ≥ 5",
                                1.0 / r["val_ratio"], 1.0 / r["val_ratio"] >= 5.0, "x",
                                how))
        else:
            out.append(C.target(f"{name}: cost", "median val(with) / val(without) ≤ 1.2",
                                r["val_ratio"], r["val_ratio"] <= 1.2, "x",
                                how))
    return out


def _notes(settings, results) -> list:
    return [
        "Ratios are with / without the encoding: below 1 the encoding helps.",
        "'worse' counts the seeds whose validation loss the encoding raised by more than 20 %.",
        (f"Each run is `geomlearn train` with its defaults ({settings['precision']}; "
         + (f"--size {settings['size']}, --model-option " + "; ".join(
             f"{m}: {' '.join(o) or '(none)'}" for m, o in SIZES[settings["size"]].items())
            + "; " if settings.get("size") in SIZES else "") + "LM "
         + (f"for {settings['time_budget']:g} s" if settings.get("time_budget") else
            "up to 500 iterations or 150 s")
         + ", stopping when it stalls); 'iterations' are its LM iterations without / with."),
        {"cli": "With the encoding, the symplectic and linear symplectic transformers train "
                "position-last (geomlearn.training.fit_position_last: half the budget without "
                "the position signal), the others from the start, as the command line does.",
         "from-start": "With the encoding, every family trains its position gains from the "
                       "first iteration (what the command line did before position-last).",
         "position-last": "With the encoding, every family trains position-last (half the "
                          "budget without the position signal first)."}[
            settings.get("training", "cli")],
    ]


SPEC = Benchmark(
    name="positional_encoding_cli",
    description="geomlearn train with / without --positional-encoding at the command line's "
                "defaults (float32, LM up to 500 iterations), Markov and order-dependent systems",
    full={"seeds": [0, 1, 2], "encodings": ["True"], "cases": [list(c) for c in CASES],
          "select": None, "extra": [], "precision": "float32", "time_budget": None,
          "training": "cli", "size": "default"},
    quick={"seeds": [0], "encodings": ["True"], "cases": [list(c) for c in QUICK_CASES],
           "select": None, "extra": ["--epochs", "3"], "precision": "float32",
           "time_budget": None, "training": "cli", "size": "default"},
    measure=measure,
    tables=(
        Table("geomlearn train without / with --positional-encoding, per seed ({precision})",
              (Column("system", "system"), Column("order", "order matters"),
               Column("model", "model"), Column("encoding", "--positional-encoding"),
               Column("seed", "seed"), Column("params", "parameters"),
               Column("epochs", "iterations without / with"),
               Column("val_without", "val loss without", ".3e"),
               Column("val_with", "with", ".3e"), Column("val_ratio", "ratio", ".2f")),
              rows="runs"),
        Table("geomlearn train: medians over the seeds ({precision})",
              (Column("system", "system"), Column("order", "order matters"),
               Column("model", "model"), Column("encoding", "--positional-encoding"),
               Column("params", "parameters"), Column("n_seeds", "seeds"),
               Column("val_without", "val loss without", ".3e"),
               Column("val_with", "with", ".3e"), Column("val_ratio", "ratio", ".2f"),
               Column("val_range", "range"), Column("worse", "worse by > 20 %")),
              rows=_medians),
    ),
    targets=_targets,
    notes=_notes,
    options=(
        Option("--encodings", str, "comma-separated spellings compared with no encoding: "
               "True (the bare flag) or a placement (default True)",
               convert=lambda text: [e.strip() for e in text.split(",") if e.strip()]),
        Option("--seeds", str, "comma-separated seeds (--seed of geomlearn train; default 0,1,2)",
               convert=lambda text: [int(v) for v in text.split(",") if v.strip()]),
        Option("--cases", str, "only the cases whose 'system model' has all these words "
               "(comma-separated alternatives)", setting="select"),
        Option("--precision", str, "float32 (the command line's default) or float64 "
               "(geomlearn train --x64)", choices=("float32", "float64")),
        Option("--time-budget", float, "seconds of training per run (geomlearn train "
               "--time-budget: LM until the budget is spent or it stalls) instead of the "
               "command line's 500 iterations"),
        Option("--training", str, "cli (as registered: the symplectic transformers "
               "position-last under LM), from-start (every family trains its position gains "
               "from the first iteration) or position-last (every family without its "
               "position signal for half the budget first)",
               choices=("cli", "from-start", "position-last")),
        Option("--size", str, "default (the registry's sizes), large (geomlearn train "
               "--model-option: the larger sizes of positional_encoding_lm) or small (the "
               "default size of positional_encoding_lm)", choices=("default", "large", "small")),
    ),
    one_core=True,
)
NAME, DESCRIPTION = SPEC.name, SPEC.description
add_arguments = SPEC.add_arguments


def run(*, quick: bool = False, out=None, **options) -> dict:
    """Run the benchmark (see `benchmarks._harness`), then print its tables in Markdown,
    ready for `benchmarks/RESULTS.md`."""
    payload = SPEC.run(quick=quick, out=out, **options)
    C.emit("\n" + C.render_markdown(payload))
    return payload
