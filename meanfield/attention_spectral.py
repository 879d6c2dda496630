"""Fast attention: O(N) spectral summation of the softmax attention velocity (theory §4, §7).

For Q = K = V = I the attention velocity of a (weighted) empirical measure
μ^N = Σ_j w_j δ_{x_j} (Σ_j w_j = 1) is the log-gradient of a zonal convolution,

    v(x) = P_x A(x; μ^N) = β^{-1} ∇_S log g(x),      g(x) = e^{-abs(β)} ∫ e^{β<x,y>} μ^N(dy),

and g is diagonal in spherical harmonics, g_lm = (e^{-abs(β)} λ_l) μ_lm (Funk–Hecke, see
:func:`meanfield.attention.attention_eigenvalues`). The spectral evaluator therefore

1. computes the empirical coefficients μ_lm = Σ_j w_j conj(Y_lm(x_j)) by ONE adjoint
   non-uniform transform at the tokens (S^2: ``ducc0.sht.experimental.adjoint_synthesis_general``;
   S^1: a type-1 NUFFT ``ducc0.nufft.nu2u``),
2. multiplies by e^{-abs(β)} λ_l, l <= L,
3. synthesises g and ∇_S g at the tokens (S^2: ``synthesis_general`` with spin 0 and with
   ``mode='DERIV1'``; S^1: one type-2 NUFFT ``ducc0.nufft.u2nu`` that returns g + i g'),

which costs O(N log(1/ε) + L² log L) instead of the O(N²) of the direct sum
(:func:`meanfield.attention.softmax_attention`). At low degree the same three transforms are
done exactly instead (no ε): on S^1 by an O(N L) power sum over e^{ikθ_j}, on S^2 by
:class:`meanfield.sphere.LowDegreeS2` (Chebyshev polynomials in z times powers of x_1 + i x_2,
O(N L²)), where those were measured faster (``s1_backend``, ``s2_backend``).

Accuracy (what ``tol`` means)
-----------------------------
``tol`` bounds the absolute error ``max_i |v_spec(x_i) - v(x_i)|``; since ``|A| <= 1`` this is an error
relative to the natural velocity scale 1. Write b = abs(β). Three sources contribute; the error model
is their sum (:attr:`SpectralAttention.predicted_error`), and truncation gets half of ``tol``
with the non-uniform transforms, the rest with the exact ones:

* truncation at degree L. With t_0(L) = Σ_{l>L} abs(e^{-b} λ_l) Z_l(1) and
  t_1(L) = Σ_{l>L} abs(e^{-b} λ_l) sqrt(l(l+d-2)) Z_l(1) (bounds of the tail of g and of ∇_S g,
  by the addition theorem and Cauchy–Schwarz) and a lower bound g(x_i) >= g_min at the
  tokens, the identity v - v_L = (∇r - β v r)/(β g_L) (r = g - g_L, ``|v| <= 1``) gives the
  rigorous bound

      ``|v(x_i) - v_L(x_i)| <= (t_1(L)/b + t_0(L)) / (g_min - t_0(L))``.

  For β > 0, g_min = max(min_i w_i, e^{-2β}): the token's own mass w_i replaces the floor e^{-2β}
  when larger (β > log(N)/2), which keeps the degree lower at large β. For β < 0
  a token's own mass enters g with the smallest kernel value e^{-2b}, so only the
  floor g_min = e^{-2b} holds (a tight cluster attains it). The evaluator picks the smallest L
  for which the bound is <= tol/2 for the non-uniform transforms; the exact transforms of the
  low degrees (below) make only round-off, so there it takes the smallest L for which the
  bound plus the other two terms of the model is <= tol (e.g. β = 0.1: L = 6 instead of 7 at
  tol = 1e-10, 4 instead of 5 at tol = 1e-6). Unlike :func:`meanfield.attention.required_degree` it bounds
  the gradient tail too. Since abs(λ_l(β)) = λ_l(abs(β)), the tails depend on b only.
* the non-uniform transforms, run at accuracy ε = clip(0.1 tol, 2e-13, 1e-2) (2e-13 is ducc0's
  double-precision floor). ducc0's error is not a pointwise guarantee; measured on uniform,
  clustered (vMF κ = 200–300) and isolated-token clouds (N = 2·10^3–2·10^4, β = 0.5–40) the
  transform-induced velocity error stayed below 0.07 ε on S^2 and 0.2 ε on S^1, and the error model used in
  :attr:`SpectralAttention.predicted_error` is 1 · ε. Requests with tol < 4e-13 therefore
  cannot be met and are reported as such. The exact low-degree transforms have no ε; their
  round-off in v measured 2e-15 (β = 0.1, L = 7, N = 2·10^4, against the direct sum), and the
  model keeps the same 1 · ε for them.
* β < 0 only: round-off. The coefficients of g have alternating signs and
  ``Σ_l |e^{-b} λ_l| Z_l(1) = 1`` while g can be as small as e^{-2b}, so the rounding error
  u = 2.2e-16 of the coefficients is amplified to about u e^{2b} in v (the FFT-free S^1 power
  sum, which has no transform error, shows the same floor). Measured at a degree far above the
  truncation bound on tight single clusters (the worst case), three clusters and uniform clouds
  on S^1 and S^2 (N = 3000, β = -0.5 to -10, ε = 2e-13 and 1e-10): the velocity error stayed
  below 0.25 u e^{2b} + 0.1 ε + 1e-14, so the transform part does not grow with b, and the
  model adds :data:`ROUNDOFF_FACTOR` · u e^{2b}. With the planned degree and ε, every case
  (tol = 1e-10 to 1e-3, N = 50 and 3000, both S^1 backends) met its tol, the worst at 0.22 tol. When this floor alone exceeds tol/2
  (b > ½ log(tol / 2u), e.g. b > 6.2 at tol = 1e-10, b > 10.8 at tol = 1e-6) the
  evaluator refuses with a ``ValueError`` that points to ``method="direct"`` (which is exact for
  either sign of β).

:func:`select_velocity` (``method="auto"``) uses this path for β <= 50 (:data:`AUTO_MAX_BETA`,
the range covered by the tests) and N above the measured crossover (:data:`AUTO_MIN_N`).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=(2000, 3)); x /= np.linalg.norm(x, axis=1, keepdims=True)
>>> sa = SpectralAttention(3, beta=2.0, tol=1e-10)
>>> from meanfield.attention import attention_velocity
>>> bool(np.abs(sa.velocity(x) - attention_velocity(x, 2.0)).max() < 1e-10)
True
"""

