"""Figures of a trained model: the report that `geomlearn train` writes, reusable from
notebooks (`geomlearn.plotting.report(path, history=..., evaluation=...)`).

matplotlib is an optional dependency (`pip install "geomlearn[plot]"`); it is imported
only when a figure is drawn.
"""

from __future__ import annotations

import pathlib
import sys

__all__ = ["report"]


def report(path, *, history, evaluation, loss_name: str = "relative", labels=(),
           canonical: bool = True) -> bool:
    """Write a report figure: the rollout against the reference in phase space, the
    invariant error over time, and the loss curves.

    **Arguments:** `path` (an image file); `history` (from `fit`); `evaluation` (the
    `geomlearn.Evaluation` returned by `evaluate`); `loss_name` (the y-axis label);
    `labels` (names of the state components); `canonical` (plot `q_1` against `p_1`,
    otherwise the first two components).

    **Returns:** `True`, or `False` (with a message on stderr) when matplotlib is missing.
    """
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
        return False
    import numpy as np

    metrics, rollout, reference, series = (
        evaluation, evaluation.rollout, evaluation.reference, evaluation.series
    )
    labels = list(labels)
    d = reference.shape[-1]
    a, b = (0, d // 2) if canonical else (0, min(1, d - 1))
    name = lambda i: labels[i] if i < len(labels) else f"z{i + 1}"  # noqa: E731
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ax = axes[0]
    ref, pred = np.asarray(reference[0]), np.asarray(rollout[0])
    ax.plot(ref[:, a], ref[:, b], "k-", lw=2.5, alpha=0.35, label="reference")
    ax.plot(pred[:, a], pred[:, b], "C0--", lw=1.3, label=metrics["model"])
    ax.plot(ref[0, a], ref[0, b], "ko", ms=4)
    ax.set_xlabel(name(a))
    ax.set_ylabel(name(b))
    ax.set_title(f"rollout, {metrics['n_steps']} steps (evaluation trajectory 1)")
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
    ax.legend(loc="best", fontsize=8)
    ax = axes[2]
    ax.semilogy(history["epoch"], history["loss"], "C0-", label="training")
    val = [v for v in history["val_loss"] if v is not None]
    if len(val) == len(history["epoch"]):
        ax.semilogy(history["epoch"], val, "C1-", label="validation")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{loss_name} loss")
    ax.set_title("training")
    ax.legend(loc="best", fontsize=8)
    fig.suptitle(f"{metrics['model']} on {metrics['system']} ({metrics['structure']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
