"""The result of an Eulerian SPDE run and the error raised when a run stops being resolved."""

from __future__ import annotations

import functools
import json
import math

import numpy as np

from .._serialise import json_default, load_named
from .._validate import as_bool, as_int, as_real_array
from ..attention import attention_eigenvalues
from ..sphere import Basis, Grid, basis
from ._velocity import Velocity

__all__ = ["SPDESolution", "SPDEResolutionError", "tail_fraction"]


class SPDEResolutionError(RuntimeError):
    """The SPDE solution stopped being resolved (spectral tail, negative mass or non-finite values).

    Attributes
    ----------
    solution : SPDESolution
        Everything computed up to the last resolved save time (plus the offending state as
        its final entry).
    time : float
        Time at which the check failed.
    reason : str
        ``"tail"``, ``"negative"`` or ``"nonfinite"``.
    """

    def __init__(self, message: str, solution: "SPDESolution", time: float, reason: str):
        super().__init__(message)
        self.solution, self.time, self.reason = solution, time, reason


class SPDESolution:
    """Saved states of an SPDE run and the diagnostics computed from them.

    Attributes
    ----------
    d : int
        2 (S^1) or 3 (S^2).
    lmax : int
    times : ndarray, shape (n_saved,)
    coeffs : ndarray, shape (n_saved, n)
        S^2: complex alm (healpy packing, n = (lmax+1)(lmax+2)/2); S^1: real Fourier (n = 2 lmax + 1).
    beta : float
    V : ndarray (d, d) or None
    meta : dict
        Parameters, scheme, seed and noise description, package version, wall time.

    Examples
    --------
    >>> from meanfield.spde import VonMisesFisher, solve_spde
    >>> sol = solve_spde(VonMisesFisher([0, 0, 1], 2.0), None, beta=1.0, lmax=16, dt=0.01,
    ...                  t_eval=[0.0, 0.1], d=3)
    >>> bool(abs(sol.mass(-1) - 1.0) < 1e-12)
    True
    """

    def __init__(self, d: int, lmax: int, times, coeffs, beta: float, V=None, meta: dict | None = None):
        self.d, self.lmax = int(d), int(lmax)
        self.basis = basis(self.d, self.lmax)
        self.times = np.asarray(times, dtype=np.float64)
        self.coeffs = np.asarray(coeffs)
        self.beta = float(beta)
        self.V = None if V is None else np.asarray(V, dtype=np.float64)
        self.meta = dict(meta or {})
        self._grid = None
        self._vel = None

    def __len__(self) -> int:
        return self.times.size

    def __repr__(self) -> str:
        return f"SPDESolution(d={self.d}, lmax={self.lmax}, n_saved={len(self)}, t_final={self.times[-1] if len(self) else None})"

    def _index(self, i) -> int:
        """Saved-state index i (negative counts from the end), validated."""
        n = len(self)
        i = as_int(i, "i")
        if not -n <= i < n:
            raise IndexError(f"i = {i} is out of range for a solution with {n} saved states (use -{n} <= i < {n})")
        return i % n

    @property
    def grid(self) -> Grid:
        """The 3/2-rule quadrature grid of the basis (built on first use)."""
        if self._grid is None:
            self._grid = self.basis.grid()
        return self._grid

    def real_coefficients(self, i: int) -> np.ndarray:
        """Coefficients of saved state i in the real orthonormal basis of :mod:`meanfield.harmonics`."""
        return self.basis.to_real(self.coeffs[self._index(i)])

    def evaluate(self, i: int, x) -> np.ndarray:
        """ρ_{t_i}(x) at points x (N, d) -> (N,)."""
        x = as_real_array(x, "x")
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        return self.basis.evaluate(self.coeffs[self._index(i)], x)

    def density_on_grid(self, i: int, nlat: int | None = None, nlon: int | None = None):
        """ρ_{t_i} on a regular grid for plotting.

        Returns
        -------
        S^2: (colatitude (nlat,), longitude (nlon,), values (nlat, nlon)) on the
        Clenshaw–Curtis grid (poles included, colatitude π j/(nlat-1), longitude 2π k/nlon).
        S^1: (theta (nlon,), values (nlon,)).
        """
        return self.basis.plot_values(self.coeffs[self._index(i)], nlat, nlon)

    def mass(self, i: int) -> float:
        """∫ ρ_{t_i} = ``ρ_00 sqrt(|S^{d-1}|)`` (theory §5.6)."""
        return self.basis.mass(self.coeffs[self._index(i)])

    def min_density(self, i: int) -> float:
        """Minimum of ρ_{t_i} over the 3/2-rule quadrature grid."""
        return float(self.grid.synth(self.coeffs[self._index(i)]).min())

    def negative_mass(self, i: int) -> float:
        """∫ max(-ρ_{t_i}, 0), by quadrature on the 3/2-rule grid."""
        g = self.grid
        return float(np.einsum("i,i->", g.weights, np.maximum(-g.synth(self.coeffs[self._index(i)]), 0.0)))

    def tail_energy(self, i: int) -> float:
        """Spectral energy in the top quarter of degrees (l > 3 lmax / 4) relative to the total.

        ``Σ_{l > 3L/4} Σ_m |ρ_lm|² / Σ_l Σ_m |ρ_lm|²``  (real-basis energies).
        """
        return tail_fraction(self.basis, self.coeffs[self._index(i)])

    def spectrum(self, i: int) -> np.ndarray:
        """Degree energies ``E_l = Σ_m |ρ_lm|²``, shape (lmax + 1,)."""
        b = self.basis
        return np.bincount(b.ell, weights=b.energy(self.coeffs[self._index(i)]), minlength=self.lmax + 1)

    def velocity(self, i: int, x) -> np.ndarray:
        """Attention velocity v[ρ_{t_i}](x) = P_x A(x; ρ_{t_i}) at points x (N, d) -> (N, d) (theory §4, §9)."""
        if self.beta == 0:
            raise ValueError("velocity needs beta != 0")
        x = as_real_array(x, "x")
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        if self._vel is None:
            self._vel = Velocity(self.d, self.lmax, self.beta, self.V)
        return self._vel.at_points(self.coeffs[self._index(i)], x)[0]

    def attention_energy(self, i: int) -> float:
        """E_β^+(ρ_{t_i}) = (1/2β) ∫∫ e^{β<x,y>} ρ ρ = ``(1/2β) Σ_lm λ_l |ρ_lm|²`` (theory §5.7)."""
        if self.beta == 0:
            raise ValueError("attention_energy needs beta != 0")
        b = self.basis
        lam = attention_eigenvalues(self.d, self.beta, self.lmax)[b.ell]
        return float(math.exp(abs(self.beta)) / (2 * self.beta) * np.sum(lam * b.mult * np.abs(self.coeffs[self._index(i)]) ** 2))

    def quadrature(self, i: int, n: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ρ_{t_i} at quadrature nodes: ``(nodes, weights, values)``, the arguments of
        :func:`meanfield.transport.wasserstein_to_density` and
        :func:`meanfield.transport.observable_errors`.

        Parameters
        ----------
        i : int
            Saved-state index (negative counts from the end).
        n : int, optional
            Nodes per axis of the quadrature grid (S^1: 2 n equispaced nodes; S^2: n
            Gauss–Legendre rings × 2 n longitudes). Default: the solver's 3/2-rule grid.
            A coarser grid quantises the density more coarsely: the W_2 distance between ρ
            and its node cloud is about the ρ-weighted RMS half-cell size.

        Returns
        -------
        nodes : ndarray, shape (Q, d)
        weights : ndarray, shape (Q,)
            Quadrature weights (sum: the area of the sphere).
        values : ndarray, shape (Q,)
            ρ_{t_i}(nodes), negative where the truncated density is.

        Examples
        --------
        >>> from meanfield.spde import VonMisesFisher, solve_spde
        >>> sol = solve_spde(VonMisesFisher([1.0, 0.0], 2.0), None, beta=1.0, lmax=16,
        ...                  dt=0.05, t_eval=[0.1], scheme="pushforward", d=2)
        >>> nodes, weights, values = sol.quadrature(-1)
        >>> nodes.shape, round(float(weights @ values), 12)
        ((54, 2), 1.0)
        >>> sol.quadrature(-1, n=200)[0].shape
        (400, 2)
        """
        c = self.coeffs[self._index(i)]
        g = self.grid if n is None else self.basis.grid(as_int(n, "n", min_value=1))
        return g.points.copy(), g.weights.copy(), g.synth(c)

    def quadrature_cloud(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Weighted point cloud (x_q, w_q ρ_{t_i}(x_q)) representing ρ_{t_i}.

        The weights sum to the mass; they are negative where the truncated density is.
        For Wasserstein distances use :meth:`quadrature`, whose ``(nodes, weights, values)``
        are the arguments of :func:`meanfield.transport.wasserstein_to_density` (which
        checks the negative part).
        """
        nodes, weights, values = self.quadrature(i)
        return nodes, weights * values

    # -- plotting and labelled export ------------------------------------------------------
    def plot(self, i: int = -1, ax=None, **kwargs):
        """Draw ρ_{t_i}: a colour map over (longitude, colatitude) on S^2, the curve θ -> ρ(θ) on S^1.

        Parameters
        ----------
        i : int
            Saved-state index (default the last).
        ax : matplotlib Axes, optional
            Axes to draw into; a new figure is made otherwise.
        **kwargs
            Passed to ``pcolormesh`` (S^2) or ``plot`` (S^1).

        Returns
        -------
        matplotlib.axes.Axes
        """
        import matplotlib.pyplot as plt

        k = self._index(i)
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.2) if self.d == 3 else (5, 3.2))
        if self.d == 3:
            colat, lon, vals = self.density_on_grid(k)
            mesh = ax.pcolormesh(np.degrees(lon), np.degrees(colat), vals, shading="nearest", **kwargs)
            ax.figure.colorbar(mesh, ax=ax, label="density")
            ax.set_xlabel("longitude (degrees)")
            ax.set_ylabel("colatitude (degrees)")
            ax.invert_yaxis()
        else:
            theta, vals = self.density_on_grid(k)
            ax.plot(theta, vals, **kwargs)
            ax.set_xlabel("angle θ")
            ax.set_ylabel("density")
        ax.set_title(f"t = {self.times[k]:.4g}")
        return ax

    def to_xarray(self, *, density: bool = False):
        """The saved states as an ``xarray.Dataset``, coefficients in the real orthonormal layout.

        Variables: ``coefficients`` (time, coefficient) with the coordinates ``time``,
        ``degree`` and ``order`` (the (l, m) labels of :meth:`meanfield.sphere.Basis.labels`;
        on S^1, m = k for cos kθ and -k for sin kθ). With ``density=True`` also ``density``
        on the plotting grid: (time, colatitude, longitude) on S^2, (time, theta) on S^1
        (angles in radians). Attributes: d, lmax, beta, V and the metadata (JSON strings).

        Examples
        --------
        >>> from meanfield.spde import VonMisesFisher, solve_spde
        >>> sol = solve_spde(VonMisesFisher([0, 1], 2.0), None, beta=1.0, lmax=16, dt=0.05, t_eval=[0.0, 0.1], d=2)
        >>> ds = sol.to_xarray()
        >>> ds["coefficients"].dims, int(ds["degree"][3]), int(ds["order"][4])
        (('time', 'coefficient'), 2, -2)
        """
        import xarray as xr

        density = as_bool(density, "density")
        labels = self.basis.labels()
        real = np.stack([self.basis.to_real(c) for c in self.coeffs]) if len(self) else np.zeros((0, labels.shape[0]))
        ds = xr.Dataset(
            {"coefficients": (("time", "coefficient"), np.asarray(real, dtype=np.float64))},
            coords={
                "time": ("time", self.times),
                "coefficient": ("coefficient", np.arange(labels.shape[0])),
                "degree": ("coefficient", labels[:, 0].astype(np.int64)),
                "order": ("coefficient", labels[:, 1].astype(np.int64)),
            },
            attrs={
                "d": self.d,
                "lmax": self.lmax,
                "beta": self.beta,
                "V": json.dumps(None if self.V is None else self.V.tolist()),
                "meta": json.dumps(self.meta, default=json_default),
                "layout": "real orthonormal basis of meanfield.sphere.basis(d, lmax)",
            },
        )
        ds["time"].attrs["long_name"] = "time"
        ds["coefficients"].attrs["long_name"] = "harmonic coefficients of the density"
        if density and len(self):
            grids = [self.density_on_grid(k) for k in range(len(self))]
            if self.d == 3:
                colat, lon = grids[0][0], grids[0][1]
                ds["density"] = (("time", "colatitude", "longitude"), np.stack([g[2] for g in grids]))
                ds = ds.assign_coords(colatitude=("colatitude", colat), longitude=("longitude", lon))
            else:
                ds["density"] = (("time", "theta"), np.stack([g[1] for g in grids]))
                ds = ds.assign_coords(theta=("theta", grids[0][0]))
        return ds

    def to_netcdf(self, path, *, density: bool = False) -> str:
        """Write :meth:`to_xarray` to a NetCDF file; returns the path. Read it back with :meth:`from_netcdf`."""
        path = str(path)
        self.to_xarray(density=density).to_netcdf(path)
        return path

    @classmethod
    def from_netcdf(cls, path) -> "SPDESolution":
        """Read a file written by :meth:`to_netcdf` (the state coefficients are rebuilt from the real layout)."""
        import xarray as xr

        with xr.open_dataset(path) as ds:
            ds.load()
            d, lmax = int(ds.attrs["d"]), int(ds.attrs["lmax"])
            b = basis(d, lmax)
            real = ds["coefficients"].values
            coeffs = np.stack([b.from_real(r) for r in real]) if real.shape[0] else np.zeros((0, b.n_state), b.state_dtype)
            return cls(d, lmax, ds["time"].values, coeffs, float(ds.attrs["beta"]), json.loads(ds.attrs["V"]),
                       json.loads(ds.attrs["meta"]))

    def save(self, path) -> str:
        """Write times, coefficients and JSON metadata to an ``.npz`` file; returns the path."""
        path = str(path)
        meta = dict(self.meta)
        meta.update(d=self.d, lmax=self.lmax, beta=self.beta, V=None if self.V is None else self.V.tolist())
        np.savez(path, times=self.times, coeffs=self.coeffs, meta=np.array(json.dumps(meta, default=json_default)))
        return path if path.endswith(".npz") else path + ".npz"

    @classmethod
    def load(cls, path) -> "SPDESolution":
        """Read a file written by :meth:`save`; a missing, foreign or damaged file raises one
        error naming it (``OSError`` if it cannot be read, ``ValueError`` otherwise)."""
        return load_named(cls._load, path, "SPDESolution.save")

    @classmethod
    def _load(cls, path):
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            return cls(meta["d"], meta["lmax"], f["times"], f["coeffs"], meta["beta"], meta.get("V"), meta)




