"""Bring your own model (family ``python``): a user's encoder class, loaded from an installed package or
a folder the config names, evaluated as a zero-shot bi-encoder by every protocol, the robustness
points and matching, like a registered one (parameters: :mod:`csbench.models.python_spec`).

The protocol is the one BEIR and MTEB (v1) users already implement, so their classes work unchanged:

- ``encode_queries(queries: list[str], batch_size: int, **kwargs) -> ndarray`` and
  ``encode_corpus(corpus: list[dict[str, str]], batch_size: int, **kwargs) -> ndarray`` where each
  document is ``{"title": ..., "text": ...}``: BEIR's ``DenseRetrievalExactSearch`` calls
  ``self.model.encode_queries(queries, batch_size=..., show_progress_bar=..., convert_to_tensor=...)``
  and ``self.model.encode_corpus(corpus[start:end], batch_size=..., ...)`` with the corpus as a list of
  such dicts (beir-cellar/beir ``beir/retrieval/search/dense/exact_search.py`` at
  b8fe0a89374925d4c618e290589af17d8193bf99; its ``SentenceBERT`` model joins ``title`` and ``text``:
  ``beir/retrieval/models/sentence_bert.py`` at 131004f873f5583898c4dfb225829811013f7e75). MTEB v1 did
  the same (embeddings-benchmark/mteb ``mteb/evaluation/evaluators/RetrievalEvaluator.py`` at
  c985d024e7a0fd51d3748639bff3d39b922ea8ba: ``DenseRetrievalExactSearch`` is adapted from BEIR's and
  ``is_dres_compatible`` asks for callable ``encode_queries`` and ``encode_corpus``);
- or ``encode(texts: list[str], batch_size: int, **kwargs)`` alone (sentence-transformers style),
  which MTEB v1's ``DRESModel`` wraps the same way (queries as they are, documents as
  ``(title + " " + text).strip()``, which with csbench's empty titles is the code);
- optional ``name`` and ``revision`` attributes (MTEB's ``mteb_model_meta.revision`` too), recorded.

Each call passes ``batch_size`` (``models.<name>.batch_size``) and the entry's ``encode_kwargs``; the
result may be an ndarray, a torch tensor or a list of 1-D tensors / arrays (BEIR's annotated return
types), converted to float32 and checked: 2-D, one row per text, finite, the same width for queries
and codes; else the error names the class and the method. Scores are inner products (BEIR's ``dot``),
or cosines with ``similarity: cosine`` (BEIR's ``cos_sim``; the vectors are normalised).

:class:`PythonRetriever` is a :class:`csbench.models.encoder.DenseRetriever` whose one hook ``encode``
asks the user's object, so the pool index keeps the vectors (``.npy``, no pickle) and a retriever read
back from it gets its model from the config, never from the index: the index only records which class,
distribution and revision made its vectors (:class:`ModelSource`) and refuses a reload by another.

Safety: the class to import and the folder to search come from the config alone (a user's choice, as
``trust_remote_code``); nothing of a dataset, an index or a downloaded file is ever imported.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from csbench.models.encoder import DenseRetriever
from csbench.models.integrity import VerifiedDir
from csbench.models.python_spec import (
    ENTRY_POINT_GROUP,
    entry_point_list,
    import_hint,
    installed_entry_points,
    split_class_path,
)

QUERY_METHOD, CORPUS_METHOD, ENCODE_METHOD = "encode_queries", "encode_corpus", "encode"

log = logging.getLogger("csbench")


@dataclass(frozen=True)
class ModelSource:
    """Where a user's model came from, for provenance and for the index's identity: the class
    (``module:QualName`` of what was called), the entry point it was named by, the distribution that
    ships it and its version (None for a module found on ``path`` or outside any distribution), the
    revision (the config's, else the class's ``revision``), and the object's ``name``."""

    cls: str
    entry_point: str | None
    distribution: str | None
    version: str | None
    revision: str | None
    name: str | None

    def as_dict(self) -> dict[str, Any]:
        return {("class" if k == "cls" else k): v for k, v in asdict(self).items()}

    def identity(self) -> dict[str, Any]:
        """What must match between the index's vectors and the model that encodes its queries."""
        return {k: v for k, v in self.as_dict().items() if k in ("class", "distribution", "version", "revision")}


