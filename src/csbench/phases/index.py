"""The ``index`` phase: encode a run's candidate pools once into ``results/index/<run>`` (a folder of
.npy arrays and JSON with its SHA256SUMS: :class:`csbench.evaluate.runner.PoolIndex`), and how
``evaluate`` and ``robust`` find the trained encoder and load that index back."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from csbench import lineage, paths
from csbench.config import RunKey
from csbench.phases import Context
from csbench.phases.inputs import attacked as attacked_input
from csbench.phases.inputs import train_command
from csbench.stamps import Verified, embedded

log = logging.getLogger("csbench")


def index(ctx: Context, run: RunKey) -> Path:
    """Encode the run's pools (test, codebase, validation where a matching protocol needs it) and
    save the index, with the model and data it was built from; its ``index.json``."""
    from csbench.evaluate.runner import build_index
    from csbench.models.build import retriever_factory

    config = ctx.config
    params = config.model_params(run.model)
    attacked = attacked_input(ctx, run.dataset, run.attack)
    pool, codebase, valid = read_pools(attacked, config.protocols)
    spec, best, cache_dir = config.model_spec(run.model), checkpoint(run, ctx), config.api["cache_dir"]
    factory = retriever_factory(
        spec, params, best, cache_dir=cache_dir, dataset=run.dataset, embedding_cache=embedding_cache(ctx),
        processes=config.encoding["processes"],
    )  # fmt: skip
    built = build_index(factory, pool, config.protocols, codebase, valid)
    built.save(paths.index_dir(run.path), index_model(run, ctx, attacked))
    log.info("%s: encoded %s in %.1f s", run.path, ", ".join(built.retrievers), built.index_s)
    return paths.index_file(run.path)


def encode_shard(ctx: Context, run: RunKey, shard: int, shards: int) -> Path:
    """Encode job ``shard`` of ``shards``'s part of the run's pools into the embedding cache
    (csbench.models.shards), for the run's ``index`` job to read; its record
    ``results/encoded/<run>/<shard>-of-<shards>.json`` (what was planned, what was encoded, the identity)."""
    from csbench.evaluate.runner import index_frames
    from csbench.io import write_json
    from csbench.models.build import retriever_factory
    from csbench.models.shards import encode_shard as encode_part

    config = ctx.config
    attacked = attacked_input(ctx, run.dataset, run.attack)
    pool, codebase, valid = read_pools(attacked, config.protocols)
    spec, params, best = config.model_spec(run.model), config.model_params(run.model), checkpoint(run, ctx)
    cache = embedding_cache(ctx)
    if cache is None:
        raise ValueError("encoding.shards > 1 needs the embedding cache: embedding_cache.dir is null in the config")
    out = paths.encode_shard_file(run.path, shard, shards)
    record = {"run": run.as_dict(), "shard": shard, "shards": shards, "planned": 0, "encoded": 0, "identity": None}
    retriever = None
    if spec.family in ("csn", "hf"):  # bi-encoders; an endpoint or a user's class encodes in its index job
        retriever = retriever_factory(spec, params, best, embedding_cache=cache)()
    if retriever is not None and retriever.embedding_cache is not None:
        frames = index_frames(pool, config.protocols, codebase, valid).values()
        record |= encode_part(retriever, frames, shard, shards)
        record["identity"] = retriever.embedding_cache[1]
    write_json(out, record)
    log.info("%s: shard %d of %d, %d codes encoded of %d", run.path, shard + 1, shards, record["encoded"],
             record["planned"])
    return out


def embedding_cache(ctx: Context):
    """The config's embedding cache (``embedding_cache``; csbench.cache.embeddings), None when it is off."""
    from csbench.cache.embeddings import from_setting

    return from_setting(ctx.config.embedding_cache)


def read_pools(
    attacked: Verified, protocols: list[str], encode: bool = True, special_tokens: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """The test pool, the codebase, and the validation split when a matching protocol needs it (it
    chooses its threshold there), each checked against the attacked folder's stamp as it is read; only
    the columns that encoding them (``encode``) or searching them reads (``runner.pool_columns``)."""
    from csbench.evaluate.runner import matching_protocols, pool_columns

    columns = pool_columns(protocols, encode, special_tokens)

    def read(kind: str, file: str) -> pd.DataFrame:
        return attacked.frame(file, columns=columns[kind], present=True)

    valid = read("valid", "valid.parquet") if matching_protocols(protocols) else None
    return read("test", "test.parquet"), read("codebase", f"{paths.POOL_SPLIT}.parquet"), valid


def index_model(run: RunKey, ctx: Context, attacked: Verified) -> dict:
    """What a run's index is built from (csbench.lineage.index_model): recorded in ``index.json``,
    compared on every read, so an index of another model, checkpoint or data is refused."""
    return lineage.index_model(ctx.config, run, attacked.inputs(lineage.pool_names(ctx.config.protocols)))


def index_remake(run: RunKey) -> str:
    """How to re-make a run's index (the end of every message about a bad one)."""
    return (
        f"delete {paths.index_dir(run.path)} and re-run `csbench index` for {run.path} "
        "(snakemake / dvc repro re-make it; from a DVC remote: `make pull` again)"
    )


def checkpoint(run: RunKey, ctx: Context) -> Path | None:
    """The trained encoder a run evaluates (``best/`` of its training), or None for zero-shot; its
    ``train.json`` must record this config's lineage and the ``best/`` that is there (the files of
    ``best/`` are checked against its ``SHA256SUMS`` when the model is loaded)."""
    from csbench.models.integrity import sums_digest

    if run.training is None:
        return None
    folder = paths.checkpoint_dir(run.training.path)
    best, record_file = folder / "best", folder / "train.json"
    command = train_command(ctx, run.training)
    if not best.is_dir() or not record_file.is_file():
        raise FileNotFoundError(f"{best if not best.is_dir() else record_file} is missing: run `{command}` first")
    remake = lineage.remake(command)
    record = json.loads(record_file.read_text())
    stamp = embedded(record, str(record_file), lineage.train(ctx.config, run.training), remake, "train")
    if (stamp.get("outputs") or {}).get("best/SHA256SUMS", {}).get("sha256") != sums_digest(best):
        raise ValueError(f"{best}: not the checkpoint {record_file} records (replaced since it was trained): {remake}")
    return best


def load_index(run: RunKey, ctx: Context, attacked: Verified):
    """The run's saved index and its ``index.json``, its files checked against their ``SHA256SUMS``
    and its model and data against the config's before anything is read (no pickle: .npy arrays and
    JSON); its neural model is rebuilt from the config on first use."""
    from csbench.evaluate.runner import load_pool_index
    from csbench.models.build import attach_embedding_cache, model_loader

    config = ctx.config
    file = paths.index_file(run.path)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: run `csbench index` for {run.path} first")
    best = checkpoint(run, ctx)
    model = index_model(run, ctx, attacked)
    spec, params = config.model_spec(run.model), config.model_params(run.model)
    loader = model_loader(spec, params, best, config.api["cache_dir"])
    saved = load_pool_index(paths.index_dir(run.path), model, loader, index_remake(run))
    cache = embedding_cache(ctx)
    for retriever in saved.retrievers.values():  # the queries they encode are looked up first
        attach_embedding_cache(retriever, cache, spec, params, best)
    return saved, file
