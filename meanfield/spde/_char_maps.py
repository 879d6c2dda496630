"""Step maps of the characteristics scheme and their tangent Jacobians (private helpers).

One step of the particle / push-forward scheme is

    T(x) = Π(z),   z = x + h v(x) + ΔW(x),   Π(z) = z / |z|,

(or, for rotation noise with ``noise_map="flow"``, T(x) = exp(ΔΩ) Π(x + h v(x))). Its
tangent Jacobian acting on a tangent vector ξ at x is

    DT(x) ξ = P_y (ξ + h Dv(x) ξ + DΔW(x) ξ) / |z|,   y = T(x),   P_y = I - y y^T,

where D denotes the ambient derivative along the sphere. Everything here is vectorised
over points; the matrices returned act on tangent vectors and have shape (N, d, d).

Attention. With Q = K = I and value matrix V, A(x; μ) = V N(x) / G(x) with the two
zonal convolutions G = e^{-abs(β)} K_β * μ and N_a = e^{-abs(β)} K_β * (y_a μ) (a = 1..d), both
diagonal in harmonics (eigenvalues e^{-abs(β)} λ_l, :func:`meanfield.attention.attention_eigenvalues`).
So v = P_x A and, for ξ tangent,

    DA ξ = V (∇N ξ / G - N (∇G · ξ) / G²),
    Dv ξ = P_x DA ξ - x (A · ξ) - (x · A) ξ,

with ∇ the surface gradient. One step stores the d + 1 coefficient vectors (already
multiplied by e^{-abs(β)} λ_l), so the velocity of a past step can be re-evaluated anywhere
(new nodes after a cell split, backward characteristics). For V = I the velocity P_x N/G
equals the spectral attention's β^{-1} ∇_S log G (because ∇_amb G = β N) up to the
truncation error that the degree is chosen to keep below ``tol``.
"""

from __future__ import annotations


import numpy as np
from scipy.linalg import expm

from .._attention_transforms import DUCC_EPS_MIN
from .._threads import parallel_rows
from ..attention import attention_eigenvalues
from ..attention_spectral import SpectralAttention
from ..sphere import basis, oriented_frame, row_norms, tangent_volume

__all__: list[str] = []

#: Step of the centred finite difference used for the gradient of a noise field that is not
#: spectral (random-feature MLP noise): error O(FD_STEP²) + O(ε_machine / FD_STEP) ≈ 1e-10.
FD_STEP = 1e-6


# Stacks of small matrices have the logical shape (N, a, b) and are stored component-major (memory
# (a, b, N), :func:`stack`): every entry A[:, i, j] is then one contiguous (N,) vector, and a product
# of two stacks is a few vector operations per entry. np.matmul on C-ordered stacks runs a 3 x 3
# kernel per point: 5.4-5.9 against 0.74-1.25 ms at N = 1e5 and 0.25-0.27 against 0.04-0.07 ms at
# N = 4608 (3 x 3 times 3 x 2 and 3 x 3, measured). The helpers below accept any layout (strided
# entries are slower, not wrong) and return component-major stacks.
def stack(n: int, a: int, b: int, *, zeros: bool = False) -> np.ndarray:
    """A component-major stack of n (a, b) matrices: logical shape (n, a, b), memory (a, b, n)."""
    return (np.zeros if zeros else np.empty)((a, b, n)).transpose(2, 0, 1)


