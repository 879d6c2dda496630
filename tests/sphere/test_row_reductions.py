"""row_sums / row_norms: the numbers of NumPy's row reductions, bit for bit, at every width."""

import numpy as np
import pytest

from meanfield.sphere import row_norms, row_sums


def _rows(k, dtype=np.float64, n=20000, seed=0):
    rng = np.random.default_rng(seed + k)
    # magnitudes over many octaves, so that the order of the additions shows in the last bits
    return (rng.normal(size=(n, k)) * rng.lognormal(sigma=3.0, size=(n, k))).astype(dtype)


@pytest.mark.parametrize("k", range(1, 12))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_same_bits_as_numpy(k, dtype):
    a = _rows(k, dtype)
    s, r = row_sums(a), row_norms(a)
    assert s.dtype == a.sum(axis=1).dtype and r.dtype == np.linalg.norm(a, axis=1).dtype
    assert np.array_equal(s, a.sum(axis=1))
    assert np.array_equal(r, np.linalg.norm(a, axis=1))
    if k > 7:
        return  # NumPy sums 8 or more entries pairwise, and then its own numbers depend on the layout
    # up to 7 entries, any layout gives the numbers of the C-ordered reduction
    f = np.asfortranarray(a)
    assert np.array_equal(row_sums(f), s) and np.array_equal(row_norms(f), r)
    wide = np.repeat(a, 2, axis=1)[:, ::2]
    assert np.array_equal(row_sums(wide), s) and np.array_equal(row_norms(wide), r)


@pytest.mark.parametrize("k", [3, 5, 7])
def test_the_data_tell_the_order_of_the_additions(k):
    """The check above has power: adding the columns in the reverse order changes some rows' bits."""
    a = _rows(k)
    rev = a[:, -1].copy()
    for j in range(k - 2, -1, -1):
        rev += a[:, j]
    assert not np.array_equal(rev, row_sums(a))


def test_other_dtypes_and_empty_arrays():
    i = np.arange(12).reshape(4, 3)
    assert np.array_equal(row_sums(i), i.sum(axis=1)) and row_sums(i).dtype == i.sum(axis=1).dtype
    assert np.array_equal(row_norms(i), np.linalg.norm(i, axis=1))
    assert row_sums(np.zeros((0, 3))).shape == (0,) and row_norms(np.zeros((0, 3))).shape == (0,)
    assert row_sums(np.zeros((4, 0))).tolist() == [0.0] * 4
    assert row_norms(np.zeros((4, 0))).tolist() == [0.0] * 4
