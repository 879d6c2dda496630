"""Tests of the characteristics (Lagrangian quadrature) scheme for the McKean–Vlasov SPDE.

Reference solutions: the Eulerian push-forward scheme of ``solve_spde`` (same step map,
projected on degree lmax each step; resolved at small t), exact identities (mean decay
without attention, rigid rotation), the particle solver on the same noise path, and the
scheme itself at two resolutions. Tolerances are justified next to each assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield.spde._char_maps import (Attention, NoiseStep, Step, apply_step, frame, matmat, matvec, project_points,
                                      log_volume, stack, sub_outer, tangent_det, vecmat, volume_factor)
from meanfield.attention import gap_energy
from meanfield.attention_spectral import SpectralAttention
from meanfield.spde import CharacteristicsError, CharacteristicsSolution, solve_characteristics
from meanfield.harmonics import real_basis
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoiseField, NoisePath, NoiseSource, RandomFeatureNoise, RotationNoise
from meanfield.particles import solve_particles
from meanfield.spde import Mixture, SPDESolution, VonMisesFisher, solve_spde

RELU = ActivationKernel("relu")
VMF = VonMisesFisher([0, 0, 1.0], 4.0)
H = 2.0**-6


def _noise(T, seed=1, lmax=8, d=3):
    return NoisePath(RELU, d=d, lmax=lmax, seed=seed, t_max=T)


# --------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["C", "component-major"])
def test_stack_products_match_matmul(layout):
    """The entry-loop products of stacks equal np.matmul for either memory layout of their inputs.

    Each entry is a sum of k <= 3 products, which floating point computes to within
    γ_k Σ|a_i b_i| <= k u · k max|a| max|b| (u = 2^-53, Higham's bound, whatever the order or a
    fused multiply-add), so two evaluations differ by at most twice that, 2 k² u max|a| max|b|;
    the outer-product update by at most 2 · 2u (max|M| + max|u| max|v|)."""
    rng = np.random.default_rng(3)
    n = 257
    unit = 2.0**-53

    def make(a, b):
        A = rng.standard_normal((n, a, b))
        if layout == "C":
            return A
        S = stack(n, a, b)
        S[...] = A
        assert S[:, 0, 0].flags.c_contiguous
        return S

    def bound(k, p, q):
        return 2 * k * k * unit * np.abs(p).max() * np.abs(q).max()

    A, B, C = make(3, 3), make(3, 2), make(3, 3)
    v, u = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    for P, Q in ((A, B), (A, C), (np.transpose(B, (0, 2, 1)), B)):
        out = matmat(P, Q)
        assert out.shape == np.matmul(P, Q).shape and out[:, 0, 0].flags.c_contiguous
        assert np.abs(out - np.matmul(P, Q)).max() <= bound(P.shape[2], P, Q)
    assert np.abs(vecmat(v, B) - np.einsum("na,nab->nb", v, B)).max() <= bound(3, v, B)
    assert np.abs(matvec(A, v) - np.einsum("nab,nb->na", A, v)).max() <= bound(3, A, v)
    ref = np.array(A) - u[:, :, None] * v[:, None, :]
    outer = 4 * unit * (np.abs(A).max() + np.abs(u).max() * np.abs(v).max())
    assert np.abs(sub_outer(A, u, v) - ref).max() <= outer


def test_frame_is_oriented_orthonormal_and_log_det_is_the_tangent_determinant():
    """S^2 frame (both charts: |z| <= 0.9 and the polar caps): E^T E = I, E^T x = 0, e_1 × e_2 = x;
    the log-determinant of a linear map between tangent planes equals log |det| of its 2 x 2 matrix
    in the frames (det[A e_1, A e_2, y] = det(E_y^T A E_x) for y ⊥ A E_x), to round-off."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((600, 3))
    x[:200, :2] *= 1e-3  # near the poles
    x, _ = project_points(x)
    E = frame(x)
    # unit vectors normalised in floating point, and sums of three products of their entries:
    # a few ulp each, so 8e-15 (36 · 2^-52) leaves room for the two normalisations and the sums
    G = np.einsum("nai,naj->nij", E, E)
    assert np.abs(G - np.eye(2)).max() < 1e-15 * 8
    assert np.abs(np.einsum("nai,na->ni", E, x)).max() < 1e-15 * 8
    assert np.abs(np.cross(E[:, :, 0], E[:, :, 1]) - x).max() < 1e-15 * 8
    assert np.allclose(tangent_det(E, x), 1.0, rtol=0, atol=1e-14)
    # a map T_x S -> T_y S: A = E_y B E_x^T with B (2, 2) of positive determinant
    y, _ = project_points(rng.standard_normal((600, 3)))
    Ey = frame(y)
    Bm = rng.standard_normal((600, 2, 2))
    Bm[np.linalg.det(Bm) < 0, 0] *= -1.0
    A = np.einsum("nai,nij,nbj->nab", Ey, Bm, E)
    ld, det = log_volume(volume_factor(A, x, y))
    assert np.all(det > 0)
    # both determinants are formed to a few tens of ulp of |B|² (products of frame entries of
    # size 1), so log det is good to that over det B: rows with a small det B are looser
    detB = np.linalg.det(Bm)
    scale = np.sum(np.abs(Bm), axis=(1, 2)) ** 2
    assert np.all(np.abs(ld - np.log(detB)) <= 64 * 2.0**-52 * scale / detB)


