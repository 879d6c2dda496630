"""The spectral McKean–Vlasov SPDE solver on S^1 and S^2 (theory §4, §6).

Conditionally on the common noise the token density ρ_t solves (Itô form, theory §4)

    dρ = [ -div_S(ρ v[ρ]) + ½ κ_σ(1) Δ_S ρ ] dt - div_S( ρ P_x dW(t, x) ),
    v[ρ](x) = P_x A(x; ρ),   A(x; ρ) = ∫ e^{β<x,y>} V y ρ(y) dy / ∫ e^{β<x,y>} ρ(y) dy.

The state is the vector of harmonic coefficients of ρ up to degree ``lmax``:
S^2 (d = 3) ducc0 complex alm in healpy packing (ρ = Σ a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm),
S^1 (d = 2) real Fourier coefficients in the order of :func:`meanfield.harmonics.real_basis`.
Products are formed pseudo-spectrally on a quadrature grid obeying the 3/2 rule
(S^2: Gauss–Legendre in cos θ with n_θ = ⌊3 lmax / 2⌋ + 2 rings and n_φ = 2 n_θ
longitudes; S^1: M = 2(⌊3 lmax/2⌋ + 2) equispaced nodes), so the projection of a product
of two degree-``lmax`` fields back to degree ``lmax`` is exact.

Two time steppers (theory §6):

``scheme="exponential"`` (a), Eulerian Itô exponential Euler,
    ρ_{n+1} = E_h [ ρ_n - h div_S(ρ_n v[ρ_n]) - div_S(ρ_n P_x ΔW_n) ],
    E_h = exp(½ κ_σ(1) h Δ_S) (per coefficient e^{-½ κ_σ(1) l(l+d-2) h}).
    The divergence of a tangent field is a spin-1 analysis on S^2
    (div F = -sqrt(l(l+1)) E_lm, theory §10) and d/dθ of the Fourier series on S^1.
    Mass is conserved exactly (the divergence has no l = 0 part). It is explicit in the
    transport term and needs a step-size condition when attention is on: see
    :func:`exponential_euler_growth`.

``scheme="pushforward"`` (b), Lagrangian–spectral,
    T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)),     ρ_{n+1} = (T_n)_# ρ_n   in weak form:
    (ρ_{n+1})_lm = Σ_q ρ_n(x_q) w_q conj(Y_lm(T_n(x_q)))
    over the grid nodes x_q with quadrature weights w_q (one adjoint non-uniform SHT,
    ``ducc0.sht.experimental.adjoint_synthesis_general``). ΔW is the ambient increment,
    exactly as the particle solver uses it, so an N-particle run with the same step map
    converges to this solution as N -> ∞ at fixed h. No CFL condition; the mass
    Σ_q ρ_n(x_q) w_q is carried over exactly.

For :class:`meanfield.noise.RotationNoise` the push-forward scheme also accepts
``noise_map="flow"``: T_n(x) = exp(ΔΩ_n) Π(x + h v[ρ_n](x)), whose noise part is an exact
rotation. Without attention it reproduces the rotated density ρ_0 ∘ (R^h_t)^T with
R^h_t = exp(ΔΩ_{n-1}) ··· exp(ΔΩ_0) to round-off (theory §5.5), because a rotation maps
degree-l harmonics to degree-l harmonics and the 3/2 grid integrates their products
exactly. The default ``noise_map="projected"`` map Π((I + ΔΩ)x) is a rotation only up
to O(h) per step, and the Eulerian scheme (a) only to its strong order 1/2.

Package layout: initial densities (:mod:`._initial`, public base class
:class:`InitialCondition`), the attention velocity (:mod:`._velocity`), the solution object
(:mod:`._solution`), the scheme registry (:mod:`._schemes`; a new scheme is a new file
registering a :class:`Scheme` subclass) with schemes (a) and (b) in :mod:`._exponential`
and :mod:`._pushforward`, the driver :func:`solve_spde` (:mod:`._solve`), and the
characteristics scheme :func:`solve_characteristics` (``scheme="characteristics"``), which
carries ρ_t as the push-forward of ρ_0 on a weighted quadrature cloud moved by the particle
step maps, with no degree limit and on S^{d-1} for every d >= 2 (product Gauss–Gegenbauer
nodes and direct-sum attention for d >= 4; :mod:`._characteristics` and its helpers).

The solver monitors the spectral tail, the negative part and finiteness after every
step and raises :class:`SPDEResolutionError` (carrying the partial solution) instead of
returning an unresolved solution (theory §6).
"""

from ._char_solution import CharacteristicsError, CharacteristicsSolution
from ._characteristics import solve_characteristics
from ._exponential import CFL_GROWTH, ExponentialEuler, exponential_euler_growth
from ._initial import InitialCondition, Mixture, Uniform, VonMisesFisher, initial_condition_from_dict
from ._pushforward import PushForward
from ._schemes import Problem, Scheme, displacement_on_grid, get_scheme, noise_on_grid, register_scheme, scheme_names
from ._solution import SPDEResolutionError, SPDESolution, tail_fraction
from ._solve import ATTENTION_TOL, coefficient_degrees, initial_coefficients, solve_spde
from ._velocity import Velocity
from ..sphere import NUFFT_EPS, basis

#: Former private name of :class:`InitialCondition`.
_InitialCondition = InitialCondition

__all__ = [
    "initial_condition_from_dict",
    "InitialCondition",
    "Uniform",
    "VonMisesFisher",
    "Mixture",
    "SPDESolution",
    "SPDEResolutionError",
    "solve_spde",
    "exponential_euler_growth",
    "coefficient_degrees",
    "Scheme",
    "Problem",
    "register_scheme",
    "scheme_names",
    "get_scheme",
    "displacement_on_grid",
    "Velocity",
    "solve_characteristics",
    "CharacteristicsSolution",
    "CharacteristicsError",
]

