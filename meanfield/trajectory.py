"""One result type for token trajectories: the particle solver and the discrete transformer."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ._serialise import json_default
from ._validate import as_int

__all__ = ["Trajectory"]




@dataclass
class Trajectory:
    """Token positions at save times, with the metadata of the run that produced them.

    Returned by :func:`meanfield.particles.solve_particles` (save times on the step grid)
    and :meth:`meanfield.transformer.Transformer.run` (layer times l T / L).

    Attributes
    ----------
    t : ndarray, shape (n_save,)
        Save times.
    x : ndarray, shape (n_save, N, d)
        Token positions at the save times.
    meta : dict
        Parameters and diagnostics of the run (see the producing function).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> tr = Trajectory(t=np.array([0.0, 1.0]), x=np.zeros((2, 4, 3)), meta={"solver": "demo"})
    >>> path = tr.save(os.path.join(tempfile.mkdtemp(), "run"))
    >>> Trajectory.load(path).meta["solver"], Trajectory.load(path).final.shape
    ('demo', (4, 3))
    """

    t: np.ndarray
    x: np.ndarray
    meta: dict

    @property
    def final(self) -> np.ndarray:
        """Positions at the last save time, shape (N, d)."""
        return self.x[-1]

    def __repr__(self) -> str:
        extra = "".join(f", {k}={self.meta[k]!r}" for k in ("scheme", "attention", "L", "width") if k in self.meta)
        return f"{type(self).__name__}(n_save={self.t.size}, N={self.x.shape[1]}, d={self.x.shape[2]}{extra})"

    def save(self, path) -> str:
        """Write times, positions and JSON metadata to an ``.npz`` file; returns the file name."""
        path = str(path)
        np.savez(path, t=self.t, x=self.x, meta=np.array(json.dumps(self.meta, default=json_default)))
        return path if path.endswith(".npz") else path + ".npz"

    @classmethod
    def load(cls, path) -> "Trajectory":
        """Read a file written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as f:
            return cls(t=f["t"], x=f["x"], meta=json.loads(str(f["meta"])))

    def _index(self, i) -> int:
        n = self.t.size
        i = as_int(i, "i")
        if not -n <= i < n:
            raise IndexError(f"i = {i} is out of range for a trajectory with {n} save times (use -{n} <= i < {n})")
        return i % n

    # -- plotting and labelled export ------------------------------------------------------
    def plot(self, i: int = -1, ax=None, **kwargs):
        """Draw the token paths up to save time i and the tokens at t_i.

        S^1 (d = 2): the unwrapped angle of every token against time, up to t_i. S^2
        (d = 3): the paths on the sphere in a 3-D axes (with the unit sphere as a wire
        frame). d >= 4: the paths projected on the first two coordinates.

        Parameters
        ----------
        i : int
            Index of the last save time drawn (default the last).
        ax : matplotlib Axes, optional
            Axes to draw into (a 3-D one for d = 3); a new figure is made otherwise.
        **kwargs
            Passed to the line plots.

        Returns
        -------
        matplotlib.axes.Axes
        """
        import matplotlib.pyplot as plt

        k = self._index(i)
        n, d = self.x.shape[1], self.x.shape[2]
        kwargs.setdefault("lw", 0.8)
        if d == 3:
            if ax is None:
                ax = plt.figure(figsize=(5, 5)).add_subplot(projection="3d")
            if not hasattr(ax, "plot3D"):
                raise TypeError("ax must be a 3-D Axes (add_subplot(projection='3d')) for tokens on S^2")
            u, v = np.mgrid[0 : 2 * np.pi : 25j, 0 : np.pi : 13j]
            ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.4)
            for j in range(n):
                ax.plot3D(self.x[: k + 1, j, 0], self.x[: k + 1, j, 1], self.x[: k + 1, j, 2], **kwargs)
            ax.scatter(self.x[k, :, 0], self.x[k, :, 1], self.x[k, :, 2], color="k", s=8)
            ax.set_xlabel("x1")
            ax.set_ylabel("x2")
            ax.set_zlabel("x3")
        else:
            if ax is None:
                _, ax = plt.subplots(figsize=(5, 3.5))
            if d == 2:
                theta = np.unwrap(np.arctan2(self.x[: k + 1, :, 1], self.x[: k + 1, :, 0]), axis=0)
                ax.plot(self.t[: k + 1], theta, **kwargs)
                ax.set_xlabel("t")
                ax.set_ylabel("angle θ (unwrapped)")
            else:
                ax.plot(self.x[: k + 1, :, 0], self.x[: k + 1, :, 1], **kwargs)
                ax.scatter(self.x[k, :, 0], self.x[k, :, 1], color="k", s=8)
                ax.set_xlabel("x1")
                ax.set_ylabel("x2")
                ax.set_aspect("equal")
        ax.set_title(f"{n} tokens, t = {self.t[k]:.4g}")
        return ax

    def to_xarray(self):
        """The trajectory as an ``xarray.Dataset``: ``x`` (time, token, component), metadata as a JSON attribute.

        Examples
        --------
        >>> tr = Trajectory(t=np.array([0.0, 1.0]), x=np.zeros((2, 4, 3)), meta={"solver": "demo"})
        >>> tr.to_xarray()["x"].dims
        ('time', 'token', 'component')
        """
        import xarray as xr

        n_save, n, d = self.x.shape
        ds = xr.Dataset(
            {"x": (("time", "token", "component"), np.asarray(self.x, dtype=np.float64))},
            coords={"time": ("time", np.asarray(self.t, dtype=np.float64)), "token": ("token", np.arange(n)),
                    "component": ("component", np.arange(d))},
            attrs={"meta": json.dumps(self.meta, default=json_default)},
        )
        ds["x"].attrs["long_name"] = "token positions on the unit sphere"
        return ds

    def to_netcdf(self, path) -> str:
        """Write :meth:`to_xarray` to a NetCDF file; returns the path. Read it back with :meth:`from_netcdf`."""
        path = str(path)
        self.to_xarray().to_netcdf(path)
        return path

    @classmethod
    def from_netcdf(cls, path) -> "Trajectory":
        """Read a file written by :meth:`to_netcdf`."""
        import xarray as xr

        with xr.open_dataset(path) as ds:
            return cls(t=ds["time"].values.copy(), x=ds["x"].values.copy(), meta=json.loads(ds.attrs["meta"]))
