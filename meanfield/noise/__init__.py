"""The common noise: one refinable Brownian path shared by every solver (theory §3, §8).

The MLP layers sum, over depth, to an R^d-valued Brownian field W(t, x) on the sphere S^{d-1}
with E[W_a(t,x) W_b(s,y)] = (t ∧ s) δ_ab κ(<x, y>). Truncated at degree l_σ,

    W(t, x) = Σ_{a=1..d} Σ_{l<=l_σ, m} sqrt(a_l) Y_lm(x) B_{a,lm}(t) e_a,

with independent standard Brownian motions B and any real orthonormal basis Y_lm of the
harmonics on S^{d-1} (Fourier on S^1, spherical harmonics on S^2, hyperspherical
Gegenbauer products for d >= 4; theory §3). :class:`NoisePath`, in every d >= 2, generates
the B's with a Brownian tree (Lévy's midpoint construction, as diffrax's
``VirtualBrownianTree``): the value at any time is a deterministic function of the
seed, so a discrete transformer with L layers, an SDE solver on a finer grid and the
SPDE solver all see the same path, and a coarse increment is the sum of the fine
increments inside it. Path values are stored on the lattice 2^-40 Z, on which sums and
differences are exact in float64, so that identity holds *exactly*, not to round-off
(the rounding moves the path by at most 5e-13).

:class:`RandomFeatureNoise` is a separate noise source with the same κ: a fresh
finite-width MLP per step (any d, not refinable). :class:`RotationNoise` is the field
W(t, x) = Ω(t) x with Ω a skew-symmetric Brownian matrix (theory §5.5).

A new noise model is a new file: subclass :class:`NoiseSource` (and :class:`NoiseField`
for its increments); every solver accepts it.
"""

from ._base import NoiseField, NoiseSource, check_noise, noise_dimension
from ._path import FieldIncrement, NoisePath, noise_path_cost, noise_path_sizes
from ._random_features import RandomFeatureNoise
from ._rotation import RotationNoise
from ._tree import BrownianTree, tree_cost

__all__ = ["NoiseSource", "NoiseField", "check_noise", "noise_dimension", "BrownianTree", "NoisePath", "FieldIncrement", "RandomFeatureNoise",
           "RotationNoise", "noise_path_cost", "noise_path_sizes", "tree_cost"]
