"""``meanfield spde``: solve the McKean–Vlasov SPDE from flags or a TOML file.

Writes ``<output>.npz`` (the node clouds of the characteristics scheme, or the coefficients
of an Eulerian scheme, with JSON metadata: parameters, seed, noise, package version; read it
back with :meth:`meanfield.spde.CharacteristicsSolution.load` or
:meth:`meanfield.spde.SPDESolution.load`),
``<output>.json`` (the resolved settings) and ``<output>.png`` (the density at the saved
times: Mollweide maps on S^2, a line plot on S^1), and prints the paths. If the solver
loses resolution, the part computed so far is saved as ``<output>_partial.{npz,json,png}``
and the command exits with code 3, naming remedies computed from the settings.

A TOML configuration uses the long flag names with underscores, e.g.::

    d = 3
    scheme = "characteristics"
    beta = 1.0
    lmax = 32
    nodes = 8192
    dt = 0.015625
    T = 4.0
    n_save = 5
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
import tempfile
from pathlib import Path

import numpy as np

from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath, RotationNoise
from meanfield.spde import (
    CharacteristicsError,
    CharacteristicsSolution,
    Mixture,
    SPDEResolutionError,
    Uniform,
    VonMisesFisher,
    solve_spde,
)
from meanfield.studies._common import write_config

from . import SUMMARIES
from ._common import (
    CITATION,
    EXIT_CODES_HELP,
    EXIT_FILESYSTEM,
    EXIT_UNRESOLVED,
    CommandError,
    HelpFormatter,
    check_output_file,
    fs_error,
)

#: Built-in defaults (used when neither a flag nor the config file sets a value).
DEFAULTS = {
    "d": 3,
    "scheme": "characteristics",
    "beta": 1.0,
    "lmax": 32,
    "nodes": 8192,
    "dt": 0.015625,
    "T": 4.0,
    "n_save": 5,
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


DESCRIPTION = f"""\
Solve the stochastic McKean-Vlasov SPDE of the token density on S^1 or S^2 on one common
noise path: by characteristics (default; the density is carried by a weighted quadrature
cloud moved with the particles' step maps, so it stays resolved through synchronisation) or
by an Eulerian spectral scheme (push-forward or exponential, at a fixed degree --lmax), from flags or a TOML file (flags
override the file; a TOML file uses the long option names with underscores, e.g.
noise_lmax = 8).

Writes OUTPUT.npz (times, coefficients, metadata), OUTPUT.json (the resolved settings)
and OUTPUT.png (the density at the saved times). If the solution stops being resolved,
the part computed so far is saved as OUTPUT_partial.npz/.json/.png (exit code 3).

Reference: {CITATION}."""

#: Help of each option (the default is appended from :data:`DEFAULTS`).
_HELP = {
    "d": "ambient dimension: 2 (S^1) or 3 (S^2)",
    "scheme": "characteristics, pushforward or exponential",
    "beta": "attention inverse temperature (any real; < 0 weights distant tokens more)",
    "lmax": "harmonic degree of the state of the Eulerian schemes; degree of the reported coefficients (>= 1)",
    "nodes": "characteristics scheme: number of quadrature nodes (S^2: rounded to 2 n^2) (>= 8)",
    "dt": "time step (> 0)",
    "T": "final time (> 0, a multiple of --dt)",
    "n_save": "number of saved times, including t = 0 (>= 1)",
    "noise": "activation of the MLP noise (relu, tanh, gelu, erf, linear), 'rotation' or 'none'",
    "noise_lmax": "truncation degree l_sigma of the noise (>= 0)",
    "noise_scale": "output scale sigma of the noise (>= 0)",
    "seed": "seed of the noise path (>= 0)",
    "init": "initial density: vmf, uniform or mixture",
    "kappa": "von Mises-Fisher concentration (>= 0)",
    "mu": "von Mises-Fisher mean direction, d numbers (default: the last axis)",
    "filter": "order of the exponential spectral filter (>= 1; default: off)",
    "tail_tol": "stop when the spectral tail exceeds this (> 0)",
    "neg_tol": "stop when the negative mass exceeds this (> 0)",
    "output": "output prefix: writes PREFIX.npz, PREFIX.json and PREFIX.png",
}


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``spde`` subcommand to an ``argparse`` subparsers object and return its parser."""
    p = subparsers.add_parser(
        "spde",
        help=SUMMARIES["spde"],
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=HelpFormatter,
    )

    def opt(key, **kw):
        text = _HELP[key]
        if "default" not in text:
            text += f" (default: {DEFAULTS[key]})"
        p.add_argument(_flag(key), dest=key, help=text, **kw)

    p.add_argument("--config", metavar="FILE", help="TOML file with the parameters (flags override it)")
    opt("d", type=int, choices=(2, 3))
    opt("scheme", choices=("characteristics", "pushforward", "exponential"))
    opt("beta", type=float)
    opt("lmax", type=int)
    opt("nodes", type=int)
    opt("dt", type=float)
    opt("T", type=float)
    opt("n_save", type=int)
    opt("noise")
    opt("noise_lmax", type=int)
    opt("noise_scale", type=float)
    opt("seed", type=int)
    opt("init", choices=("vmf", "uniform", "mixture"))
    opt("kappa", type=float)
    opt("mu", type=float, nargs="+")
    p.add_argument("--no-attention", dest="attention", action="store_const", const=False,
                   help="pure noise: no attention term")
    opt("filter", type=int)
    opt("tail_tol", type=float)
    opt("neg_tol", type=float)
    opt("output", metavar="PREFIX")
    p.add_argument("--no-plot", dest="plot", action="store_const", const=False, help="skip the figure")
    p.add_argument("--progress", action="store_true", default=False, help="show a progress bar of the time steps")
    p.set_defaults(func=main)
    return p


def _read_config(path: str) -> dict:
    import tomllib

    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise fs_error("cannot read the configuration file", path, exc) from None
    try:
        cfg = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CommandError(f"cannot parse the configuration file {path!r} as TOML: {exc}") from None
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise CommandError(f"unknown keys in {path}: {sorted(unknown)}; allowed: {sorted(DEFAULTS)}")
    return cfg


def _settings(args) -> tuple[dict, dict]:
    """The settings (flag, else config file, else default) and where each came from."""
    path = getattr(args, "config", None)
    cfg = _read_config(path) if path else {}
    out, source = {}, {}
    for key, default in DEFAULTS.items():
        flag = getattr(args, key, None)
        if flag is not None:
            out[key], source[key] = flag, _flag(key)
        elif key in cfg:
            out[key], source[key] = cfg[key], f"{key} (in {path})"
        else:
            out[key], source[key] = default, key
    return out, source


def _check(s: dict, source: dict) -> dict:
    """Check every setting, with a message naming the option (or config key) that set it."""

    def bad(key, what):
        return CommandError(f"{source[key]} {what}, got {s[key]!r}")

    def number(key, kind=float, low=None, strict=False, optional=False):
        v = s[key]
        if v is None and optional:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not float(v).is_integer()):
            raise bad(key, "must be " + ("an integer" if kind is int else "a number"))
        v = kind(v)
        if not math.isfinite(v):
            raise bad(key, "must be finite")
        if low is not None and (v <= low if strict else v < low):
            raise bad(key, f"must be {'>' if strict else '>='} {low:g}")
        s[key] = v
        return v

    if s["d"] not in (2, 3):
        raise bad("d", "must be 2 (S^1) or 3 (S^2)")
    for key, choices in (("scheme", ("characteristics", "pushforward", "exponential")),
                         ("init", ("vmf", "uniform", "mixture"))):
        if s[key] not in choices:
            raise bad(key, "must be one of " + ", ".join(choices))
    number("beta")
    number("lmax", int, low=1)
    number("nodes", int, low=8)
    number("dt", low=0.0, strict=True)
    number("T", low=0.0, strict=True)
    number("n_save", int, low=1)
    number("noise_lmax", int, low=0)
    number("noise_scale", low=0.0)
    number("seed", int, low=0)
    number("kappa", low=0.0)
    number("filter", int, low=1, optional=True)
    number("tail_tol", low=0.0, strict=True)
    number("neg_tol", low=0.0, strict=True)
    if not isinstance(s["noise"], str):
        raise bad("noise", "must be a name")
    if s["mu"] is not None and (not isinstance(s["mu"], list) or len(s["mu"]) != s["d"]):
        raise bad("mu", f"must have d = {s['d']} entries")
    n_steps = round(s["T"] / s["dt"])
    if n_steps < 1 or abs(n_steps * s["dt"] - s["T"]) > 1e-9 * max(1.0, s["T"]):
        raise CommandError(f"{source['T']} = {s['T']:g} must be a positive multiple of {source['dt']} = {s['dt']:g}")
    if not str(s["output"]):
        raise bad("output", "must not be empty")
    return s


