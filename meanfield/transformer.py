"""The discrete transformer of theory §1: attention and random-MLP layers with layer normalisation.

N tokens x_i on S^{d-1}, L layers, horizon T. Layer l = 0..L-1 ("sequential" variant):

    attention:  y_i       = Π( x_i + α1 A(x_i; μ^N) ),            α1 = T / L,
    MLP:        x_i^{l+1} = Π( y_i + α2 σ MLP_l(y_i) ),           α2 = sqrt(T / L),

    A(x; μ)  = ∫ exp(β<Qx, Ky>) V y μ(dy) / ∫ exp(β<Qx, Ky>) μ(dy),
    MLP_l(y) = m^{-1/2} A_l φ(W_l y + b_l),

with μ^N the empirical measure at the start of the half-step and fresh Gaussian weights
A_l ~ N(0,1)^{d×m}, W_l ~ N(0,σ_w²)^{m×d}, b_l ~ N(0,σ_b²)^m per layer, shared by all
tokens (the common noise). The "parallel" variant is x^{l+1} = Π(x + α1 A + α2 σ MLP_l(x)).
For every width m the layer field α2 σ MLP_l has covariance α2² κ(<x,y>) I (theory §2), so
the model is a consistent scheme for the SDE of theory §3 as L -> ∞.

``width=None`` (or ``math.inf``) is the Gaussian-field limit m -> ∞: the field of layer l
is the increment ΔW of a refinable noise path over [l T/L, (l+1) T/L], so transformers of
different depth, the particle SDE solver and the SPDE solver can share one path (theory §8).
"""

from __future__ import annotations

import math
import numpy as np

from . import _validate
from ._validate import as_beta, as_bool, as_float, as_int, as_matrix, as_points, as_rng, check_cost
from .attention import DEFAULT_BLOCK, softmax_attention
from .kernels import ActivationKernel
from .noise import NoisePath, check_noise
from .noise._path import _largest_lmax, noise_path_cost
from .particles import NonFiniteError
from .sphere import basis, has_basis, project
from .trajectory import Trajectory

__all__ = ["Transformer", "TransformerResult"]


#: The result type of :meth:`Transformer.run` (the same trajectory type as the particle solver's).
TransformerResult = Trajectory


