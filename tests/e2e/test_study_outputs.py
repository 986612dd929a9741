"""Several studies side by side (issue #21, item 7): each study's summaries, database, tables and
figures live in its own folder, results/studies/<study>/, which only its `aggregate` writes.

A second study run after a first must run all its jobs (its default target depends on its own runs,
not on files another study left in results/), under both drivers, and both studies' rows must stay
queryable with `csbench results`. The end-to-end tests run the tiny study (workflow/configs/tiny.yaml)
and a second small one (tests/configs/tiny-json.yaml: its own name and corpus, as cobe's releases
are not the default study's) in both orders; the unit tests check the same on `csbench aggregate`
and `csbench results` directly, and that the two drivers name the same outputs.

On the code before the fix these fail: snakemake answered "Nothing to be done" for the second study
(`rule all` asked only for results/summary.md, which the first had written), and a second study that
ran (DVC) replaced results/results.db, so the first study's rows were gone.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from test_drivers import BIN, PROJECT_ROOT, TINY, _copy_project, _run, copy_run, dvc_jobs, snakemake_jobs
from test_results import _write_run, toy_pool, write_prepared
from test_studies import expected_jobs, job_stats

from csbench import paths
from csbench.cli import main
from csbench.config import ConfigError, load_config

PARAMS = PROJECT_ROOT / "params.yaml"
OTHER = "tests/configs/tiny-json.yaml"  # the second study, beside tiny
STUDY_FILES = {"tiny": TINY, "tiny-json": OTHER, "cobe": "workflow/configs/cobe.yaml"}
CONFIG_FILES = sorted(
    [PARAMS, *(PROJECT_ROOT / "workflow/configs").glob("*.yaml"), *(PROJECT_ROOT / "tests/configs").glob("*.yaml")]
)


def _study_config(name: str):
    return load_config([PARAMS, PROJECT_ROOT / STUDY_FILES[name]])


# ---------------------------------------------------------------------------------------------
# study names


def _overlay(tmp_path: Path, study: object) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"study": study}))
    return path


@pytest.mark.parametrize("name", ["tiny", "tiny-json", "cobe", "v1.2_run-3", "A"])
def test_a_study_name_is_a_folder_name(tmp_path: Path, name: str) -> None:
    config = load_config([PARAMS, _overlay(tmp_path, name)])
    assert config.study == name
    assert paths.study_dir(name) == Path("results/studies") / name


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "", "-x", "a b", "x" * 101])
def test_a_study_name_that_is_no_plain_folder_name_is_refused(tmp_path: Path, name: str) -> None:
    """`..` would put a study's outputs in results/ itself (where the next one would replace
    them); a separator, in another study's folder."""
    with pytest.raises(ConfigError, match=r"study\.yaml:1: study: "):
        load_config([PARAMS, _overlay(tmp_path, name)])


def test_every_config_of_the_repository_names_a_study_of_its_own() -> None:
    """Two configs with one study name would write one folder: the second would replace the first."""
    names = collections.Counter(yaml.safe_load(path.read_text())["study"] for path in CONFIG_FILES)
    assert len(CONFIG_FILES) >= 8 and names["default"] == 1
    assert [name for name, count in names.items() if count > 1] == []


def test_both_drivers_write_a_study_into_its_own_folder() -> None:
    """dvc.yaml's aggregate stage names results/studies/${study}/..., as the Snakefile's rule does
    (SUMMARY_FILES, stability/, tables/, figures/); the rule's outputs are read from its source."""
    stage = yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"]["aggregate"]
    named = [*stage["outs"], *stage["metrics"], *(next(iter(plot)) for plot in stage["plots"])]
    folder = paths.STUDY.format(study="${study}")
    expected = {f"{folder}/{name}" for name in (*paths.SUMMARY_FILES, paths.STABILITY, "tables", "figures")}
    assert set(named) == expected and len(named) == len(expected)
    assert "study" in stage["params"]  # a study's name is part of what its aggregate tracks
    rules = (PROJECT_ROOT / "workflow/rules/report.smk").read_text() + (PROJECT_ROOT / "Snakefile").read_text()
    assert "summary=STUDY_SUMMARY" in rules and '"results/{name}"' not in rules


