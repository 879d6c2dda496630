"""Initial densities ρ0 of the SPDE: a public base class and the uniform, von Mises–Fisher and mixture densities."""

from __future__ import annotations

import abc
import math

import numpy as np
from scipy import special

from .._validate import as_float, as_int, as_rng
from ..attention import attention_eigenvalues
from ..sphere import basis, sphere_area

__all__ = ["InitialCondition", "Uniform", "VonMisesFisher", "Mixture", "initial_condition_from_dict"]


class InitialCondition(abc.ABC):
    """Base class of initial densities ρ0 on S^{d-1}: subclass it to add one.

    A subclass sets ``d`` and implements ``density(x)`` (points (N, d) -> (N,)),
    ``sample(n, seed)`` (iid samples (n, d)), ``coefficients(lmax)`` (exact coefficients in
    the state layout of :func:`meanfield.sphere.basis`) and ``to_dict()`` (metadata).
    Calling the object evaluates the density.
    """

    d: int

    def __call__(self, x) -> np.ndarray:
        return self.density(x)

    @abc.abstractmethod
    def density(self, x) -> np.ndarray:
        """ρ0 at points x of shape (N, d)."""

    @abc.abstractmethod
    def sample(self, n: int, seed=None) -> np.ndarray:
        """n iid samples of ρ0, shape (n, d)."""

    @abc.abstractmethod
    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact harmonic coefficients of ρ0 up to degree lmax."""

    def _check_x(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        return x


class Uniform(InitialCondition):
    """The uniform probability density ``1/|S^{d-1}|`` on S^{d-1}.

    Parameters
    ----------
    d : {2, 3}

    Examples
    --------
    >>> u = Uniform(3)
    >>> bool(np.isclose(u.density(np.array([[0.0, 0.0, 1.0]]))[0], 1 / (4 * np.pi)))
    True
    """

    def __init__(self, d: int = 3):
        self.d = as_int(d, "d", min_value=2, max_value=3)

    def __repr__(self) -> str:
        return f"Uniform(d={self.d})"

    def density(self, x) -> np.ndarray:
        """ρ(x) = ``1/|S^{d-1}|``, points (N, d) -> values (N,)."""
        x = self._check_x(x)
        return np.full(x.shape[0], 1.0 / sphere_area(self.d))

    def sample(self, n: int, seed=None) -> np.ndarray:
        """n iid uniform points, shape (n, d) (normalised Gaussians)."""
        n = as_int(n, "n", min_value=1)
        z = as_rng(seed).standard_normal((n, self.d))
        return z / np.linalg.norm(z, axis=1, keepdims=True)

    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact coefficients: only ρ_00 = ``1/sqrt(|S^{d-1}|)`` is non-zero."""
        lmax = as_int(lmax, "lmax", min_value=0)
        out = basis(self.d, lmax).zeros()
        out[0] = 1.0 / math.sqrt(sphere_area(self.d))
        return out

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "uniform", "d": self.d}


