"""Step maps of the characteristics scheme and their tangent Jacobians (private helpers).

One step of the particle / push-forward scheme is

    T(x) = Π(z),   z = x + h v(x) + ΔW(x),   Π(z) = z / |z|,

(or, for rotation noise with ``noise_map="flow"``, T(x) = exp(ΔΩ) Π(x + h v(x))). Its
tangent Jacobian acting on a tangent vector ξ at x is

    DT(x) ξ = P_y (ξ + h Dv(x) ξ + DΔW(x) ξ) / |z|,   y = T(x),   P_y = I - y y^T,

where D denotes the ambient derivative along the sphere. Everything here is vectorised
over points; the matrices returned act on tangent vectors and have shape (N, d, d).

Attention. With Q = K = I and value matrix V, A(x; μ) = V N(x) / G(x) with the two
zonal convolutions G = e^{-β} K_β * μ and N_a = e^{-β} K_β * (y_a μ) (a = 1..d), both
diagonal in harmonics (eigenvalues e^{-β} λ_l, :func:`meanfield.attention.attention_eigenvalues`).
So v = P_x A and, for ξ tangent,

    DA ξ = V (∇N ξ / G - N (∇G · ξ) / G²),
    Dv ξ = P_x DA ξ - x (A · ξ) - (x · A) ξ,

with ∇ the surface gradient. One step stores the d + 1 coefficient vectors (already
multiplied by e^{-β} λ_l), so the velocity of a past step can be re-evaluated anywhere
(new nodes after a cell split, backward characteristics). For V = I the velocity P_x N/G
equals the spectral attention's β^{-1} ∇_S log G (because ∇_amb G = β N) up to the
truncation error that the degree is chosen to keep below ``tol``.
"""

from __future__ import annotations

import math

import ducc0
import numpy as np
from scipy.linalg import expm

from .._attention_transforms import DUCC_EPS_MIN, _s2_loc, _s2_tangent
from .._threads import default_threads
from ..attention import attention_eigenvalues
from ..attention_spectral import SpectralAttention
from ..sphere import basis

__all__: list[str] = []

#: Step of the centred finite difference used for the gradient of a noise field that is not
#: spectral (random-feature MLP noise): error O(FD_STEP²) + O(ε_machine / FD_STEP) ≈ 1e-10.
FD_STEP = 1e-6


