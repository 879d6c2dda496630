"""``meanfield demo``: a deep transformer and its SDE limit on one common noise path.

Runs, on built-in defaults (S^2, 32 tokens, ReLU noise of degree 8, β = 1, T = 2):

1. the Gaussian-field transformer with L layers, whose layer fields are the
   increments of a :class:`~meanfield.noise.NoisePath`;
2. the limiting particle SDE (projected Euler, dt = T / 2^10) on the *same* path;

prints a summary (kept fraction of κ(1), top Lyapunov exponent, gap energy at start and
end, transformer-vs-SDE distance at T, largest ``| |x| - 1 |``) and writes a PNG of the token
trajectories and ``config.json`` (the settings) into ``--out``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from .._validate import as_beta, as_float, as_int
from ..attention import gap_energy
from ..kernels import ActivationKernel, lyapunov_exponent
from ..noise import NoisePath
from ..particles import solve_particles
from ..transformer import Transformer
from . import SUMMARIES
from ._common import CITATION, EXIT_CODES_HELP, HelpFormatter, check_output_dir

__all__ = ["register", "main", "run_demo"]

DESCRIPTION = f"""\
A deep transformer and its SDE limit on one common noise path (defaults: S^2, 32 tokens,
ReLU noise of degree 8, beta = 1, T = 2). Prints a summary (kept fraction of kappa(1), top
Lyapunov exponent, gap energy at start and end, transformer-vs-SDE distance at T) and
writes demo_trajectories.png and config.json into --out.

Reference: {CITATION}."""


def register(subparsers) -> None:
    """Add the ``demo`` subcommand to an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "demo",
        help=SUMMARIES["demo"],
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--out", default="meanfield-out", help="output directory (created)")
    p.add_argument("--d", type=int, default=3, choices=(2, 3), help="ambient dimension: 3 = S^2, 2 = S^1")
    p.add_argument("--tokens", type=int, default=32, help="number of tokens N")
    p.add_argument("--layers", type=int, default=256, help="transformer depth L")
    p.add_argument("--beta", type=float, default=1.0, help="attention inverse temperature")
    p.add_argument("--T", type=float, default=2.0, help="horizon T")
    p.add_argument("--lmax", type=int, default=8, help="degree of the ReLU noise field")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise path and the tokens")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.set_defaults(func=main)


def main(args) -> int:
    """Run the demo on the parsed options, print the summary, write the figure and config.json."""
    plot = not args.no_plot
    if plot:
        check_output_dir(args.out)
    summary = run_demo(
        out=args.out, d=args.d, n_tokens=args.tokens, layers=args.layers, beta=args.beta, T=args.T,
        lmax=args.lmax, seed=args.seed, plot=not args.no_plot,
    )
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {text}")
    if plot:
        from ..studies._common import write_config  # the study helpers import pandas: only when writing

        settings = {"command": "demo", "d": args.d, "tokens": args.tokens, "layers": args.layers, "beta": args.beta,
                    "T": args.T, "lmax": args.lmax, "seed": args.seed}
        print(f"settings: {write_config(Path(args.out) / 'config.json', settings)}")
    return 0


#: Former name of :func:`main`.
_main = main


