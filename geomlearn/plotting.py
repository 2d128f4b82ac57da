"""Figures of a trained model: the report that `geomlearn train` writes, reusable from
notebooks (`geomlearn.plotting.report(path, history=..., evaluation=...)`).

matplotlib is an optional dependency (`pip install "geomlearn[plot]"`); it is imported
only when a figure is drawn.
"""

from __future__ import annotations

import pathlib
import sys
import textwrap

import numpy as np

__all__ = ["report", "reduction_report", "energy_report"]


def _pyplot(path):
    """matplotlib's pyplot (Agg backend), or `None` with a message when it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            f"geomlearn: matplotlib is not installed, so {pathlib.Path(path).name} was not written; "
            'install it with pip install "geomlearn[plot]"',
            file=sys.stderr,
        )
        return None
    return plt


def report(path, *, history, evaluation, loss_name: str = "relative", labels=(),
           canonical: bool = True, columns: tuple[int, int] | None = None) -> bool:
    """Write a report figure: the rollout against the reference in phase space, the
    invariant error over time, the loss curves, and — for an evaluation with a long
    horizon (`evaluate(..., horizon=N)`) — the invariant drift against the step on
    logarithmic axes up to the horizon, with the escapes marked, and — with the metrics
    of `geomlearn.work_precision` under `"work_precision"` — the model's error and speed
    among the classical integrators' (a work–precision diagram). The rollout's title
    gives the trajectory error over the whole reference next to the identity map's.

    **Arguments:** `path` (an image file); `history` (from `fit`); `evaluation` (the
    `geomlearn.Evaluation` returned by `evaluate`); `loss_name` (the y-axis label);
    `labels` (names of the state components); `canonical` (plot `q_1` against `p_1`,
    otherwise the first two components) or `columns` (the indices of the two
    components to plot instead).

    **Returns:** `True`, or `False` (with a message on stderr) when matplotlib is missing.
    """
    plt = _pyplot(path)
    if plt is None:
        return False
    metrics, rollout, reference, series = (
        evaluation, evaluation.rollout, evaluation.reference, evaluation.series
    )
    labels = list(labels)
    d = reference.shape[-1]
    a, b = (0, d // 2) if canonical else (0, min(1, d - 1))
    if columns is not None:
        a, b = (int(i) for i in columns)
        if not (0 <= a < d and 0 <= b < d):
            raise ValueError(f"columns must be two indices of the {d} state components, "
                             f"got {columns}")
    name = lambda i: labels[i] if i < len(labels) else f"z{i + 1}"  # noqa: E731
    long, classical = evaluation.long_horizon, evaluation.get("work_precision")
    n_panels = 3 + (long is not None) + (classical is not None)
    if n_panels == 3:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    else:
        fig, grid = plt.subplots(2, n_panels - 2, figsize=(6 * (n_panels - 2), 8.8))
        axes = list(grid.ravel())
        if n_panels == 5:
            axes.pop().set_axis_off()
    ax = axes[0]
    ref, pred = np.asarray(reference[0]), np.asarray(rollout[0])
    ax.plot(ref[:, a], ref[:, b], "k-", lw=2.5, alpha=0.35, label="reference")
    ax.plot(pred[:, a], pred[:, b], "C0--", lw=1.3, label=metrics["model"])
    ax.plot(ref[0, a], ref[0, b], "ko", ms=4)
    ax.set_xlabel(name(a))
    ax.set_ylabel(name(b))
    ax.set_title(f"rollout, {metrics['n_steps']} steps (evaluation trajectory 1)"
                 + _error_scale(metrics), fontsize=10)
    ax.legend(loc="best", fontsize=8)
    ax.set_aspect("equal", adjustable="datalim")
    ax = axes[1]
    t = np.arange(reference.shape[1]) * (metrics["dt"] or 1.0)
    for i, (inv, values) in enumerate(series.items()):
        ax.semilogy(t[1:], np.maximum(values["model"][1:], 1e-17), f"C{i}-",
                    label=f"{inv}, {metrics['model']}")
        ax.semilogy(t[1:], np.maximum(values["reference"][1:], 1e-17), f"C{i}:",
                    label=f"{inv}, reference data")
    ax.set_xlabel("time" if metrics["dt"] else "step")
    ax.set_ylabel("relative invariant error")
    ax.set_title("invariant error of the rollout")
    if series:
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no known invariants\n(no system given)", ha="center", va="center",
                transform=ax.transAxes)
    ax = axes[2]
    _loss_panel(ax, history, loss_name)
    if long is not None:
        _long_horizon_panel(axes[3], long)
    if classical is not None:
        _work_precision_panel(axes[-1], classical)
    on = metrics["system"] if metrics["system"] is not None else "data"
    fig.suptitle(f"{metrics['model']} on {on} ({metrics['structure']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def energy_report(path, *, series, title: str = "energy") -> bool:
    """The stored energy against time of a damped or driven system: the reference and
    the model's rollout (the decay it predicts), the mean over the trajectories
    (`series` as returned by `geomlearn.evaluation.dissipation_metrics`).

    **Returns:** `True`, or `False` (with a message on stderr) when matplotlib is missing.
    """
    plt = _pyplot(path)
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(series["t"], series["reference"], "k-", label="reference")
    ax.plot(series["t"], series["model"], "C1--", label="model (predicted decay)")
    ax.set_xlabel("time")
    ax.set_ylabel("energy H (mean over trajectories)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def reduction_report(path, *, history, evaluation, loss_name: str = "relative",
                     profile_fractions=(0.0, 0.25, 0.5, 1.0)) -> bool:
    r"""Write the report of a model reduction (what `geomlearn train` writes for a
    `SymplecticAutoencoder`): the full solution against the reduced one.

    Top row: the positions $q_1..q_N$ over the lattice index at the times
    `profile_fractions` of the horizon — the full solution (the travelling wave packet), its projection
    $\Psi^d(\Psi^e(x))$ and the decoded reduced solution $\Psi^d(y(t))$. Bottom row: the
    relative projection errors (autoencoder and PSD) and reduction error over time, the
    reduced solution in its coordinates $(\tilde q_1, \tilde p_1)$, and the loss curves.

    **Arguments:** `path`; `history` (from `fit`); `evaluation` (a
    `geomlearn.evaluation.ReductionEvaluation`); `loss_name`; `profile_fractions` (at least
    three).

    **Returns:** `True`, or `False` (with a message on stderr) when matplotlib is missing.
    """
    plt = _pyplot(path)
    if plt is None:
        return False
    m, ev = evaluation, evaluation
    X, P, D = (None if a is None else np.asarray(a, dtype=np.float64)
               for a in (ev.full, ev.projected, ev.decoded))
    N = X.shape[1] // 2
    n_profiles = len(profile_fractions)
    if n_profiles < 3:
        raise ValueError(f"profile_fractions needs at least 3 entries, got {profile_fractions}")
    idx = (np.asarray(profile_fractions, dtype=np.float64) * (X.shape[0] - 1)).round().astype(int)
    fig, axes = plt.subplots(2, n_profiles, figsize=(4 * n_profiles, 7.6), squeeze=False)
    for ax, i in zip(axes[0], idx):
        ax.plot(X[i, :N], "k-", lw=2.5, alpha=0.35, label="full order")
        ax.plot(P[i, :N], "C0--", lw=1.3, label="projection Ψ_dec(Ψ_enc(x))")
        if D is not None:
            ax.plot(D[i, :N], "C3-", lw=1.0, label="reduced solution Ψ_dec(y)")
        ax.set_title(f"q at t = {ev.times[i]:g}")
        ax.set_xlabel("lattice index n")
    axes[0, 0].set_ylabel("q_n")
    axes[0, 0].legend(loc="best", fontsize=8)
    ax = axes[1, 0]
    floor = lambda v: np.maximum(v, 1e-17)  # noqa: E731
    ax.semilogy(ev.times, floor(ev.series["projection"]), "C0-", label=f"projection, {m['model']}")
    ax.semilogy(ev.times, floor(ev.series["psd_projection"]), "C2-", label="projection, PSD")
    if ev.series["reduction"] is not None:
        ax.semilogy(ev.times, floor(ev.series["reduction"]), "C3-", label="reduction (reduced H)")
    ax.set_xlabel("time")
    ax.set_ylabel("relative error")
    ax.set_title("error over time")
    ax.legend(loc="best", fontsize=8)
    ax = axes[1, 1]
    n = m["reduced_dim"] // 2
    if ev.reduced is not None:
        Y = np.asarray(ev.reduced, dtype=np.float64)
        ax.plot(Y[:, 0], Y[:, n], "C3-", lw=0.8)
    ax.set_xlabel("q~1")
    ax.set_ylabel("p~1")
    ax.set_title("reduced solution" if ev.reduced is not None else "reduced integration failed")
    ax = axes[1, 2]
    _loss_panel(ax, history, loss_name)
    for ax in axes[1, 3:]:
        ax.axis("off")
    fig.suptitle(f"{m['model']} {m['full_dim']} → {m['reduced_dim']} on {m['system']}: "
                 "full against reduced solution")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _error_scale(metrics) -> str:
    """A second title line: the trajectory error over the whole reference and the identity
    map's, or `""` for an evaluation without the latter."""
    identity = metrics.get("identity_trajectory_error") or {}
    k = str(metrics["n_steps"])
    if k not in identity or k not in metrics["trajectory_error"]:
        return ""
    return (f"\nerror {metrics['trajectory_error'][k]:.3g} "
            f"(identity map {identity[k]:.3g})")


