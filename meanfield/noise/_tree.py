"""A Brownian motion of any shape evaluable at any time, refinable exactly (Lévy's midpoint construction)."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from .. import _validate
from .._validate import as_float, as_int, check_cost

__all__ = ["BrownianTree", "tree_cost"]

_LATTICE = 2.0**40

#: Seconds per number of a new tree node (normal draw, midpoint, rounding to the lattice):
#: 36–43 ns measured for 0.2–12.6 million numbers per node on a loaded 2-core machine, rounded up.
TREE_SECONDS_PER_DRAW = 6e-8
#: Nodes kept in memory at least (cache floor) plus the working values of one descent.
_MIN_NODES_IN_MEMORY = 16 + 4


def tree_cost(size: int, max_depth: int = 40, cache_bytes: int = 256 * 2**20) -> tuple[float, float]:
    """(seconds, bytes) of a first query of a :class:`BrownianTree` holding ``size`` numbers per value.

    A first query at a non-dyadic time draws ``max_depth`` nodes of ``size`` normals (a
    dyadic time k 2^-j draws only j); memory is the node cache, ``max(cache_bytes, 16 nodes)``,
    plus a few working values.

    Examples
    --------
    >>> secs, mem = tree_cost(3 * 17**2)
    >>> secs < 1 and mem < 2**30
    True
    """
    node = 8.0 * size
    return TREE_SECONDS_PER_DRAW * max_depth * size, max(float(cache_bytes), 16 * node) + 4 * node


def _as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        entries = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    if not entries:
        raise ValueError("shape must have at least one entry, got ()")
    return tuple(as_int(s, f"shape[{i}]", min_value=1) for i, s in enumerate(entries))


def _key_from_seed(seed) -> np.ndarray:
    """Two uint64 words of Philox key from an int, a SeedSequence or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed.integers(0, 2**63, size=2, dtype=np.uint64)
    if isinstance(seed, np.random.SeedSequence):
        return seed.generate_state(2, np.uint64)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"seed must be a non-negative int, a SeedSequence or a Generator, got {seed!r}")
    return np.random.SeedSequence(int(seed)).generate_state(2, np.uint64)


def _largest_size(max_depth: int, cache_bytes: int) -> int:
    lo, hi = 1, 2
    def ok(n):
        secs, mem = tree_cost(n, max_depth, cache_bytes)
        return secs <= _validate.COST_LIMIT_SECONDS and mem <= _validate.COST_LIMIT_BYTES
    while ok(hi) and hi < 2**50:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _quantise(v: np.ndarray) -> np.ndarray:
    return np.rint(v * _LATTICE) / _LATTICE


