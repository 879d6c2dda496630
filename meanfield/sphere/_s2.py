"""Real and complex spherical harmonics on S^2 and the ducc0 (healpy) coefficient packing.

Real orthonormal spherical harmonics are built from the complex ones Y_l^m of
ducc0/scipy (Condon–Shortley phase included): ``R_{l,0} = Y_l^0``,
``R_{l,m} = sqrt(2) Re Y_l^m`` and ``R_{l,-m} = sqrt(2) Im Y_l^m`` for m > 0; the index of
(l, m) is ``l**2 + l + m``. A real expansion f = Σ b_lm R_lm equals ducc0's packing
f = Σ a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm with a_lm = (b_{l,m} - i b_{l,-m})/sqrt(2).
"""

from __future__ import annotations

import functools
import math

import ducc0
import numpy as np

from .._threads import is_deterministic
from .._validate import as_int, as_real_array

__all__ = ["real_basis_s2", "n_alm", "alm_index", "real_to_alm", "alm_to_real", "synthesis_at", "adjoint_at",
           "ADJOINT_THREADED_DEGREE", "TORUS_PAIR_MIN_POINTS", "TORUS_PAIR_POINTS_PER_MODE"]

#: Degree at which ducc0 0.42's ``adjoint_synthesis_general`` runs when it has two threads or more
#: and a lower degree is asked for; the coefficients up to the lower degree are then taken out.
#: Below about degree 40 its threads do not share the work: at 10^6 points and ε = 1e-11 one
#: thread took 46-51 ms at every degree 6-64, two threads 43-50 ms at degrees 5-20, 35 at 32,
#: 26 at 48 and 24 at 64 (ε = 1e-7: 23-42 ms at degrees 5-16, 17.4 at 64). Its syntheses and the
#: type-1 NUFFT (S^1) do not have this limit. The coefficients taken out are the same quantities,
#: as accurate: relative L2 errors 1.7-1.8e-12 against 2.5-2.9e-12 (degree 12, signed weights,
#: ε = 1e-11, 6·10^4 and 3·10^5 points).
ADJOINT_THREADED_DEGREE = 64

#: Several spin-0 fields at ``n`` points go through the torus in pairs (:func:`synthesis_at`), two
#: real fields per complex transform, once n >= max(TORUS_PAIR_MIN_POINTS,
#: TORUS_PAIR_POINTS_PER_MODE (lmax + 1)²); below, one ducc0 ``synthesis_general`` per field. The
#: route's fixed cost grows with the degree. Measured with ducc0 0.42 (ε = 1e-11), two ducc0 calls
#: against one pair: 1.09-1.44x at 4608-10^6 points and degrees 6-24, 1.34x at degree 48 and
#: 10^6 points, 1.18x at degree 64 and 10^5 points; 0.72-1.04x at 64-1024 points, 0.97x at degree
#: 64 and 65536 points, 0.67-0.68x at degree 128 and 65536-131072 points.
TORUS_PAIR_MIN_POINTS = 2048
TORUS_PAIR_POINTS_PER_MODE = 20


@functools.lru_cache(maxsize=64)
def _sh_recursion(lmax: int, dtype: type = np.float64) -> tuple:
    """Per degree l >= 2: the orders m < l - 1 and the coefficients a, b of the three-term recursion,
    in ``dtype`` (float64, or NumPy's long double for the tables that are rounded afterwards)."""
    r = np.dtype(dtype).type
    out = []
    for ell in range(2, lmax + 1):
        ms = np.arange(ell - 1)
        m2 = ms.astype(dtype) ** 2
        a = np.sqrt((r(4) * r(ell) ** 2 - 1) / (r(ell) ** 2 - m2))[:, None]
        b = np.sqrt(((r(ell) - 1) ** 2 - m2) / (r(4) * r(ell - 1) ** 2 - 1))[:, None]
        out.append((ell, ms, a, b))
    return tuple(out)


