"""meanfield: stochastic mean-field theory of deep transformers.

Docstrings cite the sections of the theory page of the documentation as "theory §n".
"""

__version__ = "0.1.0"
