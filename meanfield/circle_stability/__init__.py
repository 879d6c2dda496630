"""Equilibria and linear stability of clustered states of the attention dynamics on the circle.

On S^1, with tokens x_i = (cos θ_i, sin θ_i), weights w_j (Σ w_j = 1) and Q = K = V = I, the
package's attention velocity v_i = P_{x_i} A(x_i; μ) (:func:`meanfield.attention.softmax_attention`)
reads, in angles,

    θ̇_i = Σ_j w_j h(θ_j - θ_i) / ζ_i,     h(u) = e^{β cos u} sin u,     ζ_i = Σ_j w_j e^{β cos(θ_j - θ_i)}

(``normalisation="softmax"``). Polyanskiy, Rigollet and Yao ("Synchronization of mean-field models
on the circle", arXiv 2507.22857) study the unnormalised form θ̇_i = Σ_j w_j h(θ_j - θ_i) with
w_j = 1/n (``normalisation="mean"``). Both are ascent flows of the same energy

    E(θ) = (1 / 2β) Σ_ij w_i w_j e^{β cos(θ_i - θ_j)}        (β ≠ 0):

the mean form is its gradient (in the metric diag(w)), the softmax form its gradient in the
metric diag(w_i ζ_i). So they have the same equilibria, and at an equilibrium the Jacobians are
J_softmax = diag(ζ)^{-1} J_mean with J_mean symmetric (the Hessian of E, up to diag(w)). By
Sylvester's law of inertia the two have the same numbers of positive, zero and negative
eigenvalues: **an equilibrium is linearly stable for one form iff it is for the other**.

k equally spaced clusters φ_a = φ_0 + 2πa/k, each holding n tokens of weight 1/(kn), are an
equilibrium by symmetry (h is odd). With c_m = 2πm/k the spectrum of J_mean is, independent of n,

* intra-cluster (splitting) modes, multiplicity k (n - 1):   λ_intra = -(1/k) Σ_{m=0}^{k-1} h'(c_m);
* inter-cluster (moving) modes, p = 1..k-1:   μ_p = (1/k) Σ_{m=1}^{k-1} h'(c_m) (cos(p c_m) - 1);
* p = 0, the rigid rotation: 0,

with h'(u) = e^{β cos u} (cos u - β sin² u). Every ζ_i equals ζ = (1/k) Σ_m e^{β cos c_m} there,
so the softmax spectrum is this one divided by ζ (a time change, same signs). Because the
eigenvalues do not depend on n, the mean-field limit (a k-atom measure, any displacement field on
the atoms = its atom means + zero-mean parts) has the same spectrum. For k = 3,
μ_1 = μ_2 = e^{-β/2} (1/2 + 3β/4), which changes sign at β = -2/3, and
λ_intra = -(1/3)(e^β - e^{-β/2}(1 + 3β/2)) <= 0: three clusters are stable exactly for β < -2/3.

One more fact used as a synchronisation certificate: h(u) has the sign of sin u, so if all
tokens lie in an open half circle the extreme tokens move inwards; the arc never grows and the
tokens converge to one point (:func:`in_open_half_circle`). This holds for every β and both forms.
"""

from ._runs import PerturbationRun, perturbation_growth, perturbation_threshold, scheme_rate
from ._spectrum import (
    NORMALISATIONS,
    ClusterSpectrum,
    angular_velocity,
    circle_angles,
    circle_jacobian,
    circle_points,
    cluster_mode,
    cluster_spectrum,
    clustered_state,
    in_open_half_circle,
    interaction,
    largest_gap,
    stability_thresholds,
    top_nontrivial_eigenvalue,
)

__all__ = [
    "NORMALISATIONS",
    "interaction",
    "circle_points",
    "circle_angles",
    "angular_velocity",
    "circle_jacobian",
    "top_nontrivial_eigenvalue",
    "clustered_state",
    "ClusterSpectrum",
    "cluster_spectrum",
    "stability_thresholds",
    "cluster_mode",
    "largest_gap",
    "in_open_half_circle",
    "scheme_rate",
    "PerturbationRun",
    "perturbation_growth",
    "perturbation_threshold",
]
