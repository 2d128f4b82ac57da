"""Work–precision of learned integrators on problems chosen for and against them.

For each problem: data from a converged integrator (`geomlearn.datasets`, every stored
step accurate to 1e-8), a learned model trained for a bounded number of iterations and
seconds — a `CorrectedIntegrator` (a Störmer–Verlet step of the known system with
learned symplectic corrections that start as the identity), or for the Toda lattice a
reduced model — then `geomlearn.work_precision`: the model's error at the horizon and
its states per second against the classical integrators at `h = Δt/k`, the two ratios
and the verdict.

- **Lennard-Jones cluster** (the expensive force): `LennardJonesCluster(32, 2)` (496
  pairs per force), data at a stride of the reference step, the model taking one step
  per stride with `substeps` Verlet steps inside (Verlet at the whole stride is beyond
  its stability limit) followed by a `PairSympNet` correction (it keeps the cluster's
  symmetries and its total and angular momentum), trained by Adam. The classical side is the explicit methods (Störmer–Verlet,
  Yoshida 4 and 6, RK4): on a separable system an implicit method of the same order
  costs more force evaluations per step, and the implicit solves at this size would
  take most of the run. Also: the energy drift over a long rollout of the model from the
  held-out states and the number of them that escape (`long_horizon`, centre-of-mass
  frame), and the same for the untrained model (the classical step alone) as a control.
- **Hénon–Heiles** (a cheap-force control): 4 dimensions, data at `dt = 0.1`, Verlet
  between two G-SympNets trained by Levenberg–Marquardt, every default method compared.

- **Toda reduction** (a reduced model): `TodaLattice(200)` (400 dimensions), one
  trajectory from its default initial state (Yoshida 6 at `dt`, converged), and a
  `LiftedIntegrator` — the manifold cotangent lift to `reduced_dim` coordinates and a
  G-SympNet on the codes, `stride` data steps per application (the reduced model of
  `benchmarks/toda_reduction.py`), its network trained by Levenberg–Marquardt on the
  code pairs. The lift is fitted to that trajectory and the comparison starts from its
  first state: model reduction's online phase, which reruns the case the reduction was
  built for. The model is a map of the full 400 dimensions (encode once, iterate in
  the reduced space, decode every state), so `work_precision` compares it with the
  classical integrators of the full system (explicit methods, as for Lennard-Jones), at
  the stride as the data step.

Both classical and learned sides run as compiled JAX on the same CPU, so a speed-up here
is the learned map's own, not that of compiled code over a Python force call.
"""

from __future__ import annotations

import time

from ._harness import Benchmark, Column, Table

NAME = "work_precision"

_EXPLICIT = ("stormer_verlet", "yoshida4", "yoshida6", "rk4")

FULL = dict(
    lj=dict(n_particles=32, spatial_dim=2, dt=0.01, stride=8, n_train=8, n_test=8,
            n_steps=100, horizon=100, substeps=2, n_layers=1, width=8, iterations=100_000,
            learning_rate=1e-3, train_s=120.0, long_steps=100_000, methods=_EXPLICIT),
    henon_heiles=dict(dt=0.1, n_train=16, n_test=8, n_steps=100, horizon=1000, substeps=1,
                      n_layers=2, width=16, iterations=200, train_s=60.0, methods=None),
    toda=dict(n_particles=200, dt=0.1, n_steps=8000, stride=8, reduced_dim=2, n_features=16,
              n_layers=8, width=16, iterations=400, train_s=300.0, horizon=1000,
              methods=_EXPLICIT),
)
QUICK = dict(
    lj=dict(n_particles=4, spatial_dim=2, dt=0.01, stride=8, n_train=3, n_test=2,
            n_steps=10, horizon=5, substeps=2, n_layers=1, width=4, iterations=2,
            learning_rate=1e-3, train_s=30.0, long_steps=50,
            methods=("stormer_verlet", "yoshida4")),
    henon_heiles=dict(dt=0.1, n_train=3, n_test=2, n_steps=10, horizon=10, substeps=1,
                      n_layers=1, width=4, iterations=2, train_s=30.0,
                      methods=("stormer_verlet", "yoshida4")),
    toda=dict(n_particles=10, dt=0.1, n_steps=40, stride=2, reduced_dim=2, n_features=4,
              n_layers=1, width=4, iterations=2, train_s=30.0, horizon=10,
              methods=("stormer_verlet", "yoshida4")),
)


