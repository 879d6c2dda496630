"""Covariance kernels of the MLP noise field (theory §2) and their spectra.

For one layer ``MLP(x) = m^{-1/2} A φ(W x + b)`` with Gaussian weights the field has
mean 0 and covariance ``E[MLP(x)_a MLP(y)_b] = δ_ab κ(<x, y>)`` with

    κ(t) = σ² E[φ(U) φ(V)],   Var U = Var V = s² = σ_w² + σ_b²,
                              Corr(U, V) = r(t) = (σ_w² t + σ_b²) / s².

Every activation is handled by the Hermite (Mehler) expansion
κ(t) = σ² Σ_n q_n r(t)^n, q_n = c_n² / n!, c_n = E[φ(sZ) He_n(Z)]; relu, erf and
linear also have closed forms. ``κ(1) = σ² E[φ(sZ)²]`` and
``κ'(1) = σ² σ_w² E[φ'(sZ)²]`` are computed by adaptive quadrature of one
Gaussian integral each, so the Lyapunov exponent (theory §5.4) does not depend on the
truncation of the Hermite series.
"""

from __future__ import annotations

import abc
import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import integrate, special

from . import _validate
from ._validate import as_float, as_int, as_real_array, check_cost
from .harmonics import harmonic_dimension, sphere_area, zonal, zonal_derivative
from .sphere._zonal import legendre_recurrence

__all__ = [
    "Kernel",
    "ActivationKernel",
    "SpectralKernel",
    "ScaledKernel",
    "HarmonicCoefficients",
    "lyapunov_exponent",
    "synchronises",
    "critical_dimension",
    "funk_hecke_cost",
    "HARMONIC_SECONDS_PER_ENTRY",
]

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(u):
    return 0.5 * u * (1.0 + special.erf(u / _SQRT2))


def _gelu_prime(u):
    return 0.5 * (1.0 + special.erf(u / _SQRT2)) + u * _INV_SQRT_2PI * np.exp(-0.5 * u * u)


_ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "relu": (lambda u: np.maximum(u, 0.0), lambda u: (np.asarray(u) > 0).astype(float)),
    "tanh": (np.tanh, lambda u: 1.0 / np.cosh(u) ** 2),
    "gelu": (_gelu, _gelu_prime),
    "erf": (special.erf, lambda u: 2.0 / math.sqrt(math.pi) * np.exp(-np.asarray(u) ** 2)),
    "linear": (lambda u: np.asarray(u, dtype=float), lambda u: np.ones_like(np.asarray(u, dtype=float))),
}
_CLOSED_FORM = ("relu", "erf", "linear")


def _gauss_expect(fun: Callable, epsabs: float = 1e-14) -> np.ndarray:
    """E[fun(Z)] for Z ~ N(0, 1), vector-valued fun, adaptive quadrature split at 0.

    The split at 0 resolves the kink of relu-like activations; the range |z| <= 40 loses
    a Gaussian mass below 1e-300.
    """
    g = lambda z: np.atleast_1d(fun(z)) * (_INV_SQRT_2PI * math.exp(-0.5 * z * z))
    lo, _ = integrate.quad_vec(g, -40.0, 0.0, epsabs=epsabs, epsrel=1e-13, limit=4000)
    hi, _ = integrate.quad_vec(g, 0.0, 40.0, epsabs=epsabs, epsrel=1e-13, limit=4000)
    return lo + hi


#: Largest ``|t|`` accepted by ``kappa`` / ``dkappa`` (round-off of a unit-vector inner product).
T_TOL = 1e-12

#: Measured cost of the Funk–Hecke quadrature per (degree, node) pair, in seconds: 2–3e-9 on
#: a loaded 2-core machine (lmax = 512–2048), rounded up; see :func:`funk_hecke_cost`.
HARMONIC_SECONDS_PER_ENTRY = 6e-9
#: Cost of one evaluation of κ per quadrature node (the Mehler series of a non-closed-form activation).
KAPPA_SECONDS_PER_NODE = 3e-7


