"""The former module of the symplectic autoencoder and of the integrators of reduced
codes, which live with the other reductions in `geomlearn.reduction`."""

__all__: list[str] = []

_MOVED = frozenset(
    {"LiftedIntegrator", "PSDLayer", "ReducedIntegrator", "SymplecticAutoencoder",
     "initialize_from_psd"}
)


def __getattr__(name: str):
    # an `ImportError` (not an `AttributeError`) so that `from ... import X` shows it too
    if name in _MOVED:
        raise ImportError(f"geomlearn.models.autoencoder.{name} moved to geomlearn.reduction.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
