"""Exact point transforms of low-degree fields on S^2: Chebyshev polynomials in z times powers of x_1 + i x_2.

On the unit sphere the complex harmonic of ducc0 and :func:`~meanfield.sphere._s2.real_basis_s2`
(Condon–Shortley phase) factors as

    Y_l^m(x) = q_lm(x_3) C^m,   C = x_1 + i x_2,   q_lm a polynomial of degree l - m,

because sin^m θ e^{imφ} = C^m. Writing q_lm(z) = Σ_k A^m_{lk} T_k(z) in Chebyshev polynomials
(a well-conditioned change of basis, built once per degree by the three-term recursion in
coefficient space), the (L + 1)² functions

    T_k(x_3) Re C^m,  T_k(x_3) Im C^m  (m > 0),   k + m <= L,

span the fields of degree <= L on the sphere (a non-orthogonal basis, the "features"). A field in
ducc0's packing, f = Σ_l a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm, is f = Re Σ_{m,k} D_mk T_k C^m with
D_mk = Σ_l c_lm A^m_{lk} (c_l0 = a_l0, c_lm = 2 a_lm), and the adjoint (the empirical
coefficients of μ = Σ_j w_j δ_{x_j}) is

    μ_lm = Σ_j w_j conj(Y_lm(x_j)) = Σ_k A^m_{lk} Σ_j w_j T_k(z_j) conj(C_j^m),

a fixed linear map of the moments M_kc = Σ_j w_j T_k(z_j) C_c(x_j) of the rows
C_c = Re C^0, Re C^1, Im C^1, ..., Im C^L: one (L + 1) x (2L + 1) matrix product per block of
points. The surface gradient is P_x ∇F of the polynomial extension F(x) = Re Σ D_mk T_k(x_3) C^m,
whose partial derivatives are fields of the same features:

    ∂_1 F = Re Σ m D_mk T_k C^{m-1},   ∂_2 F = -Im Σ m D_mk T_k C^{m-1},
    ∂_3 F = Re Σ D'_mk T_k C^m  (D' the Chebyshev derivative in k),

so each of f, ∂_1 F, ∂_2 F, ∂_3 F is Σ_k T_k (W_k C) for a weight matrix W_k per degree k, then
one sum over k. The second derivatives are features of the same kind (∂_1² C^m = m (m - 1)
C^{m-2}, ∂_2 C^m = i m C^{m-1}, so ∂_22 F = -∂_11 F), and the covariant Hessian is
P ∇²F P - (x·∇F) P (:meth:`LowDegreeS2.hessian`, nine quantities per point). Since D_mk = 0 for
k + m > L (and the derivatives only lower degrees), W_k meets only the C rows of m <= L - k: the
products run over groups of about two consecutive degrees k >= k0, each against the first
2 (L - k0) + 1 C rows. At L = 5 that is 168 instead of
264 multiply-adds per point and quantity set (the synthesis with gradients of one field 1.05-1.15x
faster than one dense product at N = 4·10^3-2·10^4, measured).

Per point: T_k by the three-term recurrence and C^m = C^{m-1} C by complex multiplication (one
pass over the points per power, and more accurate than the real recurrence
C^m = 2 x_1 C^{m-1} - (x_1² + x_2²) C^{m-2}: error of the rows of C^m at most 1.43 m u against
up to 4.98 m u at m = 20, u the unit round-off, measured against extended precision at 2·10^4
points); no transcendental call, no angle, no pole, no (L + 1)² table. The cost is O(N L) elementwise
plus O(N L²) in small matrix products, against O(N w² + L² log L) for the non-uniform transforms
(w ~ 8 at ε = 1e-6): the cheaper at the small degrees of the attention kernel for small β, and
exact to round-off (relative to Σ |a_lm|: 3e-16 at L = 10, 3e-15 at L = 16, 2e-14 at L = 20,
where the Chebyshev coefficients of q_lm start to cancel). It works in fixed blocks of points
with BLAS on one thread (threaded BLAS products would leave OpenBLAS threads spinning on the
cores of the next ducc0 transform, :func:`~meanfield._threads.one_blas_thread`). The synthesis
splits its blocks over threads; the adjoint's tables do not (their array operations take a few
microseconds each, and two threads contending for the interpreter lock were slower than one:
5.9 against 4.8 ms for 10^5 points, measured on 2 cores). The results do not depend on the
thread setting.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np
from numpy.polynomial import chebyshev

from .._threads import default_threads, one_blas_thread, parallel_rows
from ._s2 import _real_alm_maps, n_alm

__all__ = ["LowDegreeS2", "low_degree_s2"]

#: Points per block at L <= 7 (a block's tables and products stay in the L2 cache).
_BLOCK = 8192
#: Largest degree accepted: beyond it the Chebyshev coefficients of q_lm cancel (relative error of
#: the values 2e-14 at L = 20, 1e-9 at L = 30, measured against the recursion of real_basis_s2).
MAX_LMAX = 20
#: Largest tables kept between the adjoint and the synthesis of the same points (bytes).
_KEEP_BYTES = 32 << 20
#: Work of the synthesis' weight products (points x entries of the dense weights, 4 (L + 1)(2L + 1)
#: per field with gradients) below which its blocks stay on one thread: waking the pool's thread
#: costs more than it saves there. Set with one dense product per block: median of 100 attention
#: calls (β = 0.1) on 2 shared cores, blocks on one thread against two, in ms: L = 5 (264 weight
#: entries per point) 1.48 against 1.55-1.61 at N = 16385 and 1.69-1.73 against 1.78-1.81 at
#: N = 2·10^4, but 2.41-2.65 against 2.25-2.32 at 3·10^4; L = 6 (364) 1.72-1.74 against 1.70-1.75
#: at 16385; L = 7 (480) 1.90-1.95 against 1.83-1.85 at 16385. With the products grouped by degree
#: (see the module) two threads against one measured 0.90-1.04x at N = 16385-6·10^4, L = 5-7
#: (medians of 40 alternations), but the other way round in a run before: not resolved, so kept.
_SPLIT_WORK = 6_000_000
#: Blocks of the synthesis this many times larger when it is split over threads (32768 points at
#: L <= 7), equal in size and a multiple of the threads in number. Synthesis after the kept tables
#: of the adjoint, β = 0.1, best of 3-30 calls, 4 alternations on 2 cores, 8192-point blocks
#: against 32768 (ms): 134-145 against 110-116 at 10^6 tokens (L = 6), 38-49 against 33-36 at
#: 3·10^5, 9.3-10.3 against 9.3-10.0 at 10^5 (L = 6) and 7.4-7.8 against 7.1-7.3 (L = 4),
#: 3.9-4.4 against 3.5-3.7 at 5·10^4 (L = 4), 2.30-2.40 against 2.25-2.40 at 2·10^4 (L = 6);
#: four equal blocks at 10^5 (25000 points) 6.4-6.7 (L = 4) and 8.6-9.2 (L = 6).
_SPLIT_SCALE = 4
#: Every block starts at a multiple of this many points. BLAS and NumPy's vector loops treat the
#: last few columns of an array (its length modulo their vector width) with other instructions
#: (fused multiply-adds or not), so a point's last bits depend on its place in its block: with
#: blocks starting at multiples of 64, a point has the same place modulo the widths in every
#: layout, and the numbers do not depend on the number of threads (the nine products per point
#: of :meth:`LowDegreeS2.hessian` differed in up to 1.3e-13 at the ends of three equal blocks).
_ALIGN = 64


def _quantities(grad: bool, hess: bool) -> int:
    """Quantities per field and point: f; with ``grad`` three first derivatives; with ``hess`` five second ones."""
    return 9 if hess else 4 if grad else 1


@functools.lru_cache(maxsize=32)
def low_degree_s2(lmax: int) -> "LowDegreeS2":
    """The (cached) :class:`LowDegreeS2` of degree ``lmax``: its tables and work arrays are built once.

    Examples
    --------
    >>> low_degree_s2(5) is low_degree_s2(5)
    True
    """
    return LowDegreeS2(lmax)


def _equal_blocks(n: int, block: int) -> tuple[int, int]:
    """(number, size) of blocks of at most ``block`` points covering n, equal up to the last, each
    a multiple of ``_ALIGN``: the last block no longer a remnant (at N = 2·10^4 and 8192-point
    blocks three of 6720 points instead of 8192, 8192 and 3616; the adjoint at L = 6 3-4 % faster)."""
    nb = -(-n // block)
    return nb, (_aligned_size(n, nb) if nb else block)


def _aligned_size(n: int, nb: int) -> int:
    """Size of nb >= 1 equal blocks covering n points, rounded up to a multiple of ``_ALIGN``."""
    return -(-n // (nb * _ALIGN)) * _ALIGN


def _points(x, check: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"x must be points of S^2 with shape (N, 3), got {x.shape}")
    if check:
        r2 = np.einsum("ij,ij->i", x, x)
        if not np.all(np.isfinite(r2)) or np.any(r2 == 0):
            raise ValueError("x must hold finite, nonzero vectors (read as directions)")
    return x


def _finite(a: np.ndarray, name: str, check: bool) -> None:
    if check and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")


def _chebder(D: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients of the derivative of Σ_k D_k T_k along the last axis, same length."""
    out = np.zeros_like(D)
    out[..., :-1] = chebyshev.chebder(D, axis=-1)
    return out


