"""The spin-0 Legendre stage of the S^2 grid transforms, with the same bits at every call.

A grid transform of a spin-0 field is a Legendre stage per ring θ_j and order m,

    leg[c, j, m] = Σ_{l >= m} a_lm λ_lm(θ_j)        (synthesis, :func:`legendre_synthesis`),
    a_lm = Σ_j leg[c, j, m] λ_lm(θ_j)                (its adjoint, :func:`legendre_adjoint`),

then one FFT per ring (λ_lm(θ) = Y_l^m(θ, 0), ducc0's normalised associated Legendre functions,
Condon–Shortley phase included). Outside :func:`meanfield.deterministic` both are ducc0's
``alm2leg`` and ``leg2alm`` with spin 0. ducc0 0.42 fills the recursion coefficients of its
spin-0 stage (``Ylmgen::prepare``) in a loop that the compiler vectorised in two versions, chosen
at run time by whether three freshly allocated buffers may overlap; the two round differently
(fused multiply-adds), so the same call gives other last bits for some orders depending on where
the heap places those buffers: a study's table could then differ between runs, processes and
executors. Its spin-1 stage fills them by a recurrence, which is not vectorised. Measured with
ducc0 0.42's sources rebuilt (-O3 -ffast-math, AVX-512), 20000 calls each with the heap churned
between them: ``alm2leg`` spin 0 differed from the first call in 939 calls at degree 16 and 254
at 64, ``leg2alm`` spin 0 in 939 at 16 and 304 at 64, neither at 128; spin 1 (``alm2leg`` and
``leg2alm``, degrees 6-256) in none. With the installed wheel, 20000 calls with the C heap
churned between them (blocks of 1-600 bytes, 50 live): spin-0 ``alm2leg`` differed in 1483 at
degree 12 and 130 at 16, spin-0 ``leg2alm`` in 1483 and 95; ``alm2leg_deriv1`` and ``leg2alm``
with spin 1, the stage used below, in none. How often it shows depends on the heap's state (with
the package imported first, the same loop showed none).

Inside :func:`meanfield.deterministic` no call reaches that stage. The orders m >= m0 come from
the spin-1 stage: the longitude component of the gradient of f has ring coefficients
(i m / sin θ_j) leg[j, m] (``alm2leg_deriv1``), so

    leg[j, m] = (-i sin θ_j / m) · (ring coefficients of (1/sin θ) ∂_φ f)[j, m],    m >= m0,

and the adjoint is ``leg2alm`` with ``mode='DERIV1'`` of the rings' (i sin θ_j / m) leg[j, m] in
the longitude component. That component is a difference of the spin-1 and spin-(-1) functions,
so the route loses about l sin θ / m units in the last place: the orders below
m0 = max(1, ceil(lmax / 16)) (:func:`low_orders`) are products with a kept table of λ_lm at the
rings instead, computed in long double and rounded. Measured against long-double sums
(random coefficients, Gauss–Legendre rings; the largest error over the rings and orders relative
to the largest ring coefficient), the route and ducc0's spin-0 stage: degree 16 5.1e-15 and
3.5e-15, 32 4.1e-15 and 1.3e-14, 64 1.5e-14 and 1.3e-14, 128 8.8e-15 and 3.2e-14, 256 2.7e-14 and
4.2e-13. The spin-1 stage costs about twice the spin-0 one: on one thread the route took 2.3-2.7x
``alm2leg``'s time at degrees 16-128 and 3.7x at 256 (``leg2alm``: 2.2-2.6x, 3.2x), 3.5x at
degree 6 where the calls' fixed costs dominate. A synthesis with gradients
(:meth:`S2Grid.synth_grad`, :meth:`S2Grid.synth_grad_times`) takes the values from the
gradient's stage (:func:`legs_from_deriv1`), with no transform of its own.
"""

from __future__ import annotations

import functools

import ducc0
import numpy as np

from .._threads import is_deterministic
from ._s2 import _order_starts, _padded_adjoint, _padded_index, _padded_products, _sh_fill

__all__ = ["legendre_synthesis", "legendre_adjoint", "legs_from_deriv1"]


#: The orders m < ceil(lmax / LOW_ORDER_RATIO) (at least m = 0) take the kept table; above, the
#: spin-1 route's loss, about l sin θ / m units in the last place, stays below this ratio.
LOW_ORDER_RATIO = 16


