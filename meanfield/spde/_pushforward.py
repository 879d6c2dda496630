"""Scheme (b): the Lagrangian–spectral push-forward by the particles' own step map."""

from __future__ import annotations

import numpy as np
from scipy.linalg import expm

from ..sphere import NUFFT_EPS
from ._schemes import Problem, Scheme, displacement_on_grid, register_scheme

__all__ = ["PushForward"]


@register_scheme("pushforward")
class PushForward(Scheme):
    """T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)),  ρ_{n+1} = (T_n)_# ρ_n in weak form.

    (ρ_{n+1})_lm = Σ_q ρ_n(x_q) w_q conj(Y_lm(T_n(x_q))) over the grid nodes (one adjoint
    non-uniform transform at accuracy ``NUFFT_EPS``). The accuracy is not loosened with the step:
    runs at the same h differ by their spatial error only (a spectral-convergence study in lmax,
    or this scheme against the characteristics scheme, which applies the same map), and that
    reaches 1e-12. With ``noise_map="flow"``
    (rotation noise) the noise part is the exact rotation exp(ΔΩ_n) applied after Π(x + h v).
    """

    noise_maps = ("projected", "flow")

    @classmethod
    def check(cls, p: Problem) -> None:
        super().check(p)
        if p.noise_map == "flow" and p.noise_on and not p.noise.supports_flow:
            raise ValueError("noise_map='flow' needs a rotation noise (a NoiseSource with supports_flow, "
                             f"e.g. RotationNoise), got {type(p.noise).__name__}")

    def __init__(self, problem: Problem):
        super().__init__(problem)
        self.epsilon = NUFFT_EPS
        # grid-sized work arrays kept over the steps (fresh ones would page-fault at every step)
        self._mass = np.empty(problem.grid.Q)
        self._work = np.empty((problem.d + 1, problem.grid.Q))

    def step(self, c, rho_g, vel, t0, t1):
        p, grid = self.p, self.p.grid
        x = grid.points
        field = p.noise.field(t0, t1) if (p.noise_on and p.noise_map == "projected") else None
        if vel is None and field is None:
            y = x.copy()
        else:
            # x + h v + ΔW from its frame components and the radial part <ΔW, x>
            D = displacement_on_grid(grid, vel, c, p.dt, field, radial=True, work=self._work)
            y = grid.move(D, cartesian=p.noise_map == "flow")
        if p.noise_on and p.noise_map == "flow":
            y = y @ expm(p.noise.omega(t0, t1)).T
        c00 = c[0]
        c = p.basis.adjoint(np.multiply(rho_g, grid.weights, out=self._mass), y, epsilon=self.epsilon)
        # Σ_q ρ_n(x_q) w_q = sqrt(|S|) ρ_00 exactly (the grid integrates degree <= lmax exactly):
        # keep ρ_00 itself so that round-off in the quadrature sum does not accumulate
        c[0] = c00
        return c
