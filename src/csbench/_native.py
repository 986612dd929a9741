"""The Cython-compiled hot modules of the code attacks, and the guard that never runs a stale one.

``setup.py`` compiles the modules of ``HOT_MODULES`` from their unchanged ``.py`` sources (Cython's
pure Python mode) into extension modules of the same names, and records in ``_compiled.json``
(beside this file) the sha256 of each source it compiled. An extension module comes first in
Python's import order, so a ``.so`` built from an older source would shadow the edited ``.py``.
``guard`` (called by ``csbench/__init__.py`` before anything imports these modules) loads a module
from its ``.py`` instead when ``CSBENCH_PURE_PYTHON=1`` is set or when its recorded hash is not the
hash of its current source (then with one warning: ``make setup`` rebuilds). The ``.py`` sources are
the single source of truth: without a build (no Cython, no C compiler) they simply run as they are.

Standard library only: ``setup.py`` loads this file on its own, without the ``csbench`` package.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

# module -> its source, relative to the csbench package folder
HOT_MODULES = {
    "csbench.code.identifiers": "code/identifiers.py",
    "csbench.code.comments": "code/comments.py",
    "csbench.attacks.renaming": "attacks/renaming.py",
    "csbench.attacks": "attacks/__init__.py",
    "csbench.attacks.engine": "attacks/engine.py",
    "csbench.code.parsing": "code/parsing.py",
    "csbench.code.treequery": "code/treequery.py",
    # the identifier analyses of the languages (csbench.code.languages.<name>), run once per snippet
    "csbench.code.languages._python_scopes": "code/languages/_python_scopes.py",
    "csbench.code.languages.go": "code/languages/go.py",
    "csbench.code.languages.java": "code/languages/java.py",
    "csbench.code.languages.javascript": "code/languages/javascript.py",
    "csbench.code.languages.php": "code/languages/php.py",
    "csbench.code.languages.ruby": "code/languages/ruby.py",
    "csbench.code.languages.r": "code/languages/r.py",
    # the ranking engine's selection kernel (it runs only compiled; the engine's numpy path otherwise)
    "csbench.evaluate._select": "evaluate/_select.py",
}
# C extension modules, compiled by ``setup.py`` from their C source (no Python source: where one is not
# built, is stale or CSBENCH_PURE_PYTHON=1, its caller runs its Python code instead; ``c_module_plan``)
C_MODULES = {
    # the walk of a tree-sitter tree for csbench.code.treequery (tree-sitter's cursor, nodes made for what
    # the query needs only)
    "csbench.code._tswalk": "code/_tswalk.c",
}
MANIFEST = "_compiled.json"
PURE_ENV = "CSBENCH_PURE_PYTHON"
PACKAGE_DIR = Path(__file__).resolve().parent

COMPILED = "compiled"
NOT_BUILT = "source: not built"
FORCED_PURE = f"source: {PURE_ENV}=1"
STALE = "source: stale build (the .py was edited since; `make setup` rebuilds)"

_plan: dict[str, str] = {}  # module -> what guard decided (one of the constants above)


def source_hash(path: str | Path) -> str:
    """sha256 of a source file's bytes (what the manifest records)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pure_requested() -> bool:
    return os.environ.get(PURE_ENV, "").strip() == "1"


def extension_path(source: Path) -> Path | None:
    """The compiled extension module beside ``source`` (``x.py`` or ``x.c`` -> ``x.cpython-311-...so``),
    if any."""
    stem = source.name.removesuffix(".py").removesuffix(".c")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_name(stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def read_manifest(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def plan(package_dir: Path = PACKAGE_DIR, manifest: Path | None = None) -> dict[str, str]:
    """Per hot module, how it should load: ``COMPILED``, ``NOT_BUILT``, ``FORCED_PURE`` or ``STALE``.
    Hashes a source only when its extension module exists."""
    return _plan_of(HOT_MODULES, package_dir, manifest)


def c_module_plan(package_dir: Path = PACKAGE_DIR, manifest: Path | None = None) -> dict[str, str]:
    """``plan`` for ``C_MODULES``: a caller imports one only where it says ``COMPILED``."""
    return _plan_of(C_MODULES, package_dir, manifest)


def _plan_of(modules: dict[str, str], package_dir: Path, manifest: Path | None) -> dict[str, str]:
    manifest = package_dir / MANIFEST if manifest is None else manifest
    pure = pure_requested()
    recorded: dict[str, str] | None = None
    out = {}
    for name, relative in modules.items():
        source = package_dir / relative
        if extension_path(source) is None:
            out[name] = NOT_BUILT
        elif pure:
            out[name] = FORCED_PURE
        elif not source.is_file():  # an install without the sources: nothing else to run
            out[name] = COMPILED
        else:
            if recorded is None:
                recorded = read_manifest(manifest)
            out[name] = COMPILED if recorded.get(name) == source_hash(source) else STALE
    return out


class SourceFinder:
    """A ``sys.meta_path`` finder that loads the given modules from their ``.py`` sources (a package
    from its ``__init__.py``), ahead of any extension module beside them."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = dict(sources)

    def find_spec(self, fullname: str, path=None, target=None):
        source = self.sources.get(fullname)
        if source is None:
            return None
        package = [str(source.parent)] if source.name == "__init__.py" else None
        loader = importlib.machinery.SourceFileLoader(fullname, str(source))
        return importlib.util.spec_from_file_location(
            fullname, str(source), loader=loader, submodule_search_locations=package
        )

    def invalidate_caches(self) -> None:
        pass


def guard(package_dir: Path = PACKAGE_DIR, manifest: Path | None = None) -> SourceFinder | None:
    """Make the hot modules not yet imported load from their sources where ``plan`` says so (one
    ``SourceFinder`` first in ``sys.meta_path``, replacing an earlier guard's); warn once about stale
    builds. Returns the finder (None when every module loads as built)."""
    decided = plan(package_dir, manifest)
    _plan.update(decided)
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, SourceFinder)]
    stale = sorted(name for name, how in decided.items() if how == STALE)
    if stale:
        one = len(stale) == 1
        warnings.warn(
            f"csbench: {', '.join(stale)} changed since {'it was' if one else 'they were'} compiled: running"
            f" {'its' if one else 'their'} .py source{'' if one else 's'} instead (slower, same results);"
            " run `make setup` to rebuild the compiled modules",
            RuntimeWarning,
            stacklevel=2,
        )
    redirect = {
        name: package_dir / HOT_MODULES[name]
        for name, how in decided.items()
        if how in (FORCED_PURE, STALE) and name not in sys.modules
    }
    if not redirect:
        return None
    finder = SourceFinder(redirect)
    sys.meta_path.insert(0, finder)
    return finder


def status() -> dict[str, str]:
    """Per hot module, whether it runs compiled: ``"compiled"`` or ``"source: <why>"``. An imported
    module is judged by the file it was loaded from, one not yet imported by what the guard decided."""
    decided = _plan or plan()
    out = {}
    for name in HOT_MODULES:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if origin is None:
            out[name] = decided[name]
        elif is_extension(origin):
            out[name] = COMPILED
        else:
            out[name] = decided[name] if decided[name] != COMPILED else "source"
    return out


def is_extension(path: str | Path) -> bool:
    return str(path).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def all_compiled() -> bool:
    return all(how == COMPILED for how in status().values())
