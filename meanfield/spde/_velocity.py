"""The attention velocity v[ρ] = P_x A(x; ρ) of a density given by its harmonic coefficients."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .. import _threads
from ..attention import attention_eigenvalues, required_degree
from ..sphere import Grid, basis, tangent_project

__all__ = ["Velocity"]


def attention_eigen_derivative(d: int, beta: float, lmax: int) -> np.ndarray:
    """e^{-abs(β)} dλ_l/dβ = s_l (2π)^{d/2} b^{1-d/2} [ive(l + d/2, b) + (l/b) ive(l + d/2 - 1, b)], b = abs(β) > 0.

    s_l = 1 for β > 0 and (-1)^{l+1} for β < 0, from λ_l(β) = (-1)^l λ_l(-β).
    """
    b = abs(beta)
    ls = np.arange(lmax + 1)
    nu = ls + d / 2 - 1
    out = (2 * math.pi) ** (d / 2) * b ** (1 - d / 2) * (special.ive(nu + 1, b) + ls / b * special.ive(nu, b))
    return out if beta > 0 else np.where(ls % 2 == 0, -out, out)


#: Relative size, in the worst case over all densities, of the part of the attention convolution
#: beyond the degree the velocity is computed at (see :func:`meanfield.attention.required_degree`):
#: below double-precision round-off, so the truncation does not change the result.
TRUNCATION_TOL = 1e-16


def convolution_degree(d: int, beta: float, lmax: int) -> int:
    """Degree <= lmax beyond which e^{-β} K_β * ρ changes the velocity by less than round-off."""
    try:
        return min(lmax, required_degree(d, beta, TRUNCATION_TOL, lmax_cap=max(lmax, 1)))
    except ValueError:  # the tail is above round-off even at lmax: keep every degree
        return lmax


class Velocity:
    """Attention velocity v[ρ] = P_x A(x; ρ) from ρ's coefficients.

    With F(x) = e^{-abs(β)}(K_β * ρ)(x) = Σ λ_l ρ_lm Y_lm(x) (scaled eigenvalues) extended to R^d
    by F(r x) = Σ λ_l(rβ) ρ_lm Y_lm(x), the ambient gradient at ``|x| = 1`` is
    ∇_S F + x β Σ λ_l'(β) ρ_lm Y_lm, and A = V ∇_amb F / (β F). For V = I the radial
    part is removed by P_x, so only ∇_S F / (β F) is computed.

    λ_l decays faster than geometrically once l > β, so F is synthesised at the degree
    :attr:`lconv` <= lmax beyond which the omitted part is below round-off
    (:func:`convolution_degree`); on a grid this costs a fraction of a full-degree transform.

    Parameters
    ----------
    d : int
    lmax : int
    beta : float, nonzero
    V : ndarray (d, d) or None
    """

    def __init__(self, d: int, lmax: int, beta: float, V: np.ndarray | None):
        self.basis = basis(d, lmax)
        self.d, self.lmax, self.beta, self.V = d, lmax, beta, V
        self.lconv = convolution_degree(d, beta, lmax)
        self.conv_basis = basis(d, self.lconv)
        # entries of a degree-lmax state that make up the degree-lconv state
        self._keep = self.basis.resize(np.arange(self.basis.n_state).astype(self.basis.state_dtype),
                                       self.lconv).real.astype(np.intp)
        ell = self.conv_basis.ell
        self.lam = attention_eigenvalues(d, beta, self.lconv)[ell]
        self.dlam = attention_eigen_derivative(d, beta, self.lconv)[ell] if V is not None else None

    def on_grid(self, grid: Grid, c: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Frame components of v[ρ] at the grid nodes, and e^{-abs(β)} K_β * ρ there."""
        ck = c[self._keep]
        conv, g = grid.synth_grad(self.lam * ck, self.lconv)
        if self.V is not None:
            rad = self.beta * grid.synth_grad(self.dlam * ck, self.lconv, grad=False)[0]
            g = grid.components((grid.ambient(g) + rad[:, None] * grid.points) @ self.V.T)
        inv = np.multiply(conv, self.beta)
        np.divide(1.0, inv, out=inv)
        for gk in g:  # the synthesised gradient is a fresh array: scale it in place
            gk *= inv
        return g, conv

    def drift_on_grid(self, grid: Grid, c: np.ndarray, dt: float, field, *, radial: bool = False,
                      scale: np.ndarray | None = None, weighted: bool = False,
                      out: np.ndarray | None = None) -> np.ndarray | None:
        """Rows (d - 1, Q) of h v[ρ] + ΔW in the grid's frame (and <ΔW, x> with ``radial``), or None.

        With F = e^{-abs(β)} K_β * ρ, h v + ΔW = (h / (β F)) (∇_S F + (β / h) F ΔW) for V = I, and
        the grid forms the bracket from ring coefficients (:meth:`~meanfield.sphere.Grid.synth_grad_times`).
        None where that does not apply (a value matrix V, a field without harmonic coefficients, a
        grid too coarse for it): the caller then adds the two parts itself. With ``scale`` (Q,)
        every row is multiplied by it, and with ``weighted`` by the quadrature weights too (the
        grid folds them into F: no pass of its own). ``out`` (1 + rows, Q): a work array the rows
        are written to (``out[1:]`` is returned; ``out[0]`` is overwritten), see
        :meth:`~meanfield.sphere.Grid.synth`.
        """
        if self.V is not None or field.coeffs is None or field.lmax is None:
            return None
        k = dt / self.beta
        res = grid.synth_grad_times(self.lam * c[self._keep], self.lconv, field.coeffs, field.lmax,
                                    self.beta / dt, radial=radial, out=out, f_over_weights=k if weighted else None)
        if res is None:
            return None
        s, U = res  # s is F (or F / (k w)) on the grid, a buffer of its own: the row factor goes there
        factor = 1.0 if weighted else k  # F / (k w) already carries k and the weights

        def rows(a: int, b: int) -> None:
            # one block of the row factor (scale) k w / F stays in cache for the rows it multiplies
            f = s[a:b]
            if scale is None:
                np.divide(factor, f, out=f)
            else:
                np.divide(scale[a:b], f, out=f)
                if factor != 1.0:
                    f *= factor
            U[:, a:b] *= f

        # in blocks on one thread: split over two, the exponential step measured 4-6 % slower at lmax
        # 128-256 (the pass is memory-bound and the transforms around it are threaded)
        if grid.Q <= _threads.CACHE_ROWS:
            rows(0, grid.Q)  # one block: the call overhead is a few per cent of a step on S^1
        else:
            _threads.parallel_rows(rows, grid.Q, min_rows=grid.Q + 1)
        return U

    def at_points(self, c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v[ρ](x) (N, d) and e^{-abs(β)} K_β * ρ (N,) at unit vectors x (N, d)."""
        ck = c[self._keep]
        lc = self.lam * ck
        b = self.conv_basis
        conv = b.evaluate(lc, x)
        g = b.gradient_at(lc, x)
        if self.V is not None:
            rad = self.beta * b.evaluate(self.dlam * ck, x)
            g = tangent_project(x, (g + rad[:, None] * x) @ self.V.T)
        return g / (self.beta * conv)[:, None], conv