def test_volume_factor_is_the_frame_determinant_for_any_matrix():
    """On S^2 the volume factor is y · cof(A) x (no frame); for *any* 3 x 3 matrix A, also one that
    does not map T_x S into T_y S, it equals det[A e_1, A e_2, y] with the frame's e_1 × e_2 = x,
    because (A a) × (A b) = cof(A)(a × b). Both are sums of 18 products of three factors (two
    entries of A of size <= a and one unit component) formed in different orders; their difference
    measured at most 0.7 u 6 a² (u = 2^-52) over 2·10^4 matrices, so 4 u 6 a² bounds it. On S^1 and
    S^3 it is the frame route itself."""
    rng = np.random.default_rng(11)
    n = 2000
    x, _ = project_points(rng.standard_normal((n, 3)))
    x[:300, :2] *= 1e-3  # the polar chart of the frame
    x, _ = project_points(x)
    y, _ = project_points(rng.standard_normal((n, 3)))
    A = rng.standard_normal((n, 3, 3)) * rng.uniform(0.1, 10.0, (n, 1, 1))
    got = volume_factor(A, x, y)
    ref = tangent_det(matmat(A, frame(x)), y)
    a = np.abs(A).max(axis=(1, 2))
    assert np.all(np.abs(got - ref) <= 4 * 2.0**-52 * 6 * a * a)
    assert np.abs(got - ref).max() > 0  # the two routes are distinct computations
    for d in (2, 4):
        xd, _ = project_points(rng.standard_normal((50, d)))
        yd, _ = project_points(rng.standard_normal((50, d)))
        Ad = rng.standard_normal((50, d, d))
        assert np.array_equal(volume_factor(Ad, xd, yd), tangent_det(matmat(Ad, frame(xd)), yd))


@pytest.mark.parametrize("d", [2, 3])
def test_step_products_in_blocks_equal_the_separate_passes(d):
    """apply_step(det=True, carry=C): the volume factor and DT @ C formed in the row blocks are the
    bits of volume_factor(DT, x, y) and matmat(DT, C) over whole arrays (elementwise per row)."""
    rng = np.random.default_rng(5)
    mu = [0, 0, 1.0] if d == 3 else [1.0, 0]
    x = VonMisesFisher(mu, 4.0).sample(9000, seed=2)
    att = Attention(d, 1.0, None, 1e-10)
    st = Step(H, att.coefficients(x, rng.uniform(0.5, 1.5, 9000)), NoiseStep(_noise(1.0, d=d).field(0.0, H), d, 1e-12))
    C = rng.standard_normal((9000, d, d - 1))
    y, DT = apply_step(st, att, x)
    y2, DC, det = apply_step(st, att, x, det=True, carry=C)
    assert np.array_equal(y, y2)
    assert np.array_equal(det, volume_factor(DT, x, y))
    assert np.array_equal(DC, matmat(DT, C))
    y3, DT3, det3 = apply_step(st, att, x, det=True)
    assert np.array_equal(DT3, DT) and np.array_equal(det3, det)
    ld, det4 = log_volume(det)
    assert det4 is det and np.array_equal(ld, log_volume(volume_factor(DT, x, y))[0])


def test_carried_nodes_are_read_only_so_a_step_computes_their_angles_once():
    """The positions a step returns cannot change, so the next step's attention adjoint and Hessian get
    the same S2Points (angles computed once); the log-dets and C are those of the separate passes."""
    from meanfield.spde._characteristics import _advance
    from meanfield.sphere._points import s2_points

    rng = np.random.default_rng(8)
    x = VonMisesFisher([0, 0, 1.0], 2.0).sample(3000, seed=3)
    att = Attention(3, 1.0, None, 1e-10)
    st = Step(H, att.coefficients(x, rng.uniform(0.5, 1.5, 3000)), NoiseStep(_noise(1.0).field(0.0, H), 3, 1e-12))
    C = rng.standard_normal((3000, 3, 2))
    y, C1, ld = _advance(x, C, np.zeros(3000), [st], att, lambda k: H)
    assert not y.flags.writeable and s2_points(y) is s2_points(y)
    y0, DT = apply_step(st, att, x)
    assert np.array_equal(y, y0) and np.array_equal(C1, matmat(DT, C))
    assert np.array_equal(ld, log_volume(volume_factor(DT, x, y0))[0])


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("V", [None, "random"])
def test_step_jacobian_matches_finite_differences(d, V):
    """DT from the analytic attention / noise derivatives vs a centred difference (step 1e-6).

    The difference quotient has truncation error ~1e-12 and round-off ~1e-16/1e-6 · |T| ~ 1e-10
    (amplified by the 1e-11 transform accuracy of the attention, hence 2e-8 on S^2)."""
    rng = np.random.default_rng(0)
    mu = [0, 0, 1.0] if d == 3 else [1.0, 0]
    x = VonMisesFisher(mu, 4.0).sample(500, seed=1)
    m = rng.uniform(0.5, 1.5, 500)
    Vm = None if V is None else rng.standard_normal((d, d))
    att = Attention(d, 1.0, Vm, 1e-10)
    st = Step(H, att.coefficients(x, m), NoiseStep(_noise(1.0, d=d).field(0.0, H), d, 1e-12))
    y, DT = apply_step(st, att, x)
    E = frame(x)
    for j in range(d - 1):
        e, eps = E[:, :, j], 1e-6
        yp, _ = apply_step(st, att, project_points(x + eps * e)[0], jac=False)
        ym, _ = apply_step(st, att, project_points(x - eps * e)[0], jac=False)
        fd = (yp - ym) / (2 * eps)
        assert np.abs(fd - np.einsum("nab,nb->na", DT, e)).max() < 2e-8


