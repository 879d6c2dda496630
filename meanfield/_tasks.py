"""Former location of :mod:`meanfield.runner._tasks` (grids, task keys, seeds); re-exported from there."""

from meanfield.runner._tasks import *  # noqa: F401,F403
from meanfield.runner._tasks import REPLICA, __all__  # noqa: F401
