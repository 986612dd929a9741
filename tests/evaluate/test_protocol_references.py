"""Every protocol is named with the script it reproduces (issue #23 item 7): in the registry, in
the study's summary.md and report page, in results.db, and in the protocol table of docs/protocols.md."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from test_results import _write_run

from csbench.evaluate.protocols import PROTOCOLS
from csbench.results.report import aggregate

README = Path(__file__).resolve().parents[2] / "docs" / "protocols.md"


@pytest.mark.parametrize("name", PROTOCOLS.names())
def test_every_protocol_names_its_reference(name: str) -> None:
    protocol = PROTOCOLS.get(name)
    assert protocol.reference, f"{name} has no reference script"
    assert protocol.label == f"{name} ({protocol.reference})"


def test_the_readme_table_has_a_row_for_every_protocol() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("| protocol | reference script (repo, path) |")
    table = text[start : text.index("\n\n", start)]
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z0-9-]+)` \|", table, flags=re.MULTILINE)}
    assert set(PROTOCOLS.names()) - {"id-chunks-1000"} <= rows, sorted(set(PROTOCOLS.names()) - rows)


def test_summary_report_and_database_name_each_protocol_with_its_reference(tmp_path: Path) -> None:
    run = _write_run(tmp_path, "python-stdlib", "none", {"full-corpus": [1, 2, 4], "csn-1000": [1, 1, 3]})
    out = tmp_path / "results"
    aggregate([run], out, "unit")
    csn = PROTOCOLS.get("csn-1000")
    assert csn.label == "csn-1000 (github/CodeSearchNet src/model_test.py)"
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert f"- `{csn.label}`: {csn.description}" in summary
    assert f"- `{PROTOCOLS.get('full-corpus').label}`:" in summary
    assert "gecs-100" not in summary  # only the study's own protocols
    page = next(out.rglob("summary.html")).read_text(encoding="utf-8")
    assert f"<code>{csn.label}</code>" in page
    with sqlite3.connect(out / "results.db") as con:
        rows = con.execute("SELECT protocol, reference, label FROM protocols ORDER BY protocol").fetchall()
        joined = con.execute(
            "SELECT DISTINCT p.reference FROM results r JOIN protocols p ON p.protocol = r.protocol "
            "WHERE r.protocol = 'csn-1000'"
        ).fetchall()
    con.close()
    assert rows == [
        ("csn-1000", csn.reference, csn.label),
        ("full-corpus", PROTOCOLS.get("full-corpus").reference, PROTOCOLS.get("full-corpus").label),
    ]
    assert joined == [(csn.reference,)]
