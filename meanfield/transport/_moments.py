"""Harmonic moments of clouds and densities, and observable errors between them.

The basis is the package's real orthonormal basis (:mod:`meanfield.harmonics`),
so moments compare directly with the SPDE's spectral coefficients.
"""

from __future__ import annotations

import numpy as np

from meanfield._validate import as_int, as_points
from meanfield.harmonics import degrees, real_basis

from ._checks import _as_cloud, _as_quadrature

__all__ = ["harmonic_labels", "real_harmonics", "empirical_moments", "density_moments", "observable_errors"]

# Points per block when evaluating harmonics (bounds the (block, K) basis array).
_HARMONIC_BLOCK = 1 << 15


def harmonic_labels(d: int, lmax: int) -> np.ndarray:
    """Degree and order ``(l, m)`` of each basis function, in basis order.

    S^2 (d = 3): ``l = 0..lmax``, ``m = -l..l`` ascending, so index
    ``l² + l + m`` and ``(lmax + 1)²`` functions.  S^1 (d = 2): ``(0, 0)``, then
    ``(k, k), (k, -k)`` for ``k = 1..lmax`` (``+k`` ↔ cos kφ at index 2k - 1,
    ``-k`` ↔ sin kφ at index 2k), ``2 lmax + 1`` functions.  This is the
    ordering of the package's spectral coefficients (``meanfield.harmonics``).

    Parameters
    ----------
    d : {2, 3}
        Ambient dimension.
    lmax : int, >= 0
        Largest degree.

    Returns
    -------
    ndarray of int, shape (K, 2)

    Examples
    --------
    >>> from meanfield.transport import harmonic_labels
    >>> harmonic_labels(3, 1).tolist()
    [[0, 0], [1, -1], [1, 0], [1, 1]]
    """
    d = as_int(d, "d", min_value=2, max_value=3)
    l = degrees(d, as_int(lmax, "lmax", min_value=0)).astype(int)
    if d == 2:
        # (0, 0), then (k, k) for cos kφ and (k, -k) for sin kφ.
        m = l * np.where(np.arange(l.size) % 2 == 1, 1, -1)
    else:
        m = np.arange(l.size) - l**2 - l
    return np.stack([l, m], axis=1)


def _harmonics(x: np.ndarray, lmax: int) -> np.ndarray:
    """Real orthonormal harmonics at validated points, shape (n, K): the package basis."""
    return real_basis(x.shape[1], lmax, x)


def real_harmonics(x, lmax: int = 2) -> np.ndarray:
    """Real orthonormal spherical harmonics (S^2) or Fourier modes (S^1) at points.

    S^2: with ``Y_l^m`` the complex orthonormal harmonics of
    ``scipy.special.sph_harm_y`` (Condon–Shortley phase included), for m > 0

    .. math::
        Y_{l0} = Y_l^0,\\quad
        Y_{l,m} = \\sqrt2\\, \\operatorname{Re} Y_l^{m},\\quad
        Y_{l,-m} = \\sqrt2\\, \\operatorname{Im} Y_l^{m},

    so that ``Y_{1,-1}, Y_{10}, Y_{11} = sqrt(3/4π) (-y, z, -x)``.  S^1:
    ``1/sqrt(2π)``, then ``cos(kφ)/sqrt(π), sin(kφ)/sqrt(π)`` for k = 1..lmax.
    Orthonormal in L²(surface measure).  Ordering as in
    :func:`harmonic_labels`.  This is the real basis of the package's spectral
    coefficients (``meanfield.harmonics.real_basis``, theory §10 ducc0 packing),
    so moments compare directly with SPDE coefficients ρ_lm.  theory §2, §9(c).

    Parameters
    ----------
    x : array_like, shape (n, d), d in {2, 3}
        Unit vectors.
    lmax : int, >= 0
        Largest degree.

    Returns
    -------
    ndarray, shape (n, K)
        ``K = (lmax+1)²`` on S^2, ``2 lmax + 1`` on S^1.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import real_harmonics
    >>> y = real_harmonics(np.array([[1.0, 0.0, 0.0]]), 1)
    >>> np.round(y / np.sqrt(3 / (4 * np.pi)), 12)[0, 1:] + 0.0
    array([ 0.,  0., -1.])
    """
    x = as_points(x, "x")
    _check_harmonic_dim(x, "x")
    return _harmonics(x, as_int(lmax, "lmax", min_value=0))


def _weighted_harmonics(x: np.ndarray, w: np.ndarray, lmax: int) -> np.ndarray:
    """Σ_i w_i Y_k(x_i) for every basis function, blocked over points."""
    total = np.zeros(harmonic_labels(x.shape[1], lmax).shape[0])
    for i0 in range(0, x.shape[0], _HARMONIC_BLOCK):
        total += w[i0 : i0 + _HARMONIC_BLOCK] @ _harmonics(x[i0 : i0 + _HARMONIC_BLOCK], lmax)
    return total


def _check_harmonic_dim(x: np.ndarray, name: str) -> None:
    if x.shape[1] > 3:
        raise ValueError(f"{name} must have d = 2 or 3 columns for harmonic moments, got shape {x.shape}")


