"""The paper studies of workflow/configs/ (csn, cobe, thesis, gecs), overlays on params.yaml.

Each validates, its grid has the shape its paper describes, and `snakemake -n` (in a copy of the
project) plans exactly the jobs the config asks for, counted from the config itself. The study data
cannot be downloaded here, which a dry run does not need. The DVC route (a params.yaml merged with
`csbench merge`) is checked on a study without per-dataset overrides.
"""

from __future__ import annotations

import collections
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from test_drivers import BIN, _copy_project, _env

from csbench.config import Config, dvc_limitations, load_config
from csbench.evaluate.metrics import rank_metrics
from csbench.evaluate.protocols import PROTOCOLS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
CONFIGS = PROJECT_ROOT / "workflow" / "configs"
STUDIES = ("csn", "cobe", "thesis", "gecs", "summarization", "coir-robustness")
CSN_LANGUAGES = ("go", "java", "javascript", "php", "python", "ruby")
# A dry run only catches a pathological slowdown here (the thesis grid plans ~1,800 jobs in about
# 15 s on a loaded 2-core machine): "seconds, not minutes".
DRY_RUN_LIMIT_S = 120


def study(name: str) -> Config:
    return load_config([PARAMS, CONFIGS / f"{name}.yaml"])


def trained_runs(config: Config) -> list:
    return [run for run in config.runs() if run.inference != "zero_shot"]


# ---------------------------------------------------------------------------------------------
# the grids the papers describe


@pytest.mark.parametrize("name", STUDIES)
def test_study_validates_as_an_overlay_and_names_itself(name: str) -> None:
    config = study(name)
    assert config.study == name
    assert config.runs(), "a study with no runs"
    assert set(config.datasets) <= set(config.raw["datasets"])


def test_summarization_every_thesis_attack_on_tl_codesum_and_csn_java() -> None:
    """The thesis's second task (issue #25): every attack, the from-scratch summarizer, CodeXGLUE's
    CodeBERT encoder-decoder and CodeT5 fine-tuned (confused and not confused), CodeT5-multi-sum
    zero-shot; BM25 for the search side of the same data."""
    config = study("summarization")
    thesis = study("thesis")
    assert config.summarization["attacks"] == thesis.attacks == config.attacks
    assert config.datasets == ["tl-codesum", "csn-filtered-java"]
    trained = [run for run in config.summary_runs() if run.inference != "zero_shot"]
    assert {run.model for run in trained} == {"transformer-sum", "codebert-sum", "codet5-sum"}
    assert {run.inference for run in trained} == {"confused", "not_confused"}
    assert {run.loss for run in trained} == {"xent"}
    zero_shot = [run for run in config.summary_runs() if run.inference == "zero_shot"]
    assert len(zero_shot) == 2 * 11 and {run.model for run in zero_shot} == {"codet5-multi-sum"}
    assert len(config.trainings()) == 2 * 11 * 3  # not_confused reuses the no_comment model
    assert [config.model_params(m)["architecture"] for m in ("transformer-sum", "codebert-sum", "codet5-sum")] == [
        "transformer",
        "roberta-decoder",
        "hf-seq2seq",
    ]
    for other in ("csn", "cobe", "thesis", "gecs"):
        assert study(other).summary_runs() == [], other  # the search studies summarize nothing


def test_csn_six_languages_baselines_and_bm25_under_csn_1000() -> None:
    from csbench.models.defaults import CSN_DEFAULTS, CSN_TRAINING_DEFAULTS

    config = study("csn")
    assert config.datasets == [f"csn-{lang}" for lang in CSN_LANGUAGES]  # the original release
    assert config.protocols == ["csn-1000"]  # 999 distractors (Table 3)
    assert config.models == ["bm25"] and config.model_params("bm25")["k1"] == 1.2
    trained = config.trained
    assert trained["models"] == ["nbow", "cnn", "birnn", "selfatt"]
    assert trained["attacks"] == ["no_comment"] and trained["losses"] == ["ce"] and trained["inference"] == ["confused"]
    for model in trained["models"]:  # the released code's regime, per model
        regime = config.training_params(model)
        assert regime["lr"] == CSN_TRAINING_DEFAULTS[model]["learning_rate"]
        assert regime["batch_size"] == CSN_TRAINING_DEFAULTS[model]["batch_size"]
        assert (regime["optimizer"], regime["schedule"], regime["max_grad_norm"]) == ("adam", "constant", 1.0)
        assert (regime["epochs"], regime["validations_per_epoch"], regime["patience"]) == (500, 1, 5)
        assert "schedule_params" not in regime
    for key in ("dim", "max_code_len", "code_vocab_size", "query_vocab_size"):  # params.yaml's small NBoW undone
        assert config.model_params("nbow")[key] == CSN_DEFAULTS["nbow"][key]
    assert config.robustness_runs() == [] and config.stability_groups() == []
    assert len(config.runs()) == 6 * 2 + 6 * 4


