"""meanfield: stochastic mean-field theory of deep transformers.

Docstrings cite the sections of the theory page of the documentation as "theory §n".
"""

__version__ = "0.1.0"

# The thread policy of every transform (light: os, contextlib, contextvars only).
from ._threads import default_threads, deterministic, grid_threads, is_deterministic, point_threads  # noqa: E402

__all__ = ["__version__", "default_threads", "deterministic", "grid_threads", "is_deterministic", "point_threads"]