def empirical_moments(x, a=None, lmax: int = 2) -> np.ndarray:
    """Harmonic moments ``<μ, Y_k> = Σ_i a_i Y_k(x_i)`` of a weighted cloud.

    theory §9(c).  Basis and ordering of :func:`real_harmonics` /
    :func:`harmonic_labels`.

    Parameters
    ----------
    x : array_like, shape (n, d), d in {2, 3}
        Unit vectors.
    a : array_like, shape (n,), optional
        Non-negative weights summing to 1 (to 1e-9); uniform if None.
    lmax : int, >= 0
        Largest degree.

    Returns
    -------
    ndarray, shape (K,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import empirical_moments
    >>> m = empirical_moments(np.array([[0.0, 0.0, 1.0]]), lmax=1)
    >>> np.round(m * np.sqrt(4 * np.pi), 6)
    array([1.      , 0.      , 1.732051, 0.      ])
    """
    x, a = _as_cloud(x, a, "x", "a")
    _check_harmonic_dim(x, "x")
    return _weighted_harmonics(x, a, as_int(lmax, "lmax", min_value=0))


def density_moments(nodes, weights, values, lmax: int = 2) -> np.ndarray:
    """Harmonic moments ``<ρ, Y_k> ≈ Σ_q w_q ρ(x_q) Y_k(x_q)`` by quadrature.

    The density is used as given (signed, not renormalised), so the ``k = 0``
    moment is ``mass / sqrt(|S^{d-1}|)``.  Exact for band-limited ρ when the
    rule integrates degree ``deg ρ + lmax`` exactly.  theory §9(c).

    Parameters
    ----------
    nodes : array_like, shape (q, d), d in {2, 3}
        Quadrature nodes.
    weights : array_like, shape (q,)
        Positive quadrature weights.
    values : array_like, shape (q,)
        Density values at the nodes.
    lmax : int, >= 0
        Largest degree.

    Returns
    -------
    ndarray, shape (K,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import density_moments, sphere_quadrature
    >>> nodes, w = sphere_quadrature(8)
    >>> m = density_moments(nodes, w, np.full(len(w), 1 / (4 * np.pi)), lmax=1)
    >>> np.round(m * np.sqrt(4 * np.pi), 12) + 0.0
    array([1., 0., 0., 0.])
    """
    nodes, weights, values = _as_quadrature(nodes, weights, values)
    _check_harmonic_dim(nodes, "nodes")
    return _weighted_harmonics(nodes, weights * values, as_int(lmax, "lmax", min_value=0))


def observable_errors(x, a, nodes, weights, values, lmax: int = 2, *, f=None) -> np.ndarray:
    """Observable errors ``|<μ^N, f_k> - <ρ, f_k>|`` between a cloud and a density.

    By default ``f_k`` are the real harmonics of degree <= ``lmax``
    (:func:`real_harmonics`, ordering of :func:`harmonic_labels`; d = 2 or 3).
    A callable ``f`` mapping an ``(n, d)`` array of unit vectors to ``(n,)`` or
    ``(n, K)`` values replaces them (any d).  The density side is the
    quadrature ``Σ_q w_q ρ(x_q) f_k(x_q)`` of the density as given (signed,
    not renormalised).  Monte Carlo scale for iid particles:
    ``sd(f_k(X)) / sqrt(N)``.  theory §9(c).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Particles, unit vectors.
    a : array_like, shape (n,) or None
        Particle weights summing to 1 (to 1e-9); uniform if None.
    nodes : array_like, shape (q, d)
        Quadrature nodes.
    weights : array_like, shape (q,)
        Positive quadrature weights.
    values : array_like, shape (q,)
        Density values at the nodes.
    lmax : int, >= 0
        Largest harmonic degree (ignored when ``f`` is given).
    f : callable, optional
        Observables ``f(points) -> (n,) or (n, K)``.

    Returns
    -------
    ndarray, shape (K,)

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import observable_errors, sphere_quadrature
    >>> nodes, w = sphere_quadrature(8)
    >>> rho = np.full(len(w), 1 / (4 * np.pi))
    >>> err = observable_errors(nodes, w / w.sum(), nodes, w, rho, lmax=2)
    >>> bool(err.max() < 1e-12)
    True
    """
    x, a = _as_cloud(x, a, "x", "a")
    nodes, weights, values = _as_quadrature(nodes, weights, values)
    if nodes.shape[1] != x.shape[1]:
        raise ValueError(f"x and nodes must have the same dimension d, got x {x.shape} and nodes {nodes.shape}")
    if f is None:
        _check_harmonic_dim(x, "x")
        lmax = as_int(lmax, "lmax", min_value=0)
        return np.abs(_weighted_harmonics(x, a, lmax) - _weighted_harmonics(nodes, weights * values, lmax))
    if not callable(f):
        raise TypeError(
            f"f must be a callable mapping (n, d) points to (n,) or (n, K) values, got {type(f).__name__}"
        )
    fx, fq = (np.asarray(f(pts), dtype=np.float64) for pts in (x, nodes))
    for val, pts, name in ((fx, x, "f(x)"), (fq, nodes, "f(nodes)")):
        if val.ndim not in (1, 2) or val.shape[0] != pts.shape[0]:
            raise ValueError(f"{name} must have shape ({pts.shape[0]},) or ({pts.shape[0]}, K), got {val.shape}")
        if not np.all(np.isfinite(val)):
            raise ValueError(f"{name} contains NaN or infinite values")
    return np.atleast_1d(np.abs(a @ fx - (weights * values) @ fq))
