"""One result type for token trajectories: the particle solver and the discrete transformer."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ._serialise import json_default
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