@pytest.mark.parametrize("V", [None, "random"])
def test_step_rows_do_not_depend_on_blocks_or_threads(monkeypatch, V):
    """The elementwise part of a step runs in row blocks split over threads; every block must read
    and write its own rows only, so the blocks and the threads cannot change a bit. The transforms
    are computed once and replayed (multithreaded ducc0 transforms may differ in the last bit
    between calls, which is not what is tested here)."""
    import meanfield._threads as threads

    rng = np.random.default_rng(3)
    n = threads.PARALLEL_MIN_ROWS + 7000  # split over threads, and over uneven blocks
    x = VonMisesFisher([0, 0, 1.0], 2.0).sample(n, seed=4)
    Vm = None if V is None else rng.standard_normal((3, 3))
    att = Attention(3, 1.0, Vm, 1e-10)
    ns = NoiseStep(_noise(1.0, lmax=4).field(0.0, H), 3, 1e-12)
    st = Step(H, att.coefficients(x, rng.uniform(0.5, 1.5, n)), ns)
    fields, noise = att.fields(st.att_coeffs, x, True), ns.evaluate(x, True)
    # velocity_rows divides the Hessian's rows in place: every replay gets a fresh copy
    monkeypatch.setattr(att, "fields", lambda *a: tuple(None if f is None else f.copy() for f in fields))
    monkeypatch.setattr(ns, "evaluate", lambda *a: noise)
    out, fused = [], []
    C = rng.standard_normal((n, 3, 2))
    for n_threads, rows in [("1", 1 << 20), ("2", threads.CACHE_ROWS), ("2", 1000)]:
        monkeypatch.setenv("MEANFIELD_NUM_THREADS", n_threads)
        monkeypatch.setattr(threads, "CACHE_ROWS", rows)
        out.append(apply_step(st, att, x))
        fused.append(apply_step(st, att, x, det=True, carry=C))
    for y, DT in out[1:]:
        assert np.array_equal(y, out[0][0]) and np.array_equal(DT, out[0][1])
    for got in fused[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(got, fused[0]))


@pytest.mark.parametrize("d", [2, 3])
def test_velocity_matches_spectral_attention(d):
    """v[ρ] of the node cloud = SpectralAttention.velocity(nodes, weights=masses) to its tolerance."""
    rho0 = VonMisesFisher([0, 0, 1.0] if d == 3 else [1.0, 0], 3.0)
    kw = dict(n_lat=16) if d == 3 else dict(M=256)
    sol = solve_characteristics(rho0, None, 2.0, 0.1, 0.05, d=d, **kw)
    x = sol.positions(-1)
    ref = SpectralAttention(d, 2.0, tol=1e-12).velocity(x, weights=sol.masses(-1))
    assert np.abs(sol.velocity(-1, x) - ref).max() < 2e-10  # both accurate to 1e-10 (their tol)


@pytest.mark.parametrize("d", [2, 3])
def test_points_of_the_solution_methods_are_checked(d):
    """velocity, push and density at points refuse non-finite or zero vectors by name (the point
    transforms behind them would return NaN or stop on an assertion), and read others as directions."""
    rho0 = VonMisesFisher([0, 0, 1.0] if d == 3 else [1.0, 0], 3.0)
    kw = dict(n_lat=8) if d == 3 else dict(M=64)
    sol = solve_characteristics(rho0, None, 2.0, 0.1, 0.05, d=d, **kw)
    good = np.eye(d)[:2]
    for bad in ([np.nan] + [0.0] * (d - 1), [0.0] * d, [np.inf] + [0.0] * (d - 1)):
        x = np.vstack([good, bad])
        for call in (lambda: sol.velocity(-1, x), lambda: sol.push(x, -1), lambda: sol.density(-1, x)):
            with pytest.raises(ValueError, match=r"x must hold finite, nonzero vectors.*row 2"):
                call()
    assert np.array_equal(sol.velocity(-1, 3.0 * good), sol.velocity(-1, good))


@pytest.mark.parametrize("d", [2, 3])
def test_mass_and_coefficient_layout(d):
    """Mass = 1 to round-off (masses are only moved); coefficients in SPDESolution's layouts."""
    rho0 = VonMisesFisher([0.3, -0.2, 0.9] if d == 3 else [1.0, 0.0], 4.0)
    kw = dict(n_lat=24) if d == 3 else dict(M=512)
    sol = solve_characteristics(rho0, _noise(0.5, d=d), 1.0, [0.0, 0.25, 0.5], 2.0**-5, **kw)
    for i in range(3):
        assert abs(sol.mass(i) - 1.0) < 1e-12
    b = sol.real_coefficients(2, 6)
    m, x = sol.masses(2), sol.positions(2)
    assert np.abs(b - m @ real_basis(d, 6, x)).max() < 1e-14
    sp = SPDESolution(d, 6, [0.0], sol.coefficients(2, 6)[None], 1.0)
    assert np.abs(sp.real_coefficients(0) - b).max() < 1e-15
    # the exact initial coefficients (vMF, Funk–Hecke) are integrated to round-off at t = 0
    c0 = SPDESolution(d, 6, [0.0], rho0.coefficients(6)[None], 1.0).real_coefficients(0)
    assert np.abs(sol.real_coefficients(0, 6) - c0).max() < 1e-13
    assert sol.meta["scheme"] == "characteristics" and sol.meta["M"] == len(sol.masses(0))


# --------------------------------------------------------------------------------------
# against the Eulerian push-forward scheme (same step map, resolved at small t)
# --------------------------------------------------------------------------------------


def _vs_pushforward(T, lmax, n_lat, V=None, seed=1):
    noise = _noise(T, seed=seed)
    s = solve_spde(VMF, noise, 1.0, lmax, H, [0.0, T], attention_tol=1e-12, V=V)
    c = solve_characteristics(VMF, noise, 1.0, [0.0, T], H, n_lat=n_lat, attention_tol=1e-12, V=V)
    return np.abs(c.moments(1, 4) - s.real_coefficients(1)[:25]).max()


