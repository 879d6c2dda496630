"""The one primitive for child seeds: extending a seed's spawn key.

Every random stream of the package is a :class:`numpy.random.SeedSequence` derived from a
root seed by appending words to its spawn key (the entropy and pool size stay the
parent's). :func:`extend_seed` is that primitive; :func:`child_seeds` is the stateless form
of ``SeedSequence.spawn`` (the same children, but independent of how many children the
parent has spawned before); the runner's keyed :func:`meanfield.runner.child_seed` hashes
plain-data keys into words and extends with them. A child depends only on its parent and
its own words, never on call order, so results do not depend on chunking or workers.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["extend_seed", "child_seeds"]


def _parts(parent) -> tuple[int, tuple[int, ...], int]:
    if isinstance(parent, np.random.SeedSequence):
        return parent.entropy, tuple(parent.spawn_key), parent.pool_size
    if isinstance(parent, numbers.Integral) and not isinstance(parent, bool) and int(parent) >= 0:
        return int(parent), (), 4
    raise TypeError(f"parent must be a numpy.random.SeedSequence or an int >= 0, got {parent!r}")


def extend_seed(parent, *words: int) -> np.random.SeedSequence:
    """The child of ``parent`` whose spawn key is the parent's followed by ``words`` (ints >= 0).

    Examples
    --------
    >>> extend_seed(np.random.SeedSequence(3), 5, 1).spawn_key
    (5, 1)
    """
    entropy, prefix, pool_size = _parts(parent)
    for w in words:
        if isinstance(w, bool) or not isinstance(w, numbers.Integral) or int(w) < 0:
            raise TypeError(f"seed words must be integers >= 0, got {w!r}")
    return np.random.SeedSequence(entropy, spawn_key=prefix + tuple(int(w) for w in words), pool_size=pool_size)


def child_seeds(parent, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent children ``extend_seed(parent, i)``, i = 0..n-1.

    Equal to ``parent.spawn(n)`` on a parent that has not spawned before, without its
    hidden counter (a second ``spawn`` call returns different children; this does not).

    Examples
    --------
    >>> a = child_seeds(np.random.SeedSequence(7), 2)
    >>> b = np.random.SeedSequence(7).spawn(2)
    >>> [x.spawn_key for x in a] == [x.spawn_key for x in b]
    True
    """
    return [extend_seed(parent, i) for i in range(int(n))]