def matmat(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(N, a, b) @ (N, b, k) -> (N, a, k), component-major."""
    n, a, b = A.shape
    k = B.shape[2]
    out = stack(n, a, k)
    for i in range(a):
        for j in range(k):
            o = out[:, i, j]
            np.multiply(A[:, i, 0], B[:, 0, j], out=o)
            for m in range(1, b):
                o += A[:, i, m] * B[:, m, j]
    return out


def vecmat(v: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(N, a) · (N, a, b) -> (N, b) (columns contiguous)."""
    n, a, b = A.shape
    out = np.empty((b, n)).T
    for j in range(b):
        o = out[:, j]
        np.multiply(v[:, 0], A[:, 0, j], out=o)
        for i in range(1, a):
            o += v[:, i] * A[:, i, j]
    return out


def sub_outer(M: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """M -= u ⊗ v in place for stacks M (N, a, b), u (N, a), v (N, b); returns M.

    One (N,)-vector operation per entry: the broadcast ``u[:, :, None] * v[:, None, :]`` forms an
    (N, a, b) temporary with inner dimensions of 3 and is 3x slower at N = 1e5 (same numbers).
    """
    for i in range(M.shape[1]):
        for j in range(M.shape[2]):
            M[:, i, j] -= u[:, i] * v[:, j]
    return M


def matvec(A: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(N, a, b) @ (N, b) -> (N, a)."""
    n, a, b = A.shape
    out = np.empty((n, a))
    for i in range(a):
        o = out[:, i]
        np.multiply(A[:, i, 0], v[:, 0], out=o)
        for j in range(1, b):
            o += A[:, i, j] * v[:, j]
    return out


def frame(x: np.ndarray) -> np.ndarray:
    """Oriented orthonormal tangent frame at x, shape (N, d, d-1) (component-major on S^2).

    S^2: e_1 = a × x / |a × x| with a = e_z (a = e_x near the poles), e_2 = x × e_1,
    so e_1 × e_2 = x. S^1: e_1 = (-x_2, x_1). d >= 4: :func:`meanfield.sphere.oriented_frame`.
    """
    if x.shape[1] > 3:
        return oriented_frame(x)
    if x.shape[1] == 2:
        return np.stack([-x[:, 1], x[:, 0]], axis=1)[:, :, None]
    x0, x1, x2 = x[:, 0], x[:, 1], x[:, 2]
    polar = np.abs(x2) > 0.9
    E = stack(x.shape[0], 3, 2)
    # e_z × x = (-x_1, x_0, 0), e_x × x = (0, -x_2, x_1), entry by entry
    a0 = np.where(polar, 0.0, -x1)
    a1 = np.where(polar, -x2, x0)
    a2 = np.where(polar, x1, 0.0)
    r = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    np.divide(a0, r, out=E[:, 0, 0])
    np.divide(a1, r, out=E[:, 1, 0])
    np.divide(a2, r, out=E[:, 2, 0])
    a0, a1, a2 = E[:, 0, 0], E[:, 1, 0], E[:, 2, 0]
    np.subtract(x1 * a2, x2 * a1, out=E[:, 0, 1])
    np.subtract(x2 * a0, x0 * a2, out=E[:, 1, 1])
    np.subtract(x0 * a1, x1 * a0, out=E[:, 2, 1])
    return E


def tangent_det(F: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Oriented volume factor of tangent columns F (N, d, d-1) at y: (F_1 × F_2)·y, F_1·(-y_2, y_1), or
    det[F, y] for d >= 4 (:func:`meanfield.sphere.tangent_volume`)."""
    if y.shape[1] > 3:
        return tangent_volume(F, y)
    if y.shape[1] == 2:
        return F[:, 0, 0] * (-y[:, 1]) + F[:, 1, 0] * y[:, 0]
    f, g = F[:, :, 0], F[:, :, 1]
    return (y[:, 0] * (f[:, 1] * g[:, 2] - f[:, 2] * g[:, 1]) + y[:, 1] * (f[:, 2] * g[:, 0] - f[:, 0] * g[:, 2])
            + y[:, 2] * (f[:, 0] * g[:, 1] - f[:, 1] * g[:, 0]))


def project_points(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = row_norms(z)
    return z / r[:, None], r


# ----------------------------------------------------------------------------------------
# scalar transforms: coefficients <-> values and surface gradients at points
# ----------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------
# attention
# ----------------------------------------------------------------------------------------


class Attention:
    """Attention coefficients of a weighted cloud and the velocity / its Jacobian from them."""

    def __init__(self, d: int, beta: float, V: np.ndarray | None, tol: float):
        self.d, self.beta, self.V = d, beta, V
        try:
            sa = SpectralAttention(d, beta, tol=tol)
        except ValueError as exc:
            raise ValueError(f"solve_characteristics: {exc}; here raise attention_tol instead") from exc
        # worst-case degree (g >= e^{-2|β|} anywhere on the sphere): the stored coefficients of a
        # step are also evaluated away from the nodes (backward characteristics, new nodes)
        self.lmax = max(int(sa.lmax), 2)  # ducc0 needs lmax >= spin (1 for gradients, 2 for Hessians)
        self.eps = float(sa.epsilon)
        self.basis = basis(d, self.lmax)
        self.lam = attention_eigenvalues(d, beta, self.lmax)[self.basis.ell]
        # V = I and β != 0: v = ∇_S log G / β needs G alone (β = 0 has no gradient: use N / G)
        self.identity = V is None and beta != 0

    def coefficients(self, x: np.ndarray, masses: np.ndarray) -> np.ndarray:
        """Rows [G, N_1, ..., N_d] (already times e^{-abs(β)} λ_l), shape (d + 1, n_coeffs); only [G] when V = I, β != 0."""
        w = masses / masses.sum()
        rows = w[None] if self.identity else np.concatenate([w[None], (w[:, None] * x).T], axis=0)
        return self.basis.adjoint_rows(rows, x, epsilon=self.eps) * self.lam

    def fields(self, coeffs: np.ndarray, x: np.ndarray, jac: bool = True) -> tuple:
        """The transforms of the velocity at all points x (N, d): the input of :meth:`velocity_rows`.

        V = I, β != 0: ``(G, ∇G, H)`` (H the covariant Hessian, None without ``jac``); otherwise
        the values (d + 1, N) and surface gradients (d + 1, N, d) of the rows [G, N_1..N_d].
        """
        if self.identity:
            if not jac:
                vals, grads = self.basis.synth_rows(coeffs[:1], x, epsilon=self.eps)
                return vals[0], grads[0], None
            return self.basis.hessian_at(coeffs[0], x, epsilon=self.eps)
        return self.basis.synth_rows(coeffs, x, grad=jac, epsilon=self.eps)

    def velocity_rows(self, f: tuple, x: np.ndarray, s: int, e: int, jac: bool = True):
        """v(x) (n, d) and, if ``jac``, the matrix of ξ -> Dv(x) ξ (n, d, d) at rows s:e of x, from
        :meth:`fields`; elementwise, so row blocks give the same numbers as all rows at once
        (the rows s:e of a Hessian in ``f`` are overwritten)."""
        xs = x[s:e]
        if self.identity:
            # V = I: v = ∇G / (βG), Dv ξ = Hξ/(βG) - ∇G (∇G·ξ)/(βG²) - x (v·ξ): one adjoint and four
            # syntheses per step instead of 4 + 8 for general V
            G, gG, H = f
            bG = self.beta * G[s:e]
            v = gG[s:e] / bG[:, None]
            if not jac:
                return v, None
            # ∇G (∇G·ξ)/(βG²) + x (v·ξ) = (β v + x)(v·ξ): one outer product of (n, d) vectors
            Dv = np.divide(H[s:e], bG[:, None, None], out=H[s:e])
            return v, sub_outer(Dv, self.beta * v + xs, v)
        vals, grads = f
        G, Nv = vals[0, s:e], vals[1:, s:e].T  # (n,), (n, d)
        A = Nv / G[:, None]
        if self.V is not None:
            A = A @ self.V.T
        xa = np.einsum("ij,ij->i", xs, A)
        v = A - xa[:, None] * xs
        if not jac:
            return v, None
        gG, gN = grads[0, s:e], np.transpose(grads[1:, s:e], (1, 0, 2))  # (n, d), (n, d_a, d)
        DA = gN / G[:, None, None] - Nv[:, :, None] * gG[:, None, :] / (G * G)[:, None, None]
        if self.V is not None:
            DA = np.einsum("ab,nbc->nac", self.V, DA)
        PDA = DA - xs[:, :, None] * vecmat(xs, DA)[:, None, :]
        Dv = PDA - xs[:, :, None] * A[:, None, :]
        Dv -= xa[:, None, None] * np.eye(self.d)
        return v, Dv

    def evaluate(self, coeffs: np.ndarray, x: np.ndarray, jac: bool = True):
        """v(x) (N, d) and, if ``jac``, the matrix of ξ -> Dv(x) ξ (N, d, d)."""
        return _by_rows(self, self.fields(coeffs, x, jac), x, jac)


def _by_rows(attention, f: tuple, x: np.ndarray, jac: bool):
    """v and Dv of every point from the fields ``f``, in row blocks (:func:`parallel_rows`)."""
    n, d = x.shape
    v = np.empty((n, d))
    Dv = stack(n, d, d) if jac else None

    def rows(s: int, e: int) -> None:
        vs, Dvs = attention.velocity_rows(f, x, s, e, jac)
        v[s:e] = vs
        if jac:
            Dv[s:e] = Dvs

    parallel_rows(rows, n)
    return v, Dv


# ----------------------------------------------------------------------------------------
# noise
# ----------------------------------------------------------------------------------------


class NoiseStep:
    """The noise increment of one step: values ΔW(x) (N, d) and Jacobian ξ -> DΔW(x) ξ (N, d, d).

    Spectral fields (:class:`meanfield.noise.FieldIncrement`) are differentiated exactly
    through their harmonic expansion; linear fields (rotation noise) exactly; fields with an
    ambient Jacobian method ``jacobian(x)`` (random-feature MLP noise) through it; any other
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
            self.basis = basis(d, self.lmax)
            self.coeffs = self.basis.from_real(field.coeffs)
            self.eps = max(eps, DUCC_EPS_MIN)
        elif field.omega is not None:
            self.kind = "linear"
            self.omega = np.asarray(field.omega, dtype=np.float64)
        elif callable(getattr(field, "jacobian", None)):
            self.kind = "jacobian"

    def evaluate(self, x: np.ndarray, jac: bool = True):
        if self.kind == "spectral":
            vals, grads = self.basis.synth_rows(self.coeffs, x, grad=jac, epsilon=self.eps)
            return vals.T, (np.transpose(grads, (1, 0, 2)) if jac else None)
        if self.kind == "linear":
            return x @ self.omega.T, (np.broadcast_to(self.omega, (x.shape[0], self.d, self.d)) if jac else None)
        if self.kind == "jacobian":
            return (self.field.jacobian(x) if jac else (np.asarray(self.field(x), dtype=np.float64), None))
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


def apply_step(step: Step, attention: Attention | None, x: np.ndarray, jac: bool = True, det: bool = False,
               carry: np.ndarray | None = None):
    """y = T(x) (N, d) and, if ``jac``, the tangent Jacobian matrix DT(x) (N, d, d).

    The transforms run over all points at once; the elementwise rest runs in row blocks
    (:func:`parallel_rows`): the same numbers as whole-array operations, but its two dozen
    (N,)-vector temporaries stay in cache, on every thread (a step of 10^5 nodes on S^2:
    50 against 42-43 ms on 2 cores, measured).

    With ``jac``, two more products are formed in the same blocks while DT is in cache:
    ``carry`` (N, d, k): DT @ carry is returned in place of DT, and DT itself is not stored;
    ``det``: the oriented volume factor of DT (:func:`volume_factor`, (N,)) is returned third.
    As separate passes over the (N, 3, 3) stack they took 11 % and 4 % of a step at 10^5 nodes
    on S^2 (measured).
    """
    n, d = x.shape
    att = None
    if attention is not None and step.att_coeffs is not None:
        att = attention.fields(step.att_coeffs, x, jac)
    ns = step.noise
    flow = ns is not None and ns.kind == "flow"
    noi = ns.evaluate(x, jac) if ns is not None and not flow else None
    y = np.empty((n, d))
    keep = jac and carry is None
    DT = stack(n, d, d) if keep else None
    out = stack(n, d, carry.shape[2]) if jac and carry is not None else None
    vol = np.empty(n) if det and jac else None

    def rows(s: int, e: int) -> None:
        z = x[s:e].copy()
        M = (DT[s:e] if keep else stack(e - s, d, d)) if jac else None
        if att is not None:
            v, Dv = attention.velocity_rows(att, x, s, e, jac)
            z += step.dt * v
            if jac:
                np.multiply(Dv, step.dt, out=M)
        elif jac:
            M[...] = 0.0
        if noi is not None:
            z += noi[0][s:e]
            if jac:
                M += noi[1][s:e]
        ys, r = project_points(z)
        if jac:
            for i in range(d):
                M[:, i, i] += 1.0
            sub_outer(M, ys, vecmat(ys, M))
            M /= r[:, None, None]
        if flow:
            ys = ys @ ns.R.T
            if jac:
                M[...] = np.einsum("ab,nbc->nac", ns.R, M)
        y[s:e] = ys
        if vol is not None:
            vol[s:e] = volume_factor(M, x[s:e], ys)
        if out is not None:
            out[s:e] = matmat(M, carry[s:e])

    parallel_rows(rows, n)
    J = DT if out is None else out
    return (y, J, vol) if det and jac else (y, J)


def volume_factor(DT: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Oriented volume factor of DT as a map T_x S -> T_y S, (N,): :func:`tangent_det` of DT applied to :func:`frame`.

    On S^2, with the frame's e_1 × e_2 = x and (A a) × (A b) = cof(A) (a × b) for any 3 x 3
    matrix A, it is y · cof(DT) x: nine 2 x 2 minors and no frame, the same number up to
    round-off in 54 instead of 69 vector operations per point.
    """
    if x.shape[1] != 3:
        return tangent_det(matmat(DT, frame(x)), y)
    out = np.zeros(x.shape[0])
    for i in range(3):
        i1, i2 = (i + 1) % 3, (i + 2) % 3
        ci = np.zeros(x.shape[0])  # (cof(DT) x)_i = Σ_j (DT_{i1 j1} DT_{i2 j2} - DT_{i1 j2} DT_{i2 j1}) x_j
        for j in range(3):
            j1, j2 = (j + 1) % 3, (j + 2) % 3
            minor = DT[:, i1, j1] * DT[:, i2, j2]
            minor -= DT[:, i1, j2] * DT[:, i2, j1]
            minor *= x[:, j]
            ci += minor
        ci *= y[:, i]
        out += ci
    return out


def log_volume(det: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log det, det) for volume factors det (N,) (:func:`volume_factor`): -inf where det <= 0, NaN where det is."""
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
        nr = row_norms(r)
        # the transforms are accurate to ~eps, so the residual floors near 1e-14..1e-13:
        # stop at tol or once it no longer halves
        stalled = (it >= 3) & (nr > 0.5 * res[act])
        res[act] = nr
        idx = np.nonzero(act)[0]
        done[idx[(nr < tol) | stalled]] = True
    Tx, _, det = apply_step(step, attention, x, jac=True, det=True)
    logdet, _ = log_volume(det)
    return x, logdet, row_norms(Tx - y)
