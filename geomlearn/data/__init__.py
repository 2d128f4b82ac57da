r"""Trajectory data: `TrajectoryData`, built from arrays, a system or a file.

`TrajectoryData.read(path)` reads `.npz` and `.csv` files (see `TrajectoryData.read` for
the formats) and `write(path)` writes them; `from_arrays` takes trajectories of different
lengths. Pairs and windows are cut within each trajectory, never across two.
"""

from ._trajectories import TrajectoryData

__all__ = ["TrajectoryData"]
