"""``python -m meanfield`` runs the command line (same as the ``meanfield`` script)."""

import sys

from meanfield.cli import main

sys.exit(main())
