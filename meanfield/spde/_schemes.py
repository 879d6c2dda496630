"""Time-stepping schemes of the Eulerian (coefficient) SPDE solver, chosen by name from a registry.

A scheme is a subclass of :class:`Scheme` decorated with :func:`register_scheme`; it is
built once per run from the :class:`Problem` and advances the coefficient vector by one
step. A new scheme is a new file that registers itself (import it in ``__init__``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from ..noise import NoiseSource
from ..sphere import Basis, Grid

__all__ = ["Problem", "Scheme", "register_scheme", "get_scheme", "scheme_names", "noise_on_grid", "field_on_grid",
           "field_frame_on_grid", "displacement_on_grid"]

_SCHEMES: dict[str, type] = {}


@dataclass
class Problem:
    """Everything a scheme needs to know about one run (validated by :func:`solve_spde`)."""

    d: int
    basis: Basis
    grid: Grid
    dt: float
    t_final: float
    beta: float
    V: np.ndarray | None
    noise: NoiseSource | None
    noise_on: bool
    attention: bool
    kappa1: float
    vmax: float
    noise_map: str


class Scheme(abc.ABC):
    """One step c_n -> c_{n+1} of an Eulerian scheme on the coefficients of ρ.

    Attributes
    ----------
    name : str
        Registry key (set by :func:`register_scheme`).
    noise_maps : tuple of str
        Values of ``noise_map`` the scheme supports.
    """

    name: str
    noise_maps: tuple[str, ...] = ("projected",)
    #: Accuracy of the non-uniform transforms a step uses (None: grid transforms only, exact).
    epsilon: float | None = None

    def __init__(self, problem: Problem):
        self.p = problem

    @classmethod
    def check(cls, problem: Problem) -> None:
        """Raise ValueError before any work if the scheme cannot run this problem."""
        if problem.noise_map not in cls.noise_maps:
            raise ValueError(f"noise_map={problem.noise_map!r} is not available with scheme={cls.name!r} "
                             f"(it supports {', '.join(map(repr, cls.noise_maps))})")

    @abc.abstractmethod
    def step(self, c: np.ndarray, rho_g: np.ndarray, vel, t0: float, t1: float) -> np.ndarray:
        """Advance the coefficients c (values ρ_n on the grid ``rho_g``) from t0 to t1; returns the new
        coefficients. ``vel`` is the run's attention velocity (:class:`~meanfield.spde.Velocity`; its
        ``on_grid(grid, c)`` gives the frame components of v[ρ_n]), None without attention;
        :func:`displacement_on_grid` forms h v[ρ_n] + ΔW_n with the fewest transforms."""


def register_scheme(name: str):
    """Class decorator: register a :class:`Scheme` subclass under ``name``."""

    def deco(cls):
        cls.name = name
        _SCHEMES[name] = cls
        return cls

    return deco


def scheme_names() -> tuple[str, ...]:
    """Names of the registered Eulerian schemes."""
    return tuple(_SCHEMES)


def get_scheme(name: str) -> type:
    """The scheme class registered under ``name`` (ValueError naming the choices otherwise)."""
    if name not in _SCHEMES:
        choices = ", ".join(map(repr, (*_SCHEMES, "characteristics")))
        raise ValueError(f"scheme must be one of {choices}, got {name!r}")
    return _SCHEMES[name]


def field_on_grid(grid: Grid, field) -> np.ndarray:
    """Ambient values (Q, d) of a noise field at the grid nodes.

    A field given by harmonic coefficients is synthesised by the grid's fast transform when
    the grid resolves its degree; any other field is evaluated at the nodes.
    """
    if field.coeffs is not None and field.lmax is not None:
        vals = grid.synth_real(field.coeffs, field.lmax)
        if vals is not None:
            return vals
    return np.asarray(field(grid.points), dtype=np.float64)


def field_frame_on_grid(grid: Grid, field) -> list[np.ndarray]:
    """Frame components of P_x F at the grid nodes, synthesised directly where the grid can (no ambient map)."""
    if field.coeffs is not None and field.lmax is not None:
        comps = grid.synth_real_frame(field.coeffs, field.lmax)
        if comps is not None:
            return comps
    return grid.components(np.asarray(field(grid.points), dtype=np.float64))


def noise_on_grid(grid: Grid, noise: NoiseSource, t0: float, t1: float) -> np.ndarray:
    """Ambient increment ΔW(x_q) over [t0, t1] at the grid nodes, shape (Q, d) (:func:`field_on_grid`)."""
    return field_on_grid(grid, noise.field(t0, t1))


def displacement_on_grid(grid: Grid, vel, c: np.ndarray, dt: float, field=None, *, radial: bool = False,
                         scale: np.ndarray | None = None, weighted: bool = False,
                         work: np.ndarray | None = None) -> np.ndarray:
    """Rows (d - 1, Q): frame components of h v[ρ](x_q) + ΔW(x_q); with ``radial`` one more row <ΔW(x_q), x_q>.

    ``vel`` is the run's :class:`~meanfield.spde.Velocity` (None: no attention), ``field`` the noise
    increment of the step (None: no noise), ``scale`` (Q,) an optional factor of every row (e.g.
    ρ_n for a flux), with ``weighted`` times the quadrature weights w_q (the flux ρ_n w_q (h v + ΔW)
    the adjoint transform of a divergence takes). With both parts, :meth:`Velocity.drift_on_grid` forms the sum from ring
    coefficients where it can; otherwise the two parts are synthesised separately. ``work``
    (rows + 1, Q): a buffer a scheme keeps over its steps, for the grid-sized arrays of the first
    route (:meth:`~meanfield.sphere.Grid.synth`); the rows returned may be a view of it.
    """
    if vel is not None and field is not None:
        D = vel.drift_on_grid(grid, c, dt, field, radial=radial, scale=scale, weighted=weighted, out=work)
        if D is not None:
            return D
    D = np.zeros((len(grid.frame()) + int(radial), grid.Q))
    if vel is not None:
        for row, vk in zip(D, vel.on_grid(grid, c)[0]):
            np.multiply(vk, dt, out=row)
    if field is not None:
        if radial:
            comps = grid.components(field_on_grid(grid, field), radial=True)
        else:
            comps = field_frame_on_grid(grid, field)
        for row, comp in zip(D, comps):
            row += comp
    if scale is not None or weighted:
        D *= grid.weights if scale is None else (scale * grid.weights if weighted else scale)
    return D
