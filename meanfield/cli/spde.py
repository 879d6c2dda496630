"""``meanfield spde``: solve the McKean–Vlasov SPDE (SPEC §4, §6) from flags or a TOML file.

Writes ``<output>.npz`` (times, coefficients, JSON metadata: parameters, seed, noise,
package version; read it back with :meth:`meanfield.spde.SPDESolution.load`) and
``<output>.png`` (the density at the saved times: Mollweide maps on S^2, a line plot on
S^1), and prints both paths.

A TOML configuration uses the long flag names with underscores, e.g.::

    d = 3
    scheme = "pushforward"
    beta = 1.0
    lmax = 32
    dt = 0.01
    T = 0.5
    n_save = 3
    noise = "relu"          # an activation name, "rotation" or "none"
    noise_lmax = 8
    seed = 0
    init = "vmf"            # "vmf", "uniform" or "mixture"
    kappa = 4.0
    mu = [0.0, 0.0, 1.0]
    output = "spde_run"

Flags given on the command line override the file.
"""

from __future__ import annotations

import argparse
import math
import sys

#: Built-in defaults (used when neither a flag nor the config file sets a value).
DEFAULTS = {
    "d": 3,
    "scheme": "pushforward",
    "beta": 1.0,
    "lmax": 32,
    "dt": 0.01,
    "T": 0.5,
    "n_save": 3,
    "noise": "relu",
    "noise_lmax": 8,
    "noise_scale": 1.0,
    "seed": 0,
    "init": "vmf",
    "kappa": 4.0,
    "mu": None,
    "attention": True,
    "filter": None,
    "tail_tol": 1e-4,
    "neg_tol": 1e-3,
    "output": "spde_run",
    "plot": True,
}


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``spde`` subcommand to an ``argparse`` subparsers object and return its parser."""
    p = subparsers.add_parser(
        "spde",
        help="solve the McKean-Vlasov SPDE on S^1 / S^2 and save coefficients and a figure",
        description="Solve the stochastic McKean-Vlasov SPDE of the token density (SPEC §4, §6).",
    )
    p.add_argument("--config", help="TOML file with the parameters (flags override it)")
    p.add_argument("--d", type=int, choices=(2, 3), help="ambient dimension: 2 (S^1) or 3 (S^2)")
    p.add_argument("--scheme", choices=("pushforward", "exponential"), help="time stepper (SPEC §6 (b) / (a))")
    p.add_argument("--beta", type=float, help="attention inverse temperature")
    p.add_argument("--lmax", type=int, help="harmonic degree of the state")
    p.add_argument("--dt", type=float, help="time step")
    p.add_argument("--T", type=float, help="final time")
    p.add_argument("--n-save", dest="n_save", type=int, help="number of saved times (including t = 0)")
    p.add_argument("--noise", help="activation of the MLP noise (relu, tanh, gelu, erf, linear), 'rotation' or 'none'")
    p.add_argument("--noise-lmax", dest="noise_lmax", type=int, help="truncation degree l_sigma of the noise")
    p.add_argument("--noise-scale", dest="noise_scale", type=float, help="output scale sigma of the noise")
    p.add_argument("--seed", type=int, help="seed of the noise path")
    p.add_argument("--init", choices=("vmf", "uniform", "mixture"), help="initial density")
    p.add_argument("--kappa", type=float, help="von Mises-Fisher concentration")
    p.add_argument("--mu", type=float, nargs="+", help="von Mises-Fisher mean direction")
    p.add_argument("--no-attention", dest="attention", action="store_const", const=False, help="pure noise")
    p.add_argument("--filter", type=int, help="order of the exponential spectral filter (off by default)")
    p.add_argument("--tail-tol", dest="tail_tol", type=float, help="stop when the spectral tail exceeds this")
    p.add_argument("--neg-tol", dest="neg_tol", type=float, help="stop when the negative mass exceeds this")
    p.add_argument("--output", help="output prefix (writes PREFIX.npz and PREFIX.png)")
    p.add_argument("--no-plot", dest="plot", action="store_const", const=False, help="skip the figure")
    p.set_defaults(func=run)
    return p


def _settings(args) -> dict:
    cfg: dict = {}
    if getattr(args, "config", None):
        import tomllib

        with open(args.config, "rb") as f:
            cfg = tomllib.load(f)
        unknown = set(cfg) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown keys in {args.config}: {sorted(unknown)}; allowed: {sorted(DEFAULTS)}")
    out = {}
    for key, default in DEFAULTS.items():
        flag = getattr(args, key, None)
        out[key] = flag if flag is not None else cfg.get(key, default)
    return out


def _build(s: dict):
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath, RotationNoise
    from meanfield.spde import Mixture, Uniform, VonMisesFisher

    d = int(s["d"])
    mu = s["mu"] if s["mu"] is not None else [0.0] * (d - 1) + [1.0]
    if len(mu) != d:
        raise ValueError(f"mu must have d = {d} entries, got {mu}")
    if s["init"] == "vmf":
        rho0 = VonMisesFisher(mu, s["kappa"])
    elif s["init"] == "uniform":
        rho0 = Uniform(d)
    elif s["init"] == "mixture":
        rho0 = Mixture([VonMisesFisher(mu, s["kappa"]), VonMisesFisher([-m for m in mu], s["kappa"])], [0.5, 0.5])
    else:
        raise ValueError(f"init must be 'vmf', 'uniform' or 'mixture', got {s['init']!r}")
    T = float(s["T"])
    name = str(s["noise"]).lower()
    if name == "none":
        noise = None
    elif name == "rotation":
        noise = RotationNoise(d, s["noise_scale"], seed=s["seed"], t_max=max(T, 1e-12))
    else:
        noise = NoisePath(ActivationKernel(name, scale=s["noise_scale"]), d=d, lmax=s["noise_lmax"], seed=s["seed"],
                          t_max=max(T, 1e-12))
    return d, rho0, noise, T


def _plot(sol, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(sol)
    if sol.d == 2:
        fig, ax = plt.subplots(figsize=(7, 4))
        for i in range(n):
            th, vals = sol.density_on_grid(i)
            ax.plot(th, vals, label=f"t = {sol.times[i]:.3g}")
        ax.set_xlabel("θ")
        ax.set_ylabel("ρ(θ)")
        ax.legend()
    else:
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        fig = plt.figure(figsize=(4.5 * cols, 2.8 * rows))
        for i in range(n):
            colat, lon, vals = sol.density_on_grid(i, nlat=91, nlon=180)
            ax = fig.add_subplot(rows, cols, i + 1, projection="mollweide")
            lat = np.pi / 2 - colat
            lo = np.where(lon > np.pi, lon - 2 * np.pi, lon)
            order = np.argsort(lo)
            im = ax.pcolormesh(lo[order], lat, vals[:, order], shading="auto", cmap="viridis")
            ax.set_title(f"t = {sol.times[i]:.3g}", fontsize=9)
            ax.set_xticklabels([])
            ax.set_yticklabels([])
            fig.colorbar(im, ax=ax, orientation="horizontal", fraction=0.05, pad=0.04)
    fig.suptitle(f"SPDE density ({sol.meta.get('scheme')}, lmax = {sol.lmax}, β = {sol.beta:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args) -> int:
    """Solve, save ``.npz`` (+ ``.png``) and print where they are."""
    import numpy as np

    from meanfield.spde import SPDEResolutionError, solve_spde

    s = _settings(args)
    d, rho0, noise, T = _build(s)
    n_save = int(s["n_save"])
    if n_save < 1:
        raise ValueError(f"n_save must be >= 1, got {n_save}")
    dt = float(s["dt"])
    n_steps = int(round(T / dt))
    if abs(n_steps * dt - T) > 1e-9 * max(1.0, T):
        raise ValueError(f"T = {T} must be a multiple of dt = {dt}")
    save_steps = np.unique(np.rint(np.linspace(0, n_steps, n_save)).astype(int)) if n_save > 1 else np.array([n_steps])
    out = str(s["output"])
    try:
        sol = solve_spde(rho0, noise, beta=s["beta"], lmax=s["lmax"], dt=dt, t_eval=save_steps * dt,
                         scheme=s["scheme"], attention=bool(s["attention"]), filter=s["filter"],
                         tail_tol=s["tail_tol"], neg_tol=s["neg_tol"], d=d)
    except SPDEResolutionError as exc:
        exc.solution.meta["cli_settings"] = s
        path = exc.solution.save(out + "_partial.npz")
        print(f"meanfield spde: error: {exc}", file=sys.stderr)
        print(f"partial solution (up to t = {exc.time:.6g}): {path}", file=sys.stderr)
        return 3
    sol.meta["cli_settings"] = s
    npz = sol.save(out + ".npz")
    print(f"coefficients and metadata: {npz}")
    if s["plot"]:
        png = out + ".png"
        _plot(sol, png)
        print(f"figure: {png}")
    print(f"mass {sol.mass(-1):.15f}, min density {sol.min_density(-1):.3g}, spectral tail {sol.tail_energy(-1):.3g}")
    return 0
