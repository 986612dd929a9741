"""Real retrieval results of the models on this machine (CPU), with their wall times.

    python benchmarks/bench_models.py [--corpora python-stdlib csn-ruby] [--models bm25 nbow ...]

Corpora:

- ``python-stdlib``: the local Python corpus as the pipeline builds it, comment-free
  (``data/attacked/python-stdlib/no_comment/{train,valid,test}.parquet``; run
  ``snakemake --cores 2 data/attacked/python-stdlib/no_comment/test.parquet`` first).
- ``csn-ruby``: CodeSearchNet Ruby (CodeXGLUE-filtered) from ``../shared/data/codesearchnet/ruby``:
  trained on its valid split (1,400 pairs; the last 10 % held out for validation and early
  stopping), tested on its test split (1,261 queries, each against all 1,261 test codes). Query =
  the docstring tokens joined by spaces, as CodeXGLUE; code = the ``code`` field with comments
  removed (``no_comment``).

Every model is evaluated with the ``full-corpus`` protocol (MRR cut at 1,000, ties against the
model): ``bm25`` and ``minilm`` zero-shot, ``nbow`` and ``selfatt`` trained from scratch,
``minilm-ft`` = MiniLM fine-tuned with in-batch cross-entropy. Printed per corpus and model: MRR,
training wall time (with its validations) and samples/s, encoding and search time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from csbench.attacks import run_attack
from csbench.evaluate.runner import build_index, search
from csbench.models import MODELS
from csbench.models.build import new_encoder, retriever_factory
from csbench.train.bi_encoder import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

# Training regimes for CPU: the from-scratch baselines with CodeSearchNet's learning rates, MiniLM
# with a fine-tuning rate; small batches, few epochs (this is a 2-core machine).
REGIMES = {
    "nbow": {"lr": 1e-2, "batch_size": 64, "epochs": 20, "schedule": "constant", "patience": 6},
    "selfatt": {"lr": 5e-4, "batch_size": 64, "epochs": 3, "schedule": "constant", "patience": 4},
    "minilm-ft": {"lr": 2e-5, "optimizer": "adamw", "batch_size": 32, "epochs": 1, "schedule": "linear_decay"},
}
COMMON = {"validations_per_epoch": 2, "checkpoint_every": None, "mixed_precision": "no", "log_every": 1000}


def csn_ruby() -> dict[str, pd.DataFrame]:
    folder = SHARED / "codesearchnet" / "ruby"
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing (../shared/data beside the project)")
    frames = {}
    for split in ("valid", "test"):
        rows = [json.loads(line) for line in (folder / f"{split}.jsonl").open()]
        frames[split] = pd.DataFrame(
            {
                "id": [f"{split}-{i}" for i in range(len(rows))],
                "language": "ruby",
                "query": [" ".join(r["docstring_tokens"]) for r in rows],
                "code": [r["code"] for r in rows],
                "func_name": [r["func_name"] for r in rows],
                "url": [r["url"] for r in rows],
            }
        )
    attacked, _ = run_attack("no_comment", frames, progress=False)
    cut = len(attacked["valid"]) * 9 // 10
    return {
        "train": attacked["valid"].iloc[:cut].reset_index(drop=True),
        "valid": attacked["valid"].iloc[cut:].reset_index(drop=True),
        "test": attacked["test"],
    }


def python_stdlib() -> dict[str, pd.DataFrame]:
    folder = ROOT / "data" / "attacked" / "python-stdlib" / "no_comment"
    if not (folder / "test.parquet").is_file():
        raise FileNotFoundError(f"{folder} is missing: build it with the pipeline first (see the docstring)")
    return {split: pd.read_parquet(folder / f"{split}.parquet") for split in ("train", "valid", "test")}


CORPORA = {"python-stdlib": python_stdlib, "csn-ruby": csn_ruby}


def evaluate(factory, test: pd.DataFrame) -> tuple[float, float, float]:
    index = build_index(factory, test, ["full-corpus"])
    outcomes, timings = search(index, test, ["full-corpus"], 1, "bench", progress=False)
    return outcomes["full-corpus"].metrics()["mrr"], timings["index_s"], timings["search_s"]


def run_model(name: str, splits: dict[str, pd.DataFrame], seed: int, workdir: Path) -> dict:
    base = name.removesuffix("-ft")
    spec = MODELS.get(base)
    params = spec.defaults
    row: dict = {"model": name}
    checkpoint = None
    if spec.family != "lexical" and (name.endswith("-ft") or not spec.zero_shot):
        encoder = new_encoder(spec, params, splits["train"], seed)
        config = TrainConfig.from_dict({**COMMON, **REGIMES[name], "seed": seed, "loss": "ce"})
        result = train(encoder, splits["train"], splits["valid"], config, workdir / name, progress=False)
        checkpoint = workdir / name / "best"
        row |= {
            "train_s": round(result.train_seconds, 1),
            "samples_per_s": round(result.samples_per_second, 1),
            "steps": result.steps,
            "best_valid_mrr": round(result.best_mrr, 4),
            "stop": result.stop_reason,
        }
    mrr, index_s, search_s = evaluate(retriever_factory(spec, params, checkpoint), splits["test"])
    return row | {"mrr": round(mrr, 4), "index_s": round(index_s, 1), "search_s": round(search_s, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--models", nargs="+", default=["bm25", "nbow", "selfatt", "minilm", "minilm-ft"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"torch threads: {torch.get_num_threads()}")
    for corpus in args.corpora:
        splits = CORPORA[corpus]()
        sizes = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
        print(f"\n{corpus}: {sizes}")
        header = ("model", "MRR", "train s", "samples/s", "steps", "index s", "search s")
        print("  {:<10} {:>7} {:>8} {:>10} {:>6} {:>8} {:>9}".format(*header))
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.models:
                started = time.perf_counter()
                row = run_model(name, splits, args.seed, Path(tmp))
                train_s, rate = row.get("train_s", "-"), row.get("samples_per_s", "-")
                print(
                    f"  {name:<10} {row['mrr']:>7.4f} {train_s:>8} {rate:>10} "
                    f"{row.get('steps', '-'):>6} {row['index_s']:>8} {row['search_s']:>9}"
                    f"   (total {time.perf_counter() - started:.0f} s"
                    + (f"; best valid MRR {row['best_valid_mrr']}, {row['stop']})" if "stop" in row else ")"),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
