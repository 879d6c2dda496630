"""Quadrature rules on S^1 and S^2: the one place where Gauss–Legendre nodes are built."""

from __future__ import annotations

import functools

import ducc0
import numpy as np

from .._validate import COST_LIMIT_BYTES, as_int, check_cost

__all__ = ["gauss_legendre", "sphere_quadrature", "circle_quadrature"]


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
    check_cost("gauss_legendre", seconds=0.0, memory=48.0 * n, parameter="n", value=n,
               largest=int(COST_LIMIT_BYTES // 48))
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
    # nodes (3 doubles), weights and the temporaries of the outer products: ~10 doubles a node
    per_lat = 80.0 * n_lon
    check_cost("sphere_quadrature", seconds=0.0, memory=per_lat * n_lat, parameter="n_lat", value=n_lat,
               largest=int(COST_LIMIT_BYTES // per_lat))
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
    check_cost("circle_quadrature", seconds=0.0, memory=48.0 * n, parameter="n", value=n,
               largest=int(COST_LIMIT_BYTES // 48))
    phi = 2.0 * np.pi * (np.arange(n) + offset) / n
    return np.stack([np.cos(phi), np.sin(phi)], axis=1), np.full(n, 2.0 * np.pi / n)
