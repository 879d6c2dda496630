"""Validation studies of SPEC §9: each module builds :class:`meanfield.runner.Study` objects,
runs them and turns the results into rate tables and figures."""
