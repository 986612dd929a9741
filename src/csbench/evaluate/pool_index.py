"""A run's candidate pools, encoded once (:class:`PoolIndex`): saved by ``csbench index`` as a folder
of ``.npy`` arrays, bm25s folders and JSON with its ``SHA256SUMS`` (no pickle), and loaded back
(:func:`load_pool_index`) once every file matched its digest and the index its run's model."""

from __future__ import annotations

import functools
import importlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from csbench.evaluate.protocols import FUNCNAME_KIND
from csbench.models.integrity import IntegrityError, new_dir_beside, publish_dir, verify_dir

POOL_KINDS = ("test", "codebase", "valid", FUNCNAME_KIND)  # funcname: the FuncName test's texts


@dataclass
class PoolIndex:
    """The candidate pools of one run, indexed (encoded) once by the model: ``retrievers`` and
    ``pool_ids`` per pool kind (``test``, and ``codebase`` when a protocol searches the release's
    codebase). Saved by ``csbench index`` (:meth:`save`, no pickle) and reused for the clean queries
    and every perturbed query set (:func:`load_pool_index`), so a model encodes each pool once
    whatever the number of query sets."""

    retrievers: dict[str, Any]
    pool_ids: dict[str, list[str]]
    index_s: float = 0.0

    def efficiency(self) -> dict[str, float]:
        """Encoding throughput: candidate codes indexed per second (all pools)."""
        n = sum(len(ids) for ids in self.pool_ids.values())
        return {"indexed_codes": n, "index_codes_per_s": round(n / self.index_s, 1) if self.index_s > 0 else 0.0}

    def save(self, directory: Path, model: dict[str, Any]) -> str:
        """Write the index to the folder ``directory`` atomically (built beside it, then renamed):
        ``index.json`` (:data:`INDEX_SCHEMA`: the pools' ids, each retriever's state and the
        ``model`` it was built with), each retriever's arrays (``.npy`` / bm25s folders / JSON) and
        ``SHA256SUMS`` over all of them, written last. Returns the sums' digest."""
        tmp = new_dir_beside(directory)
        try:
            pools = {}
            for kind, retriever in self.retrievers.items():
                if not hasattr(retriever, "index_state"):
                    raise TypeError(f"{type(retriever).__name__} cannot be saved in an index (no index_state)")
                pools[kind] = {"ids": list(self.pool_ids[kind]), "retriever": retriever.index_state(tmp, kind)}
            meta = {
                "format": INDEX_FORMAT,
                "version": INDEX_VERSION,
                "model": model,
                "index_s": self.index_s,
                "pools": pools,
            }
            _check_index_meta(meta)
            text = json.dumps(meta, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            (tmp / INDEX_META).write_text(text + "\n", encoding="utf-8")
            return publish_dir(tmp, directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


INDEX_FORMAT = "csbench-index"
INDEX_VERSION = 1
INDEX_META = "index.json"  # the metadata; the folder's SHA256SUMS lists it and every array file
# The retriever types an index holds, by their INDEX_TYPE: imported on first use (torch for the neural ones).
RETRIEVER_TYPES: dict[str, tuple[str, str]] = {
    "bm25": ("csbench.models.bm25", "BM25Retriever"),
    "dense": ("csbench.models.encoder", "DenseRetriever"),
    "cross": ("csbench.models.cross", "CrossRetriever"),
    "api": ("csbench.models.api", "ApiRetriever"),
    "python": ("csbench.models.python", "PythonRetriever"),
    "llm": ("csbench.models.llm", "LlmMatcher"),
}
_FILE_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"}  # a file of the folder itself
INDEX_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "version", "model", "index_s", "pools"],
    "additionalProperties": False,
    "properties": {
        "format": {"const": INDEX_FORMAT},
        "version": {"const": INDEX_VERSION},
        "model": {"type": "object"},
        "index_s": {"type": "number", "minimum": 0},
        "pools": {
            "type": "object",
            "propertyNames": {"enum": list(POOL_KINDS)},
            "additionalProperties": {
                "type": "object",
                "required": ["ids", "retriever"],
                "additionalProperties": False,
                "properties": {
                    "ids": {"type": "array"},  # of strings: checked by _check_index_meta (fast for 1M ids)
                    "retriever": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {"enum": list(RETRIEVER_TYPES)},
                            "vectors": _FILE_NAME,
                            "codes": _FILE_NAME,
                            "fields": {
                                "type": "object",
                                "additionalProperties": {"anyOf": [_FILE_NAME, {"type": "null"}]},
                            },
                        },
                    },
                },
            },
        },
    },
}


def _check_index_meta(meta: dict[str, Any]) -> None:
    """``meta`` against :data:`INDEX_SCHEMA`; the pools' ids (a string each) are checked apart: a
    generic validator would spend a quarter of a second on 20,000 of them."""
    pools = meta.get("pools")
    if isinstance(pools, dict):
        shallow = {k: {**v, "ids": []} if isinstance(v, dict) and "ids" in v else v for k, v in pools.items()}
        _index_validator().validate({**meta, "pools": shallow})
        for kind, pool in pools.items():
            ids = pool["ids"]
            if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
                raise ValueError(f"pools.{kind}.ids: not a list of strings")
    else:
        _index_validator().validate(meta)


@functools.cache
def _index_validator() -> jsonschema.protocols.Validator:
    """The validator of :data:`INDEX_SCHEMA`, built (and the schema checked) once."""
    cls = jsonschema.validators.validator_for(INDEX_SCHEMA)
    cls.check_schema(INDEX_SCHEMA)
    return cls(INDEX_SCHEMA)


class IndexMismatchError(ValueError):
    """An index built for another model (parameters or checkpoint) or other inputs (the attacked
    files it encoded) than the run's."""


def load_pool_index(directory: Path, model: dict[str, Any], loader: Callable[[], Any] | None, remake: str) -> PoolIndex:
    """The index :meth:`PoolIndex.save` wrote to ``directory``, once every file matched its
    ``SHA256SUMS`` (:func:`csbench.models.integrity.verify_dir`) and ``index.json`` its schema; refused
    (:class:`IndexMismatchError`) when it was built for another ``model`` than the caller's.
    ``loader`` rebuilds a neural retriever's model on first use (from the config, never from the
    index); ``remake`` ends every error message. Nothing is unpickled: arrays are ``.npy`` read
    without pickle from the very bytes that were hashed, the rest JSON."""
    directory = Path(directory)
    files = verify_dir(directory, remake, keep=lambda name: "/" not in name)  # the top level: meta, arrays
    where = directory / INDEX_META
    try:
        meta = files.json(INDEX_META)
        _check_index_meta(meta)
    except (ValueError, jsonschema.ValidationError) as err:
        message = err.message if isinstance(err, jsonschema.ValidationError) else str(err)
        raise IntegrityError(f"{where}: not a csbench index of format {INDEX_VERSION} ({message}): {remake}") from None
    if meta["model"] != model:
        keys = sorted(k for k in {*meta["model"], *model} if meta["model"].get(k) != model.get(k))
        raise IndexMismatchError(
            f"{where}: built for another model or other inputs than this run's (differs in: {', '.join(keys)}): "
            f"{remake}"
        )
    retrievers, pool_ids = {}, {}
    for kind, pool in meta["pools"].items():
        module, name = RETRIEVER_TYPES[pool["retriever"]["type"]]
        cls = getattr(importlib.import_module(module), name)
        retrievers[kind] = cls.from_index_state(pool["retriever"], files, loader)
        pool_ids[kind] = pool["ids"]
    return PoolIndex(retrievers, pool_ids, float(meta["index_s"]))