# ---------------------------------------------------------------------------------------------
# csbench aggregate and csbench results on two studies that share a run


def _study_params(name: str, attacks: list[str]) -> dict:
    raw = yaml.safe_load(PARAMS.read_text())
    raw["study"] = name
    raw["grid"].update(datasets=["python-stdlib"], attacks=attacks, models=["bm25"])
    raw["grid"]["trained"]["models"] = []  # zero-shot runs only
    raw["grid"]["summarization"]["models"] = []  # no summarizer (issue #25)
    raw["robustness"]["datasets"] = ["python-packages"]  # outside the grid: no robustness runs
    return raw


@pytest.fixture()
def two_studies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A project with the run records of two studies: `alpha` (attacks none, no_comment) and
    `beta` (none only: the run it shares with alpha), and the dataset card both link."""
    monkeypatch.chdir(tmp_path)
    configs = {}
    for name, attacks in (("alpha", ["none", "no_comment"]), ("beta", ["none"])):
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump(_study_params(name, attacks)))
    _write_run(tmp_path, "python-stdlib", "none", {"full-corpus": [1, 2, 1]})
    _write_run(tmp_path, "python-stdlib", "no_comment", {"full-corpus": [3, 2, 9]})
    pool = toy_pool()
    write_prepared(tmp_path, pool)
    # stamped as `csbench prepare` / `evaluate` would (phases and aggregate read only stamped inputs,
    # issue #22 item 3); the shared run has the same lineage in both studies
    from csbench.config import RunKey
    from csbench.lineage import stamp_placed, stamp_placed_run

    alpha = load_config([configs["alpha"]])
    stamp_placed(alpha, "python-stdlib")
    for attack in ("none", "no_comment"):
        stamp_placed_run(alpha, RunKey("python-stdlib", attack, "bm25"))
    audit = ["-q", "audit", "--config", str(configs["alpha"]), "--dataset", "python-stdlib", "--jobs", "1"]
    assert main(audit) == 0
    return configs


def _folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _query(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict], str]:
    capsys.readouterr()
    code = main(["results", "--format", "json", *args])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else []), out.err


def test_each_study_aggregates_into_its_own_folder_and_leaves_the_others(two_studies: dict[str, Path]) -> None:
    assert main(["-q", "aggregate", "--config", str(two_studies["alpha"])]) == 0
    alpha = Path("results/studies/alpha")
    for name in (*paths.SUMMARY_FILES, "stability/index.json", "tables/summary.html", "figures/index.json"):
        assert (alpha / name).is_file(), name
    before = _folder_files(alpha)
    assert main(["-q", "aggregate", "--config", str(two_studies["beta"])]) == 0
    assert _folder_files(alpha) == before  # untouched, byte for byte
    assert (Path("results/studies/beta") / "results.db").is_file()
    assert sorted(p.name for p in Path("results").iterdir()) == ["datasets", "runs", "studies"]
    # the summary's links lead to the files studies share, from the study's folder
    text = (alpha / "summary.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links == ["../../datasets/python-stdlib/card.md"]
    assert all((alpha / link).is_file() for link in links)


def test_results_reads_every_studys_database_as_one_table(
    two_studies: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for config in two_studies.values():
        assert main(["-q", "aggregate", "--config", str(config)]) == 0
    code, rows, err = _query(capsys, "--metric", "mrr")
    assert code == 0, err
    runs = {(r["study"], r["attack"]) for r in rows}
    assert runs == {("alpha", "none"), ("alpha", "no_comment"), ("beta", "none")}
    # the run both studies share is a row of each (beta did not evaluate it: alpha's job did)
    shared = [r["value"] for r in rows if r["attack"] == "none"]
    assert len(shared) == 2 and shared[0] == shared[1]
    code, rows, err = _query(capsys, "--study", "beta")
    assert code == 0 and rows and {r["study"] for r in rows} == {"beta"}, err
    code, rows, err = _query(capsys, "--study", "alpha,beta", "--metric", "mrr", "--attack", "none", "--pivot", "study")
    assert code == 0 and len(rows) == 1 and rows[0]["alpha"] == rows[0]["beta"], err
    code, rows, err = _query(capsys, "--db", "results/studies/alpha/results.db", "--metric", "mrr")
    assert code == 0 and {r["study"] for r in rows} == {"alpha"}, err
    code, _, err = _query(capsys, "--study", "alpah")
    assert code == 2
    assert "unknown study 'alpah'" in err and "alpha, beta" in err and "Did you mean 'alpha'?" in err


def test_a_database_in_another_studys_folder_is_refused(
    two_studies: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Counted twice otherwise: a copied database would add its study's rows again."""
    assert main(["-q", "aggregate", "--config", str(two_studies["alpha"])]) == 0
    copy = Path("results/studies/gamma/results.db")
    copy.parent.mkdir()
    shutil.copy("results/studies/alpha/results.db", copy)
    code, _, err = _query(capsys)
    assert code == 2
    assert "results/studies/gamma/results.db holds rows of study 'alpha', not only of 'gamma'" in err


