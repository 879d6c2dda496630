"""Task functions for tests/runner/test_runner.py and tests/runner/test_store.py.

They live in their own importable module so that spawned pool workers and Dask
workers can import them. Tasks that count their calls write one marker file per
call into the directory given by the fixed study parameter ``markers``.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import numpy as np


def mark(params: dict) -> int:
    """Record one call of the task ``(params["i"], params["replica"])``; return its number of calls so far."""
    directory = Path(params["markers"])
    (directory / f"i={params['i']}-r={params['replica']}@{uuid.uuid4().hex}").touch()
    return calls(directory, params["i"], params["replica"])


def calls(directory, i, replica) -> int:
    """Number of calls so far of the task with grid value ``i`` and replica ``replica``."""
    prefix = f"i={i}-r={replica}"
    return sum(1 for p in Path(directory).iterdir() if p.name.split("@")[0] == prefix)


def noise(params, seed):
    """Mean of 1000 standard normals, one raw draw, and a small array, all from ``seed``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(1000) * params.get("scale", 1.0)
    return {"mean": x.mean(), "first": x[0], "count": x.size, "vec": rng.random(3)}


def slow_noise(params, seed):
    """:func:`noise` after a short sleep, counting its calls."""
    mark(params)
    time.sleep(params["sleep"])
    return noise(params, seed)


def flaky(params, seed):
    """Always fails for ``i == 2``; fails on the first call only for ``i == 3``."""
    n_calls = mark(params)
    if params["i"] == 2:
        raise ValueError(f"boom at i={params['i']}")
    if params["i"] == 3 and n_calls == 1:
        raise RuntimeError("transient failure")
    return {"x": float(np.random.default_rng(seed).random())}


def dies_once(params, seed):
    """Kills its worker process on the first call for ``i == 1`` (like an out-of-memory kill)."""
    n_calls = mark(params)
    if params["i"] == 1 and n_calls == 1:
        os._exit(1)
    time.sleep(0.05)
    return {"x": float(np.random.default_rng(seed).random())}


def mixed_types(params, seed):
    """Results of every supported kind, to check that stored records keep their types."""
    rng = np.random.default_rng(seed)
    return {
        "f64": rng.random(),
        "f32": np.float32(rng.random()),
        "i8": np.int8(-3),
        "u64": np.uint64(2**63 + 5),
        "py_int": 7,
        "flag": bool(rng.random() < 2),
        "label": f"run-{params['replica']}",
        "zero_d": np.array(1.5),
        "nan": float("nan"),
        "grid": rng.random((2, 3)),
        "ints": np.arange(4, dtype=np.int16),
        "spectrum": rng.random(3) + 1j * rng.random(3),
    }


def pause(params, seed):
    """:func:`noise` after sleeping ``params["sleep"]`` seconds (to keep a store open for a while)."""
    time.sleep(params["sleep"])
    return noise(params, seed)


def blas_threads() -> int:
    """The largest thread count of the BLAS libraries loaded in this process."""
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def threads(params, seed):
    """The thread counts the package's transforms and the BLAS products would use inside this task."""
    from meanfield._threads import default_threads, is_deterministic

    return {"threads": default_threads(), "deterministic": is_deterministic(), "blas_threads": blas_threads()}
