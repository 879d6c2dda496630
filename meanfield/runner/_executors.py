"""Execution back-ends of the study runner: serial, local process pool, Dask.

Each back-end accepts calls with :meth:`submit_many` and hands back finished ones,
in completion order, with :meth:`next_done`. Outcomes are always data: the
value returned by the call, or ``("error", summary, traceback_text)`` if the
call could not be carried out (a worker died, a value could not be pickled).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import traceback
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from meanfield._threads import usable_cpus
from meanfield.runner._worker import init_worker

__all__ = ["SerialBackend", "PoolBackend", "DaskBackend", "import_distributed"]

#: Unlimited number of calls in flight (the Dask scheduler queues them itself).
UNBOUNDED = 1 << 62


def _error_outcome(exc: BaseException, context: str) -> tuple:
    # Only the exception and its causes (e.g. the worker's traceback): the parent's
    # stack says nothing, and an exception shared by several futures grows its own.
    text = "".join(traceback.format_exception(type(exc), exc, None))
    return ("error", f"{context}: {type(exc).__name__}: {exc}", text)


def import_distributed():
    """Import and return ``dask.distributed``, or explain how to install it.

    Returns
    -------
    module
        The ``distributed`` module.

    Raises
    ------
    ImportError
        If Dask's distributed scheduler is not installed; the message names
        ``pip install meanfield[distributed]``.

    Examples
    --------
    >>> distributed = import_distributed()  # doctest: +SKIP
    """
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(
            "executor='dask' needs dask.distributed, which is not installed; "
            "install it with `pip install meanfield[distributed]`"
        ) from exc
    return distributed


class SerialBackend:
    """Run calls one at a time in this process, in submission order.

    Examples
    --------
    >>> backend = SerialBackend()
    >>> backend.submit_many(divmod, [("t", (7, 2))])
    >>> backend.next_done()
    ('t', (3, 1))
    """

    window = 1

    def __init__(self):
        self._queue: deque = deque()

    def submit_many(self, func, calls, /, **shared) -> None:
        """Queue ``func(*args, **shared)`` for each ``(tag, args)`` of ``calls``."""
        self._queue.extend((tag, func, args, shared) for tag, args in calls)

    def next_done(self) -> tuple:
        """Run the oldest queued call and return ``(tag, outcome)``."""
        tag, fn, args, shared = self._queue.popleft()
        return tag, fn(*args, **shared)

    def close(self, cancel: bool = False) -> None:
        """Drop queued calls."""
        self._queue.clear()


class PoolBackend:
    """Run calls on a local ``ProcessPoolExecutor`` of spawned worker processes.

    Spawned (not forked) workers behave the same on every platform and are
    safe next to threads in the parent; they import the task function's
    module, so it must be importable (not defined in ``python -c`` or a
    notebook). If a worker dies (e.g. killed for memory), the calls in flight
    report an error and the pool is replaced for later calls. Workers end
    when the main process dies, even in the middle of a task
    (:func:`meanfield.runner._worker.end_with_parent`).

    Parameters
    ----------
    workers : int
        Number of worker processes.

    Examples
    --------
    >>> backend = PoolBackend(2)  # doctest: +SKIP
    >>> backend.submit_many(divmod, [("t", (7, 2))]); backend.next_done()  # doctest: +SKIP
    ('t', (3, 1))
    """

    def __init__(self, workers: int):
        self.workers = workers
        #: BLAS / OpenMP threads of each worker: the workers' share of the cores
        self.native_threads = max(1, usable_cpus() // workers)
        self.window = 2 * workers
        self._pool: ProcessPoolExecutor | None = None
        self._generation = 0
        self._done: queue.SimpleQueue = queue.SimpleQueue()

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_worker,
                initargs=(os.getpid(), self.native_threads),
            )
            self._generation += 1
        return self._pool

    def _discard_pool(self, generation: int) -> None:
        if self._pool is not None and generation == self._generation:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def submit_many(self, func, calls, /, **shared) -> None:
        """Send ``func(*args, **shared)`` to the pool for each ``(tag, args)`` of ``calls``."""
        for tag, args in calls:
            try:
                future = self._ensure_pool().submit(func, *args, **shared)
            except BrokenProcessPool:
                self._discard_pool(self._generation)
                future = self._ensure_pool().submit(func, *args, **shared)
            generation = self._generation
            future.add_done_callback(lambda f, tag=tag, generation=generation: self._done.put((tag, f, generation)))

    def next_done(self) -> tuple:
        """Wait for any call in flight to finish and return ``(tag, outcome)``."""
        tag, future, generation = self._done.get()
        try:
            return tag, future.result()
        except BrokenProcessPool as exc:
            self._discard_pool(generation)
            return tag, _error_outcome(exc, "a worker process died")
        except Exception as exc:
            return tag, _error_outcome(exc, "the process pool could not run the task")

    def close(self, cancel: bool = False) -> None:
        """Shut the pool down; with ``cancel``, drop queued calls and do not wait."""
        if self._pool is not None:
            self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
            self._pool = None


class DaskBackend:
    """Run calls on a Dask cluster.

    Parameters
    ----------
    scheduler : str, distributed.Client or None
        A scheduler address (``"tcp://host:8786"``), a running client (left
        open), or ``None`` to start a local cluster of ``workers``
        single-threaded worker processes for this run.
    workers : int or None
        Worker processes of the local cluster (ignored with a scheduler).

    Examples
    --------
    >>> backend = DaskBackend("tcp://127.0.0.1:8786", None)  # doctest: +SKIP
    """

    window = UNBOUNDED

    def __init__(self, scheduler, workers: int | None):
        distributed = import_distributed()
        self._cluster = None
        if isinstance(scheduler, distributed.Client):
            self._client, self._own_client = scheduler, False
        elif scheduler is None:
            self._cluster = distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            self._client, self._own_client = distributed.Client(self._cluster), True
        else:
            self._client, self._own_client = distributed.Client(scheduler), True
        # with_results: results travel with the completion notice (one round trip per
        # batch instead of one per future.result() call).
        self._completed = distributed.as_completed(loop=self._client.loop, with_results=True, raise_errors=False)
        self._in_flight: dict = {}

    def submit_many(self, func, calls, /, **shared) -> None:
        """Send ``func(*args, **shared)`` to the cluster for each ``(tag, args)`` of ``calls``, in one batch."""
        if not calls:
            return
        tags = [tag for tag, _ in calls]
        columns = list(zip(*(args for _, args in calls)))
        futures = self._client.map(func, *columns, pure=False, **shared)
        for tag, future in zip(tags, futures):
            self._in_flight[future.key] = (tag, future)
        self._completed.update(futures)

    def next_done(self) -> tuple:
        """Wait for any call in flight to finish and return ``(tag, outcome)``."""
        future, result = next(self._completed)
        tag, _ = self._in_flight.pop(future.key)
        if future.status == "finished":
            return tag, result
        exc = result[1] if isinstance(result, tuple) else result  # (type, exception, traceback) if it erred
        return tag, _error_outcome(exc, "the Dask cluster could not run the task")

    def close(self, cancel: bool = False) -> None:
        """Cancel calls in flight if asked; close the client and cluster this back-end started."""
        if cancel and self._in_flight:
            self._client.cancel([future for _, future in self._in_flight.values()])
        self._in_flight.clear()
        self._completed.clear()
        if self._own_client:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