def _sh_fill(lmax: int, z: np.ndarray, w: np.ndarray, out: np.ndarray, row, mmax: int | None = None) -> None:
    """Y_l^m for 0 <= m <= min(l, mmax), l <= lmax into ``out[row(l, m)]`` (rows of shape (N,)), from
    z = cos θ and w = sin θ e^{iφ} (complex) or sin θ (real: φ = 0), both (N,); ``row(l, ms)`` maps
    a degree and an array of orders to rows of ``out``. ``mmax`` (default lmax) bounds the orders.

    Sectoral terms Y_m^m = c_m w^m with c_0 = 1/sqrt(4π), c_m = -c_{m-1} sqrt((2m+1)/(2m)), then the
    standard three-term recursion in l, vectorised over m and the points: no trigonometric calls
    and no loop over points. Its constants are formed in the real type of ``z`` (float64, or long
    double for :func:`meanfield.sphere._legendre`'s rounded table). The one recursion of the point
    tables, the torus rings' table and the Legendre tables at rings.
    """
    mmax = lmax if mmax is None else min(mmax, lmax)
    real = z.dtype.type
    c, wm = _sh_sectoral(mmax, real), np.ones_like(w)
    for m in range(mmax + 1):
        if m > 0:
            wm = wm * w
        out[row(m, m)] = c[m] * wm
    if lmax >= 1:
        ms = np.arange(min(lmax, mmax + 1))
        out[row(ms + 1, ms)] = np.sqrt((2 * ms + 3).astype(real))[:, None] * z * out[row(ms, ms)]
    for ell, ms, a, b in _sh_recursion(lmax, real):
        if ms.size > mmax + 1:
            ms, a, b = ms[: mmax + 1], a[: mmax + 1], b[: mmax + 1]
        out[row(ell, ms)] = a * (z * out[row(ell - 1, ms)] - b * out[row(ell - 2, ms)])


@functools.lru_cache(maxsize=64)
def _sh_sectoral(mmax: int, dtype: type = np.float64) -> np.ndarray:
    """c_m of the sectoral terms Y_m^m = c_m (sin θ e^{iφ})^m, m = 0..mmax, in ``dtype`` (read-only)."""
    r = np.dtype(dtype).type
    c = np.empty(mmax + 1, dtype=dtype)
    c[0] = r(1) / np.sqrt(4 * np.arccos(r(-1)))
    for m in range(1, mmax + 1):
        c[m] = -c[m - 1] * np.sqrt(r(2 * m + 1) / r(2 * m))
    c.flags.writeable = False
    return c


def _complex_sh_cartesian(lmax: int, x: np.ndarray) -> np.ndarray:
    """Y_l^m(x) for 0 <= m <= l <= lmax at unit vectors x (N, 3); shape (lmax+1, lmax+1, N), [l, m].

    Uses sin^m θ e^{imφ} = (x_1 + i x_2)^m and the three-term recursion in l (:func:`_sh_fill`).
    """
    n = x.shape[0]
    out = np.zeros((lmax + 1, lmax + 1, n), dtype=np.complex128)
    _sh_fill(lmax, x[:, 2], x[:, 0] + 1j * x[:, 1], out.reshape((lmax + 1) ** 2, n),
             lambda ell, m: ell * (lmax + 1) + m)
    return out


