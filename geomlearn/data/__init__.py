r"""Trajectory data: `TrajectoryData`, built from arrays, a system or a file.

`TrajectoryData.read(path)` reads `.npz` and `.csv` files (see `TrajectoryData.read` for
the formats; the state columns are read by name, `column_layout`) and `write(path)`
writes them; `from_arrays` takes trajectories of different lengths; `from_ase` (and `read`
of a `.traj` file) takes the frames of an ASE trajectory, with the optional dependency
ASE. Pairs and windows are cut within each trajectory, never across two.
"""

from ._columns import ColumnLayout, ColumnWarning, column_layout
from ._files import file_columns, layout_of
from ._trajectories import TrajectoryData

__all__ = ["TrajectoryData", "ColumnLayout", "ColumnWarning", "column_layout", "file_columns",
           "layout_of"]
