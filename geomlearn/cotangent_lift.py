"""The manifold cotangent lift, under its former name: it lives in `geomlearn.reduction`
(`geomlearn.reduction.ManifoldCotangentLift`, `geomlearn.reduction.manifold_cotangent_lift`)."""

from .reduction import ManifoldCotangentLift, manifold_cotangent_lift

__all__ = ["ManifoldCotangentLift", "manifold_cotangent_lift"]
