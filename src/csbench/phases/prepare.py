"""The ``prepare`` phase: a dataset in the common schema under ``data/prepared/<dataset>`` (its
splits, ``card.json`` / ``card.md``, and the release's labelled pairs where it has them), from a
local source tree (:mod:`csbench.datasets.local`) or a downloaded release's reader."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from csbench import lineage, paths
from csbench.config import check_sources
from csbench.io import canonical_hash, sha256_file, write_json, write_text
from csbench.phases import Context
from csbench.phases.inputs import require, split_names, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")


def prepare(ctx: Context, dataset: str) -> Path:
    """Write ``data/prepared/<dataset>`` and its stamp; the folder."""
    from csbench.datasets import LOCAL_SOURCE_KIND
    from csbench.datasets.prepare import log_code_layout

    config = ctx.config
    require(dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    started = time.perf_counter()
    out = paths.prepared_dir(dataset)
    unstamp(out)
    if config.dataset_kind(dataset) == LOCAL_SOURCE_KIND:
        card = _prepare_local(ctx, dataset, out)
    else:
        card = _prepare_release(ctx, dataset, out)
    card["wall_s"] = round(time.perf_counter() - started, 2)
    write_json(out / "card.json", card)
    write_text(out / "card.md", _card_md(card))
    sums = paths.raw_dir(dataset) / "SHA256SUMS"  # what download verified (a local corpus: its note)
    inputs = {sums.as_posix(): sha256_file(sums)} if sums.is_file() else {}
    outputs = [*split_names(), "card.json", "card.md"]
    if card.get("released_pairs"):
        outputs.append(card["released_pairs"]["file"])
    if card.get("qrels"):
        outputs.append(card["qrels"]["file"])
    write_stamp(out, "prepare", lineage.prepare(config, dataset), inputs, outputs)
    log_code_layout(dataset, card)
    counts = ", ".join(f"{s} {v['pairs']}" for s, v in card["splits"].items())
    log.info("prepared %s: %s in %.1f s", dataset, counts, card["wall_s"])
    return out


def _card_md(card: dict) -> str:
    from csbench.datasets.local import LOCAL_SOURCE_KIND, card_markdown
    from csbench.datasets.prepare import code_layout_markdown, release_card_markdown

    if card["kind"] == LOCAL_SOURCE_KIND:
        return card_markdown(card) + "".join(line + "\n" for line in code_layout_markdown(card))
    if card.get("beir"):  # a BEIR dataset: its judgements, duplicates and ties (csbench.datasets.beir)
        from csbench.datasets.beir import beir_audit_markdown

        return release_card_markdown(card) + "".join(line + "\n" for line in beir_audit_markdown(card["beir"]))
    return release_card_markdown(card)


def _prepare_local(ctx: Context, dataset: str, out: Path) -> dict:
    """Extract the functions of a local source tree into the splits; the dataset card."""
    from csbench.code.extract import FilterSettings
    from csbench.datasets import local

    config = ctx.config
    check_sources(config)
    extraction = config.section("extraction")
    options = config.dataset_options(dataset)
    # streamed into the split files as extracted: memory bounded by a batch of records, not the corpus
    _, card = local.build_local_corpus(
        dataset,
        options,
        FilterSettings(extraction["min_query_tokens"], extraction["min_code_lines"]),
        local.SplitSettings(**extraction["split"]),
        progress=ctx.progress,
        workers=ctx.jobs,
        out=out,
    )
    card["params_sha256"] = canonical_hash({"options": options, "extraction": extraction})
    return card


def _prepare_release(ctx: Context, dataset: str, out: Path) -> dict:
    """Read a downloaded release into the splits (and its labelled pairs); the dataset card."""
    from csbench.datasets.base import BEIR_KIND, SkipReport
    from csbench.datasets.download import verify_raw
    from csbench.datasets.judgements import write_qrels
    from csbench.datasets.prepare import SplitWriter
    from csbench.datasets.released_pairs import write_released_pairs

    spec = ctx.config.dataset_spec(dataset)
    raw = paths.raw_dir(dataset)
    if spec.reader is None:
        raise ValueError(f"dataset {dataset!r} has no query/code pairs to prepare (see its module)")
    options = ctx.config.dataset_options(dataset)
    # what the reader reads, as the last download recorded it (never a file changed since)
    source_sha256 = verify_raw(spec, options, raw.parent, ctx.download_command(dataset))
    report = SkipReport()
    with SplitWriter(out, paths.ALL_SPLITS) as writer:
        for record in spec.reader(raw, options, report):
            writer.add(record)
    splits = {s: writer.stats[s].as_dict() for s in paths.ALL_SPLITS}
    released_pairs = write_released_pairs(spec, raw, options, out)  # GeCS clf pairs, for matching
    qrels = write_qrels(spec, raw, options, out)  # BEIR's graded judgements, for the qrels protocol
    beir = None
    if spec.kind == BEIR_KIND:  # the leakage / duplicate audit every BEIR dataset's card carries
        from csbench.datasets.beir import beir_audit

        beir = beir_audit(raw, options)
    mismatches = {
        s: {"expected": n, "prepared": splits.get(s, {}).get("pairs")}
        for s, n in spec.expected_counts.items()
        if splits.get(s, {}).get("pairs") != n
    }
    for split, counts in mismatches.items():
        prepared, expected = counts["prepared"], counts["expected"]
        log.warning("%s %s: %s records prepared, the release documents %s", dataset, split, prepared, expected)
    return {
        "name": spec.name,
        "kind": spec.kind,
        "language": ",".join(spec.languages),
        "description": spec.description,
        "licence": spec.licence,
        "citation": spec.citation,
        "source": spec.homepage or (spec.files[0].urls[0] if spec.files and spec.files[0].urls else ""),
        "repo": spec.name,
        "source_sha256": source_sha256,  # of SHA256SUMS: the files the reader read
        "files": {},
        "skipped_files": {},
        "skipped_records": report.as_dict(),
        "extraction": {},
        "expected_counts": spec.expected_counts,
        "count_mismatches": mismatches,
        "splits": splits,
        "released_pairs": released_pairs,  # None: the release has no labelled matching pairs
        "qrels": qrels,  # None: no relevance judgements (each query's own code is relevant)
        **({"beir": beir} if beir is not None else {}),
        "params_sha256": canonical_hash({"options": options}),
    }
