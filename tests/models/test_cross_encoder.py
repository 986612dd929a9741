"""Cross-encoders for GeCS matching and ranking (csbench.models.cross, csbench.train.cross_encoder).

All offline: tiny random networks built from configs with a byte-level BPE tokenizer trained here on a
synthetic matching task (the query is a word; a matching code starts with that word), plus the one
pretrained checkpoint that ships in a package (all-MiniLM-L6-v2) with a new 2-way head.
"""

from __future__ import annotations

import json
import random
import re
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_models import byte_level_bpe, minilm_dir_fixture, one_thread  # noqa: F401 (fixtures)

from csbench.evaluate.metrics import rank_of_correct
from csbench.models.cross import (
    CROSS_MODELS,
    LABELS,
    CrossEncoder,
    cross_params,
    matching_accuracy,
    matching_pairs,
    rank_candidates_cross,
)
from csbench.models.hf import ModelNotAvailableError
from csbench.train.cross_encoder import CrossEncoderTask, CrossTrainConfig, _matching_rows, train_cross
from csbench.train.engine import micro_batches
from csbench.train.texts import TextTable

WORDS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "olive", "peach"]
WORDS += ["pear", "plum", "berry", "melon", "kiwi", "lime", "fig", "date"]
TINY = {"max_len": 64, "max_query_len": 8}
ARCHITECTURES = ("roberta", "bert", "t5", "codet5p-embedding")