def low_orders(lmax: int) -> int:
    """How many orders, m = 0..m0 - 1, take the kept table: m0 = max(1, ceil(lmax / LOW_ORDER_RATIO))."""
    return max(1, -(-int(lmax) // LOW_ORDER_RATIO))


def _low_order_values(lmax: int, m0: int, theta: np.ndarray) -> np.ndarray:
    """λ_{m+k, m}(θ_j) for m < m0, shape (m0, n_θ, lmax + 1) at [m, j, k] (zero for m + k > lmax).

    The recursion of :func:`meanfield.sphere._s2._sh_fill` (sectoral terms, then three terms in l)
    in NumPy's long double (64-bit significand on x86-64), then rounded: the entries are the
    float64 values to about one unit in the last place, where the float64 recursion drifts by
    about l units.
    """
    th = np.asarray(theta, dtype=np.longdouble)
    out = np.zeros((m0 * (lmax + 1), th.size), dtype=np.longdouble)
    _sh_fill(lmax, np.cos(th), np.sin(th), out, lambda ell, m: m * (lmax + 1) + ell - m, mmax=m0 - 1)
    return out.astype(np.float64).reshape(m0, lmax + 1, th.size).transpose(0, 2, 1).copy()


@functools.lru_cache(maxsize=8)  # 15.7 MB at degree 256 (386 rings), 2.4 MB at 128
def _tables_for(lmax: int, theta_bytes: bytes) -> tuple:
    """The kept arrays of the rings θ (given by their bytes) at ``lmax`` (read-only: the cache hands
    the same arrays to every caller): m0; the low orders' table (m0, n_θ, lmax + 1) and its rows'
    positions m (lmax + 1) + k in ducc0's packing, shape (n_low,); the factors -i sin θ_j / m and
    their conjugates, shape (n_θ, lmax + 1 - m0) complex; ``mval`` and ``mstart`` of the orders
    m0..lmax for ducc0."""
    theta = np.frombuffer(theta_bytes, dtype=np.float64)
    m0 = min(low_orders(lmax), lmax + 1)
    table = _low_order_values(lmax, m0, theta)
    rows = _padded_index(lmax, m0)
    high = np.arange(m0, lmax + 1)
    factor = -1j * np.sin(theta)[:, None] / high
    adjoint = np.conj(factor)
    mval, mstart = high.astype(np.uintp), (_order_starts(lmax)[m0 : lmax + 1] - high).astype(np.uintp)
    for arr in (table, rows, factor, adjoint, mval, mstart):
        arr.flags.writeable = False
    return m0, table, rows, factor, adjoint, mval, mstart


def _tables(lmax: int, theta: np.ndarray) -> tuple:
    return _tables_for(int(lmax), np.ascontiguousarray(theta, dtype=np.float64).tobytes())


def _low_synthesis(alm: np.ndarray, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Σ_l a_lm λ_lm(θ_j) for the table's orders m < m0: ``alm`` (n_alm,) complex, result (n_θ, m0) complex."""
    a = np.ascontiguousarray(alm[: rows.size]).view(np.float64).reshape(-1, 2)
    return _padded_products(table, rows, a).view(np.complex128)[..., 0].T


def legs_from_deriv1(alm: np.ndarray, lmax: int, theta: np.ndarray, grad_legs: np.ndarray,
                     out: np.ndarray) -> np.ndarray:
    """The spin-0 ring coefficients of one field from its gradient's, ``alm2leg_deriv1``'s output.

    ``alm`` (n_alm(lmax),) or (1, n_alm(lmax)) complex, ``grad_legs`` (2, n_θ, lmax + 1) as
    ``alm2leg_deriv1`` writes them (∂_θ f, then (1/sin θ) ∂_φ f), ``out`` (n_θ, lmax + 1) complex,
    written and returned: out[j, m] = -i sin θ_j / m · grad_legs[1, j, m] for m >= m0 and
    Σ_l a_lm λ_lm(θ_j) from the kept table below (module docstring).
    """
    m0, table, rows, factor = _tables(lmax, theta)[:4]
    alm = np.asarray(alm, dtype=np.complex128).reshape(-1)
    out[:, :m0] = _low_synthesis(alm, table, rows)
    if m0 <= lmax:
        np.multiply(grad_legs[1, :, m0:], factor, out=out[:, m0:])
    return out


def legendre_synthesis(alm: np.ndarray, lmax: int, theta: np.ndarray, *, nthreads: int,
                       out: np.ndarray | None = None) -> np.ndarray:
    """Ring coefficients of spin-0 fields: leg[c, j, m] = Σ_l a_lm λ_lm(θ_j) (ducc0's ``alm2leg``).

    ``alm`` (ncomp, n_alm(lmax)) complex in ducc0's packing, ``theta`` (n_θ,) colatitudes in
    [0, π]; result (ncomp, n_θ, lmax + 1) complex (into ``out`` when given). Inside
    :func:`meanfield.deterministic` by the spin-1 stage and a table (module docstring), with the
    same bits at every call.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import deterministic
    >>> from meanfield.sphere._legendre import legendre_synthesis
    >>> alm = np.array([[0.0, 1.0, 0.0]], dtype=complex)       # a_10 = 1: λ_10 = sqrt(3/4π) cos θ
    >>> theta = np.array([0.3, 1.2])
    >>> with deterministic():
    ...     leg = legendre_synthesis(alm, 1, theta, nthreads=1)
    >>> bool(np.allclose(leg[0, :, 0], np.sqrt(3 / (4 * np.pi)) * np.cos(theta)) and np.allclose(leg[0, :, 1], 0))
    True
    """
    if not is_deterministic():
        return ducc0.sht.experimental.alm2leg(alm=alm, lmax=lmax, theta=theta, spin=0, nthreads=nthreads, leg=out)
    m0, table, rows, factor, _, mval, mstart = _tables(lmax, theta)
    alm = np.asarray(alm, dtype=np.complex128)
    if out is None:
        out = np.empty((alm.shape[0], theta.size, lmax + 1), dtype=np.complex128)
    grad = np.empty((2, theta.size, lmax + 1 - m0), dtype=np.complex128)
    for c in range(alm.shape[0]):
        out[c, :, :m0] = _low_synthesis(alm[c], table, rows)
        if m0 <= lmax:
            ducc0.sht.experimental.alm2leg_deriv1(alm=alm[c : c + 1], lmax=lmax, theta=theta, mval=mval,
                                                  mstart=mstart, nthreads=1, leg=grad)
            np.multiply(grad[1], factor, out=out[c, :, m0:])
    return out


def legendre_adjoint(leg: np.ndarray, lmax: int, theta: np.ndarray, *, nthreads: int) -> np.ndarray:
    """The adjoint of :func:`legendre_synthesis`: a_lm = Σ_j leg[c, j, m] λ_lm(θ_j) (ducc0's ``leg2alm``).

    ``leg`` (ncomp, n_θ, lmax + 1) complex, ``theta`` (n_θ,) colatitudes in [0, π]; result
    (ncomp, n_alm(lmax)) complex in ducc0's packing. Inside :func:`meanfield.deterministic` by the
    spin-1 stage and a table (module docstring), with the same bits at every call.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import deterministic
    >>> from meanfield.sphere._legendre import legendre_adjoint
    >>> theta = np.array([0.3, 1.2])
    >>> leg = np.zeros((1, 2, 2), dtype=complex); leg[0, :, 0] = 1.0
    >>> with deterministic():
    ...     a = legendre_adjoint(leg, 1, theta, nthreads=1)
    >>> bool(np.allclose(a[0, 1], np.sqrt(3 / (4 * np.pi)) * np.cos(theta).sum()))
    True
    """
    if not is_deterministic():
        return ducc0.sht.experimental.leg2alm(leg=leg, lmax=lmax, theta=theta, spin=0, nthreads=nthreads)
    m0, table, rows, _, adjoint, mval, mstart = _tables(lmax, theta)
    leg = np.asarray(leg, dtype=np.complex128)
    ncomp = leg.shape[0]
    out = np.empty((ncomp, (lmax + 1) * (lmax + 2) // 2), dtype=np.complex128)
    h = np.zeros((2, theta.size, lmax + 1 - m0), dtype=np.complex128)
    for c in range(ncomp):
        if m0 <= lmax:
            np.multiply(leg[c, :, m0:], adjoint, out=h[1])
            ducc0.sht.experimental.leg2alm(leg=h, lmax=lmax, theta=theta, spin=1, nthreads=1, mode="DERIV1",
                                           mval=mval, mstart=mstart, alm=out[c : c + 1])
        g = np.ascontiguousarray(leg[c, :, :m0].T).view(np.float64).reshape(m0, theta.size, 2)
        out[c, : rows.size] = _padded_adjoint(table, rows, g).view(np.complex128)[:, 0]
    return out
