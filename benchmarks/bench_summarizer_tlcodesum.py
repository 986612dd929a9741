"""Does the from-scratch summarizer (``transformer-sum``) learn? Train it on TL-CodeSum's real files and
score it against two trivial baselines, on the same held-out test records.

Data: ``../shared/data/tl_codesum/valid.token.{code,nl}`` (TL-CodeSum's validation split: 8,714 aligned
``id<TAB>tokens`` lines of tokenised Java and summaries), used as train / valid / test by a hash of the id:
``sha256(id) % 10`` in 0-7 train, 8 valid, 9 test (about 80 / 10 / 10).

Baselines (on the test records):

* ``most_frequent``: the train split's most frequent summary, for every record;
* ``function_name``: the method name (the identifier before the first ``(`` of the tokenised code)
  split into lower-cased words (``getFooBar`` -> ``get foo bar``).

Scores: CodeXGLUE's smoothed BLEU-4 and sacrebleu's corpus BLEU-4 (``csbench.summarization.metrics``).

Run from the project root::

    .venv/bin/python benchmarks/bench_summarizer_tlcodesum.py --out /tmp/tlcs

The defaults are the run reported for issue #25 (a 2 + 2-layer d_model 128 model, 1,500 steps of 16
pairs, about 14 minutes on 2 shared CPU cores). It prints one JSON object (steps, seconds, the scores of
the model and the baselines) and writes ``<out>/results.json`` and ``<out>/test_summaries.jsonl``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import logging
import re
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from csbench.code.tokens import subtokens
from csbench.summarization.metrics import corpus_bleu, smoothed_bleu4
from csbench.summarization.models import build_summarizer, load_summarizer
from csbench.summarization.models.base import Decoding
from csbench.summarization.models.defaults import SEQ2SEQ_MODELS
from csbench.train.summarizer import Seq2SeqTrainConfig, train_summarizer

DATA = Path("../shared/data/tl_codesum")
_NAME = re.compile(r"([A-Za-z_$][\w$]*)\s*\(")


def read_split(data: Path) -> dict[str, pd.DataFrame]:
    """TL-CodeSum's aligned files, split 80 / 10 / 10 by ``sha256(id) % 10``."""

    def lines(path: Path) -> dict[str, str]:
        out = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            key, _, text = line.partition("\t")
            out[key] = text.strip()
        return out

    codes, summaries = lines(data / "valid.token.code"), lines(data / "valid.token.nl")
    if codes.keys() != summaries.keys():
        raise ValueError(f"{data}: code and summary files hold different ids")
    frame = pd.DataFrame({"id": list(codes), "code": list(codes.values())})
    frame["query"] = [summaries[key] for key in frame["id"]]
    bucket = frame["id"].map(lambda key: int(hashlib.sha256(key.encode()).hexdigest(), 16) % 10)
    return {
        "train": frame[bucket < 8].reset_index(drop=True),
        "valid": frame[bucket == 8].reset_index(drop=True),
        "test": frame[bucket == 9].reset_index(drop=True),
    }


def function_name_summary(code: str) -> str:
    """The method name (identifier before the first ``(``) as lower-cased words; '' when none."""
    match = _NAME.search(code)
    return " ".join(subtokens(match.group(1))) if match else ""


def scores(references: list[str], hypotheses: list[str]) -> dict[str, float]:
    corpus = corpus_bleu(references, hypotheses)
    return {
        "smoothed_bleu4": round(smoothed_bleu4(references, hypotheses), 2),
        "corpus_bleu4": round(corpus["bleu"], 2),
        "bleu_composite": round(corpus["bleu_composite"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=1500)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1.5e-3)
    parser.add_argument("--warmup", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-source-len", type=int, default=64)
    parser.add_argument("--max-target-len", type=int, default=20, help="summary tokens trained on and generated")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--ff-dim", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    parser.add_argument("--summary-vocab", type=int, default=2000)
    parser.add_argument("--max-valid", type=int, default=100)
    parser.add_argument("--validations-per-epoch", type=int, default=2)
    parser.add_argument("--beam", type=int, default=1, help="test decoding beam (1: greedy)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    split = read_split(args.data)
    train, valid, test = split["train"], split["valid"], split["test"]
    params = SEQ2SEQ_MODELS["transformer-sum"] | {
        "max_source_len": args.max_source_len,
        "max_target_len": args.max_target_len,
        "max_length": args.max_target_len,
        "d_model": args.d_model,
        "ff_dim": args.ff_dim,
        "encoder_layers": args.layers,
        "decoder_layers": args.layers,
        "summary_vocab_size": args.summary_vocab,
    }
    t0 = time.perf_counter()
    summarizer = build_summarizer(params, train["code"], train["query"], seed=args.seed)
    config = Seq2SeqTrainConfig(
        lr=args.lr,
        weight_decay=0.01,
        schedule="linear_decay",
        schedule_params={"warmup_steps": args.warmup},
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        patience=None,
        validations_per_epoch=args.validations_per_epoch,
        max_valid=args.max_valid,
        label_smoothing=0.1,
        cpu=True,
        seed=args.seed,
        log_every=50,
    )
    record = train_summarizer(summarizer, train, valid, config, args.out, progress=False, resume=True)
    train_seconds = time.perf_counter() - t0
    best = load_summarizer(args.out / "best")
    t1 = time.perf_counter()
    decoding = Decoding.from_params(best.params, beam=args.beam)
    hypotheses = best.generate(test["code"].tolist(), decoding)
    decode_seconds = time.perf_counter() - t1
    references = test["query"].tolist()
    most_frequent = collections.Counter(train["query"]).most_common(1)[0][0]
    result = {
        "split": {name: len(frame) for name, frame in split.items()},
        "steps": record.steps,
        "best_step": record.best_step,
        "best_valid_smoothed_bleu4": record.best,
        "train_seconds": round(train_seconds, 1),
        "test_decode_seconds": round(decode_seconds, 1),
        "decoding": decoding.to_dict(),
        "model": scores(references, hypotheses),
        "most_frequent": scores(references, [most_frequent] * len(references)) | {"summary": most_frequent},
        "function_name": scores(references, [function_name_summary(code) for code in test["code"]]),
        "args": {key: str(value) for key, value in vars(args).items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    with (args.out / "test_summaries.jsonl").open("w") as f:
        for key, reference, hypothesis in zip(test["id"], references, hypotheses, strict=True):
            f.write(json.dumps({"id": key, "reference": reference, "hypothesis": hypothesis}) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
