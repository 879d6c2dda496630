"""Result and error classes of the characteristics scheme (see :func:`meanfield.spde.solve_characteristics`)."""

from __future__ import annotations

import json
import math

import numpy as np

from ._char_cells import Cells, cells_resolution
from ._char_maps import apply_step, invert_step, matmat
from .._serialise import json_default, load_named
from .._validate import as_beta, as_float, as_int
from ..attention import attention_eigenvalues, attention_energy, gap_energy
from ..sphere import basis, has_basis, monomials, row_norms, row_sums
from ..harmonics import degrees, harmonic_dimension, sphere_area

__all__ = ["CharacteristicsError", "CharacteristicsSolution"]

#: Degrees up to which moments are summed with the explicit basis (exact to round-off).
DIRECT_MOMENT_LMAX = 40


class CharacteristicsError(RuntimeError):
    """The characteristics solution stopped being trustworthy.

    Attributes
    ----------
    time : float
        Time at which the check failed.
    reason : str
        ``"fold"`` (a step map is not orientation preserving at some node: det DT <= 0),
        ``"nonfinite"``, ``"unresolved"`` (area defect or unresolved mass above ``tol``) or
        ``"newton"`` (backward characteristics did not converge).
    solution : CharacteristicsSolution or None
        Everything saved before the failure.
    """

    def __init__(self, message: str, time: float, reason: str, solution=None):
        super().__init__(message)
        self.time, self.reason, self.solution = time, reason, solution



