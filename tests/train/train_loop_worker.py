"""A tiny trainable bi-encoder, a small real corpus, and a script that trains it (for test_train_loop).

Run as a script it trains on the corpus into ``--out``; the tests start it in a subprocess (to kill it
with SIGKILL after a checkpoint) and under ``torchrun --nproc_per_node 2`` (data parallel on gloo)::

    python tests/train/train_loop_worker.py --out DIR [--resume] [--block-at STEP --marker FILE] [--config JSON]
                                          [--corpus JSON] [--dropout P]
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import random
import re
import sys
import sysconfig
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from csbench.models.encoder import ENCODER_KINDS, BiEncoder, Features, register_kind

STDLIB_MODULES = (
    "argparse", "ast", "calendar", "configparser", "csv", "difflib", "ftplib", "gettext", "imaplib", "inspect",
    "ipaddress", "mailbox", "nntplib", "pathlib", "pickletools", "pydoc", "shutil", "smtplib", "statistics",
    "subprocess", "tarfile", "textwrap", "threading", "turtle", "typing", "zipfile",
)  # fmt: skip

# The configuration every run of the tests shares (1-process reference, resumed run, 2-process run).
BASE_CONFIG: dict[str, Any] = {
    "optimizer": "adam",
    "lr": 3e-3,
    "schedule": "step_decay",
    "schedule_params": {"every_epochs": 3, "gamma": 0.1},
    "epochs": 6,
    "batch_size": 20,
    "validations_per_epoch": 3,
    "patience": 4,
    "checkpoint_every": 10,
    "seed": 7,
    "log_every": 1000,
}


@functools.cache
def _hashed_subtokens(text: str, buckets: int) -> tuple[int, ...]:
    """Bucket ids (1..buckets-1; 0 pads) of the lower-cased camelCase / snake_case subtokens, at most 256."""
    words = re.findall(r"[A-Za-z]+", text)
    parts = [p.lower() for w in words for p in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", w)]
    return tuple(1 + zlib.crc32(p.encode()) % (buckets - 1) for p in parts[:256])


@torch.no_grad()
def _init(module: nn.Module) -> None:
    for p in module.parameters():
        p.normal_(0.0, 0.1)


class HashBowEncoder(BiEncoder):
    """Mean of hashed subtoken embeddings, then a linear layer; one network for queries and code."""

    kind = "test_hashbow"

    def __init__(self, buckets: int = 2048, dim: int = 32, dropout: float = 0.0, similarity: str = "dot") -> None:
        super().__init__(similarity)
        self.buckets, self.dim, self.dropout = buckets, dim, dropout
        self.embedding = nn.Embedding(buckets, dim, padding_idx=0)
        self.projection = nn.Linear(dim, dim)
        _init(self)

    def _features(self, texts: Sequence[str]) -> Features:
        ids = [_hashed_subtokens(text, self.buckets) for text in texts]
        width = max(1, *(len(row) for row in ids))
        padded = torch.zeros(len(ids), width, dtype=torch.long)
        for i, row in enumerate(ids):
            padded[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        return {"ids": padded}

    def query_features(self, queries: Sequence[str]) -> Features:
        return self._features(queries)

    def code_features(self, codes: Sequence[str], languages: Sequence[str]) -> Features:
        return self._features(codes)

    def encode(self, features: Features, side: str) -> Tensor:
        ids = features["ids"]
        mask = (ids != 0).unsqueeze(-1).float()
        embedded = nn.functional.dropout(self.embedding(ids), self.dropout, self.training)  # draws from torch's RNG
        mean = (embedded * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.projection(mean)

    def config(self) -> dict[str, Any]:
        return {"buckets": self.buckets, "dim": self.dim, "dropout": self.dropout, "similarity": self.similarity}

    def save(self, directory: Path) -> None:
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}, directory / "model.safetensors"
        )

    @classmethod
    def load(cls, directory: Path, params: dict[str, Any]) -> HashBowEncoder:
        encoder = cls(**params)
        encoder.load_state_dict(load_file(directory / "model.safetensors"))
        return encoder


if HashBowEncoder.kind not in ENCODER_KINDS:
    register_kind(HashBowEncoder)


def make_encoder(dropout: float = 0.0, seed: int = 0) -> HashBowEncoder:
    torch.manual_seed(seed)
    return HashBowEncoder(dropout=dropout)


def stdlib_pairs(n: int = 400, seed: int = 0) -> list[tuple[str, str, str]]:
    """(first docstring line, function source without its docstring, "python") from the stdlib, shuffled."""
    root = Path(sysconfig.get_paths()["stdlib"])
    pairs: list[tuple[str, str, str]] = []
    for name in STDLIB_MODULES:
        source = (root / f"{name}.py").read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            query = doc.strip().splitlines()[0].strip() if doc else ""
            if len(query.split()) < 3:
                continue
            node.body = node.body[1:] or [ast.Pass()]  # drop the docstring: the query is not in the code
            pairs.append((query, ast.unparse(node), "python"))
    random.Random(seed).shuffle(pairs)
    return pairs[:n]


def split_corpus() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    pairs = stdlib_pairs(400)
    return pairs[:300], pairs[300:]


def main(argv: list[str] | None = None) -> int:
    from csbench.train.bi_encoder import TrainConfig, train

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", default="{}", help="JSON overrides of BASE_CONFIG")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--block-at", type=int, default=None, help="hang after this optimizer step (to be killed)")
    parser.add_argument("--marker", type=Path, default=None, help="file written when blocking")
    parser.add_argument("--corpus", type=Path, default=None, help='JSON {"train": [...], "valid": [...]}')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, and matches the in-process test runs

    def on_step(status: dict[str, Any]) -> None:
        if args.block_at is not None and status["step"] == args.block_at:
            args.marker.write_text(json.dumps(status))
            time.sleep(600)  # the test kills us here

    if args.corpus is not None:
        corpus = json.loads(args.corpus.read_text())
        train_pairs, valid_pairs = [tuple(p) for p in corpus["train"]], [tuple(p) for p in corpus["valid"]]
    else:
        train_pairs, valid_pairs = split_corpus()
    config = TrainConfig.from_dict(BASE_CONFIG | json.loads(args.config))
    train(
        make_encoder(args.dropout),
        train_pairs,
        valid_pairs,
        config,
        args.out,
        progress=False,
        resume=args.resume,
        on_step=on_step,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