from __future__ import annotations

import math
from typing import Callable

import ducc0
import numpy as np

# the transforms live in ._attention_transforms; the private helpers stay importable from here
from ._attention_transforms import (  # noqa: F401
    DUCC_EPS_MIN,
    _normalised_weights,
    _s1_adjoint,
    _s1_direct,
    _s2_loc,
    _s2_tangent,
    empirical_coefficients,
)
from ._attention_budget import (  # noqa: F401  (the error model's constants are public here)
    DEGREE_CAP,
    EPS_PER_TOL,
    ROUNDOFF_FACTOR,
    TRANSFORM_ERROR_FACTOR,
    ErrorModel,
)
from ._threads import default_threads, point_threads
from ._validate import as_beta, as_bool, as_float, as_int, as_matrix, as_points
from .attention import DEFAULT_BLOCK, attention_eigenvalues, attention_velocity, tangent_project
from .sphere import basis
from .sphere._points import s2_points
from .sphere._s2 import adjoint_at, synthesis_at
from .sphere._s2_exact import MAX_LMAX as LOW_DEGREE_MAX_LMAX, low_degree_s2

__all__ = [
    "SpectralAttention",
    "spectral_attention_velocity",
    "empirical_coefficients",
    "select_velocity",
    "is_identity",
    "DUCC_EPS_MIN",
    "AUTO_MIN_N",
    "AUTO_MAX_BETA",
    "S2_DIRECT_MAX_LMAX",
    "S2_DIRECT_MAX_POINTS",
    "S2_DIRECT_ANY_N_EPS",
    "ROUNDOFF_FACTOR",
]

#: Token counts from which ``method="auto"`` prefers the spectral evaluator (measured on
#: 2 cores, see ``benchmarks/results_attention.md``, section "Small-N crossover", tol 1e-10: the
#: spectral path has a floor of about 0.2 ms on S^2 at β = 0.1 (exact low-degree transforms),
#: 0.35-0.5 ms at β = 1-10, and 0.07-0.1 ms on S^1; the direct sum costs 0.24-0.27 ms at N = 256
#: and 0.53-0.59 ms at 384 on S^2, 0.08 ms at 128 on S^1 (two runs). Re-measured after the
#: spectral path became faster: from 384 tokens on S^2 the spectral path wins at every β
#: measured, at 256 only at β = 0.1, so 384 was kept).
AUTO_MIN_N = {2: 128, 3: 384}

#: S^1: work N·(L+1) up to which the FFT-free power sum beats the NUFFT pair. Measured on 2
#: cores (medians of 40 alternating calls) with the powers as rows and both sums as products:
#: NUFFT / power sum 1.27-1.34 at L = 8 for N = 10^3-10^4 (work 9000-90000), 1.18-1.59 at L = 11
#: up to work 1.2·10^5, but 0.86 at L = 29 from work 1.2·10^5 (1.08-1.20 below 6·10^4); earlier,
#: with the powers from a cumulative product, the limit was 16384.
S1_DIRECT_MAX_WORK = 65536