def test_matches_pushforward_small_t():
    """S^2, vMF κ=4, β=1, ReLU noise l_σ=8, h=2^-6, t=0.25: degree <= 4 moments agree to 1e-10.

    Measured 2.1e-12 (lmax 64, n_lat 64): both schemes apply the same map; the push-forward
    projection error at lmax 64 and the quadrature error of 8192 nodes are both ~1e-12."""
    assert _vs_pushforward(0.25, 64, 64) < 1e-10


def test_matches_pushforward_general_value_matrix():
    """Same with a non-symmetric value matrix V (attention A = V N/G, spectral in both solvers)."""
    V = np.array([[1.0, 0.3, 0.0], [-0.2, 0.8, 0.1], [0.0, 0.2, 1.1]])
    assert _vs_pushforward(0.125, 64, 64, V=V) < 1e-10


@pytest.mark.slow
def test_matches_pushforward_t05_lmax128():
    """Heavier: t = 0.5, lmax 128 vs n_lat 128 (measured 2.0e-13). On this path the push-forward
    scheme itself stops being resolved at lmax 128 at t ≈ 0.6 (spectral tail > 1e-4)."""
    assert _vs_pushforward(0.5, 128, 128) < 1e-10


def test_density_backward_vs_eulerian():
    """Backward-characteristics density at t = 0.25 vs the Eulerian push-forward at lmax 192.

    The Eulerian error decays geometrically with lmax (measured at 200 points: 5e-3, 4e-4,
    1.5e-5, 1.8e-7 at lmax 48, 64, 96, 128; peak density 4.1), so lmax 192 is well below 1e-7;
    the backward density itself is exact up to the Newton residual (1e-14) and the noise
    transforms (1e-12)."""
    T = 0.25
    noise = _noise(T)
    c = solve_characteristics(VMF, noise, 1.0, [0.0, T], H, n_lat=32, attention_tol=1e-12)
    y = VonMisesFisher([0, 0, 1.0], 1.0).sample(200, seed=5)
    s = solve_spde(VMF, noise, 1.0, 192, H, [0.0, T], attention_tol=1e-12)
    assert np.abs(s.evaluate(1, y) - c.density(1, y)).max() < 1e-7


def test_forward_and_backward_densities_agree():
    """ρ_0(x_q(0)) / J_q at the nodes = backward characteristics at x_q(t) (round-off)."""
    T = 0.25
    c = solve_characteristics(VMF, _noise(T), 1.0, [0.0, T], H, n_lat=16)
    x = c.positions(1)[::7]
    assert np.abs(c.node_density(1)[::7] - c.density(1, x)).max() < 1e-11


def test_M_convergence_small_t():
    """Moments change by < 1e-11 between n_lat 64 and 90 (M = 8192 -> 16200) at t = 0.25.

    Spectral convergence of the Gauss–Legendre × uniform rule for the smooth (f ∘ Φ) ρ_0;
    the ``error_estimate`` option reports the same kind of change (against ~M/2)."""
    noise = _noise(0.25)
    a = solve_characteristics(VMF, noise, 1.0, [0.0, 0.25], H, n_lat=64, error_estimate=True)
    b = solve_characteristics(VMF, noise, 1.0, [0.0, 0.25], H, n_lat=90)
    assert np.abs(a.moments(1, 4) - b.moments(1, 4)).max() < 1e-11
    assert a.error_estimate.shape == (2,) and a.error_estimate[1] < 1e-9