def _build(s: dict):
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

    n = len(sol)
    if isinstance(sol, CharacteristicsSolution):
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        fig = plt.figure(figsize=(4.5 * cols, (2.8 if sol.d == 3 else 2.6) * rows))
        for i in range(n):
            ax = fig.add_subplot(rows, cols, i + 1, projection="mollweide" if sol.d == 3 else None)
            sol.plot(i, ax)
        fig.suptitle(f"SPDE density by characteristics ({sol.meta.get('M')} initial nodes, β = {sol.meta['beta']:g})")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return
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


def _save_all(sol, prefix: str, settings: dict, plot: bool) -> list[str]:
    """Write PREFIX.npz, PREFIX.json and (with ``plot``) PREFIX.png; return the paths."""
    sol.meta["cli_settings"] = settings
    paths = [sol.save(prefix + ".npz"), str(write_config(prefix + ".json", {"command": "spde", **settings}))]
    if plot and len(sol):
        _plot(sol, prefix + ".png")
        paths.append(prefix + ".png")
    return paths


def _save_or_fallback(sol, prefix: str, settings: dict, plot: bool) -> list[str]:
    try:
        return _save_all(sol, prefix, settings, plot)
    except OSError as exc:
        where = Path(tempfile.mkdtemp(prefix="meanfield-spde-")) / Path(prefix).name
        saved = sol.save(str(where) + ".npz")
        raise CommandError(f"cannot write {prefix!r}.npz/.json/.png: {exc.strerror or exc}; the solution was saved "
                           f"to {saved}", EXIT_FILESYSTEM) from None