def test_thesis_every_attack_both_inference_types_and_top_k() -> None:
    config = study("thesis")
    assert config.datasets == [
        *(f"csn-filtered-{lang}" for lang in ("python", "java", "javascript", "php", "go")),
        "tl-codesum",
        "funcom",
    ]  # Table 2.1
    attacks = {"none", "no_comment", "full_hash", "most_popular", "ordered_id", "random_permutation", "translation"}
    attacks |= {f"k_shift_{kind}-{k}" for kind in ("dataset", "snippet") for k in (3, 64)}
    assert len(config.attacks) == 11 and set(config.attacks) == attacks
    trained = config.trained
    assert trained["attacks"] == config.attacks and trained["inference"] == ["confused", "not_confused"]
    assert trained["models"] == ["nbow", "cnn", "selfatt", "graphcodebert"]
    assert config.attack_params("k_shift_snippet-64") == {"k_shift_snippet": {"k": 64}}
    assert config.attack_params("translation") == {"translation": {"pair": "eng-spa"}}
    # MRR, Top-1, Top-5, Top-10 under every protocol (all rank)
    assert all(PROTOCOLS.get(p).kind == "ranking" for p in config.protocols)
    assert {"mrr", "r@1", "r@5", "r@10"} <= set(rank_metrics(np.array([1, 3, 12])))
    n_datasets, n_attacks, n_models = len(config.datasets), len(config.attacks), len(trained["models"])
    assert len(trained_runs(config)) == n_datasets * n_attacks * n_models * 1 * 2
    # one model per attack (confused), the no_comment one shared by every not_confused run
    assert len(config.trainings()) == n_datasets * n_attacks * n_models
    assert {run.training.attack for run in trained_runs(config) if run.inference == "not_confused"} == {"no_comment"}
    regime = config.training_params("graphcodebert")  # GraphCodeBERT's code-search fine-tuning
    assert (regime["optimizer"], regime["lr"], regime["batch_size"], regime["epochs"]) == ("adamw", 2e-5, 32, 10)
    assert regime["schedule"] == "linear_decay" and regime["patience"] is None
    assert config.robustness_runs() == []


def test_cobe_three_encoders_four_losses_ten_seeds_on_ruby() -> None:
    from csbench.train.losses import LOSSES

    config = study("cobe")
    assert config.datasets == [f"csn-filtered-{lang}" for lang in ("ruby", "javascript", "go", "python", "java", "php")]
    assert config.attacks == ["no_comment"] and config.protocols == ["full-corpus"]
    trained = config.trained
    model_ids = [config.model_params(m)["model_id"] for m in trained["models"]]
    assert model_ids == ["microsoft/codebert-base", "microsoft/graphcodebert-base", "Salesforce/codet5-base"]
    assert config.model_params(trained["models"][1])["architecture_kind"] == "graphcodebert"
    assert all(config.model_params(m)["projection_dim"] == 768 for m in trained["models"])  # a linear layer on top
    assert trained["losses"] == ["ce", "hinge_sum", "hinge_max", "we"] and set(trained["losses"]) == set(LOSSES.names())
    assert config.seeds_for("csn-filtered-ruby") == list(range(10))
    assert all(config.seeds_for(d) == [0] for d in config.datasets[1:])
    # batch 85 for the CodeBERT models, 70 for CodeT5; COBE's schedule for all
    assert [config.training_params(m)["batch_size"] for m in trained["models"]] == [85, 85, 70]
    for model in trained["models"]:
        regime = config.training_params(model)
        assert (regime["optimizer"], regime["lr"], regime["schedule"]) == ("adam", 2e-5, "step_decay")
        assert regime["schedule_params"] == {"every_epochs": 3, "gamma": 0.1}
        assert (regime["epochs"], regime["validations_per_epoch"], regime["patience"]) == (20, 3, 6)
    assert config.loss_params("hinge_max") == {"margin": 0.2} and config.loss_params("we") == {
        "margin": 0.2,
        "eta": 0.0,
    }
    assert config.loss_params("ce") == {"temperature": 1.0}
    per_dataset = len(trained["models"]) * len(trained["losses"])
    assert len(config.trainings()) == per_dataset * (10 + 5)
    groups = config.stability_groups()
    assert len(groups) == per_dataset and {key.dataset for key, _ in groups} == {"csn-filtered-ruby"}
    assert all(len(runs) == 10 for _, runs in groups) and config.stability == {"k": 20, "protocol": "full-corpus"}
    rob = config.robustness
    assert rob["perturbations"] == ["case", "replace", "noise", "typo", "synonym", "swap"] and rob["fixed"] == [
        "question"
    ]
    assert np.allclose(rob["ratios"], np.arange(1, 11) * 0.05)
    assert config.robustness_runs() == config.runs()  # every run, every seed, on perturbed queries


