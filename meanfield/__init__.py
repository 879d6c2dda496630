"""meanfield: stochastic mean-field theory of deep transformers.

See ``SPEC`` sections referenced in each docstring and the documentation site.
"""

__version__ = "0.1.0"
