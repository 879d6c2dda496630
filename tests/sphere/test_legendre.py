"""The spin-0 Legendre stage of the S^2 transforms inside deterministic() (meanfield.sphere._legendre)
and the torus route of the point adjoint: accuracy against long-double references, agreement with
ducc0's spin-0 transforms, and no call to those transforms, whose last bits follow where the heap
places their buffers."""

import ducc0
import numpy as np
import pytest

from meanfield import deterministic
from meanfield.harmonics import basis
from meanfield.sphere import _legendre, _s2

EPS = np.finfo(float).eps


def _long_double_table(lmax, theta):
    """λ_lm(θ_j) in ducc0's packing, shape (n_alm, n_θ), by the three-term recursion in long double."""
    ld = np.longdouble
    z, w = np.cos(np.asarray(theta, dtype=ld)), np.sin(np.asarray(theta, dtype=ld))
    out = np.zeros((_s2.n_alm(lmax), len(theta)), dtype=ld)
    c, p = 1 / np.sqrt(4 * ld(np.pi)), 0
    for m in range(lmax + 1):
        if m:
            c = -c * np.sqrt(ld(2 * m + 1) / ld(2 * m))
        out[p] = c * w**m
        if m < lmax:
            out[p + 1] = np.sqrt(ld(2 * m + 3)) * z * out[p]
        for ell in range(m + 2, lmax + 1):
            a = np.sqrt((4 * ld(ell) ** 2 - 1) / (ld(ell) ** 2 - m * m))
            b = np.sqrt((ld(ell - 1) ** 2 - m * m) / (4 * ld(ell - 1) ** 2 - 1))
            out[p + ell - m] = a * (z * out[p + ell - m - 1] - b * out[p + ell - m - 2])
        p += lmax + 1 - m
    return out


def _orders(lmax):
    return np.repeat(np.arange(lmax + 1), np.arange(lmax + 1, 0, -1))


def _random_alm(rng, lmax):
    a = rng.normal(size=_s2.n_alm(lmax)) + 1j * rng.normal(size=_s2.n_alm(lmax))
    a[: lmax + 1] = a[: lmax + 1].real
    return a


@pytest.mark.parametrize("lmax", [0, 1, 5, 17, 40, 64])
def test_deterministic_legendre_stage_against_long_double(lmax):
    """Inside deterministic() the ring coefficients Σ_l a_lm λ_lm(θ_j) and their adjoint
    Σ_j g_jm λ_lm(θ_j) agree with long-double sums within 4 lmax eps of the largest value (at
    least 4 eps): the orders above the kept table lose about l sin θ / m <= 16 units in the last
    place of the spin-1 stage's round-off (measured at most 1.7 lmax eps at degrees 0-128 over 4
    seeds, where ducc0's spin-0 stage measured up to 3.7). A wrong factor, sign or order is O(1)."""
    rng = np.random.default_rng(lmax)
    theta = np.concatenate([ducc0.misc.GL_thetas(lmax + 3), rng.uniform(0.01, np.pi - 0.01, 5)])
    table = _long_double_table(lmax, theta)
    a = _random_alm(rng, lmax)
    ref = np.zeros((theta.size, lmax + 1), dtype=np.clongdouble)
    g = rng.normal(size=(theta.size, lmax + 1)) + 1j * rng.normal(size=(theta.size, lmax + 1))
    orders = _orders(lmax)
    for m in range(lmax + 1):
        rows = orders == m
        ref[:, m] = (table[rows] * a[rows, None].astype(np.clongdouble)).sum(0)
    ref_adj = (table * g.T[orders].astype(np.clongdouble)).sum(1)
    with deterministic():
        got = _legendre.legendre_synthesis(a[None], lmax, theta, nthreads=1)[0]
        got_adj = _legendre.legendre_adjoint(g[None], lmax, theta, nthreads=1)[0]
    tol = 4 * max(lmax, 1) * EPS
    assert np.abs(got - ref).max() <= tol * np.abs(ref).max()
    assert np.abs(got_adj - ref_adj).max() <= tol * np.abs(ref_adj).max()


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 60, reason="NumPy's long double is float64 here")
def test_low_order_table_is_the_long_double_values_rounded():
    """The kept table of the low orders is the long-double recursion rounded: within one unit in
    the last place of the largest entry of each order (the float64 recursion drifts by about l)."""
    lmax, theta = 200, np.asarray(ducc0.misc.GL_thetas(120))
    m0 = _legendre.low_orders(lmax)
    assert m0 == 13
    got = _legendre._low_order_values(lmax, m0, theta)
    ref = _long_double_table(lmax, theta)
    orders = _orders(lmax)
    for m in range(m0):
        rows = ref[orders == m].astype(np.float64)
        assert np.abs(got[m, :, : lmax + 1 - m] - rows.T).max() <= EPS * np.abs(rows).max()
        assert not got[m, :, lmax + 1 - m :].any()


