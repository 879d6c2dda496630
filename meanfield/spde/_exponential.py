"""Scheme (a): Eulerian Itô exponential Euler, and its step-size condition."""

from __future__ import annotations

import math

import numpy as np

from ._schemes import Problem, Scheme, displacement_on_grid, register_scheme

__all__ = ["ExponentialEuler", "exponential_euler_growth", "max_stable_dt", "CFL_GROWTH"]

#: Scheme (a) is accepted when the frozen-coefficient amplitude growth over the run is below this factor.
CFL_GROWTH = 2.0


def exponential_euler_growth(d: int, lmax: int, dt: float, t_final: float, kappa1: float, vmax: float) -> float:
    """Worst amplitude growth factor of scheme (a) over a run, frozen-coefficient analysis.

    For a mode of degree l (eigenvalue -l(l+d-2) =: -ℓ² of Δ_S) transported with speed
    ``|v| <= vmax`` and diffused by the noise, one exponential-Euler step multiplies the
    mean-square amplitude by

        G_l = e^{-x} (1 + x + y),   x = κ_σ(1) ℓ² h,   y = h² vmax² ℓ²,

    (the noise term contributes ``E|h ω_noise|² = κ ℓ² h``, the explicit drift (h vmax ℓ)²;
    exact transport would give G = 1 and the exact Itô solution e^{-x}(1+x) <= 1 is the
    mean-square-stable part). Over n = t_final / h steps the amplitude grows by at most
    max_l G_l^{n/2}, which this function returns. Without attention (vmax = 0) it is <= 1
    for every h; without noise it is ≈ exp(t_final h vmax² L²/2), so the condition
    ``growth <= CFL_GROWTH`` is h <~ 2 log 2 / (t_final vmax² L(L+d-2)).
    For V = I, ``|v| <= |A| <= 1`` because A is a convex combination of unit vectors.

    Examples
    --------
    >>> exponential_euler_growth(3, 32, 1e-3, 1.0, kappa1=0.0, vmax=1.0) < 2.0
    True
    """
    ls = np.arange(1, lmax + 1, dtype=np.float64)
    l2 = ls * (ls + d - 2)
    x = kappa1 * l2 * dt
    y = (dt * vmax) ** 2 * l2
    logg = np.log1p(x + y) - x
    n = max(1.0, t_final / dt)
    return float(math.exp(0.5 * n * max(0.0, logg.max()))) if lmax > 0 else 1.0


def max_stable_dt(d, lmax, dt, t_final, kappa1, vmax) -> float:
    """Largest step <= dt whose growth factor stays below :data:`CFL_GROWTH` (bisection)."""
    lo, hi = 0.0, dt
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if exponential_euler_growth(d, lmax, mid, t_final, kappa1, vmax) <= CFL_GROWTH:
            lo = mid
        else:
            hi = mid
    return lo


@register_scheme("exponential")
class ExponentialEuler(Scheme):
    """ρ_{n+1} = E_h [ ρ_n - h div_S(ρ_n v[ρ_n]) - div_S(ρ_n P_x ΔW_n) ], E_h = exp(½ κ_σ(1) h Δ_S).

    Mass is conserved exactly (the divergence has no l = 0 part). Explicit in the transport
    term: with attention the step must satisfy :func:`exponential_euler_growth` <= CFL_GROWTH.
    """

    @classmethod
    def check(cls, p: Problem) -> None:
        super().check(p)
        n_total = int(round(p.t_final / p.dt))
        if p.attention and n_total > 0:
            lmax = p.basis.lmax
            growth = exponential_euler_growth(p.d, lmax, p.dt, p.t_final, p.kappa1, p.vmax)
            if growth > CFL_GROWTH:
                hmax = max_stable_dt(p.d, lmax, p.dt, p.t_final, p.kappa1, p.vmax)
                raise ValueError(
                    f"dt = {p.dt} violates the step-size condition of the exponential Euler scheme: the "
                    f"frozen-coefficient amplitude growth max_l [e^(-k l^2 h)(1 + k l^2 h + h^2 |v|^2 l^2)]^(n/2) "
                    f"over the run is {growth:.3g} > {CFL_GROWTH} (|v| <= {p.vmax:g}, k = kappa_sigma(1) = "
                    f"{p.kappa1:g}, lmax = {lmax}, T = {p.t_final:g}); use dt <= {hmax:.3g} or scheme='pushforward'")

    def __init__(self, problem: Problem):
        super().__init__(problem)
        p = problem
        ell = p.basis.ell
        self.decay = np.exp(-0.5 * p.kappa1 * ell * (ell + p.d - 2.0) * p.dt) if p.noise_on else None
        # a grid-sized work array kept over the steps (a fresh one would page-fault at every step)
        self._work = np.empty((p.d, p.grid.Q))

    def step(self, c, rho_g, vel, t0, t1):
        p, grid = self.p, self.p.grid
        # frame components of ρ_n (h v + P_x ΔW) times the quadrature weights, then the spectral divergence
        field = p.noise.field(t0, t1) if p.noise_on else None
        flux = displacement_on_grid(grid, vel, c, p.dt, field, scale=rho_g, weighted=True, work=self._work)
        div = grid.divergence(flux, weighted=True)
        c = np.subtract(c, div, out=div)
        if self.decay is not None:
            c *= self.decay
        return c
