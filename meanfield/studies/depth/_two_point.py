"""The exact law of the two-point motion, and a vectorised two-token transformer.

For two tokens with softmax attention (Q = K = V = I, each token attending to both) and an
isotropic common noise of covariance κ, the overlap c_t = <X_t, Y_t> of the limiting SDE is
a one-dimensional diffusion on [-1, 1] (Agazzi et al., arXiv 2604.26898) with generator
b(c) ∂_c + ½ a(c) ∂_c²,

    b(c) = -(d-1) κ(1) c + (d-2+c²) κ(c) + 2 (1-c²) e^{βc} / (e^β + e^{βc}),
    a(c) = 2 (1-c²) (κ(1) - c κ(c)).

:class:`TwoPointLaw` solves the Kolmogorov backward equation u_t = b u' + ½ a u'' by
Chebyshev collocation (both ends are entrance or natural boundaries, so no boundary
condition is imposed) and returns E f(c_T) for polynomial f to spectral accuracy, the
Legendre moments of the law of c_T and from them its CDF, so that a sample of c_T from the
transformer at any (L, m) can be compared with the exact law of the L = ∞ limit — no
reference depth L_ref enters.

:func:`two_token_transformer` runs the discrete transformer of the paper on two tokens for
many independent weight draws at once. With two tokens a layer's MLP field is needed at two
points only: for Gaussian layers (m = ∞) it is, per ambient coordinate, a centred Gaussian
pair with covariance α2² [[κ(1), κ(c)], [κ(c), κ(1)]]; for a finite-width ReLU layer
MLP(y) = m^{-1/2} A φ(W y + b) it is, conditionally on (W, b), a centred Gaussian pair with
the Gram matrix of the features (h(x), h(y)), h = m^{-1/2} φ(W · + b) — the same law as the
full layer, at the cost of m bivariate normals per token pair. Both fields are drawn from
the same standard normals ξ, which couples a width-m transformer to its Gaussian limit
(synchronous coupling of the two layer fields): the difference of an observable between the
coupled pair has a variance O(1/m) instead of O(1), which is what resolves the width effect
beyond L = 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import linalg
from numpy.polynomial import legendre as npleg

from meanfield._validate import as_float, as_int
from meanfield.kernels import ActivationKernel

__all__ = ["TwoPointLaw", "two_point_law", "two_token_transformer", "w1_to_law"]


def _chebyshev(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Chebyshev–Gauss–Lobatto points on [-1, 1] (descending) and the differentiation matrix."""
    j = np.arange(n + 1)
    x = np.cos(math.pi * j / n)
    c = np.where((j == 0) | (j == n), 2.0, 1.0) * (-1.0) ** j
    dx = x[:, None] - x[None, :]
    D = np.outer(c, 1 / c) / (dx + np.eye(n + 1))
    D -= np.diag(D.sum(axis=1))
    return x, D


def _coefficients(kappa, kappa1: float, d: int, beta: float | None):
    def b(c):
        out = -(d - 1) * kappa1 * c + (d - 2 + c * c) * kappa(c)
        if beta is not None:
            out = out + 2 * (1 - c * c) / (1 + np.exp(beta * (1 - c)))
        return out

    def a(c):
        return 2 * (1 - c * c) * (kappa1 - c * kappa(c))

    return b, a


