"""Hyperspherical coordinates, product Gauss–Gegenbauer quadrature and oriented frames on S^{d-1}, any d.

Coordinates. A point of S^{d-1} ⊂ R^d is written with polar angles θ_1, ..., θ_{d-2} in [0, π]
and a longitude φ in [0, 2π), recursively: x = cos θ_1 e_d + sin θ_1 y, y a point of the
sphere S^{d-2} of span(e_1, ..., e_{d-1}), and the last sphere S^1 is (cos φ, sin φ) in
(e_1, e_2). So

    x_d = cos θ_1,   x_{d-1} = sin θ_1 cos θ_2,   ...,   x_3 = sin θ_1 ⋯ sin θ_{d-3} cos θ_{d-2},
    x_1 = sin θ_1 ⋯ sin θ_{d-2} cos φ,   x_2 = sin θ_1 ⋯ sin θ_{d-2} sin φ

(d = 3: colatitude and longitude of :func:`~meanfield.sphere.angles_to_cart`). The surface
measure is Π_k sin^{d-1-k} θ_k dθ_k dφ, i.e. with u_k = cos θ_k,

    dσ = Π_{k=1}^{d-2} (1 - u_k²)^{a_k} du_k · dφ,      a_k = (d - 2 - k) / 2,

a product of Gegenbauer weights (Jacobi α = β = a_k); the last polar weight is Legendre's.

Product rule. n Gauss–Gegenbauer nodes per polar coordinate (Gauss–Jacobi for the weight
(1 - u²)^{a_k}) and n_φ = 2n equispaced longitudes give 2 n^{d-1} nodes with positive weights
summing to ``|S^{d-1}|``, exact for every polynomial of degree <= 2n - 1 restricted to the
sphere (when n_φ >= 2n): integrating a monomial over the inner coordinates leaves a
polynomial of degree <= 2n - 1 in u_k, which the n-point Gauss rule integrates exactly, and
the odd parts vanish by the symmetry of every factor.
"""

from __future__ import annotations


import numpy as np
from scipy import special

from .._validate import as_float, as_int
from ._hypersphere import householder_frame
from ._quadrature import gauss_gegenbauer, product_nodes

__all__ = [
    "polar_exponents",
    "polar_rule",
    "gegenbauer_mass",
    "gegenbauer_mass_inverse",
    "hyperspherical_to_cart",
    "cart_to_hyperspherical",
    "hyperspherical_frame",
    "hypersphere_quadrature",
    "oriented_frame",
    "tangent_volume",
    "monomial_exponents",
    "monomials",
]


def polar_exponents(d: int) -> np.ndarray:
    """Exponents a_k = (d - 2 - k)/2, k = 1..d-2, of the polar weights (1 - u_k²)^{a_k} on S^{d-1}.

    Examples
    --------
    >>> polar_exponents(5).tolist()
    [1.0, 0.5, 0.0]
    """
    d = as_int(d, "d", min_value=2)
    return (d - 2 - np.arange(1, d - 1)) / 2.0


def _total_mass(a: float) -> float:
    """∫_{-1}^{1} (1 - u²)^a du = 2^{2a+1} B(a+1, a+1)."""
    return float(2.0 ** (2 * a + 1) * special.beta(a + 1, a + 1))


def polar_rule(n: int, a: float) -> tuple[np.ndarray, np.ndarray]:
    """n-point Gauss rule for the polar weight (1 - u²)^a, a a half-integer >= 0 (read-only arrays).

    The weight (1 - u²)^a is that of the level t_j, j = 2a + 3, of
    :func:`~meanfield.sphere.gauss_gegenbauer`, whose rule this returns (one home for the Gauss nodes).

    Examples
    --------
    >>> x, w = polar_rule(3, 0.5)           # weight sqrt(1 - u²): total π/2
    >>> round(float(w.sum()) * 2 / np.pi, 13), round(float(w @ x**2) * 8 / np.pi, 13)
    (1.0, 1.0)
    """
    n = as_int(n, "n", min_value=1)
    a = as_float(a, "a", min_value=0.0)
    j = 2.0 * a + 3.0
    if j != round(j):
        raise ValueError(f"a must be a half-integer >= 0 (a polar exponent of S^{{d-1}}), got {a}")
    return gauss_gegenbauer(n, int(round(j)))


def gegenbauer_mass(u, a: float) -> np.ndarray:
    """Cumulative weight F_a(u) = ∫_{-1}^{u} (1 - t²)^a dt (regularised incomplete beta function).

    Examples
    --------
    >>> float(gegenbauer_mass(0.0, 0.0)), round(float(gegenbauer_mass(1.0, 0.5)) / np.pi, 14)
    (1.0, 0.5)
    """
    u = np.clip(np.asarray(u, dtype=np.float64), -1.0, 1.0)
    if a == 0.0:
        return u + 1.0
    return _total_mass(a) * special.betainc(a + 1, a + 1, 0.5 * (1.0 + u))