@pytest.mark.parametrize("lmax", [1, 16, 64])
def test_deterministic_legendre_stage_agrees_with_ducc0(lmax):
    """Against ducc0's spin-0 alm2leg and leg2alm, within 4 lmax eps of the largest value (both
    have round-off growing with the degree; measured at most 1.9 lmax eps at degrees 1-64 over 6
    seeds); the values taken from the gradient's stage
    (legs_from_deriv1, the synthesis with gradients) are the same bits as the synthesis."""
    rng = np.random.default_rng(7)
    theta = np.asarray(ducc0.misc.GL_thetas(lmax + 2))
    a = _random_alm(rng, lmax)[None]
    g = rng.normal(size=(1, theta.size, lmax + 1)) + 1j * rng.normal(size=(1, theta.size, lmax + 1))
    ref = ducc0.sht.experimental.alm2leg(alm=a, lmax=lmax, theta=theta, spin=0, nthreads=1)
    ref_adj = ducc0.sht.experimental.leg2alm(leg=g, lmax=lmax, theta=theta, spin=0, nthreads=1)
    with deterministic():
        got = _legendre.legendre_synthesis(a, lmax, theta, nthreads=1)
        got_adj = _legendre.legendre_adjoint(g, lmax, theta, nthreads=1)
        grad = ducc0.sht.experimental.alm2leg_deriv1(alm=a, lmax=lmax, theta=theta, nthreads=1)
        from_grad = _legendre.legs_from_deriv1(a, lmax, theta, grad, np.empty_like(got[0]))
    assert np.abs(got - ref).max() <= 4 * lmax * EPS * np.abs(ref).max()
    assert np.abs(got_adj - ref_adj).max() <= 4 * lmax * EPS * np.abs(ref_adj).max()
    assert np.array_equal(from_grad, got[0])


def _points(rng, n):
    x = rng.normal(size=(n, 3))
    x /= np.linalg.norm(x, axis=1)[:, None]
    return x, np.stack([np.arccos(x[:, 2]), np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)], axis=1)


