"""The error model of the spectral attention evaluator: degree and transform accuracy from ``tol``.

The velocity error of :class:`meanfield.attention_spectral.SpectralAttention` is modelled as

    truncation bound at degree L  +  TRANSFORM_ERROR_FACTOR · ε  +  round-off (β < 0),

with the rigorous bound (t_1(L)/b + t_0(L)) / (g_min - t_0(L)) of the module docstring of
:mod:`meanfield.attention_spectral` (b = abs(β), t_0 and t_1 the tails of the kernel's harmonic
series and of its gradient). :class:`ErrorModel` holds the tails and answers the evaluator's
three questions: the degree and ε of the non-uniform transforms (truncation within tol/2), the
lower degree the exact low-degree transforms may take (the whole model within tol), and the
model's value at a degree. The public constants are re-exported from
:mod:`meanfield.attention_spectral`.
"""

from __future__ import annotations

import math

import numpy as np

from ._attention_transforms import DUCC_EPS_MIN
from .attention import attention_eigenvalues
from .harmonics import harmonic_dimension, sphere_area

__all__ = ["ErrorModel", "EPS_PER_TOL", "TRANSFORM_ERROR_FACTOR", "ROUNDOFF_FACTOR"]

#: Largest degree the tails are tabulated to.
DEGREE_CAP = 2048

#: Transform accuracy per unit of tolerance: ε = clip(EPS_PER_TOL · tol, 2e-13, 1e-2).
EPS_PER_TOL = 0.1

#: Measured bound of the velocity error caused by the transforms, in units of ε: on uniform,
#: clustered (vMF κ = 200–300) and isolated-token clouds, N = 2·10^3–2·10^4, β = 0.5–40,
#: ε = 2e-13–1e-7, max_i |Δv_i| <= 0.07 ε on S^2 and <= 0.2 ε on S^1 (NUFFT); we use 1.
TRANSFORM_ERROR_FACTOR = 1.0

#: β < 0: velocity round-off in units of u e^{2 abs(β)} (u the double-precision epsilon); measured
#: <= 0.25 on tight clusters, three clusters and uniform clouds (S^1, S^2, N = 3000, β = -0.5..-10).
ROUNDOFF_FACTOR = 1.0


