"""Hyperspherical harmonics on S^{d-1} for every d >= 4: the Gegenbauer-product basis and its product grid.

Basis. In the coordinates x_d = t_d, x_j = r_j t_j, r_j² = x_1² + ... + x_j², the classical
(Vilenkin) orthonormal basis of harmonics of degree l is labelled by a chain
l = k_d >= k_{d-1} >= ... >= k_3 >= k_2 = |m| and is the homogeneous harmonic polynomial

    Y(x) = Φ_m(x_1, x_2) · Π_{j=3}^{d} G_{n_j}^{λ_j}(x_j, r_j²),   n_j = k_j - k_{j-1},  λ_j = k_{j-1} + (j-2)/2,

with Φ_0 = 1/sqrt(2π), Φ_{±k} = Re / Im (x_1 + i x_2)^k / sqrt(π) (the Fourier basis of S^1) and
G_n^λ(u, s) = s^{n/2} p_n^λ(u / sqrt(s)), p_n^λ the Gegenbauer polynomials orthonormal for the
weight (1 - t²)^{λ-1/2} on [-1, 1]. G satisfies the division-free recurrence

    G_0 = h_0^{-1/2},  G_1 = u G_0 / α_1,  G_{n+1} = (u G_n - α_n s G_{n-1}) / α_{n+1},
    α_n = ½ sqrt(n (n + 2λ - 1) / ((n + λ)(n + λ - 1))),  h_0 = sqrt(π) Γ(λ + ½) / Γ(λ + 1),

so values and the partial derivatives in (u, s) are polynomial recurrences, with no angle and
no division by r_j (the basis is smooth at the coordinate singularities r_j = 0). Because
dσ_{S^{d-1}} = (1 - t_d²)^{(d-3)/2} dt_d dσ_{S^{d-2}} and (1 - t²)^{k/2} = (r_{d-1} / r_d)^k,
the functions are orthonormal on S^{d-1} level by level. Gradients and Hessians are exact:
the ambient derivatives of the homogeneous polynomial by the product rule (∂ G / ∂ x_i =
δ_ij ∂_u G + 2 x_i ∂_s G for i <= j), projected on the tangent space (covariant Hessian
P ∇²Y P - (x·∇Y) P).

Point transforms are direct (the basis matrix is formed block by block, never whole), in
O(N n_real) time; grids are the product Gauss rule of :func:`~meanfield.sphere.product_quadrature`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _validate
from .._validate import check_cost
from ._geometry import sphere_area
from ._quadrature import product_nodes
from .basis import Basis, Grid, register_basis

__all__ = ["HypersphereBasis", "HypersphereGrid", "householder_frame", "chain_labels"]

#: Elements (points × basis functions) of one block of the basis tables formed at once, and the
#: fewest points of a block (below it the per-degree loops cost more than the arithmetic).
_BLOCK_ELEMENTS = 2**20
_MIN_BLOCK = 32
#: Largest number of basis functions accepted (beyond it one coefficient table of a modest point
#: cloud no longer fits in memory and time); sets ``max_lmax`` of each dimension.
MAX_FUNCTIONS = 2**21
#: Measured seconds per (point × basis function) of one evaluation of the d components of a field
#: (values only): 0.9–5e-8 at d = 4..8, lmax 4..16, 10^3–10^4 points on a loaded 2-core machine, rounded up.
EVAL_SECONDS_PER_ENTRY = 5e-8
#: ... and of values and surface gradients together (0.6–2.2e-7 measured).
GRAD_SECONDS_PER_ENTRY = 2.5e-7


def n_functions(d: int, lmax: int) -> int:
    """Σ_{l <= lmax} dim H_l on S^{d-1} = C(lmax + d - 1, d - 1) + C(lmax + d - 2, d - 1) (the sum telescopes).

    Examples
    --------
    >>> n_functions(3, 4), n_functions(4, 2), n_functions(8, 8)
    (25, 14, 9867)
    """
    if lmax < 0:
        return 0
    return math.comb(lmax + d - 1, d - 1) + math.comb(lmax + d - 2, d - 1)


@functools.lru_cache(maxsize=256)
def _chains_of_degree(j: int, k: int) -> np.ndarray:
    """Chains (k_j = k, k_{j-1}, ..., k_2, m) of the degree-k harmonics on S^{j-1}, shape (dim H_k, j)."""
    if j == 2:
        rows = [[0, 0]] if k == 0 else [[k, k], [k, -k]]
        return np.asarray(rows, dtype=np.int64)
    parts = []
    for kk in range(k + 1):
        low = _chains_of_degree(j - 1, kk)
        parts.append(np.concatenate([np.full((low.shape[0], 1), k, dtype=np.int64), low], axis=1))
    out = np.concatenate(parts)
    out.flags.writeable = False
    return out


def chain_labels(d: int, lmax: int) -> np.ndarray:
    """Labels (l = k_d, k_{d-1}, ..., k_2 = ``|m|``, m) of the Gegenbauer-product basis of S^{d-1}, shape (n_real, d).

    Degree-major; within a degree, k_{d-1} increasing, then recursively; on S^1 the order is
    cos kθ (m = k) before sin kθ (m = -k), as in :class:`~meanfield.sphere.CircleBasis`.

    Examples
    --------
    >>> chain_labels(4, 1).tolist()
    [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, -1]]
    """
    return np.concatenate([_chains_of_degree(d, l) for l in range(lmax + 1)])


def householder_frame(x: np.ndarray) -> list[np.ndarray]:
    """Orthonormal tangent frame at unit vectors x (N, d): d - 1 arrays (N, d), from one Householder reflection.

    With v = x + s e_d (s = sign x_d, +1 at 0) the reflection H = I - 2 v v^T / ``|v|²`` maps e_d to
    -s x, so its other columns H e_k (k < d) are orthonormal and orthogonal to x; smooth except
    across x_d = 0, where the sign flips (every frame of S^{d-1}, d - 1 even, must have one).

    Examples
    --------
    >>> x = np.array([[0.0, 0.6, 0.8]])
    >>> M = np.stack(householder_frame(x) + [x], axis=2)[0]      # columns e_1, e_2, x
    >>> bool(np.allclose(M.T @ M, np.eye(3)))
    True
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[1]
    s = np.where(x[:, -1] >= 0, 1.0, -1.0)
    v = x.copy()
    v[:, -1] += s
    scale = 2.0 / np.einsum("ij,ij->i", v, v)
    out = []
    for k in range(d - 1):
        e = -(scale * v[:, k])[:, None] * v
        e[:, k] += 1.0
        out.append(e)
    return out


