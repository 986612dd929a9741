"""Two studies sharing one embedding cache (issue #28's done-when, on the tiny study): the session's
snakemake and dvc projects are two fresh copies of the checkout whose jobs share conftest's
``TINY_STUDY_CACHE`` (empty before the first of them). Whichever ran second encoded no code and no query
the first encoded, and both wrote the same bytes (``test_drivers.test_both_drivers_write_the_same_files``)."""

from __future__ import annotations

import json
from pathlib import Path


def _encodings(project: Path) -> dict[str, dict[str, int]]:
    """Per dense run (its index folder below results/index): texts encoded by the network in ``index``
    (per pool) and in ``evaluate`` (queries, per pool)."""
    found: dict[str, dict[str, int]] = {}
    for file in sorted(project.glob("results/index/**/index.json")):
        run = file.parent.relative_to(project / "results" / "index").as_posix()
        state = json.loads(file.read_text())
        counts = {f"index:{kind}": pool["retriever"]["n_forward"] for kind, pool in state["pools"].items()
                  if "n_forward" in pool["retriever"]}
        provenance = project / "results" / "runs" / run / "provenance.json"
        if provenance.is_file():
            encoding = json.loads(provenance.read_text()).get("efficiency", {}).get("query_encoding") or {}
            counts |= {f"evaluate:{kind}": e["n_forward"] for kind, e in encoding.items()}
        if counts:
            found[run] = counts
    return found


def test_the_second_study_encodes_nothing_the_first_encoded(snakemake_tiny: dict, dvc_first: dict) -> None:
    projects = [snakemake_tiny["project"], dvc_first["project"]]
    first_done = min(projects, key=lambda p: min(f.stat().st_mtime for f in p.glob("results/index/**/index.json")))
    second = projects[1] if first_done == projects[0] else projects[0]
    before, after = _encodings(first_done), _encodings(second)
    assert before and sorted(before) == sorted(after)  # the same dense runs (nbow, both attacks)
    # the first study encoded (a run of a checkpoint on an attack another run shares encodes nothing)
    for phase in ("index:", "evaluate:"):
        assert sum(n for counts in before.values() for key, n in counts.items() if key.startswith(phase)) > 0
    assert {run: set(counts.values()) for run, counts in after.items()} == {run: {0} for run in after}