_FACES = np.array([[[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[-1, 0, 0], [0, 1, 0], [0, 0, 1]],
                   [[0, 1, 0], [1, 0, 0], [0, 0, 1]], [[0, -1, 0], [1, 0, 0], [0, 0, 1]],
                   [[0, 0, 1], [1, 0, 0], [0, 1, 0]], [[0, 0, -1], [1, 0, 0], [0, 1, 0]]], dtype=float)


def _adaptive_sphere_integral(f, tol=1e-7, max_level=18, p=6):
    """∫_{S^2} f by adaptive cubature on the six gnomonic cube faces.

    A patch [a0, a1] × [b0, b1] of a face is integrated by a p × p Gauss rule (area element
    (1 + a² + b²)^{-3/2} da db); it is accepted when its value and the sum over its four
    children differ by less than tol · (patch area / 4π), else the children are refined.
    All patches of one level are evaluated in one call of f (backward characteristics are
    vectorised over points)."""
    g, gw = np.polynomial.legendre.leggauss(p)
    patches = [(f_, -1.0, 1.0, -1.0, 1.0) for f_ in range(6)]

    def rule(ps):
        ps = np.array(ps)
        fi, a0, a1, b0, b1 = ps[:, 0].astype(int), ps[:, 1], ps[:, 2], ps[:, 3], ps[:, 4]
        a = (a0 + a1)[:, None, None] / 2 + (a1 - a0)[:, None, None] / 2 * g[None, :, None]
        b = (b0 + b1)[:, None, None] / 2 + (b1 - b0)[:, None, None] / 2 * g[None, None, :]
        a, b = np.broadcast_arrays(a, b)
        F = _FACES[fi]
        v = F[:, 0][:, None, None, :] + a[..., None] * F[:, 1][:, None, None, :] + b[..., None] * F[:, 2][:, None, None, :]
        r2 = 1 + a**2 + b**2
        w = (gw[:, None] * gw[None, :])[None] * ((a1 - a0) * (b1 - b0) / 4)[:, None, None] / r2**1.5
        vals = f((v / np.sqrt(r2)[..., None]).reshape(-1, 3)).reshape(a.shape)
        return np.sum(w * vals, axis=(1, 2)), np.sum(w, axis=(1, 2))

    def children(pt):
        f_, a0, a1, b0, b1 = pt
        am, bm = (a0 + a1) / 2, (b0 + b1) / 2
        return [(f_, a0, am, b0, bm), (f_, am, a1, b0, bm), (f_, a0, am, bm, b1), (f_, am, a1, bm, b1)]

    total, level = 0.0, 0
    vals, _ = rule(patches)
    while patches:
        kids = [c for pt in patches for c in children(pt)]
        kv, ka = rule(kids)
        kv, ka = kv.reshape(-1, 4), ka.reshape(-1, 4)
        ok = np.abs(kv.sum(axis=1) - vals) <= tol * ka.sum(axis=1) / (4 * np.pi)
        level += 1
        if level >= max_level:
            ok[:] = True
        total += kv[ok].sum()
        patches = [c for i, pt in enumerate(patches) if not ok[i] for c in children(pt)]
        vals = kv[~ok].ravel()
    return total


@pytest.mark.slow
def test_density_integrates_to_one_t2():
    """∫ ρ_2 by backward characteristics = 1 within 1e-3 (adaptive cubature; measured 1 + 1.5e-6 at tol 1e-4).

    At t = 2 the density has a core contracted by e^{-11} in area plus stretched filaments, so
    a fixed 96 × 192 grid misses 10 % of the mass; the adaptive cube-sphere rule resolves it."""
    T = 2.0
    c = solve_characteristics(VMF, _noise(T), 1.0, [0.0, T], H, n_lat=64, tol=None)
    assert abs(_adaptive_sphere_integral(lambda y: c.density(1, y), tol=3e-4) - 1.0) < 1e-3


def test_adaptive_integrator_on_vmf():
    """The cubature of the test above integrates a sharp vMF (κ = 2000) to 1e-8."""
    v = VonMisesFisher([0.3, -0.2, 0.9], 2000.0)
    assert abs(_adaptive_sphere_integral(v.density, tol=1e-9) - 1.0) < 1e-8


def test_density_integrates_to_one_small_t():
    """Fast version at t = 0.25 on a 64 × 128 grid: 1e-9.

    The grid's own error converges spectrally (measured 1.7e-5, 1.7e-7, 3.0e-11, 1.3e-13 on
    32, 48, 64, 96 rings), so the residual at 64 rings is the grid's, not the density's."""
    T = 0.25
    c = solve_characteristics(VMF, _noise(T), 1.0, [0.0, T], H, n_lat=24)
    u, wu = np.polynomial.legendre.leggauss(64)
    phi = 2 * np.pi * np.arange(128) / 128
    U, P = np.meshgrid(u, phi, indexing="ij")
    s = np.sqrt(1 - U**2)
    pts = np.stack([s * np.cos(P), s * np.sin(P), U], axis=-1).reshape(-1, 3)
    assert abs(np.dot(np.repeat(wu * 2 * np.pi / 128, 128), c.density(1, pts)) - 1.0) < 1e-9
    th, ph, vals = c.density_on_grid(1, 9, 12)
    assert vals.shape == (9, 12) and np.all(vals > 0)


# --------------------------------------------------------------------------------------
# exact identities
# --------------------------------------------------------------------------------------


def test_mean_decay_no_attention():
    """E[ρ_lm(t)] = exp(-½ κ_σ(1) l(l+1) t) ρ_lm(0) (no attention) within 4 Monte Carlo SE.

    As for the push-forward scheme (test_spde.test_mean_decay_no_attention): the scheme's
    one-step mean operator is diagonal with eigenvalue 1 - a h + O(h²), a = ½ κ l(l+1), so
    the weak bias a² h t / 2 <= 0.09 relative on the decayed l <= 3 coefficients (1e-3
    absolute) is far below the Monte Carlo SE (~2e-2 with 24 paths)."""
    rho0 = VonMisesFisher(np.array([0.3, -0.2, 0.9]) / np.linalg.norm([0.3, -0.2, 0.9]), 3.0)
    L, T, h, n_seeds = 3, 1.0, 0.02, 24
    out = []
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d=3, lmax=4, seed=1000 + seed, t_max=T)
        s = solve_characteristics(rho0, noise, 0.0, [0.0, T], h, n_lat=24, attention=False, tol=None)
        out.append(s.moments(1, L))
    out = np.array(out)
    c0 = SPDESolution(3, L, [0.0], rho0.coefficients(L)[None], 0.0).real_coefficients(0)
    lr = np.repeat(np.arange(L + 1), 2 * np.arange(L + 1) + 1)
    theory = np.exp(-0.5 * noise.kappa1 * lr * (lr + 1) * T) * c0
    se = out.std(axis=0, ddof=1) / math.sqrt(n_seeds)
    z = (out.mean(axis=0) - theory)[1:] / se[1:]
    assert np.abs(z).max() < 4.0, z


def test_rotation_identity_flow():
    """Rotation identity (theory §5.5): with exact rotation steps and no attention, ρ_t = ρ_0 ∘ R^T.

    Nodes are rotated rigidly, so moments equal the exact coefficients of the rotated
    mixture (to the quadrature error of ρ_0 itself, ~1e-15), log J = 0 and the backward density
    is ρ_0(R^T y)."""
    rho0 = Mixture([VonMisesFisher([0, 0, 1.0], 4.0), VonMisesFisher([1.0, 0, 0], 8.0)], [0.6, 0.4])
    T, h = 0.3, 0.01
    noise = RotationNoise(3, 1.0, seed=3, t_max=T)
    sol = solve_characteristics(rho0, noise, 0.0, [0.0, T], h, n_lat=48, attention=False, noise_map="flow")
    R = noise.flow(T, int(round(T / h)))
    rot = Mixture([VonMisesFisher(R @ [0, 0, 1.0], 4.0), VonMisesFisher(R @ [1.0, 0, 0], 8.0)], [0.6, 0.4])
    ref = SPDESolution(3, 8, [0.0], rot.coefficients(8)[None], 0.0).real_coefficients(0)
    # measured 4.4e-12 (round-off of 30 rotation steps and of the reference product of
    # exponentials at the non-dyadic times k T/n); test_spde allows 1e-10 for the push-forward
    assert np.abs(sol.moments(1, 8) - ref).max() < 2e-11
    assert np.abs(sol.log_jacobians(1)).max() < 1e-12
    y = rot.sample(50, seed=0)
    assert np.abs(sol.density(1, y) - rot.density(y)).max() < 1e-10


