"""The exact law of the two-point motion, solved to about 1e-10 in its CDF.

For two tokens with softmax attention (Q = K = V = I, each token attending to both) and an
isotropic common noise of covariance κ, the overlap c_t = <X_t, Y_t> of the limiting SDE is
a one-dimensional diffusion on [-1, 1] (Agazzi et al., arXiv 2604.26898) with generator
b(c) ∂_c + ½ a(c) ∂_c²,

    b(c) = -(d-1) κ(1) c + (d-2+c²) κ(c) + 2 (1-c²) e^{βc} / (e^β + e^{βc}),
    a(c) = 2 (1-c²) (κ(1) - c κ(c)).

In c the law is hard to resolve: c = 1 is a natural boundary (the tokens synchronise, the
density piles up against c = 1 like a log-normal in 1 - c) and the ReLU kernel has a
(1 - c)^{3/2} term. Both disappear in the angle θ = arccos c, in which every coefficient is
analytic on [0, π], and in s = log θ near θ = 0, in which the diffusion has asymptotically
constant coefficients. :class:`TwoPointLaw` therefore solves the Fokker–Planck equation on
two Chebyshev domains meeting at the start θ_0 = arccos c_0:

* θ ∈ [θ_0, π] (entrance boundary at π): the density is m(θ) q(θ) with m the speed density
  of the diffusion and q solving ∂_t q = L q (the detailed-balance form of the forward
  equation), so that no boundary condition is needed at π beyond regularity, q'(π) = 0;
* s = log θ ∈ [s_min, log θ_0]: the forward equation for the density p(s) itself, with
  p(s_min) = 0 at a cut s_min chosen 10 standard deviations of the asymptotic log-normal
  beyond the start (the mass it removes is checked by moving it further);

in the Laplace variable λ, where the initial δ at θ_0 becomes the jump condition
[q'/S]_{θ_0} = -1 (S the scale density), and returns to time T by the fixed Talbot contour
(about 10^{-0.6 M} with M nodes). The CDF, the density and the moments E f(c_T) follow by
Chebyshev integration on each domain.

The accuracy is measured, not assumed: the CDF is recomputed with 1.5× the nodes and more
Talbot nodes, and with the cut moved further out; the total mass is checked against 1; and
the Legendre moments are compared with an independent solution of the Kolmogorov backward
equation in θ (Chebyshev collocation on [0, π], matrix exponential in time). The largest of
these is :attr:`TwoPointLaw.accuracy` (about 1e-10 for the depth study's settings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numpy.polynomial import chebyshev as npcheb
from numpy.polynomial import legendre as npleg
from scipy import fft, linalg

from meanfield._validate import as_float, as_int
from meanfield.kernels import ActivationKernel

from ._two_token import two_token_transformer

__all__ = ["TwoPointLaw", "two_point_law", "two_token_transformer", "w1_to_law"]

#: Talbot contour nodes: truncation error about 10^{-0.6 M}, round-off amplified by e^{0.4 M}.
TALBOT_NODES = 20
#: The cut s_min lies this many asymptotic standard deviations sqrt(A_∞ T) beyond the start.
CUT_SDS = 10.0


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
    """Drift b(c) and diffusion a(c) of the overlap c (the generator in the variable c)."""

    def b(c):
        out = -(d - 1) * kappa1 * c + (d - 2 + c * c) * kappa(c)
        if beta is not None:
            out = out + 2 * (1 - c * c) / (1 + np.exp(beta * (1 - c)))
        return out

    def a(c):
        return 2 * (1 - c * c) * (kappa1 - c * kappa(c))

    return b, a


def _domain(n: int, lo: float, hi: float):
    """Lobatto nodes of [lo, hi] (descending: node 0 is hi) and the differentiation matrix."""
    x, D = _chebyshev(n)
    return lo + (hi - lo) * (x + 1) / 2, D * (2 / (hi - lo))


def _cheb_coefficients(values: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients of the interpolant through values at descending Lobatto nodes."""
    n = values.shape[0] - 1
    a = fft.dct(values, type=1, axis=0) / n
    a[0] /= 2
    a[-1] /= 2
    return a