def run_demo(*, out="meanfield-out", d: int = 3, n_tokens: int = 32, layers: int = 256, beta: float = 1.0,
             T: float = 2.0, lmax: int = 8, seed: int = 0, plot: bool = True) -> dict:
    """Run the demo and return its summary as a dict (see the module docstring).

    Examples
    --------
    >>> s = run_demo(n_tokens=8, layers=16, plot=False)   # doctest: +SKIP
    >>> sorted(s)[:2]                                       # doctest: +SKIP
    ['SDE steps', 'Lyapunov exponent λ_1']
    """
    d = as_int(d, "d", min_value=2, max_value=3)
    n_tokens = as_int(n_tokens, "tokens", min_value=1)
    layers = as_int(layers, "layers", min_value=1)
    beta = as_beta(beta)
    T = as_float(T, "T", min_value=0.0, strict_min=True)
    lmax = as_int(lmax, "lmax", min_value=0)
    seed = as_int(seed, "seed", min_value=0)
    start = time.perf_counter()
    kernel = ActivationKernel("relu")
    noise = NoisePath(kernel, d, lmax, seed=seed, t_max=T)
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal((n_tokens, d))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)

    model = Transformer(d, layers, None, T, beta, kernel, noise=noise)
    tr = model.run(x0)
    # the SDE on a grid 2^10 fine, saved at the layer times for the plot
    n_fine = 2**10
    fine = max(n_fine, layers)
    dt = T / fine
    t_layers = tr.t
    sde_times = t_layers if fine % layers == 0 else np.array([0.0, T])
    sde = solve_particles(x0, noise, beta, dt, sde_times, scheme="euler")

    dist = float(np.sqrt(np.mean(np.sum((tr.final - sde.final) ** 2, axis=1))))
    summary = {
        "sphere": f"S^{d - 1} (d = {d})",
        "tokens N": n_tokens,
        "transformer layers L": layers,
        "SDE steps": fine,
        "beta": beta,
        "horizon T": T,
        "noise": f"ReLU, degree l_σ = {lmax}",
        "kappa(1) truncated": float(noise.kappa1),
        "kept fraction of kappa(1)": float(noise.kept_fraction),
        "Lyapunov exponent λ_1": float(lyapunov_exponent(noise.kernel, d)),
        "gap energy E_β at t = 0": float(gap_energy(x0, beta)),
        "gap energy at T, transformer": float(gap_energy(tr.final, beta)),
        "gap energy at T, SDE": float(gap_energy(sde.final, beta)),
        "RMS distance transformer vs SDE at T": dist,
        "largest | |x| - 1 |": max(tr.meta["max_norm_error"], sde.meta["max_norm_error"]),
    }
    if plot:
        outdir = Path(out)
        outdir.mkdir(parents=True, exist_ok=True)
        path = outdir / "demo_trajectories.png"
        _plot(tr.x, sde.x if sde.x.shape[0] == tr.x.shape[0] else None, d, path,
              title=f"N = {n_tokens}, L = {layers}, β = {beta:g}, T = {T:g}, ReLU noise l_σ = {lmax}", beta=beta)
        summary["plot"] = str(path)
    summary["wall time [s]"] = time.perf_counter() - start
    return summary


def _plot(traj, sde, d, path, title, beta, n_show=6):
    """Left: trajectories of the first ``n_show`` tokens (transformer solid, SDE dashed) and the
    final positions of all tokens; right: the gap energy E_β along depth for both models."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_show = min(n_show, traj.shape[1])
    colours = plt.cm.tab10(np.arange(n_show) % 10)
    fig = plt.figure(figsize=(11, 5))
    t = np.linspace(0, 1, traj.shape[0])
    if d == 3:
        ax = fig.add_subplot(1, 2, 1, projection="3d")
        u, v = np.mgrid[0 : 2 * math.pi : 30j, 0 : math.pi : 15j]
        ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.88", linewidth=0.4)
        for i in range(n_show):
            ax.plot(*traj[:, i].T, color=colours[i], linewidth=1.3)
            if sde is not None:
                ax.plot(*sde[:, i].T, color=colours[i], linewidth=0.9, linestyle="--")
        ax.scatter(*traj[-1].T, color="k", s=10, label="transformer, t = T")
        if sde is not None:
            ax.scatter(*sde[-1].T, color="r", marker="x", s=12, label="SDE, t = T")
        ax.set_box_aspect((1, 1, 1))
        ax.set_axis_off()
        ax.legend(loc="lower left", fontsize=8)
    else:
        ax = fig.add_subplot(1, 2, 1)
        for i in range(n_show):
            ax.plot(t, np.unwrap(np.arctan2(traj[:, i, 1], traj[:, i, 0])), color=colours[i], linewidth=1.3)
            if sde is not None:
                ax.plot(t, np.unwrap(np.arctan2(sde[:, i, 1], sde[:, i, 0])), color=colours[i],
                        linewidth=0.9, linestyle="--")
        ax.set_xlabel("t / T")
        ax.set_ylabel("angle θ (unwrapped)")
    ax.set_title(f"{n_show} token paths: solid transformer, dashed SDE", fontsize=9)
    ax2 = fig.add_subplot(1, 2, 2)
    ax2.plot(t, [gap_energy(x, beta) for x in traj], label="transformer")
    if sde is not None:
        ax2.plot(t, [gap_energy(x, beta) for x in sde], "--", label="particle SDE")
    ax2.set_xlabel("t / T")
    ax2.set_ylabel("gap energy E_β (0 = all tokens together)")
    ax2.legend(fontsize=8)
    fig.suptitle(title + " — one common noise path", fontsize=10)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
