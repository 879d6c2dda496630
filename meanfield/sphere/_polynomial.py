"""Low-degree fields on S^{d-1} as homogeneous polynomials: exact values and gradients at points.

A real harmonic of degree l is the restriction of a homogeneous harmonic polynomial H_l of
degree l, and on the sphere H_l(x) = |x|^{D-l} H_l(x) for any D - l even. A field of degree
<= L is therefore, on the sphere, the sum P_L(x) + P_{L-1}(x) of two homogeneous polynomials:
its degrees of the parity of L lifted to degree L, the others to degree L - 1. The monomials of
degree D in d variables number C(D + d - 1, d - 1) = Σ_k N(d, D - 2k), exactly the harmonics
of degree <= D of that parity, so the map from real coefficients to monomial coefficients is
square and invertible. At points the monomials are formed by one product each from those of
one degree lower, and the surface gradient is P_x ∇(P_L + P_{L-1}) with the monomial
derivatives: a few multiply-adds per point and coefficient, no transcendental function, exact
to round-off. For the noise fields of the theory (degree <= 6 on S^2) values and gradients
cost 2-3 times less than with ducc0's non-uniform transforms (values alone about the same),
and on S^{d-1}, d >= 4, 13-45 times less than with the Gegenbauer-product tables.
"""

from __future__ import annotations

import threading

import numpy as np

from .._threads import parallel_rows

__all__ = ["HomogeneousForm", "homogeneous_exponents"]

#: Points per block: the monomial tables of a block stay in cache.
_BLOCK = 4096
#: Widest work arrays whose rows are contiguous; wider ones get :data:`_PAD` more entries a row
#: (see :meth:`_Tables.work`).
_CONTIGUOUS_MAX = 2048
_PAD = 8
#: Relative residual above which the conversion is refused (the caller keeps its transforms).
_MAX_RESIDUAL = 1e-12