def _series_sin_minus_tcos(theta: np.ndarray) -> np.ndarray:
    """sin θ - θ cos θ without cancellation (= Σ_k (-1)^{k+1} 2k θ^{2k+1} / (2k+1)! for θ < 1/2)."""
    out = np.sin(theta) - theta * np.cos(theta)
    small = theta < 0.5
    if np.any(small):
        t = theta[small]
        acc = np.zeros_like(t)
        for k in range(12, 0, -1):
            acc = acc * t * t + (-1.0) ** (k + 1) * 2 * k / math.factorial(2 * k + 1)
        out[small] = acc * t**3
    return out


def _kappa_gap(kern: ActivationKernel, theta: np.ndarray) -> tuple[float, np.ndarray]:
    """κ(1) and κ(1) - κ(cos θ), the latter to full relative precision as θ -> 0.

    ReLU, linear and erf in closed form; other activations from the Mehler series
    Σ q_n (1 - cos^n θ) with 1 - cos^n θ = -expm1(n log cos θ). σ_b = 0 (the kernels of the
    transformer in :func:`two_token_transformer`).
    """
    c = kern.scale**2
    s2 = kern.s2
    half = 2 * np.sin(theta / 2) ** 2  # 1 - cos θ
    if kern.closed_form and kern.name == "relu":
        return c * s2 / 2, c * s2 / (2 * math.pi) * (math.pi * half - _series_sin_minus_tcos(theta))
    if kern.closed_form and kern.name == "linear":
        return c * s2, c * s2 * half
    if kern.closed_form and kern.name == "erf":
        g = 2 * s2 / (1 + 2 * s2)
        y = g * np.cos(theta)
        # arcsin g - arcsin y = atan2(g sin²θ / (sqrt(1-y²) + cos θ sqrt(1-g²)), sqrt(1-g²) sqrt(1-y²) + g y)
        root_y, root_g = np.sqrt(1 - y * y), math.sqrt(1 - g * g)
        num = g * np.sin(theta) ** 2 / (root_y + np.cos(theta) * root_g)
        stable = np.arctan2(num, root_g * root_y + g * y)
        direct = math.asin(g) - np.arcsin(y)
        return c * 2 / math.pi * math.asin(g), c * 2 / math.pi * np.where(theta < math.pi / 2, stable, direct)
    q = kern.hermite_q
    n = np.arange(q.size)
    cos = np.cos(theta)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        near = -np.expm1(n[None, :] * np.log1p(-half)[:, None])
    terms = np.where((theta < math.pi / 2)[:, None], near, 1 - cos ** n[None, :])
    return c * float(q.sum()), c * terms @ q


