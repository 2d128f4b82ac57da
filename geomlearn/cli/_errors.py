"""The command line's user errors: one line `geomlearn: error: …`, exit status 2."""

from __future__ import annotations

__all__ = ["CLIError", "user"]


class CLIError(Exception):
    """A user error: printed as `geomlearn: error: …`, exit status 2."""


def user(fn, *args, **kwargs):
    """`fn(*args, **kwargs)`, with its `ValueError`/`TypeError`/`OSError` (a user's
    mistake: bad options, data or paths) as a `CLIError`."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError, OSError) as e:
        raise CLIError(str(e)) from None
