"""The ``train`` phase: train (or fine-tune) one model on a dataset's attacked train split into
``checkpoints/<dataset>/<attack>/<model>/<loss>/<seed>`` (``best/``, ``train.json``); a killed run
resumes. Bi-encoders follow the COBE regime of ``training:``; cross-encoders GeCS's."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from csbench import lineage, paths
from csbench.config import SUMMARY_LOSS, TrainKey
from csbench.io import write_json
from csbench.phases import Context
from csbench.phases.inputs import attacked as attacked_input
from csbench.phases.inputs import require
from csbench.stamps import EMBEDDED_KEY, Verified

log = logging.getLogger("csbench")


def train(ctx: Context, key: TrainKey) -> Path:
    """Train the model ``key`` names and stamp its ``train.json``; the checkpoint folder."""
    config = ctx.config
    if key.model in config.summarization["models"]:
        return train_summarizer(ctx, key)
    trained = config.trained
    require(key.dataset, trained["datasets"], "dataset", "--dataset (not in grid.trained.datasets)")
    require(key.attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    require(key.model, trained["models"], "model", "--model (not in grid.trained.models)")
    require(key.loss, trained["losses"], "loss", "--loss (not in grid.trained.losses)")
    seeds = config.seeds_for(key.dataset)
    if key.seed not in seeds:
        raise ValueError(f"--seed {key.seed} is not among {key.dataset}'s seeds in grid.trained ({seeds})")
    spec = config.model_spec(key.model)
    attacked = attacked_input(ctx, key.dataset, key.attack)
    columns = ["query", "code", "language"]
    valid_frame = attacked.frame("valid.parquet", columns=columns)
    with train_table(attacked, columns) as table:
        train_model = _train_cross if spec.family == "cross" else _train_bi
        outcome = train_model(ctx, key, spec, table, valid_frame)
    _stamp_training(ctx, key, attacked)
    log.info("%s", outcome)
    return paths.checkpoint_dir(key.path)


TRAIN_BATCH_ROWS = 20_000  # rows of the train split read at once into its TextTable


def train_table(attacked: Verified, columns: list[str]):
    """The attacked train split's ``columns`` as a :class:`~csbench.train.texts.TextTable` in the system's
    temporary folder (``TMPDIR``), read a row batch at a time from the bytes checked against its stamp:
    the training holds 8 bytes per value, not the split."""
    from csbench.io import parquet_frames
    from csbench.train.texts import TextTable

    name = "train.parquet"
    with attacked.open(name) as handle:
        batches = parquet_frames(handle, TRAIN_BATCH_ROWS, columns)
        return TextTable.write(batches, columns, tempfile.gettempdir(), where=str(attacked.folder / name))


def _train_bi(ctx: Context, key: TrainKey, spec, train, valid_frame: pd.DataFrame) -> str:
    """Train a bi-encoder under the COBE regime (``training:``, overridden per model); how it ended."""
    from csbench.models.build import new_encoder
    from csbench.train import bi_encoder

    config = ctx.config
    regime = config.training_params(key.model)
    max_valid = regime.pop("max_valid", None)
    if max_valid is not None:
        valid_frame = valid_frame.iloc[:max_valid]
    train_config = bi_encoder.TrainConfig.from_dict(
        {**regime, "seed": key.seed, "loss": key.loss, "loss_params": config.loss_params(key.loss)}
    )
    log.info("training %s: %d train / %d valid pairs; %s", key.path, len(train), len(valid_frame), train_config)
    encoder = new_encoder(spec, config.model_params(key.model), train, key.seed)
    out = paths.checkpoint_dir(key.path)
    result = bi_encoder.train(encoder, train, valid_frame, train_config, out, progress=ctx.progress, resume=True)
    shutil.rmtree(out / "state", ignore_errors=True)  # only needed to resume; train.json is written
    return f"{key.path}: best validation MRR {result.best_mrr:.4f} at step {result.best_step} ({result.stop_reason})"


def _train_cross(ctx: Context, key: TrainKey, spec, train, valid_frame: pd.DataFrame) -> str:
    """Fine-tune a cross-encoder as GeCS did (one drawn negative per positive, CE over its two
    logits); its regime is GeCS's for the model, overridden by ``models.<name>.training`` only
    (the COBE regime under ``training:`` is for bi-encoders). How it ended."""
    from csbench.models.build import new_encoder
    from csbench.models.cross import CROSS_MODELS
    from csbench.train import cross_encoder

    config = ctx.config
    own = dict((config.raw["models"].get(key.model) or {}).get("training") or {})
    max_valid = own.pop("max_valid", None)
    if max_valid is not None:
        valid_frame = valid_frame.iloc[:max_valid]
    regime = {**CROSS_MODELS[key.model.removesuffix("-cross")].get("training", {}), **own, "seed": key.seed}
    train_config = cross_encoder.CrossTrainConfig.from_dict(regime)
    log.info("training %s: %d train / %d valid pairs; %s", key.path, len(train), len(valid_frame), train_config)
    model = new_encoder(spec, config.model_params(key.model), train, key.seed)
    out = paths.checkpoint_dir(key.path)
    result = cross_encoder.train_cross(model, train, valid_frame, train_config, out, ctx.progress)
    if result.best_accuracy is None:  # no validation split: the last model, as GeCS's script
        return f"{key.path}: trained without validation, the last model kept ({result.stop_reason})"
    return f"{key.path}: best validation accuracy {result.best_accuracy:.4f} ({result.stop_reason})"


def train_summarizer(ctx: Context, key: TrainKey) -> Path:
    """Train a summarizer of ``grid.summarization.models`` (teacher forcing, token cross-entropy: loss
    ``xent``) on the attacked train split, streamed from a memory-mapped copy (Funcom's 2 M pairs never
    sit in memory), validated by smoothed BLEU-4 on the valid split; the checkpoint folder."""
    from csbench.models.integrity import write_sums
    from csbench.summarization.data import PairStore
    from csbench.summarization.models import build_summarizer
    from csbench.train.summarizer import Seq2SeqTrainConfig
    from csbench.train.summarizer import train_summarizer as fit

    config = ctx.config
    summary = config.summarization
    require(key.dataset, summary["datasets"], "dataset", "--dataset (not in grid.summarization.datasets)")
    require(key.attack, summary["attacks"], "attack", "--attack (not in grid.summarization.attacks)")
    require(key.loss, [SUMMARY_LOSS], "loss", f"--loss (a summarizer trains with token cross-entropy: {SUMMARY_LOSS})")
    if key.seed not in summary["seeds"]:
        raise ValueError(f"--seed {key.seed} is not among grid.summarization.seeds ({summary['seeds']})")
    attacked = attacked_input(ctx, key.dataset, key.attack)
    params = config.model_params(key.model)
    train_file = paths.split_files(attacked.folder)["train"]
    attacked.check("train.parquet")
    out = paths.checkpoint_dir(key.path)
    pairs = PairStore(train_file, out / "cache" / "train-pairs.arrow")
    valid_frame = attacked.frame("valid.parquet", columns=["id", "query", "code"])
    train_config = Seq2SeqTrainConfig.from_dict({**config.training_params(key.model), "seed": key.seed})
    log.info("training %s: %d train / %d valid pairs; %s", key.path, len(pairs), len(valid_frame), train_config)
    summarizer = build_summarizer(params, pairs.codes(), pairs.summaries(), key.seed)
    result = fit(summarizer, pairs, valid_frame, train_config, out, progress=ctx.progress, resume=True)
    write_sums(out / "best")
    for folder in ("state", "cache"):  # only needed to resume; train.json is written
        shutil.rmtree(out / folder, ignore_errors=True)
    _stamp_training(ctx, key, attacked)
    log.info("%s: %s", key.path, result)
    return out


def _stamp_training(ctx: Context, key: TrainKey, attacked: Verified) -> None:
    """Record in ``train.json`` (under ``made``) the lineage of the training, the data it read and the
    digest of ``best/SHA256SUMS``; by the main process only (accelerate starts one per device)."""
    from csbench.models.integrity import sums_digest
    from csbench.stamps import record

    if os.environ.get("RANK", "0") != "0":
        return
    folder = paths.checkpoint_dir(key.path)
    data = json.loads((folder / "train.json").read_text())
    best = {"sha256": sums_digest(folder / "best"), "bytes": (folder / "best" / "SHA256SUMS").stat().st_size}
    inputs = attacked.inputs(["train.parquet", "valid.parquet"])
    data[EMBEDDED_KEY] = record("train", lineage.train(ctx.config, key), inputs, {"best/SHA256SUMS": best})
    write_json(folder / "train.json", data)
