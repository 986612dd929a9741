"""Build of csbench: the metadata is in pyproject.toml; this file only compiles the hot modules of the
code attacks (``csbench._native.HOT_MODULES``) with Cython, in pure Python mode: the ``.py`` sources
are compiled as they are into extension modules of the same names (about 10% less CPU time for the
attacks); and the C modules of ``csbench._native.C_MODULES`` from their C sources (their callers run
Python code where one is not built). The sources stay the single source of truth and the fallback: with
``CSBENCH_PURE_PYTHON=1``, without Cython, or when the C compiler fails, nothing is compiled and
the install still succeeds (one warning line). Each build records the sha256 of every source it
compiled in ``src/csbench/_compiled.json``; ``csbench._native`` runs a module from its ``.py``
when the source has changed since.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, ExecError

ROOT = Path(__file__).resolve().parent
PACKAGE = Path("src", "csbench")  # relative: setuptools wants relative source paths


def _load_native():
    """csbench/_native.py on its own (standard library only; the package's dependencies may be absent)."""
    spec = importlib.util.spec_from_file_location("_csbench_native_build", ROOT / PACKAGE / "_native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native = _load_native()


def _warn(message: str) -> None:
    print(f"csbench: WARNING: {message}", file=sys.stderr, flush=True)


def _why_pure() -> str | None:
    """Why nothing is compiled (None: compile)."""
    if native.pure_requested():
        return f"{native.PURE_ENV}=1"
    if importlib.util.find_spec("Cython") is None:
        return "Cython is not importable"
    return None


class BuildPy(build_py):
    """An editable install without compiling leaves no extension module of an earlier build in the
    source tree (where it imports from)."""

    def run(self) -> None:
        if self.editable_mode and _why_pure() is not None:
            _remove_inplace([*native.HOT_MODULES, *native.C_MODULES])
            (ROOT / PACKAGE / native.MANIFEST).unlink(missing_ok=True)
        super().run()


class OptionalCythonBuildExt(build_ext):
    """Cythonizes the ``.py`` sources of the extensions, compiles what it can and writes the manifest;
    any failure leaves the module in pure Python, with one warning line."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # compile the modules side by side (identifiers.c alone is large)
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        self.compiled: dict[str, str] = {}  # module -> sha256 of the source compiled
        self.failed: dict[str, str] = {}  # module -> why not
        inplace = self.inplace  # editable install: the modules land beside their sources
        try:
            super().run()
        except Exception as error:  # e.g. no C compiler at all
            self.failed.update({_module(ext): _describe(error) for ext in self.extensions})
            self.compiled.clear()
            self.extensions = []
        finally:
            self.inplace = inplace  # setuptools' run clears it while building
        if self.failed:
            _warn(
                f"could not compile {', '.join(sorted(self.failed))} with Cython"
                f" ({next(iter(self.failed.values()))}): installed as pure Python (slower, same results)"
            )
            if inplace:
                _remove_inplace(self.failed)
        self._write_manifest(inplace)

    def build_extensions(self) -> None:
        self._cythonize()
        super().build_extensions()
        self.extensions = [ext for ext in self.extensions if _module(ext) not in self.failed]

    def _cythonize(self) -> None:
        from Cython.Build import cythonize

        kept = []
        for ext in self.extensions:
            source = ext.sources[0]
            if source.endswith(".c"):  # a C module: compiled as it is
                ext.digest = native.source_hash(source)
                kept.append(ext)
                continue
            try:
                digest = native.source_hash(source)
                # always regenerated (~2 s for all): a .c left by a build of another version of the
                # source could be newer than the .py, and the manifest must name what was compiled
                (compiled,) = cythonize(
                    [Extension(ext.name, [source])],
                    compiler_directives={"language_level": 3},
                    force=True,
                    quiet=True,
                )
            except Exception as error:  # Cython's CompileError: a construct it does not support
                self.failed[_module(ext)] = _describe(error)
                continue
            ext.sources = compiled.sources
            ext.digest = digest
            kept.append(ext)
        self.extensions = kept

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            self.failed[_module(ext)] = _describe(error)
        else:
            self.compiled[_module(ext)] = ext.digest

    def _write_manifest(self, inplace: bool) -> None:
        """The manifest beside the compiled modules: in the source tree for an editable install (a
        wheel's build leaves the source tree's alone), in the wheel otherwise."""
        base = ROOT / PACKAGE if inplace else Path(self.build_lib, "csbench")
        base.mkdir(parents=True, exist_ok=True)
        text = json.dumps(dict(sorted(self.compiled.items())), indent=2) + "\n"
        (base / native.MANIFEST).write_text(text, encoding="utf-8")


def _remove_inplace(modules) -> None:
    """Delete the extension modules an earlier editable build left beside these modules' sources."""
    for module in modules:
        source = ROOT / PACKAGE / {**native.HOT_MODULES, **native.C_MODULES}[module]
        while (stale := native.extension_path(source)) is not None:
            stale.unlink()


def _describe(error: BaseException) -> str:
    """One short line: a failed compiler command is named by its program, not the whole command."""
    if isinstance(error, (CCompilerError, ExecError)):
        command = getattr(error.__cause__ or error.__context__, "cmd", None)
        program = command[0] if isinstance(command, list) and command else "the C compiler"
        return f"{program} failed: {type(error).__name__}"
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _module(ext: Extension) -> str:
    """The module an extension is (``csbench.attacks.__init__`` is the package ``csbench.attacks``)."""
    return ext.name.removesuffix(".__init__")


def _extensions() -> list[Extension]:
    why = _why_pure()
    if why is not None:
        if why != f"{native.PURE_ENV}=1":
            _warn(f"{why}: the attack modules are installed as pure Python (slower, same results)")
        return []
    # named after the source's path: csbench/attacks/__init__.py becomes csbench/attacks/__init__.*.so,
    # which Python imports as the package csbench.attacks (Cython gives it PyInit_attacks)
    return [
        Extension("csbench." + relative.removesuffix(".py").replace("/", "."), [str(PACKAGE / relative)])
        for relative in native.HOT_MODULES.values()
    ] + [Extension(name, [str(PACKAGE / relative)]) for name, relative in native.C_MODULES.items()]


setup(
    ext_modules=_extensions(),
    cmdclass={"build_py": BuildPy, "build_ext": OptionalCythonBuildExt},
)
