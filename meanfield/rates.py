"""Alias of :mod:`meanfield.reporting`, kept so that ``from meanfield.rates import X`` still works.

Every public name of :mod:`meanfield.reporting` is importable from here; new
code should import from :mod:`meanfield.reporting`.
"""

from __future__ import annotations

from meanfield.reporting import *  # noqa: F403
from meanfield.reporting import __all__  # noqa: F401
from meanfield.reporting._fits import CONSISTENT, NOT_CONSISTENT  # noqa: F401
