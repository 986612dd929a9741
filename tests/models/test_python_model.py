"""Bring your own model (issue #27 item 5): a user's class outside csbench (the package of
tests/fixtures/byo_model, installed for real with pip) evaluated through the config by class path and
by entry point, through the loader / retriever factory the phases use and through the CLI; the
vectors are the class's own; bad classes, bad outputs and bad entries fail with errors naming the key,
the class and the method; nothing is imported from data or from an index."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from byo_package import FIXTURE, PACKAGE, install_byo_package

from csbench.cli import main
from csbench.config import ConfigError, load_config
from csbench.evaluate.pool_index import load_pool_index
from csbench.evaluate.runner import build_index
from csbench.models.build import model_loader, retriever_factory
from csbench.models.python import PythonModelError, PythonRetriever
from csbench.models.python_spec import PYTHON_DEFAULTS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HASHING = f"{PACKAGE}.models:HashingEncoder"
# real Python modules of this interpreter's standard library: the mini corpus (53 documented functions)
STDLIB_FILES = ("textwrap.py", "shlex.py", "fnmatch.py", "colorsys.py", "calendar.py")


@pytest.fixture(scope="session")
def byo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture package installed by pip into a folder of its own (tests/byo_package.py)."""
    return install_byo_package(tmp_path_factory.mktemp("byo"))


def _forget_package() -> None:
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


