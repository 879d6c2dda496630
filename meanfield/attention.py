"""Softmax self-attention on the sphere (theory §1, §4, §7): direct evaluation and spectral constants.

    A(x; μ) = ∫ exp(β<Qx, Ky>) V y μ(dy) / ∫ exp(β<Qx, Ky>) μ(dy),    v[μ](x) = P_x A(x; μ).

The direct evaluator works for any d, Q, K, V and weighted measures; it is blocked over
the query points so memory is O(block · N). For Q = K = V = I the attention velocity is
the log-gradient of a zonal convolution, v[μ] = β^{-1} ∇_S log(K_β * μ), and the
convolution is diagonal in spherical harmonics with Funk–Hecke eigenvalues

    λ_l = (2π)^{d/2} β^{1 - d/2} I_{l + d/2 - 1}(β)
        (S^2: 4π i_l(β), modified spherical Bessel;  S^1: 2π I_k(β)),

returned here scaled by e^{-abs(β)} (:func:`attention_eigenvalues`), which cancels in the
log-gradient and avoids overflow. β may have either sign: β < 0 (softmax weights favouring distant tokens) has
λ_l(β) = (-1)^l λ_l(abs(β)), because ``t^{-ν} I_ν(t)`` is even in t (I_k(-t) = (-1)^k I_k(t)).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ._validate import as_beta, as_bool, as_float, as_int, as_matrix, as_points, as_real_array
from .sphere import basis, harmonic_dimension, sphere_area, tangent_project

__all__ = [
    "softmax_attention",
    "attention_velocity",
    "attention_eigenvalues",
    "required_degree",
    "attention_energy",
    "gap_energy",
    "tangent_project",
    "convolution_velocity",
]

#: Default number of query rows per block: the logits block is block × N float64.
DEFAULT_BLOCK = 512


def softmax_attention(
    x,
    beta: float,
    *,
    y=None,
    weights=None,
    Q=None,
    K=None,
    V=None,
    block: int = DEFAULT_BLOCK,
    check: bool = True,
) -> np.ndarray:
    """Softmax attention A(x_i; μ) at query points, by a blocked direct sum (theory §1).

    A(x; μ) = Σ_j w_j exp(β<Q x, K y_j>) V y_j / Σ_j w_j exp(β<Q x, K y_j>), evaluated
    with a per-row log-sum-exp shift so it never overflows, for any real β.

    Parameters
    ----------
    x : ndarray, shape (M, d)
        Query points (unit vectors).
    beta : float
        Inverse temperature (any real; β < 0 weights distant tokens more).
    y : ndarray, shape (N, d), optional
        Support of μ; default ``x`` (the tokens attend to the empirical measure of themselves).
    weights : ndarray, shape (N,), optional
        Non-negative weights of μ (they need not be normalised); default uniform.
    Q, K, V : ndarray (d, d), optional
        Query, key and value matrices; default identity.
    block : int
        Query rows per block; memory is O(block · N).

    Returns
    -------
    ndarray, shape (M, d)
        A(x_i; μ) (not projected on the tangent space).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> softmax_attention(x, 0.0)   # β = 0: the mean of the tokens
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    if as_bool(check, "check"):
        x = as_points(x, "x")
        d = x.shape[1]
        y = x if y is None else as_points(y, "y", d)
        beta = as_beta(beta)
        Q, K, V = as_matrix(Q, "Q", d), as_matrix(K, "K", d), as_matrix(V, "V", d)
        block = as_int(block, "block", min_value=1)
        if weights is not None:
            weights = as_real_array(weights, "weights", finite=False)
            if weights.shape != (y.shape[0],):
                raise ValueError(f"weights must have shape ({y.shape[0]},), got {weights.shape}")
            if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
                raise ValueError("weights must be finite, non-negative and not all zero")
    elif y is None:
        y = x
    qx = x if Q is None else x @ Q.T
    ky = y if K is None else y @ K.T
    vy = y if V is None else y @ V.T
    logw = None if weights is None else np.log(np.where(weights > 0, weights, 1.0)) + np.where(weights > 0, 0.0, -np.inf)
    out = np.empty((x.shape[0], vy.shape[1]))
    for s in range(0, x.shape[0], block):
        logits = beta * (qx[s : s + block] @ ky.T)
        if logw is not None:
            logits += logw
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        out[s : s + block] = (logits @ vy) / logits.sum(axis=1, keepdims=True)
    return out


