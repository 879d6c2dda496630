"""The common noise: one refinable Brownian path shared by every solver (SPEC §3, §8).

The MLP layers sum, over depth, to an R^d-valued Brownian field W(t, x) on the sphere
with E[W_a(t,x) W_b(s,y)] = (t ∧ s) δ_ab κ(<x, y>). Truncated at degree l_σ,

    W(t, x) = Σ_{a=1..d} Σ_{l<=l_σ, m} sqrt(a_l) Y_lm(x) B_{a,lm}(t) e_a,

with independent standard Brownian motions B (SPEC §3). :class:`NoisePath` generates
the B's with a Brownian tree (Lévy's midpoint construction, as diffrax's
``VirtualBrownianTree``): the value at any time is a deterministic function of the
seed, so a discrete transformer with L layers, an SDE solver on a finer grid and the
SPDE solver all see the same path, and a coarse increment is the sum of the fine
increments inside it. Path values are stored on the lattice 2^-40 Z, on which sums and
differences are exact in float64, so that identity holds *exactly*, not to round-off
(the rounding moves the path by at most 5e-13).

:class:`RandomFeatureNoise` is a separate noise source with the same κ: a fresh
finite-width MLP per step (any d, not refinable). :class:`RotationNoise` is the field
W(t, x) = Ω(t) x with Ω a skew-symmetric Brownian matrix (SPEC §5.5).
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict

import numpy as np

from ._validate import as_float, as_int, as_points
from .harmonics import cart_to_angles, degrees, n_coeffs, real_basis, real_to_alm
from .kernels import ActivationKernel, SpectralKernel

__all__ = ["BrownianTree", "NoisePath", "FieldIncrement", "RandomFeatureNoise", "RotationNoise"]

_LATTICE = 2.0**40
#: Below this many points the field is evaluated with the explicit basis matrix; above, by ducc0.
_DIRECT_MAX_POINTS = 2048


def _key_from_seed(seed) -> np.ndarray:
    """Two uint64 words of Philox key from an int, a SeedSequence or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed.integers(0, 2**63, size=2, dtype=np.uint64)
    if isinstance(seed, np.random.SeedSequence):
        return seed.generate_state(2, np.uint64)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"seed must be a non-negative int, a SeedSequence or a Generator, got {seed!r}")
    return np.random.SeedSequence(int(seed)).generate_state(2, np.uint64)


def _quantise(v: np.ndarray) -> np.ndarray:
    return np.rint(v * _LATTICE) / _LATTICE


