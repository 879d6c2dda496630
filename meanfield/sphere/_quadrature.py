"""Quadrature rules on S^1, S^2 and S^{d-1}: the one place where Gauss nodes are built."""

from __future__ import annotations

import functools

import ducc0
import numpy as np
from scipy import special

from .. import _validate
from .._validate import as_int, check_cost

__all__ = ["gauss_legendre", "gauss_gegenbauer", "sphere_quadrature", "circle_quadrature", "product_quadrature"]


@functools.lru_cache(maxsize=64)
def _leggauss(n: int) -> tuple[np.ndarray, np.ndarray]:
    # ducc0 computes the nodes in O(n) (NumPy's leggauss solves an n x n eigenproblem)

    theta = np.asarray(ducc0.misc.GL_thetas(n), dtype=np.float64)[::-1]
    w = np.asarray(ducc0.misc.GL_weights(n, 1), dtype=np.float64)[::-1] / (2.0 * np.pi)
    x = np.cos(theta)
    # exact symmetry x(-) = -x(+), w(-) = w(+), and 0 at the centre for odd n
    h = n // 2
    x[:h] = -x[n - 1 : n - 1 - h : -1]
    w[:h] = w[n - 1 : n - 1 - h : -1]
    if n % 2:
        x[h] = 0.0
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w)
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes (increasing) and weights on [-1, 1], cached per n (read-only arrays).

    Exact for polynomials of degree <= 2n - 1.

    Examples
    --------
    >>> x, w = gauss_legendre(3)
    >>> round(float(w.sum()), 14), round(float(w @ x**4), 14)
    (2.0, 0.4)
    """
    n = as_int(n, "n", min_value=1)
    return _leggauss(n)


def sphere_quadrature(n_lat: int, n_lon: int | None = None, *, offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre × uniform-longitude product rule on S^2.

    Nodes ``(sin θ_i cos φ_j, sin θ_i sin φ_j, cos θ_i)`` with ``cos θ_i`` the
    Gauss–Legendre nodes on [-1, 1] and ``φ_j = 2π (j + offset) / n_lon``; weights
    ``w_i 2π / n_lon`` (sum 4π).  Exact for spherical harmonics of degree
    ``l <= 2 n_lat - 1`` when ``n_lon >= 2 n_lat``.

    Parameters
    ----------
    n_lat : int, >= 1
        Number of latitudes.
    n_lon : int, >= 1, optional
        Number of longitudes; ``2 n_lat`` if None.
    offset : float
        Longitude offset in units of the spacing (0.5: staggered; 0: ducc0's "GL" grid).

    Returns
    -------
    nodes : ndarray, shape (n_lat n_lon, 3)
        Latitude-major (cos θ increasing).
    weights : ndarray, shape (n_lat n_lon,)

    Examples
    --------
    >>> nodes, w = sphere_quadrature(4)
    >>> nodes.shape, round(float(w.sum()) / 3.141592653589793, 12)
    ((32, 3), 4.0)
    """
    n_lat = as_int(n_lat, "n_lat", min_value=1)
    n_lon = 2 * n_lat if n_lon is None else as_int(n_lon, "n_lon", min_value=1)
    t, w = gauss_legendre(n_lat)
    phi = 2.0 * np.pi * (np.arange(n_lon) + offset) / n_lon
    s = np.sqrt(1.0 - t**2)
    nodes = np.stack(
        [np.outer(s, np.cos(phi)), np.outer(s, np.sin(phi)), np.repeat(t[:, None], n_lon, axis=1)],
        axis=-1,
    ).reshape(-1, 3)
    nodes /= np.linalg.norm(nodes, axis=1, keepdims=True)
    return nodes, np.repeat(w * (2.0 * np.pi / n_lon), n_lon)