@dataclass(frozen=True)
class TwoPointLaw:
    """Exact law of c_T = <X_T, Y_T> of the limiting SDE started at c_0 (see the module doc).

    Attributes
    ----------
    moments : ndarray, shape (K + 1,)
        Legendre moments μ_k = E P_k(c_T), k = 0..K.
    mean, second : float
        E c_T and E c_T².
    accuracy : float
        Largest change of the moments and of the CDF on a fine grid between the
        collocation with ``n`` points and with ``n + n // 2`` points (an estimate of the
        solver's error).
    cdf_truncation : float
        Largest change of the CDF between K and 3K/4 Legendre terms (the truncation error
        of the density expansion; it dominates ``accuracy`` when the density is not
        analytic at c = 1).
    """

    d: int
    beta: float | None
    c0: float
    T: float
    n: int
    moments: np.ndarray = field(repr=False)
    accuracy: float
    cdf_truncation: float

    @property
    def mean(self) -> float:
        return float(self.moments[1])

    @property
    def second(self) -> float:
        return float((2 * self.moments[2] + 1) / 3)

    def cdf(self, s, K: int | None = None) -> np.ndarray:
        """P(c_T <= s) from the first ``K`` (default all) Legendre moments, clipped to [0, 1]."""
        mu = self.moments if K is None else self.moments[: K + 1]
        s = np.clip(np.asarray(s, dtype=np.float64), -1.0, 1.0)
        # F(s) = Σ_k (2k+1)/2 μ_k ∫_{-1}^s P_k,  ∫_{-1}^s P_k = (P_{k+1} - P_{k-1})(s) / (2k+1), k >= 1
        coef = np.zeros(mu.size + 1)
        coef[0] += 0.5 * mu[0]
        coef[1] += 0.5 * mu[0]
        for k in range(1, mu.size):
            coef[k + 1] += 0.5 * mu[k]
            coef[k - 1] -= 0.5 * mu[k]
        return np.clip(npleg.legval(s, coef), 0.0, 1.0)

    def quantile(self, u, grid: int = 20001) -> np.ndarray:
        """Inverse CDF by interpolation on a fine grid (for sampling the exact law)."""
        s = np.linspace(-1.0, 1.0, grid)
        F = np.maximum.accumulate(self.cdf(s))
        return np.interp(np.asarray(u, dtype=np.float64), F, s)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n iid draws of c_T (inverse CDF)."""
        return self.quantile(rng.random(n))


def _moments(kappa, kappa1, d, beta, c0, T, n, K) -> np.ndarray:
    x, D = _chebyshev(n)
    b, a = _coefficients(kappa, kappa1, d, beta)
    G = b(x)[:, None] * D + 0.5 * a(x)[:, None] * (D @ D)
    f = npleg.legvander(x, K)  # (n+1, K+1): P_k at the nodes
    j = np.arange(n + 1)
    wb = (-1.0) ** j * np.where((j == 0) | (j == n), 0.5, 1.0)
    diff = c0 - x
    if np.any(diff == 0):
        interp = (diff == 0).astype(float)
    else:
        interp = (wb / diff) / np.sum(wb / diff)
    return interp @ (linalg.expm(T * G) @ f)


@lru_cache(maxsize=64)
def _cached(activation: str, sigma_w: float, d: int, beta, c0: float, T: float, n: int, K: int) -> TwoPointLaw:
    kern = ActivationKernel(activation, sigma_w=sigma_w)
    mu = _moments(kern.kappa, kern.kappa1, d, beta, c0, T, n, K)
    mu_fine = _moments(kern.kappa, kern.kappa1, d, beta, c0, T, n + n // 2, K)
    law = TwoPointLaw(d, beta, c0, T, n, mu, 0.0, 0.0)
    fine = TwoPointLaw(d, beta, c0, T, n, mu_fine, 0.0, 0.0)
    s = np.linspace(-1, 1, 4001)
    acc = max(float(np.max(np.abs(mu - mu_fine))), float(np.max(np.abs(law.cdf(s) - fine.cdf(s)))))
    trunc = float(np.max(np.abs(law.cdf(s) - law.cdf(s, K=(3 * K) // 4))))
    return TwoPointLaw(d, beta, c0, T, n, mu, acc, trunc)


def two_point_law(activation: str = "relu", *, sigma_w: float = 1.0, d: int = 3, beta: float | None = 1.0,
                  c0: float = 0.0, T: float = 1.0, n: int = 160, K: int = 120) -> TwoPointLaw:
    """The exact law of c_T for the ReLU-type MLP noise of an activation (cached).

    Parameters
    ----------
    activation, sigma_w
        The kernel κ of :class:`meanfield.kernels.ActivationKernel` (σ_b = 0, σ = 1): the
        untruncated kernel, which is what both the finite-width layers and the Gaussian
        layers of :func:`two_token_transformer` carry.
    d : int, >= 2
    beta : float or None
        Inverse temperature of the softmax attention; None for no attention.
    c0 : float in (-1, 1)
        Initial overlap.
    T : float
    n : int
        Chebyshev–Lobatto points (the accuracy is estimated against 1.5 n).
    K : int, <= n
        Legendre moments kept for the CDF.

    Examples
    --------
    >>> law = two_point_law(n=64, K=40)
    >>> round(float(law.moments[0]), 10), -1 < law.mean < 1
    (1.0, True)
    """
    d = as_int(d, "d", min_value=2)
    c0 = as_float(c0, "c0", min_value=-1.0, max_value=1.0)
    T = as_float(T, "T", min_value=0.0, strict_min=True)
    n = as_int(n, "n", min_value=8)
    K = as_int(K, "K", min_value=2, max_value=n)
    return _cached(str(activation), float(sigma_w), d, None if beta is None else float(beta), c0, T, n, K)


def w1_to_law(sample, law: TwoPointLaw, grid: int = 8001) -> float:
    """W_1 between the empirical law of ``sample`` (values of c_T) and ``law``: ∫ |F_n - F| dc."""
    s = np.linspace(-1.0, 1.0, grid)
    Fn = np.searchsorted(np.sort(np.asarray(sample, dtype=np.float64)), s, side="right") / len(sample)
    return float(np.trapezoid(np.abs(Fn - law.cdf(s)), s))


def _attention(x, y, beta, alpha1):
    c = np.einsum("ij,ij->i", x, y)
    # weight of the other token: e^{βc} / (e^β + e^{βc}) = 1 / (1 + e^{β(1-c)})
    w = 1.0 / (1.0 + np.exp(beta * (1.0 - c)))[:, None]
    ax = (1 - w) * x + w * y
    ay = (1 - w) * y + w * x
    xn = x + alpha1 * ax
    yn = y + alpha1 * ay
    return xn / np.linalg.norm(xn, axis=1, keepdims=True), yn / np.linalg.norm(yn, axis=1, keepdims=True)


def _gauss_gram(kern, c):
    k1 = float(kern.kappa1)
    return np.full_like(c, k1), np.asarray(kern.kappa(np.clip(c, -1.0, 1.0)), dtype=np.float64), np.full_like(c, k1)


def _width_gram(phi, sigma_w, c, m, rng):
    n = c.size
    z1 = rng.standard_normal((n, m))
    z2 = rng.standard_normal((n, m))
    u = sigma_w * z1
    v = sigma_w * (c[:, None] * z1 + np.sqrt(np.maximum(1 - c * c, 0.0))[:, None] * z2)
    hu, hv = phi(u), phi(v)
    return (np.einsum("ij,ij->i", hu, hu) / m, np.einsum("ij,ij->i", hu, hv) / m, np.einsum("ij,ij->i", hv, hv) / m)


def _field(gxx, gxy, gyy, xi):
    """Per coordinate the pair (F(x), F(y)) = chol([[gxx, gxy], [gxy, gyy]]) ξ; ξ shape (n, d, 2)."""
    sx = np.sqrt(np.maximum(gxx, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(sx > 0, gxy / np.where(sx > 0, sx, 1.0), 0.0)
    sy = np.sqrt(np.maximum(gyy - r * r, 0.0))
    fx = sx[:, None] * xi[..., 0]
    fy = r[:, None] * xi[..., 0] + sy[:, None] * xi[..., 1]
    return fx, fy


def two_token_transformer(x0, y0, *, L: int, width: int, n: int, T: float = 1.0, beta: float = 1.0,
                          activation: str = "relu", sigma_w: float = 1.0, seed=0,
                          coupled: bool = False) -> dict:
    """c_T = <x_T, y_T> of the sequential transformer on two tokens, for n independent weight draws.

    Layer: y_i = Π(x_i + α1 A(x_i; μ)), then x_i <- Π(y_i + α2 MLP(y_i)), α1 = T/L,
    α2 = sqrt(T/L), softmax attention with Q = K = V = I over both tokens, σ = 1, σ_b = 0.

    Parameters
    ----------
    x0, y0 : array_like, shape (d,)
        Unit initial tokens (the same for every draw).
    L : int, >= 1
    width : int, >= 0
        MLP width m; 0 for Gaussian-field layers (m = ∞).
    n : int
        Independent draws (vectorised).
    coupled : bool
        With ``width > 0``, also run the Gaussian-layer transformer driven by the same
        standard normals (synchronous coupling) and return its c_T as ``c_gauss``.

    Returns
    -------
    dict
        ``c`` (n,), and ``c_gauss`` (n,) when ``coupled``.
    """
    L = as_int(L, "L", min_value=1)
    width = as_int(width, "width", min_value=0)
    n = as_int(n, "n", min_value=1)
    kern = ActivationKernel(activation, sigma_w=sigma_w)
    x0 = np.asarray(x0, dtype=np.float64)
    y0 = np.asarray(y0, dtype=np.float64)
    d = x0.size
    rng = np.random.default_rng(seed)
    a1, a2 = T / L, math.sqrt(T / L)
    x, y = np.tile(x0, (n, 1)), np.tile(y0, (n, 1))
    both = coupled and width > 0
    if both:
        xg, yg = x.copy(), y.copy()
    for _ in range(L):
        xi = rng.standard_normal((n, d, 2))
        x, y = _attention(x, y, beta, a1)
        c = np.einsum("ij,ij->i", x, y)
        gram = _gauss_gram(kern, c) if width == 0 else _width_gram(kern.phi, sigma_w, c, width, rng)
        fx, fy = _field(*gram, xi)
        x, y = x + a2 * fx, y + a2 * fy
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        if both:
            xg, yg = _attention(xg, yg, beta, a1)
            fx, fy = _field(*_gauss_gram(kern, np.einsum("ij,ij->i", xg, yg)), xi)
            xg, yg = xg + a2 * fx, yg + a2 * fy
            xg /= np.linalg.norm(xg, axis=1, keepdims=True)
            yg /= np.linalg.norm(yg, axis=1, keepdims=True)
    out = {"c": np.einsum("ij,ij->i", x, y)}
    if both:
        out["c_gauss"] = np.einsum("ij,ij->i", xg, yg)
    return out
