"""Independent reference computations for the identity tests (theory §5).

Nothing here calls the solvers under test: these are 1-D quadratures and a 1-D
Kolmogorov backward equation, used as the "truth" the particle and transformer
simulations are compared against.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, special

from meanfield.harmonics import legendre_d
from meanfield.studies.depth._two_point import _chebyshev as chebyshev
from meanfield.studies.depth._two_point import _coefficients as two_point_coefficients


def unit_points(n: int, d: int, rng) -> np.ndarray:
    """n iid uniform points on S^{d-1}, shape (n, d)."""
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def euler_one_step_moments(d: int, s2: float, lmax: int, n_nodes: int = 96) -> np.ndarray:
    """m_l = E[P_l^{(d)}(<x, Π(x + s Z)>)], Z ~ N(0, I_d), l = 0..lmax, by product quadrature.

    For one token without attention the projected Euler step with a Gaussian field is
    x' = Π(x + s Z), s² = κ_σ(1) h, whatever the position (the field is isotropic). Its
    transition kernel commutes with rotations, so by Funk–Hecke
    E[P_l(<x_0, X_n>)] = m_l^n exactly: the weak bias of the scheme is m_l^n - exp(-½ κ l(l+d-2) t).
    <x, Π(x + sZ)> = (1 + s Z_1) / sqrt((1 + s Z_1)² + s² R), Z_1 ~ N(0, 1),
    R = |Z_⊥|² ~ χ²_{d-1} = Gamma((d-1)/2, scale 2): Gauss–Hermite × generalised Gauss–Laguerre.
    """
    s = math.sqrt(s2)
    z1, w1 = special.roots_hermitenorm(n_nodes)
    w1 = w1 / w1.sum()
    k = (d - 1) / 2
    u, wu = special.roots_genlaguerre(n_nodes, k - 1)
    wu = wu / wu.sum()
    r = 2 * u
    a = 1 + s * z1[:, None]
    c = a / np.sqrt(a * a + s2 * r[None, :])
    w = w1[:, None] * wu[None, :]
    return np.tensordot(legendre_d(d, lmax, c), w, axes=([1, 2], [0, 1]))


def two_point_moments(kappa, kappa1: float, d: int, beta: float | None, c0: float, times, n: int = 96):
    """E[c_t] and E[c_t²] of the two-point diffusion started at c0, by the Kolmogorov backward equation.

    u(t, c) = E_c[f(c_t)] solves u_t = b u' + ½ a u'' on [-1, 1]. Both ends are
    entrance/natural boundaries (a = 0 there, b(1) = 0, b(-1) >= 0), so no boundary
    condition is imposed and the equation is collocated at every Chebyshev–Lobatto
    point; u(t) = expm(t G) f with G = diag(b) D + ½ diag(a) D². For a truncated
    (polynomial) κ_σ the coefficients are polynomials and the solution is smooth, so the
    collocation converges spectrally (checked by doubling n in the tests). The value at
    c0 is read off by barycentric interpolation.

    Returns an array of shape (len(times), 2).
    """
    x, D = chebyshev(n)
    b, a = two_point_coefficients(kappa, kappa1, d, beta)
    G = b(x)[:, None] * D + 0.5 * a(x)[:, None] * (D @ D)
    f = np.stack([x, x * x], axis=1)
    # barycentric weights of the Lobatto points
    j = np.arange(n + 1)
    wb = (-1.0) ** j * np.where((j == 0) | (j == n), 0.5, 1.0)
    diff = c0 - x
    if np.any(diff == 0):
        interp = (diff == 0).astype(float)
    else:
        interp = (wb / diff) / np.sum(wb / diff)
    out = []
    for t in np.atleast_1d(times):
        u = linalg.expm(float(t) * G) @ f
        out.append(interp @ u)
    return np.array(out)


def lyapunov_from_two_point(kappa, kappa1: float, d: int, u: float = 1e-3) -> float:
    """λ_1 from the two-point diffusion near the diagonal, without the closed form of theory §5.4.

    With u = 1 - c and r = |X - Y| = sqrt(2u), Itô's formula gives
    d log r = ½ [-b(1-u)/u - ½ a(1-u)/u²] dt + martingale, and the drift tends to λ_1 as
    u -> 0 (b(1) = a(1) = 0). The limit is taken by Richardson extrapolation in u from
    u and u/2 (the drift is smooth in u, with an O(u) correction).
    """

    def rate(uu):
        b, a = two_point_coefficients(kappa, kappa1, d, None)
        c = 1.0 - uu
        return 0.5 * (-b(c) / uu - 0.5 * a(c) / uu**2)

    return float(2 * rate(u / 2) - rate(u))
