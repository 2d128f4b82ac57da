"""Layers: single-sample `eqx.Module`s that preserve (or deliberately do not preserve) structure."""

from .positional import PositionalEncoding, positional_encoding

__all__ = ["PositionalEncoding", "positional_encoding"]
