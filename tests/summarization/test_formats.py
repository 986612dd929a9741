"""What a summarization model is fed (csbench.summarization.formats), against CodeXGLUE code-to-text's
``read_examples`` (tests/reference/codexglue_read_examples.py) on the real CodeXGLUE Ruby split."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from reference.codexglue_read_examples import read_examples

from csbench.datasets import DATASETS
from csbench.datasets.base import SkipReport
from csbench.datasets.releases._formats import text_field
from csbench.summarization.formats import (
    SOURCE_FORMATS,
    codexglue_source,
    codexglue_source_from_tokens,
    codexglue_target,
    codexglue_target_from_tokens,
    source_text,
    source_tokens,
)


def _jsonl(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def test_the_token_joins_are_read_examples(tmp_path: Path) -> None:
    items = [
        {
            "code_tokens": ["def", "f", "(", ")", ":", '"a\nb"', "  ", "x\n"],
            "docstring_tokens": ["Line", "one\n", "two"],
        },
        {"code_tokens": ["\n", "é", "\u00a0", "ü"], "docstring_tokens": ["\nlead", "", "trail\n", " "]},
        {"code_tokens": [], "docstring_tokens": []},
    ]
    examples = read_examples(_jsonl(tmp_path / "x.jsonl", items))
    assert [codexglue_source_from_tokens(i["code_tokens"]) for i in items] == [e.source for e in examples]
    assert [codexglue_target_from_tokens(i["docstring_tokens"]) for i in items] == [e.target for e in examples]
    assert examples[0].source == 'def f ( ) : "a b" x' and examples[0].target == "Line one two"


def test_the_target_of_a_prepared_query_equals_the_target_of_its_tokens() -> None:
    """A prepared record's query is ``' '.join(docstring_tokens).strip()`` (csn_record): for random
    token lists mixing spaces, line breaks and Unicode white space, the two targets are equal."""
    rng = random.Random(25)
    alphabet = ["a", "b", "\n", " ", "\u00a0", "\t", "é", "", "\r\n", "\u2028"]
    for _ in range(3000):
        tokens = ["".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(rng.randint(0, 6))]
        query = text_field({"docstring_tokens": tokens}, "docstring_tokens").strip()  # type: ignore[union-attr]
        assert codexglue_target(query) == codexglue_target_from_tokens(tokens), tokens


def test_source_tokens_keep_strings_and_comments_whole() -> None:
    java = 'public int f(int a) {\n  // add "one"\n  return a + 1; /* done */\n}'
    assert source_tokens(java, "java") == [
        "public", "int", "f", "(", "int", "a", ")", "{", '// add "one"', "return", "a", "+", "1", ";",
        "/* done */", "}",
    ]  # fmt: skip
    python = 'def f(x):\n    """Doc."""\n    return "a  b"  # why\n'
    # the function's docstring left out (as CodeSearchNet's code_tokens), white space collapsed in strings too
    assert codexglue_source(python, "python") == 'def f ( x ) : return "a b" # why'
    nested = 'def f():\n    x = 1\n    "not a docstring"\n    def g():\n        """Inner."""\n'
    assert source_tokens(nested, "python")[-5:] == ["g", "(", ")", ":", '"""Inner."""']
    assert '"not a docstring"' in source_tokens(nested, "python")
    assert source_tokens("fn  main()  {}", "no-such-language") == ["fn", "main()", "{}"]


def test_source_text_formats() -> None:
    assert SOURCE_FORMATS == ("raw", "codexglue")
    code = "def f(x):\n    return x\n"
    assert source_text(code, "python", "raw") == code
    assert source_text(code, "python", "codexglue") == "def f ( x ) : return x"
    with pytest.raises(ValueError, match="raw, codexglue"):
        source_text(code, "python", "tokens")


def test_on_codexglue_ruby_targets_are_exact_and_sources_mostly(shared_data: Path, tmp_path: Path) -> None:
    """The ``csn-filtered-ruby`` reader's records of CodeXGLUE's Ruby test and valid files: every
    ``codexglue_target(query)`` is ``read_examples``'s target; ``codexglue_source(code)`` is its
    source for 2,253 of 2,661 (the rest: regex literals and ``&block`` / ``*args`` split otherwise by
    CodeSearchNet's 2019 grammar); the record's ``code`` itself is never CodeXGLUE's source."""
    raw = tmp_path / "raw"
    (raw / "dataset" / "ruby").mkdir(parents=True)
    fed = {}
    for split in ("test", "valid"):
        source = shared_data / "codesearchnet" / "ruby" / f"{split}.jsonl"
        (raw / "dataset" / "ruby" / f"{split}.jsonl").symlink_to(source)
        urls = [json.loads(line)["url"] for line in source.open(encoding="utf-8")]
        fed.update(zip(urls, read_examples(source), strict=True))
    records = list(DATASETS.get("csn-filtered-ruby").reader(raw, {"splits": ["test", "valid"]}, SkipReport()))
    assert len(records) == len(fed) == 2661
    assert all(codexglue_target(r["query"]) == fed[r["id"]].target for r in records)
    assert sum(r["query"] == fed[r["id"]].target for r in records) == 2661  # already equal as prepared
    assert sum(r["code"] == fed[r["id"]].source for r in records) == 0
    same = sum(codexglue_source(r["code"], "ruby") == fed[r["id"]].source for r in records)
    assert same == 2253, same


def test_on_codesearchnet_python_the_docstring_is_left_out(shared_data: Path) -> None:
    """AdvTest's training sample (CodeSearchNet Python records): ``codexglue_source(code)`` is the
    ``run.py`` source of their ``code_tokens`` for 93 of 100 (the rest: ``**`` split into ``* *``)."""
    items = [json.loads(line) for line in (shared_data / "advtest" / "train_sample.jsonl").open(encoding="utf-8")]
    released = [codexglue_source_from_tokens(item["code_tokens"]) for item in items]
    ours = [codexglue_source(item["code"], "python") for item in items]
    assert sum(a == b for a, b in zip(released, ours, strict=True)) == 93
    assert all("**" in item["code"] for item, a, b in zip(items, released, ours, strict=True) if a != b)
    assert all(item["docstring"].strip().split()[0] not in b.split()[:8] for item, b in zip(items, ours, strict=True))