@dataclass(frozen=True)
class _Generator:
    """The two-point generator in θ: L = B(θ) ∂_θ + ½ A(θ) ∂_θ² (A = a / sin²θ)."""

    kern: ActivationKernel
    d: int
    beta: float | None

    def coefficients(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A(θ), and b(cos θ) + ½ A(θ) cos θ = -B(θ) sin θ (regular at θ = π)."""
        theta = np.asarray(theta, dtype=np.float64)
        k1, gap = _kappa_gap(self.kern, theta)
        c = np.cos(theta)
        half = 2 * np.sin(theta / 2) ** 2
        A = 2 * (k1 * half + c * gap)
        # b = κ(1)(1-c)(d-2-c) - (d-2+c²)(κ(1) - κ(c)): b(1) = 0 exactly
        b = k1 * half * (self.d - 2 - c) - (self.d - 2 + c * c) * gap
        if self.beta is not None:
            b = b + 2 * np.sin(theta) ** 2 / (1 + np.exp(self.beta * half))
        return A, b + 0.5 * A * c

    def asymptotics(self) -> tuple[float, float]:
        """Drift and diffusion of s = log θ as θ -> 0 (a log-normal tail)."""
        th = np.array([1e-7])
        A, nb = self.coefficients(th)
        As = A[0] / th[0] ** 2
        return float(-nb[0] / (np.sin(th[0]) * th[0]) - 0.5 * As), float(As)


def _talbot(M: int, T: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes λ_k and weights w_k of the fixed Talbot rule: f(T) ≈ Re Σ_k w_k F(λ_k)."""
    r = 2 * M / (5 * T)
    th = np.arange(1, M) * math.pi / M
    cot = 1 / np.tan(th)
    lam = r * th * (cot + 1j)
    sigma = th + (th * cot - 1) * cot
    w = (r / M) * np.exp(lam * T) * (1 + 1j * sigma)
    return np.r_[r, lam], np.r_[0.5 * (r / M) * math.exp(r * T), w]


def _barycentric_at(nodes: np.ndarray, x: float) -> np.ndarray:
    """Row of barycentric interpolation weights of Lobatto nodes at x."""
    n = nodes.size - 1
    j = np.arange(n + 1)
    wb = (-1.0) ** j * np.where((j == 0) | (j == n), 0.5, 1.0)
    diff = x - nodes
    hit = np.abs(diff) < 1e-14 * max(1.0, abs(x))
    if np.any(hit):
        return hit.astype(float)
    return (wb / diff) / np.sum(wb / diff)


def _forward(gen: _Generator, theta0: float, T: float, nA: int, nB: int, M: int, s_min: float) -> dict:
    """The density of θ_T on the two domains (Chebyshev values), by Laplace–Talbot."""
    d = gen.d
    s0 = math.log(theta0)
    xA, DA = _domain(nA, theta0, math.pi)  # xA[0] = π, xA[nA] = θ_0
    xB, DB = _domain(nB, s_min, s0)  # xB[0] = s_0, xB[nB] = s_min
    AA, nbA = gen.coefficients(xA)
    thB = np.exp(xB)
    Ab, nbB = gen.coefficients(thB)
    As = Ab / thB**2  # s-variable: ds = dθ/θ - ½ dθ²/θ²
    Bs = -nbB / (np.sin(thB) * thB) - 0.5 * As
    dAs, dBs = DB @ As, DB @ Bs
    d2As = DB @ dAs
    BA = -nbA[1:nA] / np.sin(xA[1:nA])
    LA = 0.5 * AA[1:nA, None] * (DA @ DA)[1:nA] + BA[:, None] * DA[1:nA]  # q-form rows
    LB = 0.5 * As[:, None] * (DB @ DB) + (dAs - Bs)[:, None] * DB + np.diag(0.5 * d2As - dBs)  # forward rows
    o, size = nA + 1, nA + nB + 2
    K = np.zeros((size, size))
    E = np.zeros((size, size))
    rhs = np.zeros(size)
    K[1:nA, :o] = -LA
    E[1:nA, 1:nA] = np.eye(nA - 1)
    K[0, :o] = DA[0]  # q'(π) = 0
    K[o + 1 : o + nB, o:] = -LB[1:nB]
    E[o + 1 : o + nB, o + 1 : o + nB] = np.eye(nB - 1)
    K[o + nB, o + nB] = 1.0  # p(s_min) = 0
    # interface at θ_0 (S(θ_0) = 1): q = p / m_s with m_s(s_0) = 2 θ_0 / A(θ_0), and [q_θ] = -1
    m0 = 2 * theta0 / AA[nA]
    dlog_m0 = (-dAs[0] + 2 * Bs[0]) / As[0]
    K[nA, nA], K[nA, o] = 1.0, -1.0 / m0
    K[o, :o] = DA[nA]
    K[o, o:] = -DB[0] / (m0 * theta0)
    K[o, o] += dlog_m0 / (m0 * theta0)
    rhs[o] = -1.0
    lam, w = _talbot(M, T)
    systems = K[None] + lam[:, None, None] * E[None]
    sol = np.einsum("k,ki->i", w, np.linalg.solve(systems, np.broadcast_to(rhs, (lam.size, size))[..., None])[..., 0]).real
    # speed density on [θ_0, π]: m = (2/A) exp(∫_{θ_0}^θ R) (sin θ / sin θ_0)^{d-2},
    # R = 2B/A - (d-2) cot θ = -(2b/A + (d-1) cos θ) / sin θ, regular at π (extrapolated there)
    R = np.empty(nA + 1)
    R[1:] = -(2 * nbA[1:] / AA[1:] + (d - 2) * np.cos(xA[1:])) / np.sin(xA[1:])
    R[0] = _extrapolate(xA[1:], R[1:], math.pi)
    IR = npcheb.chebval(2 * (xA - theta0) / (math.pi - theta0) - 1, _integral(R, theta0, math.pi))
    with np.errstate(divide="ignore"):
        ratio = np.sin(xA) / math.sin(theta0)
    ratio[0] = 0.0
    mA = 2 / AA * np.exp(IR) * (ratio ** (d - 2) if d > 2 else 1.0)
    return {"pA": mA * sol[:o], "pB": sol[o:], "xA": xA, "xB": xB, "theta0": theta0, "s0": s0, "s_min": s_min}


def _extrapolate(nodes: np.ndarray, values: np.ndarray, x: float) -> float:
    """Value at the end node x of the interpolant through the other Lobatto nodes (barycentric).

    The weights of the Lobatto set without its first node x are w_j (x_j - x).
    """
    n = nodes.size
    j = np.arange(1, n + 1)
    wb = (-1.0) ** j * np.where(j == n, 0.5, 1.0) * (nodes - x)
    diff = x - nodes
    return float(np.sum(wb / diff * values) / np.sum(wb / diff))


def _integral(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Chebyshev coefficients (in u ∈ [-1, 1]) of ∫_lo^x of the interpolant of values."""
    return npcheb.chebint(_cheb_coefficients(values), lbnd=-1) * ((hi - lo) / 2)


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
        Estimated error of the CDF and of the moments: the largest of the changes under 8
        more Talbot points and under 1.5× the nodes, under the cut moved 4 standard
        deviations further (``cdf_truncation``), the mass defect |P(c_T ∈ [-1, 1]) - 1| and the
        largest difference of the Legendre moments to the independent backward-equation
        solution.
    cdf_truncation : float
        The change of the CDF when the cut s_min is moved further out.
    diagnostics : dict
        The parts of ``accuracy`` (``talbot``, ``nodes``, ``cut``, ``mass_defect``,
        ``backward_moments``), the cut ``s_min``, and the ``n`` and ``talbot_nodes`` used.
    """

    d: int
    beta: float | None
    c0: float
    T: float
    n: int
    moments: np.ndarray = field(repr=False)
    accuracy: float
    cdf_truncation: float
    diagnostics: dict = field(repr=False)
    _solution: dict = field(repr=False)

    @property
    def mean(self) -> float:
        return float(self.moments[1])

    @property
    def second(self) -> float:
        return float((2 * self.moments[2] + 1) / 3)

    def cdf(self, s) -> np.ndarray:
        """P(c_T <= s), vectorised over s (clipped to [-1, 1])."""
        s = np.clip(np.asarray(s, dtype=np.float64), -1.0, 1.0)
        return _cdf(self._solution, np.arccos(s))

    def quantile(self, u, grid: int = 20001) -> np.ndarray:
        """Inverse CDF by interpolation on a grid uniform in θ (error about 1e-8)."""
        theta = np.linspace(math.pi, 0.0, grid)
        F = np.maximum.accumulate(_cdf(self._solution, theta))
        return np.cos(np.interp(np.asarray(u, dtype=np.float64), F, theta))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n iid draws of c_T (inverse CDF)."""
        return self.quantile(rng.random(n))


def _cdf(sol: dict, theta: np.ndarray) -> np.ndarray:
    """P(θ_T >= θ) = P(c_T <= cos θ) from the two domains' cumulative integrals."""
    th0, s0, smin = sol["theta0"], sol["s0"], sol["s_min"]
    iA, iB = sol["intA"], sol["intB"]
    theta = np.asarray(theta, dtype=np.float64)
    out = np.empty_like(theta)
    upper = theta >= th0
    massA = npcheb.chebval(1.0, iA)
    out[upper] = massA - npcheb.chebval(2 * (theta[upper] - th0) / (math.pi - th0) - 1, iA)
    with np.errstate(divide="ignore"):
        s = np.maximum(np.log(theta[~upper]), smin)
    out[~upper] = massA + npcheb.chebval(1.0, iB) - npcheb.chebval(2 * (s - smin) / (s0 - smin) - 1, iB)
    return np.clip(out, 0.0, 1.0)


def _with_integrals(sol: dict) -> dict:
    out = dict(sol)
    out["intA"] = _integral(sol["pA"], sol["theta0"], math.pi)
    out["intB"] = _integral(sol["pB"], sol["s_min"], sol["s0"])
    return out


def _expect_legendre(sol: dict, K: int) -> np.ndarray:
    """E P_k(c_T), k = 0..K, by Gauss–Legendre quadrature of the interpolated density."""
    n = K + max(sol["pA"].size, sol["pB"].size) + 16
    u, wu = npleg.leggauss(n)
    th0, s0, smin = sol["theta0"], sol["s0"], sol["s_min"]
    pA = npcheb.chebval(u, _cheb_coefficients(sol["pA"]))
    pB = npcheb.chebval(u, _cheb_coefficients(sol["pB"]))
    thA = th0 + (math.pi - th0) * (u + 1) / 2
    thB = np.exp(smin + (s0 - smin) * (u + 1) / 2)
    eA = npleg.legvander(np.cos(thA), K).T @ (wu * pA) * ((math.pi - th0) / 2)
    eB = npleg.legvander(np.cos(thB), K).T @ (wu * pB) * ((s0 - smin) / 2)
    return eA + eB


def _backward_legendre(gen: _Generator, theta0: float, T: float, K: int) -> np.ndarray:
    """E P_k(c_T) from the Kolmogorov backward equation in θ (independent of the forward solver).

    u(t, θ) = E_θ P_k(cos θ_t) solves u_t = ½ A u'' + B u' on [0, π]; collocation at the
    Lobatto points, u'(π) = 0 (regularity at the entrance boundary) eliminates the value at
    π, the row at θ = 0 reads u_t = 0 (A = B = 0 there), and u(T) = expm(T G) u(0).
    """
    n = K + 96
    x, D = _domain(n, 0.0, math.pi)
    A, nb = gen.coefficients(x)
    B = np.zeros(n + 1)
    B[1:n] = -nb[1:n] / np.sin(x[1:n])
    A[n] = 0.0
    G = 0.5 * A[:, None] * (D @ D) + B[:, None] * D
    P = np.zeros((n + 1, n))
    P[1:] = np.eye(n)
    P[0] = -D[0, 1:] / D[0, 0]
    f = npleg.legvander(np.cos(x), K)
    u = P @ (linalg.expm(T * (G[1:] @ P)) @ f[1:])
    return _barycentric_at(x, theta0) @ u


def _solve(gen: _Generator, theta0: float, T: float, n: int, M: int, cut: float) -> dict:
    mu, var = gen.asymptotics()
    s0 = math.log(theta0)
    s_min = s0 + min(mu, 0.0) * T - cut * math.sqrt(var * T) - 2.0
    nB = n + n // 2
    return _with_integrals(_forward(gen, theta0, T, n, nB, M, s_min))


#: Target of the self-convergence checks: nodes and Talbot points are added until both changes are below it.
TOLERANCE = 1e-9
_MAX_N, _MAX_M = 240, 36


def _change(a: dict, b: dict, K: int, theta: np.ndarray) -> float:
    return max(float(np.max(np.abs(_cdf(a, theta) - _cdf(b, theta)))),
               float(np.max(np.abs(_expect_legendre(a, K) - _expect_legendre(b, K)))))


@lru_cache(maxsize=64)
def _cached(activation: str, sigma_w: float, d: int, beta, c0: float, T: float, n: int, K: int) -> TwoPointLaw:
    kern = ActivationKernel(activation, sigma_w=sigma_w)
    gen = _Generator(kern, d, beta)
    A_pi = float(gen.coefficients(np.array([math.pi]))[0][0])
    if not A_pi > 1e-8 * 2 * kern.kappa1:
        raise ValueError(f"activation {activation!r} gives kappa(-1) = -kappa(1) (an odd activation): c = -1 is then a "
                         "second natural boundary, which this solver does not treat; use an activation with "
                         "kappa(1) + kappa(-1) > 0 (relu, gelu)")
    theta0 = math.acos(c0)
    theta = np.linspace(0.0, math.pi, 4001)

    def refine(n, M, step):
        # add Talbot points (step "M") or nodes (step "n") while the change keeps falling and exceeds
        # TOLERANCE; it stops at the round-off floor, where more points only amplify round-off
        bigger = (lambda n, M: (n, M + 8)) if step == "M" else (lambda n, M: (n + n // 2, M))
        sol = _solve(gen, theta0, T, n, M, CUT_SDS)
        nxt = bigger(n, M)
        change = _change(sol, _solve(gen, theta0, T, *nxt, CUT_SDS), K, theta)
        while change > TOLERANCE and nxt[0] + nxt[0] // 2 <= _MAX_N and nxt[1] + 8 <= _MAX_M:
            after = bigger(*nxt)
            cand = _solve(gen, theta0, T, *nxt, CUT_SDS)
            new = _change(cand, _solve(gen, theta0, T, *after, CUT_SDS), K, theta)
            if new >= change:
                break
            (n, M), nxt, sol, change = nxt, after, cand, new
        return n, M, sol, change

    n, M, _, talbot = refine(n, TALBOT_NODES, "M")
    n, M, sol, nodes = refine(n, M, "n")
    far = _solve(gen, theta0, T, n, M, CUT_SDS + 4)
    cut = float(np.max(np.abs(_cdf(sol, theta) - _cdf(far, theta))))
    mom = _expect_legendre(sol, K)
    mass_defect = abs(float(mom[0]) - 1.0)
    backward = float(np.max(np.abs(mom - _backward_legendre(gen, theta0, T, K))))
    diag = {"talbot": talbot, "nodes": nodes, "cut": cut, "mass_defect": mass_defect, "backward_moments": backward,
            "s_min": sol["s_min"], "n": n, "talbot_nodes": M}
    return TwoPointLaw(d, beta, c0, T, n, mom, max(talbot, nodes, cut, mass_defect, backward), cut, diag, sol)


def two_point_law(activation: str = "relu", *, sigma_w: float = 1.0, d: int = 3, beta: float | None = 1.0,
                  c0: float = 0.0, T: float = 1.0, n: int = 48, K: int = 32) -> TwoPointLaw:
    """The exact law of c_T for the MLP noise of an activation (cached).

    Parameters
    ----------
    activation, sigma_w
        The kernel κ of :class:`meanfield.kernels.ActivationKernel` (σ_b = 0, σ = 1): the
        untruncated kernel, which is what both the finite-width layers and the Gaussian
        layers of :func:`two_token_transformer` carry. Odd activations (tanh, erf, linear:
        κ(-1) = -κ(1)) are refused: for them c = -1 is a second natural boundary.
    d : int, >= 2
    beta : float or None
        Inverse temperature of the softmax attention; None for no attention.
    c0 : float in (-1, 1)
        Initial overlap.
    T : float > 0
    n : int, 16..400
        Chebyshev–Lobatto points on the θ-domain to start from (1.5 n on the log θ
        domain); nodes (×1.5) and Talbot points (+8) are added while a refinement changes
        the CDF or a moment by more than :data:`TOLERANCE`.
    K : int, 2 <= K <= 4 n
        Legendre moments kept.

    Examples
    --------
    >>> law = two_point_law()
    >>> round(law.mean, 9), law.accuracy < 1e-8
    (0.500567145, True)
    >>> float(law.cdf(1.0)), round(float(law.moments[0]), 9)
    (1.0, 1.0)
    """
    d = as_int(d, "d", min_value=2)
    c0 = as_float(c0, "c0", min_value=-1.0, max_value=1.0)
    if abs(c0) >= 1.0:
        raise ValueError(f"c0 must lie in the open interval (-1, 1), got {c0} (c0 = ±1 are boundary points)")
    T = as_float(T, "T", min_value=0.0, strict_min=True)
    n = as_int(n, "n", min_value=16, max_value=_MAX_N)
    K = as_int(K, "K", min_value=2, max_value=4 * n)
    if beta is not None:
        beta = as_float(beta, "beta")
    return _cached(str(activation), float(sigma_w), d, beta, c0, T, n, K)


def w1_to_law(sample, law: TwoPointLaw, grid: int = 8001) -> float:
    """W_1 between the empirical law of ``sample`` (values of c_T) and ``law``: ∫ |F_n - F| dc.

    Exact for the empirical step function against the piecewise-linear interpolant of F on
    the union of the sample points and a uniform grid of ``grid`` points (the remaining
    error is that of linear interpolation of F, O(h²)).
    """
    x = np.sort(np.clip(np.asarray(sample, dtype=np.float64), -1.0, 1.0))
    u = np.union1d(x, np.linspace(-1.0, 1.0, grid))
    e = np.searchsorted(x, u[:-1], side="right") / x.size - law.cdf(u[:-1])
    # F_n is constant on [u_k, u_{k+1}); the right end uses that constant, not the jump
    e1 = np.searchsorted(x, u[:-1], side="right") / x.size - law.cdf(u[1:])
    h = np.diff(u)
    same = e * e1 >= 0
    area = np.where(same, 0.5 * (np.abs(e) + np.abs(e1)), (e * e + e1 * e1) / (2 * (np.abs(e) + np.abs(e1)) + 1e-300))
    return float(np.sum(area * h))
