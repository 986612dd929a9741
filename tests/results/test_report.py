"""The report's figures (csbench.results.figures), the summary's page (csbench.results.report) and
the HTML report of `snakemake --report`, opened in headless Chromium.

The end-to-end test runs a small study through scripts/snakemake.sh (what `make run` calls: it ends
by writing results/studies/tiny/report.html), then drives Chromium over the DevTools protocol on a pipe (no
websocket library needed) with the network switched off: the report's own app must start, show
every figure it embeds (naturalWidth > 0 in the page), and every table page must have rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from test_drivers import TINY, _copy_project, _run, _set_overlay

from csbench.results.figures import (
    by_severity,
    figure_specs,
    model_label,
    severity_scores,
    training_histories,
    write_figures,
)
from csbench.results.report import summary_page
from csbench.results.tables import METRIC_LABELS, attacks_weighted, seed_means

CHROMIUM = shutil.which("chromium")
THESIS_ATTACKS = [
    "full_hash", "most_popular", "k_shift_dataset-64", "none", "random_permutation", "k_shift_snippet-64",
    "ordered_id", "no_comment", "k_shift_dataset-3", "k_shift_snippet-3", "translation", "advtest_normalize",
]  # fmt: skip


def _scores(rows: list[tuple]) -> pd.DataFrame:
    """A long scores frame as csbench.results.collect.collect returns it, from
    (dataset, attack, model, loss, seed, inference, protocol, metric, value) tuples."""
    columns = ["dataset", "attack", "model", "loss", "seed", "inference", "protocol", "metric", "value"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["run_id"] = frame[columns[:6]].astype(str).agg("/".join, axis=1)
    return frame.assign(study="unit", language="python", perturbation="none", ratio=0.0)


# ------------------------------------------------------------------------------------------ severity
def test_attacks_are_ordered_by_the_thesis_severity_questions() -> None:
    order = by_severity(THESIS_ATTACKS)
    assert order[:3] == ["none", "translation", "no_comment"]  # identifiers untouched
    within = {"k_shift_snippet-3", "k_shift_snippet-64", "random_permutation"}
    assert set(order[3:6]) == within  # identifiers stay in their snippet (question 1)
    assert order[6:8] == ["k_shift_dataset-3", "k_shift_dataset-64"]  # moved between snippets, by k (question 2)
    assert set(order[8:11]) == {"ordered_id", "advtest_normalize", "most_popular"}  # repeated names (question 3)
    assert order[-1] == "full_hash"
    # a composed attack is as severe as its most severe part
    assert by_severity(["ordered_id+translation", "k_shift_dataset-64"]) == [
        "k_shift_dataset-64",
        "ordered_id+translation",
    ]


def test_severity_scores_average_seeds_then_weight_datasets_by_their_queries() -> None:
    rows = []
    for dataset, n, mrrs in (("small", 100, (0.2, 0.4)), ("large", 300, (0.6, 0.6))):
        for seed, mrr in enumerate(mrrs):
            for attack, factor in (("none", 1.0), ("no_comment", 0.5)):
                base = (dataset, attack, "nbow", "ce", seed, "confused", "full-corpus")
                rows += [(*base, "mrr", mrr * factor), (*base, "n_queries", n)]
                rows.append((dataset, attack, "nbow", "ce", seed, "confused", "csn-1000", "mrr", 0.99))
    rows.append(("small", "none", "bm25", "none", 0, "zero_shot", "full-corpus", "mrr", float("nan")))
    rows.append(("small", "none", "bm25", "none", 0, "zero_shot", "full-corpus", "n_queries", 100))
    scores = severity_scores(_scores(rows), "full-corpus")
    # small: mean over seeds 0.3, large: 0.6; weighted 1:3 -> 0.525 (not the plain mean 0.45)
    assert scores["mrr"]["nbow (confused)"]["none"] == pytest.approx(0.525)
    assert scores["mrr"]["nbow (confused)"]["no_comment"] == pytest.approx(0.2625)
    assert "bm25" not in scores["mrr"]  # a run without a value is left out, not drawn as 0
    assert set(scores) == {"mrr"}  # only the metrics the runs have


def test_severity_figure_shows_the_numbers_of_thesis_table_5_16() -> None:
    """2 datasets x 2 seeds x 3 attacks, two models: each point of the severity figure is the cell
    of attacks_weighted (the size-weighted table) for that model, attack and metric."""
    rows = []
    for d, (dataset, n) in enumerate((("small", 120), ("large", 480))):
        for a, attack in enumerate(("no_comment", "k_shift_dataset-3", "full_hash")):
            for seed in (0, 1):
                for model, loss, inference in (("nbow", "ce", "confused"), ("bm25", "none", "zero_shot")):
                    base = (dataset, attack, model, loss, seed, inference, "full-corpus")
                    score = 0.9 - 0.2 * a - 0.1 * d + 0.05 * seed + (0.03 if model == "bm25" else 0.0)
                    rows += [
                        (*base, m, score * f) for m, f in (("mrr", 1.0), ("r@1", 0.7), ("r@5", 1.1), ("r@10", 1.2))
                    ]
                    rows.append((*base, "n_queries", n))
    scores = _scores(rows)
    table = attacks_weighted(seed_means(scores))
    figure = severity_scores(scores, "full-corpus")
    assert set(figure) == {"mrr", "r@1", "r@5", "r@10"}
    compared = 0
    for keys, cells in table.rows:
        row = dict(zip(table.key_names, keys, strict=True))
        label = model_label(row["model"], row.get("loss", "none"), row["inference"], several_losses=False)
        for (attack, metric_label), cell in zip(table.columns, cells, strict=True):
            metric = next(m for m, shown in METRIC_LABELS.items() if shown == metric_label)
            assert figure[metric][label][attack] == cell.mean  # the same numbers, not merely close
            compared += 1
    assert compared == 2 * 3 * 4  # models x attacks x metrics
    # and not a plain mean: the large dataset weighs four times the small one
    plain = (0.9 + 0.025 + 0.8 + 0.025) / 2
    assert figure["mrr"]["nbow (confused)"]["no_comment"] == pytest.approx(0.9 * 0.2 + 0.8 * 0.8 + 0.025)
    assert figure["mrr"]["nbow (confused)"]["no_comment"] != pytest.approx(plain)


def test_figure_specs_name_one_severity_figure_per_protocol_and_one_training_figure_per_configuration() -> None:
    trainings = ["d/no_comment/nbow/ce/1", "d/no_comment/nbow/ce/0", "d/none/nbow/ce/0"]
    specs = figure_specs(["none", "no_comment"], ["full-corpus", "csn-1000"], trainings)
    assert [s.name for s in specs] == [
        "severity/full-corpus",
        "severity/csn-1000",
        "training/d/no_comment/nbow/ce",
        "training/d/none/nbow/ce",
    ]
    assert "`full-corpus`" in specs[0].caption and "none < no_comment" in specs[0].caption
    assert "seed (0, 1)" in specs[2].caption
    # one attack: nothing to order by severity
    assert [s.name for s in figure_specs(["no_comment"], ["full-corpus"], [])] == []


def test_write_figures_draws_every_spec_and_removes_figures_of_an_earlier_study(tmp_path: Path) -> None:
    rows = []
    for attack in ("none", "no_comment", "full_hash"):
        base = ("d", attack, "bm25", "none", 0, "zero_shot", "full-corpus")
        rows += [(*base, "mrr", 0.5), (*base, "r@1", 0.4), (*base, "n_queries", 10)]
        rows.append(("d", attack, "bm25", "none", 0, "zero_shot", "matching", "accuracy", 0.7))  # no ranking
    trainings = {}
    for seed in (0, 1):
        history = [{"epoch": e, "step": 10 * e, "mrr": 0.1 * e + 0.01 * seed, "seconds": 1.0} for e in (1, 2, 3)]
        trainings[f"d/none/nbow/ce/{seed}"] = tmp_path / f"train{seed}.json"
        trainings[f"d/none/nbow/ce/{seed}"].write_text(json.dumps({"history": history}))
    stale = tmp_path / "out/figures/training/old/none/nbow/ce.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"not a figure")

    written = write_figures(tmp_path / "out", _scores(rows), trainings)

    figures = tmp_path / "out/figures"
    assert sorted(p.relative_to(figures).as_posix() for p in written) == [
        "severity/full-corpus.png",
        "training/d/none/nbow/ce.png",
    ]
    assert not stale.exists()
    for path in written:
        height, width, _ = matplotlib.image.imread(path).shape
        assert width > 300 and height > 200
    index = json.loads((figures / "index.json").read_text())
    assert [entry["file"] for entry in index] == ["severity/full-corpus.png", "training/d/none/nbow/ce.png"]
    assert histories_seeds(trainings) == {"d/none/nbow/ce": [0, 1]}


def histories_seeds(trainings: dict[str, Path]) -> dict[str, list[int]]:
    records = {path: json.loads(file.read_text()) for path, file in trainings.items()}
    return {c: sorted(h) for c, h in training_histories(records).items()}


def test_write_figures_fails_on_a_missing_training_record(tmp_path: Path) -> None:
    scores = _scores([("d", "none", "bm25", "none", 0, "zero_shot", "full-corpus", "mrr", 0.5)])
    with pytest.raises(FileNotFoundError, match="csbench train"):
        write_figures(tmp_path, scores, {"d/none/nbow/ce/0": tmp_path / "missing.json"})


# -------------------------------------------------------------------------------------- summary page
def test_summary_page_shows_every_row_with_na_offline() -> None:
    frame = pd.DataFrame({"model": ["bm25", "nbow"], "mrr": [0.123456, None]})
    page = summary_page(frame, "Scores & more", "Under `full-corpus`, in %.")
    assert "<title>Scores &amp; more</title>" in page and "<h1>Scores &amp; more</h1>" in page
    assert "<p>Under <code>full-corpus</code>, in %.</p>" in page
    assert "0.1235" in page and "n/a" in page
    assert page.count("<tr") == 3  # header and two rows
    assert "http" not in page  # nothing fetched from the network


# ------------------------------------------------------------------------- the report, in Chromium
class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
    commands on its fd 3, replies on fd 4, NUL-terminated JSON), with name resolution off."""

    def __init__(self, profile: Path, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self.events: list[dict] = []
        self._buffer = b""
        self._next_id = 0
        commands_r, self._commands = os.pipe()
        self._replies, replies_w = os.pipe()

        def at_fds_3_and_4() -> None:  # in the child: dup first, fd 3 may be one of the pipes
            read, write = os.dup(commands_r), os.dup(replies_w)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.process = subprocess.Popen(
            [
                str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}", "about:blank",
            ],
            preexec_fn=at_fds_3_and_4, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(commands_r)
        os.close(replies_w)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buffer:
                ready, _, _ = select.select([self._replies], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise TimeoutError(f"chromium did not answer {method} in {self.timeout:.0f} s")
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def evaluate_in(self, url: str, expression: str) -> object:
        """Open ``url`` in a new tab and return the value of ``expression`` (a promise is awaited)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Network.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        params = {"expression": expression, "awaitPromise": True, "returnByValue": True}
        result = self.send("Runtime.evaluate", params, session=session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"]["value"]

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)


# Waits for the report's app (the global `app` its React root sets, and `results`, the embedded
# files), then shows each image through the app's own view, as a click on it does, and reads the
# <img> it renders; parses each HTML result (the table pages) and counts its body rows.
REPORT_PROBE = r"""
(async () => {
  const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
  for (let i = 0; i < 600 && !(document.readyState === "complete" && typeof app !== "undefined"); i++) await sleep(100);
  if (typeof app === "undefined" || typeof results === "undefined") {
    return {error: "the report's app did not start: " + document.body.innerText.slice(0, 300)};
  }
  const out = {images: {}, tables: {}, captions: {}, categories: Object.keys(categories)};
  for (const [path, entry] of Object.entries(results)) {
    out.captions[path] = entry.caption.replace(/<[^>]+>/g, "").trim();
    if (entry.mime_type.startsWith("image/")) {
      app.setView({content: "img", contentPath: entry.data_uri, resultPath: path});
      let img;
      for (let i = 0; i < 200 && !img; i++) {
        await sleep(25);
        img = [...document.querySelectorAll("#app img")].find(node => node.getAttribute("src") === entry.data_uri);
      }
      if (!img) { out.images[path] = -1; continue; }
      try { await img.decode(); } catch (err) { /* naturalWidth stays 0 */ }
      out.images[path] = img.naturalWidth;
    } else if (entry.mime_type === "text/html") {
      const page = await (await fetch(entry.data_uri)).text();
      const doc = new DOMParser().parseFromString(page, "text/html");
      out.tables[path] = doc.querySelectorAll("table").length ? doc.querySelectorAll("table tbody tr").length : -1;
    }
  }
  return out;
})()
"""
# A small study that has every kind of figure: three attacks (severity), BM25 and NBoW trained on
# no_comment with two seeds (training curves, a seed heatmap), and the tiny study's robustness grid.
# (seed stability compares top-k lists no deeper than the ranks each run keeps: run_depth 10)
REPORT_STUDY = {
    "grid": {"trained": {"attacks": ["no_comment"], "seeds": [0, 1], "inference": ["confused"]}},
    "stability": {"k": 10},
}
# The files the report must hold: every figure and table page the study wrote.
REPORT_FILES = (
    "results/studies/tiny/figures/**/*.png",
    "results/studies/tiny/tables/*.html",
    "results/robustness/**/robustness.png",
    "results/studies/tiny/stability/**/heatmap.png",
)


@pytest.fixture(scope="module")
def report_study(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The study run as `make run` runs it (scripts/snakemake.sh), which ends with the report."""
    project = _copy_project(tmp_path_factory.mktemp("report"))
    _set_overlay(project, REPORT_STUDY)
    started = time.monotonic()
    result = _run(["bash", "scripts/snakemake.sh", "--cores", "2", "--configfile", TINY], project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"project": project, "seconds": time.monotonic() - started}


@pytest.mark.e2e
def test_make_run_writes_a_report_with_every_figure_and_table(report_study: dict) -> None:
    project = report_study["project"]
    report = project / "results/studies/tiny/report.html"
    assert report.is_file(), "scripts/snakemake.sh did not write results/studies/tiny/report.html"
    on_disk = {p.relative_to(project).as_posix() for pattern in REPORT_FILES for p in project.glob(pattern)}
    # below the study's folder (tables, figures/<kind>, stability) or results/ (robustness)
    parts = [path.removeprefix("results/studies/tiny/").removeprefix("results/").split("/") for path in on_disk]
    kinds = {part[1] if part[0] == "figures" else part[0] for part in parts}
    # the study has every kind of figure, and tables (summary and the papers')
    assert kinds >= {"severity", "training", "tables", "robustness", "stability"}, kinds
    assert (project / "results/studies/tiny/tables/summary.html").is_file()
    text = report.read_text()
    assert all(f'"{path}"' in text for path in on_disk), "a figure or table is missing from the report"


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian: apt-get install chromium)")
def test_report_shows_every_figure_and_table_in_headless_chromium_offline(report_study: dict, tmp_path: Path) -> None:
    project = report_study["project"]
    browser = Chromium(tmp_path / "chromium-profile")
    try:
        seen = browser.evaluate_in((project / "results/studies/tiny/report.html").as_uri(), REPORT_PROBE)
        requested = browser.requested_urls()
    finally:
        browser.close()
    assert "error" not in seen, seen["error"]
    on_disk = {p.relative_to(project).as_posix() for pattern in REPORT_FILES for p in project.glob(pattern)}
    assert set(seen["images"]) | set(seen["tables"]) == on_disk
    assert {path: width for path, width in seen["images"].items() if width <= 0} == {}
    assert {path: rows for path, rows in seen["tables"].items() if rows <= 0} == {}
    assert {path: c for path, c in seen["captions"].items() if not c} == {}  # every result has a caption
    protocol_captions = [c for path, c in seen["captions"].items() if "/severity/" in path or "/robustness/" in path]
    assert protocol_captions and all("full-corpus" in c or "csn-1000" in c for c in protocol_captions)
    assert set(seen["categories"]) >= {"Tables", "Attack severity (thesis Fig. 5.1)", "Seed stability (COBE Fig. 5)"}
    # offline: the page loaded nothing but itself and its embedded data
    assert [url for url in requested if not url.startswith(("file:", "data:"))] == []
