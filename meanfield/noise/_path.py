"""The refinable spectral Brownian field on S^{d-1}, every d >= 2: the limit object of the MLP noise."""

from __future__ import annotations

import math

import numpy as np

from .. import _validate
from .._validate import as_int, check_cost
from ..kernels import Kernel, SpectralKernel, funk_hecke_cost
from ..sphere import basis, harmonic_dimension, has_basis, sphere_area
from ._base import NoiseField, NoiseSource, field_points
from ._tree import BrownianTree, tree_cost

__all__ = ["NoisePath", "FieldIncrement", "noise_path_cost", "noise_path_sizes"]

#: Seconds per coefficient and component of one evaluation of the field at about 1000 points on
#: S^2 (ducc0); every basis states its own (:attr:`meanfield.sphere.Basis.eval_seconds_per_coeff`).
EVAL_SECONDS_PER_COEFF = 3e-7


def noise_path_cost(d: int, lmax: int, *, spectral: bool = False, max_depth: int = 40) -> tuple[float, float]:
    """Estimated (seconds, bytes) of building a :class:`NoisePath` and using its first increment.

    The sum of the Funk–Hecke quadrature (skipped for a ``SpectralKernel``,
    :func:`meanfield.kernels.funk_hecke_cost`), the first query of the Brownian tree of
    d · n_coeffs numbers (:func:`meanfield.noise.tree_cost`), n_coeffs = Σ_{l<=lmax} N(d, l),
    and one evaluation of the field at about a thousand points (the basis' own
    ``eval_seconds_per_coeff``: ducc0 on S^2, direct Gegenbauer products for d >= 4). The
    constants were measured on a loaded 2-core machine and rounded up; on S^2 the estimate
    is 1.5–3 times the measured time. They bound the transforms of high degrees; the
    low degrees evaluated as homogeneous polynomials (:attr:`meanfield.sphere.Basis.polynomial`)
    cost less than the estimate.

    Examples
    --------
    >>> secs, mem = noise_path_cost(3, 16)
    >>> secs < 1 and mem < 2**30
    True
    >>> secs, mem = noise_path_cost(6, 6)       # 1715 coefficients per component on S^5
    >>> secs < 1 and mem < 2**30
    True
    """
    n_coeffs = float(harmonic_dimension(d, lmax).sum())
    secs, mem = tree_cost(int(d * n_coeffs), max_depth)
    if not spectral:
        secs += funk_hecke_cost(lmax)
    secs += type(basis(d, 0)).eval_seconds_per_coeff * d * n_coeffs
    # basis layout arrays and a few copies of the coefficients
    mem += 8.0 * (6 + 4 * d) * n_coeffs
    return secs, mem


def _largest_lmax(d: int, spectral: bool, max_depth: int, upper: int) -> int:
    def ok(L):
        secs, mem = noise_path_cost(d, L, spectral=spectral, max_depth=max_depth)
        return secs <= _validate.COST_LIMIT_SECONDS and mem <= _validate.COST_LIMIT_BYTES

    lo, hi = 0, upper + 1
    if ok(upper):
        return upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


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

    def __call__(self, x, *, epsilon: float | None = None) -> np.ndarray:
        """ΔW(x) in R^d at points x of shape (N, d); returns (N, d) (ambient, not projected).

        ``epsilon``: accuracy of the fast transform where one is used (default ``NUFFT_EPS``).
        """
        return self.path.evaluate(x, self.coeffs, epsilon=epsilon)

    def scaled(self, sigma: float) -> "FieldIncrement":
        """σ ΔW as a FieldIncrement (coefficients times σ), so solvers keep the spectral fast path."""
        return FieldIncrement(self.path, self.t0, self.t1, sigma * self.coeffs)

    def gradient(self, x, *, epsilon: float | None = None) -> np.ndarray:
        """Tangential derivatives of ΔW at points x (N, d): shape (N, d, d), row a = ∇_S ΔW_a(x).

        Exact through the harmonic expansion (every basis provides the surface gradient), so
        for a tangent vector ξ at x the derivative of the field along ξ is ``J @ ξ``.
        """
        x = field_points(x, self.path.d)
        state = self.path.basis.from_real(self.coeffs)
        grads = self.path.basis.synth_rows(state, x, grad=True, epsilon=epsilon)[1]  # (d, N, d)
        return np.transpose(grads, (1, 0, 2))

    def alm(self) -> np.ndarray:
        """S^2 only: the coefficients as ducc0 complex alm, shape (3, (lmax+1)(lmax+2)/2)."""
        if self.path.d != 3:
            raise ValueError("alm() is defined on S^2 (d = 3) only")
        return self.path.basis.from_real(self.coeffs)


