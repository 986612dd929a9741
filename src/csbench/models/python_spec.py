"""What a bring-your-own model entry (``family: python``) says, and what ``csbench validate`` checks of
it without running any of the user's code (plain data, the standard library and no torch: every job
validates its config; the loading itself is :mod:`csbench.models.python`).

A config names the user's class (``class: package.module:ClassName``) or an entry point of the group
``csbench.models`` that an installed distribution declares (``entry_point: <name>``)::

    models:
      my-encoder:
        family: python
        class: my_package.models:MyEncoder   # or entry_point: my-encoder
        path: null             # a folder put first on sys.path (the config's; never the data's)
        init: {}               # keyword arguments of the constructor
        batch_size: 128        # passed to encode_queries / encode_corpus (BEIR's DRES default)
        revision: null         # provenance and cache identity; else the class's own `revision`
        corpus_format: dicts   # dicts: [{"title": "", "text": code}, ...] as BEIR / MTEB; texts: strings
        similarity: dot        # dot (BEIR's "dot") or cosine (BEIR's "cos_sim": vectors normalised)
        encode_kwargs: {}      # more keyword arguments of every encode call (e.g. MTEB's prompt_name)

Validation (no user code runs, so ``snakemake -n`` stays fast and side-effect free): exactly one of
``class`` / ``entry_point``; ``class`` is ``module.path:ClassName`` (:data:`CLASS_PATTERN`); its
top-level package is findable on ``path``, then as Python would find it (``importlib`` finders look
at folders and metadata and run nothing of a top-level name); an entry point is declared by an
installed distribution (read from the distributions' metadata). Whether the module imports and the
class has the methods is known only by importing it, which the jobs that encode (``index``,
``evaluate``, ``robust``) do.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from csbench.models import PYTHON_FAMILY

ENTRY_POINT_GROUP = "csbench.models"
CORPUS_FORMATS = ("dicts", "texts")

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
# package.module:ClassName (a dotted attribute path after the colon, as entry points allow)
CLASS_PATTERN = rf"^{_IDENTIFIER}(\.{_IDENTIFIER})*:{_IDENTIFIER}(\.{_IDENTIFIER})*$"

PYTHON_DEFAULTS: dict[str, Any] = {
    "class": None,
    "entry_point": None,
    "path": None,
    "init": {},
    "batch_size": 128,  # BEIR's DenseRetrievalExactSearch default
    "revision": None,
    "corpus_format": "dicts",
    "similarity": "dot",  # BEIR's EvaluateRetrieval / MTEB v1 take the score function apart: dot unless told
    "encode_kwargs": {},
}
PYTHON_PARAMS: dict[str, dict[str, Any]] = {
    "class": {"type": ["string", "null"], "pattern": CLASS_PATTERN},
    "entry_point": {"type": ["string", "null"], "minLength": 1},
    "path": {"type": ["string", "null"], "minLength": 1},
    "init": {"type": "object"},
    "batch_size": {"minimum": 1},
    "revision": {"type": ["string", "null"], "minLength": 1},
    "corpus_format": {"enum": list(CORPUS_FORMATS)},
    "similarity": {"enum": ["dot", "cosine"]},
    "encode_kwargs": {"type": "object"},
}


def python_defaults() -> dict[str, Any]:
    """The parameters of a ``family: python`` entry before its own (``class`` or ``entry_point`` required)."""
    return {"family": PYTHON_FAMILY, **PYTHON_DEFAULTS, "init": {}, "encode_kwargs": {}}


def split_class_path(value: str) -> tuple[str, str]:
    """``("package.module", "ClassName")`` of ``package.module:ClassName``; ValueError otherwise."""
    if not isinstance(value, str) or not re.match(CLASS_PATTERN, value):
        raise ValueError(
            f"{value!r} is not a class path: write package.module:ClassName (the module as you would import "
            "it, a colon, the class), e.g. my_package.models:MyEncoder"
        )
    module, _, attribute = value.partition(":")
    return module, attribute


def described(params: dict[str, Any]) -> str:
    """``class pkg.mod:Cls`` or ``entry point name`` (for the registry's description)."""
    if params.get("class"):
        return f"class {params['class']}"
    return f"entry point {params.get('entry_point')!r} ({ENTRY_POINT_GROUP})"


def installed_entry_points() -> list[importlib.metadata.EntryPoint]:
    """The entry points of the group ``csbench.models`` the installed distributions declare (read from
    their metadata; nothing is imported), by name."""
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def entry_point_list() -> str:
    """``hashing = pkg.mod:Cls (dist 1.0), ...``, or a sentence saying none is installed."""
    found = [
        f"{ep.name} = {ep.value}" + (f" ({ep.dist.name} {ep.dist.version})" if ep.dist is not None else "")
        for ep in installed_entry_points()
    ]
    if not found:
        return f"no distribution installed here declares one in {ENTRY_POINT_GROUP}"
    return f"installed in {ENTRY_POINT_GROUP}: " + "; ".join(found)


def import_hint(path: str | None) -> str:
    """How to make a user's module importable (the end of every message about one that is not)."""
    where = f"models.<name>.path is {path!r} (searched first), then " if path else ""
    return (
        f"install its distribution into this environment ({Path(sys.executable).parent / 'pip'} install "
        "<folder or wheel>), or set models.<name>.path to the folder that holds the package; "
        f"{where}sys.path: {', '.join(entry or '.' for entry in sys.path[:4])}{', ...' if len(sys.path) > 4 else ''}"
    )


def static_problem(name: str, params: dict[str, Any]) -> tuple[str, str] | None:
    """``(key, message)`` of the first problem of ``models.<name>`` (a ``family: python`` entry) that
    can be seen without importing the user's code, or None: one of ``class`` / ``entry_point``, a
    well-formed class path whose top-level package is there, a declared entry point."""
    cls, entry = params.get("class"), params.get("entry_point")
    if bool(cls) == bool(entry):
        return (
            "family",
            f"models.{name}: a `family: python` model names its class by exactly one of `class` "
            f"(package.module:ClassName) and `entry_point` (a name in the entry-point group {ENTRY_POINT_GROUP}); "
            + ("this one sets both" if cls else "this one sets neither"),
        )
    if entry:
        if entry not in {ep.name for ep in installed_entry_points()}:
            return "entry_point", f"models.{name}.entry_point: no entry point {entry!r}; {entry_point_list()}"
        return None
    try:
        module, _ = split_class_path(cls)
    except ValueError as err:
        return "class", f"models.{name}.class: {err}"
    top = module.split(".")[0]
    if top in sys.modules or top in sys.builtin_module_names:
        return None
    path = params.get("path")
    # a top-level name's finders run no code of it (meta-path finders included: an editable install's)
    found = path and importlib.machinery.PathFinder.find_spec(top, [str(Path(path).resolve())])
    if not found and importlib.util.find_spec(top) is None:
        return "class", (
            f"models.{name}.class: no module {top!r} (of {cls}) is found: " + import_hint(path).replace("<name>", name)
        )
    return None