class BrownianTree:
    """Standard Brownian motion of any shape on [0, t_max], evaluable at any time.

    B(0) = 0, B(t_max) = sqrt(t_max) Z_root, and the value at the midpoint of a dyadic
    interval [u, v] is (B(u) + B(v))/2 + sqrt((v - u)/4) Z_node, where Z_node is drawn
    from a Philox stream keyed by the seed with the node's (level, index) as counter —
    so each node is random-access and independent of the query order. Below depth
    ``max_depth`` (interval t_max 2^-max_depth) the path is linearly interpolated.

    Parameters
    ----------
    shape : tuple of int
        Shape of B(t); every entry >= 1.
    seed : int, SeedSequence or Generator
    t_max : float, > 0 and finite
    max_depth : int, 1..52
    cache_bytes : int, >= 0
        Memory budget for cached node values (LRU); at least 16 nodes are kept.

    Raises
    ------
    ValueError
        A bad shape or t_max, or a size whose first query is estimated (:func:`tree_cost`)
        to exceed the cost limits of :func:`meanfield._validate.check_cost`.

    Examples
    --------
    >>> tree = BrownianTree((3,), seed=1, t_max=1.0)
    >>> a, b = tree.increment(0.0, 0.5), tree.increment(0.5, 1.0)
    >>> bool(np.all(a + b == tree.increment(0.0, 1.0)))
    True
    """

    def __init__(self, shape, seed=0, *, t_max: float = 1.0, max_depth: int = 40, cache_bytes: int = 256 * 2**20):
        self.shape = _as_shape(shape)
        self.size = math.prod(self.shape)
        self.t_max = as_float(t_max, "t_max", min_value=0.0, strict_min=True)
        self.max_depth = as_int(max_depth, "max_depth", min_value=1, max_value=52)
        cache_bytes = as_int(cache_bytes, "cache_bytes", min_value=0)
        secs, mem = tree_cost(self.size, self.max_depth, cache_bytes)
        check_cost("BrownianTree", seconds=secs, memory=mem, parameter="shape", value=self.shape,
                   largest=f"a size (product of shape) of {_largest_size(self.max_depth, cache_bytes)}")
        self._key = _key_from_seed(seed)
        self._cache: OrderedDict = OrderedDict()
        self._cache_max = max(16, cache_bytes // (8 * self.size))
        # recent query times: a stepper asks for t_n twice (end of one step, start of the next)
        self._recent: OrderedDict = OrderedDict()
        self._end = _quantise(math.sqrt(self.t_max) * self._normal(0, 0))
        # the intervals of the last descent, level by level: (k, B at its left end, B at its right
        # end) for [k 2^-j, (k+1) 2^-j] at index j. A stepper's next time lies in one of its
        # deepest intervals, so the next descent resumes there. Replaced, never changed in place
        # (a thread reads one consistent list).
        self._path = [(0, np.zeros(self.size), self._end)]

    def _normal(self, level: int, index: int) -> np.ndarray:
        # Resetting one Philox's counter is 3x cheaper than building a generator per node
        # and gives the same stream as Philox(key, counter=[0, 0, level, index]).
        if not hasattr(self, "_bitgen"):
            self._bitgen = np.random.Philox(key=self._key)
            self._gen = np.random.Generator(self._bitgen)
            self._state = self._bitgen.state
        st = self._state
        st["state"]["counter"][:] = (0, 0, level, index)
        st["buffer_pos"], st["has_uint32"], st["uinteger"] = 4, 0, 0
        self._bitgen.state = st
        return self._gen.standard_normal(self.size)

    def _node(self, level: int, index: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        key = (level, index)
        val = self._cache.get(key)
        if val is not None:
            self._cache.move_to_end(key)
            return val
        half_width = self.t_max * 2.0 ** (-level)  # width of the child intervals
        val = _quantise(0.5 * (left + right) + math.sqrt(half_width / 2.0) * self._normal(level, index))
        self._cache[key] = val
        if len(self._cache) > self._cache_max:
            self._cache.popitem(last=False)
        return val

    def _value_flat(self, t: float) -> np.ndarray:
        val = self._recent.get(t)
        if val is None:
            val = self._descend(t)
            self._recent[t] = val
            if len(self._recent) > 8:
                self._recent.popitem(last=False)
        return val

    def _descend(self, t: float) -> np.ndarray:
        if t <= 0.0:
            return np.zeros(self.size)
        if t >= self.t_max:
            return self._end
        # interval [k 2^-j, (k+1) 2^-j] in units of t_max, with its end values: the deepest interval
        # of the last descent that holds s inside (a descent from the root passes through it with
        # the same k and end values, so the result is the same; the root holds every s in (0, 1))
        s = t / self.t_max
        path = self._path
        j = len(path) - 1
        while j > 0 and not (path[j][0] * 2.0 ** (-j) < s < (path[j][0] + 1) * 2.0 ** (-j)):
            j -= 1
        k, left, right = path[j]
        path = path[: j + 1]
        try:
            while j < self.max_depth:
                j += 1
                mid_index = 2 * k + 1  # the midpoint is node index k at level j, position (2k+1) 2^-j
                mid_pos = mid_index * 2.0 ** (-j)
                mid = self._node(j, k, left, right)
                if s == mid_pos:
                    return mid
                if s < mid_pos:
                    right, k = mid, 2 * k
                else:
                    left, k = mid, 2 * k + 1
                path.append((k, left, right))
        finally:
            self._path = path
        # below the finest level: linear interpolation (a Wong–Zakai error of order t_max 2^-max_depth)
        frac = s * 2.0**j - k
        return _quantise(left + frac * (right - left))

    def _snap(self, t: float) -> float:
        # times within 1e-13 t_max of a dyadic point at the finest level are that point, so
        # that T*l/L computed in floating point lands on the same node as T*(2l)/(2L)
        grid = 2.0**self.max_depth
        scaled = t / self.t_max * grid
        r = round(scaled)
        return r / grid * self.t_max if abs(scaled - r) <= 1e-13 * grid else t

    def check_time(self, t, name: str = "t") -> float:
        t = as_float(t, name)
        tol = 1e-12 * self.t_max
        if t < -tol or t > self.t_max + tol:
            raise ValueError(f"{name} = {t} is outside the noise path's time window [0, {self.t_max}]; "
                             "build the noise with a larger t_max")
        return min(max(t, 0.0), self.t_max)

    def value(self, t: float) -> np.ndarray:
        """B(t), shape ``self.shape``."""
        t = self._snap(self.check_time(t))
        return self._value_flat(t).reshape(self.shape)

    def increment(self, t0: float, t1: float) -> np.ndarray:
        """B(t1) - B(t0), shape ``self.shape`` (t0 <= t1)."""
        t0, t1 = self.check_time(t0, "t0"), self.check_time(t1, "t1")
        if t1 < t0:
            raise ValueError(f"t1 must be >= t0, got t0 = {t0}, t1 = {t1}")
        return (self._value_flat(self._snap(t1)) - self._value_flat(self._snap(t0))).reshape(self.shape)