def test_gecs_fine_tunes_on_advtest_and_tests_eight_sets() -> None:
    from csbench.models.cross import CROSS_MODELS

    config = study("gecs")
    assert config.datasets == [
        "advtest",
        *(f"gecs-csn-{lang}" for lang in ("go", "java", "javascript", "php", "ruby")),
        "cosqa-retrieval",
        "statcodesearch",
    ]
    assert set(config.protocols) == {"matching", "gecs-100"} and config.attacks == ["none"]
    assert config.models == ["codet5p-110m-embedding"]  # zero-shot on every test set
    assert {run.dataset for run in config.runs() if run.inference == "zero_shot"} == set(config.datasets)
    trained = config.trained
    assert trained["models"] == ["roberta-cross", "codebert-cross", "codet5p-110m-embedding-cross"]
    assert all(config.model_spec(m).family == "cross" for m in trained["models"])
    # fine-tuned once on AdvTest, that one checkpoint evaluated on all eight test sets (Tables 2, 3, 5)
    assert trained["datasets"] == ["advtest"] and trained["evaluate_on"] == config.datasets
    assert [k.path for k in config.trainings()] == [f"advtest/none/{m}/ce/0" for m in trained["models"]]
    assert {(r.dataset, r.model) for r in trained_runs(config)} == {
        (d, m) for d in config.datasets for m in trained["models"]
    }
    assert {r.label for r in trained_runs(config)} == {"confused@advtest"}
    assert {r.training.path for r in trained_runs(config)} == {k.path for k in config.trainings()}
    for model in trained["models"]:  # Table 4, the last model kept
        given = config.raw["models"][model]["training"]
        assert {k: given[k] for k in ("lr", "epochs")} == CROSS_MODELS[model.removesuffix("-cross")]["training"]
        assert given["batch_size"] == 32 and given["weight_decay"] == 0.01 and given["keep"] == "last"


def test_coir_robustness_reads_coirs_python_tasks_by_hub_id_and_scores_them_graded() -> None:
    """CoIR's tasks as BEIR datasets by hub id at the revisions mteb pins, scored and perturbed under the
    graded protocol; the grid attacks their corpora (issue #27). Downloading needs the Hugging Face hub
    (or its cache), so the study is checked here by its config and its dry run."""
    import mteb

    config = study("coir-robustness")
    pinned = {task.metadata.dataset["path"]: task.metadata.dataset["revision"] for task in mteb.get_tasks(
        tasks=["CosQA", "AppsRetrieval", "CodeTransOceanDL"])}  # fmt: skip
    for name in config.datasets:
        spec = config.dataset_spec(name)
        options = config.dataset_options(name)
        assert spec.kind == "beir" and spec.qrels is not None
        assert pinned[options["hub"]] == options["revision"], name
        assert options["language"] == "python"
    assert config.protocols == ["qrels"] and config.robustness["protocol"] == "qrels"
    assert config.graded_protocols == ["qrels"]
    assert {"ordered_id", "most_popular", "no_comment"} <= set(config.attacks)


def test_only_csn_and_thesis_run_under_dvc() -> None:
    assert dvc_limitations(study("csn")) == [] and dvc_limitations(study("thesis")) == []
    assert [n.split(" ", 1)[0] for n in dvc_limitations(study("cobe"))] == ["grid.trained.seeds_by_dataset"]
    assert [n.split(" ", 1)[0] for n in dvc_limitations(study("gecs"))] == [
        "grid.trained.datasets",
        "grid.trained.evaluate_on",
        "grid.trained.attacks",
    ]


# ---------------------------------------------------------------------------------------------
# dry runs