class NoisePath(NoiseSource):
    """The common Brownian field on S^{d-1}, every d >= 2, theory §3/§8.

    W(t, x) = Σ_a Σ_{l <= l_σ, m} sqrt(a_l) Y_lm(x) B_{a,lm}(t) e_a with the real orthonormal
    harmonics of :func:`meanfield.sphere.basis` (Fourier on S^1, spherical harmonics on S^2,
    Gegenbauer-product hyperspherical harmonics for d >= 4) and a_l the Funk–Hecke
    coefficients of κ on S^{d-1}, so its covariance is exactly the truncated kernel
    E[W_a(t,x) W_b(s,y)] = (t ∧ s) δ_ab Σ_{l<=l_σ} a_l Z_l(<x, y>) in every d.

    Parameters
    ----------
    kernel : ActivationKernel or SpectralKernel
        The covariance κ of the MLP field.
    d : int, >= 2
        Ambient dimension; tokens live on S^{d-1}.
    lmax : int, >= 0
        Truncation degree l_σ of the field; the basis has Σ_{l<=l_σ} N(d, l) functions per
        component, about l_σ^{d-1}/(d-1)! · 2 (:func:`noise_path_sizes` tabulates sizes,
        costs and kept fractions). Degrees whose estimated cost (:func:`noise_path_cost`)
        exceeds about a minute or 4 GiB are refused, with the estimate and the largest
        accepted lmax (2622 on S^2, where the time of a first deep query and the memory of
        the Brownian tree bind; 14389 on S^1, where the Funk–Hecke quadrature binds; for
        d >= 4 the direct evaluation binds: 124 on S^3, 48 on S^4, 15 on S^7, 4 on S^31).
    seed : int, SeedSequence or Generator
    t_max : float, > 0
        The path lives on [0, t_max].
    max_depth : int, 1..52
        Depth of the Brownian tree (resolution t_max 2^-max_depth).
    sigma : float, >= 0
        Noise strength (keyword only, default 1): the field is σ times the one above
        (:class:`~meanfield.noise.NoiseSource`).

    Attributes
    ----------
    a : ndarray (lmax + 1,)
        Funk–Hecke coefficients of κ (unit strength).
    kernel : SpectralKernel
        The truncated covariance σ² κ_σ actually carried by the field.
    kappa1 : float
        σ² κ_σ(1), the pointwise variance per unit time of each component.
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
        if not has_basis(self.d):
            raise ValueError(f"d = {d} has no harmonic basis of S^{{d-1}} for a NoisePath; use RandomFeatureNoise")
        if isinstance(kernel, SpectralKernel) and kernel.d != self.d:
            raise ValueError(f"kernel is a SpectralKernel on S^{kernel.d - 1}, but d = {self.d}")
        self.lmax = as_int(lmax, "NoisePath lmax", min_value=0)
        max_depth = as_int(max_depth, "NoisePath max_depth", min_value=1, max_value=52)
        spectral = isinstance(kernel, SpectralKernel)
        cls = type(basis(self.d, 0))
        largest = _largest_lmax(self.d, spectral, max_depth, cls.max_lmax)
        if self.lmax > largest:
            secs, mem = noise_path_cost(self.d, self.lmax, spectral=spectral, max_depth=max_depth)
            check_cost("NoisePath", seconds=secs, memory=mem, parameter="lmax", value=self.lmax, largest=largest)
            raise ValueError(f"NoisePath: lmax = {self.lmax} is above the largest degree of the harmonic basis of "
                             f"S^{self.d - 1} ({cls.max_lmax}); the largest accepted lmax here is {largest}")
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

    def evaluate(self, x, coeffs: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        """Σ_lm c_{a,lm} Y_lm(x) for each component a: points (N, d) -> values (N, d).

        ``epsilon``: accuracy of the fast transforms (relative to the coefficients' norm; default
        ``NUFFT_EPS``). Low degrees are evaluated exactly as homogeneous polynomials
        (:attr:`meanfield.sphere.Basis.polynomial`); otherwise point sets small enough that the
        basis matrix is faster (:meth:`meanfield.sphere.Basis.prefers_direct`) exactly with it.
        """
        x = field_points(x, self.d)
        n = x.shape[0]
        b = self.basis
        out = np.empty((n, self.d))
        if b.uses_polynomial(n, False, epsilon):  # real coefficients as they are: no layout round trip
            out[:] = b.polynomial.synth_rows(coeffs, x, grad=False)[0].T
            return out
        if b.prefers_direct(n):
            block = max(1, 2**22 // self.n_coeffs)
            for s in range(0, n, block):
                out[s : s + block] = b.real_basis(x[s : s + block]) @ coeffs.T
            return out
        out[:] = b.synth_rows(b.from_real(coeffs), x, grad=False, epsilon=epsilon)[0].T
        return out


def noise_path_sizes(kernel, dims=(4, 5, 6, 8), lmaxes=(2, 4, 6, 8), *, measure: bool = False,
                     n_points: int = 1000, seed=0):
    """Basis size, cost and kept fraction of a :class:`NoisePath` per (d, l_σ): a table.

    For each dimension d and degree l_σ: the number of coefficients per ambient component
    n = Σ_{l <= l_σ} N(d, l), N(d, l) = (2l + d - 2)(l + d - 3)! / (l! (d - 2)!), the total
    d · n of Brownian motions in the tree, the kept variance κ_σ(1) and the kept fraction
    κ_σ(1) / κ(1) = Σ_{l<=l_σ} a_l Z_l(1) / κ(1) (Funk–Hecke coefficients of ``kernel`` on
    S^{d-1}), the estimated cost of :func:`noise_path_cost` and whether :class:`NoisePath`
    accepts it. With ``measure``, each accepted cell is also built and timed: the
    construction (Funk–Hecke included), the first increment over a non-dyadic interval
    (a full-depth tree query), one evaluation of the field at ``n_points`` points and one
    evaluation of its tangential Jacobian (:meth:`FieldIncrement.gradient`).

    Parameters
    ----------
    kernel : ActivationKernel
        Or any :class:`~meanfield.kernels.Kernel` valid on every S^{d-1} of ``dims``.
    dims : sequence of int, each >= 2
    lmaxes : sequence of int, each >= 0
    measure : bool
    n_points : int, >= 1
    seed : int
        Seed of the measured paths and points.

    Returns
    -------
    pandas.DataFrame
        Columns ``d, lmax, n_coeffs, n_total, kappa_sigma1, kept_fraction, est_seconds,
        est_bytes, accepted`` and, with ``measure``, ``build_seconds, increment_seconds,
        eval_seconds, jacobian_seconds`` (NaN where not accepted). ``attrs["largest_lmax"]``:
        the largest accepted l_σ per d.

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> t = noise_path_sizes(ActivationKernel("relu"), dims=[4, 8], lmaxes=[2, 4])
    >>> t[["d", "lmax", "n_coeffs", "n_total"]].values.tolist()
    [[4, 2, 14, 56], [4, 4, 55, 220], [8, 2, 44, 352], [8, 4, 450, 3600]]
    >>> bool((t["kept_fraction"] < 1).all()), t.attrs["largest_lmax"][8]
    (True, 15)
    """
    import time

    import pandas as pd

    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a meanfield.kernels.Kernel, got {type(kernel).__name__}")
    dims = [as_int(d, "dims[]", min_value=2) for d in dims]
    lmaxes = sorted(as_int(l, "lmaxes[]", min_value=0) for l in lmaxes)
    if not dims or not lmaxes:
        raise ValueError("dims and lmaxes must be non-empty")
    n_points = as_int(n_points, "n_points", min_value=1)
    spectral = isinstance(kernel, SpectralKernel)
    if spectral and any(d != kernel.d for d in dims):
        raise ValueError(f"a SpectralKernel lives on S^{kernel.d - 1}: dims must all be {kernel.d}")
    rows, largest = [], {}
    rng = np.random.default_rng(seed)
    for d in dims:
        top = type(basis(d, 0)).max_lmax
        largest[d] = _largest_lmax(d, spectral, 40, top)
        ok_l = [l for l in lmaxes if l <= largest[d]]
        a = kernel.harmonic_coefficients(d, max(ok_l)).a if ok_l else np.zeros(1)
        z1 = harmonic_dimension(d, a.size - 1) / sphere_area(d)
        kept = np.cumsum(a * z1)
        for L in lmaxes:
            n = int(harmonic_dimension(d, L).sum())
            secs, mem = noise_path_cost(d, L, spectral=spectral)
            accepted = L <= largest[d]
            k1 = float(kept[L]) if accepted else math.nan
            row = {"d": d, "lmax": L, "n_coeffs": n, "n_total": d * n, "kappa_sigma1": k1,
                   "kept_fraction": k1 / kernel.kappa1 if accepted else math.nan, "est_seconds": secs,
                   "est_bytes": mem, "accepted": accepted}
            if measure:
                row.update(build_seconds=math.nan, increment_seconds=math.nan, eval_seconds=math.nan,
                           jacobian_seconds=math.nan)
                if accepted:
                    t0 = time.perf_counter()
                    path = NoisePath(kernel, d, L, seed=int(rng.integers(2**31)))
                    t1 = time.perf_counter()
                    dw = path.field(1.0 / 3.0, 0.5)
                    t2 = time.perf_counter()
                    x = rng.standard_normal((n_points, d))
                    x /= np.linalg.norm(x, axis=1, keepdims=True)
                    dw(x)
                    t3 = time.perf_counter()
                    dw.gradient(x)
                    t4 = time.perf_counter()
                    row.update(build_seconds=t1 - t0, increment_seconds=t2 - t1, eval_seconds=t3 - t2,
                               jacobian_seconds=t4 - t3)
            rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["largest_lmax"] = largest
    return table