@pytest.fixture
def installed(byo_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The installed package on sys.path (and PYTHONPATH, for subprocesses) for one test."""
    _forget_package()
    monkeypatch.syspath_prepend(str(byo_site))  # also invalidates the import caches
    monkeypatch.setenv("PYTHONPATH", str(byo_site))
    yield byo_site
    _forget_package()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mini study's project folder: the corpus of :data:`STDLIB_FILES`, prepared and attacked (none)."""
    stdlib = Path(sys.modules["os"].__file__).parent
    if not all((stdlib / name).is_file() for name in STDLIB_FILES):
        pytest.skip(f"the standard library's sources are not at {stdlib}")
    root = tmp_path_factory.mktemp("byo-project")
    (root / "corpus").mkdir()
    for name in STDLIB_FILES:
        shutil.copy(stdlib / name, root / "corpus" / name)
    config = _write_config(root, {})
    with _chdir(root):
        assert main(["--quiet", "prepare", "--config", str(config), "--dataset", "mini"]) == 0
        assert main(["--quiet", "attack", "--config", str(config), "--dataset", "mini", "--attack", "none"]) == 0
    return root


class _chdir:
    def __init__(self, path: Path) -> None:
        self.path, self.old = path, Path.cwd()

    def __enter__(self) -> None:
        import os

        os.chdir(self.path)

    def __exit__(self, *_: Any) -> None:
        import os

        os.chdir(self.old)


def _write_config(
    root: Path, models: dict[str, dict[str, Any]], name: str = "study.yaml", robustness: bool = False
) -> Path:
    config: dict[str, Any] = {
        "study": "byo",
        "grid": {"datasets": ["mini"], "attacks": ["none"], "models": ["bm25", *models]},
        "datasets": {"mini": {"kind": "local-source", "language": "python", "source": str(root / "corpus")}},
        "extraction": {"min_query_tokens": 3, "min_code_lines": 3, "split": {"train": 0, "valid": 0, "test": 100}},
        "models": models,
        "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
    }
    if robustness:  # one curve point: every query's case changed at ratio 0.3 (no nlpaug)
        config["robustness"] = {
            **{"datasets": ["mini"], "attacks": ["none"], "perturbations": ["case"], "ratios": [0.3]},
            **{"fixed": [], "seed": 0, "protocol": "full-corpus"},
        }
    path = root / name
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _pool(project: Path) -> pd.DataFrame:
    return pd.read_parquet(project / "data/attacked/mini/none/test.parquet")


def _retriever(project: Path, model: str, entry: dict[str, Any]):
    """A retriever of ``model`` (defined by ``entry``) from the config, as the index phase builds it."""
    config = load_config([_write_config(project, {model: entry}, f"{model}.yaml")])
    spec, params = config.model_spec(model), config.model_params(model)
    return retriever_factory(spec, params)(), spec, params


def _own_code_ranks(retriever, pool: pd.DataFrame) -> np.ndarray:
    """The rank (1 = first) of each query's own code among the pool's codes."""
    retriever.prepare_queries(pool["query"].tolist())
    ranks = []
    for i, query in enumerate(pool["query"]):
        scores = retriever.scores(query)
        ranks.append(1 + int(np.sum(scores > scores[i])))
    return np.asarray(ranks)


# --------------------------------------------------------------------------- the installed package


def test_the_fixture_package_is_installed_with_its_entry_point(installed: Path) -> None:
    (found,) = [ep for ep in importlib.metadata.entry_points(group="csbench.models") if ep.name == "hashing"]
    assert found.value == HASHING and found.dist.name == "csbench-byo-example" and found.dist.version == "0.1.0"
    assert (installed / PACKAGE / "models.py").is_file()
    assert not (FIXTURE / "build").exists() and not list(FIXTURE.rglob("*.egg-info"))  # built from a copy


# --------------------------------------------------------------------------- through the factory


@pytest.mark.parametrize("entry", [{"class": HASHING}, {"entry_point": "hashing"}], ids=["class", "entry_point"])
def test_a_user_class_ranks_the_pool_with_its_own_vectors(installed: Path, project: Path, entry: dict) -> None:
    pool = _pool(project)
    retriever, spec, _ = _retriever(project, "mine", {"family": "python", **entry, "init": {"dim": 256}})
    assert spec.family == "python" and spec.zero_shot and not spec.trainable
    assert isinstance(retriever, PythonRetriever)
    retriever.index(pool)
    from csbench_byo_example.models import HashingEncoder

    own = HashingEncoder(dim=256)
    codes = own.encode_corpus([{"title": "", "text": code} for code in pool["code"]], batch_size=128)
    assert np.array_equal(retriever.code_vectors, codes)
    queries = retriever.query_matrix(pool["query"].tolist())
    assert np.array_equal(queries, own.encode_queries(pool["query"].tolist(), batch_size=128))
    model = retriever.encoder.model
    assert model.calls == [("encode_corpus", len(pool), 128), ("encode_queries", len(pool), 128)]
    ranks = _own_code_ranks(retriever, pool)
    mrr = float(np.mean(1 / ranks))
    assert len(pool) == 53 and mrr > 0.75, mrr  # a query shares words with its code: far above chance (~0.09)
    source = retriever.model_source()
    assert source["class"] == HASHING and source["distribution"] == "csbench-byo-example"
    assert source["version"] == "0.1.0" and source["revision"] == "hashing-v1"  # the class's own revision
    assert source["entry_point"] == ("csbench.models:hashing" if "entry_point" in entry else None)


def test_the_config_sets_batch_size_revision_init_corpus_format_and_cosine(installed: Path, project: Path) -> None:
    pool = _pool(project).head(7)
    entry = {
        "family": "python",
        "class": HASHING,
        "init": {"dim": 64, "sep": " "},
        "batch_size": 3,
        "revision": "mine-2",
        "corpus_format": "texts",
        "similarity": "cosine",
        "encode_kwargs": {"show_progress_bar": False},
    }
    retriever, _, _ = _retriever(project, "mine", entry)
    # corpus_format: texts hands strings to an encode_corpus that reads dicts: its own error, named
    with pytest.raises(PythonModelError, match=r"HashingEncoder\.encode_corpus raised AttributeError: .*texts\)$"):
        retriever.index(pool)
    retriever, _, params = _retriever(project, "mine", {**entry, "corpus_format": "dicts"})
    assert params["batch_size"] == 3 and retriever.encoder.similarity == "cosine"
    retriever.index(pool)
    assert retriever.encoder.model.calls == [("encode_corpus", 7, 3)]
    assert np.allclose(np.linalg.norm(retriever.code_vectors, axis=1), 1.0)
    assert retriever.model_source()["revision"] == "mine-2"  # the config's revision over the class's


def test_a_class_with_encode_alone_is_called_as_sentence_transformers_are(installed: Path, project: Path) -> None:
    pool = _pool(project).head(9)
    entry = {"family": "python", "class": f"{PACKAGE}.models:HashingSentenceEncoder", "corpus_format": "texts"}
    retriever, _, _ = _retriever(project, "sbert-like", entry)
    retriever.index(pool)
    vectors = retriever.query_matrix(pool["query"].tolist())
    from csbench_byo_example.models import HashingEncoder

    own = HashingEncoder()
    assert np.array_equal(retriever.code_vectors, own.encode_corpus([{"text": c} for c in pool["code"]], 128))
    assert np.array_equal(vectors, own.encode_queries(pool["query"].tolist(), 128))
    assert retriever.encoder.model.calls == [("encode", 9, 128), ("encode", 9, 128)]


def test_the_index_keeps_vectors_and_source_and_reloads_the_model_from_the_config(
    installed: Path, project: Path, tmp_path: Path
) -> None:
    pool = _pool(project)
    entry = {"family": "python", "entry_point": "hashing"}
    config = load_config([_write_config(project, {"mine": entry}, "index.yaml")])
    spec, params = config.model_spec("mine"), config.model_params("mine")
    built = build_index(retriever_factory(spec, params), pool, ["full-corpus"])
    built.save(tmp_path / "index", {"params": params})
    meta = json.loads((tmp_path / "index/index.json").read_text())
    state = meta["pools"]["test"]["retriever"]
    assert state["type"] == "python" and state["vectors"] == "test.vectors.npy"
    assert state["python_model"]["class"] == HASHING and state["python_model"]["version"] == "0.1.0"
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == ["SHA256SUMS", "index.json", "test.vectors.npy"]
    fresh = _own_code_ranks(built.retrievers["test"], pool)
    loaded = load_pool_index(tmp_path / "index", {"params": params}, model_loader(spec, params), "remake it")
    retriever = loaded.retrievers["test"]
    assert isinstance(retriever, PythonRetriever) and retriever._encoder is None  # loaded on first query
    assert np.array_equal(_own_code_ranks(retriever, pool), fresh)
    # the same entry with another revision (the class changed on purpose) refuses the old vectors
    other = model_loader(spec, {**params, "revision": "v2"})
    stale = load_pool_index(tmp_path / "index", {"params": params}, other, "remake it").retrievers["test"]
    with pytest.raises(PythonModelError, match=r"revision 'hashing-v1' -> 'v2'.*csbench index"):
        stale.scores(pool["query"].iloc[0])


def test_nothing_named_by_an_index_or_the_data_is_imported(installed: Path, project: Path, tmp_path: Path) -> None:
    """The index's ``python_model`` is compared with what the config loads, never imported; a pool
    whose texts look like class paths is text."""
    pool = _pool(project).head(5).copy()
    pool["code"] = ["os:system", "subprocess:run", "never_imported_module:Thing", "shutil:rmtree", "x:y"]
    entry = {"family": "python", "class": HASHING}
    config = load_config([_write_config(project, {"mine": entry}, "data.yaml")])
    spec, params = config.model_spec("mine"), config.model_params("mine")
    built = build_index(retriever_factory(spec, params), pool, ["full-corpus"])
    built.save(tmp_path / "index", {"params": params})
    saved = json.loads((tmp_path / "index/index.json").read_text())["pools"]["test"]["retriever"]
    forged = PythonRetriever.from_index_state(
        {**saved, "python_model": {**saved["python_model"], "class": "never_imported_module:Thing"}},
        _verified(tmp_path / "index"),
        model_loader(spec, params),
    )
    with pytest.raises(PythonModelError, match="class 'never_imported_module:Thing' -> 'csbench_byo_example"):
        forged.scores("run a command")
    assert "never_imported_module" not in sys.modules
    assert built.retrievers["test"].code_vectors.shape == (5, 512)


def _verified(directory: Path):
    from csbench.models.integrity import verify_dir

    return verify_dir(directory, "remake", keep=lambda name: "/" not in name)


# --------------------------------------------------------------------------- errors


def _bad_module(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text("import numpy as np\n\n" + body, encoding="utf-8")
    importlib.invalidate_caches()
    return folder


BAD_CLASSES = """
class Dicts:
    def encode_queries(self, queries, batch_size, **kwargs):
        return np.ones((len(queries), 4))

    def encode_corpus(self, corpus, batch_size, **kwargs):
        return np.ones((len(corpus), 4))


class NoCorpus:
    def encode_queries(self, queries, batch_size, **kwargs):
        return np.ones((len(queries), 4))


class Nothing:
    pass


class Flat(Dicts):
    def encode_corpus(self, corpus, batch_size, **kwargs):
        return np.ones(len(corpus))


class Short(Dicts):
    def encode_corpus(self, corpus, batch_size, **kwargs):
        return np.ones((len(corpus) - 1, 4))


class NaN(Dicts):
    def encode_corpus(self, corpus, batch_size, **kwargs):
        out = np.ones((len(corpus), 4))
        out[2, 1] = np.nan
        return out


class Narrow(Dicts):
    def encode_queries(self, queries, batch_size, **kwargs):
        return np.ones((len(queries), 3))


class Tensors(Dicts):
    def encode_queries(self, queries, batch_size, **kwargs):
        import torch
        return [torch.full((4,), float(i)) for i in range(len(queries))]

    def encode_corpus(self, corpus, batch_size, **kwargs):
        import torch
        return torch.arange(len(corpus) * 4, dtype=torch.float64).reshape(len(corpus), 4)


class Strict:
    def __init__(self, width):
        self.width = width

    def encode_queries(self, queries, batch_size, *, prompt_name):
        return np.full((len(queries), self.width), 1.0 if prompt_name == "q" else 0.0)

    def encode_corpus(self, corpus, batch_size, *, prompt_name):
        return np.ones((len(corpus), self.width))
"""


@pytest.fixture
def bad_folder(tmp_path: Path) -> Iterator[Path]:
    folder = _bad_module(tmp_path / "user_code", "byo_bad_classes", BAD_CLASSES)
    yield folder
    sys.modules.pop("byo_bad_classes", None)
    if str(folder) in sys.path:
        sys.path.remove(str(folder))


def _load(name: str, **params: Any):
    return model_loader(_spec(name), {"family": "python", **PYTHON_DEFAULTS, **params})()


def _spec(name: str):
    from csbench.models import ModelSpec, declared_params, python_custom_defaults

    return ModelSpec(name, "", "python", True, False, python_custom_defaults, params_fn=declared_params("python"))


def _index(name: str, folder: Path, cls: str, codes: int = 5, **params: Any) -> PythonRetriever:
    params = {"family": "python", **PYTHON_DEFAULTS, "class": f"byo_bad_classes:{cls}", "path": str(folder), **params}
    retriever = retriever_factory(_spec(name), params)()
    retriever.index(pd.DataFrame({"code": [f"def f{i}(): pass" for i in range(codes)], "language": "python"}))
    return retriever


def test_a_class_path_that_does_not_import_names_the_key_the_module_and_sys_path(tmp_path: Path) -> None:
    with pytest.raises(PythonModelError) as err:
        _load("mine", **{"class": "not_installed_pkg.models:Encoder"})
    message = str(err.value)
    assert message.startswith("models.mine.class: cannot import module 'not_installed_pkg.models'")
    assert "pip install" in message and "models.mine.path" in message and "sys.path:" in message
    folder = _bad_module(tmp_path / "code", "byo_broken_import", "import not_installed_dependency\n")
    with pytest.raises(PythonModelError, match=r"models\.b\.class: module 'byo_broken_import' was found but imports "):
        _load("b", **{"class": "byo_broken_import:X", "path": str(folder)})
    with pytest.raises(PythonModelError, match=r"models\.c\.class: module 'json' has no attribute 'Encoder'"):
        _load("c", **{"class": "json:Encoder"})
    with pytest.raises(PythonModelError, match=r"models\.d\.class: 'json\.Encoder' is not a class path"):
        _load("d", **{"class": "json.Encoder"})
    sys.modules.pop("byo_broken_import", None)


def test_an_unknown_entry_point_lists_the_installed_ones(installed: Path) -> None:
    with pytest.raises(PythonModelError) as err:
        _load("mine", entry_point="hashng")
    assert str(err.value).startswith("models.mine.entry_point: no entry point 'hashng'; installed in csbench.models: ")
    assert f"hashing = {HASHING} (csbench-byo-example 0.1.0)" in str(err.value)


def test_a_class_without_the_methods_says_which_it_lacks(bad_folder: Path) -> None:
    with pytest.raises(PythonModelError, match=r"models\.m: byo_bad_classes:NoCorpus lacks encode_corpus: a model"):
        _load("m", **{"class": "byo_bad_classes:NoCorpus", "path": str(bad_folder)})
    with pytest.raises(PythonModelError, match=r"byo_bad_classes:Nothing lacks encode_queries and encode_corpus"):
        _load("m", **{"class": "byo_bad_classes:Nothing", "path": str(bad_folder)})
    with pytest.raises(PythonModelError, match=r"models\.m: byo_bad_classes:Strict\(\*\*init\) raised TypeError"):
        _load("m", **{"class": "byo_bad_classes:Strict", "path": str(bad_folder)})


@pytest.mark.parametrize(
    ("cls", "codes", "match"),
    [
        ("Flat", 5, r"byo_bad_classes:Flat\.encode_corpus returned an array of shape \(5,\) for 5 texts"),
        ("Short", 5, r"byo_bad_classes:Short\.encode_corpus returned an array of shape \(4, 4\) for 5 texts"),
        ("NaN", 5, r"byo_bad_classes:NaN\.encode_corpus returned non-finite values \(NaN or inf\) in 1 of 5 rows"),
    ],
)
def test_unusable_vectors_name_the_class_and_the_method(bad_folder: Path, cls: str, codes: int, match: str) -> None:
    with pytest.raises(PythonModelError, match=rf"^models\.m: {match}"):
        _index("m", bad_folder, cls, codes)


def test_queries_and_codes_must_share_a_width_and_tensors_are_converted(bad_folder: Path) -> None:
    narrow = _index("m", bad_folder, "Narrow")
    with pytest.raises(PythonModelError, match=r"Narrow\.encode_queries returned 3-dimensional vectors.* had 4"):
        narrow.query_matrix(["find a file"])
    tensors = _index("m", bad_folder, "Tensors", codes=3)
    assert tensors.code_vectors.dtype == np.float32
    assert np.array_equal(tensors.code_vectors, np.arange(12, dtype=np.float32).reshape(3, 4))
    assert np.array_equal(tensors.query_matrix(["a", "b"]), [[0] * 4, [1] * 4])
    # a class whose methods want MTEB's keyword-only prompt_name gets it through encode_kwargs, with init
    strict = _index("m", bad_folder, "Strict", init={"width": 2}, encode_kwargs={"prompt_name": "q"})
    assert np.array_equal(strict.query_matrix(["x"]), [[1.0, 1.0]])


# --------------------------------------------------------------------------- validation


def _validate(root: Path, entry: dict[str, Any]):
    (root / "corpus").mkdir(exist_ok=True)
    return load_config([_write_config(root, {"mine": {"family": "python", **entry}})])


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"class": "pkg.module.Class"}, r"models\.mine\.class: 'pkg\.module\.Class' is not a class path"),
        ({"class": "pkg module:Class"}, r"models\.mine\.class: 'pkg module:Class' is not a class path"),
        ({}, r"models\.mine: a `family: python` model names its class by exactly one of `class`.*sets neither"),
        (
            {"class": "json:JSONDecoder", "entry_point": "x"},
            r"models\.mine: a `family: python` .*exactly one of `class`.*sets both",
        ),
        ({"class": "not_installed_pkg.mod:C"}, r"models\.mine\.class: no module 'not_installed_pkg'.*pip install"),
        ({"entry_point": "nope"}, r"models\.mine\.entry_point: no entry point 'nope'"),
        ({"class": "json:JSONDecoder", "batch_size": 0}, r"models\.mine\.batch_size: 0 is less than the minimum"),
        ({"class": "json:JSONDecoder", "corpus_format": "list"}, r"models\.mine\.corpus_format: 'list' is not one"),
        ({"class": "json:JSONDecoder", "similarity": "cos_sim"}, r"models\.mine\.similarity: 'cos_sim' is not one"),
        ({"class": "json:JSONDecoder", "modle": "x"}, r"models\.mine: unknown parameter 'modle'"),
    ],
)
def test_validation_refuses_a_bad_entry_at_its_file_and_line(tmp_path: Path, entry: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=rf"study\.yaml:\d+: {match}"):
        _validate(tmp_path, entry)