class PythonModelError(ValueError):
    """A user's model that cannot be loaded or gave vectors csbench cannot use; the message names the
    config key or the class and method."""


def _prepend_path(path: str | None) -> str | None:
    """Put the config's ``path`` (resolved from the working folder: the project root in every job)
    first on ``sys.path``, once; return it."""
    if not path:
        return None
    folder = str(Path(path).resolve())
    if not Path(folder).is_dir():
        raise PythonModelError(f"path {path!r} ({folder}) is not a folder")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return folder


def _import_class(name: str, class_path: str, path: str | None) -> Any:
    """The object ``module:attr.attr`` names, imported; errors name ``models.<name>.class``."""
    key = f"models.{name}.class"
    try:
        module_name, attribute = split_class_path(class_path)
    except ValueError as err:
        raise PythonModelError(f"{key}: {err}") from None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if module_name == missing or module_name.startswith(f"{missing}."):
            raise PythonModelError(
                f"{key}: cannot import module {module_name!r} ({err}): {import_hint(path).replace('<name>', name)}"
            ) from err
        raise PythonModelError(
            f"{key}: module {module_name!r} was found but imports {missing!r}, which is not installed: {err}"
        ) from err
    except Exception as err:  # the user's module raised while it was imported
        raise PythonModelError(f"{key}: importing {module_name!r} failed: {type(err).__name__}: {err}") from err
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise PythonModelError(f"{key}: module {module_name!r} has no attribute {attribute!r} ({class_path})")
        target = getattr(target, part)
    return target


def _entry_point(name: str, entry: str) -> importlib.metadata.EntryPoint:
    found = [ep for ep in installed_entry_points() if ep.name == entry]
    if not found:
        raise PythonModelError(f"models.{name}.entry_point: no entry point {entry!r}; {entry_point_list()}")
    if len(found) > 1:
        dists = ", ".join(f"{ep.value} ({ep.dist.name if ep.dist else '?'})" for ep in found)
        raise PythonModelError(f"models.{name}.entry_point: {entry!r} is declared more than once: {dists}")
    return found[0]


def _distribution_of(module_name: str, loaded_from: str | None) -> tuple[str | None, str | None]:
    """``(name, version)`` of the installed distribution that ships ``module_name``'s top-level package
    (``importlib.metadata.packages_distributions``), None for a module found on the config's ``path``."""
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if loaded_from and file and Path(file).resolve().is_relative_to(loaded_from):
        return None, None
    names = sorted(importlib.metadata.packages_distributions().get(module_name.split(".")[0], []))
    if not names:
        return None, None
    try:
        return names[0], importlib.metadata.version(names[0])
    except importlib.metadata.PackageNotFoundError:
        return names[0], None


def _string_attribute(obj: Any, attribute: str) -> str | None:
    value = getattr(obj, attribute, None)
    return value if isinstance(value, str) and value else None


def _own_revision(model: Any) -> str | None:
    """The model's ``revision``, or its MTEB ``mteb_model_meta.revision``."""
    meta = getattr(model, "mteb_model_meta", None)
    return _string_attribute(model, "revision") or _string_attribute(meta, "revision")


def _qualified(obj: Any) -> str:
    cls = obj if inspect.isclass(obj) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


