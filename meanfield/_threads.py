"""The one thread-count policy of the package.

Every multithreaded transform (ducc0 spherical-harmonic and non-uniform transforms) asks
:func:`default_threads` when it is called. The environment variable ``MEANFIELD_NUM_THREADS``
overrides the default. ducc0's multithreaded *adjoint* transforms (the non-uniform
``adjoint_synthesis_general`` on S^2, the type-1 NUFFT on S^1) add the contributions of the
points in an order that depends on the threads' timing, so the same call can differ in the
last bits from one call to the next; ducc0's spin-0 ``synthesis_general`` does so even on
one thread, in a few per cent of calls (the result follows the addresses of its internal
buffers). Inside :func:`deterministic` (or with ``MEANFIELD_NUM_THREADS=1``) every transform
runs on one thread and spin-0 fields at arbitrary points take a route that does not depend on
memory addresses (:func:`meanfield.sphere._s2.synthesis_at`), so the results are
bit-identical between calls, runs, processes and executors; the study runner runs every task
that way (:func:`meanfield.runner.run_study`, ``deterministic=True``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os

__all__ = ["default_threads", "deterministic", "is_deterministic", "point_threads", "MAX_THREADS", "POINTS_PER_THREAD"]

#: Upper bound of the default: the transforms used here stop scaling beyond it.
MAX_THREADS = 8

#: Non-uniform points per thread below which another thread slows a point transform down: its
#: start-up and the merge of per-thread buffers cost more than the spreading it takes over.
#: Measured with ducc0 0.42 on 2 cores (degrees 6 and 24, ε = 1e-12): spin-0 ``synthesis_general``
#: takes 0.23 ms on one thread and 0.44-0.52 ms on two at 5000 points, about the same at 20000
#: and 1.2 against 1.7 ms at 40000; the adjoint and the 1-D NUFFTs cross over at the same size or later.
POINTS_PER_THREAD = 2**14

# A context variable, not a module flag: tasks running concurrently in threads of one
# process (a threaded Dask worker) each keep their own setting.
_DETERMINISTIC: contextvars.ContextVar[bool] = contextvars.ContextVar("meanfield_deterministic", default=False)


@contextlib.contextmanager
def deterministic(enabled: bool = True):
    """Run the transforms called inside the block on one thread, so that results are bit-reproducible.

    Parameters
    ----------
    enabled : bool
        ``False`` leaves the thread policy as it is (a no-op block), so that callers can
        write ``with deterministic(flag):``.

    Examples
    --------
    >>> from meanfield import default_threads, deterministic
    >>> with deterministic():
    ...     default_threads()
    1
    """
    token = _DETERMINISTIC.set(bool(enabled) or _DETERMINISTIC.get())
    try:
        yield
    finally:
        _DETERMINISTIC.reset(token)


def is_deterministic() -> bool:
    """Whether the caller runs inside :func:`deterministic` (or ``MEANFIELD_NUM_THREADS=1``).

    Examples
    --------
    >>> from meanfield import deterministic, is_deterministic
    >>> with deterministic():
    ...     is_deterministic()
    True
    """
    return _DETERMINISTIC.get() or default_threads() == 1


def _env_threads() -> int | None:
    env = os.environ.get("MEANFIELD_NUM_THREADS", "").strip()
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        raise ValueError(f"MEANFIELD_NUM_THREADS must be a positive integer, got {env!r}") from None
    if n < 1:
        raise ValueError(f"MEANFIELD_NUM_THREADS must be a positive integer, got {env!r}")
    return n


def point_threads(n: int) -> int:
    """Threads for one transform at ``n`` non-uniform points: :func:`default_threads`, but at most
    one per :data:`POINTS_PER_THREAD` points (one thread below that).

    Examples
    --------
    >>> from meanfield import point_threads
    >>> point_threads(1000)
    1
    """
    return max(1, min(default_threads(), int(n) // POINTS_PER_THREAD))


def default_threads() -> int:
    """Threads for one transform: 1 inside :func:`deterministic`, else ``MEANFIELD_NUM_THREADS``
    if set, else the usable CPUs (at most 8).

    Examples
    --------
    >>> from meanfield import default_threads
    >>> default_threads() >= 1
    True
    """
    env = _env_threads()  # checked even inside deterministic(), so that a bad value is always reported
    if _DETERMINISTIC.get():
        return 1
    if env is not None:
        return env
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))