def test_validation_runs_no_user_code(tmp_path: Path) -> None:
    """``csbench validate`` finds the module without importing it (an import with side effects, or a
    slow one, happens only in the jobs that encode)."""
    marker = tmp_path / "imported"
    body = f"from pathlib import Path\nPath({str(marker)!r}).write_text('yes')\n\nclass Model:\n    pass\n"
    folder = _bad_module(tmp_path / "user_code", "byo_side_effect", body)
    config = _validate(tmp_path, {"class": "byo_side_effect:Model", "path": str(folder)})
    assert config.model_spec("mine").family == "python"
    assert main(["--quiet", "validate", "--config", str(tmp_path / "study.yaml")]) == 0
    assert not marker.exists() and "byo_side_effect" not in sys.modules and str(folder) not in sys.path
    with pytest.raises(PythonModelError, match="byo_side_effect:Model lacks encode_queries and encode_corpus"):
        _load("mine", **{"class": "byo_side_effect:Model", "path": str(folder)})
    assert marker.read_text() == "yes"  # imported when loaded, as the config asked
    sys.modules.pop("byo_side_effect", None)
    sys.path.remove(str(folder))


def test_validation_finds_the_installed_package_and_entry_point(installed: Path, tmp_path: Path) -> None:
    _forget_package()
    for entry in ({"class": HASHING}, {"entry_point": "hashing"}):
        assert _validate(tmp_path, entry).model_params("mine")["family"] == "python"
    assert PACKAGE not in sys.modules
    # in a fresh process, as every job validates: neither the user's package nor torch is imported
    code = (
        "import sys\nfrom csbench.config import load_config\n"
        f"config = load_config([{str(tmp_path / 'study.yaml')!r}])\nconfig.model_spec('mine')\n"
        f"print(sorted(m for m in ('torch', {PACKAGE!r}, 'csbench.models.python') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]


# --------------------------------------------------------------------------- the CLI


def test_index_and_evaluate_through_the_cli_by_class_and_by_entry_point(installed: Path, project: Path) -> None:
    models = {
        "byo-class": {"family": "python", "class": HASHING, "init": {"dim": 256}},
        "byo-entry": {"family": "python", "entry_point": "hashing", "init": {"dim": 256}},
    }
    config = _write_config(project, models, "cli.yaml", robustness=True)
    scores = {}
    with _chdir(project):
        assert main(["--quiet", "validate", "--config", str(config)]) == 0
        for model in models:
            args = ["--config", str(config), "--dataset", "mini", "--attack", "none", "--model", model]
            assert main(["--quiet", "index", *args]) == 0
            assert main(["--quiet", "evaluate", *args]) == 0
            run = Path(f"results/runs/mini/none/{model}/none/0/zero_shot")
            metrics = json.loads((run / "metrics.json").read_text())
            scores[model] = {s["metric"]: s["value"] for s in metrics["scores"] if s["protocol"] == "full-corpus"}
            source = json.loads((run / "provenance.json").read_text())["model_source"]
            assert source["class"] == HASHING and source["revision"] == "hashing-v1"
            assert (source["distribution"], source["version"]) == ("csbench-byo-example", "0.1.0")
            assert source["entry_point"] == ("csbench.models:hashing" if model == "byo-entry" else None)
            index = Path(f"results/index/mini/none/{model}/none/0/zero_shot")
            assert np.load(index / "test.vectors.npy", allow_pickle=False).shape == (53, 256)
    assert scores["byo-class"] == scores["byo-entry"] and scores["byo-class"]["mrr"] > 0.75, scores
    # the robustness point reuses the saved index, the model reloaded from the config for the queries
    args = ["--config", str(config), "--dataset", "mini"]
    run_args = [*args, "--attack", "none", "--model", "byo-entry"]
    with _chdir(project):
        assert main(["--quiet", "perturb", *args, "--perturbation", "case"]) == 0
        assert main(["--quiet", "robust", *run_args]) == 0
        assert main(["--quiet", "robustness", *run_args]) == 0
        curve = json.loads(Path("results/robustness/mini/none/byo-entry/none/0/zero_shot/robustness.json").read_text())
    assert curve["curves"]["case"]["0"] == pytest.approx(scores["byo-entry"]["mrr"])  # the clean run's MRR
    assert 0 < curve["curves"]["case"]["0.3"] < curve["curves"]["case"]["0"]  # case changes its subtokens
    assert 0 < curve["summary"]["per_perturbation"]["case"]["ir_auc"] <= 1
