"""Spherical sliced Wasserstein estimate: exact circle transport on random great circles.

A different metric from W_p (see :func:`sliced_wasserstein_sphere`); it is
only ever returned under its own name, never as W_p.
"""

from __future__ import annotations

import numpy as np

from meanfield._validate import as_int, as_rng

from ._checks import _BLOCK_ELEMENTS, _as_p, _as_pair
from ._circle import circle_wpp_turns

__all__ = ["DEFAULT_N_PROJECTIONS", "sliced_wasserstein_sphere"]

#: Default number of great-circle projections of the sliced estimate.
DEFAULT_N_PROJECTIONS = 256
# Absolute error bound on each slice's W_2^2, in turns^2 (radians^2 / 4π^2).
_SLICED_ATOL = 1e-15


def _great_circle_turns(x: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Angles (turns) of the projections of ``x`` on the great circles of ``frames`` (K, d, 2).

    Returns shape (K, n).  A point orthogonal to a plane (measure zero) gets angle 0.
    """
    K, d, _ = frames.shape
    z = x @ frames.transpose(1, 0, 2).reshape(d, 2 * K)  # (n, 2K): columns (k, 0), (k, 1)
    z = z.reshape(x.shape[0], K, 2)
    return np.mod(np.arctan2(z[..., 1], z[..., 0]).T / (2.0 * np.pi), 1.0)


def _random_frames(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` uniformly random orthonormal 2-frames in R^d (Haar on the Stiefel manifold), (k, d, 2)."""
    q, r = np.linalg.qr(rng.standard_normal((k, d, 2)))
    return q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]


