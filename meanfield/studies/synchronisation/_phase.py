"""The synchronisation phase diagram: the critical dimension of each activation and λ_1 on both sides of it.

Closed form (Agazzi et al., arXiv 2604.26898): λ_1(d) = ½ [(d-3) κ'(1) - (d-1) κ(1)] changes
sign at d_c = (3r - 1)/(r - 1), r = κ'(1)/κ(1) (:func:`meanfield.kernels.critical_dimension`;
none when r <= 1). For each activation the part simulates λ_1 by :func:`tangent_lyapunov` at
the integer dimensions just below and just above d_c (``ceil(d_c) - 1`` and ``floor(d_c) + 1``),
or, without a sign change, at ``d_none``. Near d_c the exponent is small, so each cell sizes
itself: a pilot run with ``n_tokens`` gives the SE, and a fresh run (independent seed) uses
``n_tokens (se_ratio · SE_pilot / |λ_closed|)²`` tokens (the tangent-flow tokens are
independent, so SE ∝ n_tokens^{-1/2}), between ``n_tokens`` and ``max_tokens``; the target is
SE <= |λ_closed| / ``se_ratio``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from ._presets import ACTIVATIONS, _check_phase

__all__ = ["phase_dimensions", "phase_task", "make_phase_study", "phase_table"]

#: Sides of a phase cell: below / above the critical dimension, or "none" (no sign change).
SIDES = ("below", "above", "none")


def _kernel(name: str):
    from meanfield.kernels import ActivationKernel

    act, sw = ACTIVATIONS[name]
    return ActivationKernel(act, sigma_w=sw)


def phase_dimensions(name: str, d_none: int = 32) -> dict:
    """Closed-form phase data of an activation of :data:`ACTIVATIONS`.

    Returns
    -------
    dict
        ``kappa_ratio`` (r = κ'(1)/κ(1)), ``d_c`` (NaN if none), and ``dims``:
        ``{"below": ceil(d_c) - 1, "above": floor(d_c) + 1}`` or ``{"none": d_none}``.

    Examples
    --------
    >>> p = phase_dimensions("erf(sw=2)")
    >>> round(p["d_c"], 3), p["dims"]
    (5.59, {'below': 5, 'above': 6})
    >>> phase_dimensions("relu")["dims"]
    {'none': 32}
    """
    from meanfield.kernels import critical_dimension

    k = _kernel(name)
    dc = critical_dimension(k)
    if dc is None:
        return {"kappa_ratio": k.dkappa1 / k.kappa1, "d_c": math.nan, "dims": {"none": int(d_none)}}
    return {"kappa_ratio": k.dkappa1 / k.kappa1, "d_c": dc,
            "dims": {"below": max(2, math.ceil(dc) - 1), "above": math.floor(dc) + 1}}


def phase_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One phase cell: λ_1 of ``params["activation"]`` at the dimension of ``params["side"]``.

    Returns
    -------
    dict
        ``d``, ``d_c``, ``kappa_ratio``, ``closed_form``, ``estimate``, ``se``, ``z``,
        ``pilot_se``, ``n_tokens`` (of the final run), ``capped`` (``max_tokens`` reached),
        ``dt`` (coarsest step), ``seconds``.
    """
    from meanfield.kernels import lyapunov_exponent

    from ._lyapunov import tangent_lyapunov

    name, side = params["activation"], params["side"]
    info = phase_dimensions(name, int(params["d_none"]))
    d = info["dims"][side]
    k = _kernel(name)
    closed = lyapunov_exponent(k, d)
    kw = dict(levels=int(params.get("levels", 3)), n_steps=int(params["n_steps"]),
              n_replicas=int(params["n_replicas"]))
    s_pilot, s_final = seed.spawn(2)
    t = time.perf_counter()
    base, cap = int(params["n_tokens"]), int(params["max_tokens"])
    pilot = tangent_lyapunov(k, d, n_tokens=base, seed=s_pilot, **kw)
    want = base * (float(params["se_ratio"]) * pilot.se / abs(closed)) ** 2 if closed != 0 else math.inf
    n = int(min(max(base, math.ceil(want)), cap))
    est = tangent_lyapunov(k, d, n_tokens=n, seed=s_final, **kw)
    return {"d": d, "d_c": info["d_c"], "kappa_ratio": info["kappa_ratio"], "closed_form": closed,
            "estimate": est.mean, "se": est.se, "z": est.z_score, "pilot_se": pilot.se, "n_tokens": n,
            "capped": bool(want > cap), "dt": est.dts[0], "seconds": time.perf_counter() - t}


def make_phase_study(config: dict, root_seed: int = 0):
    """Study of :func:`phase_task`: per activation its two sides of d_c (or one "none" cell)."""
    from meanfield.runner import Study

    c = dict(config)
    _check_phase(c)
    acts = c.pop("activations")
    grid = [{"activation": a, "side": s} for a in acts for s in phase_dimensions(a, c["d_none"])["dims"]]
    return Study("sync-phase", phase_task, grid=grid, replicas=1, root_seed=root_seed, fixed=c)


def _sign(mean: float, se: float) -> str:
    if mean + 2 * se < 0:
        return "negative"
    if mean - 2 * se > 0:
        return "positive"
    return "unresolved"


def phase_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per activation: d_c and λ_1 (closed form, simulated ± SE, sign) on both sides, and the verdict.

    Columns ``activation, kappa_ratio, d_c, d_below, closed_below, sim_below, se_below, z_below,
    sign_below, d_above, closed_above, sim_above, se_above, z_above, sign_above, n_tokens_max,
    capped, verdict``. The simulated sign is "negative" if mean + 2 SE < 0, "positive" if
    mean - 2 SE > 0, else "unresolved". Verdict (three-way): with a critical dimension,
    *consistent* if λ_1 is resolved negative below and positive above d_c, *inconsistent* if
    either side is resolved with the wrong sign or a cell is outside 3 SE of the closed form,
    *inconclusive* otherwise; without one (the "none" cell in the ``below`` columns), consistent
    if λ_1 is resolved negative there (synchronisation in every d), inconsistent if resolved
    positive, inconclusive if unresolved.
    """
    from meanfield.reporting import CONSISTENT, INCONCLUSIVE, INCONSISTENT

    rows = []
    for name, sub in frame.groupby("activation", sort=False):
        cells = {r["side"]: r for _, r in sub.iterrows()}
        first = next(iter(cells.values()))
        row = {"activation": name, "kappa_ratio": float(first["kappa_ratio"]), "d_c": float(first["d_c"])}
        for col, side in (("below", "below" if "below" in cells else "none"), ("above", "above")):
            r = cells.get(side)
            if r is None:
                row.update({f"d_{col}": math.nan, f"closed_{col}": math.nan, f"sim_{col}": math.nan,
                            f"se_{col}": math.nan, f"z_{col}": math.nan, f"sign_{col}": ""})
                continue
            row.update({f"d_{col}": int(r["d"]), f"closed_{col}": float(r["closed_form"]),
                        f"sim_{col}": float(r["estimate"]), f"se_{col}": float(r["se"]), f"z_{col}": float(r["z"]),
                        f"sign_{col}": _sign(float(r["estimate"]), float(r["se"]))})
        row["n_tokens_max"] = int(sub["n_tokens"].max())
        row["capped"] = bool(sub["capped"].any())
        far = any(abs(float(r["z"])) > 3 for r in cells.values())
        if "none" in cells:
            s = row["sign_below"]
            row["verdict"] = (INCONSISTENT if s == "positive" or far else CONSISTENT if s == "negative"
                              else INCONCLUSIVE)
        else:
            lo, hi = row["sign_below"], row["sign_above"]
            if lo == "positive" or hi == "negative" or far:
                row["verdict"] = INCONSISTENT
            elif lo == "negative" and hi == "positive":
                row["verdict"] = CONSISTENT
            else:
                row["verdict"] = INCONCLUSIVE
        rows.append(row)
    return pd.DataFrame(rows)


def fig_phase(table: pd.DataFrame, lyapunov: pd.DataFrame | None, paths: list) -> None:
    """λ_1 vs d per activation: closed form (line), simulated cells (±2 SE), d_c marked; an inset zooms on d_c."""
    from matplotlib.figure import Figure

    n = len(table)
    ncol = min(3, n)
    nrow = math.ceil(n / ncol)
    fig = Figure(figsize=(4.2 * ncol, 3.3 * nrow))
    axes = np.atleast_1d(fig.subplots(nrow, ncol)).ravel()
    for ax, (_, row) in zip(axes, table.iterrows()):
        name = row["activation"]
        k = _kernel(name)
        top = max(32, int(np.nanmax([row["d_above"], row["d_below"], 0])) + 2)
        if lyapunov is not None and (lyapunov["activation"] == name).any():
            top = max(top, int(lyapunov.loc[lyapunov["activation"] == name, "d"].max()))
        dd = np.linspace(2, top, 200)
        lam = 0.5 * ((dd - 3) * k.dkappa1 - (dd - 1) * k.kappa1)
        ax.plot(dd, lam, "-", lw=1, color="C0", label="closed form")
        if lyapunov is not None:
            sub = lyapunov[lyapunov["activation"] == name]
            ax.errorbar(sub["d"], sub["lambda_sim"], yerr=2 * sub["se"], fmt="o", ms=3, color="C0", capsize=2,
                        label="simulated (table)")
        pts = [(row[f"d_{c}"], row[f"sim_{c}"], row[f"se_{c}"]) for c in ("below", "above") if
               np.isfinite(row[f"d_{c}"])]
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[2 * p[2] for p in pts], fmt="s", ms=4,
                    color="C3", capsize=3, label="simulated (phase cells)")
        ax.axhline(0, color="k", lw=0.7)
        title = f"{name}: r = {row['kappa_ratio']:.3f}"
        if np.isfinite(row["d_c"]):
            ax.axvline(row["d_c"], color="C3", ls="--", lw=1)
            title += f", d_c = {row['d_c']:.2f}"
            ins = ax.inset_axes([0.08, 0.55, 0.36, 0.38])
            lo, hi = row["d_below"] - 0.5, row["d_above"] + 0.5
            zz = np.linspace(lo, hi, 20)
            ins.plot(zz, 0.5 * ((zz - 3) * k.dkappa1 - (zz - 1) * k.kappa1), "-", lw=1, color="C0")
            ins.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[2 * p[2] for p in pts], fmt="s", ms=3,
                         color="C3", capsize=2)
            ins.axhline(0, color="k", lw=0.6)
            ins.axvline(row["d_c"], color="C3", ls="--", lw=0.8)
            ins.tick_params(labelsize=6)
        else:
            title += ", no sign change"
        ax.set_title(title + f" ({row['verdict']})", fontsize=9)
        ax.set_xlabel("d"), ax.set_ylabel("λ_1")
    for ax in axes[n:]:
        ax.set_visible(False)
    axes[0].legend(fontsize=6, loc="best")
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)