#: S^2: largest degree and number of tokens for which ``s2_backend="auto"`` evaluates the three
#: transforms exactly (:class:`meanfield.sphere.LowDegreeS2`, O(N L²)) instead of with ducc0's
#: non-uniform transforms. Measured on 2 cores (``benchmarks/results_attention.md``, the two
#: alternating in one process): the exact path is faster at L = 5 (β = 0.1, tol 1e-6) and L = 7
#: (tol 1e-10) up to about 10^5 tokens (1.1-1.8x for N = 2·10^3-10^5; 1.08-1.28x at 10^5 since
#: the threaded adjoint below), about as fast at 3·10^5, slower
#: from L = 9 (0.7-0.9x) and even at L = 10-12 for N <= 2·10^4. In separate processes the
#: particle step with noise at N = 10^5 measured 1.10x with it. With the weight products grouped
#: by degree (:class:`~meanfield.sphere.LowDegreeS2`), L = 9 (β = 1, tol 1e-6) measured 0.95-1.12x
#: for N = 2·10^3-5·10^4 and 0.61-0.87x above, both at degree 9 (now the exact degree is 8 there:
#: see S2_DIRECT_SMALL_N).
S2_DIRECT_MAX_LMAX = 7
S2_DIRECT_MAX_POINTS = 1 << 17
#: ... except at ducc0 accuracies ε <= this, where the exact transforms (whose cost does not depend
#: on ε) are taken at every N: with the weight products grouped by degree they measured 1.07-1.27x
#: faster than the non-uniform ones at N = 3·10^5 and 10^6 for ε = 1e-8 to 1e-11 (β = 0.1, L = 5-7,
#: medians of 4-8 alternating calls on 2 cores), while at ε = 1e-7 the two were within 0.92-1.06x.
#: With the threaded adjoint at degree :data:`~meanfield.sphere._s2.ADJOINT_THREADED_DEGREE`, the
#: NUFFT measured 0.89-0.94x the exact transforms at 3·10^5 tokens and 0.99-1.05x at 10^6 for
#: ε = 1e-9 and 1e-11 (best and median of 9 alternating calls, two runs), and the drift at 10^6
#: tokens and tol 1e-10 took 114.5 ms with it against 108.9 ms with the exact ones (best of 3
#: alternating runs of the speed benchmark): the rule stays.
S2_DIRECT_ANY_N_EPS = 1e-8
#: ... and up to this degree at any N and ε: since the exact transforms take the lower degree their
#: own budget allows and split their synthesis in larger blocks, they measured faster than ducc0's
#: at every N and ε there. Medians of 4 alternating pairs (best of 2 calls each) on 2 cores,
#: ducc0 time over exact time at 3·10^5 / 10^6 tokens: exact degree 3 (β = 0.1, tol 1e-3 and
#: 1e-4, ε = 1e-4 and 1e-5) 1.52-1.86 / 1.99-2.25; degree 4 (β = 0.1, tol 1e-6, ε = 1e-7, ducc0
#: at degree 5; β = 0.3 and 0.5, tol 1e-3 and 1e-4) 1.17-1.36 / 1.44-1.90 (at tol 1e-6, β = 0.1,
#: 1.65 at 3·10^5 and 1.83 at 10^6 in a run of 6 pairs, 1.78 at 1.3·10^5); degree 5 (β = 0.5,
#: tol 1e-4, ε = 1e-5) 1.01 / 1.36; but degree 6 0.91-1.02 / 1.03-1.24 and degree 7 0.81-0.93 /
#: 1.03-1.09 (β = 0.3-1, ε = 1e-7 to 1e-4).
S2_DIRECT_ANY_N_LMAX = 5
#: ... and, for at most S2_DIRECT_SMALL_N tokens, up to degree S2_DIRECT_SMALL_N_LMAX at any ε and
#: up to S2_DIRECT_SMALL_N_FINE_LMAX at ε <= S2_DIRECT_ANY_N_EPS. Medians of 6 alternating pairs
#: (best of 3-200 calls each) on 2 cores, ducc0's time over the exact time on two threads / on
#: one (the deterministic mode of study workers), N = 64-32768: exact degree 8 at ε = 1e-7 (β = 1,
#: tol 1e-6, ducc0 at degree 9) 0.90-1.67 / 1.47-2.25 (0.90 at 256 tokens, 0.99-1.00 at 64 and
#: 1024); degree 9 at ε = 1e-11 and 1e-9 (β = 0.5, tol 1e-10; β = 0.7, tol 1e-8) 1.09-1.53 /
#: 1.66-2.00; degree 12 at ε = 1e-11 (β = 1, tol 1e-10) 1.06-1.20 / 1.26-1.64; but degree 13 at
#: ε = 1e-11 1.02-1.04 / 1.19-1.60 and degree 11 at ε = 1e-7 (β = 2, tol 1e-6) 0.81-0.97 /
#: 1.04-1.39, and at 10^5 tokens 0.74-0.83 on two threads for degrees 8-12.
S2_DIRECT_SMALL_N = 1 << 15
S2_DIRECT_SMALL_N_LMAX = 8
S2_DIRECT_SMALL_N_FINE_LMAX = 12