class Transformer:
    """Deep transformer with softmax attention and random MLP layers on S^{d-1} (theory §1).

    Parameters
    ----------
    d : int, >= 2
        Token dimension.
    L : int, >= 1
        Number of layers.
    width : int >= 1, or None / math.inf
        MLP width m; ``None`` or ``math.inf`` selects the Gaussian-field limit.
    T : float, > 0
        Horizon (depth scale): α1 = T/L, α2 = sqrt(T/L).
    beta : float
        Inverse temperature, any real (β < 0 weights distant tokens more).
        Attention inverse temperature.
    kernel : ActivationKernel, optional
        Activation φ, σ_w, σ_b and output scale σ (default ReLU, σ_w = 1, σ_b = 0, σ = 1).
    variant : {"sequential", "parallel"}
    Q, K, V : ndarray (d, d), optional
        Attention matrices (default identity). ``V = 0`` switches attention off.
    noise : noise source, optional
        Gaussian-field mode only: the path whose increments are the layer fields (needs
        ``noise.d == d`` and ``noise.t_max >= T``). Default: a
        :class:`~meanfield.noise.NoisePath` of ``kernel`` with degree ``lmax`` keyed by the
        seed of :meth:`run` (d = 2, 3 only).
    lmax : int
        Degree of the default noise path (default 16).
    block : int
        Tokens per block for the attention sum and the MLP (memory O(block · max(N, m))).

    Examples
    --------
    >>> model = Transformer(d=3, L=8, width=64, T=1.0, beta=1.0)
    >>> x0 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> res = model.run(x0, seed=0)
    >>> res.x.shape, float(res.t[-1])
    ((9, 3, 3), 1.0)
    """

    def __init__(self, d: int, L: int, width, T: float, beta: float, kernel: ActivationKernel | None = None, *,
                 variant: str = "sequential", Q=None, K=None, V=None, noise=None, lmax: int = 16,
                 block: int = DEFAULT_BLOCK):
        self.d = as_int(d, "d", min_value=2)
        self.L = as_int(L, "L", min_value=1)
        if width is None or (isinstance(width, float) and math.isinf(width) and width > 0):
            self.width = None
        else:
            self.width = as_int(width, "width", min_value=1)
        self.T = as_float(T, "T", min_value=0.0, strict_min=True)
        self.beta = as_beta(beta)
        if kernel is None:
            kernel = ActivationKernel("relu")
        if not isinstance(kernel, ActivationKernel):
            raise TypeError(f"kernel must be an ActivationKernel, got {type(kernel).__name__}")
        self.kernel = kernel
        if not isinstance(variant, str) or variant not in ("sequential", "parallel"):
            raise ValueError(f"variant must be 'sequential' or 'parallel', got {variant!r}")
        self.variant = variant
        self.Q, self.K, self.V = as_matrix(Q, "Q", self.d), as_matrix(K, "K", self.d), as_matrix(V, "V", self.d)
        self.lmax = as_int(lmax, "lmax", min_value=0)
        self.block = as_int(block, "block", min_value=1)
        if self.width is not None:
            # one layer's weights (A, W, b) and a block of hidden activations
            check_cost("Transformer", seconds=0.0, memory=8.0 * self.width * (2 * self.d + 1 + min(self.block, 2**22)),
                       parameter="width", value=self.width,
                       largest=int(_validate.COST_LIMIT_BYTES // (8 * (2 * self.d + 1))))
        if noise is not None:
            if self.width is not None:
                raise ValueError("noise is used only in the Gaussian-field mode (width=None); "
                                 f"with width = {self.width} the layer fields are drawn from the run seed")
            check_noise(noise, self.d, t_end=self.T)
        elif self.width is None and not has_basis(self.d):
            raise ValueError(f"width=None (Gaussian field) with d = {self.d} needs a noise source: pass noise= "
                             f"(S^{self.d - 1} has no harmonic basis for a default NoisePath), or use a finite width")
        elif self.width is None:
            # the default noise path is built by run(): refuse a degree it cannot build now, not then

            largest = _largest_lmax(self.d, False, 40, type(basis(self.d, 0)).max_lmax)
            if self.lmax > largest:
                secs, mem = noise_path_cost(self.d, self.lmax)
                check_cost("Transformer", seconds=secs, memory=mem, parameter="lmax", value=self.lmax, largest=largest)
                raise ValueError(f"Transformer: lmax = {self.lmax} is above the largest degree accepted for the "
                                 f"noise path on S^{self.d - 1} ({largest})")
        self.noise = noise
        self.alpha1 = self.T / self.L
        self.alpha2 = math.sqrt(self.T / self.L)

    def __repr__(self) -> str:
        return (f"Transformer(d={self.d}, L={self.L}, width={self.width}, T={self.T}, beta={self.beta}, "
                f"kernel={self.kernel!r}, variant={self.variant!r})")

    # -- the two half-steps --------------------------------------------------------------
    def attention(self, x: np.ndarray) -> np.ndarray:
        """Raw softmax attention A(x_i; μ^N) of the tokens x (theory §1), not projected.

        A(x_i; μ^N) = Σ_j exp(β<Q x_i, K x_j>) V x_j / Σ_j exp(β<Q x_i, K x_j>), blocked
        over queries (memory O(block · N)).

        Parameters
        ----------
        x : ndarray, shape (N, d)
            Unit tokens; μ^N is their empirical measure.

        Returns
        -------
        ndarray, shape (N, d)

        Examples
        --------
        >>> Transformer(2, 1, 4, 1.0, 0.0).attention(np.eye(2))   # β = 0: the mean token
        array([[0.5, 0.5],
               [0.5, 0.5]])
        """
        return softmax_attention(x, self.beta, Q=self.Q, K=self.K, V=self.V, block=self.block, check=False)

    def mlp_field(self, y: np.ndarray, A: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The layer field α2 σ MLP_l(y) = α2 σ m^{-1/2} A φ(W y + b) at tokens y (theory §1, §2).

        Its covariance over weight draws is α2² κ(<x, y>) δ_ab for every width m.
        Evaluated in blocks of rows, so memory is O(min(block, 2^22/m) · m), never N × m.

        Parameters
        ----------
        y : ndarray, shape (N, d)
        A, W, b : ndarray, shapes (d, m), (m, d), (m,)
            Weights of one layer, e.g. from :meth:`draw_layer`.

        Returns
        -------
        ndarray, shape (N, d)

        Examples
        --------
        >>> model = Transformer(3, 4, 16, 1.0, 1.0)
        >>> w = model.draw_layer(np.random.default_rng(0))
        >>> model.mlp_field(np.eye(3), *w).shape
        (3, 3)
        """
        m = A.shape[1]
        c = self.alpha2 * self.kernel.scale / math.sqrt(m)
        out = np.empty_like(y)
        # memory O(rows · m): keep the hidden block under ~2^22 doubles
        rows = max(1, min(self.block, 2**22 // m))
        for s in range(0, y.shape[0], rows):
            h = self.kernel.phi(y[s : s + rows] @ W.T + b)
            out[s : s + rows] = c * (h @ A.T)
        return out

    def draw_layer(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh weights (A_l, W_l, b_l) of one MLP layer (theory §1), drawn in this order from ``rng``.

        A_l ~ N(0,1)^{d×m}, W_l ~ N(0,σ_w²)^{m×d}, b_l ~ N(0,σ_b²)^m (finite width only).

        Returns
        -------
        A : ndarray (d, m)
        W : ndarray (m, d)
        b : ndarray (m,)

        Examples
        --------
        >>> [w.shape for w in Transformer(3, 4, 16, 1.0, 1.0).draw_layer(np.random.default_rng(0))]
        [(3, 16), (16, 3), (16,)]
        """
        m, k = self.width, self.kernel
        A = rng.standard_normal((self.d, m))
        W = k.sigma_w * rng.standard_normal((m, self.d))
        b = k.sigma_b * rng.standard_normal(m)
        return A, W, b

    def _noise_for_run(self, seed):
        if self.noise is not None:
            return self.noise

        return NoisePath(self.kernel, self.d, self.lmax, seed=0 if seed is None else seed, t_max=self.T)

    # -- forward pass ---------------------------------------------------------------------
    def run(self, x0, seed=None, *, progress: bool = False) -> TransformerResult:
        """Propagate tokens through the L layers.

        Parameters
        ----------
        x0 : ndarray, shape (N, d)
            Input tokens, unit vectors.
        seed : int, SeedSequence or Generator, optional
            Finite width: source of the MLP weights (reproducible for an int or
            SeedSequence). Gaussian field without ``noise``: key of the NoisePath built for
            this run (default 0). Ignored when a ``noise`` was given.
        progress : bool
            Show a tqdm progress bar over layers.

        Returns
        -------
        TransformerResult
        """
        progress = as_bool(progress, "progress")
        x = as_points(x0, "x0", self.d)
        n = x.shape[0]
        check_cost("Transformer.run", seconds=0.0, memory=8.0 * (self.L + 1) * n * self.d,
                   parameter="(L + 1) * N * d", value=f"{self.L + 1} * {n} * {self.d}",
                   largest=f"{int(_validate.COST_LIMIT_BYTES // 8)} saved numbers")
        gaussian = self.width is None
        if gaussian:
            if seed is not None and not isinstance(seed, (int, np.integer, np.random.SeedSequence, np.random.Generator)):
                raise TypeError(f"seed must be an int, a SeedSequence or a Generator, got {type(seed).__name__}")
            noise = self._noise_for_run(seed)
            rng = None
        else:
            noise = None
            rng = as_rng(seed, "seed")
        traj = np.empty((self.L + 1, n, self.d))
        traj[0] = x
        times = self.T * np.arange(self.L + 1) / self.L
        layers = range(self.L)
        if progress:
            from tqdm.auto import tqdm

            layers = tqdm(layers, desc=f"transformer N={n}", unit="layer")
        for layer in layers:
            if gaussian:
                dW = noise.field(times[layer], times[layer + 1])
                field = dW
            else:
                weights = self.draw_layer(rng)

                def field(pts, _w=weights):
                    return self.mlp_field(pts, *_w)
            if self.variant == "sequential":
                y = project(x + self.alpha1 * self.attention(x))
                x = project(y + field(y))
            else:
                x = project(x + self.alpha1 * self.attention(x) + field(x))
            if not np.all(np.isfinite(x)):
                raise NonFiniteError(f"non-finite tokens after layer {layer + 1} of {self.L} (t = {times[layer + 1]:.6g}); "
                                     "use more layers L, a smaller beta or better-conditioned Q, K, V")
            traj[layer + 1] = x
        meta = {
            "d": self.d,
            "L": self.L,
            "width": self.width,
            "T": self.T,
            "beta": self.beta,
            "variant": self.variant,
            "alpha1": self.alpha1,
            "alpha2": self.alpha2,
            "kernel": repr(self.kernel),
            "kappa1": float(noise.kappa1) if gaussian else float(self.kernel.kappa1),
            "kept_fraction": float(getattr(noise, "kept_fraction", 1.0)) if gaussian else 1.0,
            "noise": repr(noise) if gaussian else None,
            "max_norm_error": float(np.max(np.abs(np.linalg.norm(traj, axis=2) - 1.0))),
        }
        return TransformerResult(t=times, x=traj, meta=meta)
