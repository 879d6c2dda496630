"""The one thread-count policy of the package.

Every multithreaded transform (ducc0 spherical-harmonic and non-uniform transforms) asks
:func:`default_threads`. The environment variable ``MEANFIELD_NUM_THREADS`` overrides the
default; ``MEANFIELD_NUM_THREADS=1`` makes the S^2 transforms bit-reproducible (ducc0's
multithreaded adjoint transforms sum in a thread-dependent order).
"""

from __future__ import annotations

import os

__all__ = ["default_threads", "MAX_THREADS"]

#: Upper bound of the default: the transforms used here stop scaling beyond it.
MAX_THREADS = 8


def default_threads() -> int:
    """Threads for one transform: ``MEANFIELD_NUM_THREADS`` if set, else the usable CPUs (at most 8).

    Examples
    --------
    >>> default_threads() >= 1
    True
    """
    env = os.environ.get("MEANFIELD_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"MEANFIELD_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"MEANFIELD_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))