class BrownianTree:
    """Standard Brownian motion of any shape on [0, t_max], evaluable at any time.

    B(0) = 0, B(t_max) = sqrt(t_max) Z_root, and the value at the midpoint of a dyadic
    interval [u, v] is (B(u) + B(v))/2 + sqrt((v - u)/4) Z_node, where Z_node is drawn
    from a Philox stream keyed by the seed with the node's (level, index) as counter —
    so each node is random-access and independent of the query order. Below depth
    ``max_depth`` (interval t_max 2^-max_depth) the path is linearly interpolated.

    Parameters
    ----------
    shape : tuple of int
        Shape of B(t).
    seed : int, SeedSequence or Generator
    t_max : float, > 0
    max_depth : int, 1..52
    cache_bytes : int
        Memory budget for cached node values (LRU).

    Examples
    --------
    >>> tree = BrownianTree((3,), seed=1, t_max=1.0)
    >>> a, b = tree.increment(0.0, 0.5), tree.increment(0.5, 1.0)
    >>> bool(np.all(a + b == tree.increment(0.0, 1.0)))
    True
    """

    def __init__(self, shape, seed=0, *, t_max: float = 1.0, max_depth: int = 40, cache_bytes: int = 256 * 2**20):
        self.shape = tuple(int(s) for s in np.atleast_1d(shape))
        self.size = int(np.prod(self.shape))
        self.t_max = as_float(t_max, "t_max", min_value=0.0, strict_min=True)
        self.max_depth = as_int(max_depth, "max_depth", min_value=1, max_value=52)
        self._key = _key_from_seed(seed)
        self._cache: OrderedDict = OrderedDict()
        self._cache_max = max(16, int(cache_bytes) // (8 * self.size))
        # recent query times: a stepper asks for t_n twice (end of one step, start of the next)
        self._recent: OrderedDict = OrderedDict()
        self._end = _quantise(math.sqrt(self.t_max) * self._normal(0, 0))

    def _normal(self, level: int, index: int) -> np.ndarray:
        # Resetting one Philox's counter is 3x cheaper than building a generator per node
        # and gives the same stream as Philox(key, counter=[0, 0, level, index]).
        if not hasattr(self, "_bitgen"):
            self._bitgen = np.random.Philox(key=self._key)
            self._gen = np.random.Generator(self._bitgen)
            self._state = self._bitgen.state
        st = self._state
        st["state"]["counter"][:] = (0, 0, level, index)
        st["buffer_pos"], st["has_uint32"], st["uinteger"] = 4, 0, 0
        self._bitgen.state = st
        return self._gen.standard_normal(self.size)

    def _node(self, level: int, index: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        key = (level, index)
        val = self._cache.get(key)
        if val is not None:
            self._cache.move_to_end(key)
            return val
        half_width = self.t_max * 2.0 ** (-level)  # width of the child intervals
        val = _quantise(0.5 * (left + right) + math.sqrt(half_width / 2.0) * self._normal(level, index))
        self._cache[key] = val
        if len(self._cache) > self._cache_max:
            self._cache.popitem(last=False)
        return val

    def _value_flat(self, t: float) -> np.ndarray:
        val = self._recent.get(t)
        if val is None:
            val = self._descend(t)
            self._recent[t] = val
            if len(self._recent) > 8:
                self._recent.popitem(last=False)
        return val

    def _descend(self, t: float) -> np.ndarray:
        if t <= 0.0:
            return np.zeros(self.size)
        if t >= self.t_max:
            return self._end
        # interval [k 2^-j, (k+1) 2^-j] in units of t_max, with its end values
        s = t / self.t_max
        k, j = 0, 0
        left, right = np.zeros(self.size), self._end
        while j < self.max_depth:
            j += 1
            mid_index = 2 * k + 1  # the midpoint is node index k at level j, position (2k+1) 2^-j
            mid_pos = mid_index * 2.0 ** (-j)
            mid = self._node(j, k, left, right)
            if s == mid_pos:
                return mid
            if s < mid_pos:
                right, k = mid, 2 * k
            else:
                left, k = mid, 2 * k + 1
        # below the finest level: linear interpolation (a Wong–Zakai error of order t_max 2^-max_depth)
        frac = s * 2.0**j - k
        return _quantise(left + frac * (right - left))

    def _snap(self, t: float) -> float:
        # times within 1e-13 t_max of a dyadic point at the finest level are that point, so
        # that T*l/L computed in floating point lands on the same node as T*(2l)/(2L)
        grid = 2.0**self.max_depth
        scaled = t / self.t_max * grid
        r = round(scaled)
        return r / grid * self.t_max if abs(scaled - r) <= 1e-13 * grid else t

    def check_time(self, t, name: str = "t") -> float:
        t = as_float(t, name)
        tol = 1e-12 * self.t_max
        if t < -tol or t > self.t_max + tol:
            raise ValueError(f"{name} = {t} is outside the noise path's time window [0, {self.t_max}]; "
                             "build the noise with a larger t_max")
        return min(max(t, 0.0), self.t_max)

    def value(self, t: float) -> np.ndarray:
        """B(t), shape ``self.shape``."""
        t = self._snap(self.check_time(t))
        return self._value_flat(t).reshape(self.shape)

    def increment(self, t0: float, t1: float) -> np.ndarray:
        """B(t1) - B(t0), shape ``self.shape`` (t0 <= t1)."""
        t0, t1 = self.check_time(t0, "t0"), self.check_time(t1, "t1")
        if t1 < t0:
            raise ValueError(f"t1 must be >= t0, got t0 = {t0}, t1 = {t1}")
        return (self._value_flat(self._snap(t1)) - self._value_flat(self._snap(t0))).reshape(self.shape)


class FieldIncrement:
    """The increment ΔW = W(t1, ·) - W(t0, ·) of a spectral noise field, evaluable anywhere.

    Attributes
    ----------
    t0, t1 : float
    coeffs : ndarray, shape (d, n_coeffs)
        Real-basis coefficients sqrt(a_l) ΔB_{a,lm} of each ambient component a.
    """

    def __init__(self, path: "NoisePath", t0: float, t1: float, coeffs: np.ndarray):
        self.path, self.t0, self.t1, self.coeffs = path, t0, t1, coeffs

    @property
    def dt(self) -> float:
        return self.t1 - self.t0

    def __call__(self, x) -> np.ndarray:
        """ΔW(x) in R^d at points x of shape (N, d); returns (N, d) (ambient, not projected)."""
        return self.path.evaluate(x, self.coeffs)

    def alm(self) -> np.ndarray:
        """S^2 only: the coefficients as ducc0 complex alm, shape (3, (lmax+1)(lmax+2)/2)."""
        if self.path.d != 3:
            raise ValueError("alm() is defined on S^2 (d = 3) only")
        return real_to_alm(self.coeffs, self.path.lmax)


class NoisePath:
    """The common Brownian field on S^1 (Fourier) or S^2 (real spherical harmonics), SPEC §3/§8.

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

    def __init__(self, kernel, d: int, lmax: int, seed=0, *, t_max: float = 1.0, max_depth: int = 40):
        if not isinstance(kernel, (ActivationKernel, SpectralKernel)):
            raise TypeError(f"kernel must be an ActivationKernel or SpectralKernel, got {type(kernel).__name__}")
        self.d = as_int(d, "d", min_value=2)
        if self.d not in (2, 3):
            raise ValueError(f"d must be 2 (Fourier on S^1) or 3 (spherical harmonics on S^2) for a NoisePath, got {d}; "
                             "use RandomFeatureNoise for d >= 4")
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
        self.n_coeffs = n_coeffs(self.d, self.lmax)
        self.sqrt_a = np.sqrt(a)[degrees(self.d, self.lmax)]
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
        if self.d == 2 or n <= _DIRECT_MAX_POINTS:
            out = np.empty((n, self.d))
            block = max(1, 2**22 // self.n_coeffs)
            for s in range(0, n, block):
                out[s : s + block] = real_basis(self.d, self.lmax, x[s : s + block]) @ coeffs.T
            return out
        import ducc0

        loc = cart_to_angles(x)
        alm = real_to_alm(coeffs, self.lmax)
        out = np.empty((n, self.d))
        for a in range(self.d):
            out[:, a] = ducc0.sht.synthesis_general(
                alm=alm[a : a + 1], spin=0, lmax=self.lmax, loc=loc, epsilon=1e-12, nthreads=_threads()
            )[0]
        return out


def _threads() -> int:
    import os

    return max(1, min(os.cpu_count() or 1, 8))


class RandomFeatureNoise:
    """Noise from a fresh finite-width random MLP per step, with covariance κ in any d.

    Over [t0, t1] the field is ΔW(x) = sqrt(t1 - t0) σ m^{-1/2} A φ(W x + b) with
    A ~ N(0,1)^{d×m}, W ~ N(0, σ_w²)^{m×d}, b ~ N(0, σ_b²)^m drawn afresh, so that
    E[ΔW_a(x) ΔW_b(y)] = (t1 - t0) δ_ab κ(<x, y>) exactly for every width m (SPEC §2).
    For finite m the field is not Gaussian, and it is not refinable: a coarse step is
    *not* the sum of fine steps. The weights of a step are keyed by the seed and the
    two times, so the same step always gets the same weights.

    Parameters
    ----------
    kernel : ActivationKernel
    d : int, >= 2
    width : int, >= 1
    seed : int, SeedSequence or Generator
    t_max : float

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> noise = RandomFeatureNoise(ActivationKernel("relu"), d=5, width=256, seed=0)
    >>> noise.field(0.0, 0.1)(np.eye(5)).shape
    (5, 5)
    """

    refinable = False

    def __init__(self, kernel: ActivationKernel, d: int, width: int, seed=0, *, t_max: float = math.inf):
        if not isinstance(kernel, ActivationKernel):
            raise TypeError(f"kernel must be an ActivationKernel, got {type(kernel).__name__}")
        self.d = as_int(d, "d", min_value=2)
        self.width = as_int(width, "width", min_value=1)
        self.kernel = self.source_kernel = kernel
        self.kappa1 = kernel.kappa1
        self.kept_fraction = 1.0
        self.t_max = float(t_max)
        self._key = _key_from_seed(seed)

    def __repr__(self) -> str:
        return f"RandomFeatureNoise(d={self.d}, width={self.width}, kernel={self.kernel!r})"

    def weights(self, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A, W, b) of the MLP used over [t0, t1]."""
        words = struct.unpack("<4I", struct.pack("<2d", float(t0), float(t1)))
        ss = np.random.SeedSequence([int(w) for w in self._key], spawn_key=words)
        rng = np.random.default_rng(ss)
        k = self.kernel
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


class _MLPField:
    """ΔW(x) = sqrt(dt) σ m^{-1/2} A φ(W x + b), evaluated blockwise to keep memory O(block · m)."""

    def __init__(self, src: RandomFeatureNoise, t0, t1, A, W, b):
        self.src, self.t0, self.t1, self.A, self.W, self.b = src, t0, t1, A, W, b
        self._c = math.sqrt(max(t1 - t0, 0.0)) * src.kernel.scale / math.sqrt(src.width)

    @property
    def dt(self) -> float:
        return self.t1 - self.t0

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.src.d:
            raise ValueError(f"x must have shape (N, {self.src.d}), got {x.shape}")
        out = np.empty_like(x)
        block = max(1, 2**22 // self.src.width)
        phi = self.src.kernel.phi
        for s in range(0, x.shape[0], block):
            h = phi(x[s : s + block] @ self.W.T + self.b)
            out[s : s + block] = self._c * (h @ self.A.T)
        return out


class RotationNoise:
    """Rigid rotation noise W(t, x) = Ω(t) x, Ω a skew-symmetric Brownian matrix (SPEC §5.5).

    Ω(t) = scale · Σ_{i<j} B_ij(t) (e_i e_j^T - e_j e_i^T) with independent standard
    Brownian motions B_ij from a :class:`BrownianTree` (so it is refinable). The
    Stratonovich flow dR = ∘dΩ R is a random rotation R_t, so a density is transported by
    rotation; this noise is used to test the SPDE solver against the exactly rotated density.
    For d = 2 the increments commute and R_t = exp(Ω(t)) (:meth:`rotation`); for d >= 3
    they do not, and R_t is the product integral lim exp(ΔΩ_{n-1}) ··· exp(ΔΩ_0), which
    differs from exp(Ω(t)) by the Lévy-area terms of the Magnus expansion (an O(t) effect,
    not a small one): use :meth:`flow`.

    Attributes
    ----------
    kappa1 : float
        E|P_x ΔW|²/((d-1) dt) = scale² (the Itô correction coefficient in the Π-step).
    """

    refinable = True

    def __init__(self, d: int, scale: float = 1.0, seed=0, *, t_max: float = 1.0, max_depth: int = 40):
        self.d = as_int(d, "d", min_value=2)
        self.scale = as_float(scale, "scale", min_value=0.0)
        self.kappa1 = self.scale**2
        self.kept_fraction = 1.0
        self.iu = np.triu_indices(self.d, 1)
        self.tree = BrownianTree((len(self.iu[0]),), seed, t_max=t_max, max_depth=max_depth)
        self.t_max = self.tree.t_max

    def omega(self, t0: float, t1: float) -> np.ndarray:
        """Ω(t1) - Ω(t0), a skew-symmetric (d, d) matrix."""
        inc = self.scale * self.tree.increment(t0, t1)
        om = np.zeros((self.d, self.d))
        om[self.iu] = inc
        return om - om.T

    def rotation(self, t: float) -> np.ndarray:
        """exp(Ω(t)), an orthogonal matrix: the Stratonovich flow map at time t for d = 2 only.

        For d >= 3 the flow is :meth:`flow` (the increments of Ω do not commute).
        """
        from scipy.linalg import expm

        return expm(self.omega(0.0, t))

    def flow(self, t: float, n_steps: int) -> np.ndarray:
        """Geometric-Euler flow exp(ΔΩ_{n-1}) ··· exp(ΔΩ_0) over n_steps equal steps of [0, t].

        ΔΩ_k = Ω((k+1) t/n) - Ω(k t/n). It is the exact flow map of the push-forward scheme
        with rotation steps and converges to the Stratonovich flow R_t as n -> ∞ (strong
        order 1/2 for d >= 3, exact for every n when d = 2).
        """
        from scipy.linalg import expm

        n_steps = as_int(n_steps, "n_steps", min_value=1)
        R = np.eye(self.d)
        for k in range(n_steps):
            R = expm(self.omega(k * t / n_steps, (k + 1) * t / n_steps)) @ R
        return R

    def field(self, t0: float, t1: float) -> "_LinearField":
        return _LinearField(self.omega(t0, t1), t0, t1)


class _LinearField:
    def __init__(self, om: np.ndarray, t0: float, t1: float):
        self.omega, self.t0, self.t1 = om, t0, t1

    @property
    def dt(self) -> float:
        return self.t1 - self.t0

    def __call__(self, x) -> np.ndarray:
        return np.asarray(x, dtype=np.float64) @ self.omega.T
