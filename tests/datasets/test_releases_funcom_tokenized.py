"""Funcom's ``query: tokenized``: the release's tokenised comment (``funcom_tokenized/<split>/comments.<split>``,
``<s>`` / ``</s>`` removed) is the reference summary, the standard target of the Funcom papers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_releases_funcom import traced_read, write_funcom

from csbench.datasets import DATASETS
from csbench.datasets.base import ReaderError, SkipReport
from csbench.datasets.releases.funcom import read_funcom, split_file, tokenized_comment


def test_tokenized_comment_drops_only_the_sentence_markers() -> None:
    assert tokenized_comment(" <s> returns the  sum . </s>\n") == "returns the sum ."
    assert tokenized_comment("returns the sum .") == "returns the sum ."
    assert tokenized_comment("<s> </s>") == "" and tokenized_comment("") == ""
    assert tokenized_comment("<s> compares <s> tags </s> of xml </s>") == "compares <s> tags </s> of xml"


def test_the_tokenized_query_keeps_the_records_of_the_other_modes(tmp_path: Path) -> None:
    write_funcom(tmp_path, 60)
    summary = list(read_funcom(tmp_path, {}, SkipReport()))
    tokenized = list(read_funcom(tmp_path, {"query": "tokenized"}, SkipReport()))
    assert [r["id"] for r in tokenized] == [r["id"] for r in summary]
    assert [r["code"] for r in tokenized] == [r["code"] for r in summary]  # the raw method, attackable
    first = tokenized[0]
    assert first["id"] == "funcom:100000" and first["split"] == "test"
    assert first["query"] == "returns the value plus 0 ."
    assert first["docstring"].startswith("/**")  # the Javadoc stays the docstring
    assert all(r["query"] == f"returns the value plus {int(r['id'][7:]) - 100000} ." for r in tokenized)


def test_a_comment_line_without_tokens_is_a_counted_skip(tmp_path: Path) -> None:
    write_funcom(tmp_path, 40)
    path = tmp_path / split_file("test")
    lines = path.read_text().splitlines()
    lines[1] = lines[1].split("\t")[0] + "\t<s> </s>"  # fid 100020: nothing between the markers
    path.write_text("\n".join(lines) + "\n")
    report = SkipReport()
    records = list(read_funcom(tmp_path, {"query": "tokenized"}, report))
    assert "funcom:100020" not in {r["id"] for r in records} and len(records) == 39
    assert report.counts == {"empty query": 1}
    assert len(list(read_funcom(tmp_path, {}, SkipReport()))) == 40  # the Javadoc summary is not empty


def test_an_unknown_query_mode_names_the_choices(tmp_path: Path) -> None:
    write_funcom(tmp_path, 3)
    with pytest.raises(ReaderError, match="summary, comment, tokenized"):
        list(read_funcom(tmp_path, {"query": "tokens"}, SkipReport()))
    option = next(o for o in DATASETS.get("funcom").options if o.name == "query")
    assert option.problem("tokenized") is None and option.default == "summary"


def test_tokenized_mode_streams_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import test_releases_funcom

    monkeypatch.setattr(
        test_releases_funcom, "read_funcom", lambda root, _, report: read_funcom(root, {"query": "tokenized"}, report)
    )
    write_funcom(tmp_path / "small", 5_000)
    write_funcom(tmp_path / "large", 50_000)
    n_small, _, peak_small, _ = traced_read(tmp_path / "small")
    n_large, _, peak_large, _ = traced_read(tmp_path / "large")
    assert (n_small, n_large) == (5_000, 50_000)
    assert peak_large < 1.5 * peak_small + 2**20, (peak_small, peak_large)