def homogeneous_exponents(d: int, degree: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exponents (n, d) of the monomials of one degree, and how each is one product from the degree below.

    Returns ``(exponents, parent, var)``: monomial j of ``degree`` is monomial ``parent[j]``
    of ``degree - 1`` (in the order this function gives it) times x[var[j]], where ``var[j]``
    is the first variable of nonzero exponent. n = C(degree + d - 1, d - 1); the order is that
    of :func:`~meanfield.sphere.monomial_exponents` within one degree.

    Examples
    --------
    >>> e, parent, var = homogeneous_exponents(3, 2)
    >>> e.tolist()
    [[2, 0, 0], [1, 1, 0], [1, 0, 1], [0, 2, 0], [0, 1, 1], [0, 0, 2]]
    >>> parent.tolist(), var.tolist()     # x0² = x0·x0, x0 x1 = x1·x0, ..., x2² = x2·x2
    ([0, 1, 2, 1, 2, 2], [0, 0, 0, 1, 1, 2])
    """
    prev = _exponents(d, degree - 1) if degree > 0 else None
    exps = _exponents(d, degree)
    if prev is None:
        return exps, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    var = np.argmax(exps > 0, axis=1)
    lower = exps.copy()
    lower[np.arange(len(exps)), var] -= 1
    return exps, _lookup(prev, lower), var


def _exponents(d: int, degree: int) -> np.ndarray:
    """Exponents of total ``degree`` in the order of :func:`~meanfield.sphere.monomial_exponents`."""
    from ._hyper import monomial_exponents  # _hyper imports the basis layer, which imports this module

    if degree == 0:
        return np.zeros((1, d), dtype=np.int64)
    exps = monomial_exponents(d, degree)
    return exps[exps.sum(axis=1) == degree]


def _lookup(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index in ``table`` of every row of ``rows`` (all present)."""
    base = int(table.max(initial=0)) + 1
    w = base ** np.arange(table.shape[1], dtype=np.int64)
    keys = table @ w
    order = np.argsort(keys)
    return order[np.searchsorted(keys[order], rows @ w)]


class HomogeneousForm:
    """The fields of a harmonic basis of degree <= L as two homogeneous polynomials (see the module).

    Built from the basis' own real harmonics, by solving for the monomial coefficients of each
    parity on sample points (a square, well-conditioned system at low degree: condition 35 for
    L = 6 on S^2, 800 for L = 10); :meth:`from_basis` returns None when the residual exceeds
    1e-12, and callers then keep their transforms.

    Attributes
    ----------
    d, lmax : int
    parts : list of (degree D, real-coefficient columns, matrix X (n_D, n_cols))
        Monomial coefficients of degree D of a field: ``X @ c[cols]``.
    residual : float
        Largest relative residual of the conversion on the sample points.

    Examples
    --------
    >>> from meanfield.sphere import basis
    >>> b = basis(3, 6)
    >>> form = b.polynomial
    >>> x = np.array([[0.0, 0.6, 0.8], [1.0, 0.0, 0.0]])
    >>> c = np.arange(49.0)[None] / 49
    >>> vals, grads = form.synth_rows(c, x)
    >>> bool(np.allclose(vals, c @ b.real_basis(x).T, atol=1e-13))
    True
    >>> bool(np.allclose(np.einsum("knd,nd->kn", grads, x), 0.0))   # tangent to the sphere
    True
    """

    def __init__(self, d: int, lmax: int, parts, residual: float, tables: "_Tables | None" = None):
        self.d, self.lmax, self.parts, self.residual = d, lmax, parts, residual
        self._tables = _Tables(d, lmax) if tables is None else tables
        # ∂/∂x_i maps the monomial coefficients of degree D to those of degree D - 1
        self._deriv = {}
        for D, _, _ in parts:
            if D == 0:
                continue
            exps = _exponents(d, D)
            lower_exps = _exponents(d, D - 1)
            rows, cols, vals = [], [], []
            for i in range(d):
                has = np.nonzero(exps[:, i] > 0)[0]
                lower = exps[has].copy()
                lower[:, i] -= 1
                rows.append(i * len(lower_exps) + _lookup(lower_exps, lower))
                cols.append(has)
                vals.append(exps[has, i].astype(float))
            M = np.zeros((d * len(lower_exps), len(exps)))
            M[np.concatenate(rows), np.concatenate(cols)] = np.concatenate(vals)
            self._deriv[D] = M

    @classmethod
    def from_basis(cls, basis) -> "HomogeneousForm | None":
        """The form of ``basis`` (any d), or None when its conversion is not accurate to 1e-12."""
        d, L = basis.d, basis.lmax
        degrees = basis.real_degrees()
        n_sample = max(64, 4 * basis.n_real)
        # a fixed point set: the conversion is a property of the basis, not a random draw
        y = np.random.default_rng(0).normal(size=(n_sample, d))
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        B = basis.real_basis(y)
        recipe = _Tables(d, L)  # kept by the form: the sample tables are copies, the work arrays its own
        tables = [t.copy() for t in recipe(np.ascontiguousarray(y.T))]
        parts, residual = [], 0.0
        for D in (L, L - 1):
            if D < 0:
                continue
            cols = np.nonzero(degrees % 2 == D % 2)[0]
            A = tables[D].T
            if A.shape[1] != cols.size:  # pragma: no cover - a basis without the harmonic dimensions
                return None
            X = np.linalg.lstsq(A, B[:, cols], rcond=None)[0]
            scale = max(float(np.abs(B[:, cols]).max()), 1e-300)
            residual = max(residual, float(np.abs(A @ X - B[:, cols]).max()) / scale)
            parts.append((D, cols, np.ascontiguousarray(X)))
        if residual > _MAX_RESIDUAL:
            return None
        return cls(d, L, parts, residual, recipe)

    def synth_rows(self, coeffs: np.ndarray, x: np.ndarray, *, grad: bool = True):
        """Values (K, N) and, with ``grad``, surface gradients (K, N, d) of K fields at directions x.

        ``coeffs``: real-basis coefficients (K, n_real); ``x``: nonzero vectors (N, d), read as
        their directions ``x / |x|``.
        """
        C = np.atleast_2d(np.asarray(coeffs, dtype=np.float64))
        x = np.asarray(x, dtype=np.float64)
        K, n, d = C.shape[0], x.shape[0], self.d
        P = {D: C[:, cols] @ X.T for D, cols, X in self.parts}  # (K, n_D)
        G = {D: (P[D] @ self._deriv[D].T).reshape(K * d, -1) for D in P if grad and D > 0}
        vals = np.empty((K, n))
        grads = np.empty((K, d, n)) if grad else None

        def rows(a: int, b: int) -> None:
            for s in range(a, b, _BLOCK):
                e = min(b, s + _BLOCK)
                xb = x[s:e]
                r = np.sqrt(np.einsum("ij,ij->i", xb, xb))
                ub = np.divide(xb.T, r, out=self._tables.work("u", d, e - s))  # directions, (d, B)
                M = self._tables(ub)
                v = vals[:, s:e]
                v[:] = 0.0
                for D, p in P.items():
                    v += p @ M[D]
                if grad:
                    g = grads[:, :, s:e]
                    g[:] = 0.0
                    tmp = self._tables.work("grad", K * d, e - s)
                    for D, q in G.items():
                        np.matmul(q, M[D - 1], out=tmp)
                        g += tmp.reshape(K, d, -1)
                    # surface gradient: remove the radial part of the ambient one
                    radial = tmp.reshape(K, d, -1)
                    np.multiply(np.einsum("kin,in->kn", g, ub)[:, None, :], ub[None], out=radial)
                    g -= radial

        parallel_rows(rows, n)  # rows are independent: the same numbers on any number of threads
        return vals, (np.transpose(grads, (0, 2, 1)) if grad else None)


class _Tables:
    """How the monomial tables of degrees 0..L are formed, and per-thread work arrays for them.

    In the lexicographic order of :func:`homogeneous_exponents`, the monomials of degree k
    whose first variable is x_j are x_j times a contiguous tail of degree k - 1 (those whose
    variables are all >= j), so each degree is d products of contiguous row ranges, with no
    gather (bitwise the same products as a gather of the parents; 1.4-2.1x faster tables at
    256-4096 points, d = 2, 3, 5, measured). Writing into arrays kept between calls matters:
    fresh (n_k, block) arrays of a few hundred kB are mapped and page-faulted by the allocator
    on every call (141-249 against 7-21 us per degree at 2048 points, measured).
    """

    def __init__(self, d: int, L: int):
        self.L = L
        self.groups, self.offset = [], [0, 1]
        for k in range(1, L + 1):
            exps, parent, var = homogeneous_exponents(d, k)
            edges = np.searchsorted(var, np.arange(d + 1))  # var is non-decreasing
            groups = []
            for j in range(d):
                a, b = int(edges[j]), int(edges[j + 1])
                if b > a:
                    p0 = int(parent[a])
                    if not np.array_equal(parent[a:b], np.arange(p0, p0 + b - a)):  # pragma: no cover
                        raise AssertionError(f"parents of degree {k}, variable {j} are not contiguous")
                    groups.append((j, a, b, p0))
            self.groups.append(groups)
            self.offset.append(self.offset[-1] + len(exps))
        self._local = threading.local()

    def work(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A (rows, cols) work array of this thread, reused from call to call.

        Its rows are contiguous up to :data:`_CONTIGUOUS_MAX` columns and one cache line longer
        above. Measured against rows of the fixed width 4096 (S^2, degree 6, three fields with
        gradients): 1.14-1.30x faster at 256-2048 points with contiguous rows (1.12-1.20x against
        padded ones there), and 1.10-1.16x at 3072-20000 points with padded rows (contiguous ones
        of 4096 doubles, 32 kB apart, were no faster than the fixed width).
        """
        width = cols if cols <= _CONTIGUOUS_MAX else cols + _PAD
        need = rows * width
        buf = getattr(self._local, name, None)
        if buf is None or buf.size < need:
            buf = np.empty(max(need, rows * (_BLOCK + _PAD)))
            setattr(self._local, name, buf)
        return buf[:need].reshape(rows, width)[:, :cols]

    def __call__(self, uT: np.ndarray) -> list:
        """Monomial tables of degree 0..L at points uT (d, B): list of (n_k, B) views of one work array."""
        B = uT.shape[1]
        buf = self.work("tables", self.offset[-1], B)
        out = [buf[0:1]]
        out[0][:] = 1.0
        for k in range(1, self.L + 1):
            t = buf[self.offset[k] : self.offset[k + 1]]
            prev = out[k - 1]
            for j, a, b, p0 in self.groups[k - 1]:
                np.multiply(prev[p0 : p0 + b - a], uT[j], out=t[a:b])
            out.append(t)
        return out