#: Largest abs(β) for which ``method="auto"`` uses the spectral path (accuracy verified in the
#: tests up to here; beyond it g varies over e^{2β} on the sphere and the degree grows like β).
AUTO_MAX_BETA = 50.0


def is_identity(m) -> bool:
    """True if ``m`` is None or exactly the identity matrix (the only case the spectral path covers)."""
    if m is None:
        return True
    a = np.asarray(m, dtype=np.float64)
    return a.ndim == 2 and a.shape[0] == a.shape[1] and bool(np.array_equal(a, np.eye(a.shape[0])))


class SpectralAttention:
    """Spectral (O(N)) evaluator of the attention velocity for Q = K = V = I on S^1 and S^2 (theory §4, §7).

    v(x_i) = β^{-1} ∇_S log (K_β * μ^N)(x_i) = P_{x_i} A(x_i; μ^N), μ^N = Σ_j w_j δ_{x_j}.

    Parameters
    ----------
    d : {2, 3}
        Ambient dimension (tokens on S^{d-1}).
    beta : float
        Inverse temperature, any real (β < 0 weights distant tokens more; see the module docstring for the
        accuracy floor at large -β). β = 0 gives the exact v = P_x (Σ_j w_j x_j).
    tol : float, > 0
        Target absolute velocity error (``|v| <= 1``); see the module docstring for the bound.
    lmax : int, optional
        Fixed truncation degree; default: chosen per call from β, ``tol`` and the smallest
        token weight (rigorous bound of the module docstring).
    nthreads : int, optional
        ducc0 threads (default: chosen per call by :func:`meanfield.point_threads` from N and the
        degree, one inside :func:`~meanfield.deterministic`).
    epsilon : float, optional
        Accuracy of the non-uniform transforms; default from ``tol`` (module docstring).
    s1_backend : {"auto", "nufft", "direct"}
        S^1 only: ducc0 type-1/type-2 NUFFT, or the exact FFT-free O(N L) sum over powers of
        e^{iθ} blocked over tokens. ``"auto"`` takes the power sum when N·(L+1) <=
        :data:`S1_DIRECT_MAX_WORK` and the NUFFT above (the faster one measured on 2 cores, see
        the benchmark).
    s2_backend : {"auto", "nufft", "direct"}
        S^2 only: ducc0's non-uniform spherical-harmonic transforms (accuracy ε), or the exact
        O(N L²) transforms of :class:`meanfield.sphere.LowDegreeS2` (Chebyshev polynomials in z
        times powers of x_1 + i x_2; round-off only, the same bits on any number of threads).
        ``"auto"`` takes the exact ones when their degree (which can be one below the
        non-uniform transforms', see the module docstring) is <= :data:`S2_DIRECT_ANY_N_LMAX`;
        <= :data:`S2_DIRECT_MAX_LMAX` with either N <= :data:`S2_DIRECT_MAX_POINTS` or ε <=
        :data:`S2_DIRECT_ANY_N_EPS`; or, for N <= :data:`S2_DIRECT_SMALL_N`, <=
        :data:`S2_DIRECT_SMALL_N_LMAX` (:data:`S2_DIRECT_SMALL_N_FINE_LMAX` at ε <=
        :data:`S2_DIRECT_ANY_N_EPS`): the faster one measured on 2 cores.

    Attributes
    ----------
    lmax : int
        Degree for the worst case g_min = e^{-2 abs(β)} (the most any call uses), or the fixed degree.
    tol, beta, d, nthreads, epsilon
    last_lmax, last_epsilon : int, float
        Degree and transform accuracy used by the latest call (the exact backends ask for no
        accuracy and make only round-off; ε still enters :attr:`predicted_error`, and they may
        take a lower degree, see the module docstring).
    last_predicted_error : float
        Error model of the latest call: the truncation bound at its degree and g_min, + ε,
        + round-off for β < 0.
    last_backend : str
        ``"nufft"`` or ``"direct"``: the transforms of the latest call.
    predicted_error : float
        Error bound (truncation + transform estimate, + round-off for β < 0) for the worst case
        g_min = e^{-2 abs(β)}, the larger of the two backends' where a call may take either.

    Raises
    ------
    ValueError
        β < 0 and the round-off floor ``ROUNDOFF_FACTOR · u e^{2|β|}`` exceeds tol/2.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> v = SpectralAttention(3, 1.0).velocity(x)
    >>> from meanfield.attention import attention_velocity
    >>> bool(np.allclose(v, attention_velocity(x, 1.0), atol=1e-10))
    True
    """

    def __init__(self, d: int, beta: float, tol: float = 1e-10, lmax: int | None = None,
                 nthreads: int | None = None, *, epsilon: float | None = None, s1_backend: str = "auto",
                 s2_backend: str = "auto"):
        self.d = as_int(d, "d", min_value=2)
        if self.d not in (2, 3):
            raise ValueError(f"the spectral attention evaluator needs d = 2 or 3 (S^1 or S^2), got d = {self.d}; use method='direct'")
        self.beta = as_beta(beta)
        self.tol = as_float(tol, "tol", min_value=0.0, strict_min=True)
        self.nthreads = default_threads() if nthreads is None else as_int(nthreads, "nthreads", min_value=1)
        self._auto_threads = nthreads is None
        if s1_backend not in ("auto", "nufft", "direct"):
            raise ValueError(f"s1_backend must be 'auto', 'nufft' or 'direct', got {s1_backend!r}")
        self.s1_backend = s1_backend
        if s2_backend not in ("auto", "nufft", "direct"):
            raise ValueError(f"s2_backend must be 'auto', 'nufft' or 'direct', got {s2_backend!r}")
        self.s2_backend = s2_backend
        self.last_backend = "nufft"
        self._fixed_eps = None if epsilon is None else as_float(epsilon, "epsilon", min_value=DUCC_EPS_MIN, max_value=0.1)
        self._fixed_lmax = None if lmax is None else as_int(lmax, "lmax", min_value=0, max_value=DEGREE_CAP)
        self._model = model = ErrorModel(self.d, self.beta, self.tol, self._fixed_eps, self._fixed_lmax)
        if self.beta < 0 and model.roundoff() > 0.5 * self.tol:
            raise ValueError(
                f"beta = {self.beta}: the spectral attention cannot reach tol = {self.tol:g} for negative beta "
                f"at this |beta| (round-off floor ~ {model.roundoff():.2g} = 2.2e-16 * e^(2|beta|)); use "
                f"the direct sum (attention='direct' in solve_particles, method='direct' in select_velocity, "
                f"exact for either sign of beta) or tol >= {2 * model.roundoff():.2g}")
        gmin = model.gmin(0.0)
        self.lmax, self.epsilon, self.predicted_error = model.plan(gmin)
        # the backend rule at one token, where the exact transforms are taken if they ever are
        backend, lx = self._backend(1, self.lmax, self.epsilon, gmin)
        if self.d == 3 and s2_backend == "direct" and lx > LOW_DEGREE_MAX_LMAX:
            raise ValueError(f"s2_backend='direct' evaluates degrees <= {LOW_DEGREE_MAX_LMAX} exactly; beta = {self.beta:g} "
                             f"with tol = {self.tol:g} can need degree {lx}: use s2_backend='auto' or 'nufft'")
        if backend == "direct":
            # a call may take the exact transforms at their lower degree: the worst case of both
            self.predicted_error = max(self.predicted_error, model.predicted(lx, gmin, self.epsilon))
        self.last_lmax = self.lmax
        self.last_epsilon = self.epsilon
        self.last_predicted_error = self.predicted_error
        self._plans: dict = {}

    # -- degree and accuracy (meanfield._attention_budget) ------------------------------------
    def truncation_bound(self, L: int, gmin: float) -> float:
        """Rigorous bound (t_1(L)/b + t_0(L)) / (g_min - t_0(L)) on the velocity truncation error (b = abs(β))."""
        return self._model.truncation_bound(L, gmin)

    # -- evaluation ------------------------------------------------------------------------
    def coefficients(self, x, weights=None) -> np.ndarray:
        """Empirical coefficients at degree :attr:`lmax` (see :func:`empirical_coefficients`)."""
        return empirical_coefficients(x, self.lmax, weights, epsilon=self.epsilon,
                                      nthreads=None if self._auto_threads else self.nthreads)

    def velocity(self, x, weights=None, *, check: bool = True) -> np.ndarray:
        """Attention velocity v(x_i) = P_{x_i} A(x_i; μ^N) at the tokens themselves.

        Parameters
        ----------
        x : ndarray, shape (N, d)
            Tokens (unit vectors); μ^N = Σ_j w_j δ_{x_j}.
        weights : ndarray, shape (N,), optional
            Non-negative token weights (normalised internally); default uniform.
        check : bool
            Validate ``x`` (unit norm, finite, shape); the solver's hot loop may pass False.

        Returns
        -------
        ndarray, shape (N, d)
            Tangent vectors, to absolute accuracy ``tol`` (see :attr:`last_lmax`).
        """
        if as_bool(check, "check"):
            x = as_points(x, "x", self.d, copy=False)  # only read here
        else:
            x = np.ascontiguousarray(x, dtype=np.float64)
        n = x.shape[0]
        w = _normalised_weights(weights, n)
        if self.beta == 0.0:
            mean = x.mean(axis=0) if w is None else w @ x
            return tangent_project(x, np.broadcast_to(mean, x.shape))
        wmin = 1.0 / n if w is None else float(w.min())
        backend, L, eps, predicted, lam = self._call_plan(n, self._model.gmin(wmin))
        self.last_backend, self.last_lmax, self.last_epsilon, self.last_predicted_error = backend, L, eps, predicted
        if self.d == 3:
            return self._velocity_s2(x, w, L, lam, eps, backend)
        return self._velocity_s1(x, w, L, lam, eps, backend)

    __call__ = velocity

    def _threads(self, n: int, lmax: int = 0) -> int:
        # the number given to the constructor, else the policy for n points (asked at every call)
        return point_threads(n, lmax) if self._auto_threads else self.nthreads

    def _uniform_weights(self, n: int) -> np.ndarray:
        # kept between calls (a solver calls with the same N every step): read-only, shared
        cached = getattr(self, "_uniform", None)
        if cached is None or cached.shape[0] != n:
            cached = np.full(n, 1.0 / n)
            cached.flags.writeable = False
            self._uniform = cached
        return cached

    def _call_plan(self, n: int, gmin: float) -> tuple:
        """(backend, degree, ε, predicted error, eigenvalues) of a call with n tokens and lower bound
        g_min, kept per (n, g_min): a solver calls with the same ones every step, and planning took
        40-75 us of a call at 128-2048 tokens (15 us in a loop of plans alone), 12-33 % of the
        call there."""
        key = (n, gmin)
        plan = self._plans.get(key)
        if plan is None:
            L, eps, _ = self._model.plan(gmin)
            L = min(L, self.lmax) if self._fixed_lmax is None else L
            backend, L = self._backend(n, L, eps, gmin)
            lam = attention_eigenvalues(self.d, self.beta, L)
            lam.flags.writeable = False
            plan = (backend, L, eps, self._model.predicted(L, gmin, eps), lam)
            if len(self._plans) >= 64:  # weighted calls bring their own g_min: keep the table small
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _backend(self, n: int, L: int, eps: float, gmin: float) -> tuple[str, int]:
        """(backend, degree) of a call with n tokens whose non-uniform plan is (L, ε): the exact
        transforms take the lower degree their budget allows (``ErrorModel.exact_degree``), and
        ``"auto"`` decides at that degree."""
        Lx = self._model.exact_degree(L, gmin, eps)
        if self.d == 3:
            backend = self.s2_backend
            if backend == "auto":
                fine = eps <= S2_DIRECT_ANY_N_EPS
                exact = (Lx <= S2_DIRECT_ANY_N_LMAX
                         or (Lx <= S2_DIRECT_MAX_LMAX and (n <= S2_DIRECT_MAX_POINTS or fine))
                         or (n <= S2_DIRECT_SMALL_N
                             and Lx <= (S2_DIRECT_SMALL_N_FINE_LMAX if fine else S2_DIRECT_SMALL_N_LMAX)))
                backend = "direct" if exact else "nufft"
        else:
            backend = self.s1_backend
            if backend == "auto":
                backend = "direct" if n * (Lx + 1) <= S1_DIRECT_MAX_WORK else "nufft"
        return backend, (Lx if backend == "direct" else L)

    def _velocity_s2(self, x, w, L, lam, eps, backend):
        if backend == "direct":
            # v = ∇g / (β g) does not change when μ is scaled: uniform weights (w None) are left
            # out, as unit weights, which the exact adjoint does not multiply in
            tr = low_degree_s2(L)
            alm, tables = tr.adjoint(x, w, keep=True, check=False)  # x and w validated (or trusted) above
            alm *= lam[tr.ell]
            return tr.log_gradient(alm, x, self.beta, tables=tables, check=False)  # ∇g / (β g)
        if w is None:
            w = self._uniform_weights(x.shape[0])
        # angles shared with the other transforms at these points (e.g. the noise field of the same step)
        pts = s2_points(x)
        loc = pts.loc
        nt = self._threads(loc.shape[0], L)
        alm = adjoint_at(w, L, loc, epsilon=eps, nthreads=nt)
        alm = (lam[basis(3, L).ell] * alm)[None, :]
        g = synthesis_at(alm, L, loc, epsilon=eps, nthreads=nt)[0]
        grad = synthesis_at(alm, L, loc, spin=1, mode="DERIV1", epsilon=eps, nthreads=nt)
        return pts.tangent(grad[0], grad[1], divide_by=g, factor=self.beta)  # ∇g / (β g)

    def _velocity_s1(self, x, w, L, lam, eps, backend):
        if w is None:
            w = self._uniform_weights(x.shape[0])
        if backend == "direct":
            z = x[:, 0] + 1j * x[:, 1]
            z /= np.abs(z)  # exactly e^{iθ}: inputs are unit only to 1e-8, and powers amplify |z| - 1
            # lam_k = 2π e^{-|β|} I_k(β); the sum Σ_y e^{β cos} = Σ_k I_k c_k e^{ikθ} uses I_k = lam_k / 2π
            # blocks of at most 2^16 powers (1 MiB): one block for every size "auto" sends here
            gz = _s1_direct(w, z, lam / (2 * math.pi), max(1, 2**16 // max(L, 1)))
        else:
            theta = np.arctan2(x[:, 1], x[:, 0])
            nt = self._threads(theta.shape[0])
            c = _s1_adjoint(w, theta, L, eps, nt)
            k = np.arange(-L, L + 1)
            a = (lam[np.abs(k)] / (2 * math.pi)) * c * (1.0 - k)  # g + i g' = Σ (1 - k) a_k e^{ikθ}
            gz = np.empty(x.shape[0], dtype=np.complex128)
            ducc0.nufft.u2nu(
                grid=a, coord=theta[:, None], forward=False, epsilon=eps,
                nthreads=nt, out=gz,
            )
        s = gz.imag / (self.beta * gz.real)
        return np.stack([-x[:, 1] * s, x[:, 0] * s], axis=1)


def spectral_attention_velocity(x, beta: float, weights=None, *, tol: float = 1e-10, lmax: int | None = None,
                                nthreads: int | None = None) -> np.ndarray:
    """One-shot spectral attention velocity v(x_i) = P_{x_i} A(x_i; μ^N), Q = K = V = I (theory §7).

    Builds a :class:`SpectralAttention` for ``d = x.shape[1]`` and evaluates it once.

    Parameters
    ----------
    x : ndarray, shape (N, d), d in {2, 3}
    beta : float
    weights : ndarray, shape (N,), optional
    tol : float, > 0
        Absolute velocity accuracy.
    lmax, nthreads : optional
        See :class:`SpectralAttention`.

    Returns
    -------
    ndarray, shape (N, d)

    Examples
    --------
    >>> import numpy as np
    >>> th = np.linspace(0, 1, 5); x = np.stack([np.cos(th), np.sin(th)], axis=1)
    >>> from meanfield.attention import attention_velocity
    >>> bool(np.allclose(spectral_attention_velocity(x, 3.0), attention_velocity(x, 3.0), atol=1e-10))
    True
    """
    x = as_points(x, "x")
    return SpectralAttention(x.shape[1], beta, tol=tol, lmax=lmax, nthreads=nthreads).velocity(x, weights, check=False)


def select_velocity(method: str, d: int, beta: float, Q=None, K=None, V=None, N: int | None = None,
                  tol: float = 1e-10, block: int = DEFAULT_BLOCK, nthreads: int | None = None
                  ) -> tuple[Callable[..., np.ndarray], dict]:
    """Attention-drift evaluator x -> v(x) = P_x A(x; μ^N_x) for the particle solvers (theory §7).

    Parameters
    ----------
    method : {"auto", "direct", "spectral", "off"}
        ``"direct"``: blocked O(N²) sum, any d, Q, K, V (:func:`meanfield.attention.attention_velocity`).
        ``"spectral"``: :class:`SpectralAttention`; only d in {2, 3} and Q = K = V = I
        (None or the identity), else ``ValueError`` naming the parameter.
        ``"off"``: zero velocity (no attention).
        ``"auto"``: spectral when d in {2, 3}, Q, K, V are None or the identity, β <=
        :data:`AUTO_MAX_BETA`, the predicted error (:attr:`SpectralAttention.predicted_error`)
        is <= ``tol`` and N >= :data:`AUTO_MIN_N` (or N is None: the spectral cost is small
        in absolute terms at small N); otherwise direct. The reason is in ``info``.
    d : int
        Ambient dimension.
    beta : float
    Q, K, V : ndarray (d, d), optional
        Attention matrices; None means the identity.
    N : int, optional
        Number of tokens the evaluator will see (for the crossover rule of ``"auto"``).
    tol : float, > 0
        Accuracy of the spectral path (absolute velocity error).
    block : int
        Query block of the direct path.
    nthreads : int, optional
        ducc0 threads of the spectral path.

    Returns
    -------
    velocity : callable
        ``velocity(x, weights=None) -> ndarray (N, d)``, tangent at every token.
    info : dict
        ``method`` ("direct" | "spectral" | "off"), ``requested``, ``lmax`` (worst-case degree of
        the spectral path, else None), ``tol``, ``epsilon``, ``predicted_error``, ``reason``.

    Examples
    --------
    >>> v, info = select_velocity("auto", 3, 1.0, N=10_000)
    >>> info["method"]
    'spectral'
    >>> select_velocity("auto", 4, 1.0, N=10_000)[1]["method"]
    'direct'
    """
    if not isinstance(method, str) or method not in ("auto", "direct", "spectral", "off"):
        raise ValueError(f"method must be one of 'auto', 'direct', 'spectral', 'off', got {method!r}")
    d = as_int(d, "d", min_value=2)
    beta = as_beta(beta)
    tol = as_float(tol, "tol", min_value=0.0, strict_min=True)
    block = as_int(block, "block", min_value=1)
    Q, K, V = as_matrix(Q, "Q", d), as_matrix(K, "K", d), as_matrix(V, "V", d)
    if N is not None:
        N = as_int(N, "N", min_value=1)
    info = {"requested": method, "method": None, "lmax": None, "tol": tol, "epsilon": None,
            "predicted_error": None, "reason": ""}

    def direct(x, weights=None):
        return attention_velocity(x, beta, weights=weights, Q=Q, K=K, V=V, block=block)

    def off(x, weights=None):
        x = as_points(x, "x", d)
        return np.zeros_like(x)

    if method == "off":
        info.update(method="off", reason="attention switched off (zero velocity)")
        return off, info
    if method == "direct":
        info.update(method="direct", reason="requested")
        return direct, info

    general = [name for name, m in (("Q", Q), ("K", K), ("V", V)) if not is_identity(m)]
    if method == "spectral":
        if general:
            raise ValueError(
                f"method='spectral' needs Q = K = V = I; {', '.join(general)} "
                f"{'is' if len(general) == 1 else 'are'} not the identity (use method='direct')"
            )
        if d not in (2, 3):
            raise ValueError(f"method='spectral' needs d = 2 or 3 (S^1 or S^2), got d = {d} (use method='direct')")
        sa = SpectralAttention(d, beta, tol=tol, nthreads=nthreads)
        info.update(method="spectral", lmax=sa.lmax, epsilon=sa.epsilon, predicted_error=sa.predicted_error,
                    reason="requested")
        if sa.predicted_error > tol:
            info["reason"] += f"; warning: predicted worst-case error {sa.predicted_error:.2g} exceeds tol"
        return sa.velocity, info

    # auto
    if general:
        info.update(method="direct", reason=f"general {', '.join(general)}: spectral path needs Q = K = V = I")
        return direct, info
    if d not in (2, 3):
        info.update(method="direct", reason=f"d = {d}: spectral path exists for d = 2, 3 only")
        return direct, info
    try:
        sa = SpectralAttention(d, beta, tol=tol, nthreads=nthreads)
    except ValueError as exc:
        info.update(method="direct", reason=f"spectral degree out of range: {exc}")
        return direct, info
    if abs(beta) > AUTO_MAX_BETA:
        info.update(method="direct", reason=f"|beta| = {abs(beta)} > {AUTO_MAX_BETA}: outside the verified range of the spectral path")
        return direct, info
    if sa.predicted_error > tol:
        info.update(method="direct", reason=(
            f"spectral predicted error {sa.predicted_error:.2g} > tol = {tol:g} "
            f"(transform accuracy floor {DUCC_EPS_MIN:g})"))
        return direct, info
    if N is not None and N < AUTO_MIN_N[d]:
        info.update(method="direct", reason=f"N = {N} below the measured crossover {AUTO_MIN_N[d]}")
        return direct, info
    info.update(method="spectral", lmax=sa.lmax, epsilon=sa.epsilon, predicted_error=sa.predicted_error,
                reason="Q = K = V = I, d in {2, 3}, accurate at this beta and tol"
                + ("" if N is None else f", N = {N} >= crossover {AUTO_MIN_N[d]}"))
    return sa.velocity, info