def attention_velocity(x, beta: float, **kwargs) -> np.ndarray:
    """Tangential attention velocity v(x_i) = P_{x_i} A(x_i; μ), shape (M, d). See :func:`softmax_attention`."""
    x = as_points(x, "x")
    return tangent_project(x, softmax_attention(x, beta, **kwargs))


def attention_eigenvalues(d: int, beta: float, lmax: int) -> np.ndarray:
    """Funk–Hecke eigenvalues of the kernel e^{β<x,y>}, scaled by e^{-abs(β)} (theory §4).

    e^{-abs(β)} λ_l(β) = s_l (2π)^{d/2} b^{1-d/2} ive(l + d/2 - 1, b), b = abs(β), l = 0..lmax, with
    s_l = 1 for β >= 0 and s_l = (-1)^l for β < 0 (λ_l(-b) = (-1)^l λ_l(b): ``t^{-ν} I_ν(t)``
    is even). At β = 0, λ_0 = ``|S^{d-1}|`` and λ_l = 0 for l > 0. On S^2 this is
    4π i_l(β) e^{-abs(β)}; on S^1, 2π I_k(β) e^{-abs(β)}. The scaling makes
    ``Σ_l |e^{-|β|} λ_l| Z_l(1) = 1`` (the kernel at ``<x,y> = ±1``, where it is largest).

    Examples
    --------
    >>> lam = attention_eigenvalues(3, 1e-12, 2)
    >>> bool(abs(lam[0] - 4 * np.pi) < 1e-9)
    True
    >>> bool(np.allclose(attention_eigenvalues(2, -3.0, 3), attention_eigenvalues(2, 3.0, 3) * [1, -1, 1, -1]))
    True
    """
    d = as_int(d, "d", min_value=2)
    beta = as_beta(beta)
    lmax = as_int(lmax, "lmax", min_value=0)
    ls = np.arange(lmax + 1)
    if beta == 0.0:
        out = np.zeros(lmax + 1)
        out[0] = sphere_area(d)
        return out
    b = abs(beta)
    nu = ls + d / 2 - 1
    lam = (2 * math.pi) ** (d / 2) * b ** (1 - d / 2) * special.ive(nu, b)
    return lam if beta > 0 else np.where(ls % 2 == 1, -lam, lam)


def required_degree(d: int, beta: float, tol: float = 1e-10, *, lmax_cap: int = 4096) -> int:
    """Smallest degree L at which the spectral attention velocity is accurate to ``tol`` for every μ.

    Write τ for the part of K_β * μ beyond degree L and b = abs(β). For a probability measure
    ``|Σ_m μ_lm Y_lm(x)| <= Z_l(1)``, Bernstein's inequality gives ``|∇_S Σ_m μ_lm Y_lm| <= l Z_l(1)``,
    ``K_β * μ >= e^{-b}`` and ``|v| <= 1``. To first order in τ the velocity error
    ``|∇τ - β v τ| / (|β| K_β*μ)`` is therefore at most

        e^{2b} Σ_{l>L} abs(e^{-b} λ_l) Z_l(1) (l + b) / b,

    which also bounds the relative error of K_β * μ itself. The sum decays
    super-exponentially once l > β. The result is an absolute bound on the velocity
    error (``|v| <= 1``); it is a worst case (a Dirac opposite the query point). Floating
    point adds about ε Σ_l abs(e^{-b}λ_l) Z_l(1)(l+b)/b / (e^{-b}K_β*μ)(x) at each point, which
    can exceed ``tol`` far from the tokens when b is large (e^{-b}K_β*μ >= e^{-2b}); the
    bound and the degree depend on β through b = abs(β) only (abs(λ_l(β)) = λ_l(abs(β))).

    Examples
    --------
    >>> required_degree(3, 1.0, 1e-8) < required_degree(3, 10.0, 1e-8)
    True
    """
    d = as_int(d, "d", min_value=2)
    beta = as_beta(beta)
    tol = as_float(tol, "tol", min_value=0.0, strict_min=True)
    if beta == 0.0:
        return 0
    b = abs(beta)
    lmax = int(min(lmax_cap, 2 * b + 64))
    while True:
        lam = attention_eigenvalues(d, b, lmax)
        ls = np.arange(lmax + 1)
        terms = lam * harmonic_dimension(d, lmax) / sphere_area(d) * (ls + b) / b
        tail = np.cumsum(terms[::-1])[::-1]  # tail[l] = Σ_{l' >= l}
        # compare in log space: e^{2b} overflows for large b
        rel = np.log(np.maximum(tail, 1e-320)) + 2 * b
        ok = np.nonzero(rel[1:] <= math.log(tol))[0]
        if ok.size:
            return int(ok[0])
        if lmax >= lmax_cap:
            raise ValueError(f"beta = {beta} needs a degree above lmax_cap = {lmax_cap} for tol = {tol}")
        lmax = min(lmax_cap, 2 * lmax)