def _split(data, n_train, gl):
    """The first `n_train` trajectories, and the rest (held out)."""
    return (gl.TrajectoryData(data.states[:n_train], data.dt),
            gl.TrajectoryData(data.states[n_train:], data.dt))


def _train(gl, system, train, s, seed, correction, *, placement="around", optimizer=None):
    """A `CorrectedIntegrator` (Verlet, `correction` placed by `placement`) trained by
    `optimizer` (default Levenberg–Marquardt) within `iterations` epochs and `train_s`
    seconds; `(model, seconds, first loss, last loss)`."""
    import jax

    model = gl.CorrectedIntegrator(system, correction, substeps=s["substeps"], placement=placement)
    t0 = time.perf_counter()
    model, hist = gl.fit(model, train, epochs=s["iterations"],
                         optimizer=gl.LevenbergMarquardt() if optimizer is None else optimizer,
                         time_budget=s["train_s"], key=jax.random.PRNGKey(seed + 1),
                         progress=False)
    return model, time.perf_counter() - t0, hist["loss"][0], hist["loss"][-1]


def _pair_correction(gl, s, seed):
    """The Lennard-Jones correction: a `PairSympNet` (pair potentials of the distances
    and kinetic terms of the momenta) that starts as the identity; it commutes with
    translations, rotations and relabellings and keeps the total and angular momentum,
    as the cluster's flow does."""
    import jax

    return gl.PairSympNet(s["n_particles"], s["spatial_dim"], n_layers=s["n_layers"],
                          width=s["width"], identity_init=True, key=jax.random.PRNGKey(seed))


def _row(problem, wp, train_s, losses, stride):
    m, best = wp.metrics, wp.comparison.equal_cost
    return dict(problem=problem, dim=None, stride=stride, horizon=wp.horizon,
                model_error=m["model_point"]["error_worst"],
                model_rate=m["model_point"]["states_per_second"],
                classical=None if best is None else best.label(),
                classical_error=None if best is None else best.error_worst,
                classical_rate=None if best is None else best.states_per_second,
                frontier_ratio=wp.frontier_ratio, equal_error_speedup=wp.equal_error_speedup,
                train_s=train_s, loss_first=losses[0], loss_last=losses[1],
                verdict=wp.verdict())


def _lennard_jones(gl, s, ctx):
    import jax
    import optax

    system = gl.systems.LennardJonesCluster(s["n_particles"], spatial_dim=s["spatial_dim"])
    stride = s["stride"]
    data = gl.datasets.lennard_jones(jax.random.PRNGKey(0), n_trajectories=s["n_train"] + s["n_test"],
                                     n_steps=s["n_steps"] * stride, dt=s["dt"], system=system)
    data = gl.TrajectoryData(data.states[:, ::stride], data.dt * stride)
    train, test = _split(data, s["n_train"], gl)
    ctx.log(f"Lennard-Jones: data {data.states.shape}, Δt = {data.dt:g}")
    model, train_s, first, last = _train(gl, system, train, s, 10, _pair_correction(gl, s, 10),
                                         placement="after",
                                         optimizer=optax.adam(s["learning_rate"]))
    wp = gl.work_precision(model, system, test, horizon=s["horizon"], methods=s["methods"],
                           key=jax.random.PRNGKey(2), budget=None)
    row = _row(f"Lennard-Jones cluster, N={s['n_particles']}, {s['spatial_dim']}-D", wp,
               train_s, (first, last), stride)
    row["dim"] = system.dim
    row.update(_long_rollout(model, system, test, s))
    # the control: the classical step alone (the correction at its identity start)
    start = gl.CorrectedIntegrator(system, _pair_correction(gl, s, 0), substeps=s["substeps"],
                                   placement="after")
    row["control"] = dict(problem=f"{row['problem']}, untrained (Verlet at Δt/{s['substeps']})",
                          **_long_rollout(start, system, test, s))
    return row, wp.metrics


