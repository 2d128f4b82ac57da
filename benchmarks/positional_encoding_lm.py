r"""Positional encoding at equal wall time: with and without, under Levenberg–Marquardt and Adam.

`positional_encoding=True` adds parameters (each family's default position signal, with
zero-initialised gains: a row-dependent step of every gradient layer of the symplectic
transformers and of every residual layer of the standard transformer, two steps per unit
of the volume-preserving transformer; the result files give the counts), and a
Levenberg–Marquardt iteration costs $\propto P^2$ in the parameter count $P$. This benchmark asks what the flag costs or
gains **at equal wall time**, where that cost
shows: every transformer family is trained twice, back to back — without and with the
encoding — for the same number of seconds (`--budget-s`, default 20 s per run), with the
same data, keys and trainer, and the final training and validation losses (relative
loss, `fit`'s definition; validation on the held-out trajectories) are compared.

Data: the command line's own data sets (`geomlearn.cli.for_system`, the recipe
`geomlearn train --system NAME` uses), window length and prediction window `T = pw =`
the command line's default for the problem (3):

| problem | order matters? | families |
|---|---|---|
| rigid body (`rigid_body`) | no (Markov) | Transformer, VolumePreservingTransformer |
| coupled oscillator (`coupled_oscillator`) | no | all four |
| Hénon–Heiles (`henon_heiles`) | no | all four |
| driven pendulum (`parametric_pendulum`, Ω = 2, ε = 0.5, windows aligned with the drive) | yes | all four |
| pulsating rigid body (`forced_rigid_body`, aligned) | yes | Transformer, VolumePreservingTransformer |
| driven pendulum, fast drive (`ParametricPendulum(epsilon=0.8, Omega=3.0)`, aligned) | yes | SymplecticTransformer, LinearSymplecticTransformer |

Sizes: `default`, a small size (`SymplecticTransformer(dim, n_sympnet=2, L=1)` and the same for
`LinearSymplecticTransformer`, width `dim`; `Transformer(dim, n_heads=1, L=2,
n_blocks=1)`, `transformer_dim = dim`; `VolumePreservingTransformer(dim, n_blocks=6,
n_linear=1, L=1)`, the command line's), and `large`,
the size a user picks for more capacity: `SymplecticTransformer(dim, width=12, L=2)`,
the same for `LinearSymplecticTransformer`, `Transformer(dim, L=2, transformer_dim=8)`,
`VolumePreservingTransformer(dim, n_blocks=6, L=2)` (under LM, on Hénon–Heiles and on
the order-dependent problems: at the command line's smallest sizes — 26 parameters for
the symplectic transformer on the 2-d driven pendulum — capacity, not the position
signal, limits what the encoding can gain).

Trainers: the command line's (`geomlearn.cli.choose_trainer` with `trainer="lm"` or
`"adam"` and `time_budget=budget`): Levenberg–Marquardt (a random subset of 4096 samples
per iteration on larger data sets, stopping early when it stalls) and Adam (the default
exponential schedule planned for the budget; minibatches of all samples up to 512,
else 256). Each run is preceded by one untimed epoch of the same configuration, so the
budget is spent training, not compiling. Adam is measured at the default size on
Hénon–Heiles and on the driven pendulum.

Goals (`benchmarks/RESULTS.md`): Markov problems, LM, both sizes: training and
validation loss with / without ≤ 1.2; order-dependent problems, LM: validation loss
without / with ≥ 5.

    python -m benchmarks positional_encoding_lm                 # ~31 min on one core
    python -m benchmarks positional_encoding_lm --budget-s 60   # longer runs
    python -m benchmarks positional_encoding_lm --cases "henon_heiles ST"  # some pairs
    python -m benchmarks positional_encoding_lm --encodings True,bias      # both designs
    python -m benchmarks positional_encoding_lm --seeds 0,1,2  # median over three seeds
"""

from __future__ import annotations

import time

from . import _common as C
from ._harness import Benchmark, Column, Option, Table