def _dot(C: np.ndarray, V: np.ndarray) -> np.ndarray:
    """C (K, n) times V (Nb, n) transposed -> (K, Nb), by einsum: a threaded BLAS product of these
    skinny shapes stalled by 60x on two busy cores (0.13 s against 2 ms at K = 4, n = 12529, Nb = 20)."""
    return np.einsum("kn,bn->kb", C, V)


def _alpha(n: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Jacobi-matrix coefficients α_n of the orthonormal Gegenbauer polynomials (n >= 1)."""
    return 0.5 * np.sqrt(n * (n + 2 * lam - 1) / ((n + lam) * (n + lam - 1)))


def _h0(lam: np.ndarray) -> np.ndarray:
    """∫_{-1}^{1} (1 - t²)^{λ - 1/2} dt = sqrt(π) Γ(λ + ½) / Γ(λ + 1)."""
    from scipy.special import gammaln

    return math.sqrt(math.pi) * np.exp(gammaln(lam + 0.5) - gammaln(lam + 1.0))


def _level_tables(u: np.ndarray, s: np.ndarray, lam0: float, lmax: int, order: int) -> list[np.ndarray]:
    """G_n^{λ_k}(u, s) for λ_k = k + lam0 (k, n = 0..lmax) and its (u, s) derivatives up to ``order``.

    Returns arrays of shape (N, (lmax + 1)²), column ``k (lmax + 1) + n``: [G] (order 0),
    [G, G_u, G_s] (order 1), [G, G_u, G_s, G_uu, G_us, G_ss] (order 2). Columns with
    n + k > lmax are computed too (the recurrence runs on all k at once) and never read.
    """
    L = lmax + 1
    lam = lam0 + np.arange(L, dtype=np.float64)
    nn = np.arange(1, L + 1, dtype=np.float64)
    alpha = _alpha(nn[:, None], lam[None, :])  # alpha[n - 1, k] = α_n(λ_k), n = 1..L
    N = u.shape[0]
    U, S = u[:, None], s[:, None]
    nd = (1, 3, 6)[order]
    out = np.empty((nd, N, L, L))  # [derivative, point, k, n]
    g0 = np.broadcast_to(_h0(lam)[None, :] ** -0.5, (N, L))
    zero = np.zeros((N, L))
    # (value, u, s, uu, us, ss) at n - 1 and n
    prev = [zero] * nd
    cur = [g0] + [zero] * (nd - 1)
    for n in range(L):
        for q in range(nd):
            out[q, :, :, n] = cur[q]
        if n == L - 1:
            break
        inv = 1.0 / alpha[n]  # 1 / α_{n+1}
        a_n = alpha[n - 1] if n >= 1 else np.zeros(L)  # α_n (0 for n = 0: G_{-1} = 0)
        g, gp = cur[0], prev[0]
        nxt = [(U * g - a_n * S * gp) * inv]
        if order >= 1:
            gu, gs, gpu, gps = cur[1], cur[2], prev[1], prev[2]
            nxt.append((g + U * gu - a_n * S * gpu) * inv)
            nxt.append((U * gs - a_n * (gp + S * gps)) * inv)
        if order >= 2:
            guu, gus, gss = cur[3], cur[4], cur[5]
            gpuu, gpus, gpss = prev[3], prev[4], prev[5]
            nxt.append((2 * gu + U * guu - a_n * S * gpuu) * inv)
            nxt.append((gs + U * gus - a_n * (gpu + S * gpus)) * inv)
            nxt.append((U * gss - a_n * (2 * gps + S * gpss)) * inv)
        prev, cur = cur, nxt
    return [out[q].reshape(N, L * L) for q in range(nd)]


def _circle_tables(x1: np.ndarray, x2: np.ndarray, lmax: int, order: int) -> list[np.ndarray]:
    """Φ and its (x_1, x_2) derivatives, columns in the S^1 order [1, cos 1, sin 1, cos 2, ...] (homogeneous).

    Returns [Φ] (order 0), [Φ, Φ_1, Φ_2] (order 1), [Φ, Φ_1, Φ_2, Φ_11, Φ_12, Φ_22] (order 2),
    each of shape (N, 2 lmax + 1).
    """
    N = x1.shape[0]
    z = x1 + 1j * x2
    zp = np.empty((N, lmax + 1), dtype=np.complex128)  # z^m
    zp[:, 0] = 1.0
    for m in range(1, lmax + 1):
        zp[:, m] = zp[:, m - 1] * z
    m = np.arange(1, lmax + 1, dtype=np.float64)
    c0, c = 1.0 / math.sqrt(2 * math.pi), 1.0 / math.sqrt(math.pi)

    def pack(pos: np.ndarray, const: float) -> np.ndarray:
        t = np.empty((N, 2 * lmax + 1))
        t[:, 0] = const
        t[:, 1::2] = c * pos.real
        t[:, 2::2] = c * pos.imag
        return t

    out = [pack(zp[:, 1:], c0)]
    if order >= 1:
        d1 = m * zp[:, :-1]  # ∂_1 z^m = m z^{m-1}, ∂_2 z^m = i m z^{m-1}
        out += [pack(d1, 0.0), pack(1j * d1, 0.0)]
    if order >= 2:
        d2 = np.zeros((N, lmax), dtype=np.complex128)
        if lmax >= 2:
            d2[:, 1:] = (m[1:] * (m[1:] - 1)) * zp[:, : lmax - 1]
        out += [pack(d2, 0.0), pack(1j * d2, 0.0), pack(-d2, 0.0)]
    return out


@functools.lru_cache(maxsize=256)
def _level_layout(j: int, lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """For level j: functions of degree <= l on S^{j-2} (l = 0..lmax) and dim H_k there (k = 0..lmax)."""
    n_low = np.array([n_functions(j - 1, l) for l in range(lmax + 1)])
    counts = np.diff(np.concatenate([[0], n_low]))
    return n_low, counts


def _tables(d: int, lmax: int, x: np.ndarray, grad: bool):
    """Values (Nb, n_real) and, with ``grad``, the d ambient partial derivatives (each (Nb, n_real)) of
    every basis function of degree <= lmax on S^{d-1} at unit vectors x (Nb, d).

    Built up the dimensions: the degree-l block of S^{j-1} is the level factor G_{l-k}^{k+(j-2)/2}
    (repeated over the dim H_k functions of degree k below) times the first n_{j-1}(l) functions of
    S^{j-2}, a contiguous slice (the chains are degree-major), so each level costs one pass.
    """
    order = 1 if grad else 0
    circ = _circle_tables(x[:, 0], x[:, 1], lmax, order)
    V = circ[0]
    Gr = [circ[1], circ[2]] if grad else None
    s = x[:, 0] ** 2 + x[:, 1] ** 2
    L1 = lmax + 1
    nb = x.shape[0]
    for j in range(3, d + 1):
        u = x[:, j - 1]
        s = s + u * u
        tabs = [t.reshape(nb, L1, L1) for t in _level_tables(u, s, (j - 2) / 2.0, lmax, order)]
        n_low, counts = _level_layout(j, lmax)
        size = n_functions(j, lmax)
        newV = np.empty((nb, size))
        newG = [np.empty((nb, size)) for _ in range(j)] if grad else None
        off = 0
        for l in range(L1):
            m = int(n_low[l])
            k = np.arange(l + 1)
            reps = counts[: l + 1]
            A = np.repeat(tabs[0][:, k, l - k], reps, axis=1)
            low = V[:, :m]
            newV[:, off : off + m] = A * low
            if grad:
                Au = np.repeat(tabs[1][:, k, l - k], reps, axis=1)
                As2 = 2.0 * np.repeat(tabs[2][:, k, l - k], reps, axis=1) * low
                for a in range(j - 1):
                    np.multiply(A, Gr[a][:, :m], out=newG[a][:, off : off + m])
                    newG[a][:, off : off + m] += x[:, a, None] * As2
                newG[j - 1][:, off : off + m] = Au * low + u[:, None] * As2
            off += m
        V, Gr = newV, newG
    return V, Gr


class _Factors:
    """The factors of every basis function at a block of points, gathered per level.

    ``f[q]`` (q = 0: Φ; q = j - 2: level j = 3..d) is a list of (Nb, n_real) arrays: value,
    first derivatives (Φ: ∂_1, ∂_2; level j: ∂_u, ∂_s) and, at order 2, second derivatives.
    """

    def __init__(self, b: "HypersphereBasis", x: np.ndarray, order: int):
        d, lmax = b.d, b.lmax
        self.x = x
        self.d = d
        cols = b._columns
        circ = _circle_tables(x[:, 0], x[:, 1], lmax, order)
        self.f = [[t[:, cols[0]] for t in circ]]
        s = x[:, 0] ** 2 + x[:, 1] ** 2
        for j in range(3, d + 1):
            s = s + x[:, j - 1] ** 2
            tabs = _level_tables(x[:, j - 1], s, (j - 2) / 2.0, lmax, order)
            self.f.append([t[:, cols[j - 2]] for t in tabs])
        # others[q] = Π_{p != q} f_p (prefix × suffix products: no division, exact zeros kept)
        vals = [fq[0] for fq in self.f]
        self.value = None
        if order >= 1:
            nq = len(vals)
            suffix = [None] * nq
            acc = np.ones_like(vals[0])
            for q in range(nq - 1, -1, -1):
                suffix[q] = acc
                acc = acc * vals[q]
            self.value = acc
            others, pre = [], np.ones_like(vals[0])
            for q in range(nq):
                others.append(pre * suffix[q])
                pre = pre * vals[q]
            self.others = others
        else:
            acc = vals[0]
            for v in vals[1:]:
                acc = acc * v
            self.value = acc

    def gradient(self, C: np.ndarray) -> np.ndarray:
        """Ambient gradients ∇P (Nb, K, d) of the K fields with coefficient columns C (n_real, K)."""
        x, d = self.x, self.d
        out = np.zeros((x.shape[0], C.shape[1], d))
        o0 = self.others[0]
        out[:, :, 0] = _dot(C.T, o0 * self.f[0][1]).T
        out[:, :, 1] = _dot(C.T, o0 * self.f[0][2]).T
        acc = np.zeros((x.shape[0], C.shape[1]))
        for j in range(d, 2, -1):
            oq, fq = self.others[j - 2], self.f[j - 2]
            out[:, :, j - 1] += _dot(C.T, oq * fq[1]).T
            acc += _dot(C.T, oq * fq[2]).T
            out[:, :, j - 1] += 2.0 * x[:, j - 1, None] * acc
        out[:, :, 0] += 2.0 * x[:, 0, None] * acc
        out[:, :, 1] += 2.0 * x[:, 1, None] * acc
        return out

    def hessian(self, c: np.ndarray) -> np.ndarray:
        """Ambient Hessian ∇²P (Nb, d, d) of the field with coefficients c (n_real,), from order-2 factors."""
        x, d = self.x, self.d
        nb = x.shape[0]
        H = np.zeros((nb, d, d))
        eye = np.eye(d)

        def vec_e(a):
            return np.broadcast_to(eye[a], (nb, d))

        def vec_x(j):  # x restricted to the first j coordinates
            v = np.zeros((nb, d))
            v[:, :j] = x[:, :j]
            return v

        def add(coef, v, w, sym=True):
            a = np.einsum("bn,n->b", coef, c)
            t = a[:, None, None] * (v[:, :, None] * w[:, None, :])
            H[...] += t + np.transpose(t, (0, 2, 1)) if sym else t

        # first-derivative pieces per level: list of (coefficient table, vector)
        pieces = [[(self.f[0][1], vec_e(0)), (self.f[0][2], vec_e(1))]]
        for j in range(3, d + 1):
            fq = self.f[j - 2]
            pieces.append([(fq[1], vec_e(j - 1)), (2.0 * fq[2], vec_x(j))])
        nq = len(self.f)
        vals = [fq[0] for fq in self.f]
        # self terms: others_q × second derivatives of factor q
        o0, f0 = self.others[0], self.f[0]
        add(o0 * f0[3], vec_e(0), vec_e(0), sym=False)
        add(o0 * f0[4], vec_e(0), vec_e(1))
        add(o0 * f0[5], vec_e(1), vec_e(1), sym=False)
        for j in range(3, d + 1):
            oq, fq = self.others[j - 2], self.f[j - 2]
            ej, xj = vec_e(j - 1), vec_x(j)
            add(oq * fq[3], ej, ej, sym=False)
            add(2.0 * oq * fq[4], ej, xj)
            add(4.0 * oq * fq[5], xj, xj, sym=False)
            a = np.einsum("bn,n->b", 2.0 * oq * fq[2], c)
            H[:, np.arange(j), np.arange(j)] += a[:, None]
        # cross terms: Π_{r ∉ {q, p}} f_r × ∂f_q ⊗ ∂f_p, both orders
        pre = np.ones_like(vals[0])
        for q in range(nq):
            mid = np.ones_like(vals[0])
            for p in range(q + 1, nq):
                suf = np.ones_like(vals[0])
                for r in range(p + 1, nq):
                    suf = suf * vals[r]
                o = pre * mid * suf
                for cq, vq in pieces[q]:
                    for cp, vp in pieces[p]:
                        add(o * cq * cp, vq, vp)
                mid = mid * vals[p]
            pre = pre * vals[q]
        return H


class HypersphereBasis(Basis):
    """Orthonormal hyperspherical harmonics of degree <= lmax on S^{d-1}, d >= 4 (Gegenbauer products).

    The state is the real coefficient vector in the order of :func:`chain_labels`
    (degree-major), so ``to_real``/``from_real`` are copies and resizing is truncation or
    zero-padding. Point transforms (synthesis, adjoint, gradient, Hessian) are direct and
    exact to round-off, O(N n_real); the grid is the product Gauss rule (:class:`HypersphereGrid`).
    ``labels()`` gives the whole chain (l, k_{d-1}, ..., k_2 = ``|m|``, m), shape (n_real, d).
    One class per dimension, made by :func:`~meanfield.sphere.basis`; its largest degree
    ``max_lmax`` keeps ``n_real <= MAX_FUNCTIONS``.

    Examples
    --------
    >>> from meanfield.sphere import basis
    >>> b = basis(4, 2)
    >>> b.n_real, b.ell.tolist()[:6], float(b.laplacian[-1])
    (14, [0, 1, 1, 1, 1, 2], 8.0)
    >>> x = np.array([[0.0, 0.0, 0.6, 0.8]])
    >>> bool(np.isclose(b.real_basis(x)[0, 0] ** 2, 1 / (2 * np.pi ** 2)))   # Y_0 = |S^3|^{-1/2}
    True
    """

    #: Direct evaluation: 4.6e-6 – 1.6e-5 s per coefficient and field at 1000 points measured
    #: (d = 4..16, lmax 3..64, 285–93665 coefficients, two cores at load 8.6), rounded up.
    eval_seconds_per_coeff = 2e-5

    @classmethod
    def for_dimension(cls, d: int) -> type:
        """The basis class of S^{d-1} (``d`` and ``max_lmax`` set); :func:`~meanfield.sphere.basis` uses it."""
        return _dimension_class(cls, int(d))

    @property
    def n_state(self) -> int:
        return self.n_real

    @property
    def n_real(self) -> int:
        return n_functions(self.d, self.lmax)

    def __repr__(self) -> str:
        return f"HypersphereBasis(d={self.d}, lmax={self.lmax})"

    @functools.cached_property
    def _labels(self) -> np.ndarray:
        lab = chain_labels(self.d, self.lmax)
        lab.flags.writeable = False
        return lab

    @functools.cached_property
    def _columns(self) -> list[np.ndarray]:
        """Per level the table column of every basis function: Φ (S^1 order), then level j = 3..d."""
        lab, d, L = self._labels, self.d, self.lmax + 1
        m = lab[:, -1]
        cols = [np.where(m == 0, 0, np.where(m > 0, 2 * m - 1, -2 * m))]
        k_prev = np.abs(m)
        for j in range(3, d + 1):
            k_j = lab[:, d - j]
            cols.append(k_prev * L + (k_j - k_prev))
            k_prev = k_j
        return cols

    def _layout(self):
        ell = self._labels[:, 0].copy()
        return ell, np.ones(ell.size)

    def real_degrees(self) -> np.ndarray:
        return self._labels[:, 0].copy()

    def labels(self) -> np.ndarray:
        return self._labels.copy()

    def resize(self, c: np.ndarray, lmax: int) -> np.ndarray:
        out = np.zeros(n_functions(self.d, lmax))
        n = min(c.size, out.size)
        out[:n] = c[:n]
        return out

    @classmethod
    def lmax_from_size(cls, size: int, dtype) -> int | None:
        lo, hi = 0, cls.max_lmax  # n_functions is increasing in lmax
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if n_functions(cls.d, mid) < size else (lo, mid)
        return lo if n_functions(cls.d, lo) == size else None

    def to_real(self, c: np.ndarray) -> np.ndarray:
        return np.array(c, dtype=np.float64, copy=True)

    def from_real(self, b: np.ndarray) -> np.ndarray:
        return np.array(b, dtype=np.float64, copy=True)

    # -- point transforms ------------------------------------------------------------------
    def _blocks(self, n: int):
        block = max(_MIN_BLOCK, _BLOCK_ELEMENTS // max(self.n_real, (self.lmax + 1) ** 2))
        return range(0, n, block), block

    @staticmethod
    def _unit(x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def real_basis(self, x: np.ndarray) -> np.ndarray:
        x = self._unit(x)
        out = np.empty((x.shape[0], self.n_real))
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            out[s : s + block] = _tables(self.d, self.lmax, x[s : s + block], False)[0]
        return out

    def dirac(self, x: np.ndarray) -> np.ndarray:
        return self.real_basis(x)

    def synth_rows(self, coeffs, x, *, grad: bool = True, epsilon=None):
        """Values (K, N) and, with ``grad``, ambient surface gradients (K, N, d) of K fields (K, n_real)."""
        x = self._unit(x)
        C = np.ascontiguousarray(np.atleast_2d(np.asarray(coeffs, dtype=np.float64)))
        n, K, d = x.shape[0], C.shape[0], self.d
        vals = np.empty((K, n))
        grads = np.empty((K, n, d)) if grad else None
        starts, block = self._blocks(n)
        for s in starts:
            xb = x[s : s + block]
            V, G = _tables(d, self.lmax, xb, grad)
            vals[:, s : s + block] = _dot(C, V)
            if grad:
                g = np.stack([_dot(C, Ga) for Ga in G], axis=2)  # (K, Nb, d) ambient
                g -= np.einsum("knd,nd->kn", g, xb)[:, :, None] * xb[None]
                grads[:, s : s + block] = g
        return vals, grads

    def adjoint_rows(self, values, x, *, epsilon=None) -> np.ndarray:
        """Σ_q values_kq Y(x_q) for each row k of ``values`` (K, N): shape (K, n_real); degree 0 by the exact sum."""
        x = self._unit(x)
        V = np.atleast_2d(np.asarray(values, dtype=np.float64))
        out = np.zeros((V.shape[0], self.n_real))
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            out += np.einsum("kb,bn->kn", V[:, s : s + block], _tables(self.d, self.lmax, x[s : s + block], False)[0])
        out[:, 0] = V.sum(axis=1) / math.sqrt(sphere_area(self.d))
        return out

    def evaluate(self, c, x, *, epsilon=None):
        return self.synth_rows(np.asarray(c)[None], x, grad=False)[0][0]

    def adjoint(self, values, x, *, epsilon=None):
        return self.adjoint_rows(np.asarray(values)[None], x)[0]

    def gradient_at(self, c, x, *, epsilon=None):
        return self.synth_rows(np.asarray(c)[None], x)[1][0]

    def gradient_adjoint(self, F: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Σ_q F_q · ∇_S Y(x_q) for tangent vectors F (N, d) at unit vectors x (N, d): shape (n_real,).

        The transpose of :meth:`gradient_at`; ``-gradient_adjoint(w F, x)`` is the weak
        divergence of a tangent field F sampled with quadrature weights w.
        """
        x = self._unit(x)
        F = np.asarray(F, dtype=np.float64)
        F = F - np.einsum("ij,ij->i", F, x)[:, None] * x
        out = np.zeros(self.n_real)
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            _, G = _tables(self.d, self.lmax, x[s : s + block], True)
            for a, Ga in enumerate(G):
                out += np.einsum("b,bn->n", F[s : s + block, a], Ga)
        return out

    def hessian_at(self, c, x, *, epsilon=None):
        x = self._unit(x)
        c = np.asarray(c, dtype=np.float64)
        n, d = x.shape
        val, grad, H = np.empty(n), np.empty((n, d)), np.empty((n, d, d))
        # order-2 factors: 6 tables per level, so smaller blocks
        block = max(1, _BLOCK_ELEMENTS // (4 * max(self.n_real, (self.lmax + 1) ** 2)))
        eye = np.eye(d)
        for s in range(0, n, block):
            xb = x[s : s + block]
            fac = _Factors(self, xb, 2)
            val[s : s + block] = np.einsum("bn,n->b", fac.value, c)
            g = fac.gradient(c[:, None])[:, 0, :]
            radial = np.einsum("ij,ij->i", g, xb)
            P = eye[None] - xb[:, :, None] * xb[:, None, :]
            Hb = P @ fac.hessian(c) @ P - radial[:, None, None] * P
            H[s : s + block] = Hb
            grad[s : s + block] = g - radial[:, None] * xb
        return val, grad, H

    # -- grids -------------------------------------------------------------------------
    def grid(self, n: int | None = None) -> "HypersphereGrid":
        return HypersphereGrid(self, n)

    def plot_values(self, c, nlat=None, nlon=None):
        """Values on the great 2-sphere {x_4 = ... = x_d = 0}: (colatitude from e_3, longitude, values (nlat, nlon))."""
        nlat = nlat or max(65, 2 * self.lmax + 3)
        nlon = nlon or 2 * nlat
        th = np.pi * np.arange(nlat) / (nlat - 1)
        ph = 2 * np.pi * np.arange(nlon) / nlon
        T, P = np.meshgrid(th, ph, indexing="ij")
        x = np.zeros((T.size, self.d))
        x[:, 0] = (np.sin(T) * np.cos(P)).ravel()
        x[:, 1] = (np.sin(T) * np.sin(P)).ravel()
        x[:, 2] = np.cos(T).ravel()
        return th, ph, self.evaluate(c, x).reshape(nlat, nlon)


@functools.lru_cache(maxsize=None)
def _dimension_class(base: type, d: int) -> type:
    lo, hi = 0, 1
    while n_functions(d, hi) <= MAX_FUNCTIONS:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if n_functions(d, mid) <= MAX_FUNCTIONS else (lo, mid)
    lm = lo
    return type(base.__name__, (base,), {"d": d, "max_lmax": lm, "__module__": base.__module__,
                                         "__doc__": base.__doc__})


register_basis(4, and_above=True)(HypersphereBasis)


def grid_cost(d: int, lmax: int, n: int) -> tuple[float, float]:
    """(seconds of one synthesis + analysis pair, bytes of the nodes) of a :class:`HypersphereGrid`."""
    q = 2.0 * n * float(n) ** (d - 2)
    return 2 * EVAL_SECONDS_PER_ENTRY * q * n_functions(d, lmax), 8.0 * q * (3 * d + 2)


class HypersphereGrid(Grid):
    """Product Gauss grid of :class:`HypersphereBasis`: n Gauss–Gegenbauer nodes per level t_j and 2n angles.

    Exact for polynomials of degree <= 2n - 1 (:func:`~meanfield.sphere.product_nodes`); the
    default n = 3 lmax / 2 + 2 obeys the 3/2 rule. Transforms are the basis' direct point
    transforms at the Q = 2n · n^{d-2} nodes (synthesis, quadrature analysis, gradient, weak
    divergence -Σ_q w_q F_q · ∇Y(x_q)); the tangent frame is :func:`householder_frame`.
    """

    def __init__(self, basis: HypersphereBasis, n: int | None = None):
        self.basis, self.lmax, self.d = basis, basis.lmax, basis.d
        self.n = (3 * self.lmax) // 2 + 2 if n is None else int(n)
        secs, mem = grid_cost(self.d, self.lmax, self.n)
        if secs > _validate.COST_LIMIT_SECONDS or mem > _validate.COST_LIMIT_BYTES:
            lo = 1
            while True:
                s2, m2 = grid_cost(self.d, self.lmax, lo + 1)
                if s2 > _validate.COST_LIMIT_SECONDS or m2 > _validate.COST_LIMIT_BYTES:
                    break
                lo += 1
            check_cost(f"HypersphereGrid (d = {self.d}, lmax = {self.lmax})", seconds=secs, memory=mem,
                       parameter="nodes per level n", value=self.n, largest=lo)
        self.points, self.weights = product_nodes(self.d, self.n, 2 * self.n, 0.0)

    @functools.cached_property
    def _frame(self) -> list[np.ndarray]:
        return householder_frame(self.points)

    def describe(self) -> dict:
        return {"nlat": self.n, "nphi": 2 * self.n, "M": None, "Q": self.Q}

    def synth(self, c):
        return self.basis.evaluate(c, self.points)

    def analysis(self, f):
        return self.basis.adjoint_rows((self.weights * f)[None], self.points)[0]

    def frame(self):
        return self._frame

    def gradient(self, c):
        return self.components(self.basis.gradient_at(c, self.points))

    def divergence(self, comps):
        return -self.basis.gradient_adjoint(self.weights[:, None] * self.ambient(comps), self.points)

    def synth_real(self, coeffs, lmax):
        b = self.basis if lmax == self.lmax else type(self.basis)(lmax)
        return b.synth_rows(np.atleast_2d(coeffs), self.points, grad=False)[0].T
