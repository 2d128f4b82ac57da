r"""Saving and loading models: one self-describing file, no pickle.

`save(path, model)` writes **one file** with everything needed to rebuild the model: its
class name, its constructor arguments (`model.config()`, activations stored by name, a
system of `geomlearn.systems` by its class name and arguments), the format version and
its arrays. `load(path)` needs nothing else:

```python
gl.save("pendulum.geomlearn", model)
model = gl.load("pendulum.geomlearn")
```

**File layout** (format version 1), all integers little-endian:

| bytes | content |
|---|---|
| 8 | magic `b"GEOMLRN\0"` |
| 4 | format version (`uint32`) |
| 8 | header length `n` (`uint64`) |
| `n` | header: UTF-8 JSON (class, config, dtype, section sizes, …) |
| … | sections: the arrays as `.npy` records, in pytree-leaf order |
| 32 | SHA-256 of everything above |

The arrays are written with `equinox.tree_serialise_leaves` and read back with
`allow_pickle=False`, each checked against the shape and dtype of a skeleton
`cls(**config, key=...)` rebuilt with `equinox.filter_eval_shape` (nothing initialised).
Any problem (bad magic, wrong version, checksum mismatch, unknown class, arrays that do
not fit, bytes left over) raises `PersistenceError` (a `ValueError`) before anything is
returned. Files are written atomically: a temporary file, flushed, renamed over the
target. Training checkpoints add a section holding the optimiser state.

**Compatibility.** Every file a released version wrote loads in every later one, or
fails with a one-line error naming the version: the header records the format version
and each model's array layout, and `_migrations` reads older layouts. A file is untrusted
input: sizes are checked against the bytes present before anything is allocated, and
nothing is unpickled or executed. Classes are found by name in the registry of
`geomlearn.models._base`, which every model class of the package joins when it is
defined; a class defined elsewhere is made loadable with `geomlearn.io.register`.
"""

# The modules: `_container` (the file format), `_model_file` (`save`, `load`),
# `_migrations` (older layouts), `_checkpoint` (`save_checkpoint`, `load_checkpoint` and
# what `fit` needs to resume).
# Besides the public names (`__all__`): what `geomlearn.fit` needs to checkpoint and
# resume, and what the command line records of a model (`encode_config`).
from .._files import check_writable
from ..models._base import register
from ._checkpoint import (
    RESUME_FIELDS,
    CheckpointInUseError,
    checkpoint_header,
    checkpoint_lock,
    fingerprint,
    load_checkpoint,
    raw_key,
    restore_key,
    save_checkpoint,
)
from ._container import FORMAT_VERSION, MAGIC, PersistenceError
from ._container import read_container as _read_container
from ._model_file import encode_config, load, save

__all__ = ["save", "load", "save_checkpoint", "load_checkpoint", "PersistenceError", "register"]
