"""Write the model files that the test suite loads from now on (`tests/test_compat.py`).

Run **only when the file format changes** (a new format version, a class's new
layout, a new public model family), from the repository root:

    python tests/data/make_fixtures.py

It writes one small model per public family, `tests/data/models/<Class>.geomlearn` (the
`saved` cases of `tests/_cases.py`), and the outputs each must give at fixed inputs,
`tests/data/models/expected.npz`.
Files already committed are never rewritten (a file written by a released version
must keep loading; `--force` rewrites them, for a format that was never released).
Besides today's files it writes the older forms that the compatibility rule covers:
`LagrangianNeuralNetwork-layout1.geomlearn` (no `mass` array, no layout recorded) and
`HamiltonianNeuralNetwork-no-dt.geomlearn` (no `dt` in its configuration) and
`<Transformer class>-layout1-bias.geomlearn` (`positional_encoding=True` with eight
position features in every row-wise layer) and `<Symplectic or standard transformer
class>-layout<N>-true.geomlearn` (`positional_encoding=True` when it meant `"bias-light"`, or
`"bias"` for the linear one in layout 3) and `VolumePreservingTransformer-layout1-true.
geomlearn` (`True` when it meant `"bias"`), made by writing today's model in the form
those versions wrote; and one training checkpoint.
See `docs/persistence.md`. `--out DIR` writes into `DIR` instead (with `--force`: every
file, to compare with the committed ones).
"""

from __future__ import annotations

import json
import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/, for _cases

import geomlearn as gl  # noqa: E402
from geomlearn.io import _container  # noqa: E402

from _cases import MODELS  # noqa: E402
from _cases import output as _output  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent / "models"

#: One small model per public family (float32, fixed keys): the `saved` cases of
#: `tests/_cases.py`, each built with `jax.random.PRNGKey(seed)`, in the order of the seeds.
CASES = {name: case for name, case in sorted(MODELS.items(), key=lambda item: item[1].seed)}


def _input(shape):
    """A fixed float32 input (NumPy's generator: the same with or without 64-bit JAX)."""
    return jnp.asarray(np.random.default_rng(7).standard_normal(shape).astype(np.float32))


def output(model):
    """The numbers a fixture's model must reproduce: its map (or its Hamiltonian and
    vector field) at a fixed input."""
    return _output(model, _input)


def _rewrite(path: pathlib.Path, out: pathlib.Path, edit_header, model_section=None) -> None:
    """Write `path` again as `out`, its header changed by `edit_header` (and its model
    section replaced): how an older version wrote the same model."""
    header, sections = _container.read_container(path)
    header.pop("sections")
    edit_header(header)
    if model_section is not None:
        sections["model"] = model_section
    _container.write_container(out, header, sections)


def _older_forms(expected: dict) -> None:
    lnn = gl.load(HERE / "LagrangianNeuralNetwork.geomlearn")
    stripped = eqx.tree_at(lambda m: m.mass, lnn, None)
    _rewrite(HERE / "LagrangianNeuralNetwork.geomlearn", HERE / "LagrangianNeuralNetwork-layout1.geomlearn",
             lambda h: h.pop("layout"), _container.serialise(stripped))
    expected["LagrangianNeuralNetwork-layout1"] = np.asarray(output(lnn))  # mass = I at init
    hnn = gl.load(HERE / "HamiltonianNeuralNetwork.geomlearn")
    _rewrite(HERE / "HamiltonianNeuralNetwork.geomlearn", HERE / "HamiltonianNeuralNetwork-no-dt.geomlearn",
             lambda h: (h["config"].pop("dt"), h.pop("layout")))
    expected["HamiltonianNeuralNetwork-no-dt"] = np.asarray(output(hnn))


#: Transformers of layout 1 with `positional_encoding=True`: eight position features in
#: every row-wise layer (today's `"bias-every-layer"`), non-zero gains.
LAYERWISE_BIAS = {
    "SymplecticTransformer": lambda k: gl.SymplecticTransformer(
        4, L=2, width=3, positional_encoding="bias-every-layer", key=k),
    "LinearSymplecticTransformer": lambda k: gl.LinearSymplecticTransformer(
        4, 3, positional_encoding="bias-every-layer", key=k),
    "Transformer": lambda k: gl.Transformer(
        4, n_heads=2, L=1, transformer_dim=6, positional_encoding="bias-every-layer", key=k),
}


