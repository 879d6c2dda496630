"""The spectral McKean–Vlasov SPDE solver on S^1 and S^2 (SPEC §4, §6).

Conditionally on the common noise the token density ρ_t solves (Itô form, SPEC §4)

    dρ = [ -div_S(ρ v[ρ]) + ½ κ_σ(1) Δ_S ρ ] dt - div_S( ρ P_x dW(t, x) ),
    v[ρ](x) = P_x A(x; ρ),   A(x; ρ) = ∫ e^{β<x,y>} V y ρ(y) dy / ∫ e^{β<x,y>} ρ(y) dy.

The state is the vector of harmonic coefficients of ρ up to degree ``lmax``:
S^2 (d = 3) ducc0 complex alm in healpy packing (ρ = Σ a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm),
S^1 (d = 2) real Fourier coefficients in the order of :func:`meanfield.harmonics.real_basis`.
Products are formed pseudo-spectrally on a quadrature grid obeying the 3/2 rule
(S^2: Gauss–Legendre in cos θ with n_θ = ⌊3 lmax / 2⌋ + 2 rings and n_φ = 2 n_θ
longitudes; S^1: M = 2(⌊3 lmax/2⌋ + 2) equispaced nodes), so the projection of a product
of two degree-``lmax`` fields back to degree ``lmax`` is exact.

Two time steppers (SPEC §6):

``scheme="exponential"`` (a), Eulerian Itô exponential Euler,
    ρ_{n+1} = E_h [ ρ_n - h div_S(ρ_n v[ρ_n]) - div_S(ρ_n P_x ΔW_n) ],
    E_h = exp(½ κ_σ(1) h Δ_S) (per coefficient e^{-½ κ_σ(1) l(l+d-2) h}).
    The divergence of a tangent field is a spin-1 analysis on S^2
    (div F = -sqrt(l(l+1)) E_lm, SPEC §10) and d/dθ of the Fourier series on S^1.
    Mass is conserved exactly (the divergence has no l = 0 part). It is explicit in the
    transport term and needs a step-size condition when attention is on: see
    :func:`exponential_euler_growth`.

``scheme="pushforward"`` (b), Lagrangian–spectral,
    T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)),     ρ_{n+1} = (T_n)_# ρ_n   in weak form:
    (ρ_{n+1})_lm = Σ_q ρ_n(x_q) w_q conj(Y_lm(T_n(x_q)))
    over the grid nodes x_q with quadrature weights w_q (one adjoint non-uniform SHT,
    ``ducc0.sht.experimental.adjoint_synthesis_general``). ΔW is the ambient increment,
    exactly as the particle solver uses it, so an N-particle run with the same step map
    converges to this solution as N -> ∞ at fixed h. No CFL condition; the mass
    Σ_q ρ_n(x_q) w_q is carried over exactly.

For :class:`meanfield.noise.RotationNoise` the push-forward scheme also accepts
``noise_map="flow"``: T_n(x) = exp(ΔΩ_n) Π(x + h v[ρ_n](x)), whose noise part is an exact
rotation. Without attention it reproduces the rotated density ρ_0 ∘ (R^h_t)^T with
R^h_t = exp(ΔΩ_{n-1}) ··· exp(ΔΩ_0) to round-off (SPEC §5.5), because a rotation maps
degree-l harmonics to degree-l harmonics and the 3/2 grid integrates their products
exactly. The default ``noise_map="projected"`` map Π((I + ΔΩ)x) is a rotation only up
to O(h) per step, and the Eulerian scheme (a) only to its strong order 1/2.

The solver monitors the spectral tail, the negative part and finiteness after every
step and raises :class:`SPDEResolutionError` (carrying the partial solution) instead of
returning an unresolved solution (SPEC §6).
"""

from __future__ import annotations

import abc
import json
import math
import numbers
import os
import time as _time

import numpy as np
from scipy import special

from ._validate import as_float, as_int, as_matrix, as_rng
from .attention import attention_eigenvalues, required_degree, tangent_project
from .harmonics import (
    _complex_sh_cartesian,
    alm_index,
    alm_to_real,
    angles_to_cart,
    cart_to_angles,
    n_alm,
    real_basis,
    real_to_alm,
    sphere_area,
    tangent_frame,
)

__all__ = [
    "initial_condition_from_dict",
    "Uniform",
    "VonMisesFisher",
    "Mixture",
    "SPDESolution",
    "SPDEResolutionError",
    "solve_spde",
    "exponential_euler_growth",
    "coefficient_degrees",
]

#: Accuracy requested from ducc0's non-uniform transforms (must exceed 2e-13).
NUFFT_EPS = 1e-12
#: Scheme (a) is accepted when the frozen-coefficient amplitude growth over the run is below this factor.
CFL_GROWTH = 2.0
#: Default relative accuracy of the truncated attention convolution used to check lmax against β.
ATTENTION_TOL = 1e-8


def _nthreads() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _version() -> str:
    try:
        from . import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "unknown"


# ----------------------------------------------------------------------------------------
# Coefficient layout helpers
# ----------------------------------------------------------------------------------------


