"""Result objects: plotting, labelled (xarray) export and the NetCDF round trip."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from meanfield.kernels import ActivationKernel  # noqa: E402
from meanfield.noise import NoisePath  # noqa: E402
from meanfield.particles import solve_particles  # noqa: E402
from meanfield.spde import SPDESolution, VonMisesFisher, solve_spde  # noqa: E402
from meanfield.sphere import basis  # noqa: E402
from meanfield.trajectory import Trajectory  # noqa: E402
from meanfield.transformer import Transformer  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _spde(d):
    mu = [0.0, 1.0] if d == 2 else [0.0, 0.0, 1.0]
    noise = NoisePath(ActivationKernel("relu", scale=0.3), d, 4, seed=1, t_max=1.0)
    return solve_spde(VonMisesFisher(mu, 2.0), noise, beta=1.0, lmax=16, dt=0.05, t_eval=[0.0, 0.05, 0.1], filter=16)


def _trajectory(d):
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=(6, d))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    noise = NoisePath(ActivationKernel("relu"), d, 4, seed=2, t_max=1.0) if d in (2, 3) else None
    return solve_particles(x0, noise, beta=1.0, dt=0.125, t_eval=[0.0, 0.25, 0.5], attention="direct")


@pytest.mark.parametrize("d", [2, 3])
def test_spde_netcdf_round_trip_equals_arrays(tmp_path, d):
    sol = _spde(d)
    path = sol.to_netcdf(tmp_path / "spde.nc", density=True)
    back = SPDESolution.from_netcdf(path)
    ds = sol.to_xarray(density=True)
    import xarray as xr

    with xr.open_dataset(path) as raw:
        # the file holds exactly the arrays of to_xarray
        assert np.array_equal(raw["coefficients"].values, ds["coefficients"].values)
        assert np.array_equal(raw["density"].values, ds["density"].values)
        assert np.array_equal(raw["degree"].values, basis(d, 16).labels()[:, 0])
        assert np.array_equal(raw["order"].values, basis(d, 16).labels()[:, 1])
    assert np.array_equal(back.times, sol.times)
    assert back.d == sol.d and back.lmax == sol.lmax and back.beta == sol.beta
    assert back.meta["scheme"] == sol.meta["scheme"]
    # state layout rebuilt from the real layout: exact on S^1, round-off (sqrt 2 scalings) on S^2
    assert np.abs(back.coeffs - sol.coeffs).max() <= 1e-15 * np.abs(sol.coeffs).max()
    assert back.mass(-1) == pytest.approx(sol.mass(-1), abs=1e-14)


def test_spde_xarray_coordinates_follow_the_real_layout():
    sol = _spde(3)
    ds = sol.to_xarray()
    assert ds["coefficients"].dims == ("time", "coefficient")
    assert np.array_equal(ds["time"].values, sol.times)
    b = basis(3, 16)
    assert np.array_equal(np.stack([ds["degree"].values, ds["order"].values], axis=1), b.labels())
    assert np.allclose(ds["coefficients"].values[1], b.to_real(sol.coeffs[1]), rtol=0, atol=0)
    with pytest.raises(TypeError, match="density"):
        sol.to_xarray(density="yes")


@pytest.mark.parametrize("d", [2, 3, 4])
def test_trajectory_netcdf_round_trip_equals_arrays(tmp_path, d):
    tr = _trajectory(d)
    back = Trajectory.from_netcdf(tr.to_netcdf(tmp_path / "traj.nc"))
    assert np.array_equal(back.t, tr.t)
    assert np.array_equal(back.x, tr.x)
    assert back.meta == tr.meta
    ds = tr.to_xarray()
    assert ds["x"].dims == ("time", "token", "component")
    assert ds.sizes == {"time": 3, "token": 6, "component": d}


def test_transformer_result_exports_and_plots(tmp_path):
    x0 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    res = Transformer(d=3, L=4, width=16, T=1.0, beta=1.0).run(x0, seed=0)
    back = Trajectory.from_netcdf(res.to_netcdf(tmp_path / "tf.nc"))
    assert np.array_equal(back.x, res.x) and back.meta["L"] == 4
    ax = res.plot()
    assert len(ax.lines) == 3


@pytest.mark.parametrize("d", [2, 3])
def test_spde_plot_draws_the_density(d):
    from matplotlib.axes import Axes

    sol = _spde(d)
    ax = sol.plot()
    assert isinstance(ax, Axes)
    if d == 3:
        assert len(ax.collections) == 1  # the colour mesh
        assert ax.collections[0].get_array().size > 0
    else:
        assert len(ax.lines) == 1 and ax.lines[0].get_xydata().shape[0] > 100
    fig, ax2 = plt.subplots()
    assert sol.plot(0, ax=ax2) is ax2
    with pytest.raises(IndexError, match="out of range"):
        sol.plot(5)


@pytest.mark.parametrize("d", [2, 3, 4])
def test_trajectory_plot_draws_every_token(d):
    from matplotlib.axes import Axes

    tr = _trajectory(d)
    ax = tr.plot(i=1)
    assert isinstance(ax, Axes)
    assert len(ax.lines) == 6
    with pytest.raises(TypeError, match="i must be an integer"):
        tr.plot(i="last")
