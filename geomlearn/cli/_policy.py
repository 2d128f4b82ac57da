"""`AbstractPolicy`: the root of the small policy objects a `ModelSpec` is built from.

A policy family is an abstract base whose methods are abstract; its implementations are
final. `AbstractPolicy.__init_subclass__` refuses a subclass of a concrete policy, so no
concrete method is ever overridden: to vary one step, a spec takes another policy.
"""

from __future__ import annotations

import abc
import inspect

__all__ = ["AbstractPolicy"]


class AbstractPolicy(abc.ABC):
    """A policy family's root: subclasses of an abstract policy may be declared, subclasses
    of a concrete (final) one raise `TypeError` when the class is created."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for base in cls.__mro__[1:]:
            if base is not AbstractPolicy and issubclass(base, AbstractPolicy) \
                    and not inspect.isabstract(base):
                raise TypeError(f"{base.__name__} is final: pass another policy object "
                                f"instead of subclassing it (defining {cls.__name__})")

