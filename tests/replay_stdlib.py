"""Run renamed standard-library functions where the standard library's own tests run the originals.

    python tests/replay_stdlib.py SPEC [SPEC ...] [--modules textwrap,difflib] [--calls 3]

Every function and method of each module of ``MODULES`` (pure-Python modules of the standard library
whose tests are quick) is a snippet as data sets have them (from its ``def`` to its end, without
decorators, dedented), attacked by each spec (``csbench.attacks.run_attack``). Then the module's tests
in Python's ``test`` package run under a profile hook (``sys.setprofile``): at each of the first
``--calls`` calls of a function, with the arguments and the world as the test made them, the hook
runs the original snippet twice on deep copies of the arguments (a call whose two outcomes differ is
unstable and not used) and each attacked snippet once, before the test's own call goes on.

Snippets are executed in a copy of the module's globals; a method inside a class of its class's name
(private names are mangled alike; ``__class__`` is the live class). A method that reaches itself
through an attribute (``self.name(...)``) is put on the live class during the call, under its new name
and its old one, so the attacked code reaches its attacked self whether or not the attack renamed the
call. Outcome: the return value (a generator: its first items) or the exception's type and message,
and the arguments after the call; addresses are dropped and a word that the renaming gave a name may
stand for that name (``id1() missing 'id2'``). Keyword-only arguments are passed under the parameter's
new name (a caller of the renamed function uses them); a call whose ``**kwargs`` holds a key that the
renaming gave a parameter cannot be made to the attacked function (a known limit of renaming
parameters) and is listed apart. Prints one JSON object: per spec, the counts and every differing call.

A helper of tests/attacks/test_meaning_preservation.py, run in a subprocess (the tests it runs change
process-wide state; it needs Python's ``test`` package).
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import io
import json
import re
import signal
import sys
import textwrap
import types
import unittest
import warnings
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

PURE_DATETIME = "pure-datetime"  # test.datetimetester run on the pure-Python datetime module
# module -> its tests in Python's ``test`` package (pure Python, no network; together well under a minute)
MODULES = {
    "textwrap": ("test.test_textwrap",),
    "difflib": ("test.test_difflib",),
    "fractions": ("test.test_fractions",),
    "shlex": ("test.test_shlex",),
    "ipaddress": ("test.test_ipaddress",),
    "calendar": ("test.test_calendar",),
    "colorsys": ("test.test_colorsys",),
    "base64": ("test.test_base64",),
    "html": ("test.test_html",),
    "string": ("test.test_string",),
    "pprint": ("test.test_pprint",),
    "reprlib": ("test.test_reprlib",),
    "fnmatch": ("test.test_fnmatch",),
    "urllib.parse": ("test.test_urlparse",),
    "configparser": ("test.test_configparser.ConfigParserTestCase", "test.test_configparser.RawConfigParserTestCase"),
    "getopt": ("test.test_getopt",),
    "optparse": ("test.test_optparse",),
    "graphlib": ("test.test_graphlib",),
    "statistics": tuple(
        f"test.test_statistics.{case}"
        for case in ("TestMean", "TestMedian", "TestMode", "TestVariance", "TestStdev", "TestQuantiles", "TestFMean")
    ),
    "heapq": ("test.test_heapq",),
    "bisect": ("test.test_bisect",),
    "gettext": ("test.test_gettext",),
    "plistlib": ("test.test_plistlib",),
    "quopri": ("test.test_quopri",),
    "ast": ("test.test_unparse.UnparseTestCase", "test.test_unparse.CosmeticTestCase"),
    "tomllib._parser": ("test.test_tomllib",),
    "email._header_value_parser": ("test.test_email.test__header_value_parser",),
    "json.decoder": ("test.test_json",),
    "json.encoder": (),
    "argparse": ("test.test_argparse",),
    "copy": ("test.test_copy",),
    "glob": ("test.test_glob",),
    "functools": ("test.test_functools.TestSingleDispatch",),
    "gzip": ("test.test_gzip",),
    # the pure-Python datetime (test.test_datetime runs it and the C one: minutes under the hook)
    "datetime": tuple(f"{PURE_DATETIME}.{case}" for case in ("TestDate", "TestDateTime", "TestTime", "TestTimeDelta")),
}
# addresses and ids (``id()`` of fresh copies) differ from run to run
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}|\b\d{11,}\b")
CUT = 4000  # characters of an outcome compared
Call = tuple[tuple, dict, dict]  # positional arguments, keyword-only parameters, other keyword arguments


class Timeout(BaseException):
    """A replayed call ran too long (a BaseException: the function's ``except Exception`` lets it go)."""


def _alarm(signum: int, frame: Any) -> None:
    raise Timeout


# ------------------------------------------------------------------------------------------ functions


class Target:
    """One function or method of a module: where it is, its snippet, its attacked versions."""

    def __init__(self, module: types.ModuleType, qualname: str, node: ast.FunctionDef, lines: list[str]) -> None:
        self.module = module
        self.qualname = qualname
        self.name = node.name
        self.classes = qualname.split(".")[:-1]
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        self.key = (module.__file__, first)
        # the snippet as data sets have it: from ``def`` (without decorators) to the end, dedented
        self.code = textwrap.dedent("".join(lines[node.lineno - 1 : node.end_lineno]))
        self.attacked: dict[str, tuple[str, dict[str, str]]] = {}  # spec -> (code, renaming)
        self.calls = 0

    def live_class(self) -> type | None:
        found: Any = self.module
        for name in self.classes:
            found = getattr(found, name, None)
        return found if isinstance(found, type) else None

    def reaches_itself(self) -> bool:
        """Whether the method names itself as an attribute (``self.name``, ``other.name``)."""
        return bool(re.search(rf"\.\s*{re.escape(self.name)}\b", self.code))

    def only_through_receiver(self) -> bool:
        """Whether every attribute ``x.name`` of its own name has its receiver (first parameter) as ``x``."""
        tree = ast.parse(self.code).body[0]
        positional = tree.args.posonlyargs + tree.args.args
        receiver = positional[0].arg if positional else None
        return all(
            isinstance(node.value, ast.Name) and node.value.id == receiver
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == self.name
        )


def targets_of(module: types.ModuleType) -> list[Target]:
    source = Path(module.__file__).read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    out: list[Target] = []

    def visit(body: list[ast.stmt], scope: tuple[str, ...]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(Target(module, ".".join((*scope, node.name)), node, lines))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, (*scope, node.name))
            elif isinstance(node, (ast.If, ast.Try)) and not scope:
                for part in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                    visit(part, scope)

    visit(ast.parse(source).body, ())
    return out


def mangled(name: str, owner: str) -> str:
    """A name as a class body ``owner`` stores it (``__x`` -> ``_Owner__x``)."""
    if name.startswith("__") and not name.endswith("__"):
        return f"_{owner.lstrip('_')}{name}"
    return name


def compiled(target: Target, code: str) -> Callable | None:
    """The function ``code`` defines, executed in a copy of the module's globals (a method inside a
    class of its class's name, so private names are mangled alike; ``__class__`` is the live class)."""
    namespace = dict(vars(target.module))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    name = next((node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if name is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if target.classes:
                owner = target.classes[-1]
                exec(compile(f"class {owner}:\n" + textwrap.indent(code, "    "), target.qualname, "exec"), namespace)
                function = namespace[owner].__dict__[mangled(name, owner)]
                function = getattr(function, "__func__", function)  # ``__new__``: a static method
                # the module's own name again (``super(Fraction, cls)``), not the wrapper's
                namespace[owner] = getattr(target.module, owner, None)
            else:
                exec(compile(code, target.qualname, "exec"), namespace)
                function = namespace[name]
    except Exception:
        return None
    live = target.live_class()
    if function.__closure__ and live is not None and "__class__" in function.__code__.co_freevars:
        function.__closure__[function.__code__.co_freevars.index("__class__")].cell_contents = live
    return function


# ---------------------------------------------------------------------------------------------- calls


def arguments_of(frame: types.FrameType) -> Call:
    """The arguments of the call that ``frame`` starts (a deep copy)."""
    code = frame.f_code
    local = frame.f_locals
    names = code.co_varnames
    positional = code.co_argcount
    keyword_only = code.co_kwonlyargcount
    args = [local[name] for name in names[:positional]]
    keywords = {name: local[name] for name in names[positional : positional + keyword_only]}
    extra = positional + keyword_only
    if code.co_flags & inspect.CO_VARARGS:
        args += list(local[names[extra]])
        extra += 1
    more = dict(local[names[extra]]) if code.co_flags & inspect.CO_VARKEYWORDS else {}
    return copy.deepcopy((tuple(args), keywords, more))


def fresh(call: Call) -> Call | None:
    """A deep copy of a call's arguments (``None`` if they cannot be copied again)."""
    try:
        return copy.deepcopy(call)
    except Exception:
        return None


def _describe(value: Any) -> str:
    if isinstance(value, types.GeneratorType):
        items = []
        try:
            for item in value:
                items.append(item)
                if len(items) >= 200:
                    break
        except Exception as error:
            items.append(f"raised {type(error).__name__}: {error}")
        value = items
    try:
        text = repr(value)
    except Exception as error:
        text = f"unrepresentable {type(error).__name__}"
    return ADDRESS.sub("", text)[:CUT]


def outcome(function: Callable, call: Call | None, mapping: dict[str, str] | None = None) -> str:
    """What calling ``function`` with ``call`` (a fresh copy, used up) gives; keyword-only parameters
    passed under the names ``mapping`` gives them."""
    if call is None:
        return "arguments not copied"
    args, keywords, more = call
    kwargs = {**{(mapping or {}).get(key, key): value for key, value in keywords.items()}, **more}
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = "returned " + _describe(function(*args, **kwargs))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Timeout:
        return "timeout"
    except RecursionError:
        return "raised RecursionError"
    except BaseException as error:
        result = f"raised {type(error).__name__}: {ADDRESS.sub('', str(error))[:CUT]}"
    return result + " | arguments after: " + _describe((args, keywords, more))


def same(got: str, expected: str, back: dict[str, str]) -> bool:
    """Whether two outcomes are equal, word by word, up to the renaming (``back``: new -> old name)."""
    if got == expected:
        return True
    ours, theirs = re.split(r"(\W+)", got), re.split(r"(\W+)", expected)
    return len(ours) == len(theirs) and all(a == b or back.get(a) == b for a, b in zip(ours, theirs, strict=True))


_MISSING = object()


class Replayer:
    """The profile hook: replays the first calls of every target on its original and attacked code."""

    def __init__(self, targets: dict[tuple[str, int], Target], specs: list[str], calls: int) -> None:
        self.targets = targets
        self.specs = specs
        self.limit = calls
        self.functions: dict[tuple[int, str], Callable | None] = {}  # (id(target), spec or "") -> compiled
        self.report: dict[str, Any] = {"functions": 0, "calls": 0, "stable_calls": 0, "functions_by_module": {}}
        self.results = {spec: {"failures": [], "kwargs_collisions": [], "not_replayed": set()} for spec in specs}

    def compiled(self, target: Target, spec: str) -> Callable | None:
        key = (id(target), spec)
        if key not in self.functions:
            self.functions[key] = compiled(target, target.attacked[spec][0] if spec else target.code)
        return self.functions[key]

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        target = self.targets.get((code.co_filename, code.co_firstlineno))
        if target is None or target.calls >= self.limit or code.co_flags & (inspect.CO_COROUTINE | 0x200):
            return  # (0x200: an async generator)
        target.calls += 1
        try:
            self.replay(target, arguments_of(frame))
        except BaseException:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def replay(self, target: Target, call: Call) -> None:
        original = self.compiled(target, "")
        if original is None:
            return
        self.report["calls"] += 1
        self.report["functions"] += target.calls == 1
        module = target.module.__name__
        self.report["functions_by_module"][module] = self.report["functions_by_module"].get(module, 0) + (
            target.calls == 1
        )
        expected = outcome(original, fresh(call))
        if expected == "timeout" or outcome(original, fresh(call)) != expected:
            return  # unstable
        self.report["stable_calls"] += 1
        for spec in self.specs:
            code, mapping = target.attacked[spec]
            result = self.results[spec]
            where = f"{target.module.__name__}.{target.qualname}"
            if set(call[2]) & {new for old, new in mapping.items() if new != old}:
                result["kwargs_collisions"].append(where)
                continue
            got = self.attacked_outcome(target, spec, mapping, call)
            if got is None:
                result["not_replayed"].add(where)
            elif not same(got, expected, {new: old for old, new in mapping.items() if new != old}):
                result["failures"].append(
                    {"function": where, "original": expected[:300], "attacked": got[:300], "code": code[:600]}
                )

    def attacked_outcome(self, target: Target, spec: str, mapping: dict[str, str], call: Call) -> str | None:
        """The outcome of the attacked snippet; ``None`` if it cannot be put where the original is."""
        function = self.compiled(target, spec)
        if function is None:
            return "does not compile"
        live = target.live_class() if target.reaches_itself() else None
        if live is None:
            return outcome(function, fresh(call), mapping)
        if not target.only_through_receiver():
            return None  # ``other.name(...)``: another object's method of that name, renamed or not
        old = mangled(target.name, live.__name__)
        new = mangled(mapping.get(target.name, target.name), live.__name__)
        kind = type(inspect.getattr_static(live, old, None))
        if (new != old and hasattr(live, new)) or kind not in (staticmethod, classmethod, types.FunctionType):
            return None  # the new name is another attribute of the class (``k_shift_dataset``)
        descriptor = kind(function) if kind in (staticmethod, classmethod) else function
        arguments = fresh(call)  # copied before the class changes
        saved = {name: live.__dict__.get(name, _MISSING) for name in (old, new)}
        try:
            for name in saved:
                setattr(live, name, descriptor)
            return outcome(function, arguments, mapping)
        finally:
            for name, value in saved.items():
                if value is _MISSING:
                    delattr(live, name)
                else:
                    setattr(live, name, value)


def suite(name: str) -> unittest.TestSuite:
    """The tests ``name`` names (``pure-datetime.TestDate``: test.datetimetester's class on the
    pure-Python datetime module, as test.test_datetime runs it)."""
    if not name.startswith(PURE_DATETIME + "."):
        return unittest.defaultTestLoader.loadTestsFromName(name)
    from test.support.import_helper import import_fresh_module

    saved = {key: sys.modules.get(key) for key in ("datetime", "_datetime", "_strptime")}
    try:
        module = import_fresh_module("test.datetimetester", fresh=["datetime", "_strptime"], blocked=["_datetime"])
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    return unittest.defaultTestLoader.loadTestsFromTestCase(getattr(module, name.split(".", 1)[1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+")
    parser.add_argument("--modules", default=",".join(MODULES))
    parser.add_argument("--calls", type=int, default=3)
    options = parser.parse_args(argv)
    import pandas as pd

    from csbench.attacks import RENAMING_COLUMN, run_attack

    modules = options.modules.split(",")
    targets = [target for name in modules for target in targets_of(import_module(name))]
    frame = pd.DataFrame({"id": [t.qualname for t in targets], "language": "python", "code": [t.code for t in targets]})
    for spec in options.specs:
        out, _ = run_attack(spec, {"test": frame}, progress=False)
        for target, code, mapping in zip(targets, out["test"]["code"], out["test"][RENAMING_COLUMN], strict=True):
            target.attacked[spec] = (code, json.loads(mapping))
    replayer = Replayer({target.key: target for target in targets}, options.specs, options.calls)
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(3000)
    for tests in dict.fromkeys(test for name in modules for test in MODULES[name]):
        tests_run = suite(tests)
        # (set again for each: a test that recurses to the limit makes the hook fail, which removes it)
        sys.setprofile(replayer)
        try:
            unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(tests_run)
        finally:
            sys.setprofile(None)
    report = replayer.report
    for spec, result in replayer.results.items():
        failures = result["failures"]
        report[spec] = {
            "failed_calls": len(failures),
            "failed_functions": len({failure["function"] for failure in failures}),
            "functions_not_replayed": len(result["not_replayed"]),
            "kwargs_collisions": sorted(set(result["kwargs_collisions"])),
            "failures": failures,
        }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
