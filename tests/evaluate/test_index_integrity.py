"""A run's index is stored without pickle and checked before it is read (issue #22, item 2).

`csbench index` writes a folder: ``index.json`` (schema, version, the pools' ids, each retriever's
state, the model it was built for), ``.npy`` arrays / bm25s folders, and ``SHA256SUMS`` over all of
them. `evaluate` and `robust` check the sums, the schema and the model before reading anything; an
``index.pkl`` placed there (a tampered object from a DVC remote, or an index of an older csbench) is
never unpickled.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT

from csbench import paths
from csbench.cli import main
from csbench.evaluate.runner import build_index, search
from csbench.models.bm25 import BM25Retriever
from csbench.models.csn import CSNEncoder
from csbench.models.encoder import DenseRetriever, load_encoder, save_encoder

# What this change adds, imported where used: the CLI tests then also run (and fail) on the old code.
SUMS_FILE = "SHA256SUMS"


def _api():
    from csbench.evaluate import runner
    from csbench.models import integrity

    return runner, integrity


RUN = ["--dataset", "python-stdlib", "--attack", "no_comment", "--model", "bm25"]
RUN_PATH = "python-stdlib/no_comment/bm25/none/0/zero_shot"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega", "rho"]


def word_pool(n: int = 12, language: str | None = "python") -> pd.DataFrame:
    """``n`` (at most 12) one-line Python functions, each named for one word, with a query naming it;
    a ``language`` column unless ``language`` is None."""
    pool = pd.DataFrame(
        {
            "id": [f"f{i}" for i in range(n)],
            "func_name": [f"get_{WORDS[i]}" for i in range(n)],
            "code": [f"def get_{WORDS[i]}(x):\n    return x.{WORDS[i]} + {WORDS[(i + 1) % n]}\n" for i in range(n)],
            "query": [f"return the {WORDS[i]} of x" for i in range(n)],
            "url": [f"u{i}" for i in range(n)],
        }
    )
    return pool if language is None else pool.assign(language=language)



class Payload:
    """A pickle that writes ``marker`` when it is loaded: what a tampered index.pkl could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A tiny project (one run: bm25 on 12 functions) whose index `csbench index` has written."""
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    raw["grid"].update(datasets=["python-stdlib"], attacks=["no_comment"], models=["bm25"], trained={"models": []})
    raw["evaluation"]["protocols"] = ["full-corpus"]
    (raw.get("models") or {}).pop("bm25", None)  # bm25 as registered
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump(raw))
    folder = tmp_path / "data/attacked/python-stdlib/no_comment"
    folder.mkdir(parents=True)
    word_pool().to_parquet(folder / "test.parquet", index=False)
    word_pool().iloc[0:0].to_parquet(folder / "codebase.parquet", index=False)
    _stamp_attacked(config)
    base = ["--config", str(config), *RUN]
    assert main(["-q", "index", *base]) == 0
    index = tmp_path / "results/index" / RUN_PATH
    return {"root": tmp_path, "config": config, "raw": raw, "base": base, "index": index}


def _stamp_attacked(config: Path) -> None:
    """Stamp the hand-made attacked folder as `csbench attack` would (issue #22 item 3: phases read
    only stamped inputs; the code before it has no stamps)."""
    try:
        from csbench.lineage import stamp_placed
    except ImportError:
        return
    from csbench.config import load_config

    stamp_placed(load_config([config]), "python-stdlib", "no_comment")


def _main(argv: list[str]) -> int | str:
    """``main``, or how it crashed (an unpickled payload returns what it likes; what counts then is
    whether it ran)."""
    try:
        return main(argv)
    except Exception as err:
        return f"crashed: {err!r}"


def _evaluate(project: dict, capsys: pytest.CaptureFixture) -> tuple[int | str, str]:
    capsys.readouterr()
    code = _main(["-q", "evaluate", *project["base"]])
    return code, capsys.readouterr().err


def test_the_index_is_a_folder_of_arrays_and_json_with_its_sums(project, capsys):
    folder = project["index"]
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert "index.json" in files and SUMS_FILE in files
    assert not [f for f in files if f.endswith((".pkl", ".pickle", ".pt", ".bin"))], files
    assert all(f.endswith((".npy", ".json")) or f == SUMS_FILE for f in files), files
    meta = json.loads((folder / "index.json").read_text())
    assert (meta["format"], meta["version"]) == ("csbench-index", 1)
    assert meta["model"]["name"] == "bm25" and meta["model"]["checkpoint"] is None
    assert meta["pools"]["test"]["ids"] == word_pool()["id"].tolist()
    _api()[1].verify_dir(folder, "re-make it")  # every file listed and matching
    assert (folder.stat().st_mode & 0o777) == 0o777 & ~_umask()  # not mkdtemp's 0700
    code, err = _evaluate(project, capsys)
    assert code == 0, err
    provenance = json.loads((project["root"] / paths.run_dir(RUN_PATH) / "provenance.json").read_text())
    assert {f"results/index/{RUN_PATH}/index.json", f"results/index/{RUN_PATH}/{SUMS_FILE}"} <= set(
        provenance["inputs"]
    )


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_malicious_pickle_beside_the_index_is_refused_and_never_loaded(project, capsys):
    marker = project["root"] / "pwned"
    (project["index"] / "index.pkl").write_bytes(pickle.dumps(Payload(marker)))
    for command in ("evaluate", "robust"):
        capsys.readouterr()
        code = _main(["-q", command, *project["base"]])
        err = capsys.readouterr().err
        assert not marker.exists(), f"csbench {command} executed the pickle ({code})"
        if command == "evaluate":
            assert code != 0
            assert f"results/index/{RUN_PATH}/index.pkl: not listed in" in err, err
            assert "re-run `csbench index`" in err and len(err.strip().splitlines()) == 1, err


def test_a_malicious_pickle_where_the_index_was_is_never_loaded(project, capsys):
    """An index folder holding only an index.pkl (an older csbench's layout, or a tampered pull)."""
    marker = project["root"] / "pwned"
    shutil.rmtree(project["index"])
    project["index"].mkdir()
    (project["index"] / "index.pkl").write_bytes(pickle.dumps(Payload(marker)))
    code, err = _evaluate(project, capsys)
    assert not marker.exists(), f"csbench evaluate executed the pickle ({code})"
    assert code != 0 and "index.json is missing: run `csbench index`" in err, err


def test_a_tampered_index_json_is_refused_naming_the_file(project, capsys):
    meta_file = project["index"] / "index.json"
    meta_file.write_text(meta_file.read_text().replace('"f0"', '"f9x"'))
    code, err = _evaluate(project, capsys)
    assert code != 0
    assert f"results/index/{RUN_PATH}/index.json: its SHA-256 does not match" in err, err
    assert f"delete results/index/{RUN_PATH} and re-run `csbench index`" in err, err


def test_a_pickled_npy_is_refused_even_with_matching_sums(project, capsys):
    """A remote that rewrites SHA256SUMS too (make pull catches that against dvc.lock): the arrays are
    still read without pickle, so an object array is refused instead of unpickled."""
    marker = project["root"] / "pwned"
    data = next(project["index"].rglob("data.csc.index.npy"))
    np.save(data, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    _api()[1].write_sums(project["index"])
    code, err = _evaluate(project, capsys)
    assert not marker.exists(), f"csbench evaluate executed the pickle ({code})"
    assert code != 0 and "allow_pickle=False" in err, err


def test_an_index_built_for_other_model_parameters_is_refused(project, capsys):
    raw = project["raw"]
    raw.setdefault("models", {})["bm25"] = {"k1": 0.9}
    project["config"].write_text(yaml.safe_dump(raw))
    code, err = _evaluate(project, capsys)
    assert code != 0 and "built for another model or other inputs than this run's (differs in: params)" in err, err


def test_an_index_of_another_test_pool_is_refused(project, capsys):
    attacked = project["root"] / "data/attacked/python-stdlib/no_comment/test.parquet"
    word_pool().iloc[::-1].to_parquet(attacked, index=False)
    _stamp_attacked(project["config"])  # the attack re-made (its stamp with it): only the index is stale
    code, err = _evaluate(project, capsys)
    # index.json records the SHA-256 of the attacked files it encoded (issue #22 item 3); the code
    # before it compared the pools' ids
    stale = (
        "built for another model or other inputs than this run's (differs in: inputs)",
        "the index's test pool is not",
    )
    assert code != 0 and any(message in err for message in stale), err


def test_an_index_without_sums_or_with_an_unknown_version_is_refused(project, capsys):
    (project["index"] / SUMS_FILE).unlink()
    code, err = _evaluate(project, capsys)
    assert code != 0 and f"{SUMS_FILE} is missing" in err, err
    meta_file = project["index"] / "index.json"
    meta_file.write_text(meta_file.read_text().replace('"version":1', '"version":2'))
    _api()[1].write_sums(project["index"])
    code, err = _evaluate(project, capsys)
    assert code != 0 and "not a csbench index of format 1" in err, err


# ------------------------------------------------------------------------------------------ dense


def _csn(tmp_path: Path) -> Path:
    pool = word_pool()
    params = {"architecture": "nbow", "dim": 16, "code_min_count": 1, "query_min_count": 1, "max_code_len": 40}
    encoder = CSNEncoder.from_training_data(pool["query"].tolist(), pool["code"].tolist(), params, seed=0)
    return save_encoder(encoder.eval(), tmp_path / "best")


def test_a_dense_index_round_trips_and_searches_as_the_fresh_one(tmp_path):
    runner, _ = _api()
    best = _csn(tmp_path)
    pool, loads = word_pool(), []

    def loader():
        loads.append(1)
        return load_encoder(best)

    index = build_index(lambda: DenseRetriever(load_encoder(best), batch_size=4), pool, ["full-corpus"])
    fresh, _ = search(index, pool, ["full-corpus"], 5, "r", progress=False)
    model = {"name": "nbow", "checkpoint": str(best)}
    index.save(tmp_path / "index", model)
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == [SUMS_FILE, "index.json", "test.vectors.npy"]
    loaded = runner.load_pool_index(tmp_path / "index", model, loader, "re-make it")
    assert loads == []  # the encoder is rebuilt on the first query, not when the index is read
    vectors = loaded.retrievers["test"].code_vectors
    assert vectors.dtype == np.float32 and np.array_equal(vectors, index.retrievers["test"].code_vectors)
    again, _ = search(loaded, pool, ["full-corpus"], 5, "r", progress=False)
    assert again["full-corpus"].ranks == fresh["full-corpus"].ranks
    assert again["full-corpus"].run_lines == fresh["full-corpus"].run_lines
    assert loads == [1]
    with pytest.raises(runner.IndexMismatchError, match="differs in: checkpoint"):
        runner.load_pool_index(tmp_path / "index", {**model, "checkpoint": "elsewhere"}, loader, "re-make it")


def test_a_tampered_npy_is_refused_naming_the_file(tmp_path):
    runner, integrity = _api()
    best = _csn(tmp_path)
    index = build_index(lambda: DenseRetriever(load_encoder(best)), word_pool(), ["full-corpus"])
    index.save(tmp_path / "index", {"name": "nbow"})
    vectors = tmp_path / "index/test.vectors.npy"
    array = np.load(vectors)
    array[0, 0] += 1.0
    np.save(vectors, array)
    message = r"test\.vectors\.npy: its SHA-256 does not match .*: re-make it$"
    with pytest.raises(integrity.IntegrityError, match=message):
        runner.load_pool_index(tmp_path / "index", {"name": "nbow"}, lambda: None, "re-make it")


def test_npy_reader_matches_np_load_and_refuses_object_arrays(tmp_path):
    _, integrity = _api()
    array_from_npy, IntegrityError = integrity.array_from_npy, integrity.IntegrityError
    for array in (np.arange(12, dtype=np.float32).reshape(3, 4), np.asfortranarray(np.eye(3)), np.zeros((0, 5))):
        np.save(tmp_path / "a.npy", array)
        read = array_from_npy(bytearray((tmp_path / "a.npy").read_bytes()), "a.npy")
        assert read.dtype == array.dtype and np.array_equal(read, array)
        assert read.flags.writeable  # as np.load's arrays
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(IntegrityError, match="object array"):
        array_from_npy(bytearray((tmp_path / "o.npy").read_bytes()), "o.npy")
    np.save(tmp_path / "a.npy", np.ones((4, 3), dtype=np.float32))
    with pytest.raises(IntegrityError, match="bytes for a float32 array of shape"):
        array_from_npy(bytearray((tmp_path / "a.npy").read_bytes())[:-3], "a.npy")


def test_a_checkpoint_is_verified_before_it_is_loaded(tmp_path):
    _, integrity = _api()
    best = _csn(tmp_path)
    weights = best / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    message = r"model\.safetensors: its SHA-256 does not match .* train again"
    with pytest.raises(integrity.IntegrityError, match=message):
        load_encoder(best)


def test_a_checkpoint_cannot_turn_on_remote_code_by_itself(tmp_path):
    best = _csn(tmp_path)
    meta = json.loads((best / "encoder.json").read_text())
    meta["params"]["trust_remote_code"] = True
    (best / "encoder.json").write_text(json.dumps(meta))
    _api()[1].write_sums(best)
    with pytest.raises(ValueError, match="the checkpoint sets trust_remote_code"):
        load_encoder(best)


def test_bm25_index_state_scores_as_the_fresh_retriever(tmp_path):
    runner, _ = _api()
    pool = word_pool()
    fresh = BM25Retriever(analyzer="subtokens", k1=0.9)
    fresh.index(pool)
    index = build_index(lambda: fresh, pool, ["full-corpus"])
    index.save(tmp_path / "index", {"name": "bm25"})
    loaded = runner.load_pool_index(tmp_path / "index", {"name": "bm25"}, None, "re-make it").retrievers["test"]
    assert loaded.params() == fresh.params()
    for query in [*pool["query"].tolist(), "Alpha of X", "nothing matches"]:
        assert np.array_equal(loaded.scores(query), fresh.scores(query))


def test_an_index_checked_out_as_links_loads(tmp_path):
    """DVC's symlink / hardlink cache types check files out as links into the cache: still verified."""
    runner, _ = _api()
    pool = word_pool()
    build_index(BM25Retriever, pool, ["full-corpus"]).save(tmp_path / "index", {"name": "bm25"})
    cache, targets = tmp_path / "cache", {}
    cache.mkdir()
    for i, path in enumerate(sorted(p for p in (tmp_path / "index").rglob("*") if p.is_file())):
        targets[path.name] = cache / str(i)
        path.replace(targets[path.name])
        path.symlink_to(targets[path.name])
    loaded = runner.load_pool_index(tmp_path / "index", {"name": "bm25"}, None, "re-make it")
    assert loaded.pool_ids["test"] == pool["id"].tolist()
    targets["index.json"].write_text(targets["index.json"].read_text().replace('"f0"', '"f9x"'))
    with pytest.raises(ValueError, match=r"index\.json: its SHA-256 does not match"):
        runner.load_pool_index(tmp_path / "index", {"name": "bm25"}, None, "re-make it")


def test_snakemakes_marker_in_a_checkpoint_is_not_an_unlisted_file(tmp_path):
    """Snakemake writes .snakemake_timestamp into a finished directory() output (checkpoints/.../best)."""
    best = _csn(tmp_path)
    (best / ".snakemake_timestamp").touch()
    load_encoder(best)
    (best / "extra.json").write_text("{}")
    with pytest.raises(ValueError, match=r"extra\.json: not listed in"):
        load_encoder(best)