def test_rotation_projected_map_on_circle():
    """S^1, rotation noise, projected map Π((I + ΔΩ)x) vs the particle step on the same nodes: identical."""
    noise = RotationNoise(2, 1.0, seed=8, t_max=0.4)
    rho0 = VonMisesFisher([1.0, 0.0], 5.0)
    sol = solve_characteristics(rho0, noise, 0.0, [0.0, 0.4], 0.02, M=64, attention=False)
    p = solve_particles(sol.positions(0), noise, 0.0, 0.02, [0.0, 0.4], attention="off")
    assert np.abs(p.x[-1] - sol.positions(1)).max() < 1e-13
    # on S^1 the projected rotation steps are rotations: J = 1
    assert np.abs(sol.log_jacobians(1)).max() < 1e-12


def test_nodes_follow_particle_map_with_generic_noise():
    """Without attention nodes are particles: random-feature noise (finite differences for DT)."""
    noise = RandomFeatureNoise(RELU, d=3, width=64, seed=2, t_max=0.2)
    sol = solve_characteristics(VMF, noise, 0.0, [0.0, 0.2], 0.05, n_lat=8, attention=False, tol=None)
    p = solve_particles(sol.positions(0), noise, 0.0, 0.05, [0.0, 0.2], attention="off")
    assert np.abs(p.x[-1] - sol.positions(1)).max() < 1e-14
    # forward (FD Jacobian) vs backward (Newton with FD Jacobian) density: the FD error ~1e-10 per step
    x = sol.positions(1)[::5]
    assert np.abs(sol.node_density(1)[::5] / sol.density(1, x) - 1).max() < 1e-7


def _particle_moments(noise, T, te, N, seed):
    x0 = VMF.sample(N, seed=seed)
    p = solve_particles(x0, noise, 1.0, H, te, attention="spectral")
    return np.array([real_basis(3, 4, xi).mean(axis=0) for xi in p.x])


@pytest.mark.slow
def test_agrees_with_particles_same_noise():
    """Particles (N = 2·10^5, 4 replicas of the iid initial sampling) vs characteristics
    (M ≈ 10^5) at t = 1, 2 and 8, on the same noise path and step.

    The sampling error of the initial cloud moves the whole cluster through attention, so the
    yardstick is the replica spread of the degree <= 4 moments: |replica mean - characteristics|
    <= 3 × spread (measured: 1.02, 0.73 and 0.22 × spread at t = 1, 2, 8)."""
    T = 8.0
    noise = _noise(T)
    te = [0.0, 1.0, 2.0, 8.0]
    c = solve_characteristics(VMF, noise, 1.0, te, H, n_lat=224, tol=None)
    reps = np.array([_particle_moments(noise, T, te, 200_000, seed) for seed in range(4)])
    spread = reps.std(axis=0, ddof=1)
    for i in (1, 2, 3):
        diff = np.abs(reps[:, i].mean(axis=0) - c.moments(i, 4))
        assert np.all(diff[1:] <= 3 * spread[i][1:] + 1e-12), (i, diff / spread[i])


# --------------------------------------------------------------------------------------
# splitting, diagnostics, energies, errors
# --------------------------------------------------------------------------------------


def test_splitting_keeps_mass_and_past():
    """Forced splits: mass stays 1 (children share the parent's mass), nodes are added, the
    diagnostics are reported, and the old nodes' trajectories are unchanged up to the split."""
    T = 1.0
    noise = _noise(T)
    kw = dict(n_lat=16, tol=None)
    a = solve_characteristics(VMF, noise, 1.0, [0.0, 0.25, 0.5, 1.0], H, split=False, **kw)
    b = solve_characteristics(VMF, noise, 1.0, [0.0, 0.25, 0.5, 1.0], H, split_threshold=0.2, split_every=16, **kw)
    assert b.meta["n_splits"] > 0 and len(b.masses(-1)) > len(a.masses(-1))
    for i in range(4):
        assert abs(b.mass(i) - 1.0) < 1e-12
    # the first split happens after step 16 = t 0.25: the save at 0.25 is taken after it, so compare at t = 0
    assert np.array_equal(a.positions(0), b.positions(0))
    d = b.diagnostics(-1)
    assert {"area_defect", "unresolved_mass", "n_nodes", "n_splits"} <= set(d)
    assert d["n_nodes"] == len(b.masses(-1))
    # backward density is independent of the node cloud's splits up to the attention change
    y = VMF.sample(20, seed=3)
    assert np.all(np.isfinite(b.density(-1, y)))
    # the velocity at a save time is that of the cloud saved then (the step's stored coefficients
    # are reused; the saves after a split hold the children): equal to round-off to the velocity
    # recomputed from the saved cloud, while one step apart the clouds differ by ~h |v| ~ 1e-2
    att = Attention(3, 1.0, None, 1e-10)
    for i in range(4):
        ref = att.evaluate(att.coefficients(b.positions(i), b.masses(i)), y, jac=False)[0]
        assert np.abs(b.velocity(i, y) - ref).max() < 1e-12


