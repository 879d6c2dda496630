"""Spectra of clustered equilibria on the circle: the formulas of :mod:`meanfield.circle_stability`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from .._validate import as_beta, as_float, as_int, as_real_array

__all__ = [
    "NORMALISATIONS",
    "interaction",
    "circle_points",
    "circle_angles",
    "angular_velocity",
    "circle_jacobian",
    "top_nontrivial_eigenvalue",
    "clustered_state",
    "ClusterSpectrum",
    "cluster_spectrum",
    "stability_thresholds",
    "cluster_mode",
    "largest_gap",
    "in_open_half_circle",
]

#: ``"softmax"``: the package's attention (normalised by ζ_i); ``"mean"``: the unnormalised 1/n form.
NORMALISATIONS = ("softmax", "mean")
#: |β| above which e^{|β|} overflows float64; the mean form is refused there (softmax is scale free).
_BETA_OVERFLOW = 700.0


def _normalisation(value) -> str:
    if not isinstance(value, str) or value not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {value!r}")
    return value


def _beta(beta, normalisation: str) -> float:
    beta = as_beta(beta)
    if normalisation == "mean" and abs(beta) > _BETA_OVERFLOW:
        raise ValueError(f"beta must satisfy |beta| <= {_BETA_OVERFLOW:g} for normalisation='mean' "
                         f"(e^|beta| overflows), got {beta}; the softmax form has no such limit")
    return beta


def _angles(theta, name: str = "theta") -> np.ndarray:
    arr = as_real_array(theta, name)
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"{name} must be a non-empty 1-D array of angles, got shape {arr.shape}")
    return arr


def _weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.full(n, 1.0 / n)
    w = as_real_array(weights, "weights")
    if w.shape != (n,) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be non-negative, not all zero, with shape ({n},)")
    return w / w.sum()


def interaction(u, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """The interaction h(u) = e^{β cos u} sin u and its derivative h'(u) = e^{β cos u}(cos u - β sin² u).

    Parameters
    ----------
    u : array_like
        Angle differences (radians).
    beta : float
        Inverse temperature (any sign).

    Returns
    -------
    (h, dh) : tuple of ndarray, shaped like ``u``

    Examples
    --------
    >>> h, dh = interaction([0.0, np.pi / 2], -1.0)
    >>> h.round(12).tolist(), dh.round(12).tolist()
    ([0.0, 1.0], [0.367879441171, 1.0])
    """
    u = np.asarray(as_real_array(u, "u"))
    beta = as_beta(beta)
    e = np.exp(beta * np.cos(u))
    s = np.sin(u)
    return e * s, e * (np.cos(u) - beta * s * s)


def circle_points(theta) -> np.ndarray:
    """Unit vectors (cos θ, sin θ), shape (N, 2), of angles θ of shape (N,).

    Examples
    --------
    >>> circle_points([0.0, np.pi / 2]).round(12)
    array([[1., 0.],
           [0., 1.]])
    """
    theta = _angles(theta)
    return np.column_stack([np.cos(theta), np.sin(theta)])


def circle_angles(x) -> np.ndarray:
    """Angles atan2(x_2, x_1) in (-π, π], shape (N,), of points x of shape (N, 2).

    Examples
    --------
    >>> circle_angles([[0.0, 1.0], [-1.0, 0.0]]) / np.pi
    array([0.5, 1. ])
    """
    x = as_real_array(x, "x")
    if x.ndim != 2 or x.shape[1] != 2:
        raise ValueError(f"x must have shape (N, 2) (points on S^1), got {x.shape}")
    return np.arctan2(x[:, 1], x[:, 0])


def _pair_terms(theta: np.ndarray, beta: float):
    """Matrices of u_ij = θ_j - θ_i: e^{β(cos u - 1)} or e^{β(cos u + 1)} (scaled by e^{-|β|}), sin u, cos u."""
    u = theta[None, :] - theta[:, None]
    c, s = np.cos(u), np.sin(u)
    e = np.exp(beta * c - abs(beta))
    return e, s, c


def angular_velocity(theta, beta: float, *, weights=None, normalisation: str = "softmax") -> np.ndarray:
    """θ̇_i of the attention dynamics on the circle (module docstring), shape (N,).

    Parameters
    ----------
    theta : array_like, shape (N,)
        Token angles.
    beta : float
    weights : array_like, shape (N,), optional
        Token weights (normalised here); default uniform.
    normalisation : {"softmax", "mean"}
        ``"softmax"`` is the package's attention; ``"mean"`` the unnormalised form of arXiv 2507.22857.

    Examples
    --------
    >>> from meanfield.attention import attention_velocity
    >>> th = np.array([0.1, 1.0, 2.5, -2.0])
    >>> v = attention_velocity(circle_points(th), -1.5)                  # ambient tangent vectors
    >>> e = np.column_stack([-np.sin(th), np.cos(th)])                   # unit tangents
    >>> bool(np.allclose(angular_velocity(th, -1.5), (v * e).sum(axis=1), atol=1e-14))
    True
    """
    theta = _angles(theta)
    normalisation = _normalisation(normalisation)
    beta = _beta(beta, normalisation)
    w = _weights(weights, theta.size)
    e, s, _ = _pair_terms(theta, beta)
    num = (e * s) @ w
    if normalisation == "softmax":
        return num / (e @ w)
    return num * math.exp(abs(beta))


def circle_jacobian(theta, beta: float, *, weights=None, normalisation: str = "softmax") -> np.ndarray:
    """Jacobian ∂θ̇_i/∂θ_j of :func:`angular_velocity`, shape (N, N), at any configuration.

    With H_ij = h'(θ_j - θ_i) (H_ii = e^β), the mean form has

        J_mean = H diag(w) - diag(H w)

    (symmetric up to diag(w): J_mean = D^2 E / w), and the softmax form, with G_ij = -β h(θ_j - θ_i)
    (the derivative of e^{β cos}), ∂ζ = G diag(w) - diag(G w) and θ̇ from :func:`angular_velocity`,

        J_softmax = diag(ζ)^{-1} (J_mean - diag(θ̇) ∂ζ).

    Every row sums to zero (the rotation θ -> θ + c is a symmetry). Memory O(N²).

    Examples
    --------
    >>> th = np.array([0.3, 1.1, 2.0, 4.0, 5.5])
    >>> J = circle_jacobian(th, -0.8)
    >>> eps = 1e-6
    >>> fd = np.column_stack([(angular_velocity(th + eps * ej, -0.8) - angular_velocity(th - eps * ej, -0.8))
    ...                       / (2 * eps) for ej in np.eye(5)])
    >>> bool(np.abs(J - fd).max() < 1e-8), bool(np.abs(J.sum(axis=1)).max() < 1e-14)
    (True, True)
    """
    theta = _angles(theta)
    normalisation = _normalisation(normalisation)
    beta = _beta(beta, normalisation)
    w = _weights(weights, theta.size)
    e, s, c = _pair_terms(theta, beta)
    hp = e * (c - beta * s * s)  # h'(u) e^{-|β|}
    jm = hp * w[None, :]
    jm[np.diag_indices_from(jm)] -= hp @ w
    if normalisation == "mean":
        return jm * math.exp(abs(beta))
    zeta = e @ w
    g = -beta * e * s  # derivative of e^{β cos u} (scaled), zero on the diagonal
    dz = g * w[None, :]
    dz[np.diag_indices_from(dz)] -= g @ w
    vel = (e * s) @ w / zeta
    return (jm - vel[:, None] * dz) / zeta[:, None]


def top_nontrivial_eigenvalue(theta, beta: float, *, weights=None, normalisation: str = "softmax") -> float:
    """Largest eigenvalue of the linearisation at an equilibrium θ, the rotation mode removed.

    At an equilibrium J = M^{-1} D²E with M = diag(w ζ) (softmax) or diag(w) (mean) and D²E the
    symmetric Hessian of the energy (module docstring), so J is similar to the symmetric
    M^{-1/2} D²E M^{-1/2}, whose eigenvalues are computed here (real, to round-off). Its null
    vector M^{1/2} 1 (the rotation) is shifted far below the rest. Negative means linearly stable up
    to rotation; the sign is the same for both normalisations. Away from equilibria this is the
    spectrum of the symmetric part M^{-1} D²E only, not of the full Jacobian.

    Examples
    --------
    >>> three = clustered_state(3, 2)
    >>> top_nontrivial_eigenvalue(three, -1.0) < 0 < top_nontrivial_eigenvalue(three, -0.5)
    True
    >>> s = cluster_spectrum(3, -1.0)
    >>> bool(abs(top_nontrivial_eigenvalue(three, -1.0) - s.top) < 1e-13)
    True
    """
    theta = _angles(theta)
    normalisation = _normalisation(normalisation)
    beta = _beta(beta, normalisation)
    w = _weights(weights, theta.size)
    if theta.size == 1:
        return -math.inf
    e, s, c = _pair_terms(theta, beta)
    hp = e * (c - beta * s * s)
    hess = w[:, None] * hp * w[None, :]  # D²E e^{-|β|}
    hess[np.diag_indices_from(hess)] -= w * (hp @ w)
    m = w * (e @ w) if normalisation == "softmax" else w * math.exp(-abs(beta))
    r = 1.0 / np.sqrt(m)
    sym = r[:, None] * hess * r[None, :]
    sym = 0.5 * (sym + sym.T)
    rot = np.sqrt(m) / np.linalg.norm(np.sqrt(m))
    shift = 2.0 * np.abs(sym).sum(axis=1).max() + 1.0
    return float(np.linalg.eigvalsh(sym - shift * np.outer(rot, rot))[-1])


def clustered_state(k: int, n: int, phase: float = 0.0) -> np.ndarray:
    """Angles of k equally spaced clusters φ_a = phase + 2πa/k with n tokens each, shape (k n,), cluster-major.

    Examples
    --------
    >>> (clustered_state(3, 2) / np.pi).round(4).tolist()
    [0.0, 0.0, 0.6667, 0.6667, 1.3333, 1.3333]
    """
    k = as_int(k, "k", min_value=1)
    n = as_int(n, "n", min_value=1)
    phase = as_float(phase, "phase")
    return np.repeat(phase + 2.0 * np.pi * np.arange(k) / k, n)


@dataclass(frozen=True)
class ClusterSpectrum:
    """Linearised spectrum of k equally spaced, equal clusters (module docstring formulas).

    Attributes
    ----------
    k : int
    beta : float
    normalisation : str
    intra : float
        Eigenvalue of the intra-cluster (splitting) modes, multiplicity k (n - 1).
    inter : ndarray, shape (k - 1,)
        μ_p of the inter-cluster modes p = 1..k-1 (μ_p = μ_{k-p}).
    zeta : float
        ζ = (1/k) Σ_m e^{β cos(2πm/k)}; softmax eigenvalues are the mean ones divided by ζ.
    """

    k: int
    beta: float
    normalisation: str
    intra: float
    inter: np.ndarray
    zeta: float

    @property
    def top(self) -> float:
        """Largest nontrivial eigenvalue (intra and inter modes; the state has n >= 2 tokens per cluster)."""
        return float(max(self.intra, self.inter.max())) if self.k > 1 else float(self.intra)

    @property
    def top_mode(self) -> str:
        """``"intra"`` or ``"inter p=<p>"``: the mode of :attr:`top`."""
        if self.k == 1 or self.intra >= self.inter.max():
            return "intra"
        return f"inter p={int(np.argmax(self.inter)) + 1}"

    @property
    def stable(self) -> bool:
        """Whether every nontrivial eigenvalue is negative."""
        return self.top < 0


def cluster_spectrum(k: int, beta: float, *, normalisation: str = "softmax") -> ClusterSpectrum:
    """Exact spectrum of the k-cluster equilibrium (independent of the tokens per cluster).

    Examples
    --------
    >>> s = cluster_spectrum(3, -2.0 / 3.0, normalisation="mean")
    >>> bool(abs(s.inter[0]) < 1e-15), s.intra < 0
    (True, True)
    >>> cluster_spectrum(2, 1.0).stable, cluster_spectrum(3, -1.0).stable
    (False, True)
    """
    k = as_int(k, "k", min_value=1)
    normalisation = _normalisation(normalisation)
    beta = _beta(beta, normalisation)
    c = 2.0 * np.pi * np.arange(k) / k
    scale = math.exp(-abs(beta))
    e = np.exp(beta * np.cos(c) - abs(beta))
    hp = e * (np.cos(c) - beta * np.sin(c) ** 2)
    intra = -hp.mean()
    p = np.arange(1, k)
    inter = (hp[None, 1:] * (np.cos(np.outer(p, c[1:])) - 1.0)).sum(axis=1) / k
    zeta_scaled = e.mean()
    div = zeta_scaled if normalisation == "softmax" else scale
    return ClusterSpectrum(k=k, beta=beta, normalisation=normalisation, intra=float(intra / div),
                           inter=inter / div, zeta=float(zeta_scaled / scale) if abs(beta) <= _BETA_OVERFLOW else math.inf)


def stability_thresholds(k: int, beta_min: float, beta_max: float, *, mode: str = "top", n_grid: int = 2001,
                         xtol: float = 1e-13) -> np.ndarray:
    """The β in [beta_min, beta_max] where an eigenvalue of the k-cluster state changes sign (root finding).

    Sign changes of ``mode`` (``"top"``: the largest nontrivial eigenvalue, ``"intra"``, or
    ``"inter"``: the largest μ_p) on a grid of ``n_grid`` points are refined by Brent's method to
    ``xtol``. Zeros where the eigenvalue only touches 0 (k = 3 intra mode at β = 0) are not
    crossings and are not returned. The signs are those of both normalisations.

    Returns
    -------
    ndarray
        Increasing crossing points (empty if the sign never changes on the grid).

    Examples
    --------
    >>> stability_thresholds(3, -4.0, 2.0)
    array([-0.66666667])
    >>> stability_thresholds(2, -4.0, 2.0).size, stability_thresholds(4, -4.0, 2.0).size
    (0, 0)
    """
    k = as_int(k, "k", min_value=1)
    lo = as_float(beta_min, "beta_min")
    hi = as_float(beta_max, "beta_max")
    if not hi > lo:
        raise ValueError(f"beta_max must be > beta_min, got [{lo}, {hi}]")
    n_grid = as_int(n_grid, "n_grid", min_value=3)
    if mode not in ("top", "intra", "inter"):
        raise ValueError(f"mode must be 'top', 'intra' or 'inter', got {mode!r}")
    if mode == "inter" and k == 1:
        raise ValueError("k = 1 has no inter-cluster modes")

    def f(b):
        s = cluster_spectrum(k, b, normalisation="softmax")
        return {"top": s.top, "intra": s.intra, "inter": s.inter.max() if k > 1 else s.intra}[mode]

    grid = np.linspace(lo, hi, n_grid)
    vals = np.array([f(b) for b in grid])
    roots = []
    for i in range(n_grid - 1):
        if vals[i] == 0.0 and 0 < i and vals[i - 1] * vals[i + 1] < 0:
            roots.append(grid[i])
        elif vals[i] * vals[i + 1] < 0:
            roots.append(brentq(f, grid[i], grid[i + 1], xtol=xtol, rtol=4 * np.finfo(float).eps))
    return np.asarray(roots, dtype=float)


def cluster_mode(k: int, n: int, kind: str = "inter", p: int = 1) -> np.ndarray:
    """A unit eigenvector (shape (k n,), cluster-major like :func:`clustered_state`) of the k-cluster Jacobian.

    ``kind="inter"``: cluster a moves rigidly by cos(2π p a / k) (p = 1..k-1); ``kind="intra"``: the
    tokens of cluster 0 split by a zero-sum pattern (needs n >= 2).

    Examples
    --------
    >>> m = cluster_mode(3, 2, "inter", 1)
    >>> np.round(m * np.sqrt(3), 12)
    array([ 1. ,  1. , -0.5, -0.5, -0.5, -0.5])
    """
    k = as_int(k, "k", min_value=1)
    n = as_int(n, "n", min_value=1)
    if kind == "inter":
        p = as_int(p, "p", min_value=1, max_value=k - 1) if k > 1 else as_int(p, "p", min_value=1, max_value=0)
        v = np.repeat(np.cos(2.0 * np.pi * p * np.arange(k) / k), n)
    elif kind == "intra":
        if n < 2:
            raise ValueError(f"intra-cluster modes need n >= 2 tokens per cluster, got n = {n}")
        v = np.zeros(k * n)
        v[:n] = np.linspace(-1.0, 1.0, n)
    else:
        raise ValueError(f"kind must be 'inter' or 'intra', got {kind!r}")
    return v / np.linalg.norm(v)


def largest_gap(theta) -> float:
    """Largest angular gap between circularly consecutive tokens (2π minus the shortest arc holding them all).

    Examples
    --------
    >>> round(largest_gap([0.0, 0.5, 1.0]), 12) == round(2 * np.pi - 1.0, 12)
    True
    """
    theta = np.sort(np.mod(_angles(theta), 2.0 * np.pi))
    if theta.size == 1:
        return 2.0 * np.pi
    gaps = np.diff(theta, append=theta[0] + 2.0 * np.pi)
    return float(gaps.max())


def in_open_half_circle(theta) -> bool:
    """Whether all tokens lie in an open half circle (largest gap > π): then they converge to one point.

    The certificate holds for every β and both normalisations (module docstring).

    Examples
    --------
    >>> in_open_half_circle([0.0, 1.0, 3.0]), in_open_half_circle(clustered_state(3, 1))
    (True, False)
    """
    return largest_gap(theta) > np.pi