@functools.lru_cache(maxsize=64)
def _real_layout(lmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every real basis index j = l² + l + m (m = -l..l): the flat index of Y_l^abs(m) in the
    (lmax+1)² table, whether it takes the imaginary part (m < 0), and its factor (sqrt 2 for m != 0)."""
    ls = np.repeat(np.arange(lmax + 1), 2 * np.arange(lmax + 1) + 1)
    ms = np.arange(ls.size) - ls * ls - ls
    flat = ls * (lmax + 1) + np.abs(ms)
    fac = np.where(ms == 0, 1.0, math.sqrt(2))
    for a in (flat, ms, fac):
        a.flags.writeable = False
    return flat, ms < 0, fac


def real_basis_s2(lmax: int, x: np.ndarray) -> np.ndarray:
    """Real orthonormal spherical harmonics of degree <= lmax at unit vectors x (N, 3), shape (N, (lmax+1)^2).

    Direct evaluation, O(N (lmax+1)^2) memory.

    Examples
    --------
    >>> B = real_basis_s2(2, np.array([[0.0, 0.0, 1.0]]))
    >>> round(float(B[0, 0]) ** 2 * 4 * np.pi, 12)
    1.0
    """
    flat, imag, fac = _real_layout(lmax)
    y = _complex_sh_cartesian(lmax, x).reshape((lmax + 1) ** 2, x.shape[0])[flat]
    out = np.where(imag[:, None], y.imag, y.real)
    out *= fac[:, None]
    return np.ascontiguousarray(out.T)


def n_alm(lmax: int) -> int:
    """Number of complex coefficients in ducc0/healpy packing, (lmax+1)(lmax+2)/2."""
    return (lmax + 1) * (lmax + 2) // 2


def alm_index(lmax: int, ell, m) -> np.ndarray:
    """Index of (l, m), m >= 0, in ducc0/healpy packing: m (2 lmax + 1 - m) / 2 + l."""
    m = np.asarray(m)
    return m * (2 * lmax + 1 - m) // 2 + np.asarray(ell)


@functools.lru_cache(maxsize=64)
def _real_alm_maps(lmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # cached (the SPDE solvers convert a noise increment at every step): read-only arrays
    ell = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
    m = np.concatenate([np.full(lmax + 1 - mm, mm) for mm in range(lmax + 1)])
    pos = ell * ell + ell + m
    neg = ell * ell + ell - m
    for a in (ell, m, pos, neg):
        a.flags.writeable = False
    return ell, m, pos, neg


@functools.lru_cache(maxsize=64)
def _real_to_alm_weights(lmax: int) -> tuple[np.ndarray, np.ndarray]:
    m = _real_alm_maps(lmax)[1]
    s_pos = np.where(m > 0, 1 / math.sqrt(2), 1.0)
    s_neg = np.where(m > 0, -1j / math.sqrt(2), 0.0)
    s_pos.flags.writeable = s_neg.flags.writeable = False
    return s_pos, s_neg


def real_to_alm(b: np.ndarray, lmax: int) -> np.ndarray:
    """Real S^2 coefficients (..., (lmax+1)^2) -> ducc0 complex alm (..., n_alm(lmax)).

    a_l0 = b_l0 and a_lm = (b_{l,m} - i b_{l,-m}) / sqrt(2) for m > 0.
    """
    lmax = as_int(lmax, "lmax", min_value=0)
    b = as_real_array(b, "b")
    if b.ndim < 1 or b.shape[-1] != (lmax + 1) ** 2:
        raise ValueError(f"real_to_alm: b must have (lmax + 1)^2 = {(lmax + 1) ** 2} coefficients in its last axis "
                         f"for lmax = {lmax}, got shape {b.shape}")
    return _real_to_alm(b, lmax)


def _real_to_alm(b: np.ndarray, lmax: int) -> np.ndarray:
    """:func:`real_to_alm` of checked float64 coefficients (the per-step path of the SPDE schemes)."""
    _, _, pos, neg = _real_alm_maps(lmax)
    s_pos, s_neg = _real_to_alm_weights(lmax)
    out = b[..., neg] * s_neg  # -i b_{l,-m} / sqrt(2) for m > 0, 0 for m = 0
    out += b[..., pos] * s_pos
    return out


def alm_to_real(a: np.ndarray, lmax: int) -> np.ndarray:
    """Inverse of :func:`real_to_alm`."""
    lmax = as_int(lmax, "lmax", min_value=0)
    a = np.asarray(a)
    n = (lmax + 1) * (lmax + 2) // 2
    if a.ndim < 1 or a.shape[-1] != n:
        raise ValueError(f"alm_to_real: a must have (lmax + 1)(lmax + 2)/2 = {n} coefficients in its last axis for "
                         f"lmax = {lmax}, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("alm_to_real: a contains NaN or infinite values")
    _, m, pos, neg = _real_alm_maps(lmax)
    out = np.empty(a.shape[:-1] + ((lmax + 1) ** 2,), dtype=np.float64)
    s = np.where(m > 0, math.sqrt(2), 1.0)
    out[..., pos] = s * a.real
    sel = m > 0
    out[..., neg[sel]] = -math.sqrt(2) * a[..., sel].imag
    return out


def synthesis_at(alm: np.ndarray, lmax: int, loc: np.ndarray, *, spin: int = 0, mode: str = "STANDARD",
                 epsilon: float, nthreads: int) -> np.ndarray:
    """Fields of ducc0 coefficients at arbitrary points: the one entry point of the S^2 point syntheses.

    f(θ_i, φ_i) = Σ_{l, m} a_lm Y_lm(θ_i, φ_i) (ducc0's ``synthesis_general`` conventions, any spin
    and mode), to ``epsilon``; shapes ``alm`` (ncomp, n_alm(lmax)), ``loc`` (N, 2) of
    (colatitude, longitude), result (ncomp, N). With spin 0, ``ncomp`` fields of any number; two
    or more at enough points (:data:`TORUS_PAIR_MIN_POINTS`) take the route below in pairs, which
    packs two real fields into one complex transform.

    Inside :func:`meanfield.deterministic` spin-0 fields take another route. ducc0 0.42's
    ``synthesis_general`` with spin 0 gives results that differ in the last bit between calls with
    the same inputs, on one thread, in up to 3 % of calls at small degrees (measured: 0-20 of 600 calls
    at degree 16 on 512 points, by process); which result comes out follows the memory addresses of its internal buffers, so two
    processes of one study could disagree. The route used instead: f extended to the doubled circle,
    F(θ, φ) = f(2π - θ, φ + π) for θ > π, is a trigonometric polynomial of degree lmax in both
    angles; its Fourier coefficients come exactly from the Legendre coefficients on the rings
    θ_j = 2π j / (2 lmax + 2), j <= lmax + 1 (ring 2 lmax + 2 - j is ring j turned by π) and an FFT
    in θ, and ducc0's 2-D non-uniform FFT (``nufft.u2nu``, two real fields per complex call)
    evaluates it at the points. The ring coefficients are products with a table of the Legendre
    functions at the rings, not ducc0's ``alm2leg``: in 3 of 6 runs of the test suite that call's
    first result in a test (degree 12) differed in the last bits from its later ones with the same
    inputs (not in loops of 2000-3000 calls outside the suite). With the same accuracy, one field
    costs 1.4-2.1 ``synthesis_general`` calls (512-10^6 points, degrees 6 and 16), a pair of fields
    0.69-0.92 of two such calls at the sizes where it is taken.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import deterministic
    >>> from meanfield.sphere._s2 import synthesis_at
    >>> alm = np.array([[0.0, 1.0, 0.0]], dtype=complex)  # a_10 = 1: Y_10 = sqrt(3/4π) cos θ
    >>> loc = np.array([[0.0, 0.0], [np.pi / 2, 1.0]])
    >>> with deterministic():
    ...     v = synthesis_at(alm, 1, loc, epsilon=1e-12, nthreads=1)
    >>> np.allclose(v, [[np.sqrt(3 / (4 * np.pi)), 0.0]])
    True
    """
    if spin == 0 and mode == "STANDARD":
        if is_deterministic():
            return _torus_spin0(alm, lmax, loc, epsilon, nthreads)
        if alm.shape[0] > 1:
            if loc.shape[0] < max(TORUS_PAIR_MIN_POINTS, TORUS_PAIR_POINTS_PER_MODE * (lmax + 1) ** 2):
                # ducc0 takes one spin-0 field per call
                return np.stack([synthesis_at(a[None], lmax, loc, epsilon=epsilon, nthreads=nthreads)[0] for a in alm])
            pairs = alm.shape[0] - alm.shape[0] % 2
            out = np.empty((alm.shape[0], loc.shape[0]))
            out[:pairs] = _torus_spin0(alm[:pairs], lmax, loc, epsilon, nthreads)
            if pairs < alm.shape[0]:
                out[pairs:] = synthesis_at(alm[pairs:], lmax, loc, epsilon=epsilon, nthreads=nthreads)
            return out
    return ducc0.sht.synthesis_general(alm=alm, spin=spin, lmax=lmax, loc=loc, epsilon=epsilon,
                                       nthreads=nthreads, mode=mode)


def adjoint_at(values: np.ndarray, lmax: int, loc: np.ndarray, *, epsilon: float, nthreads: int) -> np.ndarray:
    """Adjoint of the spin-0 synthesis at arbitrary points: the one entry point of the S^2 point adjoints.

    a_lm = Σ_i w_i conj(Y_lm(θ_i, φ_i)) for 0 <= m <= l <= lmax (ducc0's
    ``adjoint_synthesis_general``, the adjoint of :func:`synthesis_at` with spin 0), to ``epsilon``;
    shapes ``values`` (N,) real, ``loc`` (N, 2) of (colatitude, longitude), result (n_alm(lmax),)
    complex. With ``nthreads`` >= 2 a degree below :data:`ADJOINT_THREADED_DEGREE` is computed at
    that degree and truncated: ducc0's threads share the work there only.

    Inside :func:`meanfield.deterministic` the torus route instead (:func:`_torus_adjoint`, one
    thread): ducc0's adjoint ends in its spin-0 ``leg2alm``, whose last bits follow where the heap
    places its buffers (:mod:`meanfield.sphere._legendre`). It agrees with ducc0's to the accuracy
    asked for and costs 1.2-2.1 of its one-thread calls (degrees 6-128, 512-10^5 points,
    ε = 1e-11): its type-1 NUFFT spreads complex values where ducc0's adjoint spreads real ones.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.sphere._s2 import adjoint_at
    >>> a = adjoint_at(np.array([2.0]), 1, np.array([[0.0, 0.0]]), epsilon=1e-12, nthreads=1)
    >>> bool(np.allclose(a, [2 / np.sqrt(4 * np.pi), 2 * np.sqrt(3 / (4 * np.pi)), 0.0]))
    True
    """
    if is_deterministic():
        return _torus_adjoint(np.asarray(values, dtype=np.float64), lmax, loc, epsilon)
    degree = ADJOINT_THREADED_DEGREE if nthreads >= 2 and lmax < ADJOINT_THREADED_DEGREE else lmax
    out = ducc0.sht.experimental.adjoint_synthesis_general(
        map=np.asarray(values, dtype=np.float64)[None], spin=0, lmax=degree, loc=loc, epsilon=epsilon,
        nthreads=nthreads)[0]
    return out if degree == lmax else out[_truncation(lmax, degree)]


@functools.lru_cache(maxsize=64)
def _truncation(lmax: int, degree: int) -> np.ndarray:
    """Indices of the coefficients l <= lmax within ducc0's packing to ``degree``, in the packing to lmax
    (read-only: the cache hands the same array to every caller)."""
    idx = np.concatenate([alm_index(degree, np.arange(m, lmax + 1), m) for m in range(lmax + 1)])
    idx.flags.writeable = False
    return idx


#: Up to this degree the torus route's ring coefficients are one stacked product over a table of
#: λ_lm padded to lmax + 1 degrees per order (2.2 MB at degree 64), above one product per order
#: over the packed table. Measured for two fields (us per call, against ducc0's ``alm2leg``):
#: degree 12 6.3 (13.5), 40 68 (75); one product per order 25 at degree 12, 870 at 128 (687),
#: where the padded table would take 1270 and 17 MB.
RINGS_PADDED_MAX_LMAX = 64


def legendre_table(lmax: int, theta: np.ndarray) -> np.ndarray:
    """λ_lm(θ_j) = Y_l^m(θ_j, 0) for 0 <= m <= l <= lmax, shape (n_alm(lmax), n_θ) in ducc0's packing.

    By :func:`_sh_fill` with w = sin θ (Condon–Shortley phase included): no ducc0 transform, so
    the same bits at every call (what ducc0's spin-0 ``alm2leg`` of unit coefficients gives, to
    round-off).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.sphere._s2 import legendre_table
    >>> t = legendre_table(1, np.array([0.0, np.pi / 2]))
    >>> bool(np.allclose(t[1], [np.sqrt(3 / (4 * np.pi)), 0.0]))   # λ_10 = sqrt(3/4π) cos θ
    True
    """
    theta = np.asarray(theta, dtype=np.float64)
    starts = _order_starts(lmax)
    table = np.empty((n_alm(lmax), theta.size))
    _sh_fill(lmax, np.cos(theta), np.sin(theta), table, lambda ell, m: starts[m] + ell - m)
    return table


def _order_starts(lmax: int) -> np.ndarray:
    """The packing's first index of every order m = 0..lmax + 1 (the last is n_alm(lmax)), (lmax + 2,)."""
    ms = np.arange(lmax + 2)
    return alm_index(lmax, ms, ms)


def _padded_index(lmax: int, orders: int) -> np.ndarray:
    """Position m (lmax + 1) + l - m, in a layout padded to lmax + 1 degrees per order, of each of the
    packing's coefficients of the orders m < ``orders`` (its first ``_order_starts(lmax)[orders]``)."""
    starts = _order_starts(lmax)
    order = np.repeat(np.arange(orders), lmax + 1 - np.arange(orders))
    return order * (lmax + 1) + np.arange(starts[orders]) - starts[order]


def _padded_products(table: np.ndarray, index: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Σ_k table[m, j, k] v[m, k] with v the packed real ``values`` (len(index), ncol) placed by
    ``index`` (:func:`_padded_index`) in the padded layout; ``table`` (orders, n, lmax + 1), result
    (orders, n, ncol): the ring sums of a padded table of Legendre functions in one stacked product."""
    orders, _, width = table.shape
    rows = np.zeros((orders * width, values.shape[1]))
    rows[index] = values
    return np.matmul(table, rows.reshape(orders, width, values.shape[1]))


def _padded_adjoint(table: np.ndarray, index: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The adjoint of :func:`_padded_products`: Σ_j table[m, j, k] g[m, j] in the packing, shape
    (len(index), ncol), from ``g`` (orders, n, ncol)."""
    orders, _, width = table.shape
    return np.matmul(table.transpose(0, 2, 1), g).reshape(orders * width, g.shape[2])[index]


@functools.lru_cache(maxsize=8)
def _torus_rings(lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """λ_lm(θ_j) at the torus route's rings θ_j = 2π j / (2 lmax + 2), j = 0..lmax + 1 (read-only:
    the cache hands the same arrays to every caller).

    Up to :data:`RINGS_PADDED_MAX_LMAX`: the table (lmax + 1, lmax + 2, lmax + 1) of
    λ_{m+k, m}(θ_j) at [m, j, k], zero for m + k > lmax, and the position m (lmax + 1) + k of every
    coefficient of ducc0's packing in its (m, k) rows, shape (n_alm(lmax),). Above: the table
    (n_alm(lmax), lmax + 2) in ducc0's packing and the packing's first index of every order m,
    shape (lmax + 2,).

    λ_lm(θ) = Y_l^m(θ, 0), Condon–Shortley phase included, by :func:`_sh_fill` with w = sin θ: the
    real parts of :func:`_complex_sh_cartesian` at the points (sin θ_j, 0, cos θ_j), bit for bit,
    without its (lmax + 1)² (lmax + 2) complex table.
    """
    starts = _order_starts(lmax)
    table = legendre_table(lmax, 2 * np.pi * np.arange(lmax + 2) / (2 * lmax + 2))
    if lmax <= RINGS_PADDED_MAX_LMAX:
        index = _padded_index(lmax, lmax + 1)
        padded = np.zeros(((lmax + 1) ** 2, lmax + 2))
        padded[index] = table
        table, starts = np.ascontiguousarray(padded.reshape(lmax + 1, lmax + 1, lmax + 2).transpose(0, 2, 1)), index
    table.flags.writeable = starts.flags.writeable = False
    return table, starts


def _ring_coefficients(alm: np.ndarray, lmax: int) -> np.ndarray:
    """leg[c, j, m] = Σ_l a_lm λ_lm(θ_j) at the torus rings: ``alm`` (ncomp, n_alm(lmax)) complex,
    result (ncomp, lmax + 2, lmax + 1); what ducc0's ``alm2leg`` gives, to round-off.

    Products with a table of λ_lm (:func:`_torus_rings`), the real and imaginary parts of the
    coefficients in one product, rather than ``alm2leg``: in one process that call gave results
    that differ in the last bits from its other results with the same inputs (the first call in a
    test, at degree 12, in 3 of 6 runs of the test suite, where recorded the order m = 2 alone at
    10 of 14 rings; not in loops of 2000-3000 calls with the heap churned or other transforms
    between them), so the deterministic route through it was not.
    """
    table, index = _torus_rings(lmax)
    ncomp = alm.shape[0]
    af = np.ascontiguousarray(alm.T, dtype=np.complex128).view(np.float64)  # (n_alm, 2 ncomp)
    if table.ndim == 3:
        out = _padded_products(table, index, af)
    else:
        out = np.empty((lmax + 1, lmax + 2, 2 * ncomp))
        for m in range(lmax + 1):
            np.matmul(table[index[m] : index[m + 1]].T, af[index[m] : index[m + 1]], out=out[m])
    return out.view(np.complex128).transpose(2, 1, 0)


def _torus_spin0(alm: np.ndarray, lmax: int, loc: np.ndarray, epsilon: float, nthreads: int) -> np.ndarray:
    alm = np.ascontiguousarray(alm, dtype=np.complex128)
    ncomp, L = alm.shape[0], lmax
    nt, half = 2 * L + 2, L + 2
    leg = _ring_coefficients(alm, L)  # (ncomp, half, L + 1): f = Σ_m leg_m e^{imφ}, leg_{-m} = conj(leg_m)
    c = np.empty((ncomp, nt, 2 * L + 1), dtype=np.complex128)  # φ-coefficients m = -L..L at index m + L
    c[:, :half, L:] = leg
    c[:, :half, L] = leg[:, :, 0].real
    c[:, :half, :L] = np.conj(leg[:, :, :0:-1])
    c[:, half:] = c[:, nt - half : 0 : -1] * np.where(np.arange(-L, L + 1) % 2 == 0, 1.0, -1.0)
    # (1/nt) Σ_j c_j e^{-ikθ_j}, then centred order (k = -nt/2 .. nt/2 - 1) for u2nu
    grid = np.fft.fftshift(ducc0.fft.c2c(c, axes=(1,), forward=True, inorm=2, nthreads=nthreads), axes=1)
    out = np.empty((ncomp, loc.shape[0]))
    for i in range(0, ncomp, 2):
        g = grid[i] if i + 1 == ncomp else grid[i] + 1j * grid[i + 1]  # two real fields in one complex call
        v = ducc0.nufft.u2nu(grid=g, coord=loc, forward=False, epsilon=epsilon, nthreads=nthreads,
                             periodicity=2 * np.pi)
        out[i] = v.real
        if i + 1 < ncomp:
            out[i + 1] = v.imag
    return out


def _torus_adjoint(values: np.ndarray, lmax: int, loc: np.ndarray, epsilon: float) -> np.ndarray:
    """a_lm = Σ_i w_i λ_lm(θ_i) e^{-imφ_i} by the torus (the adjoint of :func:`_torus_spin0`), one thread.

    On the doubled circle λ_lm(θ) e^{imφ} is Σ_k B_lmk e^{i(kθ + mφ)} with B_lmk the discrete Fourier
    coefficients of its values at the rings θ_j = 2π j / n_t (n_t = 2 lmax + 2; ring n_t - j is
    ring j turned by π, a factor (-1)^m), so a_lm = Σ_j λ_lm(θ_j) R_jm with
    R_jm = (1/n_t) Σ_k e^{-ikθ_j} H_km and H_km = Σ_i w_i e^{i(kθ_i - mφ_i)}, ducc0's type-1 NUFFT
    (``nufft.nu2u``, one thread: the spreading runs over the points in one order). The rings
    j > lmax + 1 fold onto their mirror images, and the products with the kept table of λ_lm at
    the rings (:func:`_torus_rings`) take the place of ducc0's spin-0 ``leg2alm``, whose last bits
    follow where the heap places its buffers (:mod:`meanfield.sphere._legendre`).
    """
    L = lmax
    nt, half = 2 * L + 2, L + 2
    H = ducc0.nufft.nu2u(points=values.astype(np.complex128), coord=loc, forward=False, epsilon=epsilon,
                         nthreads=1, periodicity=2 * np.pi, out=np.empty((nt, 2 * L + 1), dtype=np.complex128))
    # orders m = 0..L sit at the longitude frequencies -m (index L - m); frequencies k from -nt/2
    R = ducc0.fft.c2c(np.fft.ifftshift(H[:, L::-1], axes=0), axes=(0,), forward=True, inorm=2, nthreads=1)
    rings = R[:half].copy()
    rings[1 : L + 1] += R[nt - 1 : half - 1 : -1] * np.where(np.arange(L + 1) % 2 == 0, 1.0, -1.0)
    table, index = _torus_rings(L)
    g = np.ascontiguousarray(rings.T).view(np.float64).reshape(L + 1, half, 2)  # [m, j, (re, im)]
    if table.ndim == 3:
        out = _padded_adjoint(table, index, g)
    else:
        out = np.empty((n_alm(L), 2))
        for m in range(L + 1):
            np.matmul(table[index[m] : index[m + 1]], g[m], out=out[index[m] : index[m + 1]])
    return out.view(np.complex128)[:, 0]
