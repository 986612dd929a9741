"""The experiment config (csbench.config) and the CLI surface that reports its errors.

Every error names the file and the key, lists the valid names and suggests the closest one; the
JSON schema's enums and the package registries must not drift apart.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from csbench.attacks import ATTACKS, SPEC_PATTERN
from csbench.cli import main
from csbench.config import (
    SCHEMA_PATH,
    ConfigError,
    check_sources,
    dvc_limitations,
    load_config,
    merge,
    merged_yaml,
    read_yaml,
    validate_config,
)
from csbench.datasets import DATASETS
from csbench.evaluate.protocols import PROTOCOLS
from csbench.models import MODELS
from csbench.models.bm25 import BM25Retriever

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
TINY = PROJECT_ROOT / "workflow" / "configs" / "tiny.yaml"


@pytest.fixture
def raw() -> dict[str, Any]:
    return yaml.safe_load(PARAMS.read_text(encoding="utf-8"))


def _write(tmp_path: Path, data: dict[str, Any], name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _error_of(tmp_path: Path, raw: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(raw)
    change(data)
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert re.match(rf"{re.escape(str(path))}(:\d+)?: ", message), message  # names the file (and line)
    return message


# ---------------------------------------------------------------------------------------------
# the repository's own configs


def test_repo_params_validates(raw) -> None:
    config = load_config(PARAMS)
    assert config.study == raw["study"] == "default"
    assert config.sources == (str(PARAMS),)
    assert "python-stdlib" in config.datasets
    assert config.datasets == raw["grid"]["datasets"]
    assert config.attacks == raw["grid"]["attacks"]
    assert config.attacks[:2] == ["none", "no_comment"]  # the baselines, then the thesis's attacks
    assert {"k_shift_dataset-3", "k_shift_dataset-64", "k_shift_snippet-3", "k_shift_snippet-64"} <= set(config.attacks)
    assert config.attack_params("k_shift_snippet-64") == {"k_shift_snippet": {"k": 64}}
    assert config.attack_params("random_permutation") == {"random_permutation": {"seed": 0, "min_k": 1, "max_k": 20}}
    # The offline study #8 asks for: BM25, the pretrained MiniLM, a from-scratch baseline with 2+
    # seeds, both inference types, every query perturbation.
    assert config.models == raw["grid"]["models"] == ["bm25", "minilm"]
    assert config.protocols == ["full-corpus", "csn-1000", "csn-funcname"]  # issue #23: csn-1000 on the stdlib
    trained = config.trained
    assert trained["models"] == ["nbow"] and trained["attacks"] == ["no_comment", "ordered_id"]
    assert trained["losses"] == ["ce"] and trained["seeds"] == [0, 1]
    assert trained["inference"] == ["confused", "not_confused"]
    assert set(config.robustness["perturbations"]) == {"case", "replace", "noise", "typo", "synonym", "swap"}
    assert config.robustness["fixed"] == ["question"]
    assert [run.path for run in config.runs()] == [
        *(f"{d}/{a}/{m}/none/0/zero_shot" for d in config.datasets for a in config.attacks for m in config.models),
        *(
            f"{d}/{a}/nbow/ce/{seed}/{inference}"
            for d in config.datasets
            for a in ("no_comment", "ordered_id")
            for seed in (0, 1)
            for inference in ("confused", "not_confused")
        ),
        # issue #25: the from-scratch summarizer trained on no_comment, summarizing no_comment and ordered_id
        *(
            f"{d}/{a}/transformer-sum/xent/0/not_confused"
            for d in config.datasets
            for a in ("no_comment", "ordered_id")
        ),
    ]
    assert [key.path for key, _ in config.stability_groups()] == [
        f"{d}/{a}/nbow/ce/{inference}"
        for d in config.datasets
        for a in ("no_comment", "ordered_id")
        for inference in ("confused", "not_confused")
    ]
    assert config.model_params("bm25") == BM25Retriever.DEFAULTS
    check_sources(config)  # `stdlib` resolves to this interpreter's standard library


def test_load_config_with_tiny_overlay() -> None:
    config = load_config([PARAMS, TINY])
    assert config.study == "tiny"
    assert config.sources == (str(PARAMS), str(TINY))
    assert config.dataset_options("python-stdlib")["max_files"] == 60
    assert "lib2to3" in config.dataset_options("python-stdlib")["exclude_dirs"]  # list replaced
    assert config.section("evaluation", "run_depth") == 10
    assert config.section("extraction", "split") == {"train": 80, "valid": 10, "test": 10}  # from the base
    assert config.model_params("bm25")["k1"] == 1.2
    assert len(config.search_runs()) == 3 + 3 * 2  # bm25, and nbow confused / not confused on each attack
    assert [run.path for run in config.summary_runs()] == ["python-stdlib/no_comment/transformer-sum/xent/0/confused"]
    assert config.attack_params("ordered_id+translation") == {"ordered_id": {}, "translation": {"pair": "eng-spa"}}


def test_tiny_alone_is_incomplete() -> None:
    with pytest.raises(ConfigError, match="required property"):
        load_config(TINY)


# ---------------------------------------------------------------------------------------------
# schema and registries cannot drift: the schema's names are filled from the registries


def _schema() -> dict[str, Any]:
    from csbench.config.schema import schema

    return schema()


@pytest.mark.parametrize(
    ("section", "key", "registry"),
    [("evaluation", "protocols", PROTOCOLS)],  # model names: checked by the package (config-defined ones too)
)
def test_schema_enums_equal_registry_names(section: str, key: str, registry) -> None:
    enum = _schema()["properties"][section]["properties"][key]["items"]["enum"]
    assert sorted(enum) == sorted(registry.names())
    assert len(enum) == len(set(enum))


def test_schema_attack_specs_follow_the_package() -> None:
    attacks = _schema()["properties"]["grid"]["properties"]["attacks"]
    assert attacks["items"]["pattern"] == SPEC_PATTERN
    params = _schema()["properties"]["attack_params"]["properties"]
    assert set(params) == set(ATTACKS.names())
    for name in ATTACKS.names():
        assert set(params[name].get("properties", {})) == set(ATTACKS.get(name).defaults)


def test_schema_bm25_keys_equal_model_defaults() -> None:
    keys = _schema()["properties"]["models"]["properties"]["bm25"]["properties"]
    assert set(keys) == set(BM25Retriever.DEFAULTS)
    assert set(_schema()["properties"]["models"]["properties"]) <= set(MODELS.names())


def test_schema_training_keys_and_losses_equal_the_package() -> None:
    from dataclasses import fields

    from csbench.train.bi_encoder import TrainConfig
    from csbench.train.cross_encoder import CrossTrainConfig
    from csbench.train.losses import LOSSES

    training = _schema()["$defs"]["training"]["properties"]
    # every TrainConfig field a config may set (seed, loss and loss_params come from the run), plus max_valid
    settable = {f.name for f in fields(TrainConfig)} - {"seed", "loss", "loss_params", "cpu"}
    # and the cross-encoders' own knobs (CrossTrainConfig), which only models.<cross>.training reads
    cross = {f.name for f in fields(CrossTrainConfig)} - {f.name for f in fields(TrainConfig)}
    assert cross == {"negatives_per_positive", "data_seed", "keep"}
    assert set(training) == settable | {"max_valid"} | cross
    trained = _schema()["properties"]["grid"]["properties"]["trained"]["properties"]
    assert trained["losses"]["items"]["enum"] == LOSSES.names()
    assert set(_schema()["properties"]["loss_params"]["properties"]) == set(LOSSES.names())


def test_schema_path_is_the_repo_schema() -> None:
    assert PROJECT_ROOT / "workflow" / "schemas" / "params.schema.yaml" == SCHEMA_PATH


# ---------------------------------------------------------------------------------------------
# misspelt names, keys and values


@pytest.mark.parametrize(
    ("key", "change", "valid", "suggestion"),
    [
        ("grid.datasets[0]", lambda r: r["grid"].update(datasets=["python-stdlb"]), DATASETS.names(), "python-stdlib"),
        ("grid.attacks[1]", lambda r: r["grid"].update(attacks=["none", "no_coment"]), ATTACKS.names(), "no_comment"),
        ("grid.models[0]", lambda r: r["grid"].update(models=["bm52"]), MODELS.names(), "bm25"),
        (
            "evaluation.protocols[1]",
            lambda r: r["evaluation"].update(protocols=["full-corpus", "csn1000"]),
            PROTOCOLS.names(),
            "csn-1000",
        ),
        (
            "datasets.python-stdlb",
            lambda r: r.update(datasets={"python-stdlb": {"source": "stdlib"}}),
            DATASETS.names(),
            "python-stdlib",
        ),
    ],
)
def test_misspelt_name_names_key_lists_valid_and_suggests(tmp_path, raw, key, change, valid, suggestion) -> None:
    message = _error_of(tmp_path, raw, change)
    assert key in message
    assert f"valid names: {', '.join(sorted(valid))}" in message
    assert message.endswith(f"Did you mean {suggestion!r}?")


def test_name_far_from_everything_gets_no_suggestion(tmp_path, raw) -> None:
    message = _error_of(tmp_path, raw, lambda r: r["grid"].update(models=["xxxxxxxxxx"]))
    assert "grid.models[0]" in message
    assert "Did you mean" not in message


def test_misspelt_key_names_it_and_suggests(tmp_path, raw) -> None:
    message = _error_of(tmp_path, raw, lambda r: r["models"]["bm25"].update(k_1=1.0))
    assert "models.bm25" in message
    assert "'k_1'" in message
    assert "Did you mean 'k1'?" in message


def test_misspelt_top_level_key(tmp_path, raw) -> None:
    message = _error_of(tmp_path, raw, lambda r: r.update(evalutaion=r["evaluation"]))
    assert "'evalutaion'" in message
    assert "Did you mean 'evaluation'?" in message


def test_wrong_type_names_the_key(tmp_path, raw) -> None:
    message = _error_of(tmp_path, raw, lambda r: r["models"]["bm25"].update(k1="abc"))
    assert "models.bm25.k1" in message
    assert "'abc'" in message
    assert "number" in message


def test_out_of_range_value_names_the_key(tmp_path, raw) -> None:
    message = _error_of(tmp_path, raw, lambda r: r["models"]["bm25"].update(b=1.5))
    assert "models.bm25.b" in message


@pytest.mark.parametrize(("train", "valid", "test"), [(80, 10, 5), (80, 20, 10)])
def test_split_percentages_must_add_to_100(tmp_path, raw, train, valid, test) -> None:
    split = {"train": train, "valid": valid, "test": test}
    message = _error_of(tmp_path, raw, lambda r: r["extraction"].update(split=split))
    assert "extraction.split" in message
    assert "100" in message
    assert str(train + valid + test) in message


def test_split_adding_to_100_is_accepted(raw) -> None:
    data = copy.deepcopy(raw)
    data["extraction"]["split"] = {"train": 70, "valid": 0, "test": 30}
    assert validate_config(data).section("extraction", "split")["test"] == 30


def test_malformed_yaml_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("study: x\ngrid:\n  datasets: [a\n  models: b\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "line 4" in message
    assert "not valid YAML" in message


def test_top_level_must_be_a_mapping(tmp_path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a mapping"):
        read_yaml(path)


def test_missing_config_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml")


def test_no_config_file_given() -> None:
    with pytest.raises(ConfigError, match="no config file"):
        load_config([])


def test_missing_source_directory_fails_in_check_sources(tmp_path, raw) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    data = copy.deepcopy(raw)
    data["grid"]["datasets"] = ["python-stdlib"]
    data["datasets"]["python-stdlib"]["source"] = str(missing)
    path = _write(tmp_path, data, "params.yaml")
    config = load_config(path)  # the schema does not look at the file system
    with pytest.raises(ConfigError) as info:
        check_sources(config)
    message = str(info.value)
    assert "datasets.python-stdlib.source" in message
    assert str(missing) in message
    assert str(path) in message


def test_local_corpus_needs_language_and_source(raw) -> None:
    data = copy.deepcopy(raw)
    data["grid"]["datasets"] = ["mine"]
    data["datasets"]["mine"] = {"kind": "local-source", "language": "python"}
    with pytest.raises(ConfigError, match=r"datasets\.mine: a local-source corpus needs source"):
        validate_config(data)
    data["datasets"]["mine"]["source"] = "stdlib"
    assert validate_config(data).dataset_kind("mine") == "local-source"


# ---------------------------------------------------------------------------------------------
# merge


def test_merge_overlays_dicts_recursively_and_replaces_lists() -> None:
    base = {"a": {"b": 1, "c": [1, 2, 3], "d": {"e": 1, "f": 2}}, "g": [1], "h": "x"}
    overlay = {"a": {"c": [9], "d": {"f": 3}}, "g": [], "i": {"j": 1}}
    merged = merge(base, overlay)
    assert merged == {"a": {"b": 1, "c": [9], "d": {"e": 1, "f": 3}}, "g": [], "h": "x", "i": {"j": 1}}


def test_merge_does_not_modify_or_share_its_inputs() -> None:
    base = {"a": {"b": [1]}}
    overlay = {"c": {"d": [2]}}
    merged = merge(base, overlay)
    merged["a"]["b"].append(99)
    merged["c"]["d"].append(99)
    assert base == {"a": {"b": [1]}}
    assert overlay == {"c": {"d": [2]}}


def test_merge_scalar_replaces_dict_and_dict_replaces_scalar() -> None:
    assert merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}
    assert merge({"a": 5}, {"a": {"b": 1}}) == {"a": {"b": 1}}


# ---------------------------------------------------------------------------------------------
# the CLI surface


def test_cli_validate_bad_config_returns_2_with_one_line_error(tmp_path, raw, capsys) -> None:
    data = copy.deepcopy(raw)
    data["grid"]["attacks"] = ["none", "no_coment"]
    path = _write(tmp_path, data)
    assert main(["validate", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"csbench validate: error: {path}:7: ")  # the line of grid.attacks[1]
    assert "grid.attacks[1]" in lines[0]
    assert "Did you mean 'no_comment'?" in lines[0]
    assert "Traceback" not in captured.err


def test_cli_validate_check_sources_error(tmp_path, raw, capsys) -> None:
    data = copy.deepcopy(raw)
    data["grid"]["datasets"] = ["python-stdlib"]
    data["datasets"]["python-stdlib"]["source"] = str(tmp_path / "missing")
    path = _write(tmp_path, data)
    assert main(["validate", "--config", str(path)]) == 0
    assert main(["validate", "--check-sources", "--config", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("csbench validate: error: ")
    assert "datasets.python-stdlib.source" in err[0]


def test_cli_validate_good_config(raw, capsys) -> None:
    assert main(["validate", "--config", str(PARAMS)]) == 0
    captured = capsys.readouterr()
    grid, trained = raw["grid"], raw["grid"]["trained"]
    n_runs = len(grid["datasets"]) * len(grid["attacks"]) * len(grid["models"]) + len(grid["datasets"]) * len(
        trained["attacks"]
    ) * len(trained["models"]) * len(trained["losses"]) * len(trained["seeds"]) * len(trained["inference"])
    assert n_runs == 12 * 2 + 2 * 2 * 2  # 12 attacks x (bm25, minilm); nbow: 2 attacks x 2 seeds x 2 inference types
    n_runs += 2  # summarization (issue #25): transformer-sum not confused on no_comment and ordered_id
    assert captured.out == f"{PARAMS}: valid; study 'default', {n_runs} run(s)\n"
    assert captured.err == ""


def test_cli_runs_prints_the_run_paths(capsys) -> None:
    assert main(["runs", "--config", str(PARAMS), "--config", str(TINY)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "python-stdlib/none/bm25/none/0/zero_shot",
        "python-stdlib/no_comment/bm25/none/0/zero_shot",
        "python-stdlib/ordered_id+translation/bm25/none/0/zero_shot",
        *[
            f"python-stdlib/{attack}/nbow/ce/0/{inference}"
            for attack in ("none", "no_comment", "ordered_id+translation")
            for inference in ("confused", "not_confused")
        ],
        "python-stdlib/no_comment/transformer-sum/xent/0/confused",  # the tiny study's summarizer
    ]


def test_cli_runs_follows_the_grid(tmp_path, raw, capsys) -> None:
    data = copy.deepcopy(raw)
    data["grid"].update(datasets=["python-stdlib"], attacks=["no_comment"], models=["bm25"])
    data["grid"]["trained"].update(attacks=["no_comment"], seeds=[1], inference=["confused"])
    assert main(["runs", "--config", str(_write(tmp_path, data, "one.yaml"))]) == 0
    assert capsys.readouterr().out == (
        "python-stdlib/no_comment/bm25/none/0/zero_shot\npython-stdlib/no_comment/nbow/ce/1/confused\n"
        "python-stdlib/no_comment/transformer-sum/xent/0/not_confused\n"  # grid.summarization, narrowed by the grid
    )


def test_a_grid_dataset_without_an_entry_under_datasets_is_refused() -> None:
    import yaml as _yaml

    raw = _yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    del raw["datasets"]["python-stdlib"]
    with pytest.raises(ConfigError, match=r"datasets\.python-stdlib: missing; .*`\{\}` for the defaults"):
        validate_config(raw)


# ---------------------------------------------------------------------------------------------
# protocols and seed stability


def test_robustness_protocol_must_rank(tmp_path: Path, raw: dict[str, Any]) -> None:
    def change(data: dict[str, Any]) -> None:
        data["evaluation"]["protocols"] = ["full-corpus", "matching"]
        data["robustness"]["protocol"] = "matching"

    assert "has no MRR" in _error_of(tmp_path, raw, change)


def test_stability_groups_need_two_seeds_and_k_within_run_depth(tmp_path: Path, raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["grid"]["trained"] = {"models": ["nbow"], "losses": ["ce"], "seeds": [0], "inference": ["confused"]}
    assert load_config(_write(tmp_path, data, "one.yaml")).stability_groups() == []
    data["grid"]["trained"]["seeds"] = [0, 1, 2]
    config = load_config(_write(tmp_path, data, "three.yaml"))
    groups = config.stability_groups()
    assert len(groups) == len(config.datasets) * len(config.attacks)  # one model, loss and inference
    key, runs = groups[0]
    assert key.path == f"{config.datasets[0]}/{config.attacks[0]}/nbow/ce/confused"
    assert [run.seed for run in runs] == [0, 1, 2] and {run.path.rsplit("/", 2)[0] for run in runs} == {
        f"{config.datasets[0]}/{config.attacks[0]}/nbow/ce"
    }
    assert config.stability == {"k": 20, "protocol": "full-corpus"}

    def deep(d: dict[str, Any]) -> None:
        d["grid"]["trained"]["seeds"] = [0, 1]
        d["stability"]["k"] = 500

    assert "deeper than evaluation.run_depth" in _error_of(tmp_path, data, deep)

    def not_ranking(d: dict[str, Any]) -> None:
        d["stability"]["protocol"] = "gecs-100"

    assert "not a ranking protocol of evaluation.protocols" in _error_of(tmp_path, data, not_ranking)


# ---------------------------------------------------------------------------------------------
# per-dataset trained grid (grid.trained.datasets, grid.trained.seeds_by_dataset) and `csbench merge`


def _trained(raw: dict[str, Any], **given: Any) -> dict[str, Any]:
    """``raw`` with both local Python corpora in the grid and ``given`` as its trained grid."""
    data = copy.deepcopy(raw)
    data["grid"]["datasets"] = ["python-stdlib", "python-packages"]
    data["grid"]["trained"] = {"models": ["nbow"], "attacks": ["no_comment"], "losses": ["ce"], "seeds": [0]} | given
    data["grid"]["trained"].setdefault("inference", ["confused"])
    return data


def test_seeds_by_dataset_overrides_the_seeds_of_one_dataset(tmp_path: Path, raw: dict[str, Any]) -> None:
    data = _trained(raw, seeds_by_dataset={"python-packages": [3, 0, 4]}, inference=["confused", "not_confused"])
    config = load_config(_write(tmp_path, data, "seeds.yaml"))
    assert config.seeds_for("python-stdlib") == [0] and config.seeds_for("python-packages") == [3, 0, 4]
    trained_runs = [run for run in config.search_runs() if run.inference != "zero_shot"]
    assert [(r.dataset, r.seed, r.inference) for r in trained_runs] == [
        ("python-stdlib", 0, "confused"),
        ("python-stdlib", 0, "not_confused"),
        *(("python-packages", s, i) for s in (3, 0, 4) for i in ("confused", "not_confused")),
    ]
    assert [k.path for k in config.trainings() if k.model == "nbow"] == [
        "python-stdlib/no_comment/nbow/ce/0",
        *(f"python-packages/no_comment/nbow/ce/{s}" for s in (3, 0, 4)),
    ]
    # seed stability only where a dataset has two seeds or more
    groups = config.stability_groups()
    assert [key.path for key, _ in groups] == [
        "python-packages/no_comment/nbow/ce/confused",
        "python-packages/no_comment/nbow/ce/not_confused",
    ]
    assert [run.seed for run in groups[0][1]] == [3, 0, 4]
    # every seed some dataset trains with: what `csbench train --seed` accepts
    assert config.trained["seeds"] == [0, 3, 4]
    assert config.trained["seeds_by_dataset"] == {"python-packages": [3, 0, 4]}


def test_seeds_by_dataset_names_a_trained_dataset_and_takes_seeds(tmp_path: Path, raw: dict[str, Any]) -> None:
    message = _error_of(tmp_path, raw, lambda d: d.update(_trained(raw, seeds_by_dataset={"python-pakages": [1]})))
    assert "grid.trained.seeds_by_dataset.python-pakages" in message and "Did you mean 'python-packages'?" in message
    narrowed = _trained(raw, datasets=["python-stdlib"], seeds_by_dataset={"python-packages": [1, 2]})
    message = _error_of(tmp_path, raw, lambda d: d.update(narrowed))
    assert "dataset of grid.trained.datasets 'python-packages'" in message
    negative = _trained(raw, seeds_by_dataset={"python-packages": [-1]})
    assert "grid.trained.seeds_by_dataset.python-packages[0]" in _error_of(tmp_path, raw, lambda d: d.update(negative))


def test_trained_datasets_narrow_the_trained_runs_only(tmp_path: Path, raw: dict[str, Any]) -> None:
    config = load_config(_write(tmp_path, _trained(raw, datasets=["python-packages"]), "narrow.yaml"))
    runs = config.search_runs()
    assert {r.dataset for r in runs if r.inference == "zero_shot"} == {"python-stdlib", "python-packages"}
    assert {r.dataset for r in runs if r.inference != "zero_shot"} == {"python-packages"}
    assert [k.path for k in config.trainings() if k.model == "nbow"] == ["python-packages/no_comment/nbow/ce/0"]
    assert config.trained["datasets"] == ["python-packages"]
    assert load_config(PARAMS).trained["datasets"] == load_config(PARAMS).datasets  # default: all
    bad = _trained(raw, datasets=["python-stdlb"])
    message = _error_of(tmp_path, raw, lambda d: d.update(bad))
    assert "grid.trained.datasets[0]" in message and "Did you mean 'python-stdlib'?" in message


def test_no_comment_is_needed_only_by_not_confused_runs(tmp_path: Path, raw: dict[str, Any]) -> None:
    data = _trained(raw, attacks=["none"])
    data["robustness"]["attacks"] = ["none"]  # the robustness attacks must be trained on too
    config = load_config(_write(tmp_path, data, "none.yaml"))
    assert {k.attack for k in config.trainings() if k.model == "nbow"} == {"none"}

    def not_confused(d: dict[str, Any]) -> None:
        d.update(_trained(raw, attacks=["none"], inference=["not_confused"]))
        d["robustness"]["attacks"] = ["none"]

    assert "need 'no_comment' in grid.trained.attacks" in _error_of(tmp_path, raw, not_confused)


def test_dvc_limitations_name_what_dvc_yaml_cannot_run(tmp_path: Path, raw: dict[str, Any]) -> None:
    assert dvc_limitations(load_config(PARAMS)) == []
    data = _trained(raw, datasets=["python-packages"], attacks=["none"], seeds_by_dataset={"python-packages": [0, 1]})
    data["robustness"]["attacks"] = ["none"]
    notes = dvc_limitations(load_config(_write(tmp_path, data, "snakemake-only.yaml")))
    assert [note.split(" ", 1)[0] for note in notes] == [
        "grid.trained.datasets",
        "grid.trained.seeds_by_dataset",
        "grid.trained.attacks",
    ]
    assert "would also train on python-stdlib" in notes[0] and "python-packages: 0, 1" in notes[1]


def test_merged_yaml_is_the_overlay_as_one_valid_config(tmp_path: Path) -> None:
    config = load_config([PARAMS, TINY])
    text = merged_yaml(config)
    assert text.startswith(f"# csbench experiment config: {PARAMS} + {TINY}, merged")
    merged = load_config(_write(tmp_path, yaml.safe_load(text), "merged.yaml"))
    assert merged.raw == config.raw and [r.path for r in merged.runs()] == [r.path for r in config.runs()]


def test_cli_merge_writes_over_its_own_input_atomically(tmp_path: Path, capsys) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.read_text())
    assert main(["merge", "--config", str(params), "--config", str(TINY), "--output", str(params)]) == 0
    assert load_config(params).raw == load_config([PARAMS, TINY]).raw
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # no temporary file left
    assert main(["merge", "--config", str(PARAMS)]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == load_config(PARAMS).raw


def test_cli_merge_refuses_what_dvc_cannot_run_unless_forced(tmp_path: Path, raw: dict[str, Any], capsys) -> None:
    study = _write(tmp_path, _trained(raw, seeds_by_dataset={"python-packages": [0, 1]}), "study.yaml")
    out = tmp_path / "merged.yaml"
    assert main(["merge", "--config", str(study), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("csbench merge: error: ") and "grid.trained.seeds_by_dataset" in err and "--force" in err
    assert not out.exists()
    assert main(["merge", "--config", str(study), "--output", str(out), "--force"]) == 0
    assert load_config(out).seeds_for("python-packages") == [0, 1]


def test_validating_a_config_never_imports_torch() -> None:
    """Every pipeline job validates the config first: learning which parameters a model takes or
    which perturbations exist must not import torch (nlpaug imports it), some 3 s a job."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from csbench.config import load_config\n"
        f"for overlay in {[str(p) for p in sorted((PARAMS.parent / 'workflow/configs').glob('*.yaml'))]!r}:\n"
        f"    load_config([{str(PARAMS)!r}, overlay])\n"
        "print(sorted(m for m in ('torch', 'nlpaug', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_registered_hf_model_takes_every_hf_parameter(tmp_path: Path, raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["grid"]["trained"] = {"models": ["codebert"], "attacks": ["no_comment"], "seeds": [0]}
    data["models"]["codebert"] = {"projection_dim": 768, "pooling": "mean"}  # COBE's linear layer
    config = load_config(_write(tmp_path, data, "cobe-like.yaml"))
    assert config.model_params("codebert")["projection_dim"] == 768
    data["models"]["codebert"] = {"projection_dims": 768}
    with pytest.raises(ConfigError, match="projection_dim"):
        load_config(_write(tmp_path, data, "typo.yaml"))