def _layerwise_bias_forms(expected: dict) -> None:
    """`<Class>-layout1-bias.geomlearn`: a transformer as layout 1 wrote
    `positional_encoding=True` (no layout recorded, the flag `True`)."""
    for i, (name, build) in enumerate(LAYERWISE_BIAS.items()):
        model = build(jax.random.PRNGKey(40 + i))
        gains = tuple(jnp.asarray(np.random.default_rng(i).standard_normal(g.shape) * 0.3, g.dtype)
                      for g in model.position_gains)
        model = eqx.tree_at(lambda m: m.position_gains, model, gains)
        path = HERE / f"{name}-layout1-bias.geomlearn"
        gl.save(path, model)

        def edit(header):
            header.pop("layout")
            header["config"]["positional_encoding"] = True

        _rewrite(path, path, edit)
        expected[f"{name}-layout1-bias"] = np.asarray(output(model))


#: Transformers saved with `positional_encoding=True` when it meant another placement:
#: `(class, layout, the placement True meant then)`, non-zero gains.
TRUE_WAS = {
    ("SymplecticTransformer", 2, "bias-light"): lambda k, pe: gl.SymplecticTransformer(
        4, L=2, width=3, positional_encoding=pe, key=k),
    ("LinearSymplecticTransformer", 2, "bias-light"): lambda k, pe: gl.LinearSymplecticTransformer(
        4, 3, positional_encoding=pe, key=k),
    ("LinearSymplecticTransformer", 3, "bias"): lambda k, pe: gl.LinearSymplecticTransformer(
        4, 3, L=2, positional_encoding=pe, key=k),
    ("VolumePreservingTransformer", 1, "bias"): lambda k, pe: gl.VolumePreservingTransformer(
        3, n_blocks=1, L=2, positional_encoding=pe, key=k),
    ("Transformer", 2, "bias-light"): lambda k, pe: gl.Transformer(
        4, L=1, transformer_dim=6, positional_encoding=pe, key=k),
}


def _true_forms(expected: dict, force: bool) -> None:
    """`<Class>-layout<N>-true.geomlearn`: a transformer as layout N wrote
    `positional_encoding=True` (the layout recorded, the flag `True`); files already
    written are kept unless `force`."""
    for i, ((name, layout, held), build) in enumerate(TRUE_WAS.items()):
        if f"{name}-layout{layout}-true" in expected and not force:
            continue
        model = build(jax.random.PRNGKey(50 + i), held)
        rng = np.random.default_rng(10 + i)
        gains = jax.tree_util.tree_map(
            lambda g: jnp.asarray(rng.standard_normal(g.shape) * 0.3, g.dtype), model.position_gains)
        model = eqx.tree_at(lambda m: m.position_gains, model, gains)
        path = HERE / f"{name}-layout{layout}-true.geomlearn"
        gl.save(path, model)

        def edit(header, layout=layout):
            header["layout"] = layout
            header["config"]["positional_encoding"] = True

        _rewrite(path, path, edit)
        expected[f"{name}-layout{layout}-true"] = np.asarray(output(model))


def _checkpoint(expected: dict) -> None:
    data = gl.TrajectoryData(np.stack([np.cos(np.linspace(0, 2, 12)), -np.sin(np.linspace(0, 2, 12))],
                                      axis=-1)[None].astype(np.float32), 0.1)
    model = gl.GSympNet(2, n_layers=1, width=2, key=jax.random.PRNGKey(3))
    model, _ = gl.fit(model, data, epochs=2, key=jax.random.PRNGKey(4), progress=False,
                      checkpoint=HERE / "GSympNet-checkpoint.geomlearn")
    expected["GSympNet-checkpoint"] = np.asarray(output(model))


def main(force: bool = False) -> None:
    HERE.mkdir(exist_ok=True)
    expected_file = HERE / "expected.npz"
    expected = dict(np.load(expected_file)) if expected_file.exists() else {}
    for name, case in CASES.items():
        path = HERE / f"{name}.geomlearn"
        if path.exists() and name in expected and not force:
            continue
        model = case.saved(jax.random.PRNGKey(case.seed))
        gl.save(path, model)
        expected[name] = np.asarray(output(model))
    if force or "LagrangianNeuralNetwork-layout1" not in expected:
        _older_forms(expected)
    if force or "GSympNet-checkpoint" not in expected:
        _checkpoint(expected)
    if force or "SymplecticTransformer-layout1-bias" not in expected:
        _layerwise_bias_forms(expected)
    if force or any(f"{n}-layout{lay}-true" not in expected for n, lay, _ in TRUE_WAS):
        _true_forms(expected, force)
    np.savez(expected_file, **expected)
    print(json.dumps({k: list(v.shape) for k, v in sorted(expected.items())}))


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--out" in args:  # write into another folder (to compare with the committed files)
        HERE = pathlib.Path(args[args.index("--out") + 1]).resolve()
    main(force="--force" in args)