@pytest.mark.parametrize("lmax, n", [(0, 50), (6, 1), (12, 3000), (65, 500)])
def test_torus_adjoint_against_ducc0_and_its_synthesis(lmax, n):
    """The deterministic point adjoint a_lm = Σ_i w_i conj(Y_lm(x_i)) agrees with ducc0's
    adjoint_synthesis_general within 2 ε in relative L2 norm (each is within about ε of the exact
    sums; measured at most 0.33 ε over 5 seeds of each case at ε = 1e-12), and is the adjoint of the
    deterministic synthesis: Σ_i w_i f(x_i) = Σ_l a_l0 b_l0 + 2 Re Σ_{m>0} a_lm conj(b_lm), within
    2 ε (|w| |f| + 2 |a| |b|) by Cauchy-Schwarz on the two transforms' errors (measured at most
    1e-4 of that: both routes use the same torus and kernel). Degree 65 takes the packed ring table."""
    rng = np.random.default_rng(lmax + n)
    _, loc = _points(rng, n)
    w = rng.normal(size=n)
    eps = 1e-12
    ref = ducc0.sht.experimental.adjoint_synthesis_general(map=w[None], spin=0, lmax=lmax, loc=loc, epsilon=eps,
                                                           nthreads=1)[0]
    a = _random_alm(rng, lmax)
    with deterministic():
        b = _s2.adjoint_at(w, lmax, loc, epsilon=eps, nthreads=2)
        f = _s2.synthesis_at(a[None], lmax, loc, epsilon=eps, nthreads=1)[0]
    assert np.linalg.norm(b - ref) <= 2 * eps * np.linalg.norm(ref)
    m0 = lmax + 1
    pairing = (a[:m0].real * b[:m0].real).sum() + 2 * np.real(a[m0:] * np.conj(b[m0:])).sum()
    scale = np.linalg.norm(w) * np.linalg.norm(f) + 2 * np.linalg.norm(a) * np.linalg.norm(b)
    assert abs(pairing - w @ f) <= 2 * eps * scale


def test_deterministic_transforms_call_no_spin0_ducc0_legendre_stage(monkeypatch):
    """Inside deterministic() no grid or point transform of spin-0 fields, no frame table and no SPDE
    step reaches ducc0's spin-0 Legendre stage (alm2leg, leg2alm, the grid transforms and the point
    adjoint built on it): each is patched to raise. Outside, the grid transforms on one thread take
    alm2leg and leg2alm as before."""
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.sphere._ring_frame import RingFrameTable

    calls = []

    def guard(name, fn):
        def wrapped(**kw):
            if kw.get("spin", 0) == 0 and kw.get("mode", "STANDARD") == "STANDARD":
                calls.append(name)
                if deterministic_now():
                    raise AssertionError(f"{name} with spin 0 inside deterministic()")
            return fn(**kw)
        return wrapped

    from meanfield import is_deterministic as deterministic_now

    for mod, name in [(ducc0.sht.experimental, "alm2leg"), (ducc0.sht.experimental, "leg2alm"),
                      (ducc0.sht, "synthesis_2d"), (ducc0.sht, "analysis_2d"),
                      (ducc0.sht.experimental, "adjoint_synthesis_general"), (ducc0.sht, "synthesis_general")]:
        monkeypatch.setattr(mod, name, guard(name, getattr(mod, name)))
    rng = np.random.default_rng(2)
    x, _ = _points(rng, 700)
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=3, t_max=0.125)
    with deterministic():
        for lmax in (0, 9, 24):
            b = basis(3, lmax)
            g = b.grid()
            c = b.from_real(rng.normal(size=(lmax + 1) ** 2))
            g.analysis(g.synth(c))
            g.synth_grad(c, lmax)
            g.synth_real(rng.normal(size=(2, (lmax + 1) ** 2)), lmax)
            b.adjoint(rng.normal(size=x.shape[0]), x)
            det_plot = b.plot_values(c)[2]
        RingFrameTable(np.asarray(ducc0.misc.GL_thetas(10)), 3, radial=True)
        for scheme in ("exponential", "pushforward"):
            solve_spde(VonMisesFisher([0.0, 0.0, 1.0], 2.0), noise, beta=1.0, lmax=16, dt=2**-5, t_eval=[0.0625],
                       scheme=scheme)
    assert not calls
    ref_plot = b.plot_values(c)[2]  # ducc0's CC synthesis outside the block: the same values
    assert np.abs(det_plot - ref_plot).max() <= 4 * lmax * EPS * np.abs(ref_plot).max()  # as the stage's test
    g = basis(3, 9).grid()
    g.analysis(g.synth(g.analysis(rng.normal(size=g.Q))))
    assert {"alm2leg", "leg2alm"} <= set(calls) or {"synthesis_2d", "analysis_2d"} <= set(calls)