class ErrorModel:
    """Tails, truncation bound and degree choice of the spectral attention for (d, β, tol).

    Parameters
    ----------
    d : int
        Ambient dimension (tokens on S^{d-1}).
    beta : float
        Inverse temperature (any real).
    tol : float, > 0
        Target absolute velocity error.
    epsilon : float, optional
        Fixed accuracy of the non-uniform transforms (default ``clip(EPS_PER_TOL · tol, 2e-13, 1e-2)``).
    lmax : int, optional
        Fixed degree (default: chosen from the bound).

    Examples
    --------
    >>> m = ErrorModel(3, 0.1, 1e-10)
    >>> L, eps, predicted = m.plan(m.gmin(0.0))      # the non-uniform transforms: truncation <= tol/2
    >>> L, f"{eps:.0e}", m.exact_degree(L, m.gmin(0.0), eps)  # the exact ones: the whole model <= tol
    (7, '1e-11', 6)
    >>> f"{m.truncation_bound(6, m.gmin(0.0)):.1e}", f"{m.truncation_bound(7, m.gmin(0.0)):.1e}"
    ('6.3e-11', '4.7e-13')
    """

    def __init__(self, d: int, beta: float, tol: float, epsilon: float | None = None, lmax: int | None = None):
        self.d, self.beta, self.tol = d, beta, tol
        self.fixed_eps, self.fixed_lmax = epsilon, lmax
        self._tails()

    def _tails(self) -> None:
        """t_0(L), t_1(L) for L = 0..cap (tails Σ_{l>L}), computed once."""
        beta, d = abs(self.beta), self.d  # |e^{-|β|} λ_l(β)| = e^{-|β|} λ_l(|β|)
        if beta == 0.0:
            self.t0 = self.t1 = np.zeros(1)
            return
        cap = int(min(DEGREE_CAP, 2 * beta + 80))
        while True:
            lam = attention_eigenvalues(d, beta, cap)
            ls = np.arange(cap + 1)
            z1 = harmonic_dimension(d, cap) / sphere_area(d)
            terms0 = lam * z1
            terms1 = terms0 * np.sqrt(ls * (ls + d - 2.0))
            if terms0[-1] < 1e-300 or cap >= DEGREE_CAP:
                break
            cap = min(DEGREE_CAP, 2 * cap)
        # tail[L] = Σ_{l > L}
        self.t0 = np.concatenate([np.cumsum(terms0[::-1])[::-1][1:], [0.0]])
        self.t1 = np.concatenate([np.cumsum(terms1[::-1])[::-1][1:], [0.0]])

    def gmin(self, wmin: float) -> float:
        """Lower bound of g at the tokens; a token's own mass ``wmin`` helps only when β > 0."""
        floor = math.exp(-2 * abs(self.beta))
        return max(wmin, floor) if self.beta > 0 else floor

    def roundoff(self) -> float:
        """β < 0: predicted round-off of v, ROUNDOFF_FACTOR · u e^{2 abs(β)} (0 for β >= 0)."""
        if self.beta >= 0:
            return 0.0
        return ROUNDOFF_FACTOR * float(np.finfo(np.float64).eps) * math.exp(min(2 * abs(self.beta), 700.0))

    def truncation_bound(self, L: int, gmin: float) -> float:
        """Rigorous bound (t_1(L)/b + t_0(L)) / (g_min - t_0(L)) on the velocity truncation error."""
        if self.beta == 0.0:
            return 0.0
        L = min(L, self.t0.size - 1)
        t0, t1 = self.t0[L], self.t1[L]
        if t0 >= gmin:
            return math.inf
        return (t1 / abs(self.beta) + t0) / (gmin - t0)

    def predicted(self, L: int, gmin: float, eps: float) -> float:
        """The error model: truncation bound + TRANSFORM_ERROR_FACTOR · ε + round-off (β < 0)."""
        return float(self.truncation_bound(L, gmin) + TRANSFORM_ERROR_FACTOR * eps + self.roundoff())

    def plan(self, gmin: float) -> tuple[int, float, float]:
        """(degree, ε, predicted error) of the non-uniform transforms at a lower bound g_min of g.

        The smallest degree whose truncation bound is <= tol/2 (the other half is kept for the
        transforms' ε), or the fixed one.
        """
        if self.fixed_eps is not None:
            eps = self.fixed_eps
        else:
            eps = min(1e-2, max(DUCC_EPS_MIN, EPS_PER_TOL * self.tol))
        if self.beta == 0.0:
            return 0, eps, 0.0
        if self.fixed_lmax is not None:
            L = self.fixed_lmax
        else:
            t0, t1 = self.t0, self.t1
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = np.where(t0 < gmin, (t1 / abs(self.beta) + t0) / (gmin - t0), np.inf)
            ok = np.nonzero(bound <= 0.5 * self.tol)[0]
            if ok.size == 0:
                raise ValueError(
                    f"beta = {self.beta} needs a degree above {self.t0.size - 1} for tol = {self.tol}; "
                    "use method='direct'"
                )
            L = int(ok[0])
        return L, float(eps), self.predicted(L, gmin, eps)

    def exact_degree(self, L: int, gmin: float, eps: float) -> int:
        """Degree for the exact transforms, given the non-uniform plan (``L``, ``eps``) at ``gmin``.

        The exact transforms (the ``"direct"`` backends) make only round-off (measured below
        2e-15 in the velocity, far below the smallest ε = 2e-13), so the half of ``tol`` the
        non-uniform plan keeps for its transforms is not needed there: the smallest degree
        L' <= L whose whole error model fits,

            (t_1(L')/b + t_0(L')) / (g_min - t_0(L')) + TRANSFORM_ERROR_FACTOR · ε + round-off <= tol,

        keeping ε in the model as the allowance for their round-off. ``L`` itself when no lower
        degree fits, when the degree is fixed, or for β = 0.
        """
        if self.fixed_lmax is not None or self.beta == 0.0:
            return L
        room = self.tol - TRANSFORM_ERROR_FACTOR * eps - self.roundoff()
        lx = L
        while lx > 0 and self.truncation_bound(lx - 1, gmin) <= room:  # the bound decreases in L: 1-2 steps
            lx -= 1
        return lx