#: (problem, order matters)
PROBLEMS = {
    "rigid_body": False,
    "coupled_oscillator": False,
    "henon_heiles": False,
    "parametric_pendulum": True,
    "forced_rigid_body": True,
    "fast_driven_pendulum": True,
}
#: family → command-line model name
FAMILIES = {
    "ST": "symplectic-transformer",
    "LST": "linear-symplectic-transformer",
    "TF": "transformer",
    "VPT": "vp-transformer",
}
#: (problem, family, size, trainer), in the order they run
CASES = tuple(
    [(p, f, "default", "lm") for p, fs in (
        ("rigid_body", ("TF", "VPT")),
        ("coupled_oscillator", ("ST", "LST", "TF", "VPT")),
        ("henon_heiles", ("ST", "LST", "TF", "VPT")),
        ("parametric_pendulum", ("ST", "LST", "TF", "VPT")),
        ("forced_rigid_body", ("TF", "VPT")),
        ("fast_driven_pendulum", ("ST", "LST")),
    ) for f in fs]
    + [("henon_heiles", f, "large", "lm") for f in ("ST", "LST", "TF", "VPT")]
    + [(p, f, "large", "lm") for p, fs in (
        ("parametric_pendulum", ("ST", "LST", "TF", "VPT")),
        ("forced_rigid_body", ("TF", "VPT")),
        ("fast_driven_pendulum", ("ST", "LST")),
    ) for f in fs]
    + [(p, f, "default", "adam") for p in ("henon_heiles", "parametric_pendulum")
       for f in ("ST", "LST", "TF", "VPT")]
)
QUICK_CASES = (("henon_heiles", "ST", "default", "lm"),
               ("parametric_pendulum", "TF", "default", "adam"))


def _case_name(case) -> str:
    return " ".join(case)


def _select(cases, wanted: str | None):
    """The cases whose name contains every word of `wanted` (comma-separated alternatives),
    e.g. `"henon_heiles ST lm, parametric_pendulum"`."""
    if not wanted:
        return list(cases)
    alternatives = [a.split() for a in wanted.split(",") if a.strip()]
    chosen = [c for c in cases if any(all(w in c for w in words) for words in alternatives)]
    if not chosen:
        raise ValueError(f"--cases {wanted!r} selects none of {[_case_name(c) for c in cases]}")
    return chosen


def _problem_data(problem: str, n_trajectories):
    """`(system, train, validation, T)`: the command line's data for `problem`."""
    from geomlearn.cli._commands import DEFAULT_SEQ_LENGTH
    from geomlearn.cli._recipes import ORDER_DEPENDENT_SEQ_LENGTH, for_system
    from geomlearn.cli import SYSTEMS
    from geomlearn.systems import ParametricPendulum

    if problem == "fast_driven_pendulum":
        name, system = "parametric_pendulum", ParametricPendulum(epsilon=0.8, Omega=3.0)
    else:
        name, system = problem, SYSTEMS[problem]()
    n = n_trajectories.get(problem) if n_trajectories else None
    train, val, _ = for_system(name, system, n_trajectories=n, seed=0)
    T = ORDER_DEPENDENT_SEQ_LENGTH if PROBLEMS[problem] else DEFAULT_SEQ_LENGTH
    return system, train, val, T


#: `default`: the constructor arguments that give each family the small size (the
#: registry's, with these replaced)
DEFAULT = {"ST": {"width": None, "L": 1}, "LST": {"width": None, "L": 1},
           "TF": {"transformer_dim": None}, "VPT": {}}


def _model(family: str, size: str, d: int, T: int, encoding, key):
    """The model of `family` for states of dimension `d` (the data's: the driven
    pendulum's data are its `(q, p)` rows)."""
    import geomlearn as gl
    from geomlearn.cli._registry import MODELS

    if size == "default":  # the small size
        window = {"seq_length": T} if family == "LST" else {}
        return MODELS[FAMILIES[family]].build(d, key=key, positional_encoding=encoding,
                                              **window, **DEFAULT[family])
    if family == "ST":
        return gl.SymplecticTransformer(d, width=12, L=2, positional_encoding=encoding, key=key)
    if family == "LST":
        return gl.LinearSymplecticTransformer(d, T, width=12, L=2, positional_encoding=encoding,
                                              key=key)
    if family == "TF":
        return gl.Transformer(d, L=2, transformer_dim=8, positional_encoding=encoding, key=key)
    return gl.VolumePreservingTransformer(d, n_blocks=6, L=2, positional_encoding=encoding,
                                          key=key)