def test_saved_clouds_are_read_only_and_share_what_does_not_move(tmp_path):
    """Saves at every step: positions and log J are each step's own arrays; x0, w and the masses
    are one array per stretch between splits (no copy per save); all are read-only, so that no
    caller can change a saved cloud through another (also after a save and load). Splits start
    new arrays."""
    T = 0.5
    noise = _noise(T)
    te = np.arange(0, 33) * H
    a = solve_characteristics(VMF, noise, 1.0, te, H, n_lat=16, tol=None, split=False)
    for get in ("positions", "masses", "log_jacobians", "weights", "initial_positions"):
        arr = getattr(a, get)(-1)
        assert not arr.flags.writeable, get
        with pytest.raises(ValueError):
            arr[0] = 0.0
    assert a.initial_positions(0) is a.initial_positions(-1) and a.masses(0) is a.masses(-1)
    assert a.weights(0) is a.weights(-1)
    assert not np.shares_memory(a.positions(1), a.positions(2))
    assert not np.shares_memory(a.log_jacobians(1), a.log_jacobians(2))
    b = solve_characteristics(VMF, noise, 1.0, te, H, n_lat=16, tol=None, split_threshold=0.2, split_every=16)
    n = np.array([len(b.masses(i)) for i in range(len(te))])
    first = int(np.argmax(n > n[0]))  # the first save after a split
    assert b.meta["n_splits"] > 0 and first > 1
    assert b.masses(0) is b.masses(first - 1) and b.masses(first) is not b.masses(first - 1)
    # over the whole run: consecutive saves share x0, weights and masses exactly when no split
    # came between them (a split only adds nodes, so the node count tells)
    for i in range(len(te) - 1):
        same = n[i + 1] == n[i]
        for get in ("initial_positions", "weights", "masses"):
            assert (getattr(b, get)(i) is getattr(b, get)(i + 1)) == same, (get, i)
    # the nodes kept through a split carry on from where they were
    assert np.array_equal(a.positions(first - 1), b.positions(first - 1))
    back = CharacteristicsSolution.load(a.save(tmp_path / "a"))
    assert not back.positions(3).flags.writeable and not back.masses(3).flags.writeable
    assert np.array_equal(back.positions(3), a.positions(3))


def test_energy_and_variance():
    """Gap / attention energies equal meanfield.attention's direct sums with weights = masses."""
    sol = solve_characteristics(VMF, _noise(0.25), 2.0, [0.0, 0.25], H, n_lat=20)
    x, m = sol.positions(1), sol.masses(1)
    assert abs(sol.energy(1) - gap_energy(x, 2.0, weights=m)) < 1e-13
    assert abs(sol.variance(1) - (1 - np.linalg.norm(m @ x) ** 2)) < 1e-13
    big = solve_characteristics(VMF, _noise(0.25), 2.0, [0.0, 0.25], H, n_lat=48)
    xb, mb = big.positions(1), big.masses(1)
    # spectral path (N > 4000) vs the blocked direct double sum: the tail bound is 1e-17
    assert abs(big.energy(1) - gap_energy(xb, 2.0, weights=mb)) < 1e-12
    assert abs(big.energy(1, kind="attention") - (math.exp(2.0) / 4.0 - big.energy(1))) < 1e-12


class _AntipodalField(NoiseField):
    def __init__(self, t0, t1):
        self.t0, self.t1 = t0, t1

    def __call__(self, x):
        return -2.0 * np.asarray(x)


class _FoldingNoise(NoiseSource):
    """ΔW(x) = -2x over every step: z = -x, the antipodal map, which reverses orientation on S^2."""

    d, kappa1, t_max = 3, 1.0, 10.0

    def field(self, t0, t1):
        return _AntipodalField(t0, t1)


def test_folding_raises_clear_error():
    with pytest.raises(CharacteristicsError, match=r"folds at t = 0\.1.*smaller dt") as exc:
        solve_characteristics("uniform", _FoldingNoise(), 0.0, [0.0, 0.1], 0.1, n_lat=4, attention=False)
    assert exc.value.reason == "fold" and isinstance(exc.value, RuntimeError)
    assert isinstance(exc.value.solution, CharacteristicsSolution) and len(exc.value.solution) == 1


def test_unresolved_raises_with_partial_solution():
    noise = _noise(0.5)
    with pytest.raises(CharacteristicsError, match="no longer resolved") as exc:
        solve_characteristics(VMF, noise, 1.0, [0.0, 0.25, 0.5], H, n_lat=16, split=False, split_threshold=0.05,
                              tol=1e-6)
    assert exc.value.reason == "unresolved" and exc.value.time > 0


