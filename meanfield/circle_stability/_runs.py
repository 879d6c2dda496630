"""Perturbation runs of the particle solver around clustered equilibria on the circle."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from .._validate import as_float, as_int, as_rng
from ._spectrum import _beta, circle_angles, circle_points, cluster_mode, cluster_spectrum, clustered_state

__all__ = ["scheme_rate", "PerturbationRun", "perturbation_growth", "perturbation_threshold"]


def scheme_rate(lam: float, dt: float, scheme: str) -> float:
    """Growth rate per unit time of an eigenmode with eigenvalue ``lam`` under one step of the particle scheme.

    Near an equilibrium the velocities are O(amplitude), so the projection Π of the steps of
    :func:`meanfield.particles.solve_particles` acts on angles as the identity to first order:
    the projected Euler step multiplies the mode by 1 + h λ, the Heun step by
    1 + h λ + (h λ)²/2. The rate is log|multiplier| / h = λ + O(h) resp. λ - h² λ³/6 + O(h³);
    it vanishes exactly where λ does (for |h λ| < 2), so a threshold found from runs is the
    threshold of λ.

    Examples
    --------
    >>> bool(abs(scheme_rate(1.0, 0.01, "heun") - (1.0 - 0.01**2 / 6)) < 1e-6)
    True
    """
    lam = as_float(lam, "lam")
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True)
    if scheme not in ("euler", "heun"):
        raise ValueError(f"scheme must be 'euler' or 'heun', got {scheme!r}")
    z = dt * lam
    g = 1.0 + z if scheme == "euler" else 1.0 + z + 0.5 * z * z
    return math.log(abs(g)) / dt


@dataclass(frozen=True)
class PerturbationRun:
    """A particle run started at the k-cluster state plus a small perturbation (:func:`perturbation_growth`).

    Attributes
    ----------
    k, n : int
    beta : float
    kind : str
        ``"inter"``, ``"intra"`` or ``"random"``.
    p : int or None
        Inter-cluster wave number.
    rate : float
        Measured growth rate: the mean of log(amplitude at the end / at the start) / chunk over the
        chunks that start at or after ``fit_from``.
    chunk_rates : ndarray, shape (n_chunks,)
        That log growth rate of every chunk.
    predicted : float
        The eigenvalue λ of the mode (softmax time, :func:`cluster_spectrum`); for ``"random"`` the
        top nontrivial eigenvalue.
    predicted_scheme : float
        :func:`scheme_rate` of ``predicted``: what the scheme should show.
    fit_from : float
        Start of the averaging window.
    chunk, amplitude, dt : float
    scheme : str
    """

    k: int
    n: int
    beta: float
    kind: str
    p: int | None
    rate: float
    chunk_rates: np.ndarray
    predicted: float
    predicted_scheme: float
    fit_from: float
    chunk: float
    amplitude: float
    dt: float
    scheme: str


def perturbation_growth(k: int, n: int, beta: float, *, kind: str = "inter", p: int = 1, amplitude: float = 1e-7,
                        t_total: float = 8.0, chunk: float = 1.0, dt: float = 2.0**-6, scheme: str = "heun",
                        fit_from: float | None = None, seed=0) -> PerturbationRun:
    """Measure the growth rate of a perturbation of the k-cluster state with the particle solver.

    The tokens start at :func:`clustered_state` (phase 0.1) moved by ``amplitude`` times a unit
    vector δ_0 and follow :func:`meanfield.particles.solve_particles` (no noise, direct attention,
    ``scheme``, step ``dt``). Every ``chunk`` time units the deviation δ = θ(t) - θ* (with its mean,
    the rotation, removed) is measured, its log growth over the chunk recorded, and the run
    restarted from θ* + ``amplitude`` δ / ``|δ|`` (renormalisation keeps the run linear and above
    round-off for any horizon, as in a Lyapunov-exponent estimate). δ_0 is

    * ``kind="inter"`` / ``"intra"``: the eigenvector :func:`cluster_mode` (``p`` for inter); δ is
      projected on it before each restart (round-off would otherwise seed faster modes) and the
      rate is averaged over all chunks;
    * ``kind="random"``: a standard normal vector (``seed``), rotation removed; the rate is
      averaged over the chunks from ``fit_from`` (default t_total / 2) on, when the top
      nontrivial mode dominates (power iteration: the error decays like e^{-gap t}).

    Examples
    --------
    >>> run = perturbation_growth(3, 2, -1.0, t_total=2.0)
    >>> bool(abs(run.rate - run.predicted_scheme) < 1e-6), run.rate < 0
    (True, True)
    """
    from ..particles import solve_particles

    k = as_int(k, "k", min_value=2)
    n = as_int(n, "n", min_value=1)
    beta = _beta(beta, "softmax")
    amplitude = as_float(amplitude, "amplitude", min_value=0.0, strict_min=True, max_value=1e-4)
    t_total = as_float(t_total, "t_total", min_value=0.0, strict_min=True)
    chunk = as_float(chunk, "chunk", min_value=0.0, strict_min=True, max_value=t_total)
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True, max_value=chunk)
    n_chunks = round(t_total / chunk)
    if abs(n_chunks * chunk - t_total) > 1e-9 * t_total:
        raise ValueError(f"t_total / chunk must be an integer, got {t_total / chunk:.6g}")
    spec = cluster_spectrum(k, beta)
    base = clustered_state(k, n, 0.1)
    if kind in ("inter", "intra"):
        delta = cluster_mode(k, n, kind, p)
        predicted = spec.inter[p - 1] if kind == "inter" else spec.intra
        fit_from = 0.0 if fit_from is None else as_float(fit_from, "fit_from", min_value=0.0, max_value=t_total)
    elif kind == "random":
        delta = as_rng(seed).standard_normal(k * n)
        predicted = spec.top if n > 1 else float(spec.inter.max())
        fit_from = 0.5 * t_total if fit_from is None else as_float(fit_from, "fit_from", min_value=0.0,
                                                                  max_value=t_total - chunk)
    else:
        raise ValueError(f"kind must be 'inter', 'intra' or 'random', got {kind!r}")
    delta = delta - delta.mean()
    delta /= np.linalg.norm(delta)
    rates = np.empty(n_chunks)
    for j in range(n_chunks):
        sol = solve_particles(circle_points(base + amplitude * delta), None, beta, dt, [(j + 1) * chunk],
                              t0=j * chunk, scheme=scheme, attention="direct")
        dev = np.angle(np.exp(1j * (circle_angles(sol.final) - base)))
        dev -= dev.mean()
        if kind != "random":
            # keep the eigenvector pure: round-off would otherwise seed faster modes
            dev = (dev @ delta) * delta
        size = np.linalg.norm(dev)
        if size > 1e3 * amplitude:
            raise ValueError(f"the perturbation grew by more than 1e3 in one chunk (rate > {math.log(1e3) / chunk:.3g}); "
                             "reduce chunk")
        rates[j] = math.log(size / amplitude) / chunk
        delta = dev / size
    use = np.arange(n_chunks) * chunk >= fit_from - 1e-12
    return PerturbationRun(k=k, n=n, beta=beta, kind=kind, p=p if kind == "inter" else None,
                           rate=float(rates[use].mean()), chunk_rates=rates, predicted=float(predicted),
                           predicted_scheme=scheme_rate(predicted, dt, scheme), fit_from=float(fit_from),
                           chunk=chunk, amplitude=amplitude, dt=dt, scheme=scheme)


def perturbation_threshold(k: int, beta_lo: float, beta_hi: float, *, kind: str = "inter", p: int = 1,
                           xtol: float = 1e-7, **run) -> tuple[float, int]:
    """β at which the growth rate measured by :func:`perturbation_growth` changes sign (Brent's method).

    Each evaluation is one particle run (``n`` tokens per cluster, default 2, and the other
    keywords ``run`` of :func:`perturbation_growth`); the rate must have opposite signs at
    ``beta_lo`` and ``beta_hi``. The measured rate vanishes with the eigenvalue
    (:func:`scheme_rate`), so this locates the eigenvalue threshold from runs alone.

    Returns
    -------
    (beta, n_runs) : tuple
        The threshold and the number of particle runs used.

    Examples
    --------
    >>> b, runs = perturbation_threshold(3, -1.0, -0.5, t_total=2.0, xtol=1e-4)
    >>> bool(abs(b + 2.0 / 3.0) < 1e-3)
    True
    """
    lo = as_float(beta_lo, "beta_lo")
    hi = as_float(beta_hi, "beta_hi")
    xtol = as_float(xtol, "xtol", min_value=0.0, strict_min=True)
    n = run.pop("n", 2)
    count = [0]

    def rate(b):
        count[0] += 1
        return perturbation_growth(k, n, b, kind=kind, p=p, **run).rate

    f_lo, f_hi = rate(lo), rate(hi)
    if f_lo * f_hi > 0:
        raise ValueError(f"the measured rate has the same sign at beta_lo = {lo} ({f_lo:.3g}) and beta_hi = {hi} "
                         f"({f_hi:.3g}); choose a bracket with a sign change")
    root = brentq(rate, lo, hi, xtol=xtol)
    return float(root), count[0]
