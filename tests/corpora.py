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
from csbench.code.languages.python import METHOD_DECORATORS as _METHOD_DECORATORS
from csbench.code.languages.python import RECEIVERS as _RECEIVERS

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

# The comment-free code of section 3.3.1 with its four names as fields: every renaming listing of
# section 3.3 is this code with other names.
_THESIS_RENAMED = """def {function}({s}, {timezone}):
    from pandas.api.types import is_datetime64tz_dtype
    {tz} = {timezone} or _get_local_timezone()
    if is_datetime64tz_dtype({s}.dtype):
        return {s}.dt.tz_convert({tz}).dt.tz_localize(None)
    else:
        return {s}
"""


def thesis_renamed(function: str, s: str, timezone: str, tz: str) -> str:
    """A listing of section 3.3: the comment-free thesis snippet with ``_check_series_localize_t``,
    ``s``, ``timezone`` and ``tz`` renamed to the names given."""
    return _THESIS_RENAMED.format(function=function, s=s, timezone=timezone, tz=tz)


# Section 3.3.6, Ordered ID (on the comment-free code of 3.3.1).
THESIS_ORDERED_ID = thesis_renamed("id1", "id2", "id3", "id4")


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def method_receiver(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """For a top-level definition: ``None`` for a plain function, else it is a method (first parameter
    ``self`` / ``cls`` ..., or a method decorator) and this is its receiver (``""``: static)."""
    positional = function.args.posonlyargs + function.args.args
    first = positional[0].arg if positional else None
    if first in _RECEIVERS:
        return first
    for decorator in function.decorator_list:
        if ast.unparse(decorator).rsplit(".", 1)[-1] in _METHOD_DECORATORS:
            static = ast.unparse(decorator).rsplit(".", 1)[-1] == "staticmethod"
            return "" if static or first is None else first
    return None


class _Scope:
    def __init__(self, node: ast.AST, kind: str, parent: _Scope | None) -> None:
        self.node, self.kind, self.parent = node, kind, parent
        self.bindings: dict[str, int] = {}
        self.functions: dict[str, list[ast.AST]] = {}
        self.declared: set[str] = set()  # global / nonlocal: not local here

    def bind(self, name: str) -> None:
        self.bindings[name] = self.bindings.get(name, 0) + 1

    def resolve(self, name: str) -> _Scope | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.bindings and name not in scope.declared and (scope is self or scope.kind != "class"):
                return scope
            scope = scope.parent
        return None


class CallTargets:
    """An ast-based account of what ``csbench.code.identifiers`` renames outside variable positions in
    Python (a second implementation, for the tests): ``receiver.name`` in a top-level method ``name``
    (``attributes``) and keyword arguments that name a parameter of the snippet's own function the
    call certainly calls (``keywords``), both by ``id`` of the ast node."""

    def __init__(self, tree: ast.AST) -> None:
        self.keywords: set[int] = set()
        self.attributes: set[int] = set()
        # id(def) -> (name, receiver, body scope, def) of the top-level methods
        self.methods: dict[int, tuple[str, str, _Scope, ast.AST]] = {}
        self._scopes: dict[int, _Scope] = {}
        module = _Scope(tree, "module", None)
        self._collect(tree, module)
        self._calls(tree, module)

    def _collect(self, node: ast.AST, scope: _Scope) -> None:
        """Bindings of every scope (a first pass: a name is local in its whole scope)."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for item in [*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])]:
                self._collect(item, scope)
            if isinstance(node, ast.ClassDef):
                scope.bind(node.name)
                inner = self._scopes[id(node)] = _Scope(node, "class", scope)
                for item in node.body:
                    self._collect(item, inner)
                return
            inner = self._scopes[id(node)] = _Scope(node, "function", scope)
            receiver = method_receiver(node) if scope.kind == "module" else None
            if receiver is None:
                scope.bind(node.name)
                if scope.kind != "class":
                    scope.functions.setdefault(node.name, []).append(node)
            else:
                self.methods[id(node)] = (node.name, receiver, inner, node)
            self._arguments(node.args, scope, inner)
            for item in node.body:
                self._collect(item, inner)
            return
        if isinstance(node, ast.Lambda):
            inner = self._scopes[id(node)] = _Scope(node, "function", scope)
            self._arguments(node.args, scope, inner)
            self._collect(node.body, inner)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner = self._scopes[id(node)] = _Scope(node, "comprehension", scope)
            for index, generator in enumerate(node.generators):
                self._collect(generator.iter, scope if index == 0 else inner)
                self._collect(generator.target, inner)
                for condition in generator.ifs:
                    self._collect(condition, inner)
            for part in ("elt", "key", "value"):
                if hasattr(node, part):
                    self._collect(getattr(node, part), inner)
            return
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            scope.bind(node.id)
        elif isinstance(node, ast.NamedExpr):
            function = scope
            while function.kind == "comprehension" and function.parent is not None:
                function = function.parent
            function.bind(node.target.id)
            self._collect(node.value, scope)
            return
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                scope.bind((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.bind(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            scope.declared.update(node.names)
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Lambda)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            scope.functions.setdefault(node.targets[0].id, []).append(node.value)
        for child in ast.iter_child_nodes(node):
            self._collect(child, scope)

    def _arguments(self, arguments: ast.arguments, outer: _Scope, inner: _Scope) -> None:
        for default in [*arguments.defaults, *arguments.kw_defaults]:
            if default is not None:
                self._collect(default, outer)
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        for argument in every:
            if argument is not None:
                inner.bind(argument.arg)
                if argument.annotation is not None:
                    self._collect(argument.annotation, outer)

    def _keyword_names(self, function: ast.AST) -> set[str]:
        arguments = function.args
        names = {argument.arg for argument in [*arguments.args, *arguments.kwonlyargs]}
        method = self.methods.get(id(function))
        return names - {method[1]} if method else names

    def _method(self, expression: ast.AST, scope: _Scope) -> ast.AST | None:
        """The top-level method ``expression`` (``receiver.name``) is, if it is one."""
        if isinstance(expression, ast.Attribute) and isinstance(expression.value, ast.Name):
            for name, receiver, body, function in self.methods.values():
                if (
                    receiver
                    and (expression.attr, expression.value.id) == (name, receiver)
                    and scope.resolve(receiver) is body
                    and body.bindings.get(receiver) == 1
                ):
                    return function
        return None

    def _calls(self, node: ast.AST, scope: _Scope) -> None:
        inner = self._scopes.get(id(node), scope)
        if isinstance(node, ast.Attribute) and self._method(node, scope) is not None:
            self.attributes.add(id(node))
        if isinstance(node, ast.Call):
            callee: ast.AST | None = None
            if isinstance(node.func, ast.Name):
                found = scope.resolve(node.func.id)
                functions = found.functions.get(node.func.id, []) if found is not None else []
                if len(functions) == 1 and found.bindings.get(node.func.id, 0) == 1:
                    callee = functions[0]
            else:
                callee = self._method(node.func, scope)
            if callee is not None:
                names = self._keyword_names(callee)
                self.keywords.update(id(keyword) for keyword in node.keywords if keyword.arg in names)
        for child in ast.iter_child_nodes(node):
            self._calls(child, inner)


class AstRenamer(ast.NodeTransformer):
    """Applies an old -> new mapping to every name position of a Python AST, and to the attributes and
    call keywords ``CallTargets`` finds (a top-level method's ``self.name``; keywords of calls to the
    snippet's own functions that name their parameters)."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping
        self.targets: CallTargets | None = None

    def visit(self, node: ast.AST) -> ast.AST:
        if self.targets is None:
            self.targets = CallTargets(node)
        return super().visit(node)

    def _get(self, name: str | None) -> str | None:
        return self.mapping.get(name, name) if name is not None else None

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if id(node) in self.targets.attributes:
            node.attr = self._get(node.attr)
        self.generic_visit(node)
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if id(node) in self.targets.keywords:
            node.arg = self._get(node.arg)
        self.generic_visit(node)
        return node

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
