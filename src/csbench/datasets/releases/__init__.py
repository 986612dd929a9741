"""Released benchmark datasets: declarative metadata (official URLs, checksums, counts) and streaming readers.

Registry names: ``csn-{lang}``, ``csn-filtered-{lang}``, ``csn-challenge``, ``advtest``, ``cosqa``,
``cosqa-retrieval``, ``cosqa-webquerytest``, ``statcodesearch``, ``gecs-csn-{lang}``, ``tl-codesum``,
``funcom``. Files lie under ``data/raw/<name>/`` as each :class:`~csbench.datasets.base.RemoteFile`
describes (archives unpacked in place, keeping the release's own relative paths).
"""

from __future__ import annotations

from csbench.datasets.base import DatasetSpec
from csbench.datasets.releases import advtest, codesearchnet, cosqa, csn_challenge, funcom, statcodesearch, tl_codesum

RELEASES: tuple[DatasetSpec, ...] = (
    *codesearchnet.ORIGINAL,
    *codesearchnet.FILTERED,
    csn_challenge.SPEC,
    advtest.SPEC,
    cosqa.COSQA,
    cosqa.COSQA_RETRIEVAL,
    cosqa.COSQA_WEBQUERYTEST,
    statcodesearch.STATCODESEARCH,
    *statcodesearch.GECS_CSN,
    tl_codesum.SPEC,
    funcom.SPEC,
)

__all__ = ["RELEASES"]