def expected_jobs(config: Config) -> collections.Counter[str]:
    """The jobs of a fresh run, by rule, from the config: one download / prepare / audit per
    dataset, one attack per dataset x attack a run or training reads, one train per training, one
    index and evaluate per search run, one summarize per summarization run, one perturb per
    robustness dataset x perturbation, one robust and robustness per robustness run, one aggregate,
    one dataset_table where the config has one."""
    runs, trainings, robust = config.search_runs(), config.trainings(), config.robustness_runs()
    summaries = config.summary_runs()
    attacked = {(r.dataset, r.attack) for r in runs + summaries} | {(k.dataset, k.attack) for k in trainings}
    perturbed = {p for p, _ in config.perturbation_points()} if robust else set()
    jobs = collections.Counter(
        download=len(config.datasets),
        prepare=len(config.datasets),
        audit=len(config.datasets),
        attack=len(attacked),
        train=len(trainings),
        index=len(runs),
        evaluate=len(runs),
        summarize=len(summaries),
        perturb=len({r.dataset for r in robust}) * len(perturbed),
        robust=len(robust),
        robustness=len(robust),
        aggregate=1,
        dataset_table=int(config.dataset_table is not None),  # GeCS Table 1
    )
    return +jobs  # drop the rules with no job


def job_stats(output: str) -> collections.Counter[str]:
    """Snakemake's "Job stats" table, without the `all` target and the total."""
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    rows = re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.MULTILINE)
    return collections.Counter({rule: int(n) for rule, n in rows if rule not in ("all", "job")})


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, float]]:
    """`snakemake -n` of every study, side by side in one copy of the project (they only read it):
    (return code, output, wall seconds) per study."""
    base = tmp_path_factory.mktemp("studies")
    project = _copy_project(base / "project")
    procs, logs, started, ended = {}, {}, {}, {}
    for name in STUDIES:
        cmd = [str(BIN / "snakemake"), "-n", "--cores", "2", "--quiet", "rules"]
        cmd += ["--configfile", f"workflow/configs/{name}.yaml"]
        logs[name] = (base / f"{name}.log").open("w")
        started[name] = time.perf_counter()
        procs[name] = subprocess.Popen(cmd, cwd=project, env=_env(), stdout=logs[name], stderr=subprocess.STDOUT)
    deadline = time.perf_counter() + 600
    while len(ended) < len(procs) and time.perf_counter() < deadline:
        for name, proc in procs.items():
            if name not in ended and proc.poll() is not None:
                ended[name] = time.perf_counter()
        time.sleep(0.1)
    results = {}
    for name, proc in procs.items():
        if name not in ended:
            proc.kill()
        proc.wait()
        logs[name].close()
        seconds = ended.get(name, time.perf_counter()) - started[name]
        results[name] = (proc.returncode, (base / f"{name}.log").read_text(), seconds)
    return results


@pytest.mark.e2e
@pytest.mark.parametrize("name", STUDIES)
def test_snakemake_dry_run_plans_the_jobs_of_the_config(dry_runs: dict, name: str) -> None:
    returncode, output, seconds = dry_runs[name]
    assert returncode == 0, output[-3000:]
    assert job_stats(output) == expected_jobs(study(name))
    assert seconds < DRY_RUN_LIMIT_S, f"{name}: the dry run took {seconds:.0f} s"


@pytest.mark.e2e
def test_dvc_runs_a_merged_study_with_the_same_stages(tmp_path: Path) -> None:
    """DVC has no overlays: `csbench merge` writes the study into params.yaml, and dvc.yaml's
    matrices expand to the jobs snakemake plans (csn: no per-dataset override)."""
    project = _copy_project(tmp_path / "project")

    def run(*cmd: str) -> str:
        done = subprocess.run(cmd, cwd=project, env=_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    run(
        str(BIN / "csbench"),
        "merge",
        "--config",
        "params.yaml",
        "--config",
        "workflow/configs/csn.yaml",
        "--output",
        "params.yaml",
    )
    assert load_config(project / "params.yaml").raw == study("csn").raw
    run(str(BIN / "dvc"), "init", "-q", "--no-scm")
    stages = re.findall(r"^([\w-]+)(?:@\S*)?\s", run(str(BIN / "dvc"), "stage", "list"), flags=re.MULTILINE)
    # the `-fixed` (ratio-free perturbations) and `-trained` stages count as the rules they mirror
    dvc = collections.Counter(re.sub(r"(-fixed)?(-trained)?$", "", stage) for stage in stages)
    assert dvc == expected_jobs(study("csn"))
