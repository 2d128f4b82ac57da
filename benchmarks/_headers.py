"""The hand-written part of `benchmarks/RESULTS.md`: one short header per benchmark.

`python -m benchmarks report` renders RESULTS.md from these headers and the committed
result files in `benchmarks/results/`; everything measured comes from the files. A
header says what the benchmark measures and its target in words, and names the result
files its section shows (by default `<name>.json`) and which of their tables.

Keep each header short and factual: no measured figures (they are in the files), no
dates, no account of how a result was reached.
"""

from __future__ import annotations

import dataclasses

__all__ = ["INTRO", "Run", "SECTIONS", "Section"]


@dataclasses.dataclass(frozen=True)
class Run:
    """A result file shown in a section; with `where`, only the rows of its tables whose
    values equal those given (`(key, value)` pairs) are kept."""

    file: str
    where: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Section:
    """The header of one benchmark's section.

    `runs` are the result files it shows (default: `<name>.json`); `tables` the indices of
    the tables shown from each (default: all); `targets` and `notes` whether the file's
    targets table and notes are shown; `merge` concatenates the rows of the shown table of
    every run into one table (the runs must share its columns); `figures` are image files
    of `results/` shown when present.
    """

    title: str
    about: str
    target: str = ""
    runs: tuple[Run, ...] = ()
    tables: tuple[int, ...] | None = None
    targets: bool = True
    notes: bool = True
    merge: bool = False
    figures: tuple[str, ...] = ()


INTRO = """\
Speed against the papers' numbers, reproductions of their experiments, and measurements
of the library's options, rendered from [`results/`](results/) by `python -m benchmarks
report`: per section the command, the machine and date of its run, tables and targets.

```bash
python -m benchmarks                 # list the benchmarks
python -m benchmarks NAME [--quick]  # run one: prints its tables, writes results/NAME.json
python -m benchmarks report          # render this file from results/
```

`--quick` is a smoke test with tiny sizes (the slow test tier runs it for every
benchmark); its figures mean nothing. Timings are medians of several calls after
compilation, and compile time is reported on its own. "One core" means a subprocess
pinned to one CPU core with XLA's multi-threaded Eigen kernels off. Wall times on a
shared machine are longer than on an idle one: compare timings within a table."""


_PE_CLI = "positional_encoding_cli_{}.json"