# ----------------------------------------------------------------------------------------
# the solution
# ----------------------------------------------------------------------------------------


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` itself, read-only: the arrays of saved clouds are shared between saves, never copied."""
    a.flags.writeable = False
    return a


class CharacteristicsSolution:
    """Node clouds of a characteristics run and everything computed from them.

    Saved time i holds the nodes x_q(t_i) (N_i, d), their masses m_q (N_i,) (Σ m_q = 1), the
    log-Jacobians log J_q = log det DΦ(x_q(0)) (N_i,), the quadrature weights w_q and initial
    positions. N_i grows when cells are split. Moments are node sums,
    ∫ f dρ_{t_i} = Σ_q m_q f(x_q(t_i)).

    Attributes
    ----------
    d : int
        Ambient dimension (tokens on S^{d-1}).
    times : ndarray, shape (n_saved,)
    error_estimate : ndarray (n_saved,) or None
        Largest change of the degree <= 4 real coefficients against a run with about M / 2
        nodes (``error_estimate=True``).
    meta : dict
        Parameters, noise description, number of splits, timings (``timing["us_per_node_step"]``).

    Examples
    --------
    >>> from meanfield.spde import solve_characteristics
    >>> from meanfield.spde import VonMisesFisher
    >>> sol = solve_characteristics(VonMisesFisher([0, 0, 1], 4.0), None, beta=1.0, t_eval=0.5, dt=0.05,
    ...                             n_lat=16, d=3)
    >>> bool(sol.variance(1) < sol.variance(0))   # attention alone concentrates the tokens
    True
    """

    def __init__(self, d, times, snaps, steps, k_save, dt, attention, rho0, split_threshold, meta):
        self.d, self.times, self._snaps, self._steps = d, times, snaps, steps
        self._k, self.dt, self._att, self._rho0 = np.asarray(k_save), dt, attention, rho0
        self.split_threshold = split_threshold
        self.meta = meta
        self.error_estimate = None

    def __len__(self) -> int:
        return self.times.size

    def __repr__(self) -> str:
        return (f"CharacteristicsSolution(d={self.d}, n_saved={len(self)}, M={self.meta.get('M')}, "
                f"t_final={self.times[-1] if len(self) else None})")

    def _snap(self, i: int) -> dict:
        return self._snaps[range(len(self))[i]]

    # -- the node cloud --------------------------------------------------------------------
    def positions(self, i: int) -> np.ndarray:
        """Node positions x_q(t_i), shape (N_i, d); read-only, like every array of a saved cloud (the
        saves share their masses, weights and starting points between cell splits)."""
        return self._snap(i)["x"]

    def masses(self, i: int) -> np.ndarray:
        """Node masses m_q = w_q ρ_0(x_q(0)) (after splits: the parent's mass shared), shape (N_i,)."""
        return self._snap(i)["mass"]

    def log_jacobians(self, i: int) -> np.ndarray:
        """log det DΦ_{t_i}(x_q(0)) at the nodes, shape (N_i,)."""
        return self._snap(i)["logJ"]

    def weights(self, i: int) -> np.ndarray:
        """Quadrature weights (cell areas in the starting coordinates), shape (N_i,)."""
        return self._snap(i)["w"]

    def initial_positions(self, i: int) -> np.ndarray:
        """x_q(0) of the nodes present at save i, shape (N_i, d)."""
        return self._snap(i)["x0"]

    def diagnostics(self, i: int) -> dict:
        """``area_defect`` ``|Σ w_q J_q - |S|| / |S|``, ``unresolved_mass`` (nodes with image cell longer
        than ``split_threshold``), ``n_nodes``, ``n_splits``, ``max_cell_length``, log-Jacobian range."""
        return dict(self._snap(i)["diag"])

    # -- moments -----------------------------------------------------------------------------
    def mass(self, i: int) -> float:
        """∫ ρ_{t_i} = Σ_q m_q."""
        return float(self.masses(i).sum())

    def mean(self, i: int) -> np.ndarray:
        """E x = Σ_q m_q x_q / Σ_q m_q, shape (d,)."""
        m = self.masses(i)
        return m @ self.positions(i) / m.sum()

    def variance(self, i: int) -> float:
        """``1 - |E x|²``, computed as ``Σ_q m_q |x_q - E x|² / Σ_q m_q`` (no cancellation when concentrated)."""
        m, x = self.masses(i), self.positions(i)
        c = x - m @ x / m.sum()
        return float(m @ np.einsum("ij,ij->i", c, c) / m.sum())

    #: Default degree of :meth:`real_coefficients` and :meth:`coefficients` (set by ``solve_spde``).
    lmax: int | None = None

    def real_coefficients(self, i: int, lmax: int | None = None) -> np.ndarray:
        """b_lm = Σ_q m_q R_lm(x_q) in the real basis of :func:`meanfield.harmonics.real_basis`.

        Shape (lmax+1)² on S^2, 2 lmax + 1 on S^1; the layout of ``SPDESolution.real_coefficients``.
        Degrees <= 40 are summed with the explicit basis (exact to round-off), higher ones by
        one adjoint non-uniform transform (accuracy 2e-13). ``lmax`` defaults to the
        solution's :attr:`lmax`.
        """
        lmax = as_int(self._degree(lmax), "lmax", min_value=0)
        m, x = self.masses(i), self.positions(i)
        b = basis(self.d, lmax)
        if lmax <= DIRECT_MOMENT_LMAX or not b.fast_transforms:
            out = 0.0
            block = max(1, 2**22 // b.n_real)
            for s in range(0, x.shape[0], block):
                out = out + m[s : s + block] @ b.real_basis(x[s : s + block])
            return np.asarray(out)
        return b.to_real(b.adjoint(m, x, epsilon=2e-13))

    def moments(self, i: int, lmax: int = 4) -> np.ndarray:
        """Real harmonic coefficients up to degree ``lmax`` (default 4); see :meth:`real_coefficients`."""
        return self.real_coefficients(i, lmax)

    def expect(self, i: int, f) -> np.ndarray:
        """∫ f dρ_{t_i} = Σ_q m_q f(x_q(t_i)) for a function f of points (N, d) -> (N,) or (N, k)."""
        vals = np.asarray(f(self.positions(i)), dtype=np.float64)
        return self.masses(i) @ vals

    def monomial_moments(self, i: int, degree: int = 2) -> np.ndarray:
        """∫ x^α dρ_{t_i} for every monomial x^α of total degree 1..``degree`` (any d).

        The order is that of :func:`meanfield.sphere.monomial_exponents` (by degree, then lexicographic); on the
        sphere these span the harmonics of degree <= ``degree`` (together with the constant).
        """
        degree = as_int(degree, "degree", min_value=1)
        return self.masses(i) @ monomials(self.positions(i), degree)

    def low_moments(self, i: int, lmax: int = 4) -> np.ndarray:
        """:meth:`moments` where a harmonic basis of S^{d-1} is registered, else :meth:`monomial_moments`."""
        if has_basis(self.d):
            return self.moments(i, lmax)
        return self.monomial_moments(i, lmax)

    def _degree(self, lmax):
        if lmax is None:
            if self.lmax is None:
                raise TypeError("give the degree lmax (the solution has no default degree)")
            return self.lmax
        return lmax

    def coefficients(self, i: int, lmax: int | None = None) -> np.ndarray:
        """Coefficients in the layout of ``SPDESolution.coeffs``: S^2 complex alm (healpy packing), S^1 real."""
        lmax = self._degree(lmax)
        return basis(self.d, lmax).from_real(self.real_coefficients(i, lmax))

    # -- fields ------------------------------------------------------------------------------
    def velocity(self, i: int, x) -> np.ndarray:
        """Attention velocity v[ρ_{t_i}](x) = P_x V N/G of the node cloud at points x (N, d) -> (N, d).

        ``x``: finite nonzero vectors, read as directions (as in :meth:`push` and :meth:`density`);
        others raise ``ValueError``.
        """
        self._need_maps("the velocity")
        att = self._att
        if att is None:
            raise ValueError("this run had attention switched off")
        x = self._points(x)
        k = int(self._k[range(len(self))[i]])
        if k < len(self._steps) and self._steps[k].att_coeffs is not None:
            # step k's coefficients were computed from this very cloud (the one saved at t_i)
            c = self._steps[k].att_coeffs
        else:
            c = att.coefficients(self.positions(i), self.masses(i))
        return att.evaluate(c, x, jac=False)[0]

    def push(self, x, i: int, *, jac: bool = False):
        """Carry points from t = 0 to the save time t_i by the stored step maps: Φ_{t_i}(x).

        Each step applies T_k(x) = Π(x + h v[ρ_k](x) + ΔW_k(x)) with the attention velocity of
        the node cloud as it was at step k and the same noise increment, so the images of
        points drawn from ρ_0 are samples of ρ_{t_i} (the mean-field paths X̄ of the particles'
        coupling), and the images of a quadrature rule of ρ_0 are a quadrature of ρ_{t_i}.

        Parameters
        ----------
        x : array_like, shape (N, d)
            Starting points (normalised).
        i : int
            Save index.
        jac : bool
            Also return the tangent Jacobians DΦ as matrices (N, d, d) acting on tangent vectors at x.

        Returns
        -------
        ndarray (N, d), or (positions, DΦ) with ``jac``.
        """
        self._need_maps("push")
        y = self._points(x)
        k_end = int(self._k[range(len(self))[i]])
        D = np.broadcast_to(np.eye(self.d), (y.shape[0], self.d, self.d)).copy() if jac else None
        for k in range(k_end):
            y, J = apply_step(self._steps[k], self._att, y, jac=jac, carry=D)
            if jac:
                D = J  # DT @ D, formed in apply_step's row blocks
        return (y, D) if jac else y

    def fine_cloud(self, i: int, *, M: int | None = None, n_lat: int | None = None, sub: int = 4,
                   jac_stride: int = 1) -> dict:
        """A finer quadrature of ρ_{t_i}: a new initial rule of the chart carried by :meth:`push`.

        The new nodes do not drive the attention (the velocity of each step is that of this
        solution's cloud), so this is the push-forward of ρ_0 by the same maps Φ_{t_i}, resolved
        on more nodes: the reference cloud for distances that need a rule finer than the
        solver's own (W_2 against particles in high dimension).

        Two sets of masses are returned. ``mass`` = w_q ρ_0(x_q(0)) (the quadrature masses, as
        the solver's), and ``cell_mass`` = ∫_{cell q} ρ_0 by a product Gauss rule of ``sub``
        points per angle on each cell. With the cell masses the cloud is the quantisation
        of ρ_{t_i} that sends the image of each initial cell to the image of its node, so

            W_2(ρ_{t_i}, Σ_q c_q δ_{x_q(t_i)})² <= Σ_q c_q L_q²,      L_q = Σ_j ‖DΦ e_j‖ ext_j,

        to first order in the cell size (the image of a cell is the parallelepiped spanned by
        DΦ e_j ext_j, and the node lies in it): ``bound``. ``rms_cell`` is the first-order RMS
        distance of a point of an image cell to its centre, sqrt(Σ_q c_q Σ_j ‖DΦ e_j‖² ext_j² / 12),
        an estimate of the same distance.

        Parameters
        ----------
        i : int
            Save index.
        M, n_lat : int, optional
            Size of the new rule, as in :func:`~meanfield.spde.solve_characteristics` (one of them).
        sub : int, >= 1
            Gauss points per coordinate (in the angles) for the cell masses
            (:meth:`meanfield.sphere.CellChart.cell_integrals`).
        jac_stride : int, >= 1
            Carry the Jacobians DΦ (for ``length``, ``bound`` and ``rms_cell``) only for every
            ``jac_stride``-th cell: the two distances are then estimated from that systematic
            sample (weighted by the cell masses), and ``length`` is NaN for the other cells.

        Returns
        -------
        dict
            ``x`` (M', d) positions at t_i, ``mass`` and ``cell_mass`` (M',), ``length`` (M',),
            ``bound`` and ``rms_cell`` (floats, with the cell masses normalised to 1).
        """
        self._need_maps("fine_cloud")
        if (M is None) == (n_lat is None):
            raise ValueError("give exactly one of M and n_lat")
        sub = as_int(sub, "sub", min_value=1, max_value=8)
        cells = Cells.initial(self.d, cells_resolution(self.d, M, n_lat))
        x0 = cells.points()
        mass = cells.w * self._rho0(x0)
        cell_mass = cells.chart.cell_integrals(self._rho0, cells.lo, cells.hi, sub)
        jac_stride = as_int(jac_stride, "jac_stride", min_value=1)
        if jac_stride == 1:
            y, D = self.push(x0, i, jac=True)
            sel = np.arange(len(cells))
        else:
            y = self.push(x0, i)
            sel = np.arange(0, len(cells), jac_stride)
            _, D = self.push(x0[sel], i, jac=True)
        sc = cells.take(sel)
        cols = np.linalg.norm(matmat(D, sc.start_frame()), axis=1) * sc.extents()  # (k, d-1)
        length = np.full(len(cells), np.nan)
        length[sel] = row_sums(cols)
        c = cell_mass[sel] / cell_mass[sel].sum()
        return {"x": y, "mass": mass, "cell_mass": cell_mass, "length": length,
                "rms_cell": float(math.sqrt(np.sum(c * np.sum(cols**2, axis=1)) / 12.0)),
                "bound": float(math.sqrt(np.sum(c * length[sel] ** 2)))}

    def energy(self, i: int, beta: float | None = None, *, kind: str = "gap") -> float:
        """Gap energy E_β = (1/2β) ∫∫ (e^β - e^{β<x,y>}) dρ dρ (``kind="gap"``) or
        E_β^+ = (1/2β) ∫∫ e^{β<x,y>} dρ dρ (``kind="attention"``) of the normalised node cloud.

        As :func:`meanfield.attention.gap_energy` / ``attention_energy`` with weights = masses.
        Up to 4000 nodes by the direct double sum; above, spectrally,
        s = ∫∫ e^{β<x,y> - abs(β)} dμ dμ = ``Σ_l e^{-|β|} λ_l Σ_m |μ_lm|²``, truncated where the tail bound
        Σ_{l>L} abs(e^{-abs(β)} λ_l) Z_l(1) is below 1e-17 min(1, e^{-2 abs(β)}) (s >= e^{-2 abs(β)});
        E_β = (e^{β} - e^{abs(β)} s) / 2β. β defaults to the run's β; at β = 0 the gap
        energy is ``½ (1 - |E x|²)``.
        """
        if kind not in ("gap", "attention"):
            raise ValueError(f"kind must be 'gap' or 'attention', got {kind!r}")
        beta = self.meta["beta"] if beta is None else as_beta(beta)
        m, x = self.masses(i), self.positions(i)
        if beta == 0.0:
            if kind == "attention":
                raise ValueError("the attention energy needs beta != 0")
            return 0.5 * self.variance(i)
        if x.shape[0] <= 4000 or not has_basis(self.d) or self.d > 3:
            # blocked direct double sum, O(M block) memory: without a harmonic basis the only way, and in
            # d >= 4 the cheaper one (the spectral sum needs degree ~50, i.e. ~50^{d-1} harmonics)
            return (gap_energy if kind == "gap" else attention_energy)(x, beta, weights=m)
        L = 8
        while True:
            lam = np.abs(attention_eigenvalues(self.d, beta, L + 40))
            z1 = harmonic_dimension(self.d, L + 40) / sphere_area(self.d)
            tail = np.cumsum((lam * z1)[::-1])[::-1]
            ok = np.nonzero(tail[1:] <= 1e-17 * math.exp(-2 * max(0.0, -beta)))[0]
            if ok.size:
                L = int(ok[0])
                break
            L *= 2
        b = self.real_coefficients(i, L) / m.sum()
        s = float(np.sum(attention_eigenvalues(self.d, beta, L)[degrees(self.d, L)] * b * b))
        c = math.exp(abs(beta)) / (2 * beta)
        return c * (math.exp(beta - abs(beta)) - s) if kind == "gap" else c * s

    def _need_maps(self, what: str) -> None:
        if self._steps is None:
            raise ValueError(f"{what} needs the step maps and the initial density, which a solution read from a "
                             "file does not carry; use the node clouds (moments, energies, cell_density) or rerun")

    def _need_plot_sphere(self, what: str) -> None:
        if self.d > 3:
            raise ValueError(f"{what} draws S^1 or S^2 (regular grids in angles); this solution lives on S^{self.d - 1}: "
                             "use density(i, x), node_density(i) or the moments")

    def _points(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x must have shape (N, {self.d}), got {x.shape}")
        r = row_norms(x)
        # the point transforms after it read finite nonzero vectors only (one takes a NaN through
        # to its output, another stops on an assertion): refuse the others here, by name
        if not (np.all(np.isfinite(r)) and np.all(r > 0)):
            i = int(np.flatnonzero(~(np.isfinite(r) & (r > 0)))[0])
            raise ValueError(f"x must hold finite, nonzero vectors (points of S^{self.d - 1}, read as directions); "
                             f"row {i} is {x[i].tolist()}")
        return x / r[:, None]

    def node_density(self, i: int) -> np.ndarray:
        """Forward density at the nodes, ρ_{t_i}(x_q(t_i)) = ρ_0(x_q(0)) / J_q, shape (N_i,)."""
        s = self._snap(i)
        if "rho" in s:
            return s["rho"]
        self._need_maps("the node density")
        return self._rho0(s["x0"]) * np.exp(-s["logJ"])

    def density(self, i: int, x, *, block: int = 20000) -> np.ndarray:
        """ρ_{t_i}(x) at points x (N, d) by backward characteristics -> (N,).

        x_n = x, x_k = T_k^{-1}(x_{k+1}) by Newton on the sphere (stored attention coefficients
        and noise of step k), ρ = ρ_0(x_0) / Π_k det DT_k(x_k). Raises
        :class:`CharacteristicsError` (reason ``"newton"``) if an inversion does not converge.
        """
        self._need_maps("the pointwise density")
        y = self._points(x)
        k_end = int(self._k[range(len(self))[i]])
        out = np.empty(y.shape[0])
        for s in range(0, y.shape[0], block):
            z = y[s : s + block]
            logj = np.zeros(z.shape[0])
            for k in range(k_end - 1, -1, -1):
                z, ld, res = invert_step(self._steps[k], self._att, z)
                if not np.all(res < 1e-9) or not np.all(np.isfinite(ld)):
                    raise CharacteristicsError(
                        f"backward characteristics did not converge at t = {k * self.dt:.6g} (largest residual "
                        f"{np.nanmax(res):.3g}, or a step map folds there); rerun with a smaller dt (now {self.dt:g})",
                        k * self.dt, "newton", self)
                logj += ld
            out[s : s + block] = self._rho0(z) * np.exp(-logj)
        return out

    def density_on_grid(self, i: int, nlat: int | None = None, nlon: int | None = None):
        """ρ_{t_i} on a regular grid by backward characteristics (for plots and comparisons).

        Returns
        -------
        S^2: (colatitude (nlat,), longitude (nlon,), values (nlat, nlon)) on the grid of
        ``SPDESolution.density_on_grid`` (colatitude π j/(nlat-1), longitude 2π k/nlon).
        S^1: (theta (nlon,), values (nlon,)), θ = 2π k / nlon. For d >= 4 use :meth:`density` at your points.
        """
        self._need_plot_sphere("density_on_grid")
        if self.d == 2:
            n = as_int(nlon or 256, "nlon", min_value=1)
            th = 2 * np.pi * np.arange(n) / n
            return th, self.density(i, np.stack([np.cos(th), np.sin(th)], axis=1))
        nlat = as_int(nlat or 65, "nlat", min_value=2)
        nlon = as_int(nlon or 2 * nlat, "nlon", min_value=1)
        th = np.pi * np.arange(nlat) / (nlat - 1)
        ph = 2 * np.pi * np.arange(nlon) / nlon
        T, P = np.meshgrid(th, ph, indexing="ij")
        pts = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], axis=-1).reshape(-1, 3)
        return th, ph, self.density(i, pts).reshape(nlat, nlon)

    # -- binned density, plots, files ------------------------------------------------------------
    def cell_density(self, i: int, nlat: int = 90, nlon: int = 180):
        """Cell-averaged density: the node masses binned on a regular grid, divided by the cell areas.

        A histogram estimate of ρ_{t_i} that costs one pass over the nodes at any time (the
        backward-characteristics :meth:`density_on_grid` is pointwise exact but costs a Newton
        inversion of every step per point). Cells without nodes read 0.

        Returns
        -------
        S^2: (colatitude centres (nlat,), longitude centres (nlon,), values (nlat, nlon));
        S^1: (theta centres (nlon,), values (nlon,)). S^1 and S^2 only.
        """
        self._need_plot_sphere("cell_density")
        nlat = as_int(nlat, "nlat", min_value=1)
        nlon = as_int(nlon, "nlon", min_value=1)
        x, m = self.positions(i), self.masses(i)
        lon = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
        jl = np.minimum((lon / (2 * np.pi) * nlon).astype(int), nlon - 1)
        lon_c = 2 * np.pi * (np.arange(nlon) + 0.5) / nlon
        if self.d == 2:
            vals = np.bincount(jl, weights=m, minlength=nlon) / (2 * np.pi / nlon)
            return lon_c, vals
        colat = np.arccos(np.clip(x[:, 2], -1.0, 1.0))
        il = np.minimum((colat / np.pi * nlat).astype(int), nlat - 1)
        edges = np.pi * np.arange(nlat + 1) / nlat
        area = (np.cos(edges[:-1]) - np.cos(edges[1:]))[:, None] * (2 * np.pi / nlon)
        vals = np.bincount(il * nlon + jl, weights=m, minlength=nlat * nlon).reshape(nlat, nlon) / area
        return 0.5 * (edges[:-1] + edges[1:]), lon_c, vals

    def plot(self, i: int = -1, ax=None):
        """Draw the nodes at saved time i coloured by log10 of the density there (exact forward value
        ρ_0(x_q(0)) / J_q): a Mollweide map on S^2, ρ against θ on S^1; returns the Axes."""
        import matplotlib.pyplot as plt

        self._need_plot_sphere("plot")
        i = range(len(self))[i]
        x = self.positions(i)
        rho = self.node_density(i)
        if self.d == 2:
            if ax is None:
                ax = plt.figure(figsize=(6, 3.5)).add_subplot()
            th = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
            order = np.argsort(th)
            ax.plot(th[order], rho[order], lw=1)
            ax.set_yscale("log")
            ax.set_xlabel("θ")
            ax.set_ylabel("ρ at the nodes")
        else:
            if ax is None:
                ax = plt.figure(figsize=(6, 3.5)).add_subplot(projection="mollweide")
            lon = np.mod(np.arctan2(x[:, 1], x[:, 0]) + np.pi, 2 * np.pi) - np.pi
            lat = np.arcsin(np.clip(x[:, 2], -1.0, 1.0))
            logr = np.log10(np.maximum(rho, 1e-300))
            order = np.argsort(logr)  # dense nodes drawn last, on top
            sc = ax.scatter(lon[order], lat[order], c=logr[order], s=1.0, cmap="viridis", linewidths=0,
                            vmin=max(logr.max() - 8, logr.min()), vmax=logr.max())
            ax.figure.colorbar(sc, ax=ax, orientation="horizontal", fraction=0.05, pad=0.04, label="log10 ρ at the nodes")
            ax.set_xticklabels([])
            ax.set_yticklabels([])
        ax.set_title(f"t = {float(self.times[i]):.3g}", fontsize=9)
        return ax

    def save(self, path) -> str:
        """Write the node clouds at the saved times and the metadata to an ``.npz`` file; returns its name.

        The density at the nodes is stored too. A loaded solution offers everything computed
        from the node clouds (moments, coefficients, energies, variance, node and cell
        densities, the plot); the pointwise
        backward-characteristics density and the velocity need the step maps and are
        available only on the solution returned by the solver.
        """
        path = str(path)
        arrays = {"times": self.times, "k_save": self._k, "dt": np.array(self.dt), "d": np.array(self.d)}
        for i in range(len(self)):
            s = self._snap(i)
            for key in ("x", "mass", "logJ", "w", "x0"):
                arrays[f"{key}_{i}"] = s[key]
            arrays[f"rho_{i}"] = self.node_density(i)
            arrays[f"diag_{i}"] = np.array(json.dumps(s["diag"], default=json_default))
        meta = dict(self.meta, lmax=self.lmax)
        np.savez(path, meta=np.array(json.dumps(meta, default=json_default)), **arrays)
        return path if path.endswith(".npz") else path + ".npz"

    @classmethod
    def load(cls, path) -> "CharacteristicsSolution":
        """Read a file written by :meth:`save`; a missing, foreign or damaged file raises one
        error naming it (``OSError`` if it cannot be read, ``ValueError`` otherwise)."""
        return load_named(cls._load, path, "CharacteristicsSolution.save")

    @classmethod
    def _load(cls, path):
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            times = f["times"]
            snaps = [{key: _read_only(f[f"{key}_{i}"]) for key in ("x", "mass", "logJ", "w", "x0", "rho")} | {
                "diag": json.loads(str(f[f"diag_{i}"]))} for i in range(times.size)]
            sol = cls(int(f["d"]), times, snaps, None, f["k_save"], float(f["dt"]), None, None,
                      meta.get("split_threshold"), meta)
        sol.lmax = meta.get("lmax")
        return sol