def _check_t(t) -> np.ndarray:
    """``t`` as a float array in [-1, 1]: values within ``T_TOL`` of the interval are clipped, others raise."""
    try:
        arr = np.asarray(t)
    except Exception as exc:  # noqa: BLE001 - ragged lists and the like
        raise TypeError(f"t must be a real number or an array of real numbers, got {type(t).__name__}") from exc
    if np.iscomplexobj(arr):
        raise TypeError("t must be real, got a complex value")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"t must be a real number or an array of real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("t contains NaN or infinite values")
    if np.any(np.abs(arr) > 1.0 + T_TOL):
        raise ValueError(f"t must lie in [-1, 1] (t = <x, y> for unit vectors), got values up to "
                         f"{np.max(np.abs(arr)):.6g} in absolute value")
    return np.clip(arr, -1.0, 1.0)


def _default_panels(lmax: int) -> int:
    return max(64, lmax)


def funk_hecke_cost(lmax: int, n_panels: int | None = None) -> float:
    """Estimated seconds of :meth:`Kernel.harmonic_coefficients` (two quadratures of 32 nodes per panel).

    The recurrence costs one pass over the nodes per degree, so the time is
    ``HARMONIC_SECONDS_PER_ENTRY · (lmax + 1) · nodes + KAPPA_SECONDS_PER_NODE · nodes`` with
    ``nodes = 32 · 1.5 n_panels``; memory is O(nodes).

    Examples
    --------
    >>> funk_hecke_cost(16) < 1.0
    True
    """
    lmax = _validate.as_int(lmax, "lmax", min_value=0)
    p = _default_panels(lmax) if n_panels is None else _validate.as_int(n_panels, "n_panels", min_value=1)
    nodes = 32 * (p + p // 2)
    return HARMONIC_SECONDS_PER_ENTRY * (lmax + 1) * nodes + KAPPA_SECONDS_PER_NODE * nodes


def _largest_lmax(n_panels: int | None) -> int:
    """Largest lmax whose Funk–Hecke quadrature fits the cost limit (with ``n_panels`` fixed or default)."""
    lo, hi = 0, 1
    while funk_hecke_cost(hi, n_panels) <= _validate.COST_LIMIT_SECONDS and hi < 2**40:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if funk_hecke_cost(mid, n_panels) <= _validate.COST_LIMIT_SECONDS else (lo, mid)
    return lo


@functools.cache
def _probe_nodes() -> np.ndarray:
    """Gauss–Hermite nodes used to probe a user activation (its inputs are s z, s² = σ_w² + σ_b²).

    Made on first use, not at import: the eigenvalue problem behind them is a threaded BLAS
    call, after which OpenBLAS's threads spin for about 0.1 s on the cores that the first
    transforms of a run need (see :func:`meanfield._threads.one_blas_thread`).
    """
    return np.polynomial.hermite_e.hermegauss(128)[0]


def _probe(fun: Callable, label: str, s: float) -> None:
    """Evaluate a user activation (or its derivative) where the Gaussian integrals will, and refuse bad output.

    The inputs are s z for z on a 128-node Gauss–Hermite grid and on a uniform grid of the
    integration range |z| <= 40 of :func:`_gauss_expect`.
    """
    z = np.unique(np.concatenate([_probe_nodes(), np.linspace(-40.0, 40.0, 321)]))
    u = s * z
    try:
        with np.errstate(all="ignore"):
            raw = fun(u.copy())
    except Exception as exc:  # noqa: BLE001 - report any failure of user code
        raise TypeError(f"{label} must accept a NumPy array and return an array of the same shape; calling it on "
                        f"an array of {u.size} inputs raised {type(exc).__name__}: {exc}") from exc
    try:
        out = np.asarray(raw)
    except Exception as exc:  # noqa: BLE001
        raise TypeError(f"{label} must return a NumPy array, got {type(raw).__name__}") from exc
    if np.iscomplexobj(out):
        k = int(np.argmax(np.abs(np.imag(out)) > 0)) if out.shape == u.shape else 0
        raise TypeError(f"{label} returned complex values (e.g. {out.ravel()[k]!r} at u = {u[k]:.6g}); "
                        "it must be real-valued")
    if out.dtype.kind not in "biuf":
        raise TypeError(f"{label} must return real numbers, got dtype {out.dtype}")
    if out.shape != u.shape:
        raise TypeError(f"{label} must map a NumPy array elementwise (same shape); for input shape {u.shape} it "
                        f"returned shape {out.shape}")
    bad = ~np.isfinite(out.astype(np.float64))
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ValueError(
            f"{label} returned {out[k]} at u = {u[k]:.6g} (u = s z with s = sqrt(sigma_w^2 + sigma_b^2) = {s:.6g}, "
            f"z = {z[k]:.6g}); the kernel is a Gaussian integral over such inputs, so the activation must be "
            "finite on the whole real line"
        )


@dataclass(frozen=True)
class HarmonicCoefficients:
    """Funk–Hecke coefficients a_l of a zonal kernel on S^{d-1} (theory §2).

    Attributes
    ----------
    d, lmax : int
    a : ndarray, shape (lmax + 1,)
        κ(<x, y>) = Σ_l a_l Z_l(<x, y>) with Z_l the zonal harmonic (so a_l multiplies
        Σ_m Y_lm(x) Y_lm(y) for any orthonormal basis).
    quadrature_error : float
        Largest change of an a_l when the quadrature is refined from n/2 to n nodes.
    truncation : float
        κ(1) - Σ_{l<=lmax} a_l Z_l(1): the part of the variance beyond lmax (>= 0).
    """

    d: int
    lmax: int
    a: np.ndarray
    quadrature_error: float
    truncation: float

    @property
    def kept_fraction(self) -> float:
        """Σ_{l<=lmax} a_l Z_l(1) / κ(1): the fraction of the pointwise variance kept."""
        kept = float(np.dot(self.a, zonal(self.d, self.lmax, 1.0)))
        return kept / (kept + self.truncation)


class Kernel(abc.ABC):
    """Base class of MLP covariance kernels κ(t), t = <x, y> ∈ [-1, 1]: subclass it to add one.

    A subclass implements ``kappa(t)`` and ``dkappa(t)``; ``kappa1`` = κ(1), ``dkappa1`` = κ'(1),
    the Funk–Hecke coefficients (:meth:`harmonic_coefficients`) and the truncation
    (:meth:`truncated`) come from them, and every noise source and solver accepts it.
    """

    @abc.abstractmethod
    def kappa(self, t):
        """κ(t) for t in [-1, 1]."""

    @abc.abstractmethod
    def dkappa(self, t):
        """κ'(t) for t in [-1, 1]."""

    @property
    def kappa1(self) -> float:
        """κ(1), the pointwise variance of each field component per unit time."""
        return float(self.kappa(1.0))

    @property
    def dkappa1(self) -> float:
        """κ'(1), which enters the Lyapunov exponent (theory §5.4)."""
        return float(self.dkappa(1.0))

    def harmonic_coefficients(self, d: int, lmax: int, *, n_panels: int | None = None) -> HarmonicCoefficients:
        """Funk–Hecke / Gegenbauer coefficients a_l, l = 0..lmax, on S^{d-1} (theory §2).

        a_l = ``|S^{d-2}| ∫_0^π κ(cos θ) P_l^{(d)}(cos θ) sin^{d-2}θ dθ``; on S^2 this is
        2π ∫ κ P_l dt, on S^1 ∫_0^{2π} κ(cos θ) cos(kθ) dθ. The θ-integral is done by
        composite 32-point Gauss–Legendre panels: κ(cos θ) is smooth on each closed panel
        even where κ(t) is singular at t = ±1 (relu), so the rule converges fast; its
        error is estimated by halving the number of panels. Every a_l must be >= 0
        (Schoenberg); a negative value beyond the quadrature error raises.

        Parameters
        ----------
        d : int, >= 2
        lmax : int, >= 0
        n_panels : int, optional
            Number of Gauss–Legendre panels on [0, π]; default max(64, lmax).

        Raises
        ------
        ValueError
            The estimated run time (:func:`funk_hecke_cost`) exceeds
            :data:`meanfield._validate.MAX_SECONDS`; the message gives the estimate and the
            largest ``lmax`` accepted.

        Examples
        --------
        >>> k = ActivationKernel("relu")
        >>> hc = k.harmonic_coefficients(3, 16)
        >>> bool((hc.a >= 0).all()), round(hc.kept_fraction, 4)
        (True, 0.9999)
        """
        d = as_int(d, "d", min_value=2)
        lmax = as_int(lmax, "lmax", min_value=0)
        p = _default_panels(lmax) if n_panels is None else n_panels
        p = as_int(p, "n_panels", min_value=2)
        if n_panels is not None and 8.0 * 32 * p * 6 > _validate.COST_LIMIT_BYTES:
            check_cost("harmonic_coefficients", seconds=funk_hecke_cost(lmax, p), memory=8.0 * 32 * p * 6,
                       parameter="n_panels", value=p, largest=int(_validate.COST_LIMIT_BYTES // (8 * 32 * 6)))
        check_cost(
            "harmonic_coefficients",
            seconds=funk_hecke_cost(lmax, p),
            memory=8.0 * 32 * p * 6,
            parameter="lmax" if n_panels is None else f"lmax (with n_panels = {p})",
            value=lmax,
            largest=_largest_lmax(n_panels),
        )
        a_full = self._funk_hecke(d, lmax, p)
        a_half = self._funk_hecke(d, lmax, p // 2)
        qerr = float(np.max(np.abs(a_full - a_half)))
        tol = 10 * qerr + 1e-13 * max(1.0, abs(self.kappa1))
        if np.any(a_full < -tol):
            bad = int(np.argmin(a_full))
            raise ArithmeticError(
                f"Funk-Hecke coefficient a_{bad} = {a_full[bad]:.3e} < 0 in d = {d}: the kernel is not "
                f"positive definite or n_panels = {p} is too small"
            )
        a = np.maximum(a_full, 0.0)
        trunc = self.kappa1 - float(np.dot(a, zonal(d, lmax, 1.0)))
        return HarmonicCoefficients(d=d, lmax=lmax, a=a, quadrature_error=qerr, truncation=max(trunc, 0.0))

    def _funk_hecke(self, d: int, lmax: int, panels: int) -> np.ndarray:
        x, w = np.polynomial.legendre.leggauss(32)
        edges = np.linspace(0.0, math.pi, panels + 1)
        half = 0.5 * np.diff(edges)
        theta = (edges[:-1, None] + half[:, None] * (x[None, :] + 1.0)).ravel()
        weights = (half[:, None] * w[None, :]).ravel() * np.sin(theta) ** (d - 2)
        area = sphere_area(d - 1) if d > 2 else 2.0
        t = np.cos(theta)
        f = area * weights * self.kappa(t)
        # a_l = Σ_q f_q P_l(t_q), accumulated degree by degree: O(lmax · nodes) time, O(nodes) memory.
        # einsum, not np.dot: a threaded BLAS dot per degree stalls when the cores are busy.
        out = np.empty(lmax + 1)
        for l, p in enumerate(legendre_recurrence(d, lmax, t)):
            out[l] = np.einsum("i,i->", p, f)
        return out

    def truncated(self, d: int, lmax: int) -> "SpectralKernel":
        """The kernel κ_σ(t) = Σ_{l<=lmax} a_l Z_l(t) kept by a degree-lmax noise field (theory §3)."""
        return SpectralKernel(d, self.harmonic_coefficients(d, lmax).a)

    def scaled(self, factor: float) -> "Kernel":
        """The kernel c κ (c = ``factor`` >= 0): the covariance of the field sqrt(c) W.

        A noise of strength σ carries σ² κ (:attr:`meanfield.noise.NoiseSource.sigma`).

        Examples
        --------
        >>> k = ActivationKernel("relu").scaled(0.25)   # ReLU: κ(1) = κ'(1) = 1/2
        >>> round(k.kappa1, 12), round(k.dkappa1, 12)
        (0.125, 0.125)
        """
        factor = as_float(factor, "factor", min_value=0.0)
        return self if factor == 1.0 else ScaledKernel(self, factor)


class ActivationKernel(Kernel):
    """Covariance κ of a random Gaussian MLP layer with activation φ (theory §2).

    Parameters
    ----------
    activation : {"relu", "tanh", "gelu", "erf", "linear"} or callable
        φ; a callable must accept and return NumPy arrays elementwise.
    sigma_w, sigma_b : float
        Standard deviations of the first-layer weights and biases (σ_w > 0, σ_b >= 0).
    scale : float
        σ, the output scale: κ is multiplied by σ².
    derivative : callable, optional
        φ' for a callable activation, used for the exact κ'(1). Without it κ'(1)
        comes from the Hermite series (its truncation error is in ``hermite_error``).
    n_hermite : int
        Number of Hermite terms kept in the Mehler series (default 120).

    Attributes
    ----------
    hermite_q : ndarray
        q_n = c_n² / n!, n = 0..n_hermite-1 (without the σ² factor).
    hermite_error : float
        σ² (E[φ(sZ)²] - Σ q_n) >= 0: a bound on ``|κ_series(t) - κ(t)|`` for all t in [-1, 1].

    Examples
    --------
    >>> k = ActivationKernel("relu")
    >>> round(k.kappa1, 12), round(k.dkappa1, 12)
    (0.5, 0.5)
    >>> float(k.kappa(0.0))  # 1 / (2π)
    0.15915494309189535
    """

    def __init__(
        self,
        activation="relu",
        sigma_w: float = 1.0,
        sigma_b: float = 0.0,
        scale: float = 1.0,
        *,
        derivative: Callable | None = None,
        n_hermite: int = 120,
    ):
        self.sigma_w = as_float(sigma_w, "sigma_w", min_value=0.0, strict_min=True)
        self.sigma_b = as_float(sigma_b, "sigma_b", min_value=0.0)
        self.scale = as_float(scale, "scale", min_value=0.0)
        self.n_hermite = as_int(n_hermite, "n_hermite", min_value=1, max_value=400)
        if isinstance(activation, str):
            key = activation.lower()
            if key not in _ACTIVATIONS:
                raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)} or a callable, got {activation!r}")
            if derivative is not None:
                raise TypeError("derivative is only used with a callable activation; the named ones know theirs")
            self.name = key
            self.phi, self.phi_prime = _ACTIVATIONS[key]
        elif callable(activation):
            self.name = getattr(activation, "__name__", "callable")
            if derivative is not None and not callable(derivative):
                raise TypeError(f"derivative must be a callable or None, got {type(derivative).__name__}")
            s = math.sqrt(self.sigma_w**2 + self.sigma_b**2)
            _probe(activation, f"activation {self.name!r}", s)
            if derivative is not None:
                _probe(derivative, f"derivative {getattr(derivative, '__name__', 'callable')!r} of activation "
                       f"{self.name!r}", s)
            self.phi = activation
            self.phi_prime = derivative
        else:
            raise TypeError(f"activation must be a name or a callable, got {type(activation).__name__}")
        self.s2 = self.sigma_w**2 + self.sigma_b**2
        self.s = math.sqrt(self.s2)
        self.closed_form = isinstance(activation, str) and self.name in _CLOSED_FORM
        self._second_moment = float(_gauss_expect(lambda z: self.phi(self.s * z) ** 2)[0])
        self._hermite()
        if not (math.isfinite(self._second_moment) and np.all(np.isfinite(self.hermite_q))):
            raise ValueError(f"activation {self.name!r} grows too fast: E[phi(s Z)^2] is not finite "
                             f"(s = {self.s:.6g}); the kernel needs a square-integrable activation")

    def __repr__(self) -> str:
        return (
            f"ActivationKernel({self.name!r}, sigma_w={self.sigma_w}, sigma_b={self.sigma_b}, "
            f"scale={self.scale})"
        )

    # -- Hermite (Mehler) expansion --------------------------------------------------
    def _hermite(self) -> None:
        n = self.n_hermite
        sqrt_k = np.sqrt(np.arange(1, n))

        def integrand(z):
            # normalised Hermite h_k = He_k / sqrt(k!) by the stable recurrence
            h = np.empty(n)
            h[0] = 1.0
            if n > 1:
                h[1] = z
            for k in range(1, n - 1):
                h[k + 1] = (z * h[k] - sqrt_k[k - 1] * h[k - 1]) / sqrt_k[k]
            return self.phi(self.s * z) * h

        coeffs = _gauss_expect(integrand)
        self.hermite_q = coeffs**2
        self.hermite_error = float(self.scale**2 * max(self._second_moment - self.hermite_q.sum(), 0.0))

    def _r(self, t):
        return (self.sigma_w**2 * t + self.sigma_b**2) / self.s2

    def _check_t(self, t) -> np.ndarray:
        return _check_t(t)

    def kappa_hermite(self, t) -> np.ndarray:
        """κ(t) from the truncated Mehler series; error <= ``hermite_error``."""
        r = self._r(self._check_t(t))
        return self.scale**2 * np.polynomial.polynomial.polyval(r, self.hermite_q)

    def dkappa_hermite(self, t) -> np.ndarray:
        """κ'(t) from the differentiated Mehler series (accurate for ``|r| < 1``)."""
        r = self._r(self._check_t(t))
        dq = np.arange(1, self.n_hermite) * self.hermite_q[1:]
        return self.scale**2 * self.sigma_w**2 / self.s2 * np.polynomial.polynomial.polyval(r, dq)

    # -- public evaluation -------------------------------------------------------------
    def kappa(self, t) -> np.ndarray:
        """κ(t), vectorised over t in [-1, 1] (closed form when available, else Mehler series)."""
        t = self._check_t(t)
        if not self.closed_form:
            return self.kappa_hermite(t)
        r = self._r(t)
        c = self.scale**2
        if self.name == "relu":
            return c * self.s2 / (2 * math.pi) * (np.sqrt(np.maximum(1 - r * r, 0.0)) + (math.pi - np.arccos(r)) * r)
        if self.name == "linear":
            return c * self.s2 * r
        # erf: E[erf(U) erf(V)] = (2/π) arcsin(2 Cov / (1 + 2 s²))
        return c * 2 / math.pi * np.arcsin(2 * self.s2 * r / (1 + 2 * self.s2))

    def dkappa(self, t) -> np.ndarray:
        """κ'(t) = dκ/dt, vectorised over t in [-1, 1]."""
        t = self._check_t(t)
        dr = self.sigma_w**2 / self.s2
        c = self.scale**2
        if not self.closed_form:
            out = np.asarray(self.dkappa_hermite(t), dtype=float)
            # the series converges slowly at r = 1; use the exact Gaussian integral there
            return np.where(np.isclose(self._r(t), 1.0, rtol=0, atol=1e-15), self.dkappa1, out)
        r = self._r(t)
        if self.name == "relu":
            return c * self.s2 / (2 * math.pi) * (math.pi - np.arccos(r)) * dr
        if self.name == "linear":
            return c * self.s2 * dr * np.ones_like(r)
        g = 2 * self.s2 / (1 + 2 * self.s2)
        return c * 2 / math.pi * g * dr * self.s2 / np.sqrt(1 - (g * r) ** 2) / self.s2

    @property
    def kappa1(self) -> float:
        """κ(1) = σ² E[φ(sZ)²], by adaptive quadrature (exact to ~1e-13)."""
        return self.scale**2 * self._second_moment

    @property
    def dkappa1(self) -> float:
        """κ'(1) = σ² σ_w² E[φ'(sZ)²] (Gaussian integration by parts), by adaptive quadrature."""
        if self.phi_prime is None:
            return float(self.dkappa_hermite(1.0))
        m = float(_gauss_expect(lambda z: np.asarray(self.phi_prime(self.s * z), dtype=float) ** 2)[0])
        return self.scale**2 * self.sigma_w**2 * m


class ScaledKernel(Kernel):
    """c κ for a kernel κ and a constant c >= 0 (:meth:`Kernel.scaled`): every quantity is c times κ's.

    Parameters
    ----------
    base : Kernel
    factor : float, >= 0

    Examples
    --------
    >>> k = ScaledKernel(ActivationKernel("tanh"), 4.0)
    >>> bool(np.isclose(k.kappa(0.3), 4 * ActivationKernel("tanh").kappa(0.3)))
    True
    """

    def __init__(self, base: Kernel, factor: float):
        if not isinstance(base, Kernel):
            raise TypeError(f"base must be a meanfield.kernels.Kernel, got {type(base).__name__}")
        self.base = base
        self.factor = as_float(factor, "factor", min_value=0.0)

    def __repr__(self) -> str:
        return f"ScaledKernel({self.base!r}, factor={self.factor:g})"

    def kappa(self, t):
        return self.factor * np.asarray(self.base.kappa(t))

    def dkappa(self, t):
        return self.factor * np.asarray(self.base.dkappa(t))

    @property
    def kappa1(self) -> float:
        return self.factor * float(self.base.kappa1)

    @property
    def dkappa1(self) -> float:
        return self.factor * float(self.base.dkappa1)

    def harmonic_coefficients(self, d: int, lmax: int, *, n_panels: int | None = None) -> HarmonicCoefficients:
        """c times the base kernel's coefficients, quadrature error and truncation."""
        hc = self.base.harmonic_coefficients(d, lmax, n_panels=n_panels)
        return HarmonicCoefficients(d=hc.d, lmax=hc.lmax, a=self.factor * hc.a,
                                    quadrature_error=self.factor * hc.quadrature_error,
                                    truncation=self.factor * hc.truncation)

    def scaled(self, factor: float) -> Kernel:
        factor = as_float(factor, "factor", min_value=0.0)
        return self if factor == 1.0 else ScaledKernel(self.base, self.factor * factor)


class SpectralKernel(Kernel):
    """A zonal kernel given by its Funk–Hecke coefficients: κ(t) = Σ_l a_l Z_l(t).

    This is the covariance κ_σ actually carried by a noise field truncated at degree
    l_σ (theory §3); every formula of theory §5 holds with κ replaced by it.

    Parameters
    ----------
    d : int
        Dimension of the ambient space (the sphere is S^{d-1}).
    a : array_like, shape (lmax + 1,), non-negative.

    Examples
    --------
    >>> import numpy as np
    >>> k = SpectralKernel(3, [0.0, 4 * np.pi / 3])   # κ(t) = t
    >>> round(float(k.kappa(0.5)), 12), round(float(k.dkappa(0.2)), 12)
    (0.5, 1.0)
    """

    def __init__(self, d: int, a):
        self.d = as_int(d, "d", min_value=2)
        a = as_real_array(a, "a", finite=False)
        if a.ndim != 1 or a.size < 1:
            raise ValueError(f"a must be a non-empty 1-D array of coefficients, got shape {a.shape}")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError("a must be finite and non-negative (Schoenberg)")
        self.a = a
        self.lmax = a.size - 1

    def __repr__(self) -> str:
        return f"SpectralKernel(d={self.d}, lmax={self.lmax})"

    def kappa(self, t) -> np.ndarray:
        """κ(t) = Σ_l a_l Z_l(t) for t in [-1, 1] (values beyond ``1 + T_TOL`` raise)."""
        t = _check_t(t)
        return np.tensordot(self.a, zonal(self.d, self.lmax, t), axes=1)

    def dkappa(self, t) -> np.ndarray:
        """κ'(t) for t in [-1, 1] (values beyond ``1 + T_TOL`` raise)."""
        t = _check_t(t)
        return np.tensordot(self.a, zonal_derivative(self.d, self.lmax, t), axes=1)

    @property
    def kappa1(self) -> float:
        return float(np.dot(self.a, harmonic_dimension(self.d, self.lmax)) / sphere_area(self.d))

    def scaled(self, factor: float) -> "SpectralKernel":
        """c κ as a :class:`SpectralKernel` (coefficients c a_l)."""
        factor = as_float(factor, "factor", min_value=0.0)
        return self if factor == 1.0 else SpectralKernel(self.d, factor * self.a)


def _as_kernel(kernel, name: str = "kernel"):
    """A kernel-like object (``kappa1`` and ``dkappa1``) from a Kernel, an activation name, or raise."""
    if isinstance(kernel, str):
        return ActivationKernel(kernel)
    if isinstance(kernel, Kernel) or (hasattr(kernel, "kappa1") and hasattr(kernel, "dkappa1")):
        return kernel
    raise TypeError(f"{name} must be an activation name ({', '.join(sorted(_ACTIVATIONS))}), a "
                    f"meanfield.kernels.Kernel (ActivationKernel, SpectralKernel) or an object with kappa1 and "
                    f"dkappa1 (e.g. noise.kernel), got {type(kernel).__name__}")


def lyapunov_exponent(kernel, d: int) -> float:
    """Top Lyapunov exponent of the pure-noise flow on S^{d-1} (theory §5.4).

    λ_1 = ½ [ (d - 3) κ'(1) - (d - 1) κ(1) ].

    Noise synchronises tokens iff λ_1 < 0: always for d <= 3, and for d > 3 iff
    κ'(1)/κ(1) < (d-1)/(d-3).

    Parameters
    ----------
    kernel : str, ActivationKernel or SpectralKernel
        An activation name (its :class:`ActivationKernel` with default σ_w, σ_b, scale), or
        anything with ``kappa1`` and ``dkappa1``; pass ``noise.kernel`` to use the
        truncated κ_σ of a noise path.
    d : int, >= 2

    Examples
    --------
    >>> lyapunov_exponent(ActivationKernel("relu"), 3)
    -0.5
    >>> lyapunov_exponent("relu", 3)
    -0.5
    """
    kernel = _as_kernel(kernel)
    d = as_int(d, "d", min_value=2)
    k1, dk1 = float(kernel.kappa1), float(kernel.dkappa1)
    if not (math.isfinite(k1) and math.isfinite(dk1)):
        raise ValueError(f"kernel {kernel!r} has kappa(1) = {k1} and kappa'(1) = {dk1}: both must be finite")
    return 0.5 * ((d - 3) * dk1 - (d - 1) * k1)


def synchronises(kernel, d: int) -> bool:
    """Whether the closed form of theory §5.4 predicts synchronisation by noise (λ_1 < 0).

    ``kernel`` is as in :func:`lyapunov_exponent` (an activation name is accepted).
    """
    return lyapunov_exponent(kernel, d) < 0


#: |κ'(1)/κ(1) - 1| below which the ratio counts as 1 (the Gaussian quadratures give κ to ~1e-12).
RATIO_TOL = 1e-9


def critical_dimension(kernel) -> float | None:
    """Dimension d_c at which λ_1 of theory §5.4 changes sign: λ_1(d_c) = 0, or None if it never does.

    λ_1 = ½ [(d - 3) κ'(1) - (d - 1) κ(1)] is affine in d; with r = κ'(1)/κ(1) it vanishes at
    d_c = (3r - 1)/(r - 1) (κ'(1)/κ(1) = (d-1)/(d-3)), which is > 3 when r > 1: noise
    synchronises (λ_1 < 0) for d < d_c and not for d > d_c. For r <= 1 (ReLU and linear give
    r = 1; ``|r - 1| <= RATIO_TOL`` counts as 1) λ_1 < 0 in every dimension: None.

    Examples
    --------
    >>> critical_dimension("relu") is None
    True
    >>> dc = critical_dimension(ActivationKernel("erf", sigma_w=2.0))
    >>> round(dc, 4), lyapunov_exponent(ActivationKernel("erf", sigma_w=2.0), 5) < 0
    (5.5904, True)
    """
    kernel = _as_kernel(kernel)
    k1, dk1 = float(kernel.kappa1), float(kernel.dkappa1)
    if not (math.isfinite(k1) and math.isfinite(dk1) and k1 > 0):
        raise ValueError(f"kernel {kernel!r} has kappa(1) = {k1} and kappa'(1) = {dk1}: need finite values, kappa(1) > 0")
    r = dk1 / k1
    if r <= 1 + RATIO_TOL:
        return None
    return (3 * r - 1) / (r - 1)


#: Former private name of :class:`Kernel`.
_KernelBase = Kernel