def _long_horizon_panel(ax, long) -> None:
    """Each invariant's relative drift |δ_t| against the step t (log-log, one line per
    rollout, up to its escape), or without invariants the distance from the data's
    centre over the data's radius; the escape steps as crosses at the top of the panel."""
    m, steps = long.metrics, long.steps
    floor = 1e-17
    if long.drift:
        for i, (name, values) in enumerate(long.drift.items()):
            for b, (row, top) in enumerate(zip(values, long.max_drift[name])):
                ax.loglog(steps, np.maximum(np.abs(row), floor), f"C{i}-", lw=0.6, alpha=0.3)
                ax.loglog(steps, np.maximum(top, floor), f"C{i}-", lw=1.4,
                          label=f"{name}: max so far (faint: at the step)" if b == 0 else None)
        ax.set_ylabel("relative invariant drift |δ_t|")
    else:
        for row in long.norm:
            ax.loglog(steps, row, "C0-", lw=0.9, alpha=0.7)
        ax.axhline(m["escape_bound"] / m["data_bound"], color="C3", ls=":", label="escape bound")
        ax.set_ylabel("distance from the data's mean / data's radius")
    escapes = [s for s in m["escape_step"] if s is not None]
    if escapes:
        ax.plot(escapes, [ax.get_ylim()[1]] * len(escapes), "kx", ms=7, clip_on=False,
                label=f"escaped ({len(escapes)} of {m['n_trajectories']})")
    ax.set_xlim(max(1, steps[0]), m["horizon"])
    ax.set_xlabel("step")
    n = m["n_trajectories"]
    ax.set_title(f"long horizon: {m['horizon']} steps from {n} state{'s' * (n != 1)}")
    ax.legend(loc="best", fontsize=8)


