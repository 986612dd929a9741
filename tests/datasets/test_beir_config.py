"""A `kind: beir` dataset in the experiment config: validated before anything runs (each option against
its declaration, then what they say together), errors naming the file, line and key; what the config
then knows of it (its spec, options, judgements)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from csbench.config import ConfigError, load_config

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
COMMIT = "bc5efb7e9d437246ce393ed19d772e08e4a79535"


def _config(tmp_path: Path, entry: dict, protocols=("qrels",)):
    overlay = {
        "study": "beir-config",
        "grid": {"datasets": ["mine"], "attacks": ["none"], "models": ["bm25"], "trained": {"models": []},
                 "summarization": {"models": []}},
        "datasets": {"mine": entry},
        "robustness": {"datasets": [], "attacks": [], "protocol": protocols[0]},
        "stability": {"protocol": protocols[0]},
        "evaluation": {"protocols": list(protocols), "run_depth": 10},
    }  # fmt: skip
    file = tmp_path / "beir.yaml"
    file.write_text(yaml.safe_dump(overlay, sort_keys=False))
    return load_config([PARAMS, file])


def test_a_folder_dataset_is_a_beir_spec_with_judgements(tmp_path: Path) -> None:
    config = _config(tmp_path, {"kind": "beir", "path": str(tmp_path), "language": "python"})
    assert config.dataset_kind("mine") == "beir"
    spec = config.dataset_spec("mine")
    assert spec.kind == "beir" and spec.qrels is not None and config.has_qrels("mine")
    options = config.dataset_options("mine")
    assert options["path"] == str(tmp_path) and options["title"] == "prepend" and options["dedupe"] is False
    assert "kind" not in options
    assert config.graded_protocols == ["qrels"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "beir", "path": "/x", "hub": "a/b", "revision": COMMIT, "language": "python"},
         "beir.yaml:{hub}: datasets.mine.hub: a `kind: beir` dataset needs exactly one of `path` and `hub`"),
        ({"kind": "beir", "hub": "a/b", "language": "python"}, "datasets.mine.hub: a hub dataset needs `revision`"),
        ({"kind": "beir", "hub": "a/b", "revision": "main", "language": "python"},
         "datasets.mine.revision: 'main' is not a commit"),
        ({"kind": "beir", "path": "/x"}, "needs exactly one of `language` and `language_field`"),
        ({"kind": "beir", "path": "/x", "language": "python", "dedupe": "yes"}, "datasets.mine.dedupe: expected"),
        ({"kind": "beir", "path": "/x", "language": "python", "titel": "ignore"},
         "unknown option of BEIR dataset 'mine'; its options: kind, path, hub"),
    ],
)  # fmt: skip
def test_mistakes_are_refused_naming_the_key(tmp_path: Path, entry: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, entry)
    lines = (tmp_path / "beir.yaml").read_text().splitlines()
    hub = next((i for i, line in enumerate(lines, start=1) if line.strip().startswith("hub:")), 0)
    assert message.format(hub=hub) in str(caught.value)


def test_the_qrels_protocol_scores_a_dataset_without_judgements_too(tmp_path: Path) -> None:
    """A local corpus has no qrels: the protocol scores each query's own code (grade 1)."""
    config = _config(tmp_path, {"kind": "local-source", "language": "python", "source": "stdlib", "max_files": 3})
    assert not config.has_qrels("mine") and config.graded_protocols == ["qrels"]


def test_an_attack_of_another_language_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """A BEIR corpus of SQL: the clean study is valid (``none`` takes any language), a renaming attack is
    refused at validation, naming the attack's place in the grid and the dataset's language."""
    entry = {"kind": "beir", "path": str(tmp_path), "language": "sql"}
    assert _config(tmp_path, entry).attacks == ["none"]
    overlay = tmp_path / "attacks.yaml"
    overlay.write_text(yaml.safe_dump({"grid": {"attacks": ["none", "ordered_id"]}}))
    with pytest.raises(ConfigError, match=r"attacks.yaml:\d+: grid.attacks\[1\] on dataset 'mine' \(sql\): attack "
                       r"'ordered_id' is implemented for python"):  # fmt: skip
        load_config([PARAMS, tmp_path / "beir.yaml", overlay])