class PythonEncoder:
    """A user's model object seen as an encoder: :meth:`embed` (texts, side) -> float32 rows, through
    ``encode_queries`` / ``encode_corpus`` or ``encode``, checked; ``similarity`` as the config says."""

    def __init__(self, model: Any, name: str, params: dict[str, Any], source: ModelSource) -> None:
        self.model = model
        self.name = name
        self.source = source
        self.similarity = "cosine" if params.get("similarity") == "cosine" else "dot"
        self.batch_size = int(params.get("batch_size", 128))
        self.corpus_format = str(params.get("corpus_format", "dicts"))
        self.encode_kwargs = dict(params.get("encode_kwargs") or {})
        self.dim: int | None = None
        has = {m: callable(getattr(model, m, None)) for m in (QUERY_METHOD, CORPUS_METHOD, ENCODE_METHOD)}
        if has[QUERY_METHOD] and has[CORPUS_METHOD]:
            self.methods = {"query": QUERY_METHOD, "code": CORPUS_METHOD}
        elif has[ENCODE_METHOD] and not (has[QUERY_METHOD] or has[CORPUS_METHOD]):
            self.methods = {"query": ENCODE_METHOD, "code": ENCODE_METHOD}
        else:
            lacking = [m for m in (QUERY_METHOD, CORPUS_METHOD) if not has[m]]
            raise PythonModelError(
                f"models.{name}: {source.cls} lacks {' and '.join(lacking)}: a model implements encode_queries("
                "queries, batch_size, **kwargs) and encode_corpus(corpus, batch_size, **kwargs) (BEIR / MTEB), "
                "or encode(texts, batch_size, **kwargs) alone (sentence-transformers)"
            )

    @classmethod
    def load(cls, name: str, params: dict[str, Any]) -> PythonEncoder:
        """Import (``class``) or resolve (``entry_point``) the user's class and build it with ``init``."""
        loaded_from = _prepend_path(params.get("path"))
        entry = params.get("entry_point")
        if entry:
            point = _entry_point(name, entry)
            try:
                target = point.load()
            except Exception as err:
                raise PythonModelError(
                    f"models.{name}.entry_point: {entry!r} = {point.value} does not load: {type(err).__name__}: {err}"
                ) from err
            distribution = (point.dist.name, point.dist.version) if point.dist is not None else (None, None)
        else:
            target = _import_class(name, str(params.get("class")), params.get("path"))
            distribution = _distribution_of(split_class_path(str(params["class"]))[0], loaded_from)
        if not callable(target):
            raise PythonModelError(f"models.{name}: {_qualified(target)} is not a class (nothing to construct)")
        init = dict(params.get("init") or {})
        try:
            model = target(**init)
        except Exception as err:
            raise PythonModelError(
                f"models.{name}: {_qualified(target)}(**init) raised {type(err).__name__}: {err} "
                f"(init: {sorted(init) or 'no arguments'})"
            ) from err
        source = ModelSource(
            cls=f"{target.__module__}:{target.__qualname__}" if hasattr(target, "__qualname__") else _qualified(target),
            entry_point=f"{ENTRY_POINT_GROUP}:{entry}" if entry else None,
            distribution=distribution[0],
            version=distribution[1],
            revision=params.get("revision") or _own_revision(model),
            name=_string_attribute(model, "name"),
        )
        encoder = cls(model, name, params, source)
        shipped = f" from {source.distribution} {source.version}" if source.distribution else ""
        log.info("models.%s: user model %s%s, revision %s", name, source.cls, shipped, source.revision)
        return encoder

    def embed(self, texts: Sequence[str], side: str) -> np.ndarray:
        """The model's vectors of ``texts``: queries (``side == "query"``) or codes, float32, checked."""
        method = self.methods[side]
        texts = list(texts)
        if not texts:
            return np.empty((0, self.dim or 0), dtype=np.float32)
        if method == CORPUS_METHOD and self.corpus_format == "dicts":
            given: list[Any] = [{"title": "", "text": text} for text in texts]
        else:
            given = texts
        try:
            out = getattr(self.model, method)(given, batch_size=self.batch_size, **self.encode_kwargs)
        except Exception as err:
            hint = f" (corpus_format: {self.corpus_format})" if method == CORPUS_METHOD else ""
            raise PythonModelError(
                f"models.{self.name}: {self.source.cls}.{method} raised {type(err).__name__}: {err}{hint}"
            ) from err
        return self._checked(out, len(texts), method)

    def _checked(self, out: Any, n: int, method: str) -> np.ndarray:
        where = f"models.{self.name}: {self.source.cls}.{method}"
        try:
            vectors = as_float_rows(out)
        except (TypeError, ValueError) as err:
            raise PythonModelError(f"{where} returned {type(out).__name__}, not vectors: {err}") from err
        if vectors.ndim != 2 or vectors.shape[0] != n:
            raise PythonModelError(
                f"{where} returned an array of shape {vectors.shape} for {n} texts: expected one row per text, (n, dim)"
            )
        bad = ~np.isfinite(vectors).all(axis=1)
        if bad.any():
            rows = np.flatnonzero(bad)
            raise PythonModelError(
                f"{where} returned non-finite values (NaN or inf) in {len(rows)} of {n} rows (first: row "
                f"{int(rows[0])})"
            )
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        elif vectors.shape[1] != self.dim:
            raise PythonModelError(
                f"{where} returned {vectors.shape[1]}-dimensional vectors, the model's earlier ones had {self.dim}: "
                "queries and codes must share one space"
            )
        return vectors


