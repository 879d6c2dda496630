"""Ring Fourier sums of an equiangular ring grid as batched real FFTs.

A field on n_θ rings of n_φ equally spaced longitudes φ_j = 2π j / n_φ (the first at φ = 0) has
on ring r the Fourier coefficients ("Legendre coefficients" in ducc0's terms) leg_rm, m = 0..M:

    f(θ_r, φ_j) = Re leg_r0 + 2 Re Σ_{m=1}^{M} leg_rm e^{i m φ_j},   2 M < n_φ,

and the adjoint sum is leg_rm = Σ_j f(θ_r, φ_j) e^{-i m φ_j} (no normalisation). These are
``ducc0.sht.experimental.leg2map`` and ``map2leg``, the ring stage of every grid transform, which
treat the rings one at a time (each with its own length and first longitude). On rings of equal
length starting at φ = 0 both are one real FFT along the last axis of the (n_θ, n_φ) array:
``ducc0.fft.c2r`` of the zero-padded coefficients and ``ducc0.fft.r2c`` cut at M, which run
several rings at once in SIMD lanes. Measured with ducc0 0.42 on one thread of 2 shared cores
(medians of 1000 calls), on the Gauss–Legendre grid of lmax 64 (98 x 200 nodes): three maps from
24 coefficients per ring 52 against 126 us; a spin-0 synthesis (ducc0's Legendre stage, then
this) 69 against 94 us for ``synthesis_2d``, the spin-1 divergence 113 against 175 us, the spin-0
analysis 74 against 93 us; at lmax 128 (194 x 400) 284 against 372, 658 against 813 and 313
against 378 us. The sums agree with ducc0's to round-off (3e-16 relative).
"""

from __future__ import annotations

import threading

import ducc0
import numpy as np

__all__ = ["RingFFT"]


class RingFFT:
    """Ring sums of ``nlat`` rings of ``nphi`` longitudes starting at φ = 0 (see the module).

    Work arrays (the zero-padded spectra) are kept per thread between calls.

    Parameters
    ----------
    nlat, nphi : int, >= 1

    Examples
    --------
    >>> import numpy as np
    >>> r = RingFFT(2, 8)
    >>> leg = np.zeros((1, 2, 3), dtype=complex)
    >>> leg[0, :, 1] = 0.5                      # 2 Re(0.5 e^{iφ}) = cos φ on both rings
    >>> m = r.maps(leg)
    >>> bool(np.allclose(m.reshape(2, 8), np.cos(2 * np.pi * np.arange(8) / 8)))
    True
    >>> bool(np.allclose(r.legs(m.reshape(1, 2, 8), 2)[0, :, 1], 4.0))   # Σ_j cos φ_j e^{-iφ_j} = n_φ / 2
    True
    """

    def __init__(self, nlat: int, nphi: int):
        self.nlat, self.nphi = int(nlat), int(nphi)
        self.half = self.nphi // 2 + 1  # complex coefficients of a real ring of nphi values
        self._local = threading.local()

    def __reduce__(self):
        # the per-thread work arrays are not state: a copy (e.g. a pickled grid) starts without them
        return (RingFFT, (self.nlat, self.nphi))

    def _work(self, name: str, k: int) -> np.ndarray:
        buf = getattr(self._local, name, None)
        if buf is None or buf.shape[0] < k:
            buf = np.zeros((k, self.nlat, self.half), dtype=np.complex128)
            setattr(self._local, name, buf)
            if name == "spec":  # per row, the columns from which it is known to be zero (a list: a
                self._local.zero_from = [0] * k  # NumPy max of a few entries costs 3 us here)
        return buf[:k]

    def _check_degree(self, mmax: int) -> None:
        if not 0 <= mmax or 2 * mmax >= self.nphi:
            raise ValueError(f"mmax must be in [0, {(self.nphi - 1) // 2}] (2 mmax < nphi = {self.nphi}), got {mmax}")

    def spectrum(self, k: int) -> np.ndarray:
        """A kept complex work array (k, nlat, nphi // 2 + 1) for :meth:`maps_from_spectrum`: write the
        coefficients m = 0..M into its first M + 1 columns (e.g. as the ``leg`` output of ducc0)."""
        return self._work("spec", int(k))

    def maps_from_spectrum(self, spec: np.ndarray, mmax: int, *, out: np.ndarray | None = None,
                           nthreads: int = 1) -> np.ndarray:
        """Maps (k, nlat * nphi) of the coefficients in the first ``mmax + 1`` columns of ``spec``
        (:meth:`spectrum`; the columns beyond are zeroed here). ``out``: a C-contiguous float64
        (k, nlat * nphi) array to write into."""
        self._check_degree(mmax)
        k = spec.shape[0]
        buf = getattr(self._local, "spec", None)
        if buf is None or spec.base is not buf:
            raise ValueError("spec must be the work array spectrum() returned on this thread")
        # the caller wrote columns <= mmax only: the columns beyond that an earlier, wider spectrum
        # left are zeroed (not the whole tail: at lmax 64 that was 3 % of an SPDE step)
        zero_from = self._local.zero_from
        dirty = max(zero_from[:k])
        if dirty > mmax + 1:
            spec[:, :, mmax + 1 : dirty] = 0.0
        zero_from[:k] = [mmax + 1] * k
        res = ducc0.fft.c2r(spec, axes=(2,), lastsize=self.nphi, forward=False, inorm=0, nthreads=nthreads,
                            out=None if out is None else out.reshape(k, self.nlat, self.nphi))
        return res.reshape(k, -1)

    def maps(self, leg: np.ndarray, *, out: np.ndarray | None = None, nthreads: int = 1) -> np.ndarray:
        """Maps (k, nlat * nphi) of ring coefficients ``leg`` (k, nlat, M + 1), 2 M < nphi (ducc0's ``leg2map``)."""
        k, nlat, m1 = leg.shape
        if nlat != self.nlat:
            raise ValueError(f"leg must have {self.nlat} rings, got shape {leg.shape}")
        self._check_degree(m1 - 1)
        spec = self._work("spec", k)
        spec[:, :, :m1] = leg
        return self.maps_from_spectrum(spec, m1 - 1, out=out, nthreads=nthreads)

    def legs(self, maps: np.ndarray, mmax: int, *, nthreads: int = 1) -> np.ndarray:
        """Ring coefficients (k, nlat, mmax + 1) of maps (k, nlat, nphi) (ducc0's ``map2leg``): a view of a
        kept work array, valid until this thread's next call on this object."""
        self._check_degree(mmax)
        k = maps.shape[0]
        spec = self._work("legs", k)
        ducc0.fft.r2c(maps.reshape(k, self.nlat, self.nphi), axes=(2,), forward=True, inorm=0, nthreads=nthreads,
                      out=spec)
        return spec[:, :, : mmax + 1]