def _train(case, encoding, data, budget: float, seed: int, training: str = "from-start") -> dict:
    """One run: an untimed epoch (compilation), then `budget` seconds of training
    (`training="position-last"`: an encoded model under LM by
    `geomlearn.training.fit_position_last`, half the budget without its position signal)."""
    import jax

    import geomlearn as gl
    from geomlearn._nn import count_parameters
    from geomlearn.cli import choose_trainer
    from geomlearn.training import fit_position_last, plain_twin, trains_position_last

    _, family, size, trainer = case
    _, train, val, T = data
    model = _model(family, size, train.dim, T, encoding, jax.random.PRNGKey(seed))
    n_samples = train.windows(T, T)[0].shape[0]
    batch = n_samples if n_samples <= 512 else 256
    optimizer, _, _, how = choose_trainer(model, n_samples, trainer=trainer, time_budget=budget)
    options = {"batch_size": batch, "optimizer": optimizer, "seq_length": T,
               "prediction_window": T, "val_data": val,
               "key": jax.random.PRNGKey(1000 + seed), "progress": False}
    gl.fit(model, train, epochs=1, **options)  # compile (the timed run reuses it)
    staged = training == "position-last" and trains_position_last(model, optimizer)
    if staged:
        gl.fit(plain_twin(model), train, epochs=1, **options)  # compile its first stage
    # LM runs until the budget is spent (or it stalls); Adam plans its learning-rate
    # schedule for the epochs the budget allows (`fit`'s `epochs=None`).
    epochs = 10**9 if trainer == "lm" else None
    t0 = time.perf_counter()
    _, history = (fit_position_last if staged else gl.fit)(
        model, train, epochs=epochs, time_budget=budget, **options)
    return {
        "params": count_parameters(model), "loss": history["loss"][-1],
        "val_loss": history["val_loss"][-1], "epochs": len(history["loss"]),
        "first_epoch_s": history["time"][0], "wall_s": time.perf_counter() - t0,
        "stop_reason": history["stop_reason"], "trainer": how, "n_samples": int(n_samples),
    }


def _encoding(name: str):
    """`positional_encoding` from its command-line spelling (`"True"` or a placement)."""
    return True if name == "True" else name


def _row(case, seed: int, name: str, without: dict, with_: dict) -> dict:
    """One table row: a run without and one with the encoding `name`, side by side."""
    problem, family, size, trainer = case
    return {
        "problem": problem, "order": "yes" if PROBLEMS[problem] else "no (Markov)",
        "family": family, "size": size, "trainer": trainer, "seed": seed, "encoding": name,
        "without": without, "with": with_,
        "params": f"{without['params']} → {with_['params']}",
        "added": (with_["params"] - without["params"]) / without["params"],
        "epochs": f"{without['epochs']} / {with_['epochs']}",
        "loss_without": without["loss"], "loss_with": with_["loss"],
        "loss_ratio": with_["loss"] / without["loss"],
        "val_without": without["val_loss"], "val_with": with_["val_loss"],
        "val_ratio": with_["val_loss"] / without["val_loss"],
    }


def measure(settings: dict, ctx) -> dict:
    cases = [tuple(c) for c in settings["cases"]]
    data: dict = {}
    runs = []
    for case in _select(cases, settings["select"]):
        if case[0] not in data:
            data[case[0]] = _problem_data(case[0], settings["n_trajectories"])
        for seed in _seeds(settings):
            without = _train(case, False, data[case[0]], settings["budget_s"], seed)
            for name in settings["encodings"]:  # each right after the run without
                with_ = _train(case, _encoding(name), data[case[0]], settings["budget_s"], seed,
                               settings.get("training", "from-start"))
                runs.append(_row(case, seed, name, without, with_))
                ctx.log(f"{_case_name(case):45s} {name} seed {seed}: params "
                        f"{runs[-1]['params']}, epochs {runs[-1]['epochs']}, loss ratio "
                        f"{runs[-1]['loss_ratio']:.3g}, val ratio {runs[-1]['val_ratio']:.3g}")
    return {"runs": runs}


def _seeds(settings) -> list[int]:
    """The initialisation seeds (a list; results recorded before `--seeds` hold a count)."""
    seeds = settings["seeds"]
    return list(range(seeds)) if isinstance(seeds, int) else list(seeds)


def _medians(settings, results) -> list[dict]:
    """One row per case and encoding: the median over the seeds of the ratios with /
    without, and their range (the runs of each seed are in the first table)."""
    import numpy as np

    groups: dict = {}
    for r in results["runs"]:
        key = (r["problem"], r["family"], r["size"], r["trainer"], r["encoding"])
        groups.setdefault(key, []).append(r)
    rows = []
    for (problem, family, size, trainer, encoding), runs in groups.items():
        loss = [r["loss_ratio"] for r in runs]
        val = [r["val_ratio"] for r in runs]
        rows.append({
            "problem": problem, "order": runs[0]["order"], "family": family, "size": size,
            "trainer": trainer, "encoding": encoding, "n_seeds": len(runs),
            "added": runs[0]["added"], "params": runs[0]["params"],
            "loss_ratio": float(np.median(loss)),
            "loss_range": f"{min(loss):.2f}–{max(loss):.2f}",
            "val_ratio": float(np.median(val)),
            "val_range": f"{min(val):.2f}–{max(val):.2f}",
        })
    return rows


