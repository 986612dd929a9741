"""The ``download`` phase: fetch and verify what a release's reader reads into ``data/raw/<dataset>``
(:mod:`csbench.datasets.download`), or, for a local corpus, record that there is nothing to fetch."""

from __future__ import annotations

import logging
from pathlib import Path

from csbench import paths
from csbench.config import check_sources
from csbench.io import write_json, write_text
from csbench.phases import Context
from csbench.registry import UnknownNameError

log = logging.getLogger("csbench")


def download(ctx: Context, dataset: str, accept_changed: bool = False, rehash: bool = False) -> Path:
    """``data/raw/<dataset>``, with its MANIFEST.json and SHA256SUMS. ``accept_changed`` records files
    the reader reads that changed since the manifest recorded them (else an error); ``rehash``
    measures every checksum again."""
    from csbench.datasets import LOCAL_SOURCE_KIND

    config = ctx.config
    if dataset not in config.datasets:
        raise UnknownNameError("dataset", dataset, config.datasets, where="--dataset (not in grid.datasets)")
    target = paths.raw_dir(dataset)
    if config.dataset_kind(dataset) == LOCAL_SOURCE_KIND:
        check_sources(config)
        options = config.dataset_options(dataset)
        manifest = {
            "dataset": dataset,
            "kind": LOCAL_SOURCE_KIND,
            "source": options["source"],
            "note": "extracted from source code on this machine by `csbench prepare`; nothing to download",
        }
        write_json(target / "MANIFEST.json", manifest)
        # the download rule's output and the prepare rule's input, as for a release (nothing listed)
        write_text(target / "SHA256SUMS", f"# {dataset}: a local corpus (source {options['source']}); no files\n")
        log.info("%s is a local corpus (source %s): nothing to download", dataset, options["source"])
        return target
    from csbench.datasets.base import BEIR_KIND
    from csbench.datasets.download import fetch_dataset

    if config.dataset_kind(dataset) == BEIR_KIND:  # a hub id: written from the HF cache / hub first
        from csbench.datasets.beir import download_beir

        log.info("%s", download_beir(dataset, config.dataset_options(dataset), target))
    manifest = fetch_dataset(
        config.dataset_spec(dataset),
        target.parent,
        options=config.dataset_options(dataset),
        accept_changed=accept_changed,
        rehash=rehash,
        command=ctx.download_command(dataset),
        progress=ctx.progress,
    )
    log.info("%s: %d file(s) the reader reads, verified in %s", dataset, len(manifest["reads"]), target)
    return target
