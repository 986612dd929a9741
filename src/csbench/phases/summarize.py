"""The ``summarize`` phase: generate a summary of every test function of a summarization run's
(attacked) split with its summarizer, score them, into ``results/runs/<run>``: ``summaries.jsonl``
(id, reference, hypothesis, the code as fed), ``metrics.json`` (protocol ``summarization``: BLEU-1..4,
the composite, CodeXGLUE's smoothed BLEU-4), ``provenance.json`` and the stamp.

A record that cannot be summarized is a counted skip named in ``metrics.json`` (``skipped``), never
fed: an empty reference (nothing to score against), empty code, or code longer than the model's
``max_code_chars``. The reference is the record's ``query`` (a docstring's first paragraph, a release's
summary), the input its ``code``, as the run's attack left it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from csbench import lineage, paths
from csbench.config import SUMMARY_PROTOCOL, RunKey
from csbench.io import atomic_open, sha256_file, write_json
from csbench.phases import Context
from csbench.phases.inputs import attacked as attacked_input
from csbench.phases.inputs import train_command, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")

SUMMARIES_FILE = "summaries.jsonl"
OUTPUTS = (SUMMARIES_FILE, "metrics.json", "provenance.json")


def summarize(ctx: Context, run: RunKey) -> Path:
    """Summarize and score the run's test split; its records folder."""
    from csbench.summarization.metrics import summary_scores
    from csbench.summarization.models.base import Decoding

    config = ctx.config
    if not config.summarizes(run.model):
        raise ValueError(f"{run.model!r} is a retrieval model: its runs are evaluated by `csbench evaluate`")
    attacked = attacked_input(ctx, run.dataset, run.attack)
    out = paths.run_dir(run.path)
    unstamp(out)
    params = config.model_params(run.model)
    test = attacked.frame("test.parquet", columns=["id", "query", "code", "language"])
    kept, skipped = usable_records(test, int(params["max_code_chars"]))
    started = time.perf_counter()
    summarizer, read = _summarizer(ctx, run, params)
    load_s = time.perf_counter() - started
    decoding = Decoding.from_params(params)
    started = time.perf_counter()
    hypotheses = generate(summarizer, kept["code"].tolist(), decoding, ctx.progress, run.path)
    generate_s = time.perf_counter() - started
    references = kept["query"].tolist()
    extra = config.summarization["extra_metrics"]
    scores = summary_scores(references, hypotheses, extra) if len(kept) else {}
    _write_summaries(out / SUMMARIES_FILE, kept, hypotheses)
    note = "" if len(kept) else "no test record could be summarized (see skipped)"
    timings = {"load_s": round(load_s, 3), "generate_s": round(generate_s, 3)}
    timings["summaries_per_s"] = round(len(kept) / generate_s, 3) if generate_s > 0 and len(kept) else None
    write_json(
        out / "metrics.json",
        {
            "run": {
                "study": config.study,
                "language": ",".join(sorted(test["language"].unique())),
                "task": "summarization",
                **run.as_dict(),
            },
            "scores": [{"protocol": SUMMARY_PROTOCOL, "metric": k, "value": v} for k, v in scores.items()]
            + [{"protocol": SUMMARY_PROTOCOL, "metric": "n_queries", "value": len(kept)}],
            "protocols": {
                SUMMARY_PROTOCOL: {
                    "note": note,
                    "n_queries": len(kept),
                    "decoding": decoding.to_dict(),
                    "skipped": skipped,
                }
            },
        },
    )
    _write_provenance(out, ctx, run, timings, [paths.split_files(attacked.folder)["test"], *read])
    inputs = attacked.inputs(["test.parquet"])
    for file in read:
        inputs[file.as_posix()] = sha256_file(file)
    write_stamp(out, "summarize", lineage.summary_run(config, run), inputs, list(OUTPUTS))
    counts = ", ".join(f"{len(ids)} {why}" for why, ids in skipped.items()) or "none"
    headline = f"smoothed BLEU-4 {scores['smoothed_bleu4']:.2f}" if scores else "nothing scored"
    log.info("%s: %s (%d summaries, skipped: %s; %.1f s)", run.path, headline, len(kept), counts, generate_s)
    return out


