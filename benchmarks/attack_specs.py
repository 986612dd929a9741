"""The attack specs the attack benchmark, the attack snapshot script and the attack tests run on real
code: one list, so the three cover the same renamings with the same parameter variants.

Plain data (no csbench import), so ``scripts/attack_snapshot.py`` can import it under an older csbench.
"""

from __future__ import annotations

# the meaning-preserving renamings, with the k of the k-shift attacks at the thesis's 3 and at 64
RENAMINGS = [
    "full_hash",
    "k_shift_dataset-3",
    "k_shift_dataset-64",
    "k_shift_snippet-3",
    "k_shift_snippet-64",
    "random_permutation",
    "most_popular",
    "ordered_id",
]
# the two normalisations of identifiers: advtest_normalize is CodeXGLUE's (Python only, and on
# purpose does not preserve meaning: see its own tests); advtest_normalize_scoped is scope-aware
ADVTEST_NORMALIZE = "advtest_normalize"
ADVTEST_NORMALIZE_SCOPED = "advtest_normalize_scoped"
