"""Noise from a fresh finite-width random MLP per step (any d, not refinable)."""

from __future__ import annotations

import math
import struct

import numpy as np

from .. import _validate
from .._validate import as_float, as_int, check_cost
from ..kernels import ActivationKernel
from ._base import NoiseField, NoiseSource, field_points
from ._tree import _key_from_seed

__all__ = ["RandomFeatureNoise"]


class RandomFeatureNoise(NoiseSource):
    """Noise from a fresh finite-width random MLP per step, with covariance κ in any d.

    Over [t0, t1] the field is ΔW(x) = sqrt(t1 - t0) σ m^{-1/2} A φ(W x + b) with
    A ~ N(0,1)^{d×m}, W ~ N(0, σ_w²)^{m×d}, b ~ N(0, σ_b²)^m drawn afresh, so that
    E[ΔW_a(x) ΔW_b(y)] = (t1 - t0) δ_ab κ(<x, y>) exactly for every width m (theory §2).
    For finite m the field is not Gaussian, and it is not refinable: a coarse step is
    *not* the sum of fine steps. The weights of a step are keyed by the seed and the
    two times, so the same step always gets the same weights.

    Parameters
    ----------
    kernel : ActivationKernel
    d : int, >= 2
    width : int, >= 1
    seed : int, SeedSequence or Generator
    t_max : float, > 0
        Horizon; ``math.inf`` (default) for none. NaN, 0 and negative values raise.
    sigma : float, >= 0
        Noise strength (keyword only, default 1): the field is σ times the one above and its
        covariance σ² κ (:class:`~meanfield.noise.NoiseSource`).

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> noise = RandomFeatureNoise(ActivationKernel("relu"), d=5, width=256, seed=0)
    >>> noise.field(0.0, 0.1)(np.eye(5)).shape
    (5, 5)
    """

    refinable = False
    _describe_fields = ("width", "t_max")

    def __init__(self, kernel: ActivationKernel, d: int, width: int, seed=0, *, t_max: float = math.inf):
        if not isinstance(kernel, ActivationKernel):
            raise TypeError(f"kernel must be an ActivationKernel, got {type(kernel).__name__}")
        self.d = as_int(d, "d", min_value=2)
        self.width = as_int(width, "width", min_value=1)
        # the weights of one step, A (d, m), W (m, d), b (m,), and a block of hidden activations
        per_width = 8.0 * (2 * self.d + 1)
        check_cost("RandomFeatureNoise", seconds=0.0, memory=per_width * self.width + 8.0 * 2**22, parameter="width",
                   value=self.width, largest=int((_validate.COST_LIMIT_BYTES - 8.0 * 2**22) // per_width))
        self.kernel = self.source_kernel = kernel
        self.kappa1 = kernel.kappa1
        self.kept_fraction = 1.0
        if isinstance(t_max, (int, float, np.integer, np.floating)) and not isinstance(t_max, bool) \
                and math.isinf(t_max) and t_max > 0:
            self.t_max = math.inf  # no horizon: every step draws fresh weights
        else:
            self.t_max = as_float(t_max, "t_max", min_value=0.0, strict_min=True)
        self._key = _key_from_seed(seed)

    def __repr__(self) -> str:
        return f"RandomFeatureNoise(d={self.d}, width={self.width}, kernel={self.kernel!r})"

    def weights(self, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A, W, b) of the MLP used over [t0, t1]."""
        words = struct.unpack("<4I", struct.pack("<2d", float(t0), float(t1)))
        ss = np.random.SeedSequence([int(w) for w in self._key], spawn_key=words)
        rng = np.random.default_rng(ss)
        k = self.source_kernel  # the unit-strength MLP; σ is applied to the field by NoiseSource
        A = rng.standard_normal((self.d, self.width))
        W = k.sigma_w * rng.standard_normal((self.width, self.d))
        b = k.sigma_b * rng.standard_normal(self.width)
        return A, W, b

    def field(self, t0: float, t1: float) -> "_MLPField":
        t0, t1 = as_float(t0, "t0"), as_float(t1, "t1")
        if t1 < t0:
            raise ValueError(f"t1 must be >= t0, got t0 = {t0}, t1 = {t1}")
        if t1 > self.t_max * (1 + 1e-12):
            raise ValueError(f"t1 = {t1} is beyond the noise's t_max = {self.t_max}")
        A, W, b = self.weights(t0, t1)
        return _MLPField(self, t0, t1, A, W, b)


class _MLPField(NoiseField):
    """ΔW(x) = sqrt(dt) σ m^{-1/2} A φ(W x + b), evaluated blockwise to keep memory O(block · m).

    When the activation's derivative φ' is known, ``jacobian(x)`` also returns the ambient
    Jacobian ∂ΔW_a/∂x_b = sqrt(dt) σ m^{-1/2} Σ_h A_ah φ'(W x + b)_h W_hb (for ReLU the
    derivative almost everywhere: the field is piecewise linear).
    """

    def __init__(self, src: RandomFeatureNoise, t0, t1, A, W, b):
        self.src, self.t0, self.t1, self.A, self.W, self.b = src, t0, t1, A, W, b
        self._c = math.sqrt(max(t1 - t0, 0.0)) * src.source_kernel.scale / math.sqrt(src.width)
        if src.source_kernel.phi_prime is not None:
            self.jacobian = self._jacobian

    def scaled(self, sigma: float) -> "_MLPField":
        """σ ΔW as a field of the same kind (so its analytic Jacobian survives the noise strength)."""
        out = _MLPField(self.src, self.t0, self.t1, self.A, self.W, self.b)
        out._c = self._c * float(sigma)
        return out

    def _jacobian(self, x) -> tuple[np.ndarray, np.ndarray]:
        """ΔW(x) (N, d) and its ambient Jacobian (N, d, d) at points x (N, d)."""
        x = field_points(x, self.src.d)
        d, m = self.src.d, self.src.width
        out = np.empty_like(x)
        jac = np.empty((x.shape[0], d, d))
        k = self.src.source_kernel
        block = max(1, 2**21 // (m * d))
        for s in range(0, x.shape[0], block):
            z = x[s : s + block] @ self.W.T + self.b
            out[s : s + block] = self._c * (k.phi(z) @ self.A.T)
            g = np.asarray(k.phi_prime(z), dtype=np.float64)
            jac[s : s + block] = self._c * ((g[:, None, :] * self.A[None]) @ self.W)
        return out, jac

    def __call__(self, x) -> np.ndarray:
        x = field_points(x, self.src.d)
        out = np.empty_like(x)
        block = max(1, 2**22 // self.src.width)
        phi = self.src.source_kernel.phi
        for s in range(0, x.shape[0], block):
            h = phi(x[s : s + block] @ self.W.T + self.b)
            out[s : s + block] = self._c * (h @ self.A.T)
        return out