def synthetic(n: int, seed: int) -> list[tuple[str, str]]:
    """(query, code) records: the query is a word, its code starts with it. A negative drawn from another
    record carries another word except when both drew the same one (1 in 16: the accuracy ceiling ~97 %)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        word = rng.choice(WORDS)
        out.append((word, f"{word} {rng.randint(0, 99)}"))
    return out


# --------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def tokenizer():
    """A RoBERTa-style byte-level BPE trained on the synthetic records."""
    texts = [text for pair in synthetic(600, 0) for text in pair] + ["def f(x):\n    return x + 1"]
    return byte_level_bpe(texts, vocab_size=400)


def tiny_config(arch: str, vocab_size: int, dropout: float = 0.0, init: float = 0.02, hidden: int = 32, heads: int = 2):
    """A 2-layer network of ``arch``, ``hidden`` wide."""
    from transformers import BertConfig, RobertaConfig, T5Config

    if arch in ("t5", "codet5p-embedding"):
        extra = {"embed_dim": 16} if arch == "codet5p-embedding" else {}
        return T5Config(
            vocab_size=vocab_size, d_model=hidden, d_kv=16, d_ff=2 * hidden, num_layers=2, num_heads=heads,
            dropout_rate=dropout,
            pad_token_id=1, eos_token_id=2, decoder_start_token_id=1, initializer_factor=init / 0.02, **extra,
        )  # fmt: skip
    common = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": 2,
        "num_attention_heads": heads,
        "intermediate_size": 2 * hidden,
        "max_position_embeddings": 130,
        "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": 0.0,
        "pad_token_id": 1,
        "initializer_range": init,
    }
    if arch == "bert":
        return BertConfig(**common)
    return RobertaConfig(**common, bos_token_id=0, eos_token_id=2, type_vocab_size=1)


def tiny_model(arch: str, tokenizer, seed: int = 0, **config) -> CrossEncoder:
    kind = "codet5p-embedding" if arch == "codet5p-embedding" else "sequence-classification"
    params = {**TINY, "architecture_kind": kind}
    return CrossEncoder.from_config(tiny_config(arch, len(tokenizer), **config), tokenizer, params, seed=seed)


def columns(records: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [q for q, _ in records], [c for _, c in records]


# --------------------------------------------------------------------------------------- matching data
def test_matching_pairs_properties():
    queries = [f"q{i}" for i in range(50)]
    codes = [f"code {i % 40}" for i in range(50)]  # codes 40..49 repeat 0..9: equal texts are never negatives
    out_q, out_c, labels = matching_pairs(queries, codes, seed=3)
    assert len(out_q) == len(out_c) == labels.size == 100
    assert labels.tolist() == [1, 0] * 50  # balanced, each positive followed by its negative
    assert out_q[0::2] == queries and out_q[1::2] == queries and out_c[0::2] == codes
    assert all(neg != own for neg, own in zip(out_c[1::2], codes, strict=True))
    assert set(out_c[1::2]) <= set(codes)
    assert matching_pairs(queries, codes, seed=3)[1] == out_c  # deterministic
    assert matching_pairs(queries, codes, seed=4)[1] != out_c  # the seed matters
    # several negatives per positive: distinct codes, none the positive's own
    _, codes3, labels3 = matching_pairs(queries, codes, seed=0, negatives_per_positive=3)
    assert labels3.tolist() == [1, 0, 0, 0] * 50
    for i in range(50):
        negatives = codes3[4 * i + 1 : 4 * i + 4]
        assert len(set(negatives)) == 3 and codes[i] not in negatives
    with pytest.raises(ValueError, match="distinct codes"):
        matching_pairs(["a", "b", "c"], ["x", "x", "y"], seed=0, negatives_per_positive=2)
    with pytest.raises(ValueError, match="queries but"):
        matching_pairs(["a"], ["x", "y"], seed=0)


def test_matching_negatives_are_uniform():
    """Over seeds, each other record is drawn about equally often (GeCS: uniform over the other records)."""
    n, seeds = 5, 800
    queries, codes = [f"q{i}" for i in range(n)], [f"c{i}" for i in range(n)]
    counts = np.zeros((n, n))
    for seed in range(seeds):
        negatives = matching_pairs(queries, codes, seed=seed)[1][1::2]
        for i, negative in enumerate(negatives):
            counts[i, codes.index(negative)] += 1
    assert np.all(np.diag(counts) == 0)
    expected = seeds / (n - 1)
    off_diagonal = counts[~np.eye(n, dtype=bool)]
    assert np.all(np.abs(off_diagonal - expected) < 5 * np.sqrt(expected)), counts


def _table(records: list[tuple[str, str]], folder: Path) -> TextTable:
    frame = pd.DataFrame({"language": "python", "query": [q for q, _ in records], "code": [c for _, c in records]})
    return TextTable.write([frame[:7], frame[7:]], ["language", "query", "code"], folder)


@pytest.mark.parametrize("negatives", [1, 3])
def test_the_training_pairs_read_from_a_file_are_matching_pairs(negatives, tmp_path):
    """The training's matching pairs, read from the split's file (``TextTable``, issue #28: a split too large
    to hold) or from pairs in memory, are ``matching_pairs``'s, item for item, duplicated codes included
    (the negatives drawn from ids of the codes' digests, not from the texts)."""
    records = [(f"q{i}", f"code {i % 40}") for i in range(90)]  # codes repeat: never a negative of their own
    expected = list(zip(*matching_pairs(*columns(records), seed=42, negatives_per_positive=negatives), strict=True))
    with _table(records, tmp_path) as table:
        for pairs in (table, records, pd.DataFrame(records, columns=["query", "code"])):
            dataset = _matching_rows(pairs, 42, negatives)
            assert [dataset[m] for m in range(len(dataset))] == expected
            assert (dataset.rows is table) == (pairs is table)  # the table read in place, not copied


def test_the_training_holds_the_negatives_not_the_split(tokenizer, tmp_path):
    """Over a split file, the training's data is the negatives' indices (and, while they are drawn, a digest
    per code): its memory is a fraction of the split's texts (the texts were all held before)."""
    records = [(f"query {i}", f"def f{i}(x):\n    return x + {i % 9000}  # " + "pad " * 240) for i in range(30_000)]
    text_bytes = sum(len(q) + len(c) for q, c in records)
    with _table(records, tmp_path) as table:
        model = tiny_model("roberta", tokenizer)
        tracemalloc.start()
        try:
            task = CrossEncoderTask(model, table, synthetic(8, 4), learnable_config())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(task.dataset) == 60_000 and task.dataset[1][2] == 0 and task.dataset[1][1] != records[0][1]
    assert peak < text_bytes / 4, (peak, text_bytes)


def test_training_from_the_split_file_is_training_from_memory(tokenizer, tmp_path):
    """The same weights: trained on the pairs in memory and on the same pairs read from a TextTable."""
    train, valid = synthetic(96, 3), synthetic(24, 4)
    config = learnable_config(epochs=1, max_steps=4)
    scores = []
    with _table(train, tmp_path) as table:
        for name, pairs in (("memory", train), ("file", table)):
            model = tiny_model("roberta", tokenizer, dropout=0.1)
            result = train_cross(model, pairs, valid, config, tmp_path / name, progress=False)
            assert result.n_train_pairs == 192
            scores.append(model.score_pairs(*columns(valid)))
    np.testing.assert_array_equal(scores[0], scores[1])
    sums = [(tmp_path / name / "best" / "SHA256SUMS").read_bytes() for name in ("memory", "file")]
    assert sums[0] == sums[1]  # byte for byte the same checkpoint


# --------------------------------------------------------------------------------------- the model
def test_score_pairs_order_and_batch_independent(tokenizer):
    model = tiny_model("roberta", tokenizer)
    queries, codes = columns(synthetic(23, 5))
    codes = [code * (1 + i % 4) for i, code in enumerate(codes)]  # varied lengths: padding differs per batch
    scores = model.score_pairs(queries, codes, batch_size=4)
    assert scores.shape == (23,) and scores.dtype == np.float64 and np.isfinite(scores).all()
    np.testing.assert_allclose(model.score_pairs(queries, codes, batch_size=23), scores, atol=1e-5)
    np.testing.assert_allclose(model.score_pairs(queries, codes, batch_size=1), scores, atol=1e-5)
    order = np.random.default_rng(0).permutation(23)
    shuffled = model.score_pairs([queries[i] for i in order], [codes[i] for i in order], batch_size=5)
    np.testing.assert_allclose(shuffled, scores[order], atol=1e-5)
    assert model.training  # restored after scoring
    # the score is logit(match) - logit(no_match); the decision is the argmax
    with torch.inference_mode():
        model.eval()
        logits = model(model.features(queries, codes)).double().numpy()
    np.testing.assert_allclose(scores, logits[:, 1] - logits[:, 0], atol=1e-5)
    assert (model.predict_match(queries, codes) == (logits.argmax(1) == 1)).all()


def test_features_pair_template_and_truncation(tokenizer):
    model = tiny_model("roberta", tokenizer)
    features = model.features(["apple"], ["apple 3 x1"])
    tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and tokens.count("</s>") == 3  # <s> q </s></s> c </s>
    long_query, long_code = " ".join(WORDS * 3), " ".join(WORDS * 20)
    ids = model.features([long_query], [long_code])["input_ids"][0].tolist()
    assert len(ids) == TINY["max_len"]
    first_sep = ids.index(tokenizer.sep_token_id)
    assert first_sep - 1 == TINY["max_query_len"]  # the query is cut to max_query_len tokens
    assert ids[1:first_sep] == tokenizer(long_query, add_special_tokens=False)["input_ids"][:8]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_save_load_same_scores(arch, tokenizer, tmp_path):
    model = tiny_model(arch, tokenizer, seed=1)
    queries, codes = columns(synthetic(9, 2))
    before = model.score_pairs(queries, codes, batch_size=4)
    assert np.isfinite(before).all() and np.ptp(before) > 0
    model.save(tmp_path / "ckpt")
    model.save(tmp_path / "ckpt")  # replacing an existing checkpoint
    files = sorted(p.relative_to(tmp_path / "ckpt").as_posix() for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    assert "cross.json" in files and "model/model.safetensors" in files and "model/tokenizer.json" in files
    assert ("head.safetensors" in files) == (arch == "codet5p-embedding")
    assert not [f for f in files if f.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle"))], files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temporary or old folder left
    loaded = CrossEncoder.load(tmp_path / "ckpt")
    assert loaded.config() == model.config()
    np.testing.assert_allclose(loaded.score_pairs(queries, codes, batch_size=3), before, atol=1e-5)
    if arch != "codet5p-embedding":
        config = json.loads((tmp_path / "ckpt" / "model" / "config.json").read_text())
        assert config["id2label"] == {"0": "no_match", "1": "match"}
    # same seed, same initial weights
    np.testing.assert_allclose(tiny_model(arch, tokenizer, seed=1).score_pairs(queries, codes), before, atol=1e-6)


def test_params_and_regimes(tokenizer):
    assert LABELS == ("no_match", "match")
    assert set(CROSS_MODELS) >= {"roberta", "codebert", "codet5p-110m-embedding"}
    gecs = {name: CrossTrainConfig.gecs(name) for name in ("roberta", "codebert", "codet5p-110m-embedding")}
    assert [(c.lr, c.epochs) for c in gecs.values()] == [(2e-5, 5), (1e-5, 8), (2e-5, 10)]  # GeCS Table 4
    assert all((c.batch_size, c.weight_decay, c.optimizer, c.schedule) == (32, 0.01, "adamw", "linear_decay")
               for c in gecs.values())  # fmt: skip
    assert all(cross_params(name)["max_len"] == 512 for name in CROSS_MODELS)
    assert cross_params("codet5p-110m-embedding")["architecture_kind"] == "codet5p-embedding"
    with pytest.raises(ValueError, match="did you mean 'max_len'"):
        cross_params("roberta", max_length=10)
    with pytest.raises(KeyError, match="Did you mean 'codebert'"):
        cross_params("codebret")
    with pytest.raises(ValueError, match="positions"):
        CrossEncoder.from_config(tiny_config("roberta", len(tokenizer)), tokenizer, {"max_len": 512})
    with pytest.raises(ValueError, match="unknown training option"):
        CrossTrainConfig.from_dict({"lr": 1e-5, "loss": "ce"})
    with pytest.raises(ValueError, match="keep"):
        CrossTrainConfig(keep="first")


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotAvailableError) as info:
        CrossEncoder.from_pretrained(cross_params("codebert"))
    assert "microsoft/codebert-base" in str(info.value) and "HF_HOME" in str(info.value)
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        CrossEncoder.from_pretrained(cross_params("roberta", model_id=str(tmp_path / "nowhere")))
    with pytest.raises(FileNotFoundError, match=r"cross\.json"):
        CrossEncoder.load(tmp_path)


# --------------------------------------------------------------------------------------- ranking
class _TableModel:
    """Stands in for a cross-encoder: the score of a pair is looked up in a table."""

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        self.table = table

    def score_pairs(self, queries, codes, batch_size=64, progress=False) -> np.ndarray:
        return np.array([self.table[pair] for pair in zip(queries, codes, strict=True)])


def test_rank_candidates_ties_count_against_the_model():
    codes = ["c0", "c1", "c2", "c3"]
    table = {
        ("a", "c0"): 2.0, ("a", "c1"): 1.0, ("a", "c2"): 2.0, ("a", "c3"): 0.0,  # tie with the answer
        ("b", "c0"): -1.0, ("b", "c1"): 3.0, ("b", "c2"): 0.5, ("b", "c3"): 0.1,  # answer on top
        ("c", "c0"): 0.0, ("c", "c1"): float("nan"), ("c", "c2"): 1.0, ("c", "c3"): 1.0,  # NaN answer: last
    }  # fmt: skip
    candidates = np.array([[1, 0, 2, 3], [3, 2, 1, 0], [2, 1, 0, 3]])
    ranks, scores = rank_candidates_cross(_TableModel(table), ["a", "b", "c"], codes, candidates, [1, 2, 1])
    assert ranks.tolist() == [2, 1, 4]
    assert scores.shape == (3, 4) and scores[0].tolist() == [1.0, 2.0, 2.0, 0.0]
    ranks_scalar, _ = rank_candidates_cross(_TableModel(table), ["a", "b"], codes, candidates[:2], 0)
    assert ranks_scalar.tolist() == [3, 3]  # a: c1 (1.0) below c0 and c2; b: c3 (0.1) below c2 and c1
    with pytest.raises(ValueError, match="answer_pos"):
        rank_candidates_cross(_TableModel(table), ["a"], codes, candidates[:1], 4)


def test_rank_candidates_with_a_model(tokenizer):
    model = tiny_model("roberta", tokenizer)
    queries, codes = columns(synthetic(6, 9))
    candidates = np.array([np.roll(np.arange(6), -i)[:4] for i in range(6)])  # the answer first
    ranks, scores = rank_candidates_cross(model, queries, codes, candidates, 0, batch_size=5)
    for i in range(6):
        row = model.score_pairs([queries[i]] * 4, [codes[j] for j in candidates[i]])
        np.testing.assert_allclose(scores[i], row, atol=1e-5)
        assert ranks[i] == rank_of_correct(scores[i], 0)


# --------------------------------------------------------------------------------------- training
def learnable_config(**overrides) -> CrossTrainConfig:
    """A regime the tiny model learns the synthetic task with."""
    base = {"lr": 1e-3, "epochs": 8, "batch_size": 32, "mixed_precision": "no", "seed": 0, "valid_batch_size": 64}
    return CrossTrainConfig(**(base | overrides))


def test_training_learns_the_matching_task(tokenizer, tmp_path):
    """Checked by hand over 10 model seeds x 3 training seeds: best validation accuracy 0.92-0.965 after
    8 epochs (narrower 32-wide networks, or the 0.02 init, often stay at chance for hundreds of steps)."""
    model = tiny_model("roberta", tokenizer, init=0.2, hidden=64, heads=4)
    train, valid = synthetic(400, 0), synthetic(100, 1)
    result = train_cross(model, train, valid, learnable_config(), tmp_path / "run", progress=False)
    assert result.stop_reason == "epochs" and result.steps == 8 * 25 and result.n_train_pairs == 800
    assert result.best_accuracy >= 0.85, result.history  # chance: 0.5; ceiling ~0.97 (shared words)
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["best_accuracy"] == result.best_accuracy and len(record["history"]) == 8
    assert record["config"]["lr"] == 1e-3 and record["model"]["max_len"] == TINY["max_len"]
    assert record["samples_per_second"] > 0 and record["train_seconds"] >= record["validation_seconds"]
    best = CrossEncoder.load(tmp_path / "run" / "best")
    valid_q, valid_c, valid_y = matching_pairs(*columns(valid), seed=42)
    assert matching_accuracy(best, valid_q, valid_c, valid_y) == pytest.approx(result.best_accuracy)


def test_training_is_deterministic(tokenizer, tmp_path):
    train, valid = synthetic(96, 3), synthetic(24, 4)
    config = learnable_config(epochs=2, validations_per_epoch=2, grad_accum=2)
    runs = []
    for name in ("a", "b"):
        model = tiny_model("roberta", tokenizer, dropout=0.1)  # dropout masks come from the seed too
        result = train_cross(model, train, valid, config, tmp_path / name, progress=False)
        runs.append((result, model.score_pairs(*columns(valid))))
    (first, scores_a), (second, scores_b) = runs
    assert [h["accuracy"] for h in first.history] == [h["accuracy"] for h in second.history]
    assert [h["loss"] for h in first.history] == [h["loss"] for h in second.history]
    np.testing.assert_array_equal(scores_a, scores_b)
    other = tiny_model("roberta", tokenizer, dropout=0.1)
    train_cross(other, train, valid, replace(config, seed=1), tmp_path / "c", progress=False)
    assert not np.allclose(other.score_pairs(*columns(valid)), scores_a)  # the seed orders the batches


def test_gradient_accumulation_is_the_same_step(tokenizer, tmp_path):
    """grad_accum splits the batch of 32 for memory; the mean loss, hence the step, is the same."""
    train, valid = synthetic(64, 3), synthetic(16, 4)
    scores = []
    for accumulate in (1, 4):
        model = tiny_model("roberta", tokenizer)
        config = learnable_config(epochs=1, max_steps=3, grad_accum=accumulate)
        train_cross(model, train, valid, config, tmp_path / str(accumulate), progress=False)
        scores.append(model.score_pairs(*columns(valid)))
    np.testing.assert_allclose(scores[0], scores[1], atol=1e-4)


def test_micro_batches_split_the_global_batch():
    batch = np.arange(32)
    parts = [micro_batches(batch, 2, 2, rank) for rank in range(2)]
    assert [p.tolist() for p in parts[0]] == [list(range(0, 8)), list(range(16, 24))]
    assert [p.tolist() for p in parts[1]] == [list(range(8, 16)), list(range(24, 32))]


# --------------------------------------------------------------------------------------- pretrained MiniLM
def test_minilm_as_a_cross_encoder(minilm_dir, tmp_path):
    """The packaged all-MiniLM-L6-v2 loads as BertForSequenceClassification (pretrained encoder and pooler,
    a new 2-way head) and fine-tunes through the loop."""
    model = CrossEncoder.from_pretrained(cross_params("minilm"), seed=0)
    assert type(model.network).__name__ == "BertForSequenceClassification"
    assert model.network.config.id2label == {0: "no_match", 1: "match"}
    features = model.features(["sum of a list"], ["def total(xs):\n    return sum(xs)"])
    assert features["token_type_ids"][0].tolist().count(1) > 0  # BERT's segment ids mark the code
    twin = CrossEncoder.from_pretrained(cross_params("minilm"), seed=0)  # the new head is seeded
    queries, codes = columns(synthetic(8, 0))
    np.testing.assert_allclose(twin.score_pairs(queries, codes), model.score_pairs(queries, codes), atol=1e-6)
    config = CrossTrainConfig.gecs("minilm", batch_size=8, max_steps=1, mixed_precision="no")
    before = model.network.bert.encoder.layer[0].attention.self.query.weight.detach().clone()
    result = train_cross(model, synthetic(8, 0), synthetic(4, 1), config, tmp_path / "run", progress=False)
    assert result.steps == 1 and result.stop_reason == "max_steps" and result.best_accuracy is not None
    assert not torch.equal(before, model.network.bert.encoder.layer[0].attention.self.query.weight)
    assert CrossEncoder.load(tmp_path / "run" / "best").config() == model.config()


def test_cross_encoder_through_the_cli_train_index_evaluate(tokenizer, tmp_path, monkeypatch):
    """A registered cross-encoder (roberta-cross, its model_id pointed at a tiny local network) goes
    through `csbench train / index / evaluate`: gecs-100 ranks equal rank_candidates_cross on the
    saved checkpoint, matching is decided by the head (no threshold), and protocols that rank against
    the whole pool are left unevaluated with a note."""
    import json

    import yaml
    from test_training_pipeline import _config, _stdlib_pairs, _write_attacked

    from csbench.cli import main
    from csbench.evaluate.protocols import PROTOCOLS
    from csbench.evaluate.runner import CROSS_NOTE

    torch.set_num_threads(1)
    folder = tmp_path / "tiny-roberta"
    model = tiny_model("roberta", tokenizer, seed=0)
    model.network.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    frame = _stdlib_pairs(["argparse", "inspect", "pathlib", "typing", "dataclasses", "tarfile", "zipfile"])
    _write_attacked(tmp_path, "no_comment", frame)

    def change(raw: dict) -> None:
        raw["grid"]["attacks"] = ["no_comment"]
        raw["grid"]["trained"] = {"models": ["roberta-cross"], "attacks": ["no_comment"], "losses": ["ce"]}
        raw["grid"]["trained"] |= {"seeds": [0], "inference": ["confused"]}
        raw["robustness"]["attacks"] = ["no_comment"]
        raw["models"]["roberta-cross"] = {
            "model_id": str(folder),
            "max_len": 128,
            "max_query_len": 16,
            "training": {"lr": 1e-3, "batch_size": 16, "epochs": 1, "mixed_precision": "no"},
        }
        raw["evaluation"] = {"protocols": ["full-corpus", "gecs-100", "matching"], "run_depth": 5}

    config = _config(tmp_path, change)
    assert yaml.safe_load(config.read_text())["models"]["roberta-cross"]["model_id"] == str(folder)
    monkeypatch.chdir(tmp_path)
    run = ["--config", str(config), "--dataset", "python-stdlib", "--attack", "no_comment", "--model", "roberta-cross"]
    run += ["--loss", "ce", "--seed", "0"]
    assert main(["--quiet", "train", *run]) == 0
    record = json.loads(Path("checkpoints/python-stdlib/no_comment/roberta-cross/ce/0/train.json").read_text())
    assert record["steps"] > 0 and record["best_accuracy"] is not None
    for command in ("index", "evaluate"):
        assert main(["--quiet", command, *run, "--inference", "confused"]) == 0
    out = Path("results/runs/python-stdlib/no_comment/roberta-cross/ce/0/confused")
    metrics = json.loads((out / "metrics.json").read_text())
    scores = {(s["protocol"], s["metric"]): s["value"] for s in metrics["scores"]}
    test = pd.read_parquet("data/attacked/python-stdlib/no_comment/test.parquet")
    assert scores[("full-corpus", "n_queries")] == 0 and scores[("full-corpus", "mrr")] is None
    assert CROSS_NOTE in metrics["protocols"]["full-corpus"]["note"]
    assert scores[("gecs-100", "n_queries")] == len(test)
    assert scores[("matching", "threshold")] is None and 0.0 <= scores[("matching", "accuracy")] <= 1.0
    # gecs-100 ranks: the same as scoring the plan's candidates with the checkpoint directly
    plan = PROTOCOLS.get("gecs-100").plan(test["id"].tolist())
    trained = CrossEncoder.load(Path("checkpoints/python-stdlib/no_comment/roberta-cross/ce/0/best"))
    ranks, _ = rank_candidates_cross(trained, test["query"].tolist(), test["code"].tolist(), plan.per_query, 0)
    ranks_file = pd.read_csv(out / "ranks.tsv", sep="\t")
    got = ranks_file[ranks_file["protocol"] == "gecs-100"].set_index("query_id")["rank"]
    assert [int(got[q]) for q in test["id"]] == [int(r) for r in ranks]
    matching = pd.read_csv(out / "matching.tsv", sep="\t")
    assert len(matching) == 2 * len(test) and matching["label"].sum() == len(test)
    assert ((matching["score"] > 0).astype(int) == matching["decision"]).all()  # the head decides


def test_the_matching_benchmark_compares_both_ways_on_one_split(tmp_path):
    """benchmarks/bench_cross_matching.py: each way's pairs and peak memory, and every pair compared."""
    import subprocess
    import sys

    records = synthetic(300, 7)
    split = tmp_path / "train.parquet"
    pd.DataFrame({"query": [q for q, _ in records], "code": [c for _, c in records], "language": "x"}).to_parquet(split)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_cross_matching.py"
    done = subprocess.run([sys.executable, str(script), "--split", str(split)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    for way in ("memory", "file"):
        assert re.search(rf"^  {way} +600 pairs +[\d.]+ CPU s  peak RSS +\d+ MiB$", done.stdout, re.M), done.stdout
    assert "600 pairs compared: 0 differ" in done.stdout
