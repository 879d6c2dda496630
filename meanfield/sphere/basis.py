"""Harmonic bases on S^{d-1}: the interface every spectral solver asks instead of branching on d.

A :class:`Basis` owns the degree ``lmax``, the layout of the coefficient (state) vector —
its degrees, energy multiplicities, resizing and the conversion to the real orthonormal
basis — the transforms at arbitrary points (synthesis, adjoint, gradient) and its
quadrature :class:`Grid` (synthesis/analysis, gradient/divergence, tangent frame).
:func:`basis` returns the basis of a dimension from a registry, so a new sphere is a new
file that calls :func:`register_basis` (``and_above=True`` for a family serving every larger d).

State layouts
-------------
* S^1 (d = 2), :class:`~meanfield.sphere.CircleBasis`: real Fourier coefficients
  ``[1/sqrt(2π), cos θ/sqrt(π), sin θ/sqrt(π), cos 2θ/sqrt(π), ...]``, degree k at indices
  ``2k-1, 2k``; the state is the real vector itself.
* S^2 (d = 3), :class:`~meanfield.sphere.S2Basis`: ducc0 complex alm in healpy packing
  (ρ = Σ a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm); the real basis orders (l, m) as ``l² + l + m``.
* S^{d-1}, d >= 4, :class:`~meanfield.sphere.HypersphereBasis`: real coefficients of the
  Gegenbauer-product harmonics, degree-major in the order of
  :func:`~meanfield.sphere.chain_labels`; the state is the real vector itself.
"""

from __future__ import annotations

import abc
import functools
import math

import numpy as np

from .._validate import as_int
from ._geometry import sphere_area
from ._polynomial import HomogeneousForm

__all__ = ["Basis", "Grid", "basis", "check_dimension", "has_basis", "register_basis", "supported_dimensions"]

#: Most harmonics a basis evaluates through its homogeneous-polynomial form (beyond, building
#: the form's conversion costs more than a run saves).
POLYNOMIAL_MAX_FUNCTIONS = 1024

_REGISTRY: dict[int, type] = {}
#: Families: (first d, class with ``for_dimension(d)``) serving every d >= first d not in _REGISTRY.
_FAMILIES: list[tuple[int, type]] = []


