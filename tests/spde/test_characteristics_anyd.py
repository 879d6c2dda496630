"""The characteristics scheme on S^{d-1} for d >= 4 (product Gauss–Gegenbauer nodes, direct-sum attention).

References: finite differences of the step map, the package's independent softmax
attention (:func:`meanfield.attention.softmax_attention`), the spectral evaluator on S^2,
closed-form moments of the von Mises–Fisher density, the mean identity of the SPDE without
attention (E[∫ f dρ_t] = exp(-½ κ(1) l(l+d-2) t) ∫ f dρ_0 for a harmonic f of degree l), the
particle solver on the same noise, and the scheme's own forward/backward densities.
Tolerances are justified next to each assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from meanfield.attention import softmax_attention, tangent_project
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath, RandomFeatureNoise
from meanfield.particles import solve_particles
from meanfield.spde import CharacteristicsSolution, VonMisesFisher, solve_characteristics, solve_spde
from meanfield.spde._char_direct import DirectAttention
from meanfield.spde._char_maps import NoiseStep, Step, apply_step, frame, project_points
from meanfield.sphere import basis as _basis
from meanfield.sphere import monomials, sphere_area

RELU = ActivationKernel("relu")


def _vmf(d, kappa, mu=None):
    if mu is None:
        mu = np.zeros(d)
        mu[-1] = 1.0
    return VonMisesFisher(mu, kappa)


def _harmonics(x):
    """A basis of the harmonics of degree 1 and 2 on S^{d-1}: x_a, x_a x_b (a < b), x_a² - 1/d (a < d)."""
    d = x.shape[1]
    iu = np.triu_indices(d, 1)
    return np.concatenate([x, x[:, iu[0]] * x[:, iu[1]], x[:, : d - 1] ** 2 - 1.0 / d], axis=1)


def _harmonic_degrees(d):
    return np.array([1] * d + [2] * (d * (d - 1) // 2 + d - 1))


# --------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [4, 5])
@pytest.mark.parametrize("V", [None, "random"])
def test_step_jacobian_matches_finite_differences(d, V):
    """DT from the direct attention's softmax covariance and the MLP noise's φ' vs a centred difference.

    Step 1e-6: truncation ~1e-12, round-off ~1e-16/1e-6 ~ 1e-10; a ReLU kink within 1e-6 of a node
    would break the difference quotient (probability ~ width × 1e-6 per node, none here)."""
    rng = np.random.default_rng(0)
    x = _vmf(d, 4.0).sample(300, seed=1)
    m = rng.uniform(0.5, 1.5, 300)
    Vm = None if V is None else rng.standard_normal((d, d))
    att = DirectAttention(d, 1.0, Vm)
    noise = RandomFeatureNoise(RELU, d=d, width=64, seed=2, t_max=1.0)
    st = Step(2.0**-6, att.coefficients(x, m), NoiseStep(noise.field(0.0, 2.0**-6), d, 1e-12))
    y, DT = apply_step(st, att, x)
    E = frame(x)
    for j in range(d - 1):
        e, eps = E[:, :, j], 1e-6
        yp, _ = apply_step(st, att, project_points(x + eps * e)[0], jac=False)
        ym, _ = apply_step(st, att, project_points(x - eps * e)[0], jac=False)
        assert np.abs((yp - ym) / (2 * eps) - np.einsum("nab,nb->na", DT, e)).max() < 1e-8


def test_direct_attention_matches_the_softmax_sum_and_the_spectral_evaluator():
    """d = 4: the blocked direct velocity = softmax_attention (independent code) to round-off;
    d = 3: characteristics with attention_method='direct' vs 'spectral' (tol 1e-12) agree to 1e-10."""
    d = 4
    x = _vmf(d, 3.0).sample(700, seed=3)
    w = np.random.default_rng(4).uniform(0.2, 1.0, 700)
    att = DirectAttention(d, 2.0, None)
    v, _ = att.evaluate(att.coefficients(x, w), x[:200], jac=False)
    ref = tangent_project(x[:200], softmax_attention(x[:200], 2.0, y=x, weights=w))
    assert np.abs(v - ref).max() < 1e-14
    noise = NoisePath(RELU, d=3, lmax=6, seed=1, t_max=0.25)
    rho0 = _vmf(3, 4.0)
    kw = dict(n_lat=12, attention_tol=1e-12, tol=None)
    a = solve_characteristics(rho0, noise, 1.0, [0.0, 0.25], 2.0**-5, attention_method="direct", **kw)
    b = solve_characteristics(rho0, noise, 1.0, [0.0, 0.25], 2.0**-5, attention_method="spectral", **kw)
    assert a.meta["attention_method"] == "direct" and b.meta["attention_method"] == "spectral"
    # both velocities are accurate to ~1e-12; 8 steps carry that to the positions
    assert np.abs(a.positions(1) - b.positions(1)).max() < 1e-10


@pytest.mark.parametrize("d", [4, 5])
def test_initial_rule_mass_and_vmf_moments(d):
    """At t = 0: Σ m_q = 1 and E<μ, x> = I_{d/2}(κ)/I_{d/2-1}(κ) by the product rule (spectrally accurate
    for the entire function e^{κ u}); area defect 0 to round-off; log J = 0."""
    rho0 = _vmf(d, 3.0)
    sol = solve_characteristics(rho0, None, 1.0, [0.0], 0.1, d=d, n_lat=10)
    assert sol.meta["M"] == 2 * 10 ** (d - 1) and sol.meta["attention_method"] == "direct"
    assert abs(sol.mass(0) - 1.0) < 1e-13
    exact = special.ive(d / 2, 3.0) / special.ive(d / 2 - 1, 3.0)
    assert abs(sol.mean(0)[-1] - exact) < 1e-12 and np.abs(sol.mean(0)[:-1]).max() < 1e-14
    assert sol.diagnostics(0)["area_defect"] < 1e-14


def test_mass_conservation_and_density_diagnostics_d4():
    """Attention and random-feature noise on S^3: mass stays 1 to round-off (masses are only moved),
    the area defect |Σ w_q J_q - |S|| / |S| stays small while resolved, and the forward density
    ρ_0/J at the nodes equals the backward-characteristics density at the same points."""
    d = 4
    noise = RandomFeatureNoise(RELU, d=d, width=128, seed=5, t_max=0.25)
    sol = solve_characteristics(_vmf(d, 4.0), noise, 1.0, [0.0, 0.125, 0.25], 2.0**-5, n_lat=8, tol=None)
    # the rule integrates the vMF(4) density to 8e-10 with n_lat = 8; the solver only moves the masses
    assert abs(sol.mass(0) - 1.0) < 1e-8
    for i in (1, 2):
        assert abs(sol.mass(i) - sol.mass(0)) < 1e-14
    x = sol.positions(2)[::37]
    # Newton inverts each step to 1e-13; the two log-Jacobian sums then agree to ~1e-12
    assert np.abs(sol.node_density(2)[::37] / sol.density(2, x) - 1).max() < 1e-9
    assert sol.energy(2) < sol.energy(0)  # attention concentrates the tokens; noise of this size does not undo it here


def test_area_defect_converges_d4():
    """The area defect |Σ_q w_q J_q - |S^3|| / |S^3| is the quadrature error of ∫ J = |S^3| (Φ is a
    diffeomorphism): it must shrink as the rule is refined. ReLU random features make J piecewise
    smooth (jumps across the kinks of the field), so the convergence is slow but clear: measured
    2.2e-2 (n_lat = 8, 1024 nodes) and 5.0e-4 (n_lat = 16, 8192 nodes) at t = 0.25."""
    d = 4
    noise = RandomFeatureNoise(RELU, d=d, width=128, seed=5, t_max=0.25)
    defects = []
    for n in (8, 16):
        sol = solve_characteristics(_vmf(d, 4.0), noise, 0.0, [0.0, 0.25], 2.0**-5, n_lat=n, tol=None, attention=False)
        defects.append(sol.diagnostics(1)["area_defect"])
    assert defects[1] < defects[0] / 8, defects
    assert defects[1] < 2e-3


def test_nodes_follow_the_particle_map_d5():
    """Without attention the nodes are particles: the same projected step as solve_particles, to round-off."""
    d = 5
    noise = RandomFeatureNoise(RELU, d=d, width=64, seed=2, t_max=0.2)
    sol = solve_characteristics(_vmf(d, 1.0), noise, 0.0, [0.0, 0.2], 0.05, n_lat=5, attention=False, tol=None)
    p = solve_particles(sol.positions(0), noise, 0.0, 0.05, [0.0, 0.2], attention="off")
    assert np.abs(p.x[-1] - sol.positions(1)).max() < 1e-14
    # push() re-applies the stored maps to any points: the nodes' own starting points give the nodes
    assert np.abs(sol.push(sol.initial_positions(1), 1) - sol.positions(1)).max() < 1e-15


def test_mean_identity_d4():
    """SPDE mean identity without attention on S^3 (d = 4), l = 1, 2, within 4 Monte Carlo SE over paths.

    E[∫ f dρ_t] = exp(-½ κ(1) l(l + 2) t) ∫ f dρ_0 for the harmonics f of :func:`_harmonics`, with
    κ(1) = 1/2 (ReLU) exact for the random-feature field of every width. The scheme's one-step mean
    operator is 1 - a h + O(h²) on degree l (a = ½ κ(1) l(l+2) <= 2), a weak bias of relative size
    a² h t / 2 <= 0.06 on coefficients of size <= 0.1 (absolute <= 6e-3), below the SE (~2e-2 with
    48 paths). Power: the S^2 rate l(l+1) in place of l(l+2) moves the degree-1 prediction by 0.09
    of the coefficients (~0.4), about 2 SE. Measured |z| <= 1.6 (13 harmonics)."""
    d, T, h, n_paths = 4, 0.5, 1.0 / 16, 48
    mu = np.array([0.3, -0.2, 0.5, 0.8])
    rho0 = _vmf(d, 3.0, mu / np.linalg.norm(mu))
    out = []
    for s in range(n_paths):
        noise = RandomFeatureNoise(RELU, d=d, width=256, seed=1000 + s, t_max=T)
        sol = solve_characteristics(rho0, noise, 0.0, [0.0, T], h, n_lat=6, attention=False, tol=None, split=False,
                                    seed=s)
        out.append(sol.expect(1, _harmonics))
    c0 = sol.expect(0, _harmonics)
    out = np.array(out)
    lr = _harmonic_degrees(d)
    theory = np.exp(-0.5 * RELU.kappa1 * lr * (lr + d - 2) * T) * c0
    se = out.std(axis=0, ddof=1) / math.sqrt(n_paths)
    z = (out.mean(axis=0) - theory) / se
    assert np.abs(z).max() < 4.0, z


@pytest.mark.slow
def test_agrees_with_particles_same_noise_d4():
    """Particles (N = 8192, direct attention, 4 replicas of the iid initial sample) vs characteristics
    (M = 2·12³ = 3456 nodes) on S^3, same noise path and step, t = 0.25 and 0.5.

    Yardstick: the replica spread of the degree <= 2 monomial moments (the sampling error of the
    initial cloud, ~N^{-1/2}); |replica mean - characteristics| <= 3 × spread. The characteristics'
    own error (M -> M/2 change) is far below it."""
    d, T, h = 4, 0.5, 2.0**-5
    noise = RandomFeatureNoise(RELU, d=d, width=256, seed=7, t_max=T)
    rho0 = _vmf(d, 4.0)
    te = [0.0, 0.25, 0.5]
    c = solve_characteristics(rho0, noise, 1.0, te, h, n_lat=12, tol=None)
    reps = []
    for seed in range(4):
        p = solve_particles(rho0.sample(8192, seed=seed), noise, 1.0, h, te, attention="direct")
        reps.append([monomials(xi, 2).mean(axis=0) for xi in p.x])
    reps = np.array(reps)
    spread = reps.std(axis=0, ddof=1)
    for i in (1, 2):
        diff = np.abs(reps[:, i].mean(axis=0) - c.monomial_moments(i, 2))
        assert np.all(diff <= 3 * spread[i]), (i, diff / spread[i])


def test_fine_cloud_is_a_finer_quadrature_of_the_same_solution():
    """fine_cloud: the push-forward of a finer rule by the same maps — its moments agree with the solver's
    cloud (both quadratures of ρ_t), cell masses sum to 1, and the first-order bound exceeds the RMS estimate."""
    d = 4
    noise = RandomFeatureNoise(RELU, d=d, width=64, seed=3, t_max=0.25)
    sol = solve_characteristics(_vmf(d, 2.0), noise, 1.0, [0.0, 0.25], 2.0**-4, n_lat=8, tol=None, split=False)
    fine = sol.fine_cloud(1, n_lat=12)
    m = fine["mass"]
    assert fine["x"].shape == (2 * 12**3, d)
    # cell masses: 4-point Gauss rules in the angles on each of the 3456 cells (measured error 1e-8)
    assert abs(fine["cell_mass"].sum() - 1.0) < 1e-6 and abs(m.sum() - 1.0) < 1e-10
    coarse = sol.monomial_moments(1, 2)
    finer = m @ monomials(fine["x"], 2) / m.sum()
    # both are quadratures of (f ∘ Φ) ρ_0 with a piecewise-linear (ReLU) field: measured difference 2e-4
    assert np.abs(coarse - finer).max() < 2e-3
    assert 0 < fine["rms_cell"] < fine["bound"] < math.pi


def test_bad_inputs_any_d():
    """Clear errors, raised before any work."""
    with pytest.raises(ValueError, match="attention_method='spectral' needs d"):
        solve_characteristics("uniform", None, 1.0, 0.1, 0.05, d=4, attention_method="spectral")
    with pytest.raises(ValueError, match="attention_method must be"):
        solve_characteristics("uniform", None, 1.0, 0.1, 0.05, d=4, attention_method="fft")
    with pytest.raises(ValueError, match="n_lat is an option"):
        solve_characteristics("uniform", None, 1.0, 0.1, 0.05, d=2, n_lat=8)
    sol = solve_characteristics("uniform", None, 1.0, 0.1, 0.05, d=4, n_lat=3)
    assert abs(sol.mass(-1) - 1.0) < 1e-13 and np.abs(sol.node_density(0) - 1 / sphere_area(4)).max() < 1e-15
    with pytest.raises(ValueError, match="draws S\\^1 or S\\^2"):
        sol.density_on_grid(0)
    with pytest.raises(ValueError, match="give exactly one of M and n_lat"):
        sol.fine_cloud(0)


# --------------------------------------------------------------------------------------
# through solve_spde with the refinable field (the limit object, exact gradient)
# --------------------------------------------------------------------------------------


def test_mean_identity_d4_noise_path():
    """solve_spde(scheme="characteristics") on S^3 with NoisePath (l_σ = 4), no attention: the 13 harmonic
    coefficients of degree 1, 2 obey E[ρ_lm(t)] = exp(-½ κ_σ(1) l(l + 2) t) ρ_lm(0) within 4 SE over paths.

    κ_σ(1) = ``noise.kappa1`` is that of the truncated kernel the field carries exactly (kept fraction
    0.9973); the step maps use the field's exact gradient. Weak bias of the scheme: the one-step mean
    operator is 1 - a h + O(h²), a = ½ κ_σ(1) l(l+2) <= 2, relative a² h t / 2 <= 0.063 on coefficients
    <= 0.1 of degree 2 and <= 0.009 on those <= 0.21 of degree 1, i.e. <= 6e-3 absolute, below half
    an SE (0.013-0.021 at 64 paths). Measured: max |z| = 2.87. Power: the no-diffusion prediction
    ρ_lm(0) is rejected (max |z| = 4.5, asserted > 4); the S^2 rate l(l + 1) is not resolved at this
    path count (max |z| = 2.0), so the test checks the decay, not the dimension of the eigenvalue."""
    d, T, h, n_paths = 4, 1.0, 1.0 / 32, 64
    mu = np.array([0.3, -0.2, 0.5, 0.8])
    rho0 = _vmf(d, 3.0, mu / np.linalg.norm(mu))
    out = []
    for s in range(n_paths):
        noise = NoisePath(RELU, d=d, lmax=4, seed=2000 + s, t_max=T)
        sol = solve_spde(rho0, noise, 0.0, 2, h, [0.0, T], scheme="characteristics", n_lat=6, attention=False,
                         tol=None, split=False)
        out.append(sol.moments(1, 2)[1:])
    c0 = sol.moments(0, 2)[1:]
    out = np.array(out)
    lr = np.asarray(_basis(d, 2).ell, dtype=float)[1:]
    se = out.std(axis=0, ddof=1) / math.sqrt(n_paths)
    z = (out.mean(axis=0) - np.exp(-0.5 * noise.kappa1 * lr * (lr + d - 2) * T) * c0) / se
    assert np.abs(z).max() < 4.0, z
    z_none = (out.mean(axis=0) - c0) / se
    assert np.abs(z_none).max() > 4.0, z_none


def test_mass_conservation_d4_noise_path_with_attention():
    """Total mass is the sum of the node masses, which no step or split changes: exact to round-off,
    with attention, splitting and the refinable field (the initial rule's mass is ∫ ρ_0 to its
    quadrature error, 1.2e-7 at n_lat = 6 for vMF(κ = 3))."""
    d = 4
    noise = NoisePath(RELU, d=d, lmax=4, seed=3, t_max=0.5)
    sol = solve_spde(_vmf(d, 3.0), noise, 1.0, 2, 1.0 / 16, [0.0, 0.25, 0.5], scheme="characteristics", n_lat=6,
                     tol=None, max_nodes=2000)
    assert sol.meta["attention_method"] == "direct" and sol.meta["timing"]["split_events"] > 0
    assert max(abs(sol.mass(i) - sol.mass(0)) for i in range(3)) < 1e-13 and abs(sol.mass(0) - 1) < 1e-6


@pytest.mark.slow
def test_agrees_with_particles_same_noise_path_d4():
    """solve_spde(scheme="characteristics") (M = 2·12³ = 3456 nodes) vs particles (N = 8192, direct
    attention, 4 replicas of the iid initial sample) on S^3 with the same NoisePath (l_σ = 4), β = 1,
    h = 2^-5, t = 0.25 and 0.5: the degree-1, 2 harmonic coefficients.

    Yardstick: the replica spread (the sampling error of one N = 8192 cloud, ~N^{-1/2}, measured
    3.4e-3-4.0e-3); |replica mean - characteristics| <= 3 × spread. Measured max ratio 1.24 (t = 0.25),
    1.13 (t = 0.5). The characteristics' own error (n_lat 9 -> 12 change, <= 8.5e-4) is below the spread."""
    d, T, h = 4, 0.5, 2.0**-5
    noise = NoisePath(RELU, d=d, lmax=4, seed=7, t_max=T)
    rho0 = _vmf(d, 4.0)
    te = [0.0, 0.25, 0.5]
    c = solve_spde(rho0, noise, 1.0, 2, h, te, scheme="characteristics", n_lat=12, tol=None)
    c_coarse = solve_spde(rho0, noise, 1.0, 2, h, te, scheme="characteristics", n_lat=9, tol=None)
    b = _basis(d, 2)
    reps = []
    for seed in range(4):
        p = solve_particles(rho0.sample(8192, seed=seed), noise, 1.0, h, te, attention="direct")
        reps.append([b.real_basis(xi)[:, 1:].mean(axis=0) for xi in p.x])
    reps = np.array(reps)
    spread = reps.std(axis=0, ddof=1)
    for i in (1, 2):
        cm = c.moments(i, 2)[1:]
        diff = np.abs(reps[:, i].mean(axis=0) - cm)
        assert np.all(diff <= 3 * spread[i]), (i, diff / spread[i])
        assert np.abs(cm - c_coarse.moments(i, 2)[1:]).max() < spread[i].min(), i