def test_a_query_without_any_study_points_at_an_old_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("results").mkdir()
    with sqlite3.connect("results/results.db") as con:
        con.execute("CREATE TABLE results (study TEXT)")
    con.close()
    code, _, err = _query(capsys)
    assert code == 2
    assert "no study has a database under results/studies/" in err and "--db results/results.db" in err


def test_csbench_study_prints_the_name_or_the_folder(capsys: pytest.CaptureFixture[str]) -> None:
    for args, expected in ((["study"], "default"), (["study", "--dir"], "results/studies/default")):
        assert main([*args, "--config", str(PARAMS)]) == 0
        assert capsys.readouterr().out == f"{expected}\n"
    assert main(["study", "--dir", "--config", str(PARAMS), "--config", str(PROJECT_ROOT / OTHER)]) == 0
    assert capsys.readouterr().out == "results/studies/tiny-json\n"


# ---------------------------------------------------------------------------------------------
# end to end: a second study after a first, under both drivers

ORDERS = [("tiny", "tiny-json"), ("tiny-json", "tiny")]


class Driver:
    """One driver in a fresh copy of the project, which runs studies."""

    def __init__(self, project: Path, defaults: Path) -> None:
        self.project, self.defaults = project, defaults
        (project / OTHER).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / OTHER, project / OTHER)

    def ok(self, *cmd: str) -> str:
        """stdout and stderr of a command that must succeed."""
        done = _run(list(cmd), self.project)
        assert done.returncode == 0, " ".join(cmd) + "\n" + done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout + done.stderr

    def run(self, study: str) -> collections.Counter[str]:
        """Run a study: the jobs that ran, by rule."""
        raise NotImplementedError


class Snakemake(Driver):
    """Runs a study, or plans it without running it (`snakemake -n`)."""

    def args(self, study: str) -> list[str]:
        return ["--cores", "2", "--configfile", STUDY_FILES[study]]

    def plan(self, study: str) -> collections.Counter[str]:
        output = self.ok(str(BIN / "snakemake"), "-n", "--quiet", "rules", *self.args(study))
        return job_stats(output) if "Job stats:" in output else collections.Counter()

    def run(self, study: str) -> collections.Counter[str]:
        return snakemake_jobs(self.ok(str(BIN / "snakemake"), *self.args(study)))


class Dvc(Driver):
    """DVC has no overlays: a study is `csbench merge`d into params.yaml before each run."""

    def __init__(self, project: Path, defaults: Path) -> None:
        super().__init__(project, defaults)
        if (project / ".dvc").is_dir():
            return  # a copy of a git + DVC project that ran a study (conftest's dvc_first)
        git_user = ["-c", "user.email=ci@csbench", "-c", "user.name=ci"]
        for cmd in (
            ["git", "init", "-q"],
            ["git", "add", "-A"],
            ["git", *git_user, "commit", "-qm", "project"],
            [str(BIN / "dvc"), "init", "-q"],
            [str(BIN / "dvc"), "config", "core.analytics", "false"],
        ):
            self.ok(*cmd)

    def select(self, study: str) -> None:
        self.ok(str(BIN / "csbench"), "merge", "--config", str(self.defaults), "--config", STUDY_FILES[study],
                "--output", "params.yaml")  # fmt: skip

    def run(self, study: str) -> collections.Counter[str]:
        self.select(study)
        return dvc_jobs(self.ok(str(BIN / "dvc"), "repro"))