def _long_rollout(model, system, test, s) -> dict:
    """The energy drift and escapes of `model`'s rollout of `long_steps` strides from the
    held-out states (`long_horizon`, centre-of-mass frame)."""
    from geomlearn.evaluation import long_horizon

    t0 = time.perf_counter()
    long = long_horizon(model, model.task(data_dt=test.dt), test.states, horizon=s["long_steps"],
                        invariants=system.invariants, particles=system.particle_dimension)
    energy = long.metrics["invariants"]["energy"]
    return dict(long_steps=s["long_steps"], energy_max_drift=energy["worst_max_drift"],
                energy_trend=energy["worst_trend"], escaped=long.metrics["n_escaped"],
                n_long=long.metrics["n_trajectories"], long_s=time.perf_counter() - t0)


def _henon_heiles(gl, s, ctx):
    import jax

    system = gl.systems.HenonHeiles()
    data = gl.datasets.henon_heiles(jax.random.PRNGKey(0), n_trajectories=s["n_train"] + s["n_test"],
                                    n_steps=s["n_steps"], dt=s["dt"], system=system)
    train, test = _split(data, s["n_train"], gl)
    ctx.log(f"Hénon–Heiles: data {data.states.shape}, Δt = {data.dt:g}")
    correction = gl.GSympNet(system.dim, n_layers=s["n_layers"], width=s["width"],
                             identity_init=True, key=jax.random.PRNGKey(20))
    model, train_s, first, last = _train(gl, system, train, s, 20, correction)
    wp = gl.work_precision(model, system, test, horizon=s["horizon"], methods=s["methods"],
                           key=jax.random.PRNGKey(3), budget=None)
    row = _row("Hénon–Heiles", wp, train_s, (first, last), 1)
    row["dim"] = system.dim
    return row, wp.metrics


def _toda(gl, s, ctx):
    """The reduced model of the Toda lattice against the full system's classical
    integrators (see the module documentation)."""
    import jax
    import jax.numpy as jnp

    from geomlearn.integrators import integrate

    system = gl.systems.TodaLattice(s["n_particles"])
    z0 = system.default_initial_conditions(jnp.float64)[0]
    states = integrate(system, z0, s["dt"], s["n_steps"], method="yoshida6")
    data = gl.TrajectoryData(states[None], s["dt"])
    ctx.log(f"Toda: data {data.states.shape}, dt = {data.dt:g}, stride {s['stride']}")
    model = gl.LiftedIntegrator(system.dim, s["reduced_dim"], n_features=s["n_features"],
                                stride=s["stride"], n_layers=s["n_layers"], width=s["width"],
                                key=jax.random.PRNGKey(40), dtype=jnp.float64).with_lift(data)
    x, y, _ = model.training_samples(data, model.task())
    t0 = time.perf_counter()
    net, hist = gl.fit(model.integrator_net, (x, y), epochs=s["iterations"],
                       optimizer=gl.LevenbergMarquardt(), time_budget=s["train_s"],
                       key=jax.random.PRNGKey(50), progress=False)
    train_s = time.perf_counter() - t0
    model = model.with_integrator(net)
    strided = gl.TrajectoryData(data.states[:, ::s["stride"]], data.dt * s["stride"])
    wp = gl.work_precision(model, system, strided, horizon=s["horizon"], methods=s["methods"],
                           budget=None)
    row = _row(f"Toda lattice, N={s['n_particles']}, reduced to {s['reduced_dim']}", wp,
               train_s, (hist["loss"][0], hist["loss"][-1]), s["stride"])
    row["dim"] = system.dim
    return row, wp.metrics


