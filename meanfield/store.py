"""Deprecated location of :mod:`meanfield.runner.store`; every name is re-exported from there."""

from meanfield.runner.store import *  # noqa: F401,F403
from meanfield.runner.store import __all__  # noqa: F401
