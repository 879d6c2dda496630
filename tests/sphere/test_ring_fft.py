"""RingFFT: the ring sums of an equiangular ring grid against their explicit formulas and ducc0."""

import ducc0
import numpy as np
import pytest

from meanfield.sphere._ring_fft import RingFFT

EPS = np.finfo(float).eps


def _explicit_maps(leg, nphi):
    """f(θ_r, φ_j) = Re leg_r0 + 2 Re Σ_{m >= 1} leg_rm e^{imφ_j}, summed term by term."""
    m = np.arange(leg.shape[-1])
    e = _phases(m, nphi)
    out = 2 * np.real(np.einsum("krm,mj->krj", leg[..., 1:], e[1:]))
    return (out + leg[..., :1].real).reshape(leg.shape[0], -1)


def _phases(m, nphi):
    """e^{i m φ_j}, the angle reduced exactly (m j mod nphi) before the exponential."""
    return np.exp(2j * np.pi * (np.outer(m, np.arange(nphi)) % nphi) / nphi)


def _rings(nlat, nphi):
    return {"nphi": np.full(nlat, nphi, dtype=np.uintp), "phi0": np.zeros(nlat),
            "ringstart": np.arange(nlat, dtype=np.uintp) * np.uintp(nphi)}


@pytest.mark.parametrize("nlat,nphi,mmax", [(3, 8, 3), (5, 15, 7), (4, 200, 23), (7, 48, 0)])
def test_maps_and_legs_are_the_ring_sums_and_ducc0s(nlat, nphi, mmax):
    """maps() is the explicit ring sum and ducc0's leg2map, legs() the explicit adjoint sum and
    ducc0's map2leg, to round-off (asserted 8 eps of the largest sum of terms; measured at most
    1.3 eps over 20 seeds), for even and odd ring lengths."""
    rng = np.random.default_rng(nphi)
    leg = rng.normal(size=(2, nlat, mmax + 1)) + 1j * rng.normal(size=(2, nlat, mmax + 1))
    r = RingFFT(nlat, nphi)
    got = r.maps(leg)
    ref = _explicit_maps(leg, nphi)
    scale = np.abs(leg).sum(axis=-1).max() * 2
    assert got.shape == (2, nlat * nphi)
    assert np.abs(got - ref).max() <= 8 * EPS * scale
    duc = ducc0.sht.experimental.leg2map(leg=leg, nthreads=1, **_rings(nlat, nphi))
    assert np.abs(got - duc).max() <= 8 * EPS * scale
    f = rng.normal(size=(2, nlat, nphi))
    explicit = np.einsum("krj,mj->krm", f, np.conj(_phases(np.arange(mmax + 1), nphi)))
    back = r.legs(f, mmax)
    assert back.shape == (2, nlat, mmax + 1)
    assert np.abs(back - explicit).max() <= 8 * EPS * np.abs(f).sum(axis=-1).max()
    duc = ducc0.sht.experimental.map2leg(map=f.reshape(2, -1), mmax=mmax, nthreads=1, **_rings(nlat, nphi))
    assert np.abs(back - duc).max() <= 8 * EPS * np.abs(f).sum(axis=-1).max()


def test_a_narrower_spectrum_after_a_wider_one_sees_no_stale_columns():
    """The kept spectrum is zeroed beyond each call's degree where an earlier call wrote: a degree-2
    spectrum after a degree-10 one gives the degree-2 maps to round-off (8 eps of twice the sum of
    |leg| per ring, as above; measured at most 2.0 eps over 20 seeds), while a missed zeroing adds
    the old columns, O(1)."""

    def close(got, leg):
        return np.abs(got - _explicit_maps(leg, 32)).max() <= 8 * EPS * 2 * np.abs(leg).sum(axis=-1).max()

    rng = np.random.default_rng(0)
    r = RingFFT(4, 32)
    wide = rng.normal(size=(3, 4, 11)) + 0j
    narrow = rng.normal(size=(2, 4, 3)) + 0j
    r.maps(wide)
    assert close(r.maps(narrow), narrow)
    spec = r.spectrum(3)
    spec[:, :, :3] = wide[:, :, :3]  # only the first columns written, the rest must be zero
    assert close(r.maps_from_spectrum(spec, 2), wide[:, :, :3])
    r.maps(wide)
    spec = r.spectrum(1)
    spec[0, :, :2] = narrow[0, :, :2]
    assert close(r.maps_from_spectrum(spec, 1), narrow[:1, :, :2])


def test_ring_fft_rejects_degrees_the_rings_cannot_hold_and_foreign_spectra():
    r = RingFFT(3, 8)
    with pytest.raises(ValueError, match=r"mmax must be in \[0, 3\]"):
        r.maps(np.zeros((1, 3, 5), dtype=complex))
    with pytest.raises(ValueError, match="mmax must be in"):
        r.legs(np.zeros((1, 3, 8)), 4)
    with pytest.raises(ValueError, match="3 rings"):
        r.maps(np.zeros((1, 2, 2), dtype=complex))
    with pytest.raises(ValueError, match="spectrum\\(\\) returned"):
        r.maps_from_spectrum(np.zeros((1, 3, 5), dtype=complex), 2)


def test_a_grid_pickles_after_its_ring_transforms_and_gives_the_same_maps():
    """The ring FFT's per-thread work arrays are not pickled (a grid sent to another process or
    worker after a transform), and the copy computes the same bits."""
    import pickle

    from meanfield.sphere import basis

    g = basis(3, 16).grid()
    rng = np.random.default_rng(1)
    c = g.analysis(np.abs(rng.normal(size=g.Q)))
    leg = rng.normal(size=(3, g.nlat, 5)) + 1j * rng.normal(size=(3, g.nlat, 5))
    before = (g.synth(c), g._leg2map(leg), g.divergence(rng.normal(size=(2, g.Q)), weighted=True))
    h = pickle.loads(pickle.dumps(g))
    assert np.array_equal(h.synth(c), before[0])
    assert np.array_equal(h._leg2map(leg), before[1])
    r = pickle.loads(pickle.dumps(RingFFT(4, 32)))
    assert (r.nlat, r.nphi) == (4, 32)
