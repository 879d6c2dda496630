"""
Particles against the SPDE: W₂ and its grid floor
=================================================

Propagation of chaos (Prop. 1.2 of Agazzi, Bruno, Mosig García, Saviozzi, Romito,
arXiv:2604.26898): N tokens driven by one common noise path approach the solution
:math:`\\rho_t` of the McKean–Vlasov SPDE on the *same* path. We measure
:math:`W_2(\\mu^N_T, \\rho_T)` on :math:`S^1`, where the circle's exact transport solver
handles any size, and see where the measurement stops being able to resolve the error:
comparing a cloud with a density given at quadrature nodes also measures the quantisation
of the density by those nodes, the *grid floor*.
"""

# %%
# One noise path, the SPDE and the particles
# ------------------------------------------
# The SPDE is solved by the push-forward spectral scheme at degree 64; the particles start
# from independent samples of the same initial density and use the same step.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath
from meanfield.particles import solve_particles
from meanfield.rates import rate_table, slope_summary
from meanfield.spde import VonMisesFisher, solve_spde
from meanfield.transport import wasserstein, wasserstein_to_density

T, dt, beta = 0.25, 2**-6, 1.0
noise = NoisePath(ActivationKernel("relu"), d=2, lmax=6, seed=3, t_max=T)
rho0 = VonMisesFisher([1.0, 0.0], 4.0)
sol = solve_spde(rho0, noise, beta=beta, lmax=64, dt=dt, t_eval=[T], scheme="pushforward")

# %%
# The density as quadrature nodes
# -------------------------------
# :meth:`~meanfield.spde.SPDESolution.quadrature` gives ``(nodes, weights, values)``, the
# arguments of :func:`~meanfield.transport.wasserstein_to_density`. A fine grid (4096 nodes)
# and a deliberately coarse one (32 nodes) represent the same :math:`\rho_T`.
fine = sol.quadrature(-1, n=2048)
coarse = sol.quadrature(-1, n=16)


def node_cloud(quadrature):
    nodes, weights, values = quadrature
    mass = weights * np.clip(values, 0.0, None)
    return nodes, mass / mass.sum()


# The grid floor of the coarse quadrature: W₂ between its node cloud and the fine one
# (exact on the circle). The fine grid's own floor is its RMS half-cell size, 2π/(4096 √12).
(xc, wc), (xf, wf) = node_cloud(coarse), node_cloud(fine)
floors = {"coarse": wasserstein(xc, xf, wc, wf), "fine": 2 * np.pi / xf.shape[0] / np.sqrt(12)}
print({name: f"{value:.2e}" for name, value in floors.items()})

# %%
# W₂ for N = 2⁶ … 2¹²
# -------------------
# Four replicas: each draws its own initial tokens; the noise path is common. The control
# draws N independent samples of ρ_T itself (from the fine node cloud): the particles are as
# close to ρ_T as independent samples are, which is what propagation of chaos says.
Ns = 2 ** np.arange(6, 13)
nodes, mass = node_cloud(fine)
rows = []
for replica in range(4):
    for N in Ns:
        seed = np.random.SeedSequence([replica, int(N)])
        x0 = rho0.sample(int(N), seed=seed)
        xN = solve_particles(x0, noise, beta, dt, [T]).final
        iid = nodes[np.random.default_rng(seed.spawn(1)[0]).choice(nodes.shape[0], size=int(N), p=mass)]
        rows.append({"N": int(N), "replica": replica,
                     "particles": wasserstein_to_density(xN, None, *fine),
                     "particles, coarse grid": wasserstein_to_density(xN, None, *coarse),
                     "iid control": wasserstein_to_density(iid, None, *fine)})
frame = pd.DataFrame(rows)
summary = pd.concat([slope_summary(rate_table(frame, "N", name, -0.5))
                     for name in ("particles", "particles, coarse grid", "iid control")])
print(summary[["error", "slope", "slope_ci_low", "slope_ci_high", "theory_slope", "verdict"]].to_string(index=False))
mean = frame.groupby("N")[["particles", "particles, coarse grid", "iid control"]].mean()
print((mean["particles"] / mean["iid control"]).round(2).to_string())

# %%
# On the fine grid the particles' W₂ stays far above its floor and tracks the iid control
# (ratio near 1 at every N): the particles are as close to ρ_T as independent samples of
# it. Both fall a little more slowly than :math:`N^{-1/2}` over this range, with the same
# slope: that is the W₂ of an empirical measure of this concentrated density at these N,
# not an error of the particles. On the coarse grid the same particles level off at the
# coarse floor: below it, a W₂ measured against that quadrature says nothing about the
# particles, and its slope is not a rate.
fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(mean.index, mean["particles"], "o-", label="particles, 4096 nodes")
ax.loglog(mean.index, mean["iid control"], "^-", label="iid samples of ρ_T, 4096 nodes")
ax.loglog(mean.index, mean["particles, coarse grid"], "s-", label="particles, 32 nodes")
ax.axhline(floors["coarse"], color="C2", ls=":", label="grid floor, 32 nodes")
ax.axhline(floors["fine"], color="C0", ls=":", label="grid floor, 4096 nodes")
ax.loglog(Ns, mean["particles"].iloc[0] * (Ns / Ns[0]) ** -0.5, "k--", lw=0.8, label="N^(-1/2)")
ax.set_xlabel("N")
ax.set_ylabel("W₂ to ρ_T (radians)")
ax.legend(fontsize=8)
fig.tight_layout()
