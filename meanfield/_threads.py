"""The one thread-count policy of the package.

Every multithreaded transform (ducc0 spherical-harmonic and non-uniform transforms) asks
:func:`default_threads` when it is called. The environment variable ``MEANFIELD_NUM_THREADS``
overrides the default. ducc0's multithreaded *adjoint* transforms (the non-uniform
``adjoint_synthesis_general`` on S^2, the type-1 NUFFT on S^1) add the contributions of the
points in an order that depends on the threads' timing, so the same call can differ in the
last bits from one call to the next; ducc0's spin-0 Legendre stage (``alm2leg``, ``leg2alm`` and
the spin-0 grid and point transforms built on it) does so even on one thread, for some calls
(the result follows the addresses of its internal buffers). Inside :func:`deterministic` (or
with ``MEANFIELD_NUM_THREADS=1``) every transform runs on one thread and no spin-0 transform
reaches that stage: the grid transforms take :mod:`meanfield.sphere._legendre`, spin-0 fields
at arbitrary points and their adjoint the torus route (:func:`meanfield.sphere._s2.synthesis_at`,
:func:`meanfield.sphere._s2.adjoint_at`), so the results are bit-identical between calls, runs,
processes and executors; the study runner runs every task
that way (:func:`meanfield.runner.run_study`, ``deterministic=True``). Elementwise work over
many points is split into row blocks over the same threads by :func:`parallel_rows`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["default_threads", "deterministic", "is_deterministic", "point_threads", "grid_threads", "parallel_rows",
           "MAX_THREADS", "POINTS_PER_THREAD", "GRID_SERIAL_WORK", "RING_FFT_SERIAL_WORK", "ring_fft_threads"]

#: Upper bound of the default: the transforms used here stop scaling beyond it.
MAX_THREADS = 8

#: Work per thread below which another thread slows a point transform down: its start-up and the
#: merge of per-thread buffers cost more than it takes over. The work of a transform at n points
#: to degree L is counted as n + 2 (L + 1)² (the spreading of the points, and the 2-D FFT and
#: Legendre steps on ducc0's oversampled grid, which cost about as much as 2 (L + 1)² points).
#: Measured with ducc0 0.42 on 2 shared cores, ε = 1e-12, spin 0, one thread against two:
#: at 5000 points one thread wins at every degree 6-128 (synthesis 0.23 against 0.41 ms at
#: degree 6); at 20000 points one thread wins the adjoint at degrees 6 and 24 (1.24 against
#: 1.43 ms) and two threads win it at degree 64 (1.15 against 1.36 ms); at 80000 points two
#: threads win the synthesis at every degree (2.1 against 3.3 ms at degree 6). Inside a solver's
#: step, where each transform follows other work, one thread wins further: the particle step with
#: noise (degree 6) and attention (degree 9 at β = 1) took 6.66 against 8.68 ms per step at 30000
#: tokens, 9.64 against 10.12 ms at 40000 and 11.27 against 11.34 ms at 50000 (medians of 8
#: alternations); the push-forward SPDE step at lmax 64 (19600 nodes) 2.26-2.33 against 2.36-2.55 ms.
POINTS_PER_THREAD = 25000

#: Maps times grid nodes below which a transform on a Gauss–Legendre grid runs on one thread. Waking
#: a second thread costs about 50 us when the call follows other work, as inside a solver's step.
#: Measured with ducc0 0.42 on 2 shared cores, median of calls each after 0.1 ms of NumPy work, one
#: thread against two: at lmax 64 (Q = 19600) the synthesis 101 against 153 us, the analysis 102
#: against 153 us, the spin-1 divergence (2 maps) 192 against 223 us; at lmax 96 (Q = 43800) the
#: synthesis 215 against 212 us and the divergence 417 against 408 us; at lmax 128 two threads win
#: every call (the synthesis 404 against 342 us, three maps from ring coefficients 539 against 388 us).
#: The exponential SPDE step at lmax 64 took 0.96 ms with two threads for every transform, 0.84 ms
#: with this bound at 49152 (three maps from ring coefficients still on two threads) and 0.78 ms
#: at 65536, as with one thread for all; at lmax 96, 104 and 112 this bound was as fast as two threads for
#: every transform (1.52-1.59, 1.62-1.71 and 1.96-2.01 ms). One map stays on one thread up to lmax 118.
GRID_SERIAL_WORK = 1 << 16

#: Maps times grid nodes below which the ring sums of a Gauss–Legendre grid as one batched real
#: FFT (:class:`~meanfield.sphere._ring_fft.RingFFT`) run on one thread. Measured inside SPDE steps
#: with ducc0 0.42 on 2 shared cores (minima of 5-6 alternating solves), one thread against the
#: threads of :data:`GRID_SERIAL_WORK`: the push-forward step at lmax 64 (four maps, 78400) 2.04
#: against 2.27 ms and at lmax 128 (310400) 5.70 against 5.62 ms; the exponential step at lmax
#: 96 1.26 against 1.48 ms and at lmax 128 2.05 against 2.16 ms, but at lmax 256 (three maps,
#: 926400) 8.0 against 6.6 ms.
RING_FFT_SERIAL_WORK = 1 << 19

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


def point_threads(n: int, lmax: int = 0) -> int:
    """Threads for one transform at ``n`` non-uniform points to degree ``lmax``: :func:`default_threads`,
    but at most one per :data:`POINTS_PER_THREAD` units of work n + 2 (lmax + 1)² (one thread below that).

    Examples
    --------
    >>> from meanfield import point_threads
    >>> point_threads(1000)
    1
    """
    blocks = (int(n) + 2 * (int(lmax) + 1) ** 2) // POINTS_PER_THREAD
    if blocks < 2:  # one thread whatever the setting: skip the affinity query (small transforms run often)
        return 1
    return min(default_threads(), blocks)


def grid_threads(work: int) -> int:
    """Threads for one transform on a quadrature grid: :func:`default_threads` once its work, maps x
    grid nodes, reaches :data:`GRID_SERIAL_WORK`, else one.

    Examples
    --------
    >>> from meanfield import grid_threads
    >>> grid_threads(19600)  # one map at lmax 64 on S^2 (98 x 200 nodes)
    1
    """
    return default_threads() if int(work) >= GRID_SERIAL_WORK else 1


def ring_fft_threads(work: int) -> int:
    """Threads for the batched ring FFT of a grid transform: :func:`default_threads` once its work,
    maps x grid nodes, reaches :data:`RING_FFT_SERIAL_WORK`, else one.

    Examples
    --------
    >>> from meanfield._threads import ring_fft_threads
    >>> ring_fft_threads(4 * 77600)  # four maps at lmax 128 on S^2 (194 x 400 nodes)
    1
    """
    return default_threads() if int(work) >= RING_FFT_SERIAL_WORK else 1


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
    return max(1, min(usable_cpus(), MAX_THREADS))


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one).

    Examples
    --------
    >>> from meanfield._threads import usable_cpus
    >>> usable_cpus() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


#: Rows from which :func:`parallel_rows` splits the elementwise work over threads.
PARALLEL_MIN_ROWS = 1 << 15

#: Rows handed to one call of an elementwise kernel by :func:`parallel_rows`: its dozen temporaries
#: then stay in the core's cache instead of streaming through memory (measured 1.9x faster at N = 10^6
#: than whole arrays, with 8192 rows). Each block also pays every NumPy call of the kernel once (about a
#: microsecond each, a few hundred calls for a characteristics step), and on the 2 cores measured here
#: (2 MB of L2 cache each, a large shared L3) 32768 rows won over 8192 and 16384 in every solver,
#: alternating in one process (best of 3): the characteristics step at 10^5 nodes 0.368 against 0.417
#: us per node, the particle step at 10^5 tokens 13.95-14.18 against 15.32-15.50 ms, the exponential
#: SPDE step on S^2 0.767 against 0.837 ms at lmax 64 and 8.31-8.65 against 9.13-9.30 ms at lmax 256, the
#: push-forward 2.19 against 2.26 ms at lmax 64. 65536 rows were no faster (the characteristics step
#: 0.382 us).
CACHE_ROWS = 32768

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_SPLIT_LOCK = threading.Lock()  # held while rows are split over the pool (see parallel_rows)
_BLAS = None  # threadpoolctl's controller of the loaded BLAS libraries, made on first use


def _forget_pool() -> None:
    # a forked child inherits the pool object but not its threads (work submitted to it would
    # wait for ever) and possibly a held lock: it starts afresh
    global _POOL, _POOL_SIZE, _SPLIT_LOCK
    _POOL, _POOL_SIZE, _SPLIT_LOCK = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_pool)


def _blocked(fn, a: int, b: int, block: int) -> None:
    for s in range(a, b, block):
        fn(s, min(b, s + block))


def parallel_rows(fn, n: int, *, block: int | None = None, min_rows: int | None = None) -> None:
    """Call ``fn(start, stop)`` on contiguous row ranges of at most ``block`` rows covering ``range(n)``,
    split over :func:`default_threads` threads from ``min_rows`` rows.

    For work over points that releases the GIL (NumPy ufuncs and products): ``fn`` must write
    only the rows it is given, and then the results are the same bits on any number of threads.
    While the rows are split over threads, the BLAS libraries run on one thread: their threads
    would share the cores with these and spin while they wait. One call is split at a time; a
    call made meanwhile (from another thread, or from inside ``fn``) runs its rows in its own
    thread.

    Parameters
    ----------
    fn : callable
        ``fn(start, stop)``.
    n : int
        Number of rows.
    block : int, optional
        Rows per call of ``fn`` (default :data:`CACHE_ROWS`: the temporaries of an elementwise
        kernel then stay in the caches, and its NumPy calls are paid once per block).
    min_rows : int, optional
        Rows from which the work is split over threads (default :data:`PARALLEL_MIN_ROWS`).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield._threads import parallel_rows
    >>> x = np.arange(5.0)
    >>> def double(s, e):
    ...     x[s:e] *= 2
    >>> parallel_rows(double, 5)
    >>> x.tolist()
    [0.0, 2.0, 4.0, 6.0, 8.0]
    """
    block = CACHE_ROWS if block is None else max(1, int(block))
    k = default_threads()
    # one split at a time: a call made while another one runs (from another thread, or from
    # inside a kernel) takes its rows in its own thread, so the BLAS limits below are set and
    # restored in pairs and no kernel waits for a pool thread that waits for it
    if n < (PARALLEL_MIN_ROWS if min_rows is None else min_rows) or k < 2 \
            or not _SPLIT_LOCK.acquire(blocking=False):
        _blocked(fn, 0, n, block)
        return
    try:
        _split(fn, n, block, k)
    finally:
        _SPLIT_LOCK.release()


def _split(fn, n: int, block: int, k: int) -> None:
    global _POOL, _POOL_SIZE
    if _POOL is None or _POOL_SIZE != k:
        if _POOL is not None:
            _POOL.shutdown(wait=False)
        _POOL = ThreadPoolExecutor(max_workers=k)
        _POOL_SIZE = k
    bounds = [n * i // k for i in range(k + 1)]
    # measured on 2 cores, default BLAS threads against one: three noise fields of degree 6 with
    # gradients at 10^5 points (small products of the polynomial tables) 13.3 against 9.5 ms; the
    # direct attention sum of 8192 nodes on S^3 (large products) 101 against 72 ms
    with one_blas_thread():
        futures = [_POOL.submit(_blocked, fn, a, b, block) for a, b in zip(bounds[1:-1], bounds[2:])]
        _blocked(fn, bounds[0], bounds[1], block)
        for f in futures:
            f.result()


def one_blas_thread():
    """Context: the loaded BLAS libraries on one thread for the block, then as before (about 7 us).

    For products that sit between threaded transforms (small matrix products, or a matrix-vector
    product over the nodes of a grid): OpenBLAS runs products above a size threshold on its
    threads, which then spin for about 0.1 s on the cores the next ducc0 transform wants (measured
    on 2 cores: 1.3-1.6x slower transforms after
    threaded BLAS calls; ducc0's attention transforms at 10^6 points 140 against 86 ms when they
    alternated with the exact transforms' threaded products); and a product's last bits can
    depend on the number of threads (see :func:`native_threads`). Process-wide, like
    :func:`native_threads`.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield._threads import one_blas_thread
    >>> with one_blas_thread():
    ...     float((np.ones((300, 300)) @ np.ones(300))[0])
    300.0
    """
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


#: Environment variables read by native thread pools when their library is loaded.
_NATIVE_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def limit_native_threads(n: int) -> None:
    """Cap the thread pools of native libraries (BLAS, OpenMP) in this process at ``n``, for good.

    For worker processes: OpenBLAS starts as many threads as the process may use CPUs, and
    its threads wait for one another by spinning, so k workers on c cores each running c BLAS
    threads share the cores with k c spinning threads. Measured on 2 shared cores: the
    characteristics solve of the chaos study's long horizons (4608 and 9216 nodes, 256 steps,
    whose small matrix products go through BLAS) took 0.77 and 1.46 s in one process,
    3.9-5.0 s each in two concurrent processes, and 1.0 and 1.6 s in two processes with one
    BLAS thread each. The libraries already loaded are capped through ``threadpoolctl``; the
    ``*_NUM_THREADS`` environment variables cap those loaded later.
    """
    from threadpoolctl import threadpool_limits

    n = max(1, int(n))
    for var in _NATIVE_THREAD_VARS:
        os.environ[var] = str(n)
    threadpool_limits(limits=n)


@contextlib.contextmanager
def native_threads(n: int):
    """Run the block with the loaded native thread pools (BLAS, OpenMP) capped at ``n``, then restore them.

    Process-wide, not per context: the study runner's tasks use it on one thread
    (``run_task``). A BLAS product can differ in its last bits between thread counts (a
    200 x 300 by 300 x 400 product with OpenBLAS 0.3.31 on one and on two threads, measured),
    so one thread in every back-end is part of making a task's numbers independent of where it runs.
    NumPy's and SciPy's BLAS (those of the package's products and solves) are loaded first, so
    that they are capped even when the block is the first to use them; a library first loaded
    inside the block keeps its own pool.

    Examples
    --------
    >>> from meanfield._threads import native_threads
    >>> with native_threads(1):
    ...     pass
    """
    import numpy  # noqa: F401  (loads the BLAS libraries before they are capped)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=max(1, int(n))):
        yield