def _as_frames(projections, d: int) -> np.ndarray:
    """Validate user 2-frames, shape (K, d, 2) with orthonormal columns (to 1e-8)."""
    try:
        frames = np.asarray(projections, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("projections must be an array of shape (K, d, 2)") from exc
    if frames.ndim != 3 or frames.shape[0] < 1 or frames.shape[1:] != (d, 2):
        raise ValueError(f"projections must have shape (K, {d}, 2) with K >= 1, got {frames.shape}")
    if not np.all(np.isfinite(frames)):
        raise ValueError("projections contains NaN or infinite values")
    gram = np.einsum("kdi,kdj->kij", frames, frames)
    err = float(np.max(np.abs(gram - np.eye(2))))
    if err > 1e-8:
        raise ValueError(f"projections must have orthonormal columns (U^T U = I to 1e-8), deviation {err:.3g}")
    return frames


def _sliced(x, y, a, b, p, n_projections, seed, projections=None):
    """Sliced value (radians) and its Monte Carlo standard error; validated inputs."""
    if projections is None:
        n_projections = as_int(n_projections, "n_projections", min_value=1)
        frames = _random_frames(x.shape[1], n_projections, as_rng(seed))
    else:
        frames = _as_frames(projections, x.shape[1])
    n_slices = frames.shape[0]
    chunk = max(1, _BLOCK_ELEMENTS // (x.shape[0] + y.shape[0]))
    # Sliced estimates need far less than full precision: each slice's W_2^2 is
    # computed to _SLICED_ATOL turns^2 (see meanfield.transport._circle).
    parts = [
        circle_wpp_turns(
            _great_circle_turns(x, frames[k0 : k0 + chunk]),
            _great_circle_turns(y, frames[k0 : k0 + chunk]),
            a,
            b,
            p,
            atol=_SLICED_ATOL,
        )
        for k0 in range(0, n_slices, chunk)
    ]
    wpp = np.concatenate(parts) * (2.0 * np.pi) ** p
    mean = float(wpp.mean())
    value = mean ** (1.0 / p)
    if n_slices < 2 or mean == 0.0:
        return value, 0.0
    # Delta method: SE(m^(1/p)) = m^(1/p - 1) SE(m) / p.
    se = mean ** (1.0 / p - 1.0) * float(wpp.std(ddof=1)) / np.sqrt(n_slices) / p
    return value, se


def sliced_wasserstein_sphere(
    x,
    y,
    a=None,
    b=None,
    p: int = 2,
    *,
    n_projections: int = DEFAULT_N_PROJECTIONS,
    seed=0,
    projections=None,
    return_se: bool = False,
):
    """Spherical sliced Wasserstein distance (Bonet et al., ICLR 2023), in radians.

    .. math::
        SSW_p(μ, ν) = \\Big( \\int_{V_{d,2}} W_p^p(P^U_\\# μ, P^U_\\# ν)\\, dσ(U) \\Big)^{1/p},
        \\qquad P^U(x) = \\frac{U^T x}{|U^T x|} ∈ S^1,

    estimated with ``n_projections`` Haar-random 2-frames U and the exact circle
    solver per slice (geodesic arc length on each great circle; W_2² per slice
    to 1e-15 turns²).  The same estimator as POT's
    ``ot.sliced_wasserstein_sphere`` — POT's value is this one divided by 2π
    (it works in turns; checked slice by slice with shared ``projections``) —
    vectorised over projections and about 4x cheaper (CPU time on a shared
    2-core machine: 1e4 vs 1e4 points, 50 projections, 1.0-1.1 s versus
    4.0-4.8 s; 1e5 vs 1e5: 11-15 s; 1e5 particles vs 4608 quadrature nodes,
    256 projections: 9-11 s).  On S^1
    (d = 2) every slice is an isometry and the value equals W_p exactly.
    theory §9(b), §10.

    This is a different metric from W_p, not an approximation with a
    guaranteed error.  The projection onto a great circle is not Lipschitz near
    the poles of that circle, so SSW <= W fails: for two Diracs at distance θ
    the ratio SSW_2/W_2 grows like sqrt(log(1/θ)) as θ -> 0.  Measured ratios
    SSW_2/W_2 (geodesic, d = 3, exact W_2 by ``ot.emd2``; clouds with 256
    projections and 10 seeds; Diracs with 2e5 projections):

    =====================================================  ================
    family                                                 SSW_2 / W_2
    =====================================================  ================
    uniform cloud vs itself rotated 0.3 rad (n = 400)      0.39 – 0.44
    two iid uniform clouds (n = 500 each)                  0.50 – 0.76
    two vMF(κ=20) caps at ±z vs one at +x (n = 400)        1.05 – 1.08
    vMF(κ=10) vs vMF(κ=10) rotated 0.5 rad (n = 400)       1.06 – 1.22
    Diracs at θ = 3.0, 2.0, 1.0, 0.3, 0.05, 0.01 rad       1.00, 1.05, 1.18, 1.40, 1.68, 1.88
    =====================================================  ================

    Tested bound (``tests/transport/test_transport.py``): 0.3 <= SSW_2/W_2 <= 2.0 on
    these families, i.e. W_2/2 <= SSW_2 and W_2 <= 3.4 SSW_2.  Use it to
    compare clouds of the same kind (e.g. a rate in N), not as a W_2 value.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors (``|x| = 1`` to 1e-8), d >= 2.
    y : array_like, shape (m, d)
        Unit vectors, same d.
    a, b : array_like, optional
        Non-negative weights summing to 1 (to 1e-9); uniform if None.
    p : {1, 2}
        Order.
    n_projections : int, >= 1
        Number of random great circles (ignored with ``projections``).  The
        relative Monte Carlo error is about ``CV / (p sqrt(n_projections))``,
        CV the coefficient of variation of the per-slice W_p^p (measured 1-3 %
        at 256 projections for clouds, see ``return_se``).
    seed : int, SeedSequence or Generator
        Seed of the projections.
    projections : array_like, shape (K, d, 2), optional
        Explicit orthonormal 2-frames U (POT's ``projections`` layout).
    return_se : bool
        Also return the Monte Carlo standard error (delta method).

    Returns
    -------
    float
        The sliced estimate in radians.
    float
        Its standard error, only with ``return_se=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import sliced_wasserstein_sphere
    >>> x = np.random.default_rng(0).standard_normal((100, 3))
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> round(sliced_wasserstein_sphere(x, x), 6)
    0.0
    """
    x, y, a, b = _as_pair(x, y, a, b)
    value, se = _sliced(x, y, a, b, _as_p(p), n_projections, seed, projections)
    return (value, se) if return_se else value