class VonMisesFisher(InitialCondition):
    """Von Mises–Fisher density ρ(x) = C_d(κ) exp(κ <μ, x>) on S^{d-1}, d ∈ {2, 3}.

    C_d(κ) = κ^{d/2-1} / ((2π)^{d/2} I_{d/2-1}(κ)) (S^2: κ / (4π sinh κ); S^1: 1/(2π I_0(κ))),
    evaluated with exponentially scaled Bessel functions so that it never overflows.
    Its harmonic coefficients are exact by Funk–Hecke:
    ρ_lm = C_d(κ) λ_l(κ) conj(Y_lm(μ)) with λ_l the eigenvalues of e^{κ<x,y>} (theory §4).

    Parameters
    ----------
    mu : array_like, shape (d,)
        Mean direction (normalised here).
    kappa : float, >= 0
        Concentration; κ = 0 is the uniform density.

    Examples
    --------
    >>> v = VonMisesFisher([0, 0, 1], 4.0)
    >>> x = v.sample(1000, seed=0)
    >>> x.shape, bool(np.all(np.isclose(np.linalg.norm(x, axis=1), 1.0)))
    ((1000, 3), True)
    """

    def __init__(self, mu, kappa: float):
        mu = np.asarray(mu, dtype=np.float64).ravel()
        if mu.size not in (2, 3) or not np.all(np.isfinite(mu)) or np.linalg.norm(mu) == 0:
            raise ValueError(f"mu must be a finite non-zero vector of length 2 or 3, got {mu}")
        self.mu = mu / np.linalg.norm(mu)
        self.d = mu.size
        self.kappa = as_float(kappa, "kappa", min_value=0.0)

    def __repr__(self) -> str:
        return f"VonMisesFisher(mu={self.mu.tolist()}, kappa={self.kappa})"

    @property
    def _log_scaled_const(self) -> float:
        """log of C_d(κ) e^{κ}, the constant in front of e^{κ(<μ,x> - 1)}."""
        k, nu = self.kappa, self.d / 2 - 1
        if k == 0:
            return -math.log(sphere_area(self.d))
        return nu * math.log(k) - (self.d / 2) * math.log(2 * math.pi) - math.log(special.ive(nu, k))

    def density(self, x) -> np.ndarray:
        """ρ(x), points (N, d) -> values (N,)."""
        x = self._check_x(x)
        return np.exp(self._log_scaled_const + self.kappa * (x @ self.mu - 1.0))

    def sample(self, n: int, seed=None) -> np.ndarray:
        """n iid samples, shape (n, d): Wood's exact inversion on S^2, von Mises angles on S^1."""
        n = as_int(n, "n", min_value=1)
        rng = as_rng(seed)
        k = self.kappa
        if self.d == 2:
            theta0 = math.atan2(self.mu[1], self.mu[0])
            th = rng.vonmises(theta0, k, size=n) if k > 0 else rng.uniform(0, 2 * np.pi, n)
            return np.stack([np.cos(th), np.sin(th)], axis=1)
        u = rng.uniform(size=n)
        if k > 0:
            w = 1.0 + np.log(u + (1.0 - u) * math.exp(-2.0 * k)) / k
        else:
            w = 2.0 * u - 1.0
        w = np.clip(w, -1.0, 1.0)
        phi = rng.uniform(0, 2 * np.pi, n)
        # orthonormal e1, e2 perpendicular to μ
        a = np.eye(3)[np.argmin(np.abs(self.mu))]
        e1 = np.cross(self.mu, a)
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(self.mu, e1)
        s = np.sqrt(1.0 - w**2)
        return w[:, None] * self.mu + s[:, None] * (np.cos(phi)[:, None] * e1 + np.sin(phi)[:, None] * e2)

    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact coefficients up to degree lmax (complex alm on S^2, real Fourier on S^1)."""
        lmax = as_int(lmax, "lmax", min_value=0)
        c = math.exp(self._log_scaled_const)
        lam = attention_eigenvalues(self.d, self.kappa, lmax)  # e^{-κ} λ_l(κ)
        b = basis(self.d, lmax)
        return c * lam[b.ell] * b.dirac(self.mu[None])[0]

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "vmf", "mu": self.mu.tolist(), "kappa": self.kappa}


class Mixture(InitialCondition):
    """Convex combination ρ = Σ_k w_k ρ_k of initial densities.

    Parameters
    ----------
    components : sequence of Uniform / VonMisesFisher / Mixture (same d)
    weights : array_like, shape (K,), non-negative, summing to 1 (to 1e-12)

    Examples
    --------
    >>> m = Mixture([VonMisesFisher([0, 0, 1], 5.0), VonMisesFisher([0, 0, -1], 5.0)], [0.5, 0.5])
    >>> m.sample(10, seed=1).shape
    (10, 3)
    """

    def __init__(self, components, weights=None):
        comps = list(components)
        if not comps or not all(isinstance(c, InitialCondition) for c in comps):
            raise TypeError("components must be a non-empty list of Uniform / VonMisesFisher / Mixture objects")
        ds = {c.d for c in comps}
        if len(ds) != 1:
            raise ValueError(f"all mixture components must live on the same sphere, got d = {sorted(ds)}")
        self.d = ds.pop()
        w = np.full(len(comps), 1.0 / len(comps)) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != (len(comps),) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(f"weights must be {len(comps)} finite non-negative numbers, got {weights}")
        if abs(w.sum() - 1.0) > 1e-12:
            raise ValueError(f"mixture weights must sum to 1, got sum {w.sum()!r}")
        self.components, self.weights = comps, w

    def __repr__(self) -> str:
        return f"Mixture({self.components!r}, weights={self.weights.tolist()})"

    def density(self, x) -> np.ndarray:
        """ρ(x) = Σ_k w_k ρ_k(x), points (N, d) -> values (N,)."""
        x = self._check_x(x)
        return sum(w * c.density(x) for w, c in zip(self.weights, self.components))

    def sample(self, n: int, seed=None) -> np.ndarray:
        """n iid samples: multinomial component counts, then each component's sampler, shuffled."""
        n = as_int(n, "n", min_value=1)
        rng = as_rng(seed)
        counts = rng.multinomial(n, self.weights)
        parts = [c.sample(int(k), rng) for c, k in zip(self.components, counts) if k > 0]
        x = np.concatenate(parts, axis=0)
        return x[rng.permutation(n)]

    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact coefficients Σ_k w_k (ρ_k)_lm up to degree lmax."""
        return sum(w * c.coefficients(lmax) for w, c in zip(self.weights, self.components))

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "mixture", "weights": self.weights.tolist(), "components": [c.to_dict() for c in self.components]}


def initial_condition_from_dict(spec: dict, d: int) -> InitialCondition:
    """Build an initial condition from a plain dict (used by the CLI / TOML configs).

    ``{"kind": "uniform"}``, ``{"kind": "vmf", "mu": [...], "kappa": k}``,
    ``{"kind": "mixture", "weights": [...], "components": [dict, ...]}``.
    """
    kind = str(spec.get("kind", "")).lower()
    if kind == "uniform":
        return Uniform(d)
    if kind == "vmf":
        mu = spec.get("mu", [0.0] * (d - 1) + [1.0])
        if len(mu) != d:
            raise ValueError(f"vmf mu must have length d = {d}, got {mu}")
        return VonMisesFisher(mu, spec.get("kappa", 1.0))
    if kind == "mixture":
        return Mixture([initial_condition_from_dict(c, d) for c in spec["components"]], spec.get("weights"))
    raise ValueError(f"unknown initial condition kind {kind!r}; use 'uniform', 'vmf' or 'mixture'")
