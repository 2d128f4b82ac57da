r"""Long-horizon evaluation: how a learned integrator behaves over $N \gg$ the data's steps.

`long_horizon(...)` rolls a model out for `horizon` steps from each initial state and
keeps only running statistics — no `(N, d)` array unless asked — in one compiled
`lax.scan` over chunks of the rollout (`CHUNK` states; each chunk is the model's own
`rollout`, continued from the last states of the previous one, so that the states are
those of one long rollout). Step $t$ counts time steps of the data's $\Delta t$ from the
initial state $z_0$; a transformer's window holds the given states $t < T$, so its
statistics start at $t = T$. Every norm $\|\cdot\|_\tau$ leaves out the clock components
of a driven system (see `geomlearn.evaluation._frame`). Per initial state:

- **escape step**: the first $t$ whose state is not finite or has
  $\|z_t - c\|_\tau > $ `ESCAPE_FACTOR` $\cdot B$, with $c$ the data's centre (the mean
  of their states) and $B$ the data's radius about it (the largest $\|z - c\|_\tau$ in
  the data): independent of the origin of the coordinates. With `particles`, states are
  measured in the centre-of-mass frame first. `None` if none.
- **valid time**: the first $t$ with
  $\|z_t - r_t\|_\tau / \max(\|r_t\|_\tau,\ $`VALID_FLOOR`$\cdot\|r_0\|_\tau) >$
  `VALID_TOLERANCE`, where $r_t$ is the reference solution — the system integrated
  alongside the model, in the same scan, by a reference integrator with the data's
  $\Delta t$, from the last given state $r_0$. The denominator is the reference's norm,
  never the model's; its floor keeps a damped reference that decays towards its
  equilibrium from ending the valid time at an offset of the model's equilibrium of
  less than `VALID_TOLERANCE · VALID_FLOOR` of the initial state. `None` without a
  system (or a time step), or when there is no crossing.
- per **invariant** $I$: the relative deviation $\delta_t = (I(z_t) - I(z_0)) / s_I$
  with the scale $s_I$ of `_states.invariant_scale` (the largest $|I(z^i_0)|$, or the
  size of its terms where $I$ is zero by cancellation; as `evaluate`'s drift), or a given scale (`evaluate` gives a learned energy, whose
  constant is arbitrary, its range over the data), its maximum
  $\max_t |\delta_t|$ over the horizon, and its **secular trend**: the slope $b$ of the
  least-squares line $\delta_t \approx a + b\,t$, reported per `TREND_STEPS` steps. Over
  the horizon the line changes by $bN$: for a steady drift that is the drift itself, for
  an oscillation over many periods a small fraction of its amplitude, so the two are
  told apart by $|b|N$ against $\max_t |\delta_t|$. The regression sums are streamed
  with the pairwise update of Chan, Golub & LeVeque (centred sums of each chunk,
  merged), so $b$ stays accurate in float32 over $10^6$ steps.
- a decimated series of $\delta_t$ at about `N_SERIES` log-spaced steps (for plots).

States after the escape step count for none of the invariant statistics.
"""

from __future__ import annotations

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._format import fmt
from .._validation import check_int
from ._frame import data_centre, data_radius, frame_projection, kept_components
from ._references import IntegratedReference, StoredReference
from ._states import invariant_scale

__all__ = [
    "LongHorizon",
    "long_horizon",
    "long_horizon_rows",
    "escape_warning",
    "ESCAPE_FACTOR",
    "VALID_TOLERANCE",
    "VALID_FLOOR",
    "TREND_STEPS",
    "N_SERIES",
    "CHUNK",
]

ESCAPE_FACTOR = 10.0
"""A rollout has escaped when its distance from the data's centre exceeds this multiple
of the data's radius."""

VALID_TOLERANCE = 0.1
"""The relative error against the reference solution that ends the valid time."""

VALID_FLOOR = 0.05
"""The valid time's error is relative to the reference's norm, but at least this
fraction of the norm of the reference's initial state (a damped reference decays to its
equilibrium)."""

TREND_STEPS = 10_000
"""The secular trend of an invariant is reported as its change per this many steps."""

N_SERIES = 200
"""About this many log-spaced steps of the drift series are kept (for plots)."""

