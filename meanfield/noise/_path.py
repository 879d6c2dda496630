"""The refinable spectral Brownian field on S^1 and S^2: the limit object of the MLP noise."""

from __future__ import annotations

import numpy as np

from .._validate import as_int
from ..kernels import Kernel, SpectralKernel
from ..sphere import basis, supported_dimensions
from ._base import NoiseField, NoiseSource
from ._tree import BrownianTree

__all__ = ["NoisePath", "FieldIncrement"]

#: Below this many points the field is evaluated with the explicit basis matrix; above, by ducc0.
_DIRECT_MAX_POINTS = 2048


class FieldIncrement(NoiseField):
    """The increment ΔW = W(t1, ·) - W(t0, ·) of a spectral noise field, evaluable anywhere.

    Attributes
    ----------
    t0, t1 : float
    coeffs : ndarray, shape (d, n_coeffs)
        Real-basis coefficients sqrt(a_l) ΔB_{a,lm} of each ambient component a.
    """

    def __init__(self, path: "NoisePath", t0: float, t1: float, coeffs: np.ndarray):
        self.path, self.t0, self.t1, self.coeffs = path, t0, t1, coeffs
        self.lmax = path.lmax

    def __call__(self, x) -> np.ndarray:
        """ΔW(x) in R^d at points x of shape (N, d); returns (N, d) (ambient, not projected)."""
        return self.path.evaluate(x, self.coeffs)

    def alm(self) -> np.ndarray:
        """S^2 only: the coefficients as ducc0 complex alm, shape (3, (lmax+1)(lmax+2)/2)."""
        if self.path.d != 3:
            raise ValueError("alm() is defined on S^2 (d = 3) only")
        return self.path.basis.from_real(self.coeffs)


class NoisePath(NoiseSource):
    """The common Brownian field on S^1 (Fourier) or S^2 (real spherical harmonics), theory §3/§8.

    Parameters
    ----------
    kernel : ActivationKernel or SpectralKernel
        The covariance κ of the MLP field.
    d : {2, 3}
        Ambient dimension; tokens live on S^{d-1}.
    lmax : int, >= 0
        Truncation degree l_σ of the field.
    seed : int, SeedSequence or Generator
    t_max : float
        The path lives on [0, t_max].
    max_depth : int
        Depth of the Brownian tree (resolution t_max 2^-max_depth).

    Attributes
    ----------
    a : ndarray (lmax + 1,)
        Funk–Hecke coefficients of κ.
    kernel : SpectralKernel
        The truncated covariance κ_σ actually carried by the field.
    kappa1 : float
        κ_σ(1), the pointwise variance per unit time of each component.
    kept_fraction : float
        κ_σ(1) / κ(1).

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> noise = NoisePath(ActivationKernel("relu"), d=3, lmax=8, seed=0)
    >>> round(noise.kept_fraction, 4)
    0.9996
    >>> dW = noise.field(0.0, 0.01)
    >>> dW(np.array([[0.0, 0.0, 1.0]])).shape
    (1, 3)
    """

    refinable = True
    _describe_fields = ("lmax", "t_max")

    def __init__(self, kernel, d: int, lmax: int, seed=0, *, t_max: float = 1.0, max_depth: int = 40):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a meanfield.kernels.Kernel (e.g. ActivationKernel or SpectralKernel), "
                            f"got {type(kernel).__name__}")
        self.d = as_int(d, "d", min_value=2)
        if self.d not in supported_dimensions():
            dims = " or ".join(map(str, supported_dimensions()))
            raise ValueError(f"d must be {dims} for a NoisePath (the dimensions with a harmonic basis of S^(d-1)), "
                             f"got {d}; use RandomFeatureNoise for other d")
        if isinstance(kernel, SpectralKernel) and kernel.d != self.d:
            raise ValueError(f"kernel is a SpectralKernel on S^{kernel.d - 1}, but d = {self.d}")
        self.lmax = as_int(lmax, "lmax", min_value=0, max_value=4096)
        self.source_kernel = kernel
        if isinstance(kernel, SpectralKernel):
            a = np.zeros(self.lmax + 1)
            n = min(kernel.a.size, self.lmax + 1)
            a[:n] = kernel.a[:n]
            full = kernel.kappa1
        else:
            a = kernel.harmonic_coefficients(self.d, self.lmax).a
            full = kernel.kappa1
        self.a = a
        self.kernel = SpectralKernel(self.d, a)
        self.kappa1 = self.kernel.kappa1
        self.kept_fraction = self.kappa1 / full if full > 0 else 1.0
        self.basis = basis(self.d, self.lmax)
        self.n_coeffs = self.basis.n_real
        self.sqrt_a = np.sqrt(a)[self.basis.real_degrees()]
        self.seed = seed
        # basis-major layout (n_coeffs, d): paths with a smaller lmax are the truncation of this one
        self.tree = BrownianTree((self.n_coeffs, self.d), seed, t_max=t_max, max_depth=max_depth)
        self.t_max = self.tree.t_max

    def __repr__(self) -> str:
        return (f"NoisePath(d={self.d}, lmax={self.lmax}, kappa1={self.kappa1:.6g}, "
                f"kept_fraction={self.kept_fraction:.6f}, t_max={self.t_max})")

    def increment(self, t0: float, t1: float) -> np.ndarray:
        """Standard Brownian increments ΔB_{a,lm} over [t0, t1], shape (d, n_coeffs).

        Consistent under refinement: the increment over [t0, t1] equals the sum of the
        increments over any partition of it, exactly in float64.
        """
        return self.tree.increment(t0, t1).T.copy()

    def increments(self, times) -> np.ndarray:
        """Increments over consecutive intervals of ``times``, shape (len(times) - 1, d, n_coeffs)."""
        times = np.asarray(times, dtype=float)
        vals = np.stack([self.tree.value(t) for t in times])
        return np.transpose(np.diff(vals, axis=0), (0, 2, 1))

    def field(self, t0: float, t1: float) -> FieldIncrement:
        """The field increment ΔW over [t0, t1] as an object evaluable at any points."""
        return FieldIncrement(self, t0, t1, self.sqrt_a * self.increment(t0, t1))

    def evaluate(self, x, coeffs: np.ndarray) -> np.ndarray:
        """Σ_lm c_{a,lm} Y_lm(x) for each component a: points (N, d) -> values (N, d)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        n = x.shape[0]
        b = self.basis
        out = np.empty((n, self.d))
        if not b.fast_transforms or n <= _DIRECT_MAX_POINTS:
            block = max(1, 2**22 // self.n_coeffs)
            for s in range(0, n, block):
                out[s : s + block] = b.real_basis(x[s : s + block]) @ coeffs.T
            return out
        state = b.from_real(coeffs)
        for a in range(self.d):
            out[:, a] = b.evaluate(state[a], x)
        return out
