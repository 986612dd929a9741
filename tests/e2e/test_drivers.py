"""End to end: the tiny study through both drivers, re-run accounting, interruption, bad configs.

Each test works in a fresh copy of the project under tmp_path; the csbench package itself is the
one installed from this checkout. Job counts are read from the drivers' own output.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from projects import BIN, copy_paths, driver_env, init_git_dvc, unreadable_directory

from csbench.config import merge

PROJECT_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

TINY = "workflow/configs/tiny.yaml"
TINY_DIR = "results/studies/tiny"  # the tiny study's summaries, database, tables and figures (`study: tiny`)
# .gitignore too: DVC refuses to run when it ignores dvc.lock (it once did, and `dvc repro` failed)
PROJECT_FILES = (
    "Snakefile", "params.yaml", "dvc.yaml", ".dvcignore", ".gitignore", "profiles", "workflow", "scripts", "src",
    "checkpoints/README.md", "results/robustness/README.md",  # tracked: the folders dvc.yaml's aggregate needs
)  # fmt: skip
# Files both drivers must write identically (provenance.json, card.json and results.db hold wall
# times and creation dates, so they legitimately differ).
SAME_FILES = (
    "data/prepared/*/*.parquet",
    "data/prepared/*/card.md",
    "data/raw/*/MANIFEST.json",
    "results/datasets/*/card.md",
    "data/attacked/*/*/*.parquet",
    "results/runs/**/metrics.json",
    "results/runs/**/summaries.jsonl",
    "results/runs/**/ranks.tsv",
    "results/runs/**/*.trec.gz",
    "data/perturbed/**/*.parquet",
    "results/robustness/**/*.json",
    "results/robustness/**/*.png",
    f"{TINY_DIR}/summary.csv",
    f"{TINY_DIR}/summary.md",
    f"{TINY_DIR}/tables/*.md",
    f"{TINY_DIR}/tables/*.csv",
    f"{TINY_DIR}/tables/*.tex",
    f"{TINY_DIR}/tables/*.html",
    f"{TINY_DIR}/figures/**/*.png",
)
TINY_ATTACKS = ("none", "no_comment", "ordered_id+translation")
# Runs: bm25 (zero-shot) on 3 attacks, and nbow trained on each attack (confused) and evaluated
# confused and not confused (the no_comment model): 3 trainings, 3 + 6 runs. The robustness grid
# (python-stdlib / no_comment: bm25, nbow confused, nbow not confused) has case at ratio 0.3 and
# question: one perturb job per perturbation (all its ratios), one robust job per run (all its points).
ROBUSTNESS_JOBS = {"perturb": 2, "robust": 3, "robustness": 3}
# Summarization: the small transformer-sum trained on no_comment and summarizing its test split (one
# train, one summarize).
SUMMARY_JOBS = {"summarize": 1}
FULL_GRID = {
    "download": 1, "prepare": 1, "audit": 1, "attack": 3, "train": 4, "index": 9, "evaluate": 9, **ROBUSTNESS_JOBS,
    **SUMMARY_JOBS, "aggregate": 1,
}  # fmt: skip
AFTER_MODEL_CHANGE = {"index": 3, "evaluate": 3, "robust": 1, "robustness": 1, "aggregate": 1}  # bm25's k1
# one more noise ratio: case's query sets (question has no ratio and stays), every run's points, then
# the curves and the summary
AFTER_RATIO_ADDED = {"perturb": 1, "robust": 3, "robustness": 3, "aggregate": 1}
# nbow's learning rate: its 3 trainings and everything downstream of them (6 runs; 2 of them in the
# robustness grid); bm25's runs stay
AFTER_LR_CHANGE = {"train": 3, "index": 6, "evaluate": 6, "robust": 2, "robustness": 2, "aggregate": 1}
AFTER_EXTRACTION_CHANGE = {
    "prepare": 1, "audit": 1, "attack": 3, "train": 4, "index": 9, "evaluate": 9, "perturb": 2, "robust": 3,
    "robustness": 3, **SUMMARY_JOBS, "aggregate": 1,
}  # fmt: skip
NBOW_LR = {"models": {"nbow": {"training": {"lr": 0.004}}}}


_env = driver_env  # (imported from here by other driver tests)


def _copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    return copy_paths(PROJECT_ROOT, dest, PROJECT_FILES)


# The limit only catches a hang: a whole tiny study ran out of 10 minutes on a 2-core machine busy
# with other work (load 7), so it leaves room for that.
RUN_TIMEOUT = 1800


def _run(cmd: list[str], cwd: Path, timeout: int = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def test_default_profile_is_found_by_a_plain_snakemake_call(tmp_path: Path) -> None:
    """Snakemake looks for profiles/default beside the Snakefile: the top-level `profiles` link
    must lead to workflow/profiles, or rerun-incomplete (and so restarts after a kill) is lost."""
    project = _copy_project(tmp_path / "project")
    result = snakemake(project, "-n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Using workflow specific profile profiles/default" in result.stdout + result.stderr


def snakemake(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([str(BIN / "snakemake"), "--cores", "2", "--configfile", TINY, *args], project)


def snakemake_jobs(output: str) -> collections.Counter[str]:
    """Jobs snakemake executed, by rule (the `all` target excluded)."""
    rules = re.findall(r"^(?:local)?rule (\w+):$", output, flags=re.MULTILINE)
    return collections.Counter(rule for rule in rules if rule != "all")


def dvc_jobs(output: str) -> collections.Counter[str]:
    """Stages dvc repro executed, by stage name without the matrix suffix (`perturb-fixed`, the
    ratio-free perturbations, the `-trained` stages of trained runs, `train-summarizer` and
    `summarize-zero-shot` count as the snakemake rules they mirror)."""
    stages = re.findall(r"Running stage '([\w-]+)(?:@[^']*)?'", output)
    mirrored = (re.sub(r"(-fixed)?(-trained)?(-summarizer)?(-zero-shot)?$", "", stage) for stage in stages)
    return collections.Counter(mirrored)


def snapshot(project: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for pattern in SAME_FILES:
        for path in sorted(project.glob(pattern)):
            files[path.relative_to(project).as_posix()] = path.read_bytes()
    return files


def summary_rows(project: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((project / TINY_DIR / "summary.csv").read_text())))


def _set_overlay(project: Path, update: dict) -> None:
    path = project / TINY
    path.write_text(yaml.safe_dump(merge(yaml.safe_load(path.read_text()), update)))


def _set_params(project: Path, update: dict) -> None:
    path = project / "params.yaml"
    path.write_text(yaml.safe_dump(merge(yaml.safe_load(path.read_text()), update), sort_keys=False))


def run_tiny_study_with_snakemake(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny study through snakemake in a fresh copy of the project: conftest's session fixture
    `snakemake_tiny` (shared with test_study_outputs, test_moved_checkout). Do not change the project:
    copy it (`copy_run`)."""
    project = _copy_project(tmp_path_factory.mktemp("snakemake"))
    result = snakemake(project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"project": project, "jobs": snakemake_jobs(result.stdout + result.stderr), "files": snapshot(project)}