def coefficient_degrees(d: int, lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Degree l and energy multiplicity of every stored coefficient.

    S^2 (complex alm, healpy packing): multiplicity 1 for m = 0 and 2 for m > 0, so that
    ``∫ ρ² = Σ mult · |a_lm|²``. S^1 (real Fourier): multiplicity 1.

    Returns
    -------
    ell : ndarray of int, shape (n,)
    mult : ndarray of float, shape (n,)

    Examples
    --------
    >>> ell, mult = coefficient_degrees(3, 1)
    >>> ell.tolist(), mult.tolist()
    ([0, 1, 1], [1.0, 1.0, 2.0])
    """
    if d == 2:
        ell = np.concatenate([[0], np.repeat(np.arange(1, lmax + 1), 2)])
        return ell, np.ones(ell.size)
    if d == 3:
        ell = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
        m = np.concatenate([np.full(lmax + 1 - mm, mm) for mm in range(lmax + 1)])
        return ell, np.where(m > 0, 2.0, 1.0)
    raise ValueError(f"d must be 2 or 3, got {d}")


def _n_state(d: int, lmax: int) -> int:
    return 2 * lmax + 1 if d == 2 else n_alm(lmax)


def _resize(c: np.ndarray, d: int, lin: int, lout: int) -> np.ndarray:
    """Truncate or zero-pad coefficients from degree lin to degree lout."""
    if lin == lout:
        return c.copy()
    if d == 2:
        out = np.zeros(2 * lout + 1)
        n = min(c.size, out.size)
        out[:n] = c[:n]
        return out
    out = np.zeros(n_alm(lout), dtype=np.complex128)
    lm = min(lin, lout)
    for m in range(lm + 1):
        src = alm_index(lin, np.arange(m, lm + 1), m)
        dst = alm_index(lout, np.arange(m, lm + 1), m)
        out[dst] = c[src]
    return out


def _lmax_from_size(d: int, size: int, dtype) -> int | None:
    if d == 2:
        return (size - 1) // 2 if size % 2 == 1 else None
    if np.iscomplexobj(np.empty(0, dtype=dtype)):
        lm = int(round((-3 + math.sqrt(1 + 8 * size)) / 2))
        return lm if n_alm(lm) == size else None
    lm = int(round(math.sqrt(size))) - 1
    return lm if (lm + 1) ** 2 == size else None


# ----------------------------------------------------------------------------------------
# Initial conditions
# ----------------------------------------------------------------------------------------


class _InitialCondition(abc.ABC):
    """Common interface: ``density(x)``, ``sample(n, seed)``, ``coefficients(lmax)`` and ``d``."""

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


class Uniform(_InitialCondition):
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
        out = np.zeros(_n_state(self.d, lmax), dtype=np.complex128 if self.d == 3 else np.float64)
        out[0] = 1.0 / math.sqrt(sphere_area(self.d))
        return out

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "uniform", "d": self.d}


class VonMisesFisher(_InitialCondition):
    """Von Mises–Fisher density ρ(x) = C_d(κ) exp(κ <μ, x>) on S^{d-1}, d ∈ {2, 3}.

    C_d(κ) = κ^{d/2-1} / ((2π)^{d/2} I_{d/2-1}(κ)) (S^2: κ / (4π sinh κ); S^1: 1/(2π I_0(κ))),
    evaluated with exponentially scaled Bessel functions so that it never overflows.
    Its harmonic coefficients are exact by Funk–Hecke:
    ρ_lm = C_d(κ) λ_l(κ) conj(Y_lm(μ)) with λ_l the eigenvalues of e^{κ<x,y>} (SPEC §4).

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
        if self.d == 2:
            ks = np.concatenate([[0], np.repeat(np.arange(1, lmax + 1), 2)])
            return c * lam[ks] * real_basis(2, lmax, self.mu[None])[0]
        y = _complex_sh_cartesian(lmax, self.mu[None])[:, :, 0]
        ell, m = _lm_arrays(lmax)
        return c * lam[ell] * np.conj(y[ell, m])

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "vmf", "mu": self.mu.tolist(), "kappa": self.kappa}


def _lm_arrays(lmax: int) -> tuple[np.ndarray, np.ndarray]:
    ell = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
    m = np.concatenate([np.full(lmax + 1 - mm, mm) for mm in range(lmax + 1)])
    return ell, m


class Mixture(_InitialCondition):
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
        if not comps or not all(isinstance(c, _InitialCondition) for c in comps):
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


def initial_condition_from_dict(spec: dict, d: int) -> _InitialCondition:
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


# ----------------------------------------------------------------------------------------
# Quadrature grids and transforms
# ----------------------------------------------------------------------------------------


