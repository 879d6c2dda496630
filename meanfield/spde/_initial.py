"""Initial densities ρ0 of the SPDE: a public base class and the uniform, von Mises–Fisher and mixture densities."""

from __future__ import annotations

import abc
import math

import numpy as np
from scipy import special

from .. import _validate
from .._threads import one_blas_thread
from .._validate import as_float, as_int, as_real_array, as_rng, check_cost
from ..attention import attention_eigenvalues
from ..sphere import basis, harmonic_dimension, row_norms, sphere_area

__all__ = ["InitialCondition", "Uniform", "VonMisesFisher", "Mixture", "initial_condition_from_dict",
           "check_resolved", "required_degree_of", "minimum_lmax"]

#: Default relative L² accuracy asked of the truncated initial density (:meth:`InitialCondition.required_degree`).
RESOLUTION_TOL = 1e-6

#: Largest degree :meth:`InitialCondition.required_degree` searches.
_REQUIRED_DEGREE_CAP = 4096


def _sample_size(n, d: int) -> int:
    """``n`` of a ``sample`` call, checked: >= 1 and the samples (with their temporaries, about four
    (n, d) arrays) within the memory limit."""
    n = as_int(n, "n", min_value=1)
    check_cost("sample", seconds=0.0, memory=32.0 * n * d, parameter="n", value=n,
               largest=int(_validate.COST_LIMIT_BYTES // (32 * d)))
    return n


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
        x = as_real_array(x, "x", finite=False)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        return x

    def degree_energies(self, lmax: int) -> np.ndarray:
        """Energy ``E_l = Σ_m |ρ_lm|²`` of every degree l <= lmax (``Σ_l E_l = ∫ ρ²`` as lmax -> ∞)."""
        lmax = as_int(lmax, "lmax", min_value=0)
        b = basis(self.d, lmax)
        return np.bincount(b.ell, weights=b.energy(self.coefficients(lmax)), minlength=lmax + 1)

    def required_degree(self, tol: float = RESOLUTION_TOL) -> int:
        """Smallest degree L at which the truncation ρ_L of ρ0 is accurate to ``tol`` in relative L² norm.

        ``||ρ - ρ_L|| <= tol ||ρ||``, i.e. ``Σ_{l>L} E_l <= tol² Σ_l E_l``. The generic
        version doubles the degree until the energies have decayed (up to 4096); subclasses
        with closed-form energies override :meth:`degree_energies`.

        Raises
        ------
        ValueError
            ``tol`` is not in (0, 1), or ρ0 is not resolved below degree 4096.

        Examples
        --------
        >>> VonMisesFisher([0, 0, 1], 500.0).required_degree(1e-6)
        117
        """
        tol = as_float(tol, "tol", min_value=0.0, max_value=1.0, strict_min=True)
        L = 16
        while True:
            e = self.degree_energies(L)
            if not np.isfinite(e.sum()) or e.sum() <= 0:
                raise ValueError(f"{self!r} has energies that are not finite and positive")
            need = _required_from_energies(e, tol)
            if need is not None:
                return need
            if L >= _REQUIRED_DEGREE_CAP:
                raise ValueError(f"{self!r} is not resolved to tol = {tol:g} below degree {_REQUIRED_DEGREE_CAP}")
            L = min(2 * L, _REQUIRED_DEGREE_CAP)


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
        self.d = as_int(d, "d", min_value=2)

    def __repr__(self) -> str:
        return f"Uniform(d={self.d})"

    def density(self, x) -> np.ndarray:
        """ρ(x) = ``1/|S^{d-1}|``, points (N, d) -> values (N,)."""
        x = self._check_x(x)
        return np.full(x.shape[0], 1.0 / sphere_area(self.d))

    def sample(self, n: int, seed=None) -> np.ndarray:
        """n iid uniform points, shape (n, d) (normalised Gaussians)."""
        n = _sample_size(n, self.d)
        z = as_rng(seed).standard_normal((n, self.d))
        return z / row_norms(z)[:, None]

    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact coefficients: only ρ_00 = ``1/sqrt(|S^{d-1}|)`` is non-zero."""
        lmax = as_int(lmax, "lmax", min_value=0)
        out = basis(self.d, lmax).zeros()
        out[0] = 1.0 / math.sqrt(sphere_area(self.d))
        return out

    def required_degree(self, tol: float = RESOLUTION_TOL) -> int:
        """0: the uniform density is its degree-0 coefficient."""
        as_float(tol, "tol", min_value=0.0, max_value=1.0, strict_min=True)
        return 0

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "uniform", "d": self.d}


class VonMisesFisher(InitialCondition):
    """Von Mises–Fisher density ρ(x) = C_d(κ) exp(κ <μ, x>) on S^{d-1}, any d >= 2.

    C_d(κ) = κ^{d/2-1} / ((2π)^{d/2} I_{d/2-1}(κ)) (S^2: κ / (4π sinh κ); S^1: 1/(2π I_0(κ))),
    evaluated with exponentially scaled Bessel functions so that it never overflows.
    Its harmonic coefficients are exact by Funk–Hecke:
    ρ_lm = C_d(κ) λ_l(κ) conj(Y_lm(μ)) with λ_l the eigenvalues of e^{κ<x,y>} (theory §4)
    (available in the dimensions with a registered harmonic basis).

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
        mu = as_real_array(mu, "mu", finite=False).ravel()
        if mu.size < 2 or not np.all(np.isfinite(mu)) or np.linalg.norm(mu) == 0:
            raise ValueError(f"mu must be a finite non-zero vector of length d >= 2, got {mu}")
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
        # one BLAS thread: on a grid this product is large enough for OpenBLAS to thread it, and its
        # threads would then spin for about 0.1 s on the cores the solver's first transforms need
        with one_blas_thread():
            cos = x @ self.mu
        return np.exp(self._log_scaled_const + self.kappa * (cos - 1.0))

    def sample(self, n: int, seed=None) -> np.ndarray:
        """n iid samples, shape (n, d): Wood's exact inversion on S^2, von Mises angles on S^1,
        Wood's rejection sampler of <μ, x> for d >= 4 (Wood 1994, acceptance >= 0.5 for every κ)."""
        n = _sample_size(n, self.d)
        rng = as_rng(seed)
        k = self.kappa
        if self.d == 2:
            theta0 = math.atan2(self.mu[1], self.mu[0])
            th = rng.vonmises(theta0, k, size=n) if k > 0 else rng.uniform(0, 2 * np.pi, n)
            return np.stack([np.cos(th), np.sin(th)], axis=1)
        if self.d > 3:
            return self._sample_wood(n, rng)
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

    def _sample_wood(self, n: int, rng) -> np.ndarray:
        """Wood's algorithm on S^{d-1}: w = <μ, x> by rejection from a Beta proposal, then a uniform tangent direction."""
        from ..sphere import oriented_frame

        k, p = self.kappa, self.d
        if k > 0:
            b = (p - 1) / (2 * k + math.sqrt(4 * k * k + (p - 1) ** 2))  # = (-2κ + sqrt(4κ² + (p-1)²)) / (p-1), stably
            x0 = (1 - b) / (1 + b)
            c = k * x0 + (p - 1) * math.log(1 - x0 * x0)
        w = np.empty(0)
        while w.size < n:
            m = 2 * (n - w.size) + 16
            z = rng.beta((p - 1) / 2, (p - 1) / 2, size=m)
            if k == 0:
                w = np.concatenate([w, 1.0 - 2.0 * z])
                continue
            cand = (1 - (1 + b) * z) / (1 - (1 - b) * z)
            u = rng.uniform(size=m)
            ok = k * cand + (p - 1) * np.log(1 - x0 * cand) - c >= np.log(u)
            w = np.concatenate([w, cand[ok]])
        w = np.clip(w[:n], -1.0, 1.0)
        g = rng.standard_normal((n, p - 1))
        g /= row_norms(g)[:, None]
        E = oriented_frame(self.mu[None])[0]  # (d, d-1), orthonormal complement of μ
        return w[:, None] * self.mu + np.sqrt(1.0 - w**2)[:, None] * (g @ E.T)

    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact coefficients up to degree lmax (complex alm on S^2, real Fourier on S^1)."""
        lmax = as_int(lmax, "lmax", min_value=0)
        c = math.exp(self._log_scaled_const)
        lam = attention_eigenvalues(self.d, self.kappa, lmax)  # e^{-κ} λ_l(κ)
        b = basis(self.d, lmax)
        return c * lam[b.ell] * b.dirac(self.mu[None])[0]

    def degree_energies(self, lmax: int) -> np.ndarray:
        """Closed form ``E_l = C_d(κ)² λ_l(κ)² Z_l(1)`` (addition theorem: ``Σ_m |Y_lm(μ)|² = Z_l(1)``)."""
        lmax = as_int(lmax, "lmax", min_value=0)
        c = math.exp(self._log_scaled_const)
        lam = attention_eigenvalues(self.d, self.kappa, lmax)
        return (c * lam) ** 2 * harmonic_dimension(self.d, lmax) / sphere_area(self.d)

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
        w = np.full(len(comps), 1.0 / len(comps)) if weights is None else as_real_array(weights, "weights", finite=False)
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
        n = _sample_size(n, self.d)
        rng = as_rng(seed)
        counts = rng.multinomial(n, self.weights)
        parts = [c.sample(int(k), rng) for c, k in zip(self.components, counts) if k > 0]
        x = np.concatenate(parts, axis=0)
        return x[rng.permutation(n)]

    def coefficients(self, lmax: int) -> np.ndarray:
        """Exact coefficients Σ_k w_k (ρ_k)_lm up to degree lmax."""
        return sum(w * c.coefficients(lmax) for w, c in zip(self.weights, self.components))

    def required_degree(self, tol: float = RESOLUTION_TOL) -> int:
        """Largest required degree of the components with non-zero weight.

        Each component k is then truncated to ``tol ||ρ_k||``, so the mixture to
        ``tol Σ_k w_k ||ρ_k||``.
        """
        tol = as_float(tol, "tol", min_value=0.0, max_value=1.0, strict_min=True)
        return max(c.required_degree(tol) for w, c in zip(self.weights, self.components) if w > 0)

    def to_dict(self) -> dict:
        """Plain-dict description (for metadata and :func:`initial_condition_from_dict`)."""
        return {"kind": "mixture", "weights": self.weights.tolist(), "components": [c.to_dict() for c in self.components]}


_DICT_KEYS = {
    "uniform": ({"kind"}, {"d"}),
    "vmf": ({"kind", "kappa"}, {"mu"}),
    "mixture": ({"kind", "components"}, {"weights"}),
}


def initial_condition_from_dict(spec: dict, d: int) -> InitialCondition:
    """Build an initial condition from a plain dict (used by the CLI / TOML configs).

    ``{"kind": "uniform"}``, ``{"kind": "vmf", "mu": [...], "kappa": k}`` (``kappa`` is
    required, ``mu`` defaults to the last axis), ``{"kind": "mixture", "weights": [...],
    "components": [dict, ...]}`` (``weights`` default to equal). Missing required keys and
    unknown keys raise, naming them.

    Examples
    --------
    >>> initial_condition_from_dict({"kind": "vmf", "kappa": 2.0}, 3)
    VonMisesFisher(mu=[0.0, 0.0, 1.0], kappa=2.0)
    """
    d = as_int(d, "d", min_value=2)
    if not isinstance(spec, dict):
        raise TypeError(f"an initial condition spec must be a dict, got {type(spec).__name__}")
    if "kind" not in spec:
        raise ValueError(f"initial condition spec {spec!r} has no 'kind'; use 'uniform', 'vmf' or 'mixture'")
    if not isinstance(spec["kind"], str):
        raise TypeError(f"initial condition 'kind' must be a string, got {spec['kind']!r}")
    kind = spec["kind"].lower()
    if kind not in _DICT_KEYS:
        raise ValueError(f"unknown initial condition kind {spec['kind']!r}; use 'uniform', 'vmf' or 'mixture'")
    required, optional = _DICT_KEYS[kind]
    missing = sorted(required - spec.keys())
    if missing:
        raise ValueError(f"a {kind!r} initial condition needs the key(s) {', '.join(map(repr, missing))}; got "
                         f"{spec!r}")
    unknown = sorted(set(map(str, spec.keys())) - required - optional)
    if unknown:
        allowed = ", ".join(map(repr, sorted(required | optional)))
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))} in a {kind!r} initial condition; "
                         f"allowed: {allowed}")
    if kind == "uniform":
        if "d" in spec and as_int(spec["d"], "uniform initial condition 'd'", min_value=2) != d:
            raise ValueError(f"the uniform initial condition has d = {spec['d']} but the solver runs with d = {d}")
        return Uniform(d)
    if kind == "vmf":
        mu = spec.get("mu", [0.0] * (d - 1) + [1.0])
        mu = as_real_array(mu, "vmf 'mu'")
        if mu.shape != (d,):
            raise ValueError(f"vmf 'mu' must have length d = {d}, got {spec.get('mu')!r}")
        return VonMisesFisher(mu, as_float(spec["kappa"], "vmf 'kappa'", min_value=0.0))
    comps = spec["components"]
    if not isinstance(comps, (list, tuple)) or not comps:
        raise ValueError(f"mixture 'components' must be a non-empty list of dicts, got {comps!r}")
    return Mixture([initial_condition_from_dict(c, d) for c in comps], spec.get("weights"))


#: Largest degree at which :func:`required_degree_of` analyses a callable density.
CALLABLE_DEGREE_CAP = 512


def _required_from_energies(e: np.ndarray, tol: float) -> int | None:
    """Smallest L with Σ_{l>L} E_l <= tol² Σ E_l, if the top quarter of the degrees is already below it."""
    tail = np.cumsum(e[::-1])[::-1]
    total = tail[0]
    if not np.isfinite(total) or total <= 0:
        return None
    ok = np.nonzero(tail[1:] <= tol**2 * total)[0]
    L = e.size - 1
    return int(ok[0]) if ok.size and ok[0] + 1 <= (3 * L) // 4 else None


def required_degree_of(rho0, d: int, tol: float = RESOLUTION_TOL, *, start: int = 16) -> int | None:
    """Degree at which ρ0 is resolved to ``tol`` (relative L²), for an initial condition or a callable density.

    An :class:`InitialCondition` answers with :meth:`InitialCondition.required_degree`. A
    callable ``rho0(x)`` (points (N, d) -> (N,)) is projected by quadrature on degrees
    ``start``, ``2 start``, ... up to :data:`CALLABLE_DEGREE_CAP` until its degree energies
    have decayed; returns None if it is not resolved by then.

    Examples
    --------
    >>> v = VonMisesFisher([0, 0, 1], 500.0)
    >>> required_degree_of(v.density, 3) == v.required_degree()
    True
    """
    tol = as_float(tol, "tol", min_value=0.0, max_value=1.0, strict_min=True)
    if isinstance(rho0, InitialCondition):
        try:
            return rho0.required_degree(tol)
        except ValueError:
            return None
    if not callable(rho0):
        raise TypeError(f"rho0 must be an InitialCondition or a callable density, got {type(rho0).__name__}")
    L = max(4, as_int(start, "start", min_value=1))
    while True:
        b = basis(d, L)
        g = b.grid()
        vals = np.asarray(rho0(g.points), dtype=np.float64)
        if vals.shape != (g.Q,) or not np.all(np.isfinite(vals)):
            return None
        c = g.analysis(vals)
        need = _required_from_energies(np.bincount(b.ell, weights=b.energy(c), minlength=L + 1), tol)
        if need is not None:
            return need
        if L >= CALLABLE_DEGREE_CAP:
            return None
        L = min(2 * L, CALLABLE_DEGREE_CAP)


def _negative_mass(rho0, d: int, L: int) -> float:
    """∫ max(-ρ_L, 0) of the degree-L truncation (exact coefficients, or quadrature for a callable)."""
    b = basis(d, L)
    g = b.grid()
    if isinstance(rho0, InitialCondition):
        c = rho0.coefficients(L)
    else:
        c = g.analysis(np.asarray(rho0(g.points), dtype=np.float64))
    return float(np.einsum("i,i->", g.weights, np.maximum(-g.synth(c), 0.0)))


def minimum_lmax(rho0, tail_tol: float, *, neg_tol: float | None = None, d: int | None = None) -> int | None:
    """Smallest lmax at which the truncated ρ0 passes the solver's checks of resolution.

    The spectral-tail check (energy beyond degree 3 lmax / 4 at most ``tail_tol``) needs
    lmax >= ``ceil(4 N / 3)`` with ``N = required_degree(sqrt(tail_tol))``; with ``neg_tol``
    the degree is then raised until the negative part ``∫ max(-ρ_L, 0)`` of the truncation
    is at most ``neg_tol`` too (searched up to twice the tail degree). None if ρ0 (a
    callable) is not resolved below :data:`CALLABLE_DEGREE_CAP` or the negative part does
    not fall below ``neg_tol`` in that range.

    Examples
    --------
    >>> minimum_lmax(VonMisesFisher([0, 0, 1], 500.0), 1e-4)
    90
    >>> minimum_lmax(VonMisesFisher([0, 0, 1], 500.0), 1e-4, neg_tol=1e-3)
    92
    """
    tail_tol = as_float(tail_tol, "tail_tol", min_value=0.0, max_value=1.0, strict_min=True)
    if isinstance(rho0, InitialCondition):
        d = rho0.d
    elif d is None:
        raise TypeError("minimum_lmax needs d for a callable rho0")
    need = required_degree_of(rho0, d, math.sqrt(tail_tol))
    if need is None:
        return None
    L = max(1, -(-4 * need // 3))
    if neg_tol is None:
        return L
    neg_tol = as_float(neg_tol, "neg_tol", min_value=0.0)
    for candidate in range(L, 2 * L + 17):
        if _negative_mass(rho0, d, candidate) <= neg_tol:
            return candidate
    return None


def check_resolved(rho0, lmax: int, tol: float = RESOLUTION_TOL, *, d: int | None = None,
                   tail_tol: float | None = None, neg_tol: float | None = None) -> int:
    """Raise if degree ``lmax`` under-resolves ρ0; returns the smallest degree accepted.

    ``rho0`` is an :class:`InitialCondition`, or a callable density together with ``d``.
    Without ``tail_tol`` the criterion is a relative L² truncation error of at most ``tol``
    (lmax >= ``required_degree(tol)``); with ``tail_tol`` (and optionally ``neg_tol``) it is
    the solver's own checks of resolution (lmax >= :func:`minimum_lmax`). Call it when a
    truncated ρ0 fails a mass or sign check, or before a run: a sharp density (a von
    Mises–Fisher of large κ at a low degree) has a truncation with negative values and,
    projected by quadrature, the wrong mass, and the remedy is a larger lmax, which the
    message gives. If the degree cannot be determined, the message says so.

    Examples
    --------
    >>> check_resolved(VonMisesFisher([0, 0, 1], 2.0), 32)
    9
    >>> check_resolved(VonMisesFisher([0, 0, 1], 500.0), 16)
    Traceback (most recent call last):
    ...
    ValueError: rho0 = VonMisesFisher(mu=[0.0, 0.0, 1.0], kappa=500.0) is under-resolved at lmax = 16: its harmonic coefficients fall below tol = 1e-06 (relative L2 error) only from degree 117; use lmax >= 117
    >>> check_resolved(VonMisesFisher([0, 0, 1], 500.0), 16, tail_tol=1e-4, neg_tol=1e-3)
    Traceback (most recent call last):
    ...
    ValueError: rho0 = VonMisesFisher(mu=[0.0, 0.0, 1.0], kappa=500.0) is under-resolved at lmax = 16: its truncation passes the checks of resolution (spectral tail <= 0.0001, negative part <= 0.001) only from lmax = 92; use lmax >= 92
    """
    lmax = as_int(lmax, "lmax", min_value=0)
    if isinstance(rho0, InitialCondition):
        d = rho0.d
    elif d is None:
        raise TypeError("check_resolved needs d for a callable rho0")
    label = repr(rho0) if isinstance(rho0, InitialCondition) else "the callable density"
    if tail_tol is not None:
        need = minimum_lmax(rho0, tail_tol, neg_tol=neg_tol, d=d)
        crit = f"spectral tail <= {tail_tol:g}" + ("" if neg_tol is None else f", negative part <= {neg_tol:g}")
        if need is not None and lmax < need:
            raise ValueError(f"rho0 = {label} is under-resolved at lmax = {lmax}: its truncation passes the checks of "
                             f"resolution ({crit}) only from lmax = {need}; use lmax >= {need}")
    else:
        need = required_degree_of(rho0, d, tol, start=max(16, lmax))
        if need is not None and lmax < need:
            raise ValueError(f"rho0 = {label} is under-resolved at lmax = {lmax}: its harmonic coefficients fall "
                             f"below tol = {tol:g} (relative L2 error) only from degree {need}; use lmax >= {need}")
    if need is None:
        raise ValueError(f"rho0 = {label} is under-resolved at lmax = {lmax} and no degree up to "
                         f"{max(CALLABLE_DEGREE_CAP, 2 * lmax)} resolves it")
    return need


def as_initial_condition(rho0, d: int):
    """Normalise a ``rho0`` argument: a dict or ``"uniform"`` becomes an :class:`InitialCondition` of S^{d-1}
    (checked against d); an InitialCondition is checked; anything else (a callable density, an
    array of coefficients) is returned unchanged for the caller to interpret."""
    if isinstance(rho0, dict):
        rho0 = initial_condition_from_dict(rho0, d)
    if isinstance(rho0, str):
        if rho0.lower() != "uniform":
            raise ValueError(f"rho0 = {rho0!r}: the only named initial condition is 'uniform'; "
                             "use VonMisesFisher(mu, kappa) or Mixture([...], weights) for the others")
        rho0 = Uniform(d)
    if isinstance(rho0, InitialCondition) and rho0.d != d:
        raise ValueError(f"rho0 lives on S^{rho0.d - 1} but the solver runs on S^{d - 1} (d = {d})")
    return rho0