def _figure(path, measured: dict) -> bool:
    """One work–precision panel per problem (the report's panel); `False` without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    from geomlearn.plotting import _work_precision_panel

    fig, axes = plt.subplots(1, len(measured), figsize=(6.5 * len(measured), 5.2), squeeze=False)
    for ax, (problem, metrics) in zip(axes[0], measured.items()):
        _work_precision_panel(ax, metrics)
        ax.set_title(f"{problem}\n{ax.get_title()}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def measure(settings, ctx):
    import geomlearn as gl

    rows, measured = [], {}
    for name, run in (("lj", _lennard_jones), ("henon_heiles", _henon_heiles),
                      ("toda", _toda)):
        row, metrics = run(gl, settings[name], ctx)
        rows.append(row)
        measured[row["problem"]] = metrics
        ctx.log(f"{row['problem']}: {row['verdict']}")
    figure = ctx.out / f"{NAME}.png"
    drawn = _figure(figure, measured)
    long = [x for r in rows if "long_steps" in r for x in (r, r["control"])]
    return {"rows": rows, "long": long, "work_precision": measured,
            "figure": figure.name if drawn else None}


def _secular_share(row) -> float | None:
    """The energy's secular change over a long rollout, |trend| × strides (the trend is
    per `TREND_STEPS` strides), as a share of its largest drift: near 0 for an energy
    that oscillates about its start, near 1 for one that ramps away from it."""
    from geomlearn.evaluation import TREND_STEPS

    trend, drift = row["energy_trend"], row["energy_max_drift"]
    if trend is None or not drift:
        return None
    return abs(trend) * row["long_steps"] / TREND_STEPS / drift


def _control_note(lj) -> str:
    share = _secular_share(lj["control"])
    return "" if share is None else f"untrained control: {share:.2g}"


def _targets(settings, results):
    from . import _common as C

    lj = results["rows"][0]
    ratio = lj["frontier_ratio"]
    toda = next((r for r in results["rows"] if r["problem"].startswith("Toda")), None)
    speedup = None if toda is None else toda["equal_error_speedup"]
    secular = _secular_share(lj)
    return [
        C.target("Lennard-Jones: frontier_ratio (model more accurate at equal cost)", "≥ 1",
                 ratio, ratio is not None and ratio >= 1, "×"),
        C.target(f"Lennard-Jones: escapes from {lj['n_long']} held-out states over "
                 f"{lj['long_steps']} strides", "0", lj["escaped"], lj["escaped"] == 0),
        C.target("Lennard-Jones: energy without trend (secular change over the rollout / its "
                 "max drift)", "≤ 0.5", secular, secular is not None and secular <= 0.5,
                 note=_control_note(lj)),
        C.target("Toda reduction: equal_error_speedup against the full system's classical "
                 "integrators", "≥ 100", speedup, speedup is not None and speedup >= 100, "×"),
    ]


def _notes(settings, results):
    return [f"{r['problem']}: {r['verdict']}" for r in results["rows"]]


SPEC = Benchmark(
    name=NAME,
    description="work–precision: a Verlet step with learned symplectic corrections against "
    "the classical integrators at equal cost, on a Lennard-Jones cluster (expensive force, long "
    "stride) and Hénon–Heiles (cheap-force control); a reduced Toda model against the full "
    "system's classical integrators",
    full=FULL,
    quick=QUICK,
    measure=measure,
    tables=(
        Table("Work–precision at the horizon (worst relative state error over held-out "
              "trajectories)",
              (Column("problem", "problem"), Column("dim", "dim", "d"),
               Column("stride", "stride", "d"), Column("horizon", "horizon", "d"),
               Column("model_error", "model error", ".3g"),
               Column("model_rate", "model states/s", ".3g"),
               Column("classical", "best classical at ≥ the model's speed"),
               Column("classical_error", "its error", ".3g"),
               Column("classical_rate", "its states/s", ".3g"),
               Column("frontier_ratio", "frontier_ratio", ".3g"),
               Column("equal_error_speedup", "equal_error_speedup", ".3g"),
               Column("train_s", "train s", ".0f")), rows="rows"),
        Table("Long rollout of the learned map from the held-out states",
              (Column("problem", "problem"), Column("long_steps", "strides", "d"),
               Column("energy_max_drift", "energy max drift", ".3g"),
               Column("energy_trend", "energy trend", ".3g"),
               Column("escaped", "escaped", "d"), Column("n_long", "of", "d")), rows="long"),
    ),
    targets=_targets,
    notes=_notes,
)
DESCRIPTION = SPEC.description
add_arguments, run = SPEC.add_arguments, SPEC.run
