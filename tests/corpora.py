"""Real code for the property tests of the identifier analysis and the code attacks.

Functions are extracted (``csbench.code.extract``) from sources installed on this machine by
``scripts/setup.sh`` (Python's standard library, Debian's Go / Java / Ruby / PHP / JavaScript
sources, R package sources from ``apt-get source``), sampled deterministically, plus the real
CodeSearchNet Ruby records and the GeCS samples in ``../shared/data``. A missing source makes the
test that needs it skip with the reason.
"""

from __future__ import annotations

import ast
import json
import sysconfig
import zipfile
from pathlib import Path

import pytest

from csbench.code.extract import extract_functions

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"

STDLIB_ROOT = Path(sysconfig.get_paths()["stdlib"])
PHP_ROOT = Path("/usr/share/php")
GO_ROOT = Path("/usr/share/go-1.19/src")
JS_ROOT = Path("/usr/share/nodejs/lodash")
JAVA_ZIP = Path("/usr/lib/jvm/openjdk-17/lib/src.zip")
RUBY_ROOT = Path("/usr/lib/ruby/3.1.0")
R_ROOT = PROJECT_ROOT / ".sources" / "r-cran-src"

# language -> (where its sources are, file patterns, take every n-th file, at most this many files)
LOCAL_SOURCES = {
    "python": (STDLIB_ROOT, ("*.py",), 5, 10_000),
    "php": (PHP_ROOT, ("*.php",), 3, 200),
    "go": (GO_ROOT, ("*.go",), 40, 400),
    "javascript": (JS_ROOT, ("*.js",), 3, 400),
    "java": (JAVA_ZIP, ("*.java",), 40, 60),
    "ruby": (RUBY_ROOT, ("*.rb",), 4, 200),
    "r": (R_ROOT, ("*.R", "*.r"), 1, 400),
}
_SKIP_PARTS = {"site-packages", "test", "tests", "testdata"}


def sample_files(root: Path, patterns: tuple[str, ...], step: int, limit: int) -> list[Path]:
    files = sorted(path for pattern in patterns for path in root.rglob(pattern) if path.is_file())
    return [path for path in files if not _SKIP_PARTS & set(path.relative_to(root).parts)][::step][:limit]


def _sources(language: str) -> list[tuple[str, str]]:
    """(name, text) of the sampled source files of ``language``."""
    root, patterns, step, limit = LOCAL_SOURCES[language]
    if language == "java":
        with zipfile.ZipFile(root) as archive:
            members = sorted(n for n in archive.namelist() if n.startswith("java.base/") and n.endswith(".java"))
            return [(member, archive.read(member).decode("utf-8", "replace")) for member in members[::step][:limit]]
    out = []
    for path in sample_files(root, patterns, step, limit):
        try:
            out.append((str(path), path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue
    return out


def local_functions(language: str, limit: int | None = None) -> list[str]:
    """Functions of ``language`` from the sources installed here (skips the test when they are absent)."""
    root = LOCAL_SOURCES[language][0]
    if not root.exists():
        pytest.skip(f"no {language} sources at {root} (scripts/setup.sh installs them)")
    codes = [fn.code for _, text in _sources(language) for fn in extract_functions(text, language)]
    return codes[:limit] if limit else codes


def shared_functions(language: str) -> list[str]:
    """Real CodeSearchNet functions of ``language`` in ../shared/data: the Ruby test split and the GeCS
    sample of the language (empty when the folder or the file is absent)."""
    codes = []
    csn = SHARED_DATA / "codesearchnet"
    if language == "ruby" and (csn / "ruby" / "test.jsonl").is_file():
        with open(csn / "ruby" / "test.jsonl", encoding="utf-8") as lines:
            codes += [json.loads(line)["code"] for line in lines]
    gecs = csn / "gecs_samples" / f"{language}_test_sample.jsonl"
    if gecs.is_file():
        with open(gecs, encoding="utf-8") as lines:
            codes += [json.loads(line)["input"].split(" [SEP] ", 1)[1] for line in lines]
    return codes


# The thesis's example snippet, section 3.3 (verbatim, with its comment).
THESIS_SNIPPET = """def _check_series_localize_t(s, timezone):
    from pandas.api.types import is_datetime64tz_dtype
    tz = timezone or _get_local_timezone()
    #handle nested time case
    if is_datetime64tz_dtype(s.dtype):
        return s.dt.tz_convert(tz).dt.tz_localize(None)
    else:
        return s
"""

# Section 3.3.6, Ordered ID (on the comment-free code of 3.3.1).
THESIS_ORDERED_ID = """def id1(id2, id3):
    from pandas.api.types import is_datetime64tz_dtype
    id4 = id3 or _get_local_timezone()
    if is_datetime64tz_dtype(id2.dtype):
        return id2.dt.tz_convert(id4).dt.tz_localize(None)
    else:
        return id2
"""


class AstRenamer(ast.NodeTransformer):
    """Applies an old -> new mapping to every name position of a Python AST."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def _get(self, name: str | None) -> str | None:
        return self.mapping.get(name, name) if name is not None else None

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._get(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._get(node.arg)
        self.generic_visit(node)
        return node

    def _def(self, node):
        node.name = self._get(node.name)
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        node.name = self._get(node.name)
        self.generic_visit(node)
        return node

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        node.names = [self._get(name) for name in node.names]
        return node
