"""Nothing csbench reads is deserialised by a loader that can run code (issue #22, item 2).

Files a user receives from elsewhere (a DVC remote, a hub, a colleague's checkout) are indexes,
checkpoints, configs, datasets and records. The package, its scripts, benchmarks and workflow must not
load anything with pickle (or pickle-based modules), ``torch.load`` without ``weights_only=True``,
``np.load`` with ``allow_pickle`` other than ``False``, or ``yaml.load`` without a safe loader.

The check reads the syntax tree, not the text: imports are resolved through their aliases
(``from pickle import loads as l``, ``import numpy as n``, a local ``from torch import load``), a
checked function passed around instead of called (``f = np.load``) is refused because its arguments
could not be checked, and ``importlib.import_module("pickle")`` is caught too, as is any string naming
a pickle module (a table of module names); a module name built by string operations is not followed.
The Snakefile and
rule files are Snakemake, not Python, so they are checked token by token (coarser: any mention of a
pickle module or of ``yaml.load`` / ``torch.load`` / ``np.load`` there is refused).
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

import csbench

PYTHON_ROOTS = ("scripts", "benchmarks")  # and the csbench package that is imported (src/csbench)
SNAKEMAKE_FILES = ("Snakefile", "workflow/rules")

# Modules whose loaders unpickle: importing them at all is refused.
PICKLE_MODULES = frozenset(
    {"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "joblib", "shelve", "marshal", "jsonpickle"}
)
# Always refused, whatever the arguments.
FORBIDDEN_CALLS = frozenset(
    {
        "pandas.read_pickle",
        "torch.jit.load",
        "yaml.unsafe_load",
        "yaml.unsafe_load_all",
        "yaml.full_load",
        "yaml.full_load_all",
    }
)
UNSAFE_YAML_LOADERS = frozenset(
    f"yaml.{name}" for name in ("Loader", "UnsafeLoader", "FullLoader", "CLoader", "CUnsafeLoader", "CFullLoader")
)
SAFE_YAML_LOADERS = frozenset(f"yaml.{name}" for name in ("SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"))
NUMPY_LOADS = frozenset({"numpy.load", "numpy.lib.npyio.load", "numpy.lib.format.read_array"})
TORCH_LOADS = frozenset({"torch.load", "torch.serialization.load"})
YAML_LOADS = frozenset({"yaml.load", "yaml.load_all"})
CHECKED = NUMPY_LOADS | TORCH_LOADS | YAML_LOADS
WATCHED_ROOTS = frozenset({"numpy", "torch", "yaml", "pandas", *PICKLE_MODULES})


class UnsafeLoads(ast.NodeVisitor):
    """Findings (``line: what``) of one module's syntax tree."""

    def __init__(self, tree: ast.AST) -> None:
        self.aliases: dict[str, set[str]] = {}
        self.findings: list[str] = []
        self.called: set[int] = set()  # ids of the func nodes of calls (checked there, not as references)
        for node in ast.walk(tree):  # every import, wherever it is (a function's local import too)
            self._bind(node)
        self.visit(tree)

    # -- names ------------------------------------------------------------------------------------
    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self._check_module(node, alias.name)
                if alias.asname:
                    self.aliases.setdefault(alias.asname, set()).add(alias.name)
                else:  # `import torch.serialization` binds `torch`
                    root = alias.name.split(".")[0]
                    self.aliases.setdefault(root, set()).add(root)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            self._check_module(node, node.module)
            for alias in node.names:
                if alias.name == "*":
                    if node.module.split(".")[0] in WATCHED_ROOTS:
                        self._flag(node, f"`from {node.module} import *` hides what is called")
                    continue
                full = f"{node.module}.{alias.name}"
                self._check_module(node, full)
                self.aliases.setdefault(alias.asname or alias.name, set()).add(full)

    def _check_module(self, node: ast.AST, module: str) -> None:
        if module.split(".")[0] in PICKLE_MODULES:
            self._flag(node, f"imports {module} (pickle-based)")

    def _qualified(self, node: ast.AST) -> set[str]:
        """The dotted names an expression may stand for, through the import aliases."""
        if isinstance(node, ast.Name):
            return set(self.aliases.get(node.id, set()))
        if isinstance(node, ast.Attribute):
            return {f"{base}.{node.attr}" for base in self._qualified(node.value)}
        return set()

    def _flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(f"{getattr(node, 'lineno', 0)}: {what}")

    # -- calls ------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        names = self._qualified(node.func)
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        spread = any(k.arg is None for k in node.keywords)
        for name in names:
            if name in FORBIDDEN_CALLS:
                self._flag(node, f"calls {name}")
            elif name in NUMPY_LOADS:
                value = keywords.get("allow_pickle")
                if spread or (value is not None and not _is_const(value, False)):
                    self._flag(node, f"{name} without allow_pickle=False")
            elif name in TORCH_LOADS:
                if spread or not _is_const(keywords.get("weights_only"), True):
                    self._flag(node, f"{name} without weights_only=True")
            elif name in YAML_LOADS:
                loader = keywords.get("Loader", node.args[1] if len(node.args) > 1 else None)
                if spread or loader is None or not (self._qualified(loader) & SAFE_YAML_LOADERS):
                    self._flag(node, f"{name} without a safe Loader")
            elif name in {"importlib.import_module", "builtins.__import__"}:
                self._check_dynamic_import(node)
        if isinstance(node.func, ast.Name) and node.func.id == "__import__" and "__import__" not in self.aliases:
            self._check_dynamic_import(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "read_pickle":
            self._flag(node, "calls read_pickle")
        self.generic_visit(node)

    def _check_dynamic_import(self, node: ast.Call) -> None:
        """A constant name is checked here; a name read from a table (``_KIND_MODULES[kind]``) is
        covered by :meth:`visit_Constant`, which refuses any string naming a pickle module."""
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            self._check_module(node, node.args[0].value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value.split(".")[0] in PICKLE_MODULES:
            self._flag(node, f"names {node.value} (a module an import_module could load)")

    # -- references ---------------------------------------------------------------------------------
    def _reference(self, node: ast.AST) -> None:
        if id(node) in self.called:
            return
        names = self._qualified(node)
        if names & UNSAFE_YAML_LOADERS:
            self._flag(node, f"uses {sorted(names & UNSAFE_YAML_LOADERS)[0]}")
        passed = names & (CHECKED | FORBIDDEN_CALLS)
        if passed:
            self._flag(node, f"passes {sorted(passed)[0]} around (its arguments cannot be checked)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._reference(node)
        if not self._qualified(node):  # `a.b.c`: a known prefix is reported once, as itself
            self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self._reference(node)


def _is_const(node: ast.AST | None, value: bool) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def scan_python(source: str) -> list[str]:
    return UnsafeLoads(ast.parse(source)).findings


def scan_snakemake(source: str) -> list[str]:
    """Token-level check of a Snakemake file (not parseable as Python)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    tokens = [t for t in tokens if t.type == tokenize.NAME or t.string == "."]
    findings = []
    for i, token in enumerate(tokens):
        if token.string in PICKLE_MODULES:
            findings.append(f"{token.start[0]}: mentions {token.string}")
        if (
            token.string in ("yaml", "torch", "np", "numpy")
            and i + 2 < len(tokens)
            and tokens[i + 1].string == "."
            and tokens[i + 2].string in ("load", "load_all", "unsafe_load", "full_load")
        ):
            findings.append(f"{token.start[0]}: {token.string}.{tokens[i + 2].string}")
    return findings


def project_files() -> tuple[list[Path], list[Path]]:
    package = Path(csbench.__file__).parent  # the package that runs (src/csbench of this checkout)
    others = (p for root in PYTHON_ROOTS for p in (PROJECT_ROOT / root).rglob("*.py"))
    python = sorted([*package.rglob("*.py"), *others])
    snakemake = [PROJECT_ROOT / "Snakefile", *sorted((PROJECT_ROOT / "workflow/rules").glob("*.smk"))]
    return python, snakemake


def test_the_code_loads_nothing_with_pickle_or_an_unsafe_loader():
    python, snakemake = project_files()
    assert len(python) > 50 and len(snakemake) > 3  # the scan sees the code base
    findings = [f"{p}:{f}" for p in python for f in scan_python(p.read_text())]
    findings += [f"{p}:{f}" for p in snakemake for f in scan_snakemake(p.read_text())]
    assert findings == []


UNSAFE = {
    "import pickle": "imports pickle",
    "from pickle import loads": "imports pickle.loads",
    "from pickle import loads as l\nl(b'')": "imports pickle.loads",
    "import cloudpickle as cp": "imports cloudpickle",
    "import importlib\nimportlib.import_module('pickle')": "imports pickle",
    "__import__('dill')": "imports dill",
    "import importlib\nMODULES = {'fast': 'cPickle'}\nimportlib.import_module(MODULES[kind])": "names cPickle",
    "import numpy as n\nn.load(f, allow_pickle=True)": "numpy.load without allow_pickle=False",
    "from numpy import load as l\nl(f, allow_pickle=1)": "numpy.load without allow_pickle=False",
    "import numpy\nnumpy.load(f, **options)": "numpy.load without allow_pickle=False",
    "import numpy.lib.format as fmt\nfmt.read_array(f, allow_pickle=True)": "read_array without allow_pickle",
    "import torch\ntorch.load(f)": "torch.load without weights_only=True",
    "import torch\ntorch.load(f, weights_only=False)": "torch.load without weights_only=True",
    "def f():\n    from torch import load\n    return load(p)": "torch.load without weights_only=True",
    "import torch.serialization\ntorch.serialization.load(f)": "torch.serialization.load without weights_only",
    "import torch\nf = torch.load\nf(p)": "passes torch.load around",
    "import functools, numpy as np\nfunctools.partial(np.load, allow_pickle=True)": "passes numpy.load around",
    "import yaml\nyaml.load(s)": "yaml.load without a safe Loader",
    "import yaml\nyaml.load(s, Loader=yaml.Loader)": "yaml.load without a safe Loader",
    "import yaml\nyaml.load(s, yaml.FullLoader)": "uses yaml.FullLoader",
    "from yaml import unsafe_load\nunsafe_load(s)": "calls yaml.unsafe_load",
    "import yaml as y\ny.full_load(s)": "calls yaml.full_load",
    "from yaml import *": "hides what is called",
    "import pandas as pd\npd.read_pickle(p)": "calls pandas.read_pickle",
    "frame.read_pickle(p)": "calls read_pickle",
    "import torch\ntorch.jit.load(p)": "calls torch.jit.load",
}
SAFE = [
    "import numpy as np\nnp.load(f)",
    "import numpy as np\nnp.load(f, allow_pickle=False, mmap_mode='r')",
    "import torch\ntorch.load(f, weights_only=True, map_location='cpu')",
    "import yaml\nyaml.safe_load(s)\nyaml.load(s, Loader=yaml.SafeLoader)\nyaml.load(s, yaml.CSafeLoader)",
    "import yaml\nyaml.compose(s, Loader=yaml.SafeLoader)",
    "import json\njson.load(f)",
    "from safetensors.torch import load_file\nload_file(p)",
    "def load(p):\n    return p\nload(1)",  # a function of one's own named load
    "import bm25s\nbm25s.BM25.load(p, allow_pickle=False)",
]


@pytest.mark.parametrize(("source", "expected"), list(UNSAFE.items()))
def test_the_scan_catches_each_unsafe_form(source, expected):
    findings = scan_python(textwrap.dedent(source))
    assert any(expected in f for f in findings), findings


@pytest.mark.parametrize("source", SAFE)
def test_the_scan_lets_safe_forms_pass(source):
    assert scan_python(source) == []


def test_the_snakemake_scan_catches_unsafe_loads():
    rule = "rule x:\n    run:\n        import pickle\n        data = yaml.load(open(input[0]))\n"
    assert [f.split(": ")[1] for f in scan_snakemake(rule)] == ["mentions pickle", "yaml.load"]
    assert scan_snakemake("rule x:\n    run:\n        data = yaml.safe_load(open(input[0]))\n") == []
