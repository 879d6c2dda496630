"""Rigid rotation noise W(t, x) = Ω(t) x: the exactly solvable test case of the solvers."""

from __future__ import annotations

import numpy as np
from scipy.linalg import expm

from .. import _validate
from .._validate import as_float, as_int, check_cost
from ._base import NoiseField, NoiseSource, field_points
from ._tree import BrownianTree, tree_cost

__all__ = ["RotationNoise"]


def _rotation_cost(d: int, max_depth: int) -> tuple[float, float]:
    secs, mem = tree_cost(d * (d - 1) // 2, max_depth)
    return secs, mem + 8.0 * 3 * d**2  # Ω and its exponential


class RotationNoise(NoiseSource):
    """Rigid rotation noise W(t, x) = Ω(t) x, Ω a skew-symmetric Brownian matrix (theory §5.5).

    Ω(t) = scale · Σ_{i<j} B_ij(t) (e_i e_j^T - e_j e_i^T) with independent standard
    Brownian motions B_ij from a :class:`BrownianTree` (so it is refinable). The
    Stratonovich flow dR = ∘dΩ R is a random rotation R_t, so a density is transported by
    rotation; this noise is used to test the SPDE solver against the exactly rotated density.
    For d = 2 the increments commute and R_t = exp(Ω(t)) (:meth:`rotation`); for d >= 3
    they do not, and R_t is the product integral lim exp(ΔΩ_{n-1}) ··· exp(ΔΩ_0), which
    differs from exp(Ω(t)) by the Lévy-area terms of the Magnus expansion (an O(t) effect,
    not a small one): use :meth:`flow`.

    Parameters
    ----------
    d : int, >= 2
    scale : float, >= 0
    seed : int, SeedSequence or Generator
    t_max : float, > 0
    max_depth : int, 1..52
    sigma : float, >= 0
        Noise strength (keyword only, default 1; :class:`~meanfield.noise.NoiseSource`): the
        generator is σ Ω, so σ and ``scale`` act alike (their product is what matters).

    Attributes
    ----------
    kappa1 : float
        E|P_x ΔW|²/((d-1) dt) = σ² scale² (the Itô correction coefficient in the Π-step).
    """

    refinable = True
    supports_flow = True
    _describe_fields = ("scale", "t_max")

    def __init__(self, d: int, scale: float = 1.0, seed=0, *, t_max: float = 1.0, max_depth: int = 40):
        self.d = as_int(d, "d", min_value=2)
        self.scale = as_float(scale, "scale", min_value=0.0)
        self.kappa1 = self.scale**2
        self.kept_fraction = 1.0
        depth = as_int(max_depth, "max_depth", min_value=1, max_value=52)
        secs, mem = _rotation_cost(self.d, depth)
        if secs > _validate.COST_LIMIT_SECONDS or mem > _validate.COST_LIMIT_BYTES:
            lo, hi = 2, self.d
            while hi - lo > 1:
                mid = (lo + hi) // 2
                ms, mm = _rotation_cost(mid, depth)
                lo, hi = (mid, hi) if ms <= _validate.COST_LIMIT_SECONDS and mm <= _validate.COST_LIMIT_BYTES else (lo, mid)
            check_cost("RotationNoise", seconds=secs, memory=mem, parameter="d", value=self.d, largest=lo)
        self.tree = BrownianTree((self.d * (self.d - 1) // 2,), seed, t_max=t_max, max_depth=max_depth)
        self.iu = np.triu_indices(self.d, 1)
        self.t_max = self.tree.t_max

    def omega(self, t0: float, t1: float) -> np.ndarray:
        """σ (Ω(t1) - Ω(t0)), a skew-symmetric (d, d) matrix: the generator of the field of :meth:`field`."""
        return self.sigma * self._unit_omega(t0, t1)

    def _unit_omega(self, t0: float, t1: float) -> np.ndarray:
        inc = self.scale * self.tree.increment(t0, t1)
        om = np.zeros((self.d, self.d))
        om[self.iu] = inc
        return om - om.T

    def rotation(self, t: float) -> np.ndarray:
        """exp(Ω(t)), an orthogonal matrix: the Stratonovich flow map at time t for d = 2 only.

        For d >= 3 the flow is :meth:`flow` (the increments of Ω do not commute).
        """
        return expm(self.omega(0.0, t))

    def flow(self, t: float, n_steps: int) -> np.ndarray:
        """Geometric-Euler flow exp(ΔΩ_{n-1}) ··· exp(ΔΩ_0) over n_steps equal steps of [0, t].

        ΔΩ_k = Ω((k+1) t/n) - Ω(k t/n). It is the exact flow map of the push-forward scheme
        with rotation steps and converges to the Stratonovich flow R_t as n -> ∞ (strong
        order 1/2 for d >= 3, exact for every n when d = 2).
        """
        n_steps = as_int(n_steps, "n_steps", min_value=1)
        R = np.eye(self.d)
        for k in range(n_steps):
            R = expm(self.omega(k * t / n_steps, (k + 1) * t / n_steps)) @ R
        return R

    def field(self, t0: float, t1: float) -> "_LinearField":
        return _LinearField(self._unit_omega(t0, t1), t0, t1)  # NoiseSource multiplies it by σ


class _LinearField(NoiseField):
    def __init__(self, om: np.ndarray, t0: float, t1: float):
        self.omega, self.t0, self.t1 = om, t0, t1

    def scaled(self, sigma: float) -> "_LinearField":
        return _LinearField(sigma * self.omega, self.t0, self.t1)

    def __call__(self, x) -> np.ndarray:
        return field_points(x, self.omega.shape[0]) @ self.omega.T