_DIVERGED_ERROR = 1.0
"""A relative error above this (no correct digit: the run diverged) is drawn at it, as a
triangle, so that one diverged run does not stretch the error axis over decades."""


def _work_precision_panel(ax, measured: dict) -> None:
    """The error at the horizon against states per second (log–log): each classical
    method over its steps Δt/k, the model as a star, the verdict as the title; errors
    above `_DIVERGED_ERROR` drawn at it as triangles."""
    by_method: dict[str, list] = {}
    for point in measured["points"]:
        if not point["failed"]:
            by_method.setdefault(point["method"], []).append(point)
    diverged = []
    for i, (method, points) in enumerate(by_method.items()):
        speeds = [p["states_per_second"] for p in points]
        errors = [min(p["error_worst"], _DIVERGED_ERROR) for p in points]
        ax.loglog(speeds, errors, f"C{i % 10}.-", lw=1, ms=4, label=method)
        diverged += [(v, f"C{i % 10}") for v, p in zip(speeds, points)
                     if p["error_worst"] > _DIVERGED_ERROR]
    for j, (speed, colour) in enumerate(diverged):
        ax.loglog([speed], [_DIVERGED_ERROR], "^", color=colour, ms=7,
                  label=f"error > {_DIVERGED_ERROR:g} (diverged)" if j == 0 else None)
    model = measured["model_point"]
    if not model["failed"]:
        ax.loglog([model["states_per_second"]], [min(model["error_worst"], _DIVERGED_ERROR)],
                  "r*", ms=14, label=f"{model['method']} (the model)")
    ax.set_xlabel("states per second")
    ax.set_ylabel(f"worst relative error at step {measured['horizon']}")
    ax.set_title("\n".join(textwrap.wrap(measured["verdict"], 60)), fontsize=8)
    ax.legend(loc="best", fontsize=7)


def _loss_panel(ax, history: dict, loss_name: str) -> None:
    """The training (and, where every epoch has one, validation) loss against the epoch."""
    ax.semilogy(history["epoch"], history["loss"], "C0-", label="training")
    val = [v for v in history["val_loss"] if v is not None]
    if len(val) == len(history["epoch"]):
        ax.semilogy(history["epoch"], val, "C1-", label="validation")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{loss_name} loss")
    ax.set_title("training")
    ax.legend(loc="best", fontsize=8)