def _targets(settings, results) -> list:
    """The goals, on the median over the seeds of each case."""
    out = []
    for r in _medians(settings, results):
        if r["trainer"] != "lm":
            continue
        name = (f"{r['problem']} {r['family']} {r['size']}, LM, {r['encoding']}, "
                f"median of {r['n_seeds']} seed(s)")
        if r["order"] == "yes":
            gain = 1.0 / r["val_ratio"]
            out.append(C.target(f"{name}: gain", "val(without) / val(with) ≥ 5", gain,
                                gain >= 5.0, "x", "equal wall time"))
        else:
            cost = max(r["loss_ratio"], r["val_ratio"])
            out.append(C.target(f"{name}: cost", "max(loss, val) with / without ≤ 1.2", cost,
                                cost <= 1.2, "x", "equal wall time"))
    return out


def _notes(settings, results) -> list:
    return [
        "Ratios are with / without the encoding: below 1 the encoding helps.",
        ("'epochs' are LM iterations or Adam epochs done in the budget (without / with); "
         "each run follows one untimed epoch that compiles it."),
        (f"Budget {settings['budget_s']:g} s per run; each run with an encoding right after "
         "the run without."),
        (f"Seeds {', '.join(str(s) for s in _seeds(settings))} (the model's initialisation "
         "and the trainer's key); the second table has the median ratio over them."),
        ("With the encoding, LM runs train position-last (half the budget without the "
         "position signal, then with it; geomlearn.training.fit_position_last)."
         if settings.get("training") == "position-last" else
         "With the encoding, the position gains train from the first iteration."),
    ]


SPEC = Benchmark(
    name="positional_encoding_lm",
    description="positional encoding with / without at equal wall time, LM and Adam, "
                "every transformer family, Markov and order-dependent problems",
    full={"budget_s": 20.0, "seeds": [0], "cases": [list(c) for c in CASES], "select": None,
          "n_trajectories": None, "encodings": ["True"], "training": "from-start"},
    quick={"budget_s": 0.5, "seeds": [0], "cases": [list(c) for c in QUICK_CASES],
           "select": None, "n_trajectories": {"henon_heiles": 4, "parametric_pendulum": 4},
           "encodings": ["True"], "training": "from-start"},
    measure=measure,
    tables=(Table(
        "Positional encoding at equal wall time ({budget_s:g} s per run, one core): "
        "with / without",
        (Column("problem", "problem"), Column("order", "order matters"),
         Column("family", "model"), Column("size", "size"), Column("trainer", "trainer"),
         Column("encoding", "positional_encoding"),
         Column("params", "parameters"), Column("added", "added", ".1%"),
         Column("epochs", "epochs without / with"),
         Column("loss_without", "train loss without", ".3e"),
         Column("loss_with", "with", ".3e"), Column("loss_ratio", "ratio", ".2f"),
         Column("val_without", "val loss without", ".3e"),
         Column("val_with", "with", ".3e"), Column("val_ratio", "ratio", ".2f")),
        rows="runs"),
        Table(
        "Median over the seeds of the ratio with / without ({budget_s:g} s per run)",
        (Column("problem", "problem"), Column("order", "order matters"),
         Column("family", "model"), Column("size", "size"), Column("trainer", "trainer"),
         Column("encoding", "positional_encoding"), Column("params", "parameters"),
         Column("added", "added", ".1%"), Column("n_seeds", "seeds"),
         Column("loss_ratio", "train loss ratio", ".2f"), Column("loss_range", "range"),
         Column("val_ratio", "val loss ratio", ".2f"), Column("val_range", "range")),
        rows=_medians),
    ),
    targets=_targets,
    notes=_notes,
    options=(
        Option("--budget-s", float, "seconds of training per run (default 20)"),
        Option("--encodings", str, "comma-separated placements compared with False "
               "(default True; e.g. 'True,bias' for both designs)",
               convert=lambda text: [e.strip() for e in text.split(",") if e.strip()]),
        Option("--seeds", str, "comma-separated initialisation seeds (default 0)",
               convert=lambda text: [int(v) for v in text.split(",") if v.strip()]),
        Option("--cases", str, "only the cases whose name has all these words, e.g. "
               "'henon_heiles ST lm' (comma-separated alternatives)", setting="select"),
        Option("--training", str, "from-start (default: the position gains train from the "
               "first iteration) or position-last (under LM, half the budget without the "
               "position signal first: geomlearn.training.fit_position_last)",
               choices=("from-start", "position-last")),
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