def test_bad_inputs():
    noise = _noise(0.5)
    base = dict(n_lat=8)
    with pytest.raises(ValueError, match="beta must be finite"):  # any finite β is valid (β < 0 too)
        solve_characteristics(VMF, noise, float("inf"), 0.1, 0.05, **base)
    with pytest.raises(ValueError, match="attention_tol"):  # β < 0 below the spectral round-off floor
        solve_characteristics(VMF, noise, -12.0, 0.1, 0.05, attention_tol=1e-10, **base)
    with pytest.raises(ValueError, match="dt must be > 0"):
        solve_characteristics(VMF, noise, 1.0, 0.1, 0.0, **base)
    with pytest.raises(ValueError, match="multiple|step grid"):
        solve_characteristics(VMF, noise, 1.0, 0.13, 0.05, **base)
    with pytest.raises(ValueError, match="t_max"):
        solve_characteristics(VMF, noise, 1.0, 1.0, 0.05, **base)
    with pytest.raises(ValueError, match="n_lat must be >= 2"):
        solve_characteristics(VMF, noise, 1.0, 0.1, 0.05, n_lat=1)
    with pytest.raises(ValueError, match="split_threshold must be > 0"):
        solve_characteristics(VMF, noise, 1.0, 0.1, 0.05, split_threshold=0.0, **base)
    with pytest.raises(ValueError, match="V must have shape"):
        solve_characteristics(VMF, noise, 1.0, 0.1, 0.05, V=np.eye(2), **base)
    with pytest.raises(ValueError, match="d must be given"):
        solve_characteristics(VMF, None, 1.0, 0.1, 0.05, **base)
    with pytest.raises(ValueError, match="noise_map"):
        solve_characteristics(VMF, noise, 1.0, 0.1, 0.05, noise_map="exact", **base)
    with pytest.raises(ValueError, match="rotation noise"):
        solve_characteristics(VMF, noise, 1.0, 0.1, 0.05, noise_map="flow", **base)
    with pytest.raises(ValueError, match="probability density"):
        solve_characteristics(lambda x: np.ones(len(x)), noise, 1.0, 0.1, 0.05, **base)
    with pytest.raises(ValueError, match="non-negative"):
        solve_characteristics(lambda x: x[:, 2], noise, 1.0, 0.1, 0.05, **base)
    with pytest.raises(ValueError, match="S\\^1"):
        solve_characteristics(VonMisesFisher([1.0, 0.0], 1.0), noise, 1.0, 0.1, 0.05, **base)
    with pytest.raises(TypeError, match="field"):
        solve_characteristics(VMF, object(), 1.0, 0.1, 0.05, **base)


def test_solve_spde_dispatches_to_the_characteristics_scheme(monkeypatch):
    """solve_spde(scheme="characteristics") is the same solver, with lmax as the default degree."""
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "1")  # transforms sum in a fixed order
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=2, t_max=0.25)
    rho0 = VonMisesFisher([0, 0, 1], 4.0)
    a = solve_spde(rho0, noise, beta=1.0, lmax=8, dt=2**-5, t_eval=[0.25], scheme="characteristics", n_lat=24)
    b = solve_characteristics(rho0, noise, 1.0, [0.25], 2**-5, n_lat=24)
    assert np.array_equal(a.positions(-1), b.positions(-1))
    assert a.real_coefficients(-1).shape == (81,)
    assert np.array_equal(a.coefficients(-1), a.coefficients(-1, 8))
    with pytest.raises(TypeError, match="only scheme='characteristics'"):
        solve_spde(rho0, noise, beta=1.0, lmax=16, dt=2**-5, t_eval=[0.25], n_lat=24)
    with pytest.raises(ValueError, match="scheme must be one of .*'characteristics'"):
        solve_spde(rho0, noise, beta=1.0, lmax=16, dt=2**-5, t_eval=[0.25], scheme="lagrange")


def test_solve_spde_passes_attention_tol_and_noise_on_to_the_characteristics_scheme(monkeypatch):
    """attention_tol and noise_on of solve_spde reach the characteristics solver (they were once
    dropped: a run at attention_tol = 1e-6 used degree 12, and noise_on=False kept the noise)."""
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "1")
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=2, t_max=0.25)
    rho0 = VonMisesFisher([0, 0, 1], 4.0)
    kw = dict(beta=1.0, lmax=8, dt=2**-5, t_eval=[0.125], scheme="characteristics", n_lat=16)
    a = solve_spde(rho0, noise, attention_tol=1e-6, **kw)
    b = solve_characteristics(rho0, noise, 1.0, [0.125], 2**-5, n_lat=16, attention_tol=1e-6)
    assert a.meta["attention_tol"] == 1e-6 and a.meta["attention_lmax"] == b.meta["attention_lmax"] < 12
    assert np.array_equal(a.positions(-1), b.positions(-1))
    assert solve_spde(rho0, noise, **kw).meta["attention_lmax"] == 12  # the characteristics default, 1e-10
    quiet = solve_spde(rho0, noise, noise_on=False, **kw)
    still = solve_characteristics(rho0, None, 1.0, [0.125], 2**-5, n_lat=16, d=3)
    assert np.array_equal(quiet.positions(-1), still.positions(-1))
    assert not np.array_equal(quiet.positions(-1), solve_spde(rho0, noise, **kw).positions(-1))
    with pytest.raises(ValueError, match="attention_tol"):
        solve_spde(rho0, noise, beta=1.0, lmax=16, dt=2**-5, t_eval=[0.25], attention_tol=-1.0)


def test_save_load_and_cell_density(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=2, t_max=0.25)
    sol = solve_characteristics(VonMisesFisher([0, 0, 1], 4.0), noise, 1.0, [0.0, 0.25], 2**-5, n_lat=16)
    back = CharacteristicsSolution.load(sol.save(tmp_path / "run"))
    assert np.array_equal(back.positions(-1), sol.positions(-1)) and back.times.tolist() == [0.0, 0.25]
    assert back.variance(-1) == sol.variance(-1) and back.energy(-1) == sol.energy(-1)
    with pytest.raises(ValueError, match="read from a file"):
        back.density(-1, np.array([[0.0, 0.0, 1.0]]))
    # the cell average integrates to the mass exactly (every node falls in one cell)
    colat, lon, vals = sol.cell_density(-1, 30, 60)
    edges = np.pi * np.arange(31) / 30
    area = (np.cos(edges[:-1]) - np.cos(edges[1:]))[:, None] * (2 * np.pi / 60)
    assert abs((vals * area).sum() - 1.0) < 1e-12
    assert sol.plot(-1).has_data()