# Batched products of small matrices: np.matmul on stacks of 3 x 3 matrices is about 2x faster
# than einsum (12 vs 29 ms at N = 1e5 on 2 loaded cores). A component-major layout (arrays of
# shape (3, 3, N)) would be another 10x faster for these products; not done yet.
def matmat(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(N, a, b) @ (N, b, k) -> (N, a, k)."""
    return np.matmul(A, B)


def vecmat(v: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(N, a) · (N, a, b) -> (N, b)."""
    return np.matmul(v[:, None, :], A)[:, 0, :]


def matvec(A: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(N, a, b) @ (N, b) -> (N, a)."""
    return np.matmul(A, v[:, :, None])[:, :, 0]

def frame(x: np.ndarray) -> np.ndarray:
    """Oriented orthonormal tangent frame at x, shape (N, d, d-1).

    S^2: e_1 = a × x / |a × x| with a = e_z (a = e_x near the poles), e_2 = x × e_1,
    so e_1 × e_2 = x. S^1: e_1 = (-x_2, x_1).
    """
    if x.shape[1] == 2:
        return np.stack([-x[:, 1], x[:, 0]], axis=1)[:, :, None]
    a = np.zeros_like(x)
    polar = np.abs(x[:, 2]) > 0.9
    a[~polar, 2] = 1.0
    a[polar, 0] = 1.0
    e1 = np.cross(a, x)
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(x, e1)
    return np.stack([e1, e2], axis=2)


def tangent_det(F: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Oriented area/length factor of tangent columns F (N, d, d-1) at y: (F_1 × F_2)·y or F_1·(-y_2, y_1)."""
    if y.shape[1] == 2:
        return F[:, 0, 0] * (-y[:, 1]) + F[:, 1, 0] * y[:, 0]
    return np.einsum("ij,ij->i", np.cross(F[:, :, 0], F[:, :, 1]), y)


def project_points(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = np.linalg.norm(z, axis=1)
    return z / r[:, None], r


# ----------------------------------------------------------------------------------------
# scalar transforms: coefficients <-> values and surface gradients at points
# ----------------------------------------------------------------------------------------


class Backend:
    """Harmonic transforms at scattered points on S^1 (real Fourier, direct) or S^2 (ducc0).

    Coefficient layout: S^2 ducc0 complex alm (healpy packing), S^1 real Fourier in the order
    of :func:`meanfield.harmonics.real_basis`.
    """

    def __init__(self, d: int, eps: float):
        self.d, self.eps, self.nthreads = d, max(eps, DUCC_EPS_MIN), default_threads()

    def ell(self, lmax: int) -> np.ndarray:
        if self.d == 2:
            return np.concatenate([[0], np.repeat(np.arange(1, lmax + 1), 2)])
        return np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])

    # S^1 helpers: cos kθ, sin kθ for k = 1..L, blocked so memory stays O(block · L)
    @staticmethod
    def _trig(x: np.ndarray, lmax: int):
        th = np.arctan2(x[:, 1], x[:, 0])
        k = np.arange(1, lmax + 1)
        kt = np.outer(th, k)
        return np.cos(kt), np.sin(kt), k

    def adjoint(self, w: np.ndarray, x: np.ndarray, lmax: int) -> np.ndarray:
        """Σ_q w[c, q] conj(Y_lm(x_q)) for each row c of w (K, N); returns (K, n_coeffs)."""
        if self.d == 2:
            out = np.zeros((w.shape[0], 2 * lmax + 1))
            out[:, 0] = w.sum(axis=1) / math.sqrt(2 * math.pi)
            block = max(1, 2**20 // max(lmax, 1))
            for s in range(0, x.shape[0], block):
                c, sn, _ = self._trig(x[s : s + block], lmax)
                wb = w[:, s : s + block]
                out[:, 1::2] += wb @ c / math.sqrt(math.pi)
                out[:, 2::2] += wb @ sn / math.sqrt(math.pi)
            return out

        loc, _ = _s2_loc(x)
        return np.stack([
            ducc0.sht.experimental.adjoint_synthesis_general(
                map=np.ascontiguousarray(wr[None]), spin=0, lmax=lmax, loc=loc, epsilon=self.eps,
                nthreads=self.nthreads)[0]
            for wr in w])

    def synth(self, coeffs: np.ndarray, x: np.ndarray, lmax: int, grad: bool = True):
        """Values (K, N) and ambient surface gradients (K, N, d) of K fields at points x (N, d)."""
        K, n = coeffs.shape[0], x.shape[0]
        vals = np.empty((K, n))
        grads = np.empty((K, n, self.d)) if grad else None
        if self.d == 2:
            block = max(1, 2**20 // max(lmax, 1))
            for s in range(0, n, block):
                xb = x[s : s + block]
                c, sn, k = self._trig(xb, lmax)
                a, b = coeffs[:, 1::2] / math.sqrt(math.pi), coeffs[:, 2::2] / math.sqrt(math.pi)
                vals[:, s : s + block] = coeffs[:, :1] / math.sqrt(2 * math.pi) + a @ c.T + b @ sn.T
                if grad:
                    dth = (b * k) @ c.T - (a * k) @ sn.T
                    grads[:, s : s + block, 0] = -dth * xb[:, 1]
                    grads[:, s : s + block, 1] = dth * xb[:, 0]
            return vals, grads

        loc, r = _s2_loc(x)
        for i in range(K):
            alm = np.ascontiguousarray(coeffs[i : i + 1])
            vals[i] = ducc0.sht.synthesis_general(alm=alm, spin=0, lmax=lmax, loc=loc, epsilon=self.eps,
                                                  nthreads=self.nthreads)[0]
            if grad:
                g = ducc0.sht.synthesis_general(alm=alm, spin=1, lmax=lmax, loc=loc, epsilon=self.eps,
                                                nthreads=self.nthreads, mode="DERIV1")
                grads[i] = _s2_tangent(x, r, g[0], g[1])
        return vals, grads


    def synth_hessian(self, coeffs: np.ndarray, x: np.ndarray, lmax: int):
        """Value (N,), ambient surface gradient (N, d) and covariant Hessian as a tangent operator (N, d, d)
        of ONE field with coefficients ``coeffs`` (n_coeffs,).

        S^2: the Hessian in the (e_θ, e_φ) frame comes from the Laplacian (spin 0, -l(l+1) a_lm)
        and one spin-2 synthesis of E = sqrt((l-1) l (l+1) (l+2)) a_lm, which gives
        Q = -(H_θθ - H_φφ), U = -2 H_θφ (ducc0 0.42 conventions, checked against the
        derivative of the gradient to 1e-12). S^1: f'' e e^T.
        """
        if self.d == 2:
            n = x.shape[0]
            vals, grads = self.synth(coeffs[None], x, lmax)
            k = np.concatenate([[0], np.repeat(np.arange(1, lmax + 1), 2)]).astype(float)
            f2, _ = self.synth((-(k**2) * coeffs)[None], x, lmax, grad=False)
            e = np.stack([-x[:, 1], x[:, 0]], axis=1)
            return vals[0], grads[0], f2[0][:, None, None] * e[:, :, None] * e[:, None, :]

        loc, r = _s2_loc(x)
        ell = self.ell(lmax).astype(float)
        alm = np.ascontiguousarray(coeffs[None])
        kw = dict(lmax=lmax, loc=loc, epsilon=self.eps, nthreads=self.nthreads)
        val = ducc0.sht.synthesis_general(alm=alm, spin=0, **kw)[0]
        g = ducc0.sht.synthesis_general(alm=alm, spin=1, mode="DERIV1", **kw)
        lap = ducc0.sht.synthesis_general(alm=(-ell * (ell + 1) * coeffs)[None], spin=0, **kw)[0]
        if lmax >= 2:
            e2 = np.sqrt(np.maximum((ell - 1) * ell * (ell + 1) * (ell + 2), 0.0)) * coeffs
            qu = ducc0.sht.synthesis_general(alm=np.stack([e2, np.zeros_like(e2)]), spin=2, **kw)
        else:
            qu = np.zeros((2, x.shape[0]))
        one, zero = np.ones(x.shape[0]), np.zeros(x.shape[0])
        et, ep = _s2_tangent(x, r, one, zero), _s2_tangent(x, r, zero, one)
        htt, hpp, htp = 0.5 * (lap - qu[0]), 0.5 * (lap + qu[0]), -0.5 * qu[1]
        # H = E h E^T with E = [e_θ, e_φ] and h the 2 x 2 frame Hessian
        Eh0 = htt[:, None] * et + htp[:, None] * ep
        Eh1 = htp[:, None] * et + hpp[:, None] * ep
        H = Eh0[:, :, None] * et[:, None, :]
        H += Eh1[:, :, None] * ep[:, None, :]
        return val, g[0][:, None] * et + g[1][:, None] * ep, H


# ----------------------------------------------------------------------------------------
# attention
# ----------------------------------------------------------------------------------------


class Attention:
    """Attention coefficients of a weighted cloud and the velocity / its Jacobian from them."""

    def __init__(self, d: int, beta: float, V: np.ndarray | None, tol: float):
        self.d, self.beta, self.V = d, beta, V
        sa = SpectralAttention(d, beta, tol=tol)
        # worst-case degree (g >= e^{-2β} anywhere on the sphere): the stored coefficients of a
        # step are also evaluated away from the nodes (backward characteristics, new nodes)
        self.lmax = max(int(sa.lmax), 2)  # ducc0 needs lmax >= spin (1 for gradients, 2 for Hessians)
        self.eps = float(sa.epsilon)
        self.backend = Backend(d, self.eps)
        self.lam = attention_eigenvalues(d, beta, self.lmax)[self.backend.ell(self.lmax)]
        # V = I and β > 0: v = ∇_S log G / β needs G alone (β = 0 has no gradient: use N / G)
        self.identity = V is None and beta > 0

    def coefficients(self, x: np.ndarray, masses: np.ndarray) -> np.ndarray:
        """Rows [G, N_1, ..., N_d] (already times e^{-β} λ_l), shape (d + 1, n_coeffs); only [G] when V = I, β > 0."""
        w = masses / masses.sum()
        rows = w[None] if self.identity else np.concatenate([w[None], (w[:, None] * x).T], axis=0)
        return self.backend.adjoint(rows, x, self.lmax) * self.lam

    def evaluate(self, coeffs: np.ndarray, x: np.ndarray, jac: bool = True):
        """v(x) (N, d) and, if ``jac``, the matrix of ξ -> Dv(x) ξ (N, d, d)."""
        if self.identity:
            return self._evaluate_identity(coeffs[0], x, jac)
        vals, grads = self.backend.synth(coeffs, x, self.lmax, grad=jac)
        G, Nv = vals[0], vals[1:].T  # (N,), (N, d)
        A = Nv / G[:, None]
        if self.V is not None:
            A = A @ self.V.T
        xa = np.einsum("ij,ij->i", x, A)
        v = A - xa[:, None] * x
        if not jac:
            return v, None
        gG, gN = grads[0], np.transpose(grads[1:], (1, 0, 2))  # (N, d), (N, d_a, d)
        DA = gN / G[:, None, None] - Nv[:, :, None] * gG[:, None, :] / (G * G)[:, None, None]
        if self.V is not None:
            DA = np.einsum("ab,nbc->nac", self.V, DA)
        PDA = DA - x[:, :, None] * vecmat(x, DA)[:, None, :]
        Dv = PDA - x[:, :, None] * A[:, None, :]
        Dv -= xa[:, None, None] * np.eye(self.d)
        return v, Dv

    def _evaluate_identity(self, g: np.ndarray, x: np.ndarray, jac: bool):
        """V = I: v = ∇G / (βG), Dv ξ = Hξ/(βG) - ∇G (∇G·ξ)/(βG²) - x (v·ξ) (H the covariant Hessian):
        one adjoint and four syntheses per step instead of 4 + 8 for general V."""
        if not jac:
            vals, grads = self.backend.synth(g[None], x, self.lmax)
            return grads[0] / (self.beta * vals[0])[:, None], None
        G, gG, H = self.backend.synth_hessian(g, x, self.lmax)
        bG = self.beta * G
        v = gG / bG[:, None]
        Dv = H / bG[:, None, None] - gG[:, :, None] * gG[:, None, :] / (bG * G)[:, None, None]
        Dv -= x[:, :, None] * v[:, None, :]
        return v, Dv


# ----------------------------------------------------------------------------------------
# noise
# ----------------------------------------------------------------------------------------


class NoiseStep:
    """The noise increment of one step: values ΔW(x) (N, d) and Jacobian ξ -> DΔW(x) ξ (N, d, d).

    Spectral fields (:class:`meanfield.noise.FieldIncrement`) are differentiated exactly
    through their harmonic expansion; linear fields (rotation noise) exactly; any other
    callable field by a centred difference of step :data:`FD_STEP` along the tangent frame.
    """

    def __init__(self, field, d: int, eps: float, flow: bool = False):
        self.field, self.d, self.flow = field, d, flow
        self.kind = "generic"
        self.R = None
        if flow:
            self.kind = "flow"
            self.R = expm(field.omega)
        elif field.coeffs is not None and field.lmax is not None:
            self.kind = "spectral"
            self.lmax = int(field.lmax)
            self.coeffs = basis(d, self.lmax).from_real(field.coeffs)
            self.backend = Backend(d, eps)
        elif field.omega is not None:
            self.kind = "linear"
            self.omega = np.asarray(field.omega, dtype=np.float64)

    def evaluate(self, x: np.ndarray, jac: bool = True):
        if self.kind == "spectral":
            vals, grads = self.backend.synth(self.coeffs, x, self.lmax, grad=jac)
            return vals.T, (np.transpose(grads, (1, 0, 2)) if jac else None)
        if self.kind == "linear":
            return x @ self.omega.T, (np.broadcast_to(self.omega, (x.shape[0], self.d, self.d)) if jac else None)
        w = np.asarray(self.field(x), dtype=np.float64)
        if not jac:
            return w, None
        E = frame(x)
        D = np.zeros((x.shape[0], self.d, self.d))
        for j in range(self.d - 1):
            e = E[:, :, j]
            wp = np.asarray(self.field(project_points(x + FD_STEP * e)[0]), dtype=np.float64)
            wm = np.asarray(self.field(project_points(x - FD_STEP * e)[0]), dtype=np.float64)
            D += ((wp - wm) / (2 * FD_STEP))[:, :, None] * e[:, None, :]
        return w, D


# ----------------------------------------------------------------------------------------
# one step
# ----------------------------------------------------------------------------------------


class Step:
    """Everything needed to re-apply step n anywhere: dt, attention coefficients, noise."""

    __slots__ = ("dt", "att_coeffs", "noise")

    def __init__(self, dt: float, att_coeffs, noise: NoiseStep | None):
        self.dt, self.att_coeffs, self.noise = dt, att_coeffs, noise


def apply_step(step: Step, attention: Attention | None, x: np.ndarray, jac: bool = True):
    """y = T(x) (N, d) and, if ``jac``, the tangent Jacobian matrix DT(x) (N, d, d)."""
    d = x.shape[1]
    z = x.copy()
    M = np.broadcast_to(np.eye(d), (x.shape[0], d, d)).copy() if jac else None
    if attention is not None and step.att_coeffs is not None:
        v, Dv = attention.evaluate(step.att_coeffs, x, jac)
        z += step.dt * v
        if jac:
            M += step.dt * Dv
    ns = step.noise
    if ns is not None and ns.kind != "flow":
        w, Dw = ns.evaluate(x, jac)
        z += w
        if jac:
            M += Dw
    y, r = project_points(z)
    DT = None
    if jac:
        M -= y[:, :, None] * vecmat(y, M)[:, None, :]
        M /= r[:, None, None]
        DT = M
    if ns is not None and ns.kind == "flow":
        y = y @ ns.R.T
        if jac:
            DT = np.einsum("ab,nbc->nac", ns.R, DT)
    return y, DT


def step_log_det(DT: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log det of DT as a map T_x S -> T_y S between oriented orthonormal frames; -inf or NaN if it folds."""
    F = matmat(DT, frame(x))
    det = tangent_det(F, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(det > 0, np.log(np.where(det > 0, det, 1.0)), -np.inf), det


def invert_step(step: Step, attention: Attention | None, y: np.ndarray, *, tol: float = 1e-14,
                max_iter: int = 30):
    """Newton on the sphere for T(x) = y: returns x (N, d), log det DT(x) (N,) and |T(x) - y| (N,).

    Each iteration solves DT(x) [e_1 .. e_{d-1}] a = P_{T(x)} (y - T(x)) in the least-squares
    sense (exact: both sides lie in T_{T(x)} S) and moves x <- Π(x + Σ a_j e_j). The step map
    is a near-identity (|T(x) - x| = O(sqrt h)), so the iteration starts at x = y and converges
    quadratically.
    """
    x = y.copy()
    n = y.shape[0]
    done = np.zeros(n, dtype=bool)
    res = np.full(n, np.inf)
    for it in range(max_iter):
        act = ~done
        if not act.any():
            break
        xa = x[act]
        Tx, DT = apply_step(step, attention, xa, jac=True)
        r = y[act] - Tx
        r -= np.einsum("ij,ij->i", r, Tx)[:, None] * Tx
        E = frame(xa)
        F = matmat(DT, E)
        FtF = matmat(np.transpose(F, (0, 2, 1)), F)
        Ftr = vecmat(r, F)
        sol = np.linalg.solve(FtF, Ftr[:, :, None])[:, :, 0]
        x[act], _ = project_points(xa + matvec(E, sol))
        nr = np.linalg.norm(r, axis=1)
        # the transforms are accurate to ~eps, so the residual floors near 1e-14..1e-13:
        # stop at tol or once it no longer halves
        stalled = (it >= 3) & (nr > 0.5 * res[act])
        res[act] = nr
        idx = np.nonzero(act)[0]
        done[idx[(nr < tol) | stalled]] = True
    Tx, DT = apply_step(step, attention, x, jac=True)
    logdet, _ = step_log_det(DT, x, Tx)
    return x, logdet, np.linalg.norm(Tx - y, axis=1)
