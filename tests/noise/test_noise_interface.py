"""A noise model written against the public NoiseSource interface runs in every solver."""

import numpy as np
import pytest

from meanfield.noise import NoiseField, NoiseSource, check_noise
from meanfield.noise import BrownianTree
from meanfield.particles import solve_particles
from meanfield.spde import VonMisesFisher, solve_spde
from meanfield.transformer import Transformer


class _ConstantDirectionField(NoiseField):
    def __init__(self, t0, t1, b):
        self.t0, self.t1, self.b = t0, t1, b

    def __call__(self, x):
        return np.broadcast_to(self.b, np.shape(x)).copy()


class ShiftNoise(NoiseSource):
    """W(t, x) = B(t) ∈ R^d, one Brownian vector for every point: κ ≡ 1, κ_σ(1) = 1."""

    refinable = True

    def __init__(self, d, seed=0, t_max=1.0):
        self.d, self.kappa1, self.seed = d, 1.0, seed
        self.tree = BrownianTree((d,), seed, t_max=t_max)
        self.t_max = self.tree.t_max

    def field(self, t0, t1):
        return _ConstantDirectionField(t0, t1, self.tree.increment(t0, t1))


def test_toy_noise_source_runs_everywhere():
    noise = ShiftNoise(3, seed=4, t_max=0.25)
    check_noise(noise, 3, t_end=0.25)
    assert noise.describe() == {"type": "ShiftNoise", "d": 3, "sigma": 1.0, "kappa1": 1.0, "kept_fraction": 1.0, "t_max": 0.25,
                                "seed": 4}
    x0 = VonMisesFisher([0, 0, 1], 4.0).sample(64, seed=1)
    part = solve_particles(x0, noise, beta=1.0, dt=2**-6, t_eval=[0.25])
    tr = Transformer(3, L=16, width=None, T=0.25, beta=1.0, noise=noise, variant="parallel").run(x0)
    assert part.meta["kappa1"] == 1.0 and np.all(np.isfinite(part.final))
    assert tr.meta["kappa1"] == 1.0 and tr.meta["max_norm_error"] < 1e-12
    # without attention the shift noise moves every token by the same Euler steps
    a = solve_particles(x0, noise, beta=0.0, dt=2**-6, t_eval=[0.25], attention="off").final
    b = x0.copy()
    for n in range(16):
        b = b + noise.tree.increment(n * 2**-6, (n + 1) * 2**-6)
        b /= np.linalg.norm(b, axis=1, keepdims=True)
    assert np.abs(a - b).max() < 1e-14
    sol = solve_spde(VonMisesFisher([0, 0, 1], 4.0), noise, beta=1.0, lmax=32, dt=2**-6, t_eval=[0.25])
    assert sol.meta["noise"]["type"] == "ShiftNoise"
    # a constant shift is not a rotation: the mean direction moves, mass stays 1
    assert abs(sol.mass(-1) - 1.0) < 1e-12


def test_non_noise_objects_are_rejected_with_the_interface_name():
    class Duck:
        d, t_max, kappa1 = 3, 1.0, 1.0

        def field(self, t0, t1):
            return lambda x: 0 * x

    with pytest.raises(TypeError, match="NoiseSource"):
        solve_particles(np.array([[0.0, 0.0, 1.0]]), Duck(), beta=1.0, dt=0.1, t_eval=[0.1])
    with pytest.raises(TypeError, match="NoiseSource"):
        solve_spde("uniform", Duck(), beta=1.0, lmax=16, dt=0.1, t_eval=[0.1])