CHUNK = 1000
"""States per chunk of the streaming scan (rounded up to a multiple of the states one
model step appends)."""


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The static shape of a streaming run."""

    horizon: int
    n_init: int
    chunk: int
    n_chunks: int
    samples: tuple[int, ...]
    keep_states: bool


@dataclasses.dataclass(frozen=True)
class LongHorizon:
    """The result of `long_horizon`.

    **Fields:** `metrics` (JSON-serialisable: see `long_horizon`); `steps` (the steps of
    the decimated series, `(S,)`); `drift` (per invariant, the relative deviation
    $\\delta_t$ at those steps, `(B, S)`, NaN at and after an escape); `max_drift` (per
    invariant, the running maximum $\\max_{s \\le t} |\\delta_s|$ at those steps, `(B, S)`,
    NaN likewise); `norm` (the distance from the data's centre over the data's radius at
    those steps, `(B, S)`, NaN where not finite); `states`
    (the whole rollout `(B, horizon + 1, d)` when asked for with `keep_states=True`, else
    `None`).
    """

    metrics: dict
    steps: np.ndarray
    drift: dict
    max_drift: dict
    norm: np.ndarray
    states: np.ndarray | None = None


def _first(flags, t, current):
    """The first `t` where `flags`, unless `current` (−1: none yet) is already set."""
    hit = jnp.any(flags)
    return jnp.where((current < 0) & hit, t[jnp.argmax(flags)], current)


def _merge_regression(acc, alive, t, delta):
    """Merge the centred regression sums of this chunk into `acc` (Chan et al.)."""
    w = alive.astype(delta.dtype)
    nb = jnp.sum(w)
    safe = jnp.maximum(nb, 1.0)
    mtb = jnp.sum(w * t) / safe
    mdb = jnp.sum(w[None] * delta, axis=-1) / safe
    ct = jnp.where(alive, t - mtb, 0.0)
    cd = jnp.where(alive[None], delta - mdb[:, None], 0.0)
    sttb = jnp.sum(ct * ct)
    stdb = jnp.sum(ct[None] * cd, axis=-1)
    na = acc["n"]
    n = na + nb
    frac = nb / jnp.maximum(n, 1.0)
    dt_, dd = mtb - acc["mean_t"], mdb - acc["mean_d"]
    cross = na * frac
    return dict(
        acc,
        n=n,
        mean_t=acc["mean_t"] + dt_ * frac,
        mean_d=acc["mean_d"] + dd * frac,
        stt=acc["stt"] + sttb + dt_ * dt_ * cross,
        std=acc["std"] + stdb + dt_ * dd * cross,
    )


def _update(acc, new, ref, ref_ok, t, consts, plan: _Plan):
    """The statistics of one chunk of new states `(C, d)` at steps `t`, merged into `acc`."""
    in_h = t <= plan.horizon
    w = consts["kept"][None]
    framed = new @ consts["frame"].T  # clock left out; centre-of-mass frame for particles
    norms = jnp.sqrt(jnp.sum((framed - consts["centre"][None]) ** 2, axis=-1))
    finite = jnp.all(jnp.isfinite(new), axis=-1)
    escape = _first(in_h & ~(finite & (norms <= consts["limit"])), t, acc["escape"])
    alive = in_h & ((escape < 0) | (t < escape))
    acc = dict(acc, escape=escape)
    if ref is not None:
        size = jnp.maximum(jnp.sqrt(jnp.sum((ref * w) ** 2, axis=-1)), consts["floor"])
        err = jnp.sqrt(jnp.sum(((new - ref) * w) ** 2, axis=-1)) / size
        acc["valid"] = _first(in_h & ref_ok & ~(err <= consts["tolerance"]), t, acc["valid"])
        acc["ref_fail"] = _first(in_h & ~ref_ok, t, acc["ref_fail"])
    tf = t.astype(new.dtype)
    if consts["fns"]:
        vals = jnp.stack([jax.vmap(fn)(new) for fn in consts["fns"]])  # (n_inv, C)
        delta = (vals - consts["start"][:, None]) / consts["scale"][:, None]
        delta = jnp.where(alive[None], delta, 0.0)
        running = jnp.maximum(acc["max"][:, None], jax.lax.cummax(jnp.abs(delta), axis=1))
        acc["max"] = running[:, -1]
        acc = _merge_regression(acc, alive, tf, delta)
    else:
        acc = _merge_regression(acc, alive, tf, jnp.zeros((0, t.shape[0]), new.dtype))
    pos = jnp.asarray(plan.samples, jnp.int32) - t[0]
    inside = (pos >= 0) & (pos < t.shape[0])
    p = jnp.clip(pos, 0, t.shape[0] - 1)
    if consts["fns"]:
        keep = (inside & alive[p])[None]
        acc["series"] = jnp.where(keep, delta[:, p], acc["series"])
        acc["series_max"] = jnp.where(keep, running[:, p], acc["series_max"])
    acc["norm"] = jnp.where(inside & finite[p], norms[p] / consts["bound"], acc["norm"])
    return acc


def _initial_acc(n_inv: int, n_samples: int, dtype):
    none = jnp.asarray(-1, jnp.int32)
    zero = jnp.zeros((), dtype)
    return {
        "escape": none, "valid": none, "ref_fail": none,
        "n": zero, "mean_t": zero, "stt": zero,
        "mean_d": jnp.zeros((n_inv,), dtype), "std": jnp.zeros((n_inv,), dtype),
        "max": jnp.zeros((n_inv,), dtype),
        "series": jnp.full((n_inv, n_samples), jnp.nan, dtype),
        "series_max": jnp.full((n_inv, n_samples), jnp.nan, dtype),
        "norm": jnp.full((n_samples,), jnp.nan, dtype),
    }


@eqx.filter_jit
def _stream(model, task, initial, rstates, start, floors, consts, reference, plan: _Plan):
    """The vmapped streaming scan: per initial state, the accumulated statistics (and,
    with `plan.keep_states`, the new states of every chunk); `reference` is a source of
    `geomlearn.evaluation._references` (`rstates` its per-trajectory start) or `None`."""
    C, n_init = plan.chunk, plan.n_init
    dtype = start.dtype

    def one(mstate, rstate, start_values, floor):
        def body(carry, c):
            mstate, rstate, acc = carry
            pts = model.rollout(mstate, C + n_init, task)
            new = pts[n_init:]
            mstate = model.initial_states(pts[None, C:], task)[0]
            t = n_init + c * C + jnp.arange(C, dtype=jnp.int32)
            ref = ok = None
            if reference is not None:
                ref, ok, rstate = reference.chunk(rstate, t)
            acc = _update(acc, new, ref, ok, t, dict(consts, start=start_values, floor=floor),
                          plan)
            return (mstate, rstate, acc), (new if plan.keep_states else None)

        acc0 = _initial_acc(len(consts["fns"]), len(plan.samples), dtype)
        steps = jnp.arange(plan.n_chunks, dtype=jnp.int32)
        (_, _, acc), kept = jax.lax.scan(body, (mstate, rstate, acc0), steps)
        return acc, kept

    return jax.vmap(one)(initial, rstates, start, floors)


def _plan(model, task, horizon: int, keep_states: bool, n_series: int, chunk: int) -> _Plan:
    n_init = model.n_initial_points(task)
    if horizon < n_init:
        raise ValueError(
            f"horizon={horizon} does not go beyond the {n_init} given states of the initial window"
        )
    per_step = task.prediction_window or 1
    n_new = horizon + 1 - n_init
    C = min(chunk, n_new)
    C = -(-C // per_step) * per_step
    samples = np.unique(np.round(np.geomspace(max(n_init, 1), horizon, n_series)).astype(int))
    return _Plan(horizon=horizon, n_init=n_init, chunk=C, n_chunks=-(-n_new // C),
                 samples=tuple(int(s) for s in samples), keep_states=bool(keep_states))


def _optional_step(value: int):
    return None if value < 0 else int(value)


def _survival_median(steps, horizon: int):
    """The median first-event step, counting trajectories without one as beyond the
    horizon: `None` unless at least half of them had the event."""
    arr = np.array([np.inf if s is None else s for s in steps], dtype=np.float64)
    med = float(np.median(arr))
    return None if not np.isfinite(med) else (int(med) if med.is_integer() else med)


def _summary_metrics(acc, plan: _Plan, names, *, bound, method_name):
    """The JSON-serialisable metrics of the accumulated statistics."""
    escape = [_optional_step(s) for s in np.asarray(acc["escape"])]
    valid = [_optional_step(s) for s in np.asarray(acc["valid"])]
    ref_fail = [_optional_step(s) for s in np.asarray(acc["ref_fail"])]
    n = np.asarray(acc["n"], dtype=np.float64)
    stt = np.asarray(acc["stt"], dtype=np.float64)
    std = np.asarray(acc["std"], dtype=np.float64)
    top = np.asarray(acc["max"], dtype=np.float64)
    invariants = {}
    for i, name in enumerate(names):
        drift = [float(top[b, i]) if n[b] >= 1 else None for b in range(len(n))]
        trend = [float(std[b, i] / stt[b] * TREND_STEPS) if n[b] >= 2 and stt[b] > 0 else None
                 for b in range(len(n))]
        known_d = [d for d in drift if d is not None]
        known_t = [x for x in trend if x is not None]
        invariants[name] = {
            "max_drift": drift, "trend": trend,
            "worst_max_drift": max(known_d) if known_d else None,
            "worst_trend": max(known_t, key=abs) if known_t else None,
            "median_max_drift": float(np.median(known_d)) if known_d else None,
            "median_trend": float(np.median(known_t)) if known_t else None,
        }
    escaped = [s for s in escape if s is not None]
    crossed = [s for s in valid if s is not None]
    return {
        "horizon": plan.horizon,
        "n_trajectories": len(escape),
        "data_bound": float(bound),
        "escape_bound": float(ESCAPE_FACTOR * bound),
        "escape_step": escape,
        "n_escaped": len(escaped),
        "min_escape_step": min(escaped) if escaped else None,
        "median_escape_step": _survival_median(escape, plan.horizon),
        "valid_tolerance": VALID_TOLERANCE,
        "reference_method": method_name,
        "valid_time": valid,
        "min_valid_time": min(crossed) if crossed else None,
        "median_valid_time": _survival_median(valid, plan.horizon) if method_name else None,
        "reference_failed_step": ref_fail if method_name else None,
        "trend_steps": TREND_STEPS,
        "invariants": invariants,
    }


def long_horizon(
    model,
    task,
    states,
    *,
    horizon: int,
    invariants: dict,
    bound: float | None = None,
    system=None,
    integrator=None,
    dt: float | None = None,
    keep_states: bool = False,
    n_series: int = N_SERIES,
    chunk: int = CHUNK,
    centre=None,
    time_components=(),
    particles: int = 0,
    scales: dict | None = None,
    stored_reference: bool = False,
) -> LongHorizon:
    r"""Stream a rollout of `horizon` steps from each trajectory's start (see the module
    documentation for what is measured).

    **Arguments:**

    - `model`, `task`: a geomlearn model and its validated rollout `Task`.
    - `states`: the data `(B, n, d)`; the first states start the rollouts (a transformer's
      window the first `T`), `z_0` of each row starts the invariants, the last given
      state the reference. `horizon`: the number of steps $N$ (states $z_1 … z_N$).
    - `invariants`: `{name: function}`, each mapping one state `(d,)` to a scalar;
      `scales`: `{name: s_I}` for those not scaled by `invariant_scale`.
    - `bound`, `centre`: the data's radius $B$ and centre $c$ (a rollout escapes beyond
      `ESCAPE_FACTOR` $\cdot B$ from $c$); default the mean of `states` and the largest
      distance of a state from it. `time_components`: the clock components every norm
      leaves out. `particles`: `0`, or the spatial dimension $k$ of the particles the
      positions describe: escapes are measured in the centre-of-mass frame
      (`geomlearn.evaluation._frame.frame_projection`), where `centre` is given.
    - `system`, `integrator`, `dt`: the reference (a system, an `AbstractIntegrator` and
      the data's time step); without all three there is no valid time. Or
      `stored_reference=True`: `states` themselves are the reference over their length
      $L$ (measured or long computed trajectories; no system): no valid time beyond it.
    - `keep_states`: also return the whole rollout `(B, horizon + 1, d)`; `n_series`,
      `chunk`: about how many log-spaced steps the drift series keeps, states per chunk
      (memory `B · chunk · d`).

    **Returns:** a `LongHorizon`, whose `metrics` hold `horizon`, `n_trajectories`,
    `data_bound` ($B$), `data_centre`, `escape_bound`, `time_components`, per trajectory
    `escape_step` and `valid_time` (`None`: not within the horizon), `n_escaped`,
    `min_escape_step`, `median_escape_step` (rollouts that did not escape count as beyond
    the horizon: `None` unless at least half escaped), `min_valid_time` (the worst),
    `median_valid_time`, `valid_tolerance`, `valid_floor`, `reference_method`,
    `reference_failed_step` (per trajectory, the first step where the reference failed
    or, stored, ended), `reference_steps` (a stored reference's $L - 1$, else `None`),
    `trend_steps`, `seconds` (wall time, compilation included), and per invariant
    `max_drift` and `trend` (per trajectory), `worst_max_drift`, `worst_trend` (of
    largest magnitude), `median_max_drift`, `median_trend` and `scale`. (`evaluate(...,
    horizon=N)` calls it with the system's invariants and reference.)
    """
    horizon = check_int("horizon", horizon, minimum=1)
    chunk = check_int("chunk", chunk, minimum=1)
    n_series = check_int("n_series", n_series, minimum=2)
    states = jnp.asarray(states)
    # A step that cannot be computed (an unconverged implicit solve) is NaN here, and so
    # counts as an escape instead of ending the evaluation.
    task = dataclasses.replace(task, nan_on_failure=True)
    plan = _plan(model, task, horizon, keep_states, n_series, chunk)
    dtype = states.dtype
    names, fns = list(invariants), tuple(invariants.values())
    clock = tuple(int(j) for j in time_components)
    particles = check_int("particles", particles, minimum=0)
    frame = frame_projection(states.shape[-1], clock, particles)
    # a given centre is taken into the frame too (a data centre is there already)
    centre = (data_centre(states, clock, particles) if centre is None
              else frame @ np.asarray(centre, np.float64))
    bound = data_radius(states, centre, clock, particles) if bound is None else float(bound)
    start, scale = _invariant_start(fns, states[:, 0], names, scales or {})
    kept = kept_components(states.shape[-1], clock)
    ref_start = states[:, plan.n_init - 1]
    floors = VALID_FLOOR * jnp.sqrt(jnp.sum((ref_start * jnp.asarray(kept, dtype)[None]) ** 2,
                                            axis=-1))
    consts = {"fns": fns, "scale": scale, "limit": jnp.asarray(ESCAPE_FACTOR * bound, dtype),
              "tolerance": jnp.asarray(VALID_TOLERANCE, dtype), "bound": jnp.asarray(bound, dtype),
              "centre": jnp.asarray(centre, dtype), "kept": jnp.asarray(kept, dtype),
              "frame": jnp.asarray(frame, dtype)}
    reference = _reference_source(system, integrator, dt, dtype, stored_reference)
    rstates = (None if reference is None else
               reference.start(states, plan.n_init, plan.n_init + plan.n_chunks * plan.chunk))
    initial = model.initial_states(states, task)
    started = time.perf_counter()
    acc, kept_states = jax.block_until_ready(
        _stream(model, dataclasses.replace(task, batch=len(initial)), initial, rstates, start,
                floors, consts, reference, plan))
    seconds = time.perf_counter() - started
    metrics = _summary_metrics(acc, plan, names, bound=bound,
                               method_name=None if reference is None else reference.name)
    metrics.update(seconds=seconds, data_centre=[float(v) for v in centre],
                   time_components=list(clock), particle_dimension=particles,
                   valid_floor=VALID_FLOOR,
                   reference_steps=int(states.shape[1]) - 1 if stored_reference else None)
    for i, name in enumerate(names):
        metrics["invariants"][name]["scale"] = float(scale[i])
    full = None
    if keep_states:
        new = np.asarray(kept_states).reshape(states.shape[0], -1, states.shape[-1])
        full = np.concatenate([np.asarray(states[:, : plan.n_init]), new], axis=1)[:, : horizon + 1]
    series = np.asarray(acc["series"], dtype=np.float64)
    running = np.asarray(acc["series_max"], dtype=np.float64)
    return LongHorizon(metrics=metrics, steps=np.asarray(plan.samples),
                       drift={name: series[:, i] for i, name in enumerate(names)},
                       max_drift={name: running[:, i] for i, name in enumerate(names)},
                       norm=np.asarray(acc["norm"], dtype=np.float64), states=full)


def _reference_source(system, integrator, dt, dtype, stored: bool):
    """The reference of the valid time: the given states (`stored`), the system
    integrated alongside the model (all of `system`, `integrator`, `dt`), or `None`."""
    if stored:
        if system is not None or integrator is not None:
            raise ValueError("stored_reference=True compares with the given states: give no "
                             "system or integrator as well")
        return StoredReference()
    if system is None or integrator is None or dt is None:
        return None
    return IntegratedReference(system, integrator, jnp.asarray(dt, dtype))


def _invariant_start(fns, z0, names, scales: dict):
    """`(I(z_0) (B, n_inv), s_I (n_inv,))`: the invariants at the initial states and their
    scales, `invariant_scale` unless `scales` gives one (a zero scale is 1)."""
    dtype = z0.dtype
    if not fns:
        return jnp.zeros((z0.shape[0], 0), dtype), jnp.zeros((0,), dtype)
    start = jnp.stack([jax.vmap(fn)(z0) for fn in fns], axis=-1)
    scale = np.array([scales[name] if name in scales else invariant_scale(fn, z0)
                      for fn, name in zip(fns, names)], np.float64)
    return start, jnp.asarray(np.where(scale > 0, scale, 1.0), dtype)


def long_horizon_rows(m: dict) -> list[tuple[str, str]]:
    """The rows `(name, text)` of the long-horizon metrics `m` for a summary table."""
    n = m["n_trajectories"]
    rows = [("long horizon", f"{m['horizon']} steps from {n} initial state{'s' * (n != 1)} "
                             f"({fmt(m.get('seconds'))} s)")]
    clock = m.get("time_components") or []
    without = f", clock component{'s' * (len(clock) != 1)} {clock} left out" if clock else ""
    if m.get("particle_dimension"):
        without += f", centre-of-mass frame of {m['particle_dimension']}-D particles"
    esc = (f"{m['n_escaped']} of {m['n_trajectories']}   (distance from the data's mean > "
           f"{fmt(m['escape_bound'])}{without})")
    if m["n_escaped"]:
        esc += f"   first at step {m['min_escape_step']}, median {fmt(m['median_escape_step'])}"
    rows.append(("escaped", esc))
    if m["reference_method"] is None:
        rows.append(("valid time", "n/a (no reference solution)"))
    else:
        crossed = sum(v is not None for v in m["valid_time"])
        steps = m.get("reference_steps")
        ends = ("" if steps is None or steps >= m["horizon"] else
                f"; they end at step {steps}: not measured beyond")
        rows.append(("valid time", f"median step {fmt(m['median_valid_time'])}   min "
                     f"{fmt(m['min_valid_time'])}   ({crossed} of {m['n_trajectories']} beyond "
                     f"{m['valid_tolerance']:g} relative error vs {m['reference_method']}"
                     f"{ends})"))
    for name, v in m["invariants"].items():
        trend, median = v["worst_trend"], v.get("median_max_drift")
        rows.append((f"{name}, long", f"max drift {fmt(v['worst_max_drift'])}   trend "
                     f"{'n/a' if trend is None else f'{trend:+.2e}'} per {m['trend_steps']} steps"
                     + ("" if median is None else f"   median rollout: max drift {fmt(median)}")))
    return rows


def escape_warning(m: dict) -> str | None:
    """A one-line warning when any rollout of the long-horizon metrics `m` escaped, else
    `None`."""
    if not m or not m["n_escaped"]:
        return None
    return (f"warning: {m['n_escaped']} of {m['n_trajectories']} rollouts escaped (state not "
            f"finite or farther than {fmt(m['escape_bound'])} from the data's mean, "
            f"{ESCAPE_FACTOR:g} × the data's radius) within {m['horizon']} steps; first at "
            f"step {m['min_escape_step']}")