def work_array(out: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``out`` itself if it is a C-contiguous float64 array of ``shape`` (a transform can write into it
    without a copy); ValueError naming the expected layout otherwise."""
    if isinstance(out, np.ndarray):
        if (out.shape == tuple(shape) and out.dtype == np.float64 and out.flags.c_contiguous
                and out.flags.writeable):
            return out
        got = f"an array of shape {out.shape}, dtype {out.dtype}" + ("" if out.flags.c_contiguous else ", not C-contiguous")
    else:
        got = type(out).__name__
    raise ValueError(f"out must be a writeable C-contiguous float64 array of shape {tuple(shape)}, got {got}")


def deliver(vals: np.ndarray, out: np.ndarray | None, Q: int) -> np.ndarray:
    """``vals`` itself, or copied into the work array ``out`` (Q,) and ``out`` returned: for grids whose
    transforms cannot write into a given buffer."""
    if out is None:
        return vals
    work_array(out, (Q,))[...] = vals
    return out


def register_basis(d: int, *, and_above: bool = False):
    """Class decorator: make ``cls`` the basis of S^{d-1} returned by :func:`basis`.

    With ``and_above``, ``cls`` serves every dimension >= d that has no basis of its own; it
    must then provide the classmethod ``for_dimension(d)`` returning the class of one
    dimension (its ``d`` set), e.g. :class:`~meanfield.sphere.HypersphereBasis`.
    """

    def deco(cls):
        if and_above:
            _FAMILIES.append((d, cls))
            _FAMILIES.sort(key=lambda item: -item[0])
            _class_of.cache_clear()
        else:
            cls.d = d
            _REGISTRY[d] = cls
        return cls

    return deco


@functools.lru_cache(maxsize=None)
def _class_of(d: int) -> type | None:
    if d in _REGISTRY:
        return _REGISTRY[d]
    for first, fam in _FAMILIES:
        if d >= first:
            return fam.for_dimension(d)
    return None


def supported_dimensions() -> tuple[int, ...]:
    """Ambient dimensions d with a basis class of their own, and the first d of each family.

    A family (``register_basis(d, and_above=True)``) serves every larger dimension too:
    with the shipped bases this is ``(2, 3, 4)`` and every d >= 2 has a basis (use
    :func:`has_basis` to ask about one d).
    """
    return tuple(sorted(set(_REGISTRY) | {first for first, _ in _FAMILIES}))


def has_basis(d) -> bool:
    """Whether S^{d-1} has a registered harmonic basis (an explicit one or a family's).

    Examples
    --------
    >>> has_basis(3), has_basis(7), has_basis(1)
    (True, True, False)
    """
    try:
        d = as_int(d, "d", min_value=2)
    except (TypeError, ValueError):
        return False
    return _class_of(d) is not None


def check_dimension(d, name: str = "d") -> int:
    """Validate an ambient dimension against the registered bases; returns it as an int."""
    d = as_int(d, name, min_value=2)
    if _class_of(d) is None:
        dims = ", ".join(f"{k} (S^{k - 1})" for k in sorted(_REGISTRY))
        fams = "".join(f", every d >= {first}" for first, _ in _FAMILIES)
        raise ValueError(f"{name} = {d}: spectral bases exist for d = {dims}{fams}")
    return d


@functools.lru_cache(maxsize=32)
def _cached(d: int, lmax: int) -> "Basis":
    return _class_of(d)(lmax)


def basis(d: int, lmax: int) -> "Basis":
    """The harmonic basis of degree <= ``lmax`` on S^{d-1} (cached; bases are immutable).

    Parameters
    ----------
    d : int, >= 2
        Ambient dimension: S^1 and S^2 have their fast bases, every d >= 4 the
        hyperspherical (Gegenbauer-product) basis.
    lmax : int, >= 0
        Largest degree; bounded by the basis' ``max_lmax`` (for d >= 4 it keeps the number of
        basis functions below about two million).

    Examples
    --------
    >>> b = basis(3, 2)
    >>> b.n_state, b.n_real, b.ell.tolist()
    (6, 9, [0, 1, 2, 1, 2, 2])
    >>> basis(5, 2).n_real      # 1 + 5 + 14 harmonics of degree 0, 1, 2 on S^4
    20
    """
    d = check_dimension(d)
    cls = _class_of(d)
    lmax = as_int(lmax, "lmax", min_value=0, max_value=cls.max_lmax)
    return _cached(d, lmax)


class Grid(abc.ABC):
    """Quadrature grid of a basis with the transforms the grid-based solvers need.

    Attributes
    ----------
    points : ndarray, shape (Q, d)
        Nodes, in the flattened layout of the grid transforms.
    weights : ndarray, shape (Q,)
        Quadrature weights (sum ``|S^{d-1}|``).
    Q : int
    """

    points: np.ndarray
    weights: np.ndarray

    @property
    def Q(self) -> int:
        return self.points.shape[0]

    @abc.abstractmethod
    def describe(self) -> dict:
        """Sizes of the grid for metadata (``Q`` and the per-axis node counts)."""

    @abc.abstractmethod
    def synth(self, c: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """Values on the grid (Q,) of the field with state coefficients c.

        ``out`` (Q,), C-contiguous float64: written and returned instead of a new array, so that a
        solver can keep one buffer over its steps instead of a fresh grid-sized array each step
        (the exponential scheme at lmax 256 took 270 minor page faults per step without it).
        """

    @abc.abstractmethod
    def analysis(self, f: np.ndarray) -> np.ndarray:
        """Quadrature projection of grid values (Q,) onto degree <= lmax (state layout)."""

    @abc.abstractmethod
    def frame(self) -> list[np.ndarray]:
        """Orthonormal tangent frame at the nodes, d - 1 arrays of shape (Q, d)."""

    def components(self, F: np.ndarray, *, radial: bool = False) -> list[np.ndarray]:
        """Frame components F·e_k of an ambient field F (Q, d); the normal part is dropped (= P_x F),
        or with ``radial`` appended as a last component F·x."""
        axes = [*self.frame(), self.points] if radial else self.frame()
        return [np.einsum("ij,ij->i", F, e) for e in axes]

    def ambient(self, comps: list[np.ndarray]) -> np.ndarray:
        """Ambient tangent vectors Σ_k comps_k e_k, shape (Q, d)."""
        frame = self.frame()
        out = comps[0][:, None] * frame[0]
        for ck, ek in zip(comps[1:], frame[1:]):
            out += ck[:, None] * ek
        return out

    def move(self, D: np.ndarray, *, cartesian: bool = False):
        """The nodes moved to Π(x_q (1 + r_q) + Σ_k D_kq e_k(x_q)), Π(z) = z / abs(z), r = D[-1].

        ``D`` has d rows: the d - 1 frame components of the displacement and its radial part r.
        Returns unit vectors (Q, d), or with ``cartesian=False`` whatever the basis' point
        transforms take where that is cheaper (S^2: the points' angles, without Cartesian vectors;
        a basis whose transforms read directions only: the vectors before Π).
        """
        y = self.ambient(D[:-1])
        y += (1.0 + D[-1])[:, None] * self.points
        if not cartesian and self.basis.directions_only:
            return y  # the point transforms read its angles, which Π does not change
        inv = np.einsum("ij,ij->i", y, y)
        np.sqrt(inv, out=inv)
        np.divide(1.0, inv, out=inv)
        y *= inv[:, None]
        return y

    @abc.abstractmethod
    def gradient(self, c: np.ndarray) -> list[np.ndarray]:
        """Frame components of the surface gradient ∇_S f on the grid."""

    @abc.abstractmethod
    def divergence(self, comps: list[np.ndarray], *, weighted: bool = False) -> np.ndarray:
        """State coefficients (degree <= lmax) of div_S F for F given by its frame components.

        ``comps`` is a sequence of d - 1 arrays (Q,) or one array (d - 1, Q); ``weighted=True``: the
        components are already multiplied by the quadrature weights (saves a pass when the caller
        forms a product with the weights anyway; a C-contiguous array is then transformed in place,
        without a copy, where the grid allows it).
        """

    def synth_grad(self, c: np.ndarray, lmax: int, *, grad: bool = True):
        """Values (Q,) and, with ``grad``, frame components of ∇_S f of the field with state coefficients c
        of the basis of degree ``lmax`` <= the grid's degree (None without ``grad``).

        A field of low degree costs less than a full-degree synthesis where the grid can exploit it.
        """
        cg = basis(self.basis.d, lmax).resize(c, self.basis.lmax)
        return self.synth(cg), (self.gradient(cg) if grad else None)

    @abc.abstractmethod
    def synth_real(self, coeffs: np.ndarray, lmax: int) -> np.ndarray | None:
        """Values (Q, k) of k fields given by real coefficients (k, n_real(lmax)), or None if the grid is too coarse."""

    def synth_grad_times(self, c: np.ndarray, lmax: int, coeffs: np.ndarray, lmax_f: int, alpha: float, *,
                         radial: bool = False, out: np.ndarray | None = None, f_over_weights: float | None = None):
        """f and the frame components of ∇_S f + α f F on the grid, for one scalar and one ambient field.

        f has state coefficients c of the basis of degree ``lmax``; F is the ambient field with real
        coefficients ``coeffs`` (d, n_real(lmax_f)). Returns ``(f, U)`` with f of shape (Q,) and U of
        shape (d - 1, Q), rows U_k = ∂_k f + α f F·e_k; with ``radial`` U has one more row,
        α f F·x. None if the grid cannot synthesise F (too coarse). Grids whose transforms go ring by
        ring form the product f F from the low-degree ring coefficients, which saves the full-size
        maps of F. ``out`` (1 + rows of U, Q), C-contiguous float64: f is written to ``out[0]`` and
        U to ``out[1:]``, which are returned (see :meth:`synth` for why). With ``f_over_weights = k``
        the first array is f / (k w) with w the quadrature weights (U is unchanged): a flux weighted
        for the adjoint transform, s w U / f, is then one division away (grids whose weights are
        constant on rings apply 1 / (k w) to the ring coefficients, at no cost on the grid).
        """
        vals = self.synth_real(coeffs, lmax_f)
        if vals is None:
            return None
        f, g = self.synth_grad(c, lmax)
        rows = self.components(vals, radial=radial)
        out = np.empty((1 + len(rows), self.Q)) if out is None else work_array(out, (1 + len(rows), self.Q))
        out[0] = f
        U = out[1:]
        af = alpha * f
        for k, r in enumerate(rows):
            np.multiply(af, r, out=U[k])
            if k < len(g):
                U[k] += g[k]
        if f_over_weights is not None:
            out[0] /= f_over_weights * self.weights
        return out[0], U

    def synth_real_frame(self, coeffs: np.ndarray, lmax: int) -> list[np.ndarray] | None:
        """Frame components of the ambient field (d components, real coefficients (d, n_real(lmax))),
        i.e. :meth:`components` of :meth:`synth_real`; None if the grid is too coarse."""
        vals = self.synth_real(coeffs, lmax)
        return None if vals is None else self.components(vals)


class Basis(abc.ABC):
    """Harmonic basis of degree <= ``lmax`` on S^{d-1}. Obtain one with :func:`basis`.

    Attributes
    ----------
    d : int
        Ambient dimension.
    lmax : int
    n_state : int
        Length of a state (coefficient) vector.
    state_dtype : numpy dtype
    ell, mult : ndarray, shape (n_state,)
        Degree and energy multiplicity of every state entry: ``∫ f² = Σ mult |c|²``.
    n_real : int
        Number of real orthonormal basis functions (``dim`` of the span).
    """

    d: int
    #: Largest degree accepted (beyond it the transforms and grids do not fit in memory/time).
    max_lmax: int = 4096
    state_dtype = np.float64
    #: Whether point transforms are fast (NUFFT) rather than direct basis matrices.
    fast_transforms = False
    #: Whether the point transforms read only the direction of x (its angles), so that a caller
    #: may pass unnormalised vectors and skip the projection onto the sphere.
    directions_only = False
    #: Seconds per coefficient and field of one evaluation at about a thousand points (the cost
    #: model of :func:`meanfield.noise.noise_path_cost`): ducc0 on S^2 measured 0.35–0.62 s at
    #: lmax = 1024 and 2.0–2.4 s at lmax = 2048 on a loaded 2-core machine, rounded up.
    eval_seconds_per_coeff: float = 3e-7
    #: Largest (points × real coefficients) for which evaluating with the explicit basis matrix
    #: beats the fast point transforms; bases without fast transforms always use the matrix.
    direct_max_entries: float = math.inf
    #: Largest degree whose fields are evaluated at points as homogeneous polynomials
    #: (:attr:`polynomial`) instead of by the basis' own point transforms; -1: never.
    polynomial_max_lmax: int = -1

    def __init__(self, lmax: int):
        self.lmax = int(lmax)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lmax={self.lmax})"

    # -- layout --------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def n_state(self) -> int: ...

    @property
    @abc.abstractmethod
    def n_real(self) -> int: ...

    @functools.cached_property
    def ell(self) -> np.ndarray:
        return self._layout()[0]

    @functools.cached_property
    def mult(self) -> np.ndarray:
        return self._layout()[1]

    @abc.abstractmethod
    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        """(degree, energy multiplicity) of every state entry."""

    @functools.cached_property
    def laplacian(self) -> np.ndarray:
        """Eigenvalue l(l + d - 2) of -Δ_S for every state entry, shape (n_state,)."""
        return self.ell * (self.ell + self.d - 2.0)

    @abc.abstractmethod
    def real_degrees(self) -> np.ndarray:
        """Degree of every real basis function, in the order of :meth:`real_basis`."""

    @abc.abstractmethod
    def labels(self) -> np.ndarray:
        """Degree and order ``(l, m)`` of every real basis function, shape (n_real, 2)."""

    @abc.abstractmethod
    def resize(self, c: np.ndarray, lmax: int) -> np.ndarray:
        """Truncate or zero-pad state coefficients of this basis to degree ``lmax``."""

    @classmethod
    @abc.abstractmethod
    def lmax_from_size(cls, size: int, dtype) -> int | None:
        """Degree of a coefficient vector of length ``size`` (state or real layout), or None."""

    @abc.abstractmethod
    def to_real(self, c: np.ndarray) -> np.ndarray:
        """State coefficients (..., n_state) -> real-basis coefficients (..., n_real)."""

    @abc.abstractmethod
    def from_real(self, b: np.ndarray) -> np.ndarray:
        """Real-basis coefficients (..., n_real) -> state coefficients (..., n_state)."""

    def zeros(self) -> np.ndarray:
        return np.zeros(self.n_state, dtype=self.state_dtype)

    def mass(self, c: np.ndarray) -> float:
        """∫ f = ``c_00 sqrt(|S^{d-1}|)``."""
        return float(np.real(c[0])) * math.sqrt(sphere_area(self.d))

    def energy(self, c: np.ndarray) -> np.ndarray:
        """Per-entry energies ``mult |c|²`` (their sum is ∫ f²)."""
        return self.mult * np.abs(c) ** 2

    # -- transforms at points ---------------------------------------------------------------
    @abc.abstractmethod
    def real_basis(self, x: np.ndarray) -> np.ndarray:
        """Real orthonormal basis functions at unit vectors x (N, d), shape (N, n_real) (direct)."""

    def prefers_direct(self, n: int) -> bool:
        """Whether n points are evaluated faster with :meth:`real_basis` than with the point transforms.

        True when the basis has no fast transforms or when ``n · n_real <=
        direct_max_entries``: the matrix costs about n · n_real products, the transforms a
        fixed planning cost that small point sets cannot amortise.

        Examples
        --------
        >>> from meanfield.sphere import basis
        >>> b = basis(3, 6)                       # 49 real harmonics on S^2
        >>> b.prefers_direct(256), b.prefers_direct(2048)
        (True, False)
        >>> basis(2, 6).prefers_direct(10**6)     # S^1 has no fast point transforms
        True
        """
        return not self.fast_transforms or n * self.n_real <= self.direct_max_entries

    @functools.cached_property
    def polynomial(self) -> HomogeneousForm | None:
        """The exact homogeneous-polynomial form of this basis' fields, or None where it is not used.

        Used by :meth:`synth_rows` (and so by the noise fields) for degrees up to
        ``polynomial_max_lmax`` and at most :data:`POLYNOMIAL_MAX_FUNCTIONS` harmonics, where
        it is faster than the point transforms (measured on S^1 and S^2 up to degree 6, on
        S^{d-1}, d >= 4, at every degree it is built for) and exact to round-off; None beyond, or
        where the conversion would not be accurate to 1e-12.

        Examples
        --------
        >>> from meanfield.sphere import basis
        >>> basis(3, 6).polynomial is not None, basis(3, 40).polynomial is None
        (True, True)
        """
        if self.lmax > self.polynomial_max_lmax or self.n_real > POLYNOMIAL_MAX_FUNCTIONS:
            return None
        return HomogeneousForm.from_basis(self)

    def uses_polynomial(self, n: int, grad: bool, epsilon: float | None = None) -> bool:
        """Whether :meth:`synth_rows` of n points takes :attr:`polynomial` (else the point transforms).

        ``grad`` and ``epsilon`` are those of the call: a basis whose transforms are cheaper
        for values alone at loose accuracy says so here (S^2).
        """
        return self.polynomial is not None

    def points(self, x: np.ndarray):
        """Point set for repeated point transforms at x (N, d): the basis may cache angles or frames in it."""
        return x

    @abc.abstractmethod
    def dirac(self, x: np.ndarray) -> np.ndarray:
        """State coefficients of the Dirac masses δ_{x_i} truncated at lmax, conj(Y(x_i)), shape (N, n_state) (direct)."""

    @abc.abstractmethod
    def evaluate(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        """Values (N,) at unit vectors x (N, d) of the field with state coefficients c.

        ``epsilon`` is the accuracy of a non-uniform transform where one is used (default
        ``NUFFT_EPS``); direct evaluations ignore it.
        """

    @abc.abstractmethod
    def adjoint(self, values: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        """Σ_q values_q conj(Y(x_q)) in the state layout: the weak form of a weighted point cloud.

        The degree-0 entry is formed by the exact sum, so the mass Σ_q values_q is kept
        to round-off whatever the transform accuracy.
        """

    @abc.abstractmethod
    def gradient_at(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        """Ambient tangent vectors ∇_S f(x), shape (N, d), of the field with state coefficients c."""

    @abc.abstractmethod
    def hessian_at(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None):
        """Value (N,), ambient surface gradient (N, d) and covariant Hessian as a tangent operator
        (N, d, d) of the field with state coefficients c at unit vectors x (N, d)."""

    def synth_rows(self, coeffs: np.ndarray, x: np.ndarray, *, grad: bool = True, epsilon: float | None = None):
        """Values (K, N) and, with ``grad``, ambient surface gradients (K, N, d) of K fields (K, n_state)."""
        if self.uses_polynomial(len(x), grad, epsilon):
            return self.polynomial.synth_rows(self.to_real(np.atleast_2d(coeffs)), x, grad=grad)
        pts = self.points(x)
        vals = np.stack([self.evaluate(c, pts, epsilon=epsilon) for c in coeffs])
        if not grad:
            return vals, None
        return vals, np.stack([self.gradient_at(c, pts, epsilon=epsilon) for c in coeffs])

    def adjoint_rows(self, values: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        """:meth:`adjoint` of each row of ``values`` (K, N): shape (K, n_state)."""
        pts = self.points(x)
        return np.stack([self.adjoint(v, pts, epsilon=epsilon) for v in values])

    # -- grids -------------------------------------------------------------------------
    @abc.abstractmethod
    def grid(self, n: int | None = None) -> Grid:
        """Quadrature grid obeying the 3/2 rule for degree lmax (``n`` overrides the node count per axis)."""

    @abc.abstractmethod
    def plot_values(self, c: np.ndarray, nlat: int | None = None, nlon: int | None = None) -> tuple:
        """Values on a regular grid for plotting (S^2: colat, lon, values; S^1: theta, values)."""