def gegenbauer_mass_inverse(s, a: float) -> np.ndarray:
    """Inverse of :func:`gegenbauer_mass`: the u in [-1, 1] with F_a(u) = s.

    Examples
    --------
    >>> round(float(gegenbauer_mass_inverse(gegenbauer_mass(0.3, 1.5), 1.5)), 12)
    0.3
    """
    s = np.asarray(s, dtype=np.float64)
    if a == 0.0:
        return np.clip(s - 1.0, -1.0, 1.0)
    p = np.clip(s / _total_mass(a), 0.0, 1.0)
    return 2.0 * special.betaincinv(a + 1, a + 1, p) - 1.0


def hyperspherical_to_cart(theta: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Points of S^{d-1} from polar angles θ (N, d-2) and longitudes φ (N,), shape (N, d).

    Examples
    --------
    >>> np.round(hyperspherical_to_cart(np.array([[np.pi / 2, 0.0]]), np.array([0.0])), 12).tolist()
    [[0.0, 0.0, 1.0, 0.0]]
    """
    theta = np.asarray(theta, dtype=np.float64)
    phi = np.asarray(phi, dtype=np.float64)
    n, k = theta.shape
    d = k + 2
    x = np.empty((n, d))
    x[:, 0] = np.cos(phi)
    x[:, 1] = np.sin(phi)
    # innermost sphere first: y <- cos θ_k e_{d+1-k} + sin θ_k y, k = d-2, ..., 1
    for j in range(k - 1, -1, -1):
        comp = d - 1 - j
        s = np.sin(theta[:, j])
        x[:, :comp] *= s[:, None]
        x[:, comp] = np.cos(theta[:, j])
    return x


def cart_to_hyperspherical(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`hyperspherical_to_cart`: θ (N, d-2) in [0, π] and φ (N,) in [0, 2π).

    Examples
    --------
    >>> th, ph = cart_to_hyperspherical(np.array([[0.0, 1.0, 0.0, 0.0]]))
    >>> np.round(th / np.pi, 12).tolist(), np.round(ph / np.pi, 12).tolist()
    ([[0.5, 0.5]], [0.5])
    """
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    theta = np.empty((n, d - 2))
    sq = np.cumsum(x**2, axis=1)  # sq[:, c] = x_1² + ... + x_{c+1}²
    for j in range(d - 2):
        comp = d - 1 - j
        theta[:, j] = np.arctan2(np.sqrt(sq[:, comp - 1]), x[:, comp])
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    return theta, phi


def hyperspherical_frame(theta: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Unit tangent vectors along the coordinates, [e_{θ_1}, ..., e_{θ_{d-2}}, e_φ], shape (N, d, d-1).

    e_{θ_k} = -sin θ_k e_{d+1-k} + cos θ_k y_{k+1} with y_{k+1} the unit point of the inner
    sphere S^{d-1-k}; e_φ = (-sin φ, cos φ, 0, ..., 0). The vectors are orthonormal (the
    metric is diagonal in these coordinates). At a coordinate pole (sin θ_j = 0 for some j < k)
    the inner directions are still unit vectors, but no longer tangent to a moving coordinate.

    Examples
    --------
    >>> E = hyperspherical_frame(np.array([[0.3, 1.1]]), np.array([2.0]))
    >>> bool(np.allclose(E[0].T @ E[0], np.eye(3)))
    True
    """
    theta = np.asarray(theta, dtype=np.float64)
    phi = np.asarray(phi, dtype=np.float64)
    n, k = theta.shape
    d = k + 2
    E = np.zeros((n, d, d - 1))
    y = np.zeros((n, d))  # the unit point of the current inner sphere
    y[:, 0] = np.cos(phi)
    y[:, 1] = np.sin(phi)
    E[:, 0, d - 2] = -np.sin(phi)
    E[:, 1, d - 2] = np.cos(phi)
    for j in range(k - 1, -1, -1):
        comp = d - 1 - j
        c, s = np.cos(theta[:, j]), np.sin(theta[:, j])
        E[:, :, j] = c[:, None] * y
        E[:, comp, j] = -s
        y *= s[:, None]
        y[:, comp] = c
    return E


def hypersphere_quadrature(d: int, n: int, n_lon: int | None = None, *,
                           offset: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Product Gauss–Gegenbauer × uniform-longitude rule on S^{d-1} (module docstring), any d >= 3.

    n Gauss nodes u_k for the weight (1 - u²)^{(d-2-k)/2} in every polar coordinate
    (θ_k = arccos u_k) and ``n_lon`` longitudes φ_j = 2π (j + offset)/n_lon; weight = product of
    the polar Gauss weights × 2π/n_lon. d = 3 is :func:`~meanfield.sphere.sphere_quadrature`.
    Exact for polynomials of degree <= min(2n - 1, n_lon - 1).

    Parameters
    ----------
    d : int, >= 3
    n : int, >= 1
        Nodes per polar coordinate.
    n_lon : int, optional
        Longitudes (default 2n).
    offset : float
        Longitude offset in units of the spacing.

    Returns
    -------
    nodes : ndarray, shape (n^{d-2} n_lon, d)
        Polar indices major (θ_1 slowest), longitude fastest.
    weights : ndarray, shape (n^{d-2} n_lon,)
        Sum ``|S^{d-1}|``.

    Examples
    --------
    >>> x, w = hypersphere_quadrature(4, 3)
    >>> x.shape, round(float(w.sum()) / (2 * np.pi**2), 13)     # |S^3| = 2π²
    ((54, 4), 1.0)
    >>> round(float(w @ x[:, 0]**4) / (2 * np.pi**2), 13)      # E x_1^4 = 3 / (d (d + 2))
    0.125
    """
    d = as_int(d, "d", min_value=3)
    n = as_int(n, "n", min_value=1)
    n_lon = 2 * n if n_lon is None else as_int(n_lon, "n_lon", min_value=1)
    offset = as_float(offset, "offset")
    # the same coordinates and node order as product_nodes (θ_k is its level t_{d+1-k})
    x, w = product_nodes(d, n, n_lon, offset)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, w


def oriented_frame(x: np.ndarray) -> np.ndarray:
    """Orthonormal tangent frame E (N, d, d-1) at points x (N, d) with det[E_1, ..., E_{d-1}, x] = +1.

    The columns of :func:`~meanfield.sphere.householder_frame`, from the Householder reflection H = I - 2 v v^T / ‖v‖², v = x + s e_d (s = ±1, the
    sign of x_d, so ‖v‖ >= 1): H e_d = -s x, so H e_1, ..., H e_{d-1} span the tangent space,
    and det[H e_1, ..., H e_{d-1}, x] = s; the first column is flipped where s = -1. Any d >= 2.

    Examples
    --------
    >>> x = np.array([[0.5, 0.5, 0.5, 0.5], [0.0, 0.0, 0.0, -1.0]])
    >>> E = oriented_frame(x)
    >>> [round(float(np.linalg.det(np.concatenate([E[i], x[i][:, None]], axis=1))), 12) for i in range(2)]
    [1.0, 1.0]
    """
    x = np.asarray(x, dtype=np.float64)
    E = np.stack(householder_frame(x), axis=2)
    E[:, :, 0] *= np.where(x[:, -1] >= 0, 1.0, -1.0)[:, None]
    return E


def tangent_volume(F: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Oriented volume det[F_1, ..., F_{d-1}, y] of d - 1 tangent vectors F (N, d, d-1) at y (N, d), any d.

    For an orthonormal oriented frame (:func:`oriented_frame`) it is +1; for DT E it is the
    Jacobian determinant of T between oriented tangent spaces.

    Examples
    --------
    >>> y = np.array([[0.0, 0.0, 0.0, 1.0]])
    >>> float(tangent_volume(oriented_frame(y), y)[0])
    1.0
    """
    return np.linalg.det(np.concatenate([F, y[:, :, None]], axis=2))


def monomial_exponents(d: int, degree: int) -> np.ndarray:
    """Exponents α of the monomials x^α in d variables of total degree 1..``degree``, shape (n, d).

    Ordered by degree, then lexicographically (largest power of x_1 first). Restricted to the
    sphere, these together with the constant span the harmonics of degree <= ``degree``.

    Examples
    --------
    >>> monomial_exponents(2, 2).tolist()
    [[1, 0], [0, 1], [2, 0], [1, 1], [0, 2]]
    """
    d = as_int(d, "d", min_value=1)
    degree = as_int(degree, "degree", min_value=0)
    out = []

    def rec(prefix, left, k):
        if k == d - 1:
            out.append(prefix + [left])
            return
        for p in range(left, -1, -1):
            rec(prefix + [p], left - p, k + 1)

    for deg in range(1, degree + 1):
        rec([], deg, 0)
    return np.array(out, dtype=np.int64).reshape(-1, d)


def monomials(x: np.ndarray, degree: int) -> np.ndarray:
    """Values x^α of the monomials of :func:`monomial_exponents` at points x (N, d), shape (N, n).

    Examples
    --------
    >>> monomials(np.array([[0.6, 0.8]]), 2).round(12).tolist()
    [[0.6, 0.8, 0.36, 0.48, 0.64]]
    """
    x = np.asarray(x, dtype=np.float64)
    alpha = monomial_exponents(x.shape[1], degree)
    powers = [np.ones_like(x)]
    for _ in range(int(alpha.max(initial=0))):
        powers.append(powers[-1] * x)
    P = np.stack(powers)  # (degree + 1, N, d)
    out = np.ones((x.shape[0], alpha.shape[0]))
    for j in range(x.shape[1]):
        out *= P[alpha[:, j], :, j].T
    return out