def circle_quadrature(n: int, *, offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Uniform (trapezoidal) rule on S^1: ``n`` equispaced nodes, weights ``2π/n``.

    Exact for Fourier modes of degree ``|k| < n``.

    Parameters
    ----------
    n : int, >= 1
        Number of nodes.
    offset : float
        Node offset in units of the spacing: ``φ_j = 2π (j + offset) / n``.

    Returns
    -------
    nodes : ndarray, shape (n, 2)
        ``(cos φ_j, sin φ_j)``.
    weights : ndarray, shape (n,)

    Examples
    --------
    >>> nodes, w = circle_quadrature(4)
    >>> nodes.shape, bool(np.isclose(w.sum(), 2 * np.pi))
    ((4, 2), True)
    """
    n = as_int(n, "n", min_value=1)
    phi = 2.0 * np.pi * (np.arange(n) + offset) / n
    return np.stack([np.cos(phi), np.sin(phi)], axis=1), np.full(n, 2.0 * np.pi / n)


@functools.lru_cache(maxsize=64)
def _gauss_jacobi_sym(n: int, a2: int) -> tuple[np.ndarray, np.ndarray]:
    # a2 = 2a: the weight (1 - t²)^a with a = a2 / 2 (a half-integer on the levels of S^{d-1})
    if a2 == 0:
        x, w = _leggauss(n)
        return x, w
    x, w = special.roots_jacobi(n, a2 / 2.0, a2 / 2.0)
    # exact symmetry, as for Gauss–Legendre
    h = n // 2
    x[:h] = -x[n - 1 : n - 1 - h : -1]
    w[:h] = w[n - 1 : n - 1 - h : -1]
    if n % 2:
        x[h] = 0.0
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    x.flags.writeable = False
    w.flags.writeable = False
    return x, w


def gauss_gegenbauer(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss nodes (increasing) and weights on [-1, 1] for the weight (1 - t²)^{(d-3)/2}, d >= 3.

    This is the weight of the coordinate t = x_d on S^{d-1} (``dσ = (1 - t²)^{(d-3)/2} dt dσ_{d-2}``):
    Gauss–Legendre for d = 3, Gauss–Gegenbauer (Jacobi with equal exponents) above.
    Exact for polynomials of degree <= 2n - 1; cached per (n, d) (read-only arrays).

    Examples
    --------
    >>> t, w = gauss_gegenbauer(3, 4)      # weight sqrt(1 - t²)
    >>> round(float(w.sum()) / 3.141592653589793, 14), round(float(w @ t**4) / 3.141592653589793, 14)
    (0.5, 0.0625)
    """
    n = as_int(n, "n", min_value=1)
    d = as_int(d, "d", min_value=3)
    return _gauss_jacobi_sym(n, d - 3)


def product_nodes(d: int, n: int, n_phi: int, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (Q, d) and weights (Q,) of the product rule: n Gauss nodes per level t_j, n_phi angles.

    Hyperspherical coordinates: x_d = t_d, x_j = r_j t_j with r_d = 1 and
    r_{j-1} = r_j sqrt(1 - t_j²) (j = d..3), then (x_1, x_2) = r_2 (cos φ, sin φ). Level j
    carries the weight (1 - t_j²)^{(j-3)/2} (:func:`gauss_gegenbauer`), the angle the uniform
    rule of ``n_phi`` points (``φ_k = 2π (k + offset) / n_phi``). Nodes are ordered with φ
    fastest, then t_3, ..., t_d slowest. No validation (see :func:`product_quadrature`).
    """
    phi = 2.0 * np.pi * (np.arange(n_phi) + offset) / n_phi
    # build from the bottom: points of S^1, then lift to S^2, ..., S^{d-1}
    pts = np.stack([np.cos(phi), np.sin(phi)], axis=1)
    w = np.full(n_phi, 2.0 * np.pi / n_phi)
    for j in range(3, d + 1):
        t, wt = gauss_gegenbauer(n, j)
        s = np.sqrt(np.maximum(1.0 - t * t, 0.0))
        q = pts.shape[0]
        new = np.empty((n, q, j))
        new[:, :, : j - 1] = s[:, None, None] * pts[None, :, :]
        new[:, :, j - 1] = t[:, None]
        pts = new.reshape(n * q, j)
        w = (wt[:, None] * w[None, :]).ravel()
    return pts, w


def product_quadrature(d: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Product Gauss rule on S^{d-1} exact for every polynomial of degree <= ``degree``.

    In hyperspherical coordinates (x_d = t_d, x_j = r_j t_j, r_{j-1} = r_j sqrt(1 - t_j²),
    (x_1, x_2) = r_2 (cos φ, sin φ)) the surface measure is
    ``dσ = Π_{j=3}^{d} (1 - t_j²)^{(j-3)/2} dt_j · dφ``. The rule takes
    n = ``degree // 2 + 1`` Gauss–Gegenbauer nodes for each t_j (exact to degree 2n - 1) and
    ``degree + 1`` equispaced angles φ (exact for trigonometric degree <= degree). A polynomial
    of degree D in x becomes, level by level, a polynomial of degree <= D in t_j times an
    inner polynomial whose odd parts integrate to zero exactly, so the product is exact for
    D <= ``degree``: in particular products Y_i Y_j of harmonics with l_i + l_j <= degree.

    Parameters
    ----------
    d : int, >= 2
        Ambient dimension (the sphere is S^{d-1}).
    degree : int, >= 0

    Returns
    -------
    nodes : ndarray, shape (Q, d), Q = (degree + 1) (degree // 2 + 1)^{d-2}
    weights : ndarray, shape (Q,), positive, sum ``|S^{d-1}|``

    Raises
    ------
    ValueError
        The rule would exceed the memory or time limits of :func:`meanfield._validate.check_cost`;
        the message gives the largest accepted degree.

    Examples
    --------
    >>> x, w = product_quadrature(4, 4)
    >>> x.shape, round(float(w.sum()) / 3.141592653589793**2, 12)    # |S^3| = 2 π²
    ((45, 4), 2.0)
    >>> round(float(w @ x[:, 0]**4) / 3.141592653589793**2, 12)       # ∫ x_1⁴ = 2π² · 3/(d(d+2))
    0.25
    """
    d = as_int(d, "d", min_value=2)
    degree = as_int(degree, "degree", min_value=0)
    check_cost("product_quadrature", seconds=0.0, memory=_product_bytes(d, degree), parameter="degree",
               value=degree, largest=_largest_degree(d))
    return product_nodes(d, degree // 2 + 1, degree + 1, 0.5)


def _product_bytes(d: int, degree: int) -> float:
    q = float(degree + 1) * float(degree // 2 + 1) ** (d - 2)
    return 8.0 * q * (2 * d + 2)


def _largest_degree(d: int) -> int:
    lo, hi = 0, 1
    while _product_bytes(d, hi) <= _validate.COST_LIMIT_BYTES and hi < 2**30:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _product_bytes(d, mid) <= _validate.COST_LIMIT_BYTES else (lo, mid)
    return lo