def attention_energy(x, beta: float, weights=None) -> float:
    """E_β^+(μ) = (1/2β) ∫∫ e^{β<x,y>} dμ dμ (theory §5.7), non-decreasing without noise (either sign of β).

    Computed in the scaled form e^{β} (1/2β) ∫∫ e^{β(<x,y> - 1)} to keep it finite
    as long as the result is representable.
    """
    return gap_energy(x, beta, weights, _plus=True)


def gap_energy(x, beta: float, weights=None, *, _plus: bool = False) -> float:
    """Gap energy E_β(μ) = (1/2β) ∫∫ (e^β - e^{β<x,y>}) dμ dμ >= 0, zero iff μ is a Dirac (theory §9).

    Evaluated as (e^β/2β) ∫∫ (1 - e^{β(<x,y>-1)}) dμ dμ, blockwise, O(N · block) memory.
    At β = 0 it is the limit ½ ∫∫ (1 - <x,y>) dμ dμ = ``½ (1 - |∫ x dμ|²)``. For β < 0 both
    1/2β and e^β - e^{β<x,y>} are <= 0, so E_β >= 0 with the same zero set (Diracs).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0]])   # two antipodal tokens: (1/2β)(e^β - cosh β)
    >>> bool(np.isclose(gap_energy(x, -2.0), (np.exp(-2.0) - np.cosh(2.0)) / -4.0))
    True
    """
    x = as_points(x, "x")
    beta = as_beta(beta)
    n = x.shape[0]
    w = np.full(n, 1.0 / n) if weights is None else as_real_array(weights, "weights")
    if w.shape != (n,) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be non-negative, not all zero, with shape ({n},)")
    w = w / w.sum()
    acc = 0.0
    for s in range(0, n, DEFAULT_BLOCK):
        g = x[s : s + DEFAULT_BLOCK] @ x.T - 1.0
        if beta == 0.0:
            vals = -g
        else:
            vals = -np.expm1(beta * g)
        acc += w[s : s + DEFAULT_BLOCK] @ vals @ w
    if beta == 0.0:
        if _plus:
            raise ValueError("attention_energy needs beta != 0")
        return 0.5 * acc
    if _plus:
        return math.exp(beta) / (2 * beta) * (1.0 - acc)
    return math.exp(beta) / (2 * beta) * acc


def convolution_velocity(coeffs: np.ndarray, beta: float, x, *, d: int, lmax: int, epsilon: float = 1e-13):
    """Attention velocity of a measure given by its harmonic coefficients (theory §4, Q = K = V = I).

    v[ρ](x) = β^{-1} ∇_S (K_β * ρ)(x) / (K_β * ρ)(x), with (K_β * ρ)_lm = λ_l ρ_lm and the
    e^{-abs(β)} scaling of :func:`attention_eigenvalues` (it cancels in the ratio).

    Parameters
    ----------
    coeffs : ndarray
        S^2 (d = 3): complex alm of ρ in ducc0/healpy packing, shape ((lmax+1)(lmax+2)/2,),
        with ρ = Σ a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm. S^1 (d = 2): real Fourier
        coefficients in the order of :func:`meanfield.harmonics.real_basis`, shape (2 lmax + 1,).
    beta : float, nonzero
    x : ndarray, shape (N, d)
        Points where the velocity is evaluated (unit vectors).
    d : {2, 3}
    lmax : int
        Degree of ``coeffs``; the caller chooses it with :func:`required_degree`.
    epsilon : float
        Accuracy of ducc0's non-uniform synthesis (S^2), > 2e-13.

    Returns
    -------
    velocity : ndarray, shape (N, d)
        Tangent vectors v[ρ](x_i).
    conv : ndarray, shape (N,)
        e^{-abs(β)} (K_β * ρ)(x_i), the (scaled) softmax denominator.
    """
    beta = as_beta(beta, nonzero=True)
    x = as_real_array(x, "x", finite=False)
    b = basis(d, lmax)
    lc = attention_eigenvalues(d, beta, lmax)[b.ell] * np.asarray(coeffs, dtype=b.state_dtype)
    conv = b.evaluate(lc, x, epsilon=epsilon)
    return b.gradient_at(lc, x, epsilon=epsilon) / (beta * conv)[:, None], conv
