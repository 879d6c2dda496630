"""A vectorised two-token transformer (the discrete model of the paper on two tokens).

With two tokens a layer's MLP field is needed at two points only: for Gaussian layers
(m = ∞) it is, per ambient coordinate, a centred Gaussian pair with covariance
α2² [[κ(1), κ(c)], [κ(c), κ(1)]]; for a finite-width ReLU layer MLP(y) = m^{-1/2} A φ(W y + b)
it is, conditionally on (W, b), a centred Gaussian pair with the Gram matrix of the features
(h(x), h(y)), h = m^{-1/2} φ(W · + b) — the same law as the full layer, at the cost of m
bivariate normals per token pair. Both fields are drawn from the same standard normals ξ,
which couples a width-m transformer to its Gaussian limit (synchronous coupling of the two
layer fields): the difference of an observable between the coupled pair has a variance
O(1/m) instead of O(1), which is what resolves the width effect beyond L = 1.
"""

from __future__ import annotations

import math

import numpy as np

from meanfield._validate import as_int
from meanfield.kernels import ActivationKernel
from meanfield.sphere import row_norms

__all__ = ["two_token_transformer"]


def _attention(x, y, beta, alpha1):
    c = np.einsum("ij,ij->i", x, y)
    # weight of the other token: e^{βc} / (e^β + e^{βc}) = 1 / (1 + e^{β(1-c)})
    w = 1.0 / (1.0 + np.exp(beta * (1.0 - c)))[:, None]
    ax = (1 - w) * x + w * y
    ay = (1 - w) * y + w * x
    xn = x + alpha1 * ax
    yn = y + alpha1 * ay
    return xn / row_norms(xn)[:, None], yn / row_norms(yn)[:, None]


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
        x /= row_norms(x)[:, None]
        y /= row_norms(y)[:, None]
        if both:
            xg, yg = _attention(xg, yg, beta, a1)
            fx, fy = _field(*_gauss_gram(kern, np.einsum("ij,ij->i", xg, yg)), xi)
            xg, yg = xg + a2 * fx, yg + a2 * fy
            xg /= row_norms(xg)[:, None]
            yg /= row_norms(yg)[:, None]
    out = {"c": np.einsum("ij,ij->i", x, y)}
    if both:
        out["c_gauss"] = np.einsum("ij,ij->i", xg, yg)
    return out