def _remedies(exc, s: dict) -> str:
    """Remedies for an unresolved run, computed from the settings and where the run stopped."""
    times = exc.solution.times
    t_ok = float(times[-2]) if len(times) >= 2 else 0.0
    tips = []
    if t_ok > 0:
        tips.append(f"stop at the last resolved time (--T {t_ok:g})")
    tips.append("follow the density without a degree limit (--scheme characteristics)")
    tips.append(f"raise the resolution (--lmax {2 * s['lmax']})")
    if s["filter"] is None:
        tips.append("damp the highest degrees (--filter 16)")
    if exc.reason == "tail":
        tips.append(f"accept a larger spectral tail (--tail-tol, now {s['tail_tol']:g})")
    else:
        tips.append(f"take smaller steps (--dt {s['dt'] / 2:g})")
        if exc.reason == "negative":
            tips.append(f"accept more negative mass (--neg-tol, now {s['neg_tol']:g})")
    return (f"resolved up to t = {t_ok:g} of T = {s['T']:g} (checked at the {s['n_save']} saved times); "
            "remedies: " + "; ".join(tips))


def main(args) -> int:
    """Solve, save ``.npz``, ``.json`` (+ ``.png``) and print where they are (exit codes: see ``--help``)."""
    s, source = _settings(args)
    s = _check(s, source)
    out = str(s["output"])
    check_output_file(out + ".npz")
    d, rho0, noise, T = _build(s)
    dt = s["dt"]
    n_steps = int(round(T / dt))
    n_save = s["n_save"]
    save_steps = np.unique(np.rint(np.linspace(0, n_steps, n_save)).astype(int)) if n_save > 1 else np.array([n_steps])
    extra = {"M": s["nodes"]} if s["scheme"] == "characteristics" else {}
    try:
        sol = solve_spde(rho0, noise, beta=s["beta"], lmax=s["lmax"], dt=dt, t_eval=save_steps * dt,
                         scheme=s["scheme"], attention=bool(s["attention"]), filter=s["filter"],
                         tail_tol=s["tail_tol"], neg_tol=s["neg_tol"], d=d, progress=bool(args.progress), **extra)
    except CharacteristicsError as exc:
        paths = _save_or_fallback(exc.solution, out + "_partial", s, bool(s["plot"])) if exc.solution is not None \
            and len(exc.solution) else []
        raise CommandError(f"{exc}. Partial solution (up to the last saved time before t = {exc.time:.6g}): "
                           f"{', '.join(paths) or 'none saved'}", EXIT_UNRESOLVED) from None
    except SPDEResolutionError as exc:
        paths = _save_or_fallback(exc.solution, out + "_partial", s, bool(s["plot"]))
        reason = str(exc).split("; raise", 1)[0]
        raise CommandError(f"{reason}; {_remedies(exc, s)}. Partial solution (up to t = {exc.time:.6g}, last state "
                           f"unresolved): {', '.join(paths)}", EXIT_UNRESOLVED) from None
    paths = _save_or_fallback(sol, out, s, bool(s["plot"]))
    print(f"coefficients and metadata: {paths[0]}")
    print(f"settings: {paths[1]}")
    if len(paths) > 2:
        print(f"figure: {paths[2]}")
    if s["scheme"] == "characteristics":
        diag = sol.diagnostics(-1)
        print(f"mass {sol.mass(-1):.15f}, variance 1 - |E x|^2 at T: {sol.variance(-1):.3g}, nodes {diag['n_nodes']}, "
              f"unresolved mass {diag['unresolved_mass']:.3g}, wall time {sol.meta.get('wall_time_s', float('nan')):.3g} s")
    else:
        print(f"mass {sol.mass(-1):.15f}, min density {sol.min_density(-1):.3g}, "
              f"spectral tail {sol.tail_energy(-1):.3g}")
    return 0


#: Former name of :func:`main`.
run = main