def copy_run(run: dict, dest: Path) -> Path:
    """A copy of a session fixture's finished project (`cp -a`: times kept, so snakemake's mtime
    checks and DVC's recorded stat see the files as the run left them)."""
    shutil.copytree(run["project"], dest, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def snakemake_first(snakemake_tiny: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The session's tiny snakemake run, copied: this module's rerun test changes its project."""
    project = copy_run(snakemake_tiny, tmp_path_factory.mktemp("snakemake-first") / "project")
    return {**snakemake_tiny, "project": project}


def run_tiny_study_with_dvc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny study through `dvc repro` in a new git + DVC project: conftest's session fixture
    `dvc_first` (shared with test_dvc_remote). Tests that change the project work on a copy."""
    project = _copy_project(tmp_path_factory.mktemp("dvc"))
    # DVC has no config overlay: the study's params.yaml is the merged tiny config.
    tiny = merge(yaml.safe_load((project / "params.yaml").read_text()), yaml.safe_load((project / TINY).read_text()))
    init_git_dvc(project, tiny, "tiny")
    result = _run([str(BIN / "dvc"), "repro"], project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"project": project, "jobs": dvc_jobs(result.stdout + result.stderr), "files": snapshot(project)}


def test_snakemake_runs_every_job_of_the_tiny_study_once(snakemake_first: dict) -> None:
    assert snakemake_first["jobs"] == FULL_GRID


def test_dvc_runs_every_stage_of_the_tiny_study_once(dvc_first: dict) -> None:
    assert dvc_first["jobs"] == FULL_GRID


def test_dvc_metrics_and_plots_show_the_study(dvc_first: dict) -> None:
    """`dvc metrics show` gives every run's scores as in summary.csv; `dvc plots show --json` the
    robustness curves' points (the ratio-taking perturbations: case at 0 and 0.3 per run)."""
    project = dvc_first["project"]
    shown = _run([str(BIN / "dvc"), "metrics", "show", "--json"], project)
    assert shown.returncode == 0, shown.stderr[-2000:]
    metrics = json.loads(shown.stdout)[""]["data"][f"{TINY_DIR}/metrics.json"]["data"]
    rows = summary_rows(project)
    keys = ("dataset", "attack", "model", "loss", "seed", "inference")
    assert rows and {"/".join(r[k] for k in keys) for r in rows} == set(metrics)
    for row in rows:
        if row["mrr"]:
            run = metrics["/".join(row[k] for k in keys)]
            assert run[row["protocol"]]["mrr"] == pytest.approx(float(row["mrr"]))
    robust = [run for run, values in metrics.items() if "robustness" in values]
    assert len(robust) == 3 and all(0 < metrics[r]["robustness"]["macro_ir_auc"] <= 1 for r in robust)
    plots = _run([str(BIN / "dvc"), "plots", "show", "--json"], project)
    assert plots.returncode == 0, plots.stderr[-2000:]
    (plot,) = json.loads(plots.stdout)["data"][f"{TINY_DIR}/robustness_curves.csv"]
    values = plot["content"]["data"]["values"]
    assert sorted((v["run_id"], v["perturbation"], float(v["ratio"])) for v in values) == sorted(
        (run, "case", ratio) for run in robust for ratio in (0.0, 0.3)
    )


def test_tiny_study_reports_real_mrrs_for_both_attacks(snakemake_first: dict) -> None:
    rows = {(r["attack"], r["protocol"]): r for r in summary_rows(snakemake_first["project"]) if r["model"] == "bm25"}
    assert set(rows) == {(a, p) for a in TINY_ATTACKS for p in ("full-corpus", "csn-1000")}
    for attack in TINY_ATTACKS:
        full = rows[(attack, "full-corpus")]
        assert int(full["n_queries"]) > 20
        assert 0.0 < float(full["mrr"]) <= 1.0
        # the tiny test split has fewer than 1,000 records: csn-1000 is one chunk of all of them, as
        # CodeSearchNet's model_test.py lowers its batch size to the data size
        csn = rows[(attack, "csn-1000")]
        assert csn["n_queries"] == full["n_queries"] and 0.0 < float(csn["mrr"]) <= 1.0
    # the docstring is inside the original code: removing it must cost BM25 a lot
    assert float(rows[("none", "full-corpus")]["mrr"]) > float(rows[("no_comment", "full-corpus")]["mrr"]) + 0.2
    summary = (snakemake_first["project"] / TINY_DIR / "summary.md").read_text()
    assert "test pool has" in summary and "< 1000 records: one chunk of" in summary


def test_tiny_study_trains_nbow_once_per_attack_and_shares_the_no_comment_model(snakemake_first: dict) -> None:
    project = snakemake_first["project"]
    rows = [r for r in summary_rows(project) if r["model"] == "nbow" and r["protocol"] == "full-corpus"]
    assert {(r["attack"], r["inference"]) for r in rows} == {
        (a, i) for a in TINY_ATTACKS for i in ("confused", "not_confused")
    }
    assert all(0.0 < float(r["mrr"]) <= 1.0 for r in rows)
    mrr = {(r["attack"], r["inference"]): float(r["mrr"]) for r in rows}
    # on no_comment both inference types evaluate the same model
    assert mrr[("no_comment", "confused")] == mrr[("no_comment", "not_confused")]
    trained = sorted(
        p.parent.relative_to(project / "checkpoints").as_posix() for p in project.glob("checkpoints/**/train.json")
    )
    summarizer = "python-stdlib/no_comment/transformer-sum/xent/0"  # the tiny study's summarizer (issue #25)
    assert trained == sorted([*(f"python-stdlib/{a}/nbow/ce/0" for a in TINY_ATTACKS), summarizer])
    assert not list(project.glob("checkpoints/**/state"))  # resumable state is removed once trained


def test_both_drivers_write_the_same_files(snakemake_first: dict, dvc_first: dict) -> None:
    ours, theirs = snakemake_first["files"], dvc_first["files"]
    assert len(ours) >= 15
    assert sorted(ours) == sorted(theirs)
    different = [name for name in ours if ours[name] != theirs[name]]
    assert different == []


def test_snakemake_reruns_only_what_a_change_invalidates(snakemake_first: dict) -> None:
    project = snakemake_first["project"]
    nothing = snakemake(project)
    assert nothing.returncode == 0 and snakemake_jobs(nothing.stdout + nothing.stderr) == {}

    _set_overlay(project, {"models": {"bm25": {"k1": 1.5}}})
    k1 = snakemake(project)
    assert k1.returncode == 0, k1.stderr[-2000:]
    assert snakemake_jobs(k1.stdout + k1.stderr) == AFTER_MODEL_CHANGE

    _set_overlay(project, {"robustness": {"ratios": [0.3, 0.2]}})
    ratio = snakemake(project)
    assert ratio.returncode == 0, ratio.stderr[-2000:]
    assert snakemake_jobs(ratio.stdout + ratio.stderr) == AFTER_RATIO_ADDED

    _set_overlay(project, NBOW_LR)
    lr = snakemake(project)
    assert lr.returncode == 0, lr.stderr[-2000:]
    assert snakemake_jobs(lr.stdout + lr.stderr) == AFTER_LR_CHANGE

    # An extraction change re-makes the whole study: planned (-n), not run, which would repeat the
    # session's full tiny run (CI time); the steps above ran their jobs for real.
    before = (project / TINY).read_text()
    _set_overlay(project, {"extraction": {"min_code_lines": 4}})
    extraction = snakemake(project, "-n")
    assert extraction.returncode == 0, extraction.stderr[-2000:]
    assert snakemake_jobs(extraction.stdout + extraction.stderr) == AFTER_EXTRACTION_CHANGE
    (project / TINY).write_text(before)

    again = snakemake(project)
    assert snakemake_jobs(again.stdout + again.stderr) == {}
    assert (
        len(json.loads(next(project.glob("results/robustness/**/robustness.json")).read_text())["curves"]["case"]) == 3
    )


def test_dvc_reruns_only_what_a_change_invalidates(dvc_first: dict, tmp_path: Path) -> None:
    project = tmp_path / "dvc"
    shutil.copytree(dvc_first["project"], project, symlinks=True)  # dvc_first is shared: keep it as run
    dvc = str(BIN / "dvc")
    nothing = _run([dvc, "repro"], project)
    assert nothing.returncode == 0 and dvc_jobs(nothing.stdout + nothing.stderr) == {}

    _set_params(project, {"models": {"bm25": {"k1": 1.5}}})
    k1 = _run([dvc, "repro"], project)
    assert k1.returncode == 0, k1.stderr[-2000:]
    assert dvc_jobs(k1.stdout + k1.stderr) == AFTER_MODEL_CHANGE

    _set_params(project, {"robustness": {"ratios": [0.3, 0.2]}})
    ratio = _run([dvc, "repro"], project)
    assert ratio.returncode == 0, ratio.stderr[-2000:]
    assert dvc_jobs(ratio.stdout + ratio.stderr) == AFTER_RATIO_ADDED

    _set_params(project, NBOW_LR)
    lr = _run([dvc, "repro"], project)
    assert lr.returncode == 0, lr.stderr[-2000:]
    assert dvc_jobs(lr.stdout + lr.stderr) == AFTER_LR_CHANGE

    again = _run([dvc, "repro"], project)
    assert dvc_jobs(again.stdout + again.stderr) == {}


def _as_from_a_terminal() -> None:
    """In the child before exec: SIGINT as a shell gives it (default action, not blocked). An ignored or
    blocked SIGINT is inherited through exec, and Python then installs no KeyboardInterrupt handler:
    two full CI runs saw the study run to its end after Ctrl-C, never this test run alone."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_interrupted_run_finishes_on_restart_with_the_same_results(
    sig: signal.Signals, snakemake_first: dict, tmp_path: Path
) -> None:
    project = _copy_project(tmp_path / "project")
    # BM25 alone: the interruption is the drivers' business, not a model's, and this test runs the
    # study twice more (its results are compared with the bm25 part of the full run)
    _set_overlay(project, {"grid": {"trained": {"models": []}, "summarization": {"models": []}}})
    command = ["bash", "scripts/snakemake.sh", "--cores", "1", "--configfile", TINY]
    log = (tmp_path / "interrupted.log").open("w")  # what snakemake said, for a failure's message
    process = subprocess.Popen(
        command,
        cwd=project,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )
    marker = project / "data/prepared/python-stdlib/card.json"  # prepare done, attacks under way
    deadline = time.monotonic() + 120
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run finished before it could be interrupted"
    os.killpg(process.pid, sig)
    process.wait(timeout=180)  # after Ctrl-C snakemake lets its running job finish; a busy machine is slow
    log.close()
    said = (tmp_path / "interrupted.log").read_text()[-4000:]
    here = f"this process: SIGINT handler {signal.getsignal(signal.SIGINT)}, blocked {signal.pthread_sigmask(0, [])}"
    assert not (project / TINY_DIR / "summary.csv").exists(), (
        f"the study ran to its end after {sig.name} ({here}):\n{said}"
    )
    if sig == signal.SIGKILL:  # the case snakemake cannot clean up after itself
        assert any((project / ".snakemake/locks").iterdir())

    restart = _run(command, project)
    assert restart.returncode == 0, restart.stdout[-3000:] + restart.stderr[-3000:]
    # the full run's files as they were then (the rerun test changes that project afterwards)
    first = snakemake_first["files"]
    first_rows = csv.DictReader(io.StringIO(first[f"{TINY_DIR}/summary.csv"].decode()))
    ours, theirs = summary_rows(project), [row for row in first_rows if row["model"] == "bm25"]
    # the full run's summary also has the summarizer's BLEU columns (issue #25), empty on bm25's rows
    extra = set(theirs[0]) - set(ours[0])
    assert extra == {"bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4"}
    assert all(row[column] == "" for row in theirs for column in extra)
    assert ours == [{k: v for k, v in row.items() if k not in extra} for row in theirs]

    def bm25_part(files: dict[str, bytes]) -> dict[str, bytes]:
        # the summary, tables and figures cover the whole study: the full run's have nbow (and the
        # summarizer) in them too
        aggregates = (f"{TINY_DIR}/summary", f"{TINY_DIR}/tables/", f"{TINY_DIR}/figures/")
        trained = ("/nbow/", "/transformer-sum/")  # the full run's trained models (search, summarization)
        return {k: v for k, v in files.items() if not any(t in k for t in trained) and not k.startswith(aggregates)}

    assert bm25_part(snapshot(project)) == bm25_part(first)


@pytest.mark.parametrize(
    ("params_text", "overlay", "expected"),
    [
        ("study: x\ngrid: {datasets: [python-stdlib], attacks: [none,\n", None, "params.yaml: line 3"),
        (None, {"grid": {"attacks": ["none", "no_coment"]}}, "Did you mean 'no_comment'?"),
        (None, {"grid": {"models": ["bm52"]}}, "grid.models[0]"),
        (None, {"models": {"bm25": {"k_1": 2}}}, "Did you mean 'k1'?"),
        (None, {"datasets": {"python-stdlib": {"source": "/nonexistent/csbench-src"}}}, "/nonexistent/csbench-src"),
    ],
    ids=["malformed-yaml", "unknown-attack", "unknown-model", "misspelt-key", "missing-source"],
)
def test_bad_config_stops_snakemake_before_any_job(
    params_text: str | None, overlay: dict | None, expected: str, tmp_path: Path
) -> None:
    project = _copy_project(tmp_path / "project")
    if params_text is not None:
        (project / "params.yaml").write_text(params_text)
    if overlay is not None:
        _set_overlay(project, overlay)
    result = snakemake(project)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    error_lines = [line for line in output.splitlines() if line.startswith("csbench: invalid config:")]
    assert len(error_lines) == 1 and expected in error_lines[0], output[-2000:]
    assert "Traceback" not in output
    assert not (project / "data").exists()
    made = {p.relative_to(project).as_posix() for p in (project / "results").rglob("*") if p.is_file()}
    assert made == {"results/robustness/README.md"}  # nothing but the checkout's own file


def test_unreadable_source_directory_is_named(tmp_path: Path) -> None:
    with unreadable_directory(tmp_path / "src-dir") as source:
        project = _copy_project(tmp_path / "project")
        _set_overlay(project, {"datasets": {"python-stdlib": {"source": str(source)}}})
        result = snakemake(project)
        assert result.returncode != 0
        assert f"datasets.python-stdlib.source: source directory '{source}' is not readable" in result.stderr


def test_snakemake_lint_is_clean() -> None:
    result = _run([str(BIN / "snakemake"), "--lint", "--cores", "1"], PROJECT_ROOT)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    result = _run([str(BIN / "ruff"), "check", "."], PROJECT_ROOT)
    assert result.returncode == 0, result.stdout[-3000:]


def test_dvc_code_deps_match_the_phase_code_snakemake_tracks() -> None:
    from csbench.paths import PHASE_CODE

    stages = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"]
    for phase, parts in PHASE_CODE.items():
        for stage in [
            s
            for s in stages
            if s in (phase, f"{phase}-fixed", f"{phase}-trained", f"{phase}-fixed-trained", f"{phase}-zero-shot")
        ]:
            code_deps = {d for d in stages[stage]["deps"] if d.startswith("src/")}
            assert code_deps == {f"src/csbench/{part}" for part in parts}, stage
    rule_text = "".join(p.read_text() for p in (PROJECT_ROOT / "workflow/rules").glob("*.smk"))
    for phase in PHASE_CODE:
        assert f'paths.code_digest("{phase}")' in rule_text, phase


def test_a_code_change_changes_the_digest_of_the_phases_running_it_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from csbench import paths

    package = tmp_path / "csbench"
    shutil.copytree(paths.PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(paths, "PACKAGE_DIR", package)
    before = {phase: paths.code_digest(phase) for phase in paths.PHASE_CODE}
    with (package / "results" / "collect.py").open("a") as handle:
        handle.write("\n# a change\n")
    assert [p for p in paths.PHASE_CODE if paths.code_digest(p) != before[p]] == ["aggregate"]
    with (package / "code" / "tokens.py").open("a") as handle:
        handle.write("\n# a change\n")
    changed = [p for p in paths.PHASE_CODE if paths.code_digest(p) != before[p]]
    # aggregate: the change above
    assert changed == [
        *("prepare", "audit", "attack", "train", "index", "evaluate", "robust", "aggregate"),
        *("train-summarizer", "summarize"),  # the summarizers' code vocabulary splits code into subtokens
    ]
    without_bytecode = paths.code_digest("aggregate")
    (package / "results" / "__pycache__").mkdir()
    (package / "results" / "__pycache__" / "collect.cpython-311.pyc").write_bytes(b"byte-code does not count")
    assert paths.code_digest("aggregate") == without_bytecode