def rows_by_study(driver: Driver) -> dict[str, list[dict]]:
    """Every row `csbench results` gives in the project, by study (the CLI of the code under test)."""
    done = _run([str(BIN / "csbench"), "results", "--format", "json"], driver.project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)
    by_study: dict[str, list[dict]] = collections.defaultdict(list)
    for row in rows:
        by_study[row["study"]].append(row)
    return dict(by_study)


@pytest.mark.e2e
@pytest.mark.parametrize("order", ORDERS, ids=["tiny-first", "tiny-json-first"])
@pytest.mark.parametrize("kind", [Snakemake, Dvc], ids=["snakemake", "dvc"])
def test_a_second_study_runs_all_its_jobs_and_both_studies_stay_queryable(
    kind: type[Driver], order: tuple[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first, second = order
    defaults = shutil.copy2(PARAMS, tmp_path / "params.default.yaml")  # the default study, for merges
    if first == "tiny":
        # the tiny study as the session ran it from scratch under this driver (conftest's snakemake_tiny
        # / dvc_first: all its jobs, checked here), copied with its times: its runs are done, its
        # folders, database and driver state are as a first study leaves them
        tiny_run = request.getfixturevalue("snakemake_tiny" if kind is Snakemake else "dvc_first")
        driver = kind(copy_run(tiny_run, tmp_path / "project"), defaults)
        assert tiny_run["jobs"] == expected_jobs(_study_config(first))
    else:
        driver = kind(_copy_project(tmp_path / "project"), defaults)
        assert driver.run(first) == expected_jobs(_study_config(first))
    before = rows_by_study(driver)
    assert list(before) == [first] and before[first]
    if kind is Snakemake and first == "tiny":
        # the issue's own case: COBE, none of whose 992 jobs has run, plans them all after a study
        plan = driver.plan("cobe")
        assert plan == expected_jobs(load_config([PARAMS, PROJECT_ROOT / STUDY_FILES["cobe"]]))
        assert sum(plan.values()) == 991  # and `all`: 992

    if kind is Snakemake:  # the symptom: the second study's plan was empty ("Nothing to be done")
        assert driver.plan(second) == expected_jobs(_study_config(second)), f"{second} after {first}"
    assert driver.run(second) == expected_jobs(_study_config(second))

    after = rows_by_study(driver)
    assert sorted(after) == sorted(order)
    assert after[first] == before[first]  # the first study's rows, as they were
    assert any(row["metric"] == "mrr" and row["value"] for row in after[second])
    if kind is Snakemake:  # the studies share no run: the first one is still up to date
        assert driver.plan(first) == collections.Counter()


@pytest.mark.e2e
def test_dvc_runs_a_study_that_trains_nothing_and_has_no_robustness_grid(tmp_path: Path) -> None:
    """dvc.yaml's aggregate stage depends on checkpoints/ and results/robustness/; in a fresh checkout
    of a study that trains nothing and has no robustness grid (csn.yaml's shape) no stage writes them,
    and DVC refused the missing dependency. The checkout holds them (each with a tracked README)."""
    project = _copy_project(tmp_path / "project")
    defaults = shutil.copy2(PARAMS, tmp_path / "params.default.yaml")
    driver = Dvc(project, defaults)
    raw = yaml.safe_load((PROJECT_ROOT / OTHER).read_text())
    raw["study"] = "zero-shot-only"
    raw["grid"]["trained"]["models"] = []
    raw["grid"]["summarization"]["models"] = []  # no summarizer (issue #25)
    raw["robustness"]["datasets"] = []
    overlay = tmp_path / "zero-shot-only.yaml"
    overlay.write_text(yaml.safe_dump(raw))
    driver.ok(str(BIN / "csbench"), "merge", "--config", str(defaults), "--config", str(overlay),
              "--output", "params.yaml")  # fmt: skip
    config = load_config([PARAMS, overlay])
    assert not config.trainings() and not config.robustness_runs()
    assert dvc_jobs(driver.ok(str(BIN / "dvc"), "repro")) == expected_jobs(config)
    assert rows_by_study(driver)["zero-shot-only"]