class _Grid:
    """Quadrature grid (3/2 rule) with the transforms the steppers need.

    S^2: Gauss–Legendre rings (ducc0 'GL' order, colatitude increasing), n_φ = 2 n_θ.
    S^1: M equispaced nodes. ``points`` (Q, d) and ``weights`` (Q,) are flattened
    row-major (ring-major on S^2), the layout of ``ducc0.sht.synthesis_2d`` maps.
    """

    def __init__(self, d: int, lmax: int, nlat: int | None = None):
        self.d, self.lmax = d, lmax
        self.ell, self.mult = coefficient_degrees(d, lmax)
        self.nthreads = _nthreads()
        n1 = (3 * lmax) // 2 + 2 if nlat is None else nlat
        if d == 3:
            self.nlat, self.nphi = n1, 2 * n1
            xg, wg = np.polynomial.legendre.leggauss(self.nlat)
            theta = np.arccos(xg)[::-1]
            wg = wg[::-1]
            phi = 2 * np.pi * np.arange(self.nphi) / self.nphi
            T, P = np.meshgrid(theta, phi, indexing="ij")
            self.loc = np.stack([T.ravel(), P.ravel()], axis=1)
            self.points = angles_to_cart(self.loc)
            self.weights = np.repeat(wg * 2 * np.pi / self.nphi, self.nphi)
            self.e_theta, self.e_phi = tangent_frame(self.loc)
            self.sqrt_ll = np.sqrt(self.ell * (self.ell + 1.0))
        else:
            self.M = 2 * n1
            th = 2 * np.pi * np.arange(self.M) / self.M
            self.points = np.stack([np.cos(th), np.sin(th)], axis=1)
            self.weights = np.full(self.M, 2 * np.pi / self.M)
            self.e_theta = np.stack([-self.points[:, 1], self.points[:, 0]], axis=1)
            self.B = real_basis(2, lmax, self.points)
        self.Q = self.points.shape[0]
        self._noise_basis: dict = {}

    # -- scalar transforms -------------------------------------------------------------
    def synth(self, c: np.ndarray) -> np.ndarray:
        """Values on the grid (Q,) of the field with coefficients c."""
        if self.d == 2:
            return self.B @ c
        import ducc0

        return ducc0.sht.synthesis_2d(alm=c[None], spin=0, lmax=self.lmax, geometry="GL",
                                      ntheta=self.nlat, nphi=self.nphi, nthreads=self.nthreads)[0].ravel()

    def analysis(self, f: np.ndarray) -> np.ndarray:
        """Quadrature projection of grid values onto degree <= lmax."""
        if self.d == 2:
            return self.B.T @ (self.weights * f)
        import ducc0

        return ducc0.sht.analysis_2d(map=f.reshape(1, self.nlat, self.nphi), spin=0, lmax=self.lmax,
                                     geometry="GL", nthreads=self.nthreads)[0]

    # -- vector calculus -----------------------------------------------------------------
    def frame(self) -> list[np.ndarray]:
        """Orthonormal tangent frame at the nodes: [e_θ, e_φ] on S^2, [e_θ] on S^1, each (Q, d)."""
        return [self.e_theta, self.e_phi] if self.d == 3 else [self.e_theta]

    def components(self, F: np.ndarray) -> list[np.ndarray]:
        """Frame components F·e_k of an ambient field F (Q, d); the normal part is dropped (= P_x F)."""
        return [np.einsum("ij,ij->i", F, e) for e in self.frame()]

    def ambient(self, comps: list[np.ndarray]) -> np.ndarray:
        """Ambient tangent vectors Σ_k comps_k e_k, shape (Q, d)."""
        out = comps[0][:, None] * self.e_theta
        if self.d == 3:
            out += comps[1][:, None] * self.e_phi
        return out

    def gradient(self, c: np.ndarray) -> list[np.ndarray]:
        """Frame components of the surface gradient ∇_S f on the grid ((θ, φ) on S^2, θ on S^1)."""
        if self.d == 2:
            return [self.B @ _ddtheta(c, self.lmax)]
        import ducc0

        e = self.sqrt_ll * c
        g = ducc0.sht.synthesis_2d(alm=np.stack([e, np.zeros_like(e)]), spin=1, lmax=self.lmax, geometry="GL",
                                   ntheta=self.nlat, nphi=self.nphi, nthreads=self.nthreads)
        return [g[0].ravel(), g[1].ravel()]

    def divergence(self, comps: list[np.ndarray]) -> np.ndarray:
        """Coefficients of div_S F (degree <= lmax) for a tangent field given by its frame components.

        S^2: spin-1 analysis of (F_θ, F_φ) gives E_lm, and div F = -sqrt(l(l+1)) E_lm
        (SPEC §10). S^1: d/dθ of the Fourier projection of F_θ.
        """
        if self.d == 2:
            return _ddtheta(self.analysis(comps[0]), self.lmax)
        import ducc0

        m = np.stack([comps[0].reshape(self.nlat, self.nphi), comps[1].reshape(self.nlat, self.nphi)])
        eb = ducc0.sht.analysis_2d(map=m, spin=1, lmax=self.lmax, geometry="GL", nthreads=self.nthreads)
        return -self.sqrt_ll * eb[0]

    # -- non-uniform transforms ----------------------------------------------------------
    def adjoint_at(self, values: np.ndarray, pts: np.ndarray) -> np.ndarray:
        """Σ_q values_q conj(Y_lm(pts_q)), degree <= lmax: the weak form of a push-forward.

        The l = 0 coefficient is formed by the exact sum, so the mass Σ_q values_q is
        carried over to round-off whatever the NUFFT accuracy.
        """
        if self.d == 2:
            out = np.zeros(2 * self.lmax + 1)
            block = max(1, 2**22 // out.size)
            for s in range(0, pts.shape[0], block):
                out += values[s : s + block] @ real_basis(2, self.lmax, pts[s : s + block])
            out[0] = values.sum() / math.sqrt(2 * math.pi)
            return out
        import ducc0

        out = ducc0.sht.experimental.adjoint_synthesis_general(
            map=values[None].astype(np.float64), spin=0, lmax=self.lmax, loc=cart_to_angles(pts),
            epsilon=NUFFT_EPS, nthreads=self.nthreads)[0]
        out[0] = values.sum() / math.sqrt(4 * math.pi)
        return out

    def noise_on_grid(self, noise, t0: float, t1: float) -> np.ndarray:
        """Ambient increment ΔW(x_q) over [t0, t1] at the grid nodes, shape (Q, d)."""
        field = noise.field(t0, t1)
        coeffs = getattr(field, "coeffs", None)
        lsig = getattr(noise, "lmax", None)
        if coeffs is not None and lsig is not None:
            if self.d == 3 and lsig + 1 <= self.nlat and 2 * lsig + 1 <= self.nphi:
                import ducc0

                alm = real_to_alm(coeffs, lsig)
                out = np.empty((self.Q, 3))
                for a in range(3):
                    out[:, a] = ducc0.sht.synthesis_2d(alm=alm[a : a + 1], spin=0, lmax=lsig, geometry="GL",
                                                       ntheta=self.nlat, nphi=self.nphi,
                                                       nthreads=self.nthreads)[0].ravel()
                return out
            if self.d == 2:
                B = self._noise_basis.get(lsig)
                if B is None:
                    B = self._noise_basis[lsig] = real_basis(2, lsig, self.points)
                return B @ coeffs.T
        return np.asarray(field(self.points), dtype=np.float64)


def _ddtheta(c: np.ndarray, lmax: int) -> np.ndarray:
    """d/dθ on real Fourier coefficients: (cos kθ, sin kθ) parts (p, q) -> (k q, -k p)."""
    out = np.zeros_like(c)
    k = np.arange(1, lmax + 1)
    out[1::2] = k * c[2::2]
    out[2::2] = -k * c[1::2]
    return out


def _attention_eigen_derivative(d: int, beta: float, lmax: int) -> np.ndarray:
    """e^{-β} dλ_l/dβ = (2π)^{d/2} β^{1-d/2} [ive(l + d/2, β) + (l/β) ive(l + d/2 - 1, β)]."""
    ls = np.arange(lmax + 1)
    nu = ls + d / 2 - 1
    return (2 * math.pi) ** (d / 2) * beta ** (1 - d / 2) * (special.ive(nu + 1, beta) + ls / beta * special.ive(nu, beta))


class _Velocity:
    """Attention velocity v[ρ] = P_x A(x; ρ) from ρ's coefficients (SPEC §4).

    With F(x) = e^{-β}(K_β * ρ)(x) = Σ λ_l ρ_lm Y_lm(x) (scaled eigenvalues) extended to R^d
    by F(r x) = Σ λ_l(rβ) ρ_lm Y_lm(x), the ambient gradient at |x| = 1 is
    ∇_S F + x β Σ λ_l'(β) ρ_lm Y_lm, and A = V ∇_amb F / (β F). For V = I the radial
    part is removed by P_x, so only ∇_S F / (β F) is computed.
    """

    def __init__(self, d: int, lmax: int, beta: float, V: np.ndarray | None):
        self.d, self.lmax, self.beta, self.V = d, lmax, beta, V
        ell, _ = coefficient_degrees(d, lmax)
        self.lam = attention_eigenvalues(d, beta, lmax)[ell]
        self.dlam = _attention_eigen_derivative(d, beta, lmax)[ell] if V is not None else None

    def on_grid(self, grid: _Grid, c: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Frame components of v[ρ] at the grid nodes, and e^{-β} K_β * ρ there."""
        lc = self.lam * c
        conv = grid.synth(lc)
        g = grid.gradient(lc)
        if self.V is not None:
            rad = self.beta * grid.synth(self.dlam * c)
            g = grid.components((grid.ambient(g) + rad[:, None] * grid.points) @ self.V.T)
        inv = 1.0 / (self.beta * conv)
        return [gk * inv for gk in g], conv

    def at_points(self, c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lc = self.lam * c
        if self.d == 2:
            B = real_basis(2, self.lmax, x)
            conv = B @ lc
            e_t = np.stack([-x[:, 1], x[:, 0]], axis=1)
            g = (B @ _ddtheta(lc, self.lmax))[:, None] * e_t
            rad = self.beta * (B @ (self.dlam * c)) if self.V is not None else None
        else:
            import ducc0

            loc = cart_to_angles(x)
            conv = ducc0.sht.synthesis_general(alm=lc[None], spin=0, lmax=self.lmax, loc=loc, epsilon=NUFFT_EPS,
                                               nthreads=_nthreads())[0]
            gr = ducc0.sht.synthesis_general(alm=lc[None], spin=1, lmax=self.lmax, loc=loc, epsilon=NUFFT_EPS,
                                             nthreads=_nthreads(), mode="DERIV1")
            e_t, e_p = tangent_frame(loc)
            g = gr[0][:, None] * e_t + gr[1][:, None] * e_p
            rad = None
            if self.V is not None:
                rad = self.beta * ducc0.sht.synthesis_general(alm=(self.dlam * c)[None], spin=0, lmax=self.lmax,
                                                              loc=loc, epsilon=NUFFT_EPS, nthreads=_nthreads())[0]
        if self.V is not None:
            g = tangent_project(x, (g + rad[:, None] * x) @ self.V.T)
        return g / (self.beta * conv)[:, None], conv


def _evaluate(d: int, lmax: int, c: np.ndarray, x: np.ndarray) -> np.ndarray:
    if d == 2:
        out = np.empty(x.shape[0])
        block = max(1, 2**22 // c.size)
        for s in range(0, x.shape[0], block):
            out[s : s + block] = real_basis(2, lmax, x[s : s + block]) @ c
        return out
    import ducc0

    return ducc0.sht.synthesis_general(alm=c[None], spin=0, lmax=lmax, loc=cart_to_angles(x), epsilon=NUFFT_EPS,
                                       nthreads=_nthreads())[0]


# ----------------------------------------------------------------------------------------
# Solution object and errors
# ----------------------------------------------------------------------------------------


class SPDEResolutionError(RuntimeError):
    """The SPDE solution stopped being resolved (spectral tail, negative mass or non-finite values).

    Attributes
    ----------
    solution : SPDESolution
        Everything computed up to the last resolved save time (plus the offending state as
        its final entry).
    time : float
        Time at which the check failed.
    reason : str
        ``"tail"``, ``"negative"`` or ``"nonfinite"``.
    """

    def __init__(self, message: str, solution: "SPDESolution", time: float, reason: str):
        super().__init__(message)
        self.solution, self.time, self.reason = solution, time, reason


class SPDESolution:
    """Saved states of an SPDE run and the diagnostics computed from them.

    Attributes
    ----------
    d : int
        2 (S^1) or 3 (S^2).
    lmax : int
    times : ndarray, shape (n_saved,)
    coeffs : ndarray, shape (n_saved, n)
        S^2: complex alm (healpy packing, n = (lmax+1)(lmax+2)/2); S^1: real Fourier (n = 2 lmax + 1).
    beta : float
    V : ndarray (d, d) or None
    meta : dict
        Parameters, scheme, seed and noise description, package version, wall time.

    Examples
    --------
    >>> sol = solve_spde(VonMisesFisher([0, 0, 1], 2.0), None, beta=1.0, lmax=16, dt=0.01,
    ...                  t_eval=[0.0, 0.1], d=3)
    >>> bool(abs(sol.mass(-1) - 1.0) < 1e-12)
    True
    """

    def __init__(self, d: int, lmax: int, times, coeffs, beta: float, V=None, meta: dict | None = None):
        self.d, self.lmax = int(d), int(lmax)
        self.times = np.asarray(times, dtype=np.float64)
        self.coeffs = np.asarray(coeffs)
        self.beta = float(beta)
        self.V = None if V is None else np.asarray(V, dtype=np.float64)
        self.meta = dict(meta or {})
        self._grid = None
        self._vel = None

    def __len__(self) -> int:
        return self.times.size

    def __repr__(self) -> str:
        return f"SPDESolution(d={self.d}, lmax={self.lmax}, n_saved={len(self)}, t_final={self.times[-1] if len(self) else None})"

    @property
    def grid(self) -> _Grid:
        if self._grid is None:
            self._grid = _Grid(self.d, self.lmax)
        return self._grid

    def real_coefficients(self, i: int) -> np.ndarray:
        """Coefficients of saved state i in the real orthonormal basis of :mod:`meanfield.harmonics`."""
        c = self.coeffs[i]
        return alm_to_real(c, self.lmax) if self.d == 3 else c.copy()

    def evaluate(self, i: int, x) -> np.ndarray:
        """ρ_{t_i}(x) at points x (N, d) -> (N,)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        return _evaluate(self.d, self.lmax, self.coeffs[i], x)

    def density_on_grid(self, i: int, nlat: int | None = None, nlon: int | None = None):
        """ρ_{t_i} on a regular grid for plotting.

        Returns
        -------
        S^2: (colatitude (nlat,), longitude (nlon,), values (nlat, nlon)) on the
        Clenshaw–Curtis grid (poles included, colatitude π j/(nlat-1), longitude 2π k/nlon).
        S^1: (theta (nlon,), values (nlon,)).
        """
        if self.d == 2:
            n = nlon or max(256, 4 * self.lmax + 4)
            th = 2 * np.pi * np.arange(n) / n
            return th, _evaluate(2, self.lmax, self.coeffs[i], np.stack([np.cos(th), np.sin(th)], axis=1))
        import ducc0

        nlat = nlat or max(65, 2 * self.lmax + 3)
        nlon = nlon or 2 * nlat
        vals = ducc0.sht.synthesis_2d(alm=self.coeffs[i][None], spin=0, lmax=self.lmax, geometry="CC", ntheta=nlat,
                                      nphi=nlon, nthreads=_nthreads())[0]
        return np.pi * np.arange(nlat) / (nlat - 1), 2 * np.pi * np.arange(nlon) / nlon, vals

    def mass(self, i: int) -> float:
        """∫ ρ_{t_i} = ``ρ_00 sqrt(|S^{d-1}|)`` (SPEC §5.6)."""
        return float(np.real(self.coeffs[i][0]) * math.sqrt(sphere_area(self.d)))

    def min_density(self, i: int) -> float:
        """Minimum of ρ_{t_i} over the 3/2-rule quadrature grid."""
        return float(self.grid.synth(self.coeffs[i]).min())

    def negative_mass(self, i: int) -> float:
        """∫ max(-ρ_{t_i}, 0), by quadrature on the 3/2-rule grid."""
        g = self.grid
        return float(np.einsum("i,i->", g.weights, np.maximum(-g.synth(self.coeffs[i]), 0.0)))

    def tail_energy(self, i: int) -> float:
        """Spectral energy in the top quarter of degrees (l > 3 lmax / 4) relative to the total.

        ``Σ_{l > 3L/4} Σ_m |ρ_lm|² / Σ_l Σ_m |ρ_lm|²``  (real-basis energies).
        """
        return _tail(self.coeffs[i], self.grid.ell, self.grid.mult, self.lmax)

    def spectrum(self, i: int) -> np.ndarray:
        """Degree energies ``E_l = Σ_m |ρ_lm|²``, shape (lmax + 1,)."""
        g = self.grid
        return np.bincount(g.ell, weights=g.mult * np.abs(self.coeffs[i]) ** 2, minlength=self.lmax + 1)

    def velocity(self, i: int, x) -> np.ndarray:
        """Attention velocity v[ρ_{t_i}](x) = P_x A(x; ρ_{t_i}) at points x (N, d) -> (N, d) (SPEC §4, §9)."""
        if self.beta <= 0:
            raise ValueError("velocity needs beta > 0")
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        if self._vel is None:
            self._vel = _Velocity(self.d, self.lmax, self.beta, self.V)
        return self._vel.at_points(self.coeffs[i], x)[0]

    def attention_energy(self, i: int) -> float:
        """E_β^+(ρ_{t_i}) = (1/2β) ∫∫ e^{β<x,y>} ρ ρ = ``(1/2β) Σ_lm λ_l |ρ_lm|²`` (SPEC §5.7)."""
        if self.beta <= 0:
            raise ValueError("attention_energy needs beta > 0")
        g = self.grid
        lam = attention_eigenvalues(self.d, self.beta, self.lmax)[g.ell]
        return float(math.exp(self.beta) / (2 * self.beta) * np.sum(lam * g.mult * np.abs(self.coeffs[i]) ** 2))

    def quadrature_cloud(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Weighted point cloud (x_q, w_q ρ_{t_i}(x_q)) representing ρ_{t_i} (for Wasserstein distances).

        The weights sum to the mass; they are negative where the truncated density is.
        """
        g = self.grid
        return g.points.copy(), g.weights * g.synth(self.coeffs[i])

    def save(self, path) -> str:
        """Write times, coefficients and JSON metadata to an ``.npz`` file; returns the path."""
        path = str(path)
        meta = dict(self.meta)
        meta.update(d=self.d, lmax=self.lmax, beta=self.beta, V=None if self.V is None else self.V.tolist())
        np.savez(path, times=self.times, coeffs=self.coeffs, meta=np.array(json.dumps(meta, default=_json_default)))
        return path if path.endswith(".npz") else path + ".npz"

    @classmethod
    def load(cls, path) -> "SPDESolution":
        """Read a file written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            return cls(meta["d"], meta["lmax"], f["times"], f["coeffs"], meta["beta"], meta.get("V"), meta)


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return repr(o)


def _tail(c: np.ndarray, ell: np.ndarray, mult: np.ndarray, lmax: int) -> float:
    e = mult * np.abs(c) ** 2
    tot = e.sum()
    if not np.isfinite(tot):
        return math.inf
    return float(e[ell > (3 * lmax) // 4].sum() / tot) if tot > 0 else 0.0


# ----------------------------------------------------------------------------------------
# Step-size condition of scheme (a)
# ----------------------------------------------------------------------------------------


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


def _max_stable_dt(d, lmax, dt, t_final, kappa1, vmax) -> float:
    lo, hi = 0.0, dt
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if exponential_euler_growth(d, lmax, mid, t_final, kappa1, vmax) <= CFL_GROWTH:
            lo = mid
        else:
            hi = mid
    return lo


# ----------------------------------------------------------------------------------------
# Initial data
# ----------------------------------------------------------------------------------------


def _initial_coefficients(rho0, d: int, lmax: int, grid: _Grid, neg_tol: float) -> tuple[np.ndarray, dict]:
    if isinstance(rho0, dict):
        rho0 = initial_condition_from_dict(rho0, d)
    if isinstance(rho0, str):
        if rho0.lower() != "uniform":
            raise ValueError(f"rho0 = {rho0!r}: the only named initial condition is 'uniform'; "
                             "use VonMisesFisher(mu, kappa) or Mixture([...], weights) for the others")
        rho0 = Uniform(d)
    if isinstance(rho0, _InitialCondition):
        if rho0.d != d:
            raise ValueError(f"rho0 lives on S^{rho0.d - 1} but the solver runs on S^{d - 1} (d = {d})")
        c = rho0.coefficients(lmax)
        desc = rho0.to_dict()
        vals = rho0.density(grid.points)
        if np.any(vals < 0):
            raise ValueError("rho0 must be non-negative")
    elif callable(rho0):
        vals = np.asarray(rho0(grid.points), dtype=np.float64)
        if vals.shape != (grid.Q,):
            raise ValueError(f"rho0(x) must return shape (N,) for points of shape (N, {d}), got {vals.shape}")
        if not np.all(np.isfinite(vals)):
            raise ValueError("rho0 returned NaN or infinite values")
        if np.any(vals < 0):
            raise ValueError(f"rho0 must be non-negative; its minimum on the quadrature grid is {vals.min():.3g}")
        c = grid.analysis(vals)
        desc = {"kind": "callable", "repr": repr(rho0)}
    else:
        arr = np.asarray(rho0)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.number):
            raise TypeError("rho0 must be 'uniform', an initial-condition object, a callable density or a 1-D "
                            "coefficient array")
        lin = _lmax_from_size(d, arr.size, arr.dtype)
        if lin is None:
            kind = "2 lmax + 1 real Fourier" if d == 2 else "(lmax+1)(lmax+2)/2 complex alm or (lmax+1)^2 real"
            raise ValueError(f"rho0 has {arr.size} coefficients, which is not a valid count of {kind} coefficients")
        if d == 3 and not np.iscomplexobj(arr):
            arr = real_to_alm(arr.astype(np.float64), lin)
        elif d == 3:
            arr = arr.astype(np.complex128)
        else:
            if np.iscomplexobj(arr):
                raise TypeError("S^1 coefficients must be real Fourier coefficients")
            arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("rho0 coefficients contain NaN or infinite values")
        c = _resize(arr, d, lin, lmax)
        desc = {"kind": "coefficients", "lmax": lin}
        vals = grid.synth(c)
        negm = float(np.einsum("i,i->", grid.weights, np.maximum(-vals, 0.0)))
        if negm > neg_tol:
            raise ValueError(f"rho0 must be non-negative: its negative part has mass {negm:.3g} > neg_tol = {neg_tol:g}")
    mass = float(np.real(c[0])) * math.sqrt(sphere_area(d))
    if abs(mass - 1.0) > 1e-6:
        raise ValueError(f"rho0 must be a probability density (∫ rho0 = 1), but its integral is {mass:.12g}; "
                         f"divide it by that value")
    return c, desc


def _noise_info(noise) -> dict:
    if noise is None:
        return {"type": None}
    info = {"type": type(noise).__name__, "d": getattr(noise, "d", None), "kappa1": float(noise.kappa1),
            "kept_fraction": float(getattr(noise, "kept_fraction", 1.0))}
    for name in ("lmax", "scale", "width", "t_max"):
        if hasattr(noise, name):
            info[name] = getattr(noise, name)
    seed = getattr(noise, "seed", None)
    if isinstance(seed, numbers.Integral):
        info["seed"] = int(seed)
    elif seed is not None:
        info["seed"] = repr(seed)
    src = getattr(noise, "source_kernel", None)
    if src is not None:
        info["kernel"] = repr(src)
    return info


# ----------------------------------------------------------------------------------------
# The solver
# ----------------------------------------------------------------------------------------


def solve_spde(
    rho0,
    noise,
    beta: float,
    lmax: int,
    dt: float,
    t_eval,
    *,
    scheme: str = "pushforward",
    attention: bool = True,
    noise_on: bool = True,
    V=None,
    filter: int | None = None,
    tail_tol: float = 1e-4,
    neg_tol: float = 1e-3,
    attention_tol: float = ATTENTION_TOL,
    noise_map: str = "projected",
    d: int | None = None,
    progress: bool = False,
) -> SPDESolution:
    """Solve the McKean–Vlasov SPDE of SPEC §4 on S^1 (d = 2) or S^2 (d = 3) for one noise path.

    dρ = [ -div_S(ρ v[ρ]) + ½ κ_σ(1) Δ_S ρ ] dt - div_S(ρ P_x dW),  v[ρ] = P_x A(x; ρ) with
    softmax attention (Q = K = I, value matrix V), discretised by the exponential Euler
    scheme (a) or the Lagrangian push-forward scheme (b) of SPEC §6 (see the module
    docstring for both formulas).

    Parameters
    ----------
    rho0 : str, dict, initial-condition object, callable or ndarray
        ``"uniform"``; a dict for :func:`initial_condition_from_dict` (e.g.
        ``{"kind": "vmf", "mu": [0, 0, 1], "kappa": 4.0}``); a :class:`Uniform`, :class:`VonMisesFisher` or :class:`Mixture`
        (exact coefficients); a callable density ``rho0(x)`` for points (N, d) -> (N,),
        projected on degree <= lmax by quadrature; or coefficients (S^2: complex alm of
        length (L+1)(L+2)/2 or real of length (L+1)², S^1: real Fourier of length 2L+1, any L;
        padded or truncated to ``lmax``). Must be non-negative and integrate to 1 (1e-6).
    noise : NoisePath, RotationNoise, any object with ``field(t0, t1)`` and ``kappa1``, or None
        The common noise; it fixes d. ``None`` means the deterministic equation (give ``d``).
    beta : float, >= 0
        Inverse temperature of the attention (> 0 when ``attention`` is on).
    lmax : int, >= 1
        Degree of the state. With attention it must be at least
        ``required_degree(d, beta, attention_tol)``.
    dt : float, > 0
        Time step h. The step times are n·h, so the noise increments are
        ``noise.field(n h, (n+1) h)``, exactly those of a particle run with the same step.
    t_eval : array_like
        Non-decreasing save times, each a multiple of ``dt`` (to 1e-9 relative).
    scheme : {"pushforward", "exponential"}
        (b) Lagrangian–spectral push-forward (default; no step-size condition, matches
        particles at fixed h) or (a) Eulerian Itô exponential Euler.
    attention, noise_on : bool
        Switch the attention drift / the noise off.
    V : ndarray (d, d), optional
        Value matrix; default identity. General V uses the ambient gradient of SPEC §4.
    filter : int, optional
        Order p (even, >= 2) of the exponential filter σ(l) = exp(-36 (l / lmax)^p)
        applied to the coefficients after every step (σ(0) = 1: mass is kept). Off by default.
    tail_tol : float
        Stop when the energy fraction in degrees l > 3 lmax / 4 exceeds this.
    neg_tol : float
        Stop when ∫ max(-ρ, 0) exceeds this.
    attention_tol : float
        Relative accuracy of the truncated attention convolution used to check lmax.
    noise_map : {"projected", "flow"}
        Scheme (b) only. "projected": T(x) = Π(x + h v + ΔW(x)), the particles' map.
        "flow" (RotationNoise only): T(x) = exp(ΔΩ) Π(x + h v), an exact rotation.
    d : {2, 3}, optional
        Needed when ``noise`` is None; must match ``noise.d`` otherwise.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    SPDESolution

    Raises
    ------
    ValueError, TypeError
        Bad input: see the message (negative or unnormalised ρ0, lmax too small for β,
        dt violating the step-size condition of scheme (a), mismatched dimensions, ...).
    SPDEResolutionError
        The run became unresolved; the partial solution is attached.

    Examples
    --------
    >>> from meanfield.noise import NoisePath
    >>> from meanfield.kernels import ActivationKernel
    >>> noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=0)
    >>> sol = solve_spde(VonMisesFisher([0, 0, 1], 4.0), noise, beta=1.0, lmax=16, dt=0.01,
    ...                  t_eval=[0.0, 0.05, 0.1])
    >>> sol.coeffs.shape
    (3, 153)
    """
    wall0 = _time.perf_counter()
    if scheme not in ("pushforward", "exponential"):
        raise ValueError(f"scheme must be 'pushforward' or 'exponential', got {scheme!r}")
    if noise_map not in ("projected", "flow"):
        raise ValueError(f"noise_map must be 'projected' or 'flow', got {noise_map!r}")
    attention, noise_on = bool(attention), bool(noise_on)
    if noise is None:
        noise_on = False
        if d is None:
            raise ValueError("d must be given when noise is None (deterministic equation)")
    if noise is not None:
        if not hasattr(noise, "field") or not hasattr(noise, "kappa1"):
            raise TypeError(f"noise must provide field(t0, t1) and kappa1, got {type(noise).__name__}")
        nd = getattr(noise, "d", None)
        if d is not None and nd is not None and int(d) != int(nd):
            raise ValueError(f"the noise lives in dimension d = {nd} but d = {d} was requested")
        d = nd if nd is not None else d
    d = as_int(d, "d", min_value=2)
    if d not in (2, 3):
        raise ValueError(f"the spectral SPDE solver supports d = 2 (S^1) and d = 3 (S^2), got d = {d}")
    beta = as_float(beta, "beta", min_value=0.0)
    lmax = as_int(lmax, "lmax", min_value=1, max_value=2048)
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True)
    tail_tol = as_float(tail_tol, "tail_tol", min_value=0.0)
    neg_tol = as_float(neg_tol, "neg_tol", min_value=0.0)
    t_eval = np.atleast_1d(np.asarray(t_eval, dtype=np.float64))
    if t_eval.ndim != 1 or t_eval.size == 0 or not np.all(np.isfinite(t_eval)) or np.any(t_eval < 0) \
            or np.any(np.diff(t_eval) < 0):
        raise ValueError("t_eval must be a non-empty, finite, non-decreasing 1-D array of times >= 0")
    steps = np.rint(t_eval / dt).astype(np.int64)
    bad = np.abs(steps * dt - t_eval) > 1e-9 * np.maximum(1.0, t_eval)
    if np.any(bad):
        raise ValueError(f"every t_eval must be a multiple of dt = {dt}; {t_eval[bad][0]} is not")
    n_total = int(steps[-1])
    t_final = n_total * dt
    if noise_on and t_final > getattr(noise, "t_max", math.inf) * (1 + 1e-12):
        raise ValueError(f"t_eval reaches {t_final} beyond the noise path's t_max = {noise.t_max}")
    if V is not None:
        V = as_matrix(V, "V", d)
    if attention:
        if beta <= 0:
            raise ValueError("beta must be > 0 when attention is on (use attention=False for pure noise)")
        need = required_degree(d, beta, attention_tol)
        if lmax < need:
            raise ValueError(f"lmax = {lmax} is too small for beta = {beta}: the attention convolution needs "
                             f"degree >= {need} for relative accuracy attention_tol = {attention_tol:g}; "
                             f"use lmax >= {need}")
    if noise_map == "flow":
        if scheme != "pushforward":
            raise ValueError("noise_map='flow' is a push-forward option; use scheme='pushforward'")
        if noise_on and not hasattr(noise, "omega"):
            raise ValueError("noise_map='flow' needs a rotation noise (an object with omega(t0, t1))")
    if filter is not None:
        filter = as_int(filter, "filter", min_value=2)
        if filter % 2:
            raise ValueError(f"filter order must be even, got {filter}")
    kappa1 = float(noise.kappa1) if noise_on else 0.0
    vmax = (1.0 if V is None else float(np.linalg.norm(V, 2))) if attention else 0.0
    if scheme == "exponential" and attention and n_total > 0:
        growth = exponential_euler_growth(d, lmax, dt, t_final, kappa1, vmax)
        if growth > CFL_GROWTH:
            hmax = _max_stable_dt(d, lmax, dt, t_final, kappa1, vmax)
            raise ValueError(
                f"dt = {dt} violates the step-size condition of the exponential Euler scheme: the frozen-coefficient "
                f"amplitude growth max_l [e^(-k l^2 h)(1 + k l^2 h + h^2 |v|^2 l^2)]^(n/2) over the run is {growth:.3g} "
                f"> {CFL_GROWTH} (|v| <= {vmax:g}, k = kappa_sigma(1) = {kappa1:g}, lmax = {lmax}, T = {t_final:g}); "
                f"use dt <= {hmax:.3g} or scheme='pushforward'")

    # 3/2 rule: ρ (degree lmax) times a field of degree max(lmax, l_σ + 1) projected on degree lmax
    # needs 2 n_θ - 1 >= 2 lmax + max(lmax, l_σ + 1)
    lsig = getattr(noise, "lmax", 0) if noise_on else 0
    grid = _Grid(d, lmax, nlat=max((3 * lmax) // 2 + 2, (2 * lmax + int(lsig) + 1) // 2 + 2))
    c, rho0_desc = _initial_coefficients(rho0, d, lmax, grid, neg_tol)
    vel = _Velocity(d, lmax, beta, V) if attention else None
    ell = grid.ell
    decay = np.exp(-0.5 * kappa1 * ell * (ell + d - 2.0) * dt) if (noise_on and scheme == "exponential") else None
    filt = np.exp(-36.0 * (ell / lmax) ** filter) if filter is not None else None

    meta = {
        "solver": "solve_spde", "scheme": scheme, "d": d, "lmax": lmax, "dt": dt, "beta": beta,
        "attention": attention, "noise_on": noise_on, "noise_map": noise_map, "filter": filter,
        "tail_tol": tail_tol, "neg_tol": neg_tol, "attention_tol": attention_tol,
        "V": None if V is None else V.tolist(), "rho0": rho0_desc, "noise": _noise_info(noise),
        "grid": {"nlat": getattr(grid, "nlat", None), "nphi": getattr(grid, "nphi", None),
                 "M": getattr(grid, "M", None), "Q": grid.Q},
        "version": _version(),
    }
    saved_t: list[float] = []
    saved_c: list[np.ndarray] = []

    def partial(extra=None) -> SPDESolution:
        ts, cs = list(saved_t), list(saved_c)
        if extra is not None:
            ts.append(extra[0])
            cs.append(extra[1])
        m = dict(meta, wall_time_s=_time.perf_counter() - wall0, completed=extra is None)
        shape = (0, c.size)
        arr = np.array(cs) if cs else np.zeros(shape, dtype=c.dtype)
        return SPDESolution(d, lmax, np.array(ts), arr, beta, V, m)

    def check(cn: np.ndarray, vals: np.ndarray | None, t: float) -> None:
        if not np.all(np.isfinite(cn)) or (vals is not None and not np.all(np.isfinite(vals))):
            raise SPDEResolutionError(
                f"the SPDE solution became non-finite at t = {t:.6g}; lower dt, raise lmax or enable the filter",
                partial((t, cn)), t, "nonfinite")
        tail = _tail(cn, ell, grid.mult, lmax)
        if tail > tail_tol:
            raise SPDEResolutionError(
                f"the SPDE solution is no longer resolved at t = {t:.6g}: the spectral energy in degrees "
                f"l > {(3 * lmax) // 4} is {tail:.3g} of the total (> tail_tol = {tail_tol:g}); "
                f"raise lmax (now {lmax}), lower dt (now {dt:g}) or enable the filter (filter=16)",
                partial((t, cn)), t, "tail")
        if vals is not None:
            negm = float(np.einsum("i,i->", grid.weights, np.maximum(-vals, 0.0)))
            if negm > neg_tol:
                raise SPDEResolutionError(
                    f"the SPDE solution is no longer resolved at t = {t:.6g}: its negative part has mass "
                    f"{negm:.3g} (> neg_tol = {neg_tol:g}, min rho = {vals.min():.3g}); raise lmax (now {lmax}), "
                    f"lower dt (now {dt:g}) or enable the filter (filter=16)",
                    partial((t, cn)), t, "negative")

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_total, desc=f"SPDE ({scheme})")
        except ImportError:  # pragma: no cover
            bar = None

    save_ptr = 0
    while save_ptr < steps.size and steps[save_ptr] == 0:
        saved_t.append(0.0)
        saved_c.append(c.copy())
        save_ptr += 1
    x = grid.points
    for n in range(n_total):
        t0, t1 = n * dt, (n + 1) * dt
        rho_g = grid.synth(c)
        check(c, rho_g, t0)
        v = vel.on_grid(grid, c)[0] if attention else None
        if scheme == "exponential":
            # frame components of h v + P_x ΔW, times ρ_n, then the spectral divergence
            flux = [dt * vk for vk in v] if attention else [np.zeros(grid.Q) for _ in grid.frame()]
            if noise_on:
                for fk, wk in zip(flux, grid.components(grid.noise_on_grid(noise, t0, t1))):
                    fk += wk
            c = c - grid.divergence([rho_g * fk for fk in flux])
            if decay is not None:
                c = c * decay
        else:
            y = x + grid.ambient([dt * vk for vk in v]) if attention else x.copy()
            if noise_on and noise_map == "projected":
                y += grid.noise_on_grid(noise, t0, t1)
            y /= np.linalg.norm(y, axis=1, keepdims=True)
            if noise_on and noise_map == "flow":
                from scipy.linalg import expm

                y = y @ expm(noise.omega(t0, t1)).T
            c00 = c[0]
            c = grid.adjoint_at(rho_g * grid.weights, y)
            # Σ_q ρ_n(x_q) w_q = sqrt(|S|) ρ_00 exactly (the grid integrates degree <= lmax exactly):
            # keep ρ_00 itself so that round-off in the quadrature sum does not accumulate
            c[0] = c00
        if filt is not None:
            c = c * filt
        if bar is not None:
            bar.update(1)
        while save_ptr < steps.size and steps[save_ptr] == n + 1:
            check(c, grid.synth(c), t1)
            saved_t.append(float(t_eval[save_ptr]))
            saved_c.append(c.copy())
            save_ptr += 1
    if bar is not None:
        bar.close()
    meta["wall_time_s"] = _time.perf_counter() - wall0
    meta["n_steps"] = n_total
    meta["completed"] = True
    return SPDESolution(d, lmax, np.array(saved_t), np.array(saved_c), beta, V, meta)
