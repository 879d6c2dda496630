"""
Reproducing a rate table
========================

The propagation-of-chaos study (Prop. 1.2 of Agazzi, Bruno, Mosig García, Saviozzi, Romito,
arXiv:2604.26898) fits log–log slopes of three errors between N particles and the SPDE on
one common noise path, with bootstrap confidence intervals and a three-way verdict against
the theory slope −1/2. This page runs its :math:`S^1` part at the ``test`` preset (6
replicas, N = 64 … 1024; seconds) — what ``meanfield chaos --test --sphere 1 --no-long``
writes as ``table_s1.csv`` — and shows that a rerun on the same result store reproduces the
table exactly. The committed tables of the documentation's validation page come from the
``quick`` preset of the same command.
"""

# %%
# The preset
# ----------
import tempfile

import matplotlib.pyplot as plt

from meanfield.reporting import plot_rates, to_markdown
from meanfield.studies import chaos

cfg = chaos.config("test", "1", long=False)
print(cfg["replicas"], "replicas;", {k: cfg["configs"]["1"][k] for k in ("Ns", "T", "dt", "lmax", "check_lmax")})

# %%
# Run, analyse, tabulate
# ----------------------
# Every task (one per replica: the noise path, the SPDE at degree 64 and its check at 128,
# then the particles for every N) is written to the store as it finishes; the tasks run with
# single-threaded transforms, so the numbers do not depend on the executor.
store = tempfile.mkdtemp()
report = chaos.run("test", "1", long=False, executor="serial", progress=False, store=store)
table = report.tables[1]
print(to_markdown(table))

# %%
# The first table holds the mean of each error at each N with its 95% interval; the second
# the fitted slope with its interval and the verdict against the theory slope: consistent,
# inconsistent or inconclusive (an interval too wide to decide is never called consistent).
# ``w2_iid`` is the control: N independent samples of ρ_T at the same distance.

# %%
# A rerun on the same store computes nothing and gives the same table, bit for bit.
again = chaos.run("test", "1", long=False, executor="serial", progress=False, store=store)
print("same table:", again.tables[1].equals(table), "- tasks computed:", again.result.n_computed)

# %%
# The figure of the table: means with their intervals, the fits with their bands, the
# theory lines.
fig, ax = plt.subplots(figsize=(6, 4))
plot_rates(table, ax=ax, title="S¹, test preset")
fig.tight_layout()
