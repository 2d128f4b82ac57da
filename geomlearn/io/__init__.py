r"""Saving and loading models: one self-describing file, no pickle.

`save(path, model)` writes **one file** that holds everything needed to rebuild the
model: its class name, its constructor arguments (`model.config()`, with the activation
stored by name), the format version, and its arrays. `load(path)` needs nothing else:

```python
import geomlearn as gl

gl.save("pendulum.geomlearn", model)
model = gl.load("pendulum.geomlearn")
```

**File layout** (format version 1), all integers little-endian:

| bytes            | content                                                        |
|------------------|----------------------------------------------------------------|
| 8                | magic `b"GEOMLRN\0"`                                           |
| 4                | format version (`uint32`)                                      |
| 8                | header length `n` (`uint64`)                                   |
| `n`              | header: UTF-8 JSON (class, config, dtype, section sizes, …)    |
| …                | sections: the arrays as `.npy` records, in pytree-leaf order   |
| 32               | SHA-256 of everything above                                    |

The arrays are written with `equinox.tree_serialise_leaves` (NumPy `.npy` records) and
read back with `allow_pickle=False`; every record is checked against the shape and dtype
of a skeleton rebuilt as `cls(**config, key=...)` (with `equinox.filter_eval_shape`, so
no parameters are initialised). The trailing checksum makes a truncated or corrupted
file fail loudly. Any problem — bad magic, wrong version, checksum mismatch, unknown
class, arrays that do not fit the skeleton, bytes left over — raises
`geomlearn.io.PersistenceError` (a `ValueError`) before anything is
returned, so there is never a half-loaded model. Files are written atomically: to a
temporary file in the same folder, flushed to disk, then renamed over the target.

Training checkpoints (`geomlearn.fit(..., checkpoint=path)`) use the same container with
a second section holding the optimiser state; `load` on a checkpoint returns its model.

**Compatibility.** Every file written by a released version loads in every later one,
or fails with a one-line error naming the version and what to do: the header records
the format version and, per model, the layout of its arrays, and `_migrations` reads
older layouts (the rule and its tests: the "Saved files and compatibility" page). A
file is untrusted input: sizes are checked against the bytes present before anything
is allocated, and nothing is unpickled or executed.

Classes are found by name among `geomlearn.models`; a model class defined elsewhere can
be made loadable with `geomlearn.io.register`.

The modules: `_container` (the file format), `_model_file` (`save`, `load`),
`_migrations` (older layouts), `_checkpoint` (`save_checkpoint`, `load_checkpoint` and
what `fit` needs to resume).
"""

# Besides the public names (`__all__`): what `geomlearn.fit` needs to checkpoint and
# resume, and what the command line records of a model (`encode_config`).
from .._files import check_writable
from ..models._catalogue import register
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