@functools.lru_cache(maxsize=32)
def _energy_weights(b: Basis) -> tuple[np.ndarray, np.ndarray]:
    """Multiplicities of every real entry of a state (a complex entry is two) and the same with
    the degrees l <= 3 lmax / 4 set to zero: the energy and its tail are then two weighted sums."""
    w = np.asarray(b.mult, dtype=np.float64)
    tail = np.where(b.ell > (3 * b.lmax) // 4, w, 0.0)
    if np.dtype(b.state_dtype).kind == "c":
        w, tail = np.repeat(w, 2), np.repeat(tail, 2)
    return w, tail


def tail_fraction(b: Basis, c: np.ndarray) -> float:
    """Energy fraction of the coefficients c in degrees l > 3 lmax / 4 (inf if not finite).

    The energy is ``Σ mult |c|²`` (:meth:`~meanfield.sphere.Basis.energy`); any non-finite
    coefficient makes it non-finite, which callers use as their check for NaN and overflow.
    """
    w, tail = _energy_weights(b)
    c = np.asarray(c)
    x = np.ascontiguousarray(c).view(np.float64) if c.dtype == np.complex128 else np.asarray(c, dtype=np.float64)
    # Σ w x² as one einsum: no temporary, no floating-point warning on overflow (inf is the
    # answer), and no BLAS call (a threaded BLAS dot here left its threads spinning on the cores
    # the transforms after it need: they measured up to 1.6x slower at lmax 128)
    tot = float(np.einsum("i,i,i->", x, x, w))
    if not math.isfinite(tot):
        return math.inf
    return float(np.einsum("i,i,i->", x, x, tail)) / tot if tot > 0 else 0.0
