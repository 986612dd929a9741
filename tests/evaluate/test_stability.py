"""Seed stability (csbench.evaluate.stability, COBE V-E) on hand-computed rankings and synthetic runs."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from csbench.evaluate.robustness import robustness_summary
from csbench.evaluate.stability import (
    check_depth,
    compare_rankings,
    ir_auc_spread,
    read_trec,
    seed_stability,
    spread,
    topk_overlap,
    topk_spearman,
)
from csbench.results.plots import plot_seed_heatmap

DISJOINT_20 = -2400 / 2799  # -6k²/(7k²-1) at k = 20, derived in topk_spearman's docstring

# ------------------------------------------------------------------------------ one query


def test_spearman_identical_and_reversed() -> None:
    items = [f"d{i}" for i in range(20)]
    assert topk_spearman(items, items) == pytest.approx(1.0)
    assert topk_spearman(items, items[::-1]) == pytest.approx(-1.0)


def test_spearman_partial_overlap_by_hand() -> None:
    # union a b c d; ranks (1, 2, 3, 4) and (1, 4, 2, 3): b is missing from the second list, so it
    # takes the only rank left, 4. No ties: rho = 1 - 6·Σd² / (n(n²-1)) = 1 - 6·6 / 60 = 0.4
    assert topk_spearman(["a", "b", "c"], ["a", "c", "d"]) == pytest.approx(0.4)


def test_spearman_disjoint_by_hand() -> None:
    # k = 2: ranks (1, 2, 3.5, 3.5) and (3.5, 3.5, 1, 2): deviations from 2.5 give
    # covariance -4 and variance 4.5 each, so rho = -4 / 4.5
    assert topk_spearman(["a", "b"], ["c", "d"]) == pytest.approx(-8 / 9)
    a, b = [f"a{i}" for i in range(20)], [f"b{i}" for i in range(20)]
    assert topk_spearman(a, b) == pytest.approx(DISJOINT_20)


def test_spearman_half_overlap_by_hand() -> None:
    # A = e0..e19, B = e0..e9 then y0..y9: over the 30 items (mean rank 15.5) the covariance is
    # Σ_{m=5..14} (m + 0.5)² = 1082.5 and each variance 1082.5 + 82.5 + 10·10² = 2165: rho = 0.5
    a = [f"e{i}" for i in range(20)]
    b = a[:10] + [f"y{i}" for i in range(10)]
    assert topk_spearman(a, b) == pytest.approx(0.5)
    assert topk_spearman(a[::-1], b) == pytest.approx(-0.5)


def test_spearman_matches_scipy_with_missing_items_at_k_plus_1() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        a = [f"d{i}" for i in rng.choice(30, size=20, replace=False)]
        b = [f"d{i}" for i in rng.choice(30, size=20, replace=False)]
        union = list(dict.fromkeys(a + b))
        ra = [a.index(x) + 1 if x in a else 21 for x in union]
        rb = [b.index(x) + 1 if x in b else 21 for x in union]
        assert topk_spearman(a, b) == pytest.approx(spearmanr(ra, rb).statistic)


def test_spearman_single_item_and_bad_lists() -> None:
    assert topk_spearman(["a"], ["a"]) == 1.0
    assert topk_spearman(["a"], ["b"]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="empty"):
        topk_spearman([], ["a"])
    with pytest.raises(ValueError, match="twice"):
        topk_spearman(["a", "a"], ["a", "b"])


def test_overlap() -> None:
    a = [f"e{i}" for i in range(20)]
    assert topk_overlap(a, a[::-1]) == 1.0
    assert topk_overlap(a, a[:10] + [f"y{i}" for i in range(10)]) == 0.5
    assert topk_overlap(a, [f"y{i}" for i in range(20)]) == 0.0
    # a pool of 4 candidates: both lists hold 4, and 3 shared of 4 (not of 20)
    assert topk_overlap(["a", "b", "c", "d"], ["d", "c", "b", "x"]) == 0.75
    # lists of different lengths: divided by the shorter one
    assert topk_overlap(["a", "b"], ["b", "a", "c", "d"]) == 1.0


def test_compare_rankings_cuts_at_k_and_counts_ignored_queries() -> None:
    head = [f"d{i}" for i in range(20)]
    a = {"q1": [*head, "t1", "t2"], "q2": head, "only_a": head}
    b = {"q1": [*head, "u1", "u2"], "q2": head[::-1], "only_b1": head, "only_b2": head}
    pair = compare_rankings(a, b, k=20)
    assert pair.spearman == pytest.approx({"q1": 1.0, "q2": -1.0})
    assert pair.overlap == {"q1": 1.0, "q2": 1.0}
    assert (pair.n_queries, pair.only_a, pair.only_b) == (2, 1, 2)
    assert pair.mean_spearman() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="no query in common"):
        compare_rankings({"q1": head}, {"q2": head})


# ------------------------------------------------------------------------------ spread


def test_spread_uses_sample_std() -> None:
    s = spread({2: 0.7, 0: 0.5, 1: 0.6})
    assert (s["n"], s["min"], s["max"], s["mean"]) == (3, 0.5, 0.7, pytest.approx(0.6))
    assert s["std"] == pytest.approx(0.1)  # sqrt((0.01 + 0 + 0.01) / 2)
    assert s["std_population"] == pytest.approx(math.sqrt(0.02 / 3))
    assert s["range"] == pytest.approx(0.2)
    assert s["relative_range"] == pytest.approx(0.2 / 0.6)
    assert list(s["values"]) == ["0", "1", "2"]
    assert spread({0: 0.4})["std"] is None


def test_ir_auc_spread_numbers_and_records() -> None:
    assert ir_auc_spread({0: 0.3, 1: 0.5})["ir_auc"]["mean"] == pytest.approx(0.4)
    grid = {0.0: 0.6, 0.5: 0.2}
    records = {
        0: {"run": {"seed": 0}, "summary": robustness_summary({"typo": grid, "question": {0.0: 0.5}})},
        1: robustness_summary({"typo": {0.0: 0.6, 0.5: 0.4}, "question": {0.0: 0.3}}),
    }
    out = ir_auc_spread(records)
    assert out["per_perturbation"]["typo"]["values"] == pytest.approx({"0": 0.4, "1": 0.5})
    assert out["per_perturbation"]["question"]["values"] == pytest.approx({"0": 0.5, "1": 0.3})
    assert out["macro"]["values"] == pytest.approx({"0": 0.45, "1": 0.4})
    assert out["micro"]["values"] == pytest.approx({"0": 0.4, "1": 0.5})
    with pytest.raises(ValueError, match="seed 1"):
        ir_auc_spread({1: records[0]})  # seed 0's record handed in as seed 1
    with pytest.raises(ValueError, match="not both"):
        ir_auc_spread({0: 0.3, 1: records[1]})


# ------------------------------------------------------------------------------ run directories

RUN = {"study": "s", "language": "ruby", "dataset": "csn", "attack": "none", "model": "gcb", "loss": "ce"}


def _write_run(
    directory: Path, seed: int, lists: dict[str, list[str]], mrr: float, protocol: str = "full-corpus", **run: str
) -> Path:
    """A run directory as ``csbench evaluate`` writes it: the TREC run file and metrics.json."""
    directory.mkdir(parents=True)
    lines = [f"{q} Q0 {d} {r} {1.0 / r:.6f} run" for q, docs in lists.items() for r, d in enumerate(docs, start=1)]
    with gzip.open(directory / f"run.{protocol}.trec.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    scores = [{"protocol": protocol, "metric": "mrr", "value": mrr}, {"protocol": "other", "metric": "mrr", "value": 1}]
    record = {"run": {**RUN, "seed": seed, "inference": "confused", **run}, "scores": scores}
    (directory / "metrics.json").write_text(json.dumps(record))
    return directory


HEAD = [f"d{i}" for i in range(20)]
E = [f"e{i}" for i in range(20)]


@pytest.fixture
def three_runs(tmp_path: Path) -> dict[int, Path]:
    """Seeds 0 and 1 agree on q1's top 20 (not on ranks 21-25) and reverse q2; seed 2 shares
    nothing of q1 and half of q2 (its first ten, in order), and ranks a query q3 of its own."""
    tails = {s: [f"t{s}_{i}" for i in range(5)] for s in range(3)}
    half = E[:10] + [f"y{i}" for i in range(10)]
    return {
        0: _write_run(tmp_path / "0", 0, {"q1": HEAD + tails[0], "q2": E + tails[0]}, 0.5),
        1: _write_run(tmp_path / "1", 1, {"q1": HEAD + tails[1], "q2": E[::-1] + tails[1]}, 0.6),
        2: _write_run(
            tmp_path / "2", 2, {"q1": [f"x{i}" for i in range(25)], "q2": half + tails[2], "q3": HEAD + tails[2]}, 0.7
        ),
    }


def test_seed_stability_exact_matrix(three_runs: dict[int, Path]) -> None:
    record = seed_stability(three_runs, "full-corpus", k=20, per_query=True)
    assert record["seeds"] == [0, 1, 2]
    # (0, 1): q1 identical top 20 (1), q2 reversed (-1); (0, 2): q1 disjoint, q2 half shared in
    # order (0.5); (1, 2): q1 disjoint, q2 half shared against the reversed list (-0.5)
    s01, s02, s12 = 0.0, (DISJOINT_20 + 0.5) / 2, (DISJOINT_20 - 0.5) / 2
    expected_rho = [[1, s01, s02], [s01, 1, s12], [s02, s12, 1]]
    expected_share = [[1, 1, 0.25], [1, 1, 0.25], [0.25, 0.25, 1]]
    assert np.allclose(record["matrix"]["spearman"], expected_rho)
    assert np.allclose(record["matrix"]["overlap"], expected_share)
    pairs = {tuple(p["seeds"]): p for p in record["pairs"]}
    assert list(pairs) == [(0, 1), (0, 2), (1, 2)]
    assert [p["n_queries"] for p in pairs.values()] == [2, 2, 2]
    assert [p["ignored_queries"] for p in pairs.values()] == [0, 1, 1]  # q3 is seed 2's alone
    assert pairs[(0, 2)]["per_query"]["spearman"] == pytest.approx({"q1": DISJOINT_20, "q2": 0.5})
    assert pairs[(1, 2)]["per_query"]["overlap"] == {"q1": 0.0, "q2": 0.5}
    assert record["summary"]["spearman"] == pytest.approx({"min": s12, "max": s01, "mean": (s01 + s02 + s12) / 3})
    assert len(record["notes"]) == 2
    mrr = record["spread"]["mrr"]
    assert (mrr["min"], mrr["max"], mrr["mean"], mrr["std"]) == pytest.approx((0.5, 0.7, 0.6, 0.1))
    assert record["spread"]["ir_auc"] is None
    assert record["run"] == {**RUN, "inference": "confused"}
    json.dumps(record)  # JSON-ready


def test_seed_stability_with_ir_auc(three_runs: dict[int, Path]) -> None:
    record = seed_stability(three_runs, "full-corpus", ir_auc={0: 0.3, 1: 0.4, 2: 0.5})
    assert record["spread"]["ir_auc"]["ir_auc"]["mean"] == pytest.approx(0.4)
    assert "per_query" not in record["pairs"][0]
    with pytest.raises(ValueError, match=r"without a run: \[7\]"):
        seed_stability(three_runs, "full-corpus", ir_auc={0: 0.3, 7: 0.4})


def test_missing_run_file(three_runs: dict[int, Path]) -> None:
    (three_runs[1] / "run.full-corpus.trec.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"run\.full-corpus\.trec\.gz is missing \(seed 1\)"):
        seed_stability(three_runs, "full-corpus")
    with pytest.raises(FileNotFoundError, match=r"run\.other\.trec\.gz"):
        seed_stability({0: three_runs[0], 2: three_runs[2]}, "other")


def test_run_shallower_than_k(tmp_path: Path, three_runs: dict[int, Path]) -> None:
    shallow = _write_run(tmp_path / "shallow", 3, {"q1": HEAD[:10], "q2": E[:10]}, 0.5)
    with pytest.raises(ValueError, match=r"raise evaluation\.run_depth to at least 20"):
        seed_stability({0: three_runs[0], 3: shallow}, "full-corpus")
    # at k = 10 the same run is deep enough
    record = seed_stability({0: three_runs[0], 3: shallow}, "full-corpus", k=10)
    assert record["matrix"]["spearman"][0][1] == pytest.approx(1.0)


def test_depth_check_with_pool_sizes(tmp_path: Path) -> None:
    lists = {"small": ["a", "b", "c"], "big": HEAD}
    check_depth(lists, 20, {"small": 3, "big": 500})  # a pool of 3 lists all it has
    with pytest.raises(ValueError, match=r"query small lists 3 candidates.*pool has 8"):
        check_depth(lists, 20, {"small": 8, "big": 500})
    with pytest.raises(ValueError, match="run depth 3"):
        check_depth({"small": ["a", "b", "c"]}, 20)
    # ranks.tsv is read when present: a pool of 3 is no reason to fail, a cut pool of 8 is
    run = _write_run(tmp_path / "r", 0, lists, 0.5)
    other = _write_run(tmp_path / "o", 1, lists, 0.5)
    rows = "protocol\tquery_id\trank\tcandidates\ttop1\nfull-corpus\tsmall\t1\t{n}\ta\nfull-corpus\tbig\t1\t500\td0\n"
    for directory in (run, other):
        (directory / "ranks.tsv").write_text(rows.format(n=3))
    assert seed_stability({0: run, 1: other}, "full-corpus")["matrix"]["overlap"][0][1] == 1.0
    (other / "ranks.tsv").write_text(rows.format(n=8))
    with pytest.raises(ValueError, match=r"evaluation\.run_depth"):
        seed_stability({0: run, 1: other}, "full-corpus")


def test_runs_must_differ_only_in_seed(tmp_path: Path, three_runs: dict[int, Path]) -> None:
    other_model = _write_run(tmp_path / "m", 5, {"q1": HEAD}, 0.5, model="codebert")
    with pytest.raises(ValueError, match="more than its seed: model"):
        seed_stability({0: three_runs[0], 5: other_model}, "full-corpus")
    with pytest.raises(ValueError, match="given as seed 4 is seed 0"):
        seed_stability({4: three_runs[0], 1: three_runs[1]}, "full-corpus")
    with pytest.raises(ValueError, match="at least two seeds"):
        seed_stability({0: three_runs[0]}, "full-corpus")


def test_read_trec_orders_by_rank_and_rejects_repeats(tmp_path: Path) -> None:
    file = tmp_path / "run.x.trec.gz"
    with gzip.open(file, "wt") as handle:
        handle.write("q Q0 b 2 0.5 r\nq Q0 a 1 0.9 r\np Q0 c 1 0.1 r\n")
    assert read_trec(file) == {"q": ["a", "b"], "p": ["c"]}
    with gzip.open(file, "wt") as handle:
        handle.write("q Q0 a 1 0.9 r\nq Q0 a 2 0.5 r\n")
    with pytest.raises(ValueError, match="repeats"):
        read_trec(file)


# ------------------------------------------------------------------------------ heatmap


def test_heatmap_png(tmp_path: Path, three_runs: dict[int, Path]) -> None:
    import matplotlib.image

    record = seed_stability(three_runs, "full-corpus")
    path = tmp_path / "fig" / "seeds.png"
    plot_seed_heatmap(record, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (594, 704)  # 5.4 x 6.4 inches at 110 dpi
    assert np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0).shape[0] > 10  # not a blank canvas
    assert sorted(p.name for p in path.parent.iterdir()) == ["seeds.png"]  # no temporary file left
    first = path.read_bytes()
    plot_seed_heatmap(record, path)
    assert path.read_bytes() == first  # no timestamp: re-runs give the same bytes


def test_aggregate_phase_writes_every_configurations_record_and_the_summary_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`csbench aggregate`'s stability step: a config with 3 seeds of a trained model gets one record
    and heatmap per configuration under results/studies/<study>/stability/, an index, and the summary's
    section."""
    import yaml

    from csbench.config import load_config
    from csbench.phases.aggregate import stability_records
    from csbench.results.collect import stability_frames, stability_markdown

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    raw["grid"] |= {"datasets": ["python-stdlib"], "attacks": ["no_comment"]}
    raw["grid"]["trained"] = {"models": ["nbow"], "attacks": ["no_comment"], "seeds": [0, 1, 2]}
    raw["robustness"]["datasets"] = ["python-stdlib"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    config = load_config([tmp_path / "params.yaml"])
    [(group, runs)] = config.stability_groups()
    assert group.path == "python-stdlib/no_comment/nbow/ce/confused"
    tails = {s: [f"t{s}_{i}" for i in range(5)] for s in range(3)}
    for run in runs:  # seeds 0 and 1 agree on q1, seed 2 shares nothing with them
        docs = HEAD if run.seed < 2 else [f"x{i}" for i in range(20)]
        coordinates = {k: v for k, v in run.as_dict().items() if k not in RUN and k not in ("seed", "inference")}
        _write_run(Path("results/runs") / run.path, run.seed, {"q1": docs + tails[run.seed]}, 0.5, **coordinates)
    records = stability_records(config, {})
    assert list(records) == [group.path]
    folder = Path("results/studies/default/stability")  # params.yaml's study
    record = json.loads((folder / group.path / "stability.json").read_text())
    assert record == json.loads(json.dumps(records[group.path]))
    assert np.allclose(record["matrix"]["overlap"], [[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    assert (folder / group.path / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    index = json.loads((folder / "index.json").read_text())
    assert index == {"settings": {"k": 20, "protocol": "full-corpus"}, "groups": [group.path]}
    text = "\n".join(stability_markdown(records))
    assert "| python-stdlib/no_comment/nbow/ce/confused | 0, 1, 2 |" in text
    assert f"](stability/{group.path}/heatmap.png)" in text
    # and results.db's tables: one row per pair of seeds, one per metric's spread
    pairs, spreads = stability_frames(records)
    assert pairs[["seed_a", "seed_b"]].values.tolist() == [[0, 1], [0, 2], [1, 2]]
    assert pairs["overlap"].tolist() == [1.0, 0.0, 0.0] and set(pairs["model"]) == {"nbow"}
    assert spreads[["metric", "n", "mean"]].values.tolist() == [["mrr", 3, 0.5]]