def as_float_rows(out: Any) -> np.ndarray:
    """``out`` (an ndarray, a torch tensor, a list of rows: arrays, tensors or lists) as a float32 ndarray."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().to(device="cpu", dtype=torch.float32).numpy()
    if isinstance(out, (list, tuple)) and out and isinstance(out[0], torch.Tensor):
        return torch.stack([row.detach().to(device="cpu", dtype=torch.float32) for row in out]).numpy()
    return np.asarray(out, dtype=np.float32)


class PythonRetriever(DenseRetriever):
    """A :class:`DenseRetriever` whose vectors come from a user's class (:class:`PythonEncoder`, built
    by ``loader`` from the config); its index state is the dense one (the pool's vectors, ``.npy``)
    plus the :class:`ModelSource` that made them, which a retriever read back from the index compares
    with the model the config loads before it encodes a query."""

    INDEX_TYPE: ClassVar[str] = "python"

    def __init__(
        self,
        encoder: PythonEncoder | None,
        batch_size: int = 128,
        progress: bool = False,
        loader: Callable[[], PythonEncoder] | None = None,
    ) -> None:
        super().__init__(encoder, batch_size=batch_size, progress=progress, loader=loader)
        self.saved_source: dict[str, Any] | None = None  # the index's, when read back from one

    def model_vectors(self, texts: list[str], side: str, languages: list[str] | None = None) -> np.ndarray:
        """The user's model's vectors of ``texts`` (queries or codes), once its identity is the index's."""
        encoder = self.encoder
        if self.saved_source is not None:
            check_same_source(self.saved_source, encoder)
        vectors = encoder.embed(texts, side)
        if side == "query" and self._codes is not None and len(vectors) and vectors.shape[1] != self._codes.shape[1]:
            raise PythonModelError(
                f"models.{encoder.name}: {encoder.source.cls}.{encoder.methods['query']} returned "
                f"{vectors.shape[1]}-dimensional vectors, the indexed codes have {self._codes.shape[1]}"
            )
        return vectors

    def model_source(self) -> dict[str, Any]:
        """Which class, distribution, version and revision made the vectors (the run's provenance)."""
        if self._encoder is not None:
            return self._encoder.source.as_dict()
        return dict(self.saved_source or {})

    def index_state(self, directory: Path, name: str) -> dict[str, Any]:
        """The dense state (the pool's vectors) and the model's source (``python_model``)."""
        return {**super().index_state(directory, name), "python_model": self.encoder.source.as_dict()}

    @classmethod
    def from_index_state(
        cls, state: dict[str, Any], files: VerifiedDir, loader: Callable[[], PythonEncoder] | None
    ) -> PythonRetriever:
        """The saved vectors, with the config's ``loader`` (the index's ``python_model`` is compared with
        what it loads, never imported)."""
        retriever = super().from_index_state(state, files, loader)
        retriever.saved_source = dict(state.get("python_model") or {})
        return retriever  # type: ignore[return-value]


def check_same_source(saved: dict[str, Any], encoder: PythonEncoder) -> None:
    """Refuse to encode queries against an index whose vectors another class, distribution version or
    revision made (the config's ``revision`` is in the index's lineage; an upgraded package is not)."""
    now = encoder.source.identity()
    then = {k: saved.get(k) for k in now}
    if then != now:
        differ = ", ".join(f"{k} {then[k]!r} -> {now[k]!r}" for k in now if then[k] != now[k])
        raise PythonModelError(
            f"models.{encoder.name}: the index's vectors were made by another model than the one loaded now "
            f"({differ}): delete the run's index (results/index/<run>) and run `csbench index` again, or set "
            f"models.{encoder.name}.revision when you change the class on purpose"
        )


def python_loader(name: str, params: dict[str, Any]) -> Callable[[], PythonEncoder]:
    """What builds a run's user model when it is first needed (the index's saved vectors need none)."""
    return functools.partial(PythonEncoder.load, name, dict(params))
