"""The random quadratic form of Engel and Shalova (arXiv 2603.06187) as a user-written noise source.

The source and the one-step Lyapunov estimator are the code blocks of the user guide page
``docs/guide/published.rst`` (group ``rqf``), executed here so that the tested code is the
documented code. Checks: the tangential covariance rate is ``kappa1 = σ²/2`` with the normal
part uncorrelated (what the Itô correction of the Euler step needs); Euler and Heun runs on one
path converge to each other (both solve the Stratonovich equation); λ_1 = -σ² for every d, by
one-step tangent samples and by the QR products of the source's own linear fields; the Lyapunov
spectrum of the Euler product.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from meanfield.particles import solve_particles
from meanfield.studies.synchronisation import linear_flow_lyapunov

DOC = Path(__file__).resolve().parents[1] / "docs" / "guide" / "published.rst"


def _guide_namespace(group: str) -> dict:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(rf"^\.\. testcode:: {group}\n\n((?:(?:   .*)?\n)+)", text, flags=re.M)
    assert blocks, f"no testcode blocks of group {group!r} in {DOC.name}"
    ns: dict = {}
    for block in blocks:
        exec(compile(textwrap.dedent(block), f"{DOC.name}[{group}]", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def rqf():
    return _guide_namespace("rqf")


def test_tangential_covariance_is_kappa1(rqf):
    # 4096 disjoint increments at one point: E|P_x ΔW|² = (d-1) κ1 h, E<x,ΔW>² = σ² h, and the two parts uncorrelated
    d, sigma, h, m = 4, 1.5, 2.0**-8, 4096
    noise = rqf["QuadraticFormNoise"](d, sigma=sigma, seed=3, t_max=m * h)
    assert noise.kappa1 == sigma**2 / 2 and noise.describe()["sigma"] == sigma
    x = np.array([[0.5, -0.5, 0.5, 0.5]])
    dw = np.array([noise.field(k * h, (k + 1) * h)(x)[0] for k in range(m)])
    normal = dw @ x[0]
    tang = dw - normal[:, None] * x[0]
    t2 = (tang**2).sum(axis=1) / ((d - 1) * h)
    n2 = normal**2 / h
    cross = normal[:, None] * tang / h
    assert abs(t2.mean() - noise.kappa1) < 4 * t2.std(ddof=1) / np.sqrt(m)
    assert abs(n2.mean() - sigma**2) < 4 * n2.std(ddof=1) / np.sqrt(m)
    assert np.all(np.abs(cross.mean(axis=0)) < 4 * cross.std(axis=0, ddof=1) / np.sqrt(m))


def test_euler_and_heun_converge_to_one_solution(rqf):
    # Euler solves the Itô form with drift -(d-1) κ1 x / 2 produced by Π, Heun the Stratonovich form:
    # on one path their difference must vanish as h -> 0 (strong order 1/2); a wrong Itô drift would
    # leave a difference of order κ1 T
    d, T = 3, 1.0
    x0 = np.random.default_rng(0).standard_normal((8, d))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    hs = [2.0**-5, 2.0**-7, 2.0**-9]
    diffs = []
    for h in hs:
        per_path = []
        for seed in range(4):
            noise = rqf["QuadraticFormNoise"](d, seed=seed, t_max=T)
            e = solve_particles(x0, noise, 0.0, h, [T], attention="off").final
            hn = solve_particles(x0, noise, 0.0, h, [T], attention="off", scheme="heun").final
            per_path.append(np.abs(e - hn).max())
        diffs.append(np.mean(per_path))
    slope = np.polyfit(np.log(hs), np.log(diffs), 1)[0]
    assert 0.35 < slope < 0.8, (diffs, slope)


@pytest.mark.parametrize("d", [3, 6])
def test_lyapunov_one_step(rqf, d):
    lam, se = rqf["rqf_lyapunov"](d, n_samples=1 << 17, seed=d)
    assert abs(lam + 1.0) < 3 * se, (d, lam, se)


def test_lyapunov_sigma_scaling(rqf):
    lam, se = rqf["rqf_lyapunov"](3, n_samples=1 << 17, seed=11, sigma=0.5)
    assert abs(lam + 0.25) < 3 * se, (lam, se)
    # the source's own σ (NoiseSource's keyword) scales its fields: QR products give -σ²
    make = rqf["QuadraticFormNoise"]
    est = linear_flow_lyapunov(lambda s: make(3, seed=s, t_max=16.0, sigma=0.5), 3, dt=2.0**-5, t_total=16.0,
                               n_replicas=8, seed=5)
    assert abs(est.z_score(-0.25)) < 3, (est.sphere, est.sphere_se)


def test_lyapunov_spectrum_of_the_source_fields(rqf):
    # QR products of I + ΔΩ read from the source itself (its NoiseField.omega), Richardson in dt:
    # Euler-product exponents σ²[(d+1-2k)/2 - (d+1)/4] and λ_1 = λ^Φ_2 - λ^Φ_1 = -σ²
    d, T = 3, 16.0
    make = rqf["QuadraticFormNoise"]
    est = linear_flow_lyapunov(lambda s: make(d, seed=s, t_max=T), d, dt=2.0**-5, t_total=T, n_replicas=8, seed=1)
    predicted = (d + 1 - 2 * np.arange(1, d + 1)) / 2 - (d + 1) / 4
    assert est.richardson
    assert abs(est.z_score(-1.0)) < 3, (est.sphere, est.sphere_se)
    assert np.all(np.abs(est.spectrum - predicted) < 4 * est.spectrum_se), (est.spectrum, est.spectrum_se)


@pytest.mark.slow
@pytest.mark.parametrize("d", list(range(2, 11)))
def test_lyapunov_table(rqf, d):
    # the table of the user guide: one-step tangent samples (2^20 per step size) and the QR products of
    # the source's own fields (8 paths of length 16, Richardson in dt)
    lam, se = rqf["rqf_lyapunov"](d, n_samples=1 << 20, seed=100 + d)
    make = rqf["QuadraticFormNoise"]
    qr = linear_flow_lyapunov(lambda s: make(d, seed=s, t_max=16.0), d, dt=2.0**-5, t_total=16.0, n_replicas=8,
                              seed=200 + d)
    print(f"d = {d}: one-step {lam:.4f} +- {se:.4f} (z = {(lam + 1) / se:+.2f}); "
          f"QR {qr.sphere:.3f} +- {qr.sphere_se:.3f} (z = {qr.z_score(-1.0):+.2f})")
    assert abs(lam + 1.0) < 3 * se, (d, lam, se)
    assert abs(qr.z_score(-1.0)) < 3, (d, qr.sphere, qr.sphere_se)
