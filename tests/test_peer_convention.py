"""The time step of the reference code borjanG/2023-transformers-rotf against the package's step.

The reference advances z <- Π(z + h A(z)) with the untangented softmax attention A; the package's
projected Euler step is x <- Π(x + h P_x A). Identity: Π(x + h A) = Π(x + h' P_x A) with
h' = h / (1 + h <x, A>). The reference step is transcribed here in plain NumPy (no package code).
"""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.attention import softmax_attention
from meanfield.particles import Velocity, solve_particles
from meanfield.sphere import tangent_project


def reference_step(z: np.ndarray, beta: float, h: float) -> np.ndarray:
    """One step of the reference code (its softmax form): weights exp(beta <z_i, z_j>) / row sum, z + h A, renormalise."""
    w = np.exp(beta * (z @ z.T))
    w = w / w.sum(axis=1, keepdims=True)
    z = z + h * (w @ z)
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def reconciled_velocity(beta: float, h: float) -> Velocity:
    def fn(x):
        a = softmax_attention(x, beta, check=False)
        return tangent_project(x, a) / (1.0 + h * np.einsum("ij,ij->i", x, a))[:, None]

    return Velocity(fn, "reconciled")


def _cloud(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("beta,d", [(1.0, 3), (4.0, 2), (0.5, 8)])
def test_two_steps_agree_to_round_off(beta, d):
    h = 0.1
    z0 = _cloud(48, d, 1)
    z = reference_step(reference_step(z0, beta, h), beta, h)
    sol = solve_particles(z0, None, beta, h, [h, 2 * h], attention=reconciled_velocity(beta, h))
    assert np.abs(sol.final - z).max() < 1e-14


def test_plain_step_differs_at_second_order():
    # one step: |Π(x + hA) - Π(x + h P_x A)| = h² |<x, A>| |P_x A| + O(h³), so the ratio to h² converges
    beta, z0 = 1.0, _cloud(32, 3, 2)
    a = softmax_attention(z0, beta)
    lead = np.abs(np.einsum("ij,ij->i", z0, a)) * np.linalg.norm(tangent_project(z0, a), axis=1)
    ratios = []
    for h in (0.1, 0.05, 0.025, 0.0125):
        plain = solve_particles(z0, None, beta, h, [h], attention="direct").final
        diff = np.linalg.norm(plain - reference_step(z0, beta, h), axis=1)
        ratios.append(np.max(np.abs(diff / h**2 - lead)))
    # the O(h³) remainder: the deviation of diff/h² from its limit halves with h
    slopes = np.diff(np.log(ratios)) / np.log(0.5)
    assert np.all(np.abs(slopes - 1.0) < 0.15), (ratios, slopes)