def usable_records(frame: pd.DataFrame, max_code_chars: int) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The records a summarizer is given, and the others by why (their ids): an empty reference,
    empty code, code over ``max_code_chars`` characters."""
    reference = frame["query"].fillna("").astype(str).str.strip()
    code = frame["code"].fillna("").astype(str)
    reasons = {
        "empty_reference": reference == "",
        "empty_code": (code.str.strip() == "") & (reference != ""),
        "over_long_code": (code.str.len() > max_code_chars) & (code.str.strip() != "") & (reference != ""),
    }
    skipped = {why: frame.loc[mask, "id"].astype(str).tolist() for why, mask in reasons.items() if mask.any()}
    bad = reasons["empty_reference"] | reasons["empty_code"] | reasons["over_long_code"]
    return frame.loc[~bad].reset_index(drop=True), skipped


def generate(summarizer, codes: list[str], decoding, progress: bool, label: str) -> list[str]:
    """The summaries of ``codes``, a decoding batch at a time (a progress bar over the records)."""
    from tqdm import tqdm

    hypotheses: list[str] = []
    size = decoding.batch_size
    with tqdm(total=len(codes), desc=f"summarize {label}", unit="fn", disable=not progress) as bar:
        for start in range(0, len(codes), size):
            hypotheses += summarizer.generate(codes[start : start + size], decoding)
            bar.update(min(size, len(codes) - start))
    return hypotheses


def _summarizer(ctx: Context, run: RunKey, params: dict[str, Any]):
    """The run's summarizer and the files read for it: the best checkpoint of its training (its
    ``train.json`` must record this config's lineage and that ``best/``; every file of ``best/`` is
    checked against its ``SHA256SUMS`` before loading), or the model as released (zero-shot)."""
    from csbench.models.integrity import verify_dir
    from csbench.phases.index import checkpoint
    from csbench.summarization.models import build_summarizer, load_summarizer

    best = checkpoint(run, ctx)
    if best is None:
        return build_summarizer(params, [], [], run.seed), []
    assert run.training is not None
    verify_dir(best, lineage.remake(train_command(ctx, run.training)))
    return load_summarizer(best), [best.parent / "train.json", best / "SHA256SUMS"]


def _write_summaries(file: Path, kept: pd.DataFrame, hypotheses: list[str]) -> None:
    """One JSON object a line: id, reference, hypothesis, the code as fed (attacked)."""
    with atomic_open(file, "w") as handle:
        for (rid, reference, code), hypothesis in zip(
            kept[["id", "query", "code"]].itertuples(index=False), hypotheses, strict=True
        ):
            line = {"id": str(rid), "reference": reference, "hypothesis": hypothesis, "code": code}
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")


def _write_provenance(out: Path, ctx: Context, run: RunKey, timings: dict, inputs: list[Path]) -> None:
    """``provenance.json``: the model's parameters (and training config), the files read, timings."""
    from csbench.provenance import provenance

    params: dict[str, Any] = {"model": ctx.config.model_params(run.model)}
    efficiency: dict[str, Any] = {"summaries_per_s": timings.get("summaries_per_s")}
    if run.training is not None:
        record = json.loads((paths.checkpoint_dir(run.training.path) / "train.json").read_text())
        params["training"] = record.get("config")
        efficiency |= {
            "train_s": record.get("train_seconds"),
            "train_steps": record.get("steps"),
            "best_valid": record.get("best_bleu", record.get("best_loss")),
            "train_stop_reason": record.get("stop_reason"),
        }
    write_json(
        out / "provenance.json",
        provenance(
            phase="summarize", params=params, inputs=inputs, seed=run.seed, timings=timings, efficiency=efficiency
        ),
    )