class LowDegreeS2:
    """Adjoint and synthesis (with surface gradient, or Hessian) of fields of degree <= ``lmax`` at points of S^2, exactly.

    Coefficients are complex, in ducc0/healpy packing (:func:`~meanfield.sphere.n_alm` of them),
    as for ``ducc0.sht.experimental.synthesis_general`` and its adjoint; points are nonzero
    vectors (N, 3), read as their directions. See the module for the formulas.

    Work arrays (a few MiB, and the kept tables of :meth:`adjoint`, at most 32 MiB) stay with the
    object per thread between calls.

    Parameters
    ----------
    lmax : int, 0 <= lmax <= 20

    Examples
    --------
    >>> import numpy as np
    >>> t = LowDegreeS2(1)
    >>> x = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    >>> a = t.adjoint(x[:1], np.ones(1))           # conj(Y_lm) at the north pole
    >>> bool(np.allclose(a, [1 / np.sqrt(4 * np.pi), np.sqrt(3 / (4 * np.pi)), 0.0]))
    True
    >>> vals, grads = t.synthesis(np.array([[0.0, 1.0, 0.0]]), x)   # Y_10 = sqrt(3/4π) z
    >>> bool(np.allclose(vals, [[np.sqrt(3 / (4 * np.pi)), 0.0]]))
    True
    >>> bool(np.allclose(grads[0, 1], [0.0, 0.0, np.sqrt(3 / (4 * np.pi))]))   # -sqrt(3/4π) e_θ at the equator
    True
    """

    def __init__(self, lmax: int):
        L = int(lmax)
        if not 0 <= L <= MAX_LMAX:
            raise ValueError(f"lmax must be in [0, {MAX_LMAX}] (the exact low-degree transforms lose accuracy "
                             f"beyond), got {lmax}")
        self.lmax = L
        self.ell, m_of = _real_alm_maps(L)[:2]  # degree and order of each coefficient (ducc0 packing)
        # row p of A: Chebyshev coefficients in z of q_lm, (l, m) in ducc0 packing (m-major)
        A = np.zeros((n_alm(L), L + 1))
        p = 0
        qmm = 1.0 / math.sqrt(4 * math.pi)
        for m in range(L + 1):
            if m:
                qmm *= -math.sqrt((2 * m + 1) / (2 * m))
            A[p, 0] = qmm
            for ell in range(m + 1, L + 1):
                a = math.sqrt((4.0 * ell * ell - 1) / (ell * ell - m * m))
                row = np.zeros(L + 1)  # z q_{l-1,m}: chebmulx trims trailing zeros, so placed into a full row
                zq = chebyshev.chebmulx(A[p + ell - m - 1])
                row[: zq.size] = zq
                if ell - 2 >= m:
                    b = math.sqrt(((ell - 1.0) ** 2 - m * m) / (4.0 * (ell - 1) ** 2 - 1))
                    row -= b * A[p + ell - m - 2]
                A[p + ell - m] = a * row
            p += L + 1 - m
        self._A, self._m = A, m_of
        self._twice = np.where(m_of > 0, 2.0, 1.0)
        # the C rows [Re C^0, Re C^1, Im C^1, ..., Re C^L, Im C^L]: where Re C^m and Im C^m (m > 0) sit
        self._c_re = np.maximum(2 * np.arange(L + 1) - 1, 0)
        self._c_im = 2 * np.arange(1, L + 1)
        # the adjoint as a map of the moments M_kc: μ_lm = Σ_k A^m_lk (M_{k, Re C^m} - i M_{k, Im C^m})
        amap = np.zeros((n_alm(L), L + 1, 2 * L + 1), dtype=np.complex128)
        rows = np.arange(n_alm(L))
        amap[rows, :, self._c_re[m_of]] = A
        pos = m_of > 0
        amap[rows[pos], :, self._c_im[m_of[pos] - 1]] = -1j * A[pos]
        self._amap = amap.reshape(n_alm(L), -1)
        # Chebyshev degree k only meets C^m with m <= L - k (q_lm has degree l - m), so the C rows
        # c <= 2 (L - k): the products run over groups of consecutive k, each against the C rows
        # its lowest k needs (about half the multiply-adds of one dense product at L = 5-7)
        edges = np.unique(np.round(np.linspace(0, L + 1, (L + 2) // 2 + 1)).astype(int))
        self._groups = [(int(a), int(b), 2 * (L - int(a)) + 1) for a, b in zip(edges[:-1], edges[1:])]
        # the scatter of the coefficients into D[m, k] (ducc0 packing is m-major): D = onehot @ (a A)
        self._by_m = (m_of[None, :] == np.arange(L + 1)[:, None]).astype(np.float64)
        self._chebder = _chebder(np.eye(L + 1))  # row k: the derivative of T_k (integer coefficients)
        # per block the tables (3L + 5 rows) and the synthesis' products (4 (L + 1) rows per field)
        self.block = _BLOCK if L <= 7 else max(1024, _BLOCK * 8 // (L + 1) // _ALIGN * _ALIGN)
        self._local = threading.local()
        self._maps = {}  # the synthesis' weight maps, per kind (see _weight_map)

    def __repr__(self) -> str:
        return f"LowDegreeS2(lmax={self.lmax})"

    # -- per-point tables ----------------------------------------------------------------------
    def _work(self, name: str, shape: tuple) -> np.ndarray:
        # arrays of a few hundred kB kept between calls: fresh ones are mapped and page-faulted by
        # the allocator every time (see meanfield.sphere._polynomial)
        buf = getattr(self._local, name, None)
        size = math.prod(shape)
        if buf is None or buf.size < size:
            buf = np.empty(size)
            setattr(self._local, name, buf)
        return buf[:size].reshape(shape)

    def _tables(self, x: np.ndarray, s: int, e: int, tab: np.ndarray) -> None:
        """Rows of ``tab`` (3L + 5, B) for the points s:e: directions u (3), T_k(u_3) (L + 1) and
        [Re C^0, Re C^1, Im C^1, ..., Re C^L, Im C^L] (2L + 1), C = u_1 + i u_2."""
        L = self.lmax
        B = e - s
        u, T, C = tab[:3], tab[3 : L + 4], tab[L + 4 :]
        u[:] = x[s:e].T
        r = self._work("r", (B,))
        np.sqrt(np.einsum("ij,ij->j", u, u, out=r), out=r)
        np.divide(1.0, r, out=r)
        u *= r  # the extension is a polynomial: it is evaluated on the sphere itself
        x1, x2, z = u
        T[0] = 1.0
        C[0] = 1.0
        if L == 0:
            return
        T[1] = z
        C[1] = x1
        C[2] = x2
        if L == 1:
            return
        # C^m as complex numbers, then split into the rows: NumPy's complex product reads C^{m-1}
        # and C once, where the real recurrence made three passes (27-33 against 78-83 us for the
        # powers of 8192 points at L = 6, the split 30 us more)
        P = self._work("powers", (2 * (L - 1) * B,)).view(np.complex128).reshape(L - 1, B)
        c = self._work("c", (2 * B,)).view(np.complex128)
        c.real = x1
        c.imag = x2
        np.multiply(c, c, out=P[0])
        for m in range(1, L - 1):
            np.multiply(P[m - 1], c, out=P[m])
        C[3::2] = P.real
        C[4::2] = P.imag
        z2 = np.add(z, z, out=r)
        for k in range(2, L + 1):  # T_k = 2 z T_{k-1} - T_{k-2}
            np.multiply(T[k - 1], z2, out=T[k])
            T[k] -= T[k - 2]

    # -- transforms ----------------------------------------------------------------------------
    def adjoint(self, x: np.ndarray, w: np.ndarray, *, keep: bool = False, check: bool = True):
        """μ_lm = Σ_j w_j conj(Y_lm(x_j)), shape (n_alm(lmax),) complex (ducc0 packing).

        ``x`` (N, 3) finite nonzero vectors (read as directions), ``w`` (N,) finite real weights,
        or None for unit weights (the counting measure: its weights are not multiplied in, 7-10 %
        of the adjoint at L = 4-6; a uniform measure is this divided by N); ``check=False`` skips
        the checks of ``x`` and ``w``, for callers that validated them. With ``keep``
        the per-point tables are also returned, for :meth:`synthesis` at the same points before
        this thread's next ``keep`` adjoint on this object (None when they would exceed 32 MiB).
        """
        x = _points(x, check)
        if w is not None:
            w = np.asarray(w, dtype=np.float64)
            if w.shape != (x.shape[0],):
                raise ValueError(f"w must have shape ({x.shape[0]},) like the points, or be None, got {w.shape}")
            _finite(w, "w", check)
        n, L = x.shape[0], self.lmax
        nb, blk = _equal_blocks(n, self.block)
        rows = 3 * L + 5
        # M_kc = Σ_j w_j T_k(z_j) C-row c, per block; added in block order
        part = np.zeros((nb, L + 1, 2 * L + 1))
        store = None
        if keep and rows * n * 8 <= _KEEP_BYTES:
            store = self._work("store", (rows, n))
            # the tables live in this thread's work array until the next keep: a stamp tells
            self._local.stamp = getattr(self._local, "stamp", 0) + 1
        with one_blas_thread():  # small products: threaded BLAS would spin on the transforms' cores
            for i in range(nb):
                s, e = i * blk, min(n, (i + 1) * blk)
                tab = store[:, s:e] if store is not None else self._work("tab", (rows, e - s))
                self._tables(x, s, e, tab)
                T = tab[3 : L + 4]
                if w is not None:
                    T = np.multiply(T, w[s:e], out=self._work("Tw", (L + 1, e - s)))
                np.matmul(T, tab[L + 4 :].T, out=part[i])
            mu = self._amap @ part.sum(axis=0).ravel()
        return (mu, (n, store, getattr(self._local, "stamp", 0))) if keep else mu

    def _dense_weights(self, alm: np.ndarray, grad: bool, hess: bool = False) -> np.ndarray:
        """Weights (K, nq, L+1, 2L+1) of the C rows: [field, quantity, degree k, C row].

        Quantities f; with ``grad`` ∂_1 F, ∂_2 F, ∂_3 F; with ``hess`` also ∂_11 F, ∂_12 F, ∂_13 F,
        ∂_23 F, ∂_33 F (∂_22 F = -∂_11 F: every C^m is harmonic in (x_1, x_2)). The coefficients
        E_mk of Re Σ E_mk T_k C^m vanish for k + m > L (q_lm has degree l - m, and the derivatives
        lower the degree), so every (m, k) pair can be written without a mask.
        """
        L = self.lmax
        K = alm.shape[0]
        D = self._by_m @ ((alm * self._twice)[:, :, None] * self._A[None])  # [field, m, k]
        nq = _quantities(grad, hess)
        W = np.zeros((K, nq, L + 1, 2 * L + 1))  # [field, quantity, k, C row]

        def put(q: int, E: np.ndarray, imag: bool = False) -> None:
            Et = E.transpose(0, 2, 1)  # [field, k, m]
            if imag:  # -Im Σ E C^m: Im(E C^m) = Im E Re C^m + Re E Im C^m
                W[:, q, :, self._c_re] = -Et.imag.transpose(2, 0, 1)
                W[:, q, :, self._c_im] = -Et[:, :, 1:].real.transpose(2, 0, 1)
            else:  # Re(E C^m) = Re E Re C^m - Im E Im C^m
                W[:, q, :, self._c_re] = Et.real.transpose(2, 0, 1)
                W[:, q, :, self._c_im] = -Et[:, :, 1:].imag.transpose(2, 0, 1)

        def lower(E: np.ndarray) -> np.ndarray:  # ∂_1 of Σ E_m C^m: C^{m'} gets (m' + 1) E_{m'+1}
            out = np.zeros_like(E)
            out[:, :L] = E[:, 1:] * np.arange(1, L + 1)[None, :, None]
            return out

        put(0, D)
        if grad:
            mD, Dz = lower(D), D @ self._chebder
            put(1, mD)
            put(2, mD, imag=True)  # ∂_2 F = -Im Σ m D_mk T_k C^{m-1} (∂_2 C^m = i m C^{m-1})
            put(3, Dz)
            if hess:
                mmD, mDz = lower(mD), lower(Dz)
                put(4, mmD)  # ∂_11 F = Re Σ m (m - 1) D_mk T_k C^{m-2}
                put(5, mmD, imag=True)  # ∂_12 F = -Im of the same sum
                put(6, mDz)  # ∂_13 F: ∂_1 of ∂_3 F
                put(7, mDz, imag=True)  # ∂_23 F
                put(8, Dz @ self._chebder)  # ∂_33 F
        return W

    def _weight_map(self, grad: bool, hess: bool) -> np.ndarray:
        """Real matrix (R, 2 n_alm) taking [Re a; Im a] of one field to its group weights of
        :meth:`_weights`, the groups one after the other, each in rows (degree k, quantity, C row).

        The weights are real-linear in the coefficients: one product instead of the thirty-odd
        small array operations of :meth:`_dense_weights` at every call (:meth:`_weights` 6.8
        against 40-41 us at L = 6, one field with gradients); built from :meth:`_dense_weights` of
        the unit coefficients, once per object and kind (two threads building it at once build the
        same matrix).
        """
        maps = self._maps
        key = (grad, hess)
        if key not in maps:
            n = n_alm(self.lmax)
            unit = np.concatenate([np.eye(n), 1j * np.eye(n)]).astype(np.complex128)
            W = self._dense_weights(unit, grad, hess)  # [input, quantity, k, C row]
            maps[key] = np.ascontiguousarray(np.concatenate(
                [W[:, :, a:b, :c].transpose(2, 1, 3, 0).reshape(-1, 2 * n) for a, b, c in self._groups]))
        return maps[key]

    def _weights(self, alm: np.ndarray, grad: bool, hess: bool = False) -> list:
        """Per group (k0, k1, c) of :attr:`_groups`, the weights ((k1 - k0) K nq, c): rows (degree k,
        field, quantity), columns the first c C rows, the only ones degrees k >= k0 meet."""
        K, nq = alm.shape[0], _quantities(grad, hess)
        flat = self._weight_map(grad, hess) @ np.concatenate([alm.real, alm.imag], axis=1).T  # (R, K)
        out, r0 = [], 0
        for a, b, c in self._groups:
            r1 = r0 + (b - a) * nq * c
            if K == 1:  # already in order, a view
                out.append(flat[r0:r1].reshape(-1, c))
            else:
                Wg = flat[r0:r1].reshape(b - a, nq, c, K).transpose(0, 3, 1, 2)  # [k, field, quantity, C row]
                out.append(np.ascontiguousarray(Wg).reshape(-1, c))
            r0 = r1
        return out

    def _synth(self, alm, x, grad: bool, tables, emit, hess: bool = False) -> None:
        if alm.shape[1] != n_alm(self.lmax):
            raise ValueError(f"alm must have n_alm({self.lmax}) = {n_alm(self.lmax)} coefficients per field, "
                             f"got shape {alm.shape}")
        n = x.shape[0]
        store = None
        if tables is not None:
            if tables[0] != n:
                raise ValueError(f"tables are for {tables[0]} points, got {n}")
            if tables[1] is not None and tables[2] != getattr(self._local, "stamp", 0):
                raise ValueError("tables were overwritten by a later adjoint(keep=True) in this thread: "
                                 "pass the tables of the latest one, or none")
            store = tables[1]

        L = self.lmax
        blk, rows, nq = self.block, 3 * L + 5, alm.shape[0] * _quantities(grad, hess)  # rows of H per k
        starts = [a * nq for a, _, _ in self._groups] + [(L + 1) * nq]

        def blocks(a: int, b: int) -> None:
            for i in range(a, b):
                s, e = i * blk, min(n, (i + 1) * blk)
                if store is not None:
                    tab = store[:, s:e]
                else:
                    tab = self._work("tab", (rows, e - s))
                    self._tables(x, s, e, tab)
                H = self._work("H", ((L + 1) * nq, e - s))
                for Wg, (_, _, c), r0, r1 in zip(W, self._groups, starts[:-1], starts[1:]):
                    np.matmul(Wg, tab[L + 4 : L + 4 + c], out=H[r0:r1])
                acc = np.einsum("kqb,kb->qb", H.reshape(L + 1, nq, e - s), tab[3 : L + 4],
                                out=self._work("acc", (nq, e - s)))
                emit(s, e, acc, tab[:3])

        # blocks split over threads when the products are large enough (_SPLIT_WORK; a block's
        # matrix products dominate its time there: 2.11 against 2.26 ms at N = 2·10^4 and 4.9
        # against 6.1 ms at 6·10^4, L = 7), BLAS on one thread either way: the same numbers on any
        # number of threads and blocks. Split, the blocks are larger (_SPLIT_SCALE times, a multiple
        # of the threads in number, equal in size): the two threads' NumPy calls take turns at the
        # interpreter lock, so fewer, longer calls win
        k = default_threads()
        split = k > 1 and n * nq * (L + 1) * (2 * L + 1) >= _SPLIT_WORK
        if split:
            nb = -(-max(k, -(-n // (_SPLIT_SCALE * blk))) // k) * k
            blk = _aligned_size(n, nb)
        else:
            blk = _equal_blocks(n, blk)[1]
        nb = -(-n // blk)
        with one_blas_thread():
            # the weights' product too: at high degree with Hessians (a 4149 x 462 map at L = 20) BLAS
            # would take it to its threads
            W = self._weights(alm, grad, hess)
            parallel_rows(blocks, nb, block=nb, min_rows=2 if split else nb + 1)

    def synthesis(self, alm: np.ndarray, x: np.ndarray, *, grad: bool = True, tables=None, check: bool = True):
        """Values (K, N) and, with ``grad``, surface gradients (K, N, 3) of K fields at the directions of x.

        ``alm`` (K, n_alm(lmax)) complex, ducc0 packing; ``tables``: what :meth:`adjoint` returned
        with ``keep`` for the same ``x`` (else the tables are formed again); ``check`` as in
        :meth:`adjoint` (finite ``alm`` and ``x``, nonzero ``x``).
        """
        x = _points(x, check)
        alm = np.atleast_2d(np.asarray(alm, dtype=np.complex128))
        _finite(alm, "alm", check)
        K = alm.shape[0]
        n = x.shape[0]
        vals = np.empty((K, n))
        grads = np.empty((K, 3, n)) if grad else None

        def emit(s, e, acc, u):
            acc = acc.reshape(K, -1, e - s)
            vals[:, s:e] = acc[:, 0]
            if grad:
                g = acc[:, 1:]
                radial = np.einsum("kin,in->kn", g, u, out=self._work("radial", (K, e - s)))
                tmp = np.multiply(u[None], radial[:, None, :], out=self._work("tmp3", (K, 3, e - s)))
                np.subtract(g, tmp, out=grads[:, :, s:e])

        self._synth(alm, x, grad, tables, emit)
        return vals, (np.transpose(grads, (0, 2, 1)) if grad else None)

    def log_gradient(self, alm: np.ndarray, x: np.ndarray, factor: float = 1.0, *, tables=None,
                     check: bool = True) -> np.ndarray:
        """∇f / (c f) at the directions of x, shape (N, 3), for one field f (``alm`` (n_alm,)) and c = ``factor``.

        The surface gradient of log f divided by c (the attention velocity ∇g / (β g)), without
        the intermediate (N,) and (N, 3) arrays of :meth:`synthesis`. ``tables`` and ``check`` as
        in :meth:`synthesis`.
        """
        x = _points(x, check)
        alm = np.asarray(alm, dtype=np.complex128)
        if alm.ndim != 1:
            raise ValueError(f"alm must be the coefficients of one field, shape (n_alm,), got {alm.shape}")
        _finite(alm, "alm", check)
        out = np.empty((x.shape[0], 3))

        def emit(s, e, acc, u):
            # (g - (g·u) u) / (c f), the last product written straight into the (N, 3) rows
            f, g = acc[0], acc[1:]
            radial = np.einsum("in,in->n", g, u, out=self._work("radial", (e - s,)))
            inv = np.multiply(f, factor, out=self._work("inv", (e - s,)))
            np.divide(1.0, inv, out=inv)
            radial *= inv
            tmp = np.multiply(u, radial, out=self._work("tmp3", (3, e - s)))
            g *= inv
            np.subtract(g, tmp, out=out[s:e].T)

        self._synth(alm[None], x, True, tables, emit)
        return out

    def hessian(self, alm: np.ndarray, x: np.ndarray, *, check: bool = True):
        """Value (N,), surface gradient (N, 3) and covariant Hessian (N, 3, 3) of one field at the directions of x.

        With F the polynomial extension of f (see the module), ∇F its ambient gradient, A = ∇²F
        its ambient Hessian, r = x·∇F and P = I - x x^T, the surface gradient is P ∇F and the
        covariant Hessian, as an operator on tangent vectors (zero on x), is

            Hess f = P A P - r P,

        since along a unit-speed geodesic γ (γ'' = -x) d²/dt² F(γ) = γ'·A γ' - r. Nine quantities
        per point (f, three first and five second partial derivatives, ∂_22 F = -∂_11 F) come from
        the same tables as :meth:`synthesis`. The Hessian is a component-major stack (memory
        (3, 3, N), logical shape (N, 3, 3)), as :meth:`meanfield.sphere.S2Basis.hessian_at`
        returns it. ``alm`` (n_alm(lmax),) complex, ducc0 packing; ``check`` as in :meth:`adjoint`.

        Examples
        --------
        >>> import numpy as np
        >>> t = LowDegreeS2(2)
        >>> alm = np.zeros(6, dtype=complex); alm[2] = 1.0       # Y_20 = c (3 z² - 1), c = sqrt(5/16π)
        >>> val, grad, H = t.hessian(alm, np.array([[1.0, 0.0, 0.0]]))
        >>> c = np.sqrt(5 / (16 * np.pi))
        >>> bool(np.isclose(val[0], -c)), bool(np.allclose(grad, 0.0))
        (True, True)
        >>> bool(np.allclose(H[0], np.diag([0.0, 0.0, 6 * c])))   # along e_z: c (3 sin² t - 1); trace = Δf = -6 f
        True
        """
        x = _points(x, check)
        alm = np.asarray(alm, dtype=np.complex128)
        if alm.ndim != 1:
            raise ValueError(f"alm must be the coefficients of one field, shape (n_alm,), got {alm.shape}")
        _finite(alm, "alm", check)
        n = x.shape[0]
        val, grad = np.empty(n), np.empty((n, 3))
        H = np.empty((3, 3, n))

        def emit(s, e, acc, u):
            val[s:e] = acc[0]
            g = acc[1:4]
            # the ambient Hessian A, row by row: A_22 = -A_11
            A = ((acc[4], acc[5], acc[6]), (acc[5], None, acc[7]), (acc[6], acc[7], acc[8]))
            r = np.einsum("in,in->n", g, u, out=self._work("radial", (e - s,)))
            a = self._work("Au", (3, e - s))  # A u
            for i in range(3):
                Ai = A[i]
                np.multiply(Ai[0], u[0], out=a[i])
                a[i] += (-A[0][0] if Ai[1] is None else Ai[1]) * u[1]
                a[i] += Ai[2] * u[2]
            sr = np.einsum("in,in->n", a, u, out=self._work("sr", (e - s,)))
            sr += r  # u·A u + r
            # Hess_ij = A_ij - u_i a_j - a_i u_j + (u·A u + r) u_i u_j - r δ_ij
            for i in range(3):
                for j in range(i, 3):
                    h = H[i, j, s:e]
                    Aij = A[i][j]
                    if Aij is None:
                        np.negative(A[0][0], out=h)
                    else:
                        h[...] = Aij
                    h -= u[i] * a[j]
                    h -= a[i] * u[j]
                    h += sr * u[i] * u[j]
                    if i == j:
                        h -= r
                    else:
                        H[j, i, s:e] = h
            np.subtract(g, u * r, out=grad[s:e].T)

        self._synth(alm[None], x, True, None, emit, hess=True)
        return val, grad, H.transpose(2, 0, 1)