SECTIONS: dict[str, Section] = {
    "training_throughput": Section(
        title="Training throughput",
        about="The SympNets paper's pendulum network, `GSympNet(2, n_layers=5, width=30, "
        'activation="sigmoid")`, on its 40 training pairs (full batch, `optax.adam(1e-3)`, '
        "MSE), on one core: 2000 updates in one `lax.scan` (the bare loop), one jitted "
        "update per Python call, and `geomlearn.fit`; then the same across batch sizes "
        "(the sweep's table is in the result file; its ratios are in the targets).",
        tables=(0,),
        notes=False,
    ),
    "rollout_speed": Section(
        title="Rollout speed",
        about="250,000 states of the rigid body from one window with the paper's "
        "`VolumePreservingTransformer(3, n_blocks=2, L=3)` (`T = pw = 3`) through "
        "`geomlearn.iterate`, on one core, against `integrate(RigidBody(), …, "
        'method="implicit_midpoint")` in the same process; batched: 1000 windows × 1000 '
        "steps. The model file is the one the rigid-body benchmark trains.",
    ),
    "rigid_body": Section(
        title="Rigid-body reproduction",
        about="The volume-preserving transformer paper's rigid body "
        "(`datasets.rigid_body_vpt()`, `T = pw = 3`, relative loss): "
        "`VolumePreservingTransformer(3, n_blocks=2, L=3)` (VPT) and "
        "`VolumePreservingFeedForward(3, n_blocks=6)` (VPFF) trained by `geomlearn.fit` "
        "with Levenberg–Marquardt within a wall-clock budget, the VPT also by Gauss–Newton, "
        "Adam and Adam + L-BFGS; validation from the paper's two initial conditions. The "
        "second run trains the VPT alone. The loss against wall time is the figure (its "
        "table at fixed times is in the result files).",
        runs=(Run("rigid_body.json"), Run("rigid_body_vpt_idle.json")),
        tables=(0,),
        targets=False,
        figures=("rigid_body_loss_vs_time.png",),
        notes=False,
    ),
    "coupled_oscillator_lst": Section(
        title="Coupled oscillator",
        about="The linear symplectic transformer (LST), the symplectic transformer (SymT), "
        "the standard transformer (ST) and a `GSympNet` on the coupled oscillator "
        "(`datasets.coupled_oscillator_lst`, 5 training trajectories, `T = pw = 4`), "
        "trained by Adam and by Levenberg–Marquardt from three seeds; validation: relative "
        "trajectory error against the implicit midpoint rule from 5 unseen initial "
        "conditions, and the energy drift.",
        target="No target: the tables compare the networks on unseen initial conditions.",
        notes=False,
    ),
    "sympnets_pendulum": Section(
        title="SympNets pendulum",
        about="The SympNets paper's pendulum (`datasets.pendulum_sympnets()`: 40 training "
        "and 100 test pairs, `h = 0.1`): G-SympNet, LA-SympNet, Hénon net, Hamiltonian "
        "neural network and ResNet, each 50,000 full-batch epochs of `optax.adam(1e-3)` on "
        "the MSE; errors over 1000 steps from `(1, 0)` against a sixth-order reference.",
        target="No target.",
    ),
    "toda_reduction": Section(
        title="Toda lattice model reduction",
        about="Model reduction of `TodaLattice(200, alpha=0.64)` (400 dimensions, 8000 "
        "implicit-midpoint steps of `dt = 0.1`): PSD, a symplectic autoencoder and the "
        "manifold cotangent lift at reduced dimensions 2 and 4; errors, loop actions, and "
        "each online phase's speed-up over the full model at `dt` (against the fastest "
        "classical integrator: Work–precision). Small autoencoders, a fixed epoch budget.",
        notes=False,
    ),
    "new_families": Section(
        title="New families",
        about="P-SympNets on the harmonic oscillator and on a 20-dimensional linear "
        "Hamiltonian system, symmetric SympNets on the pendulum (10,000-step rollout), and "
        "a Lagrangian neural network against an MLP of the acceleration on the double "
        "pendulum.",
        target="No target.",
        figures=("new_families_energy.png",),
        notes=False,
    ),
    "positional_encoding": Section(
        title="Positional encoding at equal budget",
        about="Every transformer family with and without `positional_encoding`, the same "
        "data and epochs (`fit`'s default Adam, float64, median over the seeds; held-out "
        "validation): the driven pendulum and the pulsating rigid body, where the order of "
        "a window's rows matters, and Markov problems (ratios below 1: the encoding helps).",
        target="Targets: validation at least 2× better with the encoding where order "
        "matters; at most 1.5× worse where it does not.",
        tables=(0,),
        targets=False,
        notes=False,
    ),
    "positional_encoding_lm": Section(
        title="Positional encoding at equal wall time",
        about="Every transformer family with and without the encoding, trained by "
        "Levenberg–Marquardt for the same wall time (20 s, one core) at two sizes, on "
        "Markov and order-dependent problems; one seed (the file also holds Adam runs).",
        target="Targets: with / without at most 1.2 in training and validation on Markov "
        "problems; validation at least 5× better where order matters.",
        runs=(Run("positional_encoding_lm.json", where=(("trainer", "lm"),)),),
        tables=(0,),
        targets=False,
        notes=False,
    ),
    "positional_encoding_oracle": Section(
        title="Position signals against an oracle",
        about="Each transformer family without signal, with it, and as an oracle given "
        "the drive's phase as two columns, trained by LM for equal wall time: driven "
        "pendulum (regular; steps in [0.5, 1.5] Δt), forced Duffing oscillator (such "
        "steps), Markov data given times (`width=12, L=2`: 2–7 LM iterations). "
        "Validation error, seed median; tests ran beside.",
        target="Targets: signal within 2× of the oracle, with irregular sampling also 5× "
        "better than no times; Markov: at most 1.2× the error of no signal.",
        tables=(0,),
        targets=False,
        notes=False,
    ),
    "positional_encoding_cli": Section(
        title="Positional encoding through the command line",
        about="`geomlearn train` without and with `--positional-encoding` at the command "
        "line's defaults (float32, Levenberg–Marquardt up to 500 iterations or 150 s), "
        "median over the seeds of the validation loss on held-out trajectories. A row is "
        "the latest run of its case; its parameter counts (without → with) identify the "
        "model and the position signal that ran.",
        target="Targets: with / without at most 1.2 on Hénon–Heiles (Markov); validation "
        "at least 5× better where order matters; the encoding adds at most 10 % of the "
        "parameters.",
        runs=(
            Run(_PE_CLI.format("sizes_henon_heiles_st_seeds_3_5")),
            Run(_PE_CLI.format("sizes_henon_heiles_lst_seeds_3_5")),
            Run(_PE_CLI.format("sizes_tf")),
            Run(_PE_CLI.format("henon_heiles_vpt")),
            Run(_PE_CLI.format("large_st_lst")),
            Run(_PE_CLI.format("vpt_true")),
            Run(_PE_CLI.format("order"),
                where=(("system", "forced_rigid_body"), ("model", "transformer"))),
            Run(_PE_CLI.format("forced_rigid_body_vpt")),
        ),
        tables=(1,),
        targets=False,
        notes=False,
        merge=True,
    ),
    "long_rollout": Section(
        title="Long rollouts",
        about="How long a rollout of 100,000 states stays bounded for each transformer "
        "family — the VPT on the rigid body; SymT, LST and ST on the coupled oscillator — "
        "after Levenberg–Marquardt training within a CPU-time budget, on one window "
        "(`k=1`) or on rollouts of `k` windows. The second run adds the Lie–Poisson "
        "network (LPNet) and evaluates with `geomlearn.evaluate(..., horizon=100_000)`.",
        runs=(Run("long_rollout.json"), Run("long_rollout_lpnet.json")),
        targets=False,
        notes=False,
    ),
    "dissipation": Section(
        title="Dissipation and forcing",
        about="`ConformalSympNet` against a `GSympNet` and two MLPs on the damped pendulum "
        "(γ = 0.1, `h = 0.1`): the recovered γ and the 1000-step rollout error; "
        "`PortHamiltonianNN` on the forced Duffing oscillator of Desai et al. (2021): the "
        "recovered damping and forcing amplitude.",
    ),
    "sympnet_rollout": Section(
        title="Rollout of small symplectic networks",
        about="States per second of the command line's default `GSympNet`, `LASympNet` and "
        "`HenonNet` on phase spaces of dimension 2 and 4, rolled out from 1 to 512 initial "
        "states on one core: the compiled rollout `geomlearn.iterate` runs (each family's "
        "inference form, contracting by broadcast or by `dot` as the batch size says), a scan of the plain model map "
        "(the rollout before the families had an inference form), and the same arithmetic "
        "written by hand on the batch with every contraction a `dot` or a broadcast. Timed "
        "interleaved; ratios are medians of per-round ratios.",
        target="Target: the rollout ≥ 3× the model map for 1–16 trajectories, not slower at "
        "512, ≥ 0.8× the faster hand-written form, the same states to 1e-12.",
        tables=(0,),
        notes=False,
    ),
    "brouwer": Section(
        title="Round-off at its limit",
        about="The Casimir $|z|^2$ of a `LiePoissonNet` (random parameters) over 10⁵ steps "
        "in float32 and float64: the former sin/cos layers, the Gibbs-vector layers (plain "
        "`lax.scan`), and `geomlearn.iterate`'s rollout (Kahan summation of every `z + Δ`). "
        "Drift, trend, growth in units of ε√n; time against the plain scan, also with "
        "loops as one kernel.",
        target="Target: drift ≤ 5 ε√n in both dtypes, no trend, at ≤ 1.3× the plain time.",
        notes=False,
    ),
    "distributed_lm": Section(
        title="Levenberg–Marquardt across processes",
        about="`fit(..., optimizer=LevenbergMarquardt(chunk_size=1024), per_process=True)` "
        "on 4096 samples of the flow of a random 20-dimensional quadratic Hamiltonian "
        "(`GSympNet(20, n_layers=4, width=8)`, float64): 2 processes on 2 cores, each "
        "holding half the samples (each process pinned to its core), against 1 process "
        "on 1 core; per-process memory, iteration time and final loss.",
        notes=False,
    ),
    "work_precision": Section(
        title="Work–precision: is a learned integrator worth it here?",
        about="`geomlearn.work_precision` against the classical integrators at `h = Δt/k` "
        "(explicit only, on the large systems), compiled JAX on one CPU. Störmer–Verlet "
        "with identity-start corrections: on `LennardJonesCluster(32, spatial_dim=2)` at a "
        "stride of 8 a `PairSympNet` after it (Adam; long rollouts, trained and untrained), "
        "on Hénon–Heiles G-SympNets around it (LM). A reduced `TodaLattice(200)` against the full one.",
        target="Target: on the Lennard-Jones cluster `frontier_ratio ≥ 1`, no escape, an "
        "energy without trend; for the Toda reduction `equal_error_speedup ≥ 100`.",
        figures=("work_precision.png",),
    ),
    "data_driven_peers": Section(
        title="Data-driven peers at equal training time",
        about="Same trajectories and wall-clock budget per model: `GSympNet` (± the "
        "system's symmetry) and `HamiltonianNeuralNetwork` by `fit` with the command "
        "line's trainer, PySINDy (STLSQ; implicit-midpoint rollout), a Diffrax neural ODE "
        "(Adam). Held-out rollouts by `long_horizon`: valid time (error ≤ 10 %), escapes, "
        "drifts (versions in the result file).",
        notes=False,
        target="Target: the G-SympNet (± symmetry) has the longest median valid time of "
        "all, in no more training time than the slowest.",
    ),
}
