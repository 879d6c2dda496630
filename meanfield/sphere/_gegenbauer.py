"""Tables of the Gegenbauer-product harmonics on S^{d-1}: labels, recurrences, values and derivatives.

Private helpers of :class:`~meanfield.sphere.HypersphereBasis` (the construction and the
recurrences are described in :mod:`meanfield.sphere._hypersphere`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["n_functions", "chain_labels"]


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
