"""The Cython-compiled hot modules of the code attacks (setup.py, csbench._native): a build runs them
compiled, CSBENCH_PURE_PYTHON=1 runs the sources, both attack real code in seven languages
identically, and a module whose source changed since the build runs from its source, with a warning.
Each check runs in a fresh interpreter: the choice is made once per process, at ``import csbench``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from corpora import LOCAL_SOURCES, _sources, shared_functions

import csbench._native as native
from csbench.code.extract import extract_functions

SPECS = [
    "no_comment",
    "full_hash",
    "k_shift_dataset-3",
    "k_shift_snippet-3",
    "random_permutation",
    "most_popular",
    "ordered_id",
    "advtest_normalize_scoped",  # (advtest_normalize is Python only; the functions here are of seven languages)
    "k_shift_snippet-3+ordered_id",
]
PER_LANGUAGE = 100  # functions of each language in the equivalence test

# prints, as JSON on its last line, the file each hot module was loaded from and native.status()
LOAD = """
import importlib, json
import csbench._native as native
files = {name: importlib.import_module(name).__file__ for name in native.HOT_MODULES}
print(json.dumps({"files": files, "status": native.status()}))
"""


def run_python(code: str, pure: bool = False, args: list[str] | None = None) -> dict:
    """Runs ``code`` in a fresh interpreter (compiled modules, or CSBENCH_PURE_PYTHON=1): its JSON last
    line, and its stderr."""
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    if pure:
        env[native.PURE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *(args or [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


def not_compiled() -> dict[str, str]:
    """The hot modules a build does not run compiled here (not built, or edited since), with why."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(native.PURE_ENV, raising=False)
        decided = native.plan()
    return {name: how for name, how in decided.items() if how != native.COMPILED}


@pytest.fixture(scope="module")
def compiled() -> None:
    missing = not_compiled()
    failed = sorted(name for name, how in missing.items() if how == native.NOT_BUILT)
    if failed and len(failed) < len(native.HOT_MODULES):  # setup.py's fallback hides a compile error
        pytest.fail(f"a build compiled some hot modules but not {', '.join(failed)}: its Cython compile failed")
    if missing:
        pytest.skip(
            "the Cython extensions are not built for the current sources (pip install --no-deps -e . or"
            f" make setup builds them): {missing}"
        )


def test_a_build_runs_every_hot_module_compiled(compiled) -> None:
    out = run_python(LOAD)
    assert all(path.endswith(".so") for path in out["files"].values()), out["files"]
    assert set(out["status"].values()) == {native.COMPILED}
    assert "RuntimeWarning" not in out["stderr"]


def test_pure_python_runs_every_hot_module_from_its_source() -> None:
    out = run_python(LOAD, pure=True)
    for name, path in out["files"].items():
        assert Path(path) == native.PACKAGE_DIR / native.HOT_MODULES[name], name
    # the package csbench.attacks keeps its submodules importable
    assert out["status"]["csbench.attacks"] in (native.FORCED_PURE, native.NOT_BUILT)


def _functions() -> pd.DataFrame:
    """Real functions of every language whose sources are on this machine (the first files of
    tests/corpora.py's deterministic samples), plus CodeSearchNet's Ruby and GeCS when ../shared is there."""
    rows = []
    for language, (root, *_rest) in LOCAL_SOURCES.items():
        if not root.exists():
            continue
        codes: list[str] = []
        for _name, text in _sources(language):
            codes += [fn.code for fn in extract_functions(text, language)]
            if len(codes) >= PER_LANGUAGE:
                break
        codes += shared_functions(language)[:10]
        rows += [(language, code) for code in codes[: PER_LANGUAGE + 10]]
    if len({language for language, _ in rows}) < 2:
        pytest.skip("the sources of fewer than two languages are on this machine (scripts/setup.sh installs them)")
    languages, codes = zip(*rows, strict=True)
    return pd.DataFrame({"id": [f"r{i}" for i in range(len(rows))], "language": languages, "code": codes})


ATTACK = """
import hashlib, json
import pandas as pd
import csbench._native as native
from csbench.attacks import RENAMING_COLUMN, run_attack

frame = pd.read_parquet({path!r})
digests = {{}}
for spec in {specs!r}:
    out, _ = run_attack(spec, {{"train": frame}}, progress=False)
    attacked = out["train"]
    digests[spec] = [
        hashlib.sha256("\\0".join(attacked[column]).encode()).hexdigest() for column in ("code", RENAMING_COLUMN)
    ]
    digests[spec].append(int((attacked["code"] != frame["code"]).sum()))
print(json.dumps({{"digests": digests, "status": native.status()}}))
"""


def test_compiled_and_pure_attack_identically(compiled, tmp_path: Path) -> None:
    frame = _functions()
    frame.to_parquet(tmp_path / "functions.parquet")
    script = ATTACK.format(path=str(tmp_path / "functions.parquet"), specs=SPECS)
    fast = run_python(script)
    pure = run_python(script, pure=True)
    assert set(fast["status"].values()) == {native.COMPILED}
    assert set(pure["status"].values()) == {native.FORCED_PURE}
    assert fast["digests"] == pure["digests"]
    assert all(changed > 0 for _, _, changed in fast["digests"].values())  # the attacks did attack


# the guard again, with a manifest in which two sources differ from what was built; then a small attack
STALE = """
import importlib, json, sys, warnings
from pathlib import Path
import pandas as pd
import csbench._native as native

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    native.guard(manifest=Path(sys.argv[1]))
from csbench.attacks import run_attack

frame = pd.DataFrame({"language": ["python"], "code": ["def f(a):\\n    return a\\n"]})
out, _ = run_attack("ordered_id", {"test": frame}, progress=False)
files = {name: importlib.import_module(name).__file__ for name in native.HOT_MODULES}
messages = [str(w.message) for w in caught]
print(json.dumps({"files": files, "status": native.status(), "warnings": messages, "attacked": out["test"]["code"][0]}))
"""


def test_a_source_edited_since_the_build_runs_from_its_source(compiled, tmp_path: Path) -> None:
    manifest = native.read_manifest(native.PACKAGE_DIR / native.MANIFEST)
    for name in ("csbench.code.identifiers", "csbench.attacks"):  # a module and a package
        manifest[name] = "0" * 64
    (tmp_path / "compiled.json").write_text(json.dumps(manifest))
    out = run_python(STALE, args=[str(tmp_path / "compiled.json")])
    files, status = out["files"], out["status"]
    assert files["csbench.code.identifiers"].endswith("identifiers.py")
    assert files["csbench.attacks"].endswith("attacks/__init__.py")
    assert files["csbench.attacks.renaming"].endswith(".so")  # found through the source package's __path__
    assert files["csbench.code.comments"].endswith(".so")
    assert status["csbench.code.identifiers"] == status["csbench.attacks"] == native.STALE
    assert status["csbench.code.parsing"] == native.COMPILED
    (warning,) = out["warnings"]
    assert "csbench.attacks, csbench.code.identifiers changed since" in warning and "make setup" in warning
    assert out["attacked"] == "def id1(id2):\n    return id2\n"


def test_plan_reads_the_manifest_and_hashes_only_built_sources(tmp_path: Path, monkeypatch) -> None:
    """Without any real build: a fake package with an empty 'extension module' beside some sources."""
    suffix = native.importlib.machinery.EXTENSION_SUFFIXES[0]
    hashes = {}
    for name, relative in native.HOT_MODULES.items():
        source = tmp_path / relative
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"# {name}\n")
        hashes[name] = hashlib.sha256(source.read_bytes()).hexdigest()
    for relative in ("code/identifiers.py", "attacks/__init__.py", "code/parsing.py"):
        (tmp_path / relative).with_name(Path(relative).stem + suffix).write_bytes(b"")
    hashes["csbench.code.parsing"] = "0" * 64  # built from another version of the source
    (tmp_path / native.MANIFEST).write_text(json.dumps(hashes))
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    assert native.plan(tmp_path) == {
        "csbench.code.identifiers": native.COMPILED,
        "csbench.code.comments": native.NOT_BUILT,
        "csbench.attacks.renaming": native.NOT_BUILT,
        "csbench.attacks": native.COMPILED,
        "csbench.attacks.engine": native.NOT_BUILT,
        "csbench.code.parsing": native.STALE,
        "csbench.code.treequery": native.NOT_BUILT,
        **{name: native.NOT_BUILT for name in native.HOT_MODULES if name.startswith("csbench.code.languages.")},
        "csbench.evaluate._select": native.NOT_BUILT,
    }
    (tmp_path / native.MANIFEST).unlink()  # no manifest: nothing built is trusted
    assert native.plan(tmp_path)["csbench.code.identifiers"] == native.STALE
    monkeypatch.setenv(native.PURE_ENV, "1")
    assert set(native.plan(tmp_path).values()) == {native.FORCED_PURE, native.NOT_BUILT}


def test_the_source_finder_loads_a_module_and_a_package_from_source(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "pkg" / "sub.py").write_text("VALUE = 2\n")
    finder = native.SourceFinder({"_csbench_test_pkg": tmp_path / "pkg" / "__init__.py"})
    sys.meta_path.insert(0, finder)
    try:
        import _csbench_test_pkg
        import _csbench_test_pkg.sub

        assert (_csbench_test_pkg.VALUE, _csbench_test_pkg.sub.VALUE) == (1, 2)
    finally:
        sys.meta_path.remove(finder)
        for name in ("_csbench_test_pkg", "_csbench_test_pkg.sub"):
            sys.modules.pop(name, None)


def test_setup_sh_rebuilds_after_an_edit_of_every_hot_module() -> None:
    """scripts/setup.sh's stamp covers COMPILED_SOURCES (bash cannot import HOT_MODULES): the two lists
    must name the same files, or an edited module would stay stale until the next reinstall."""
    text = (native.PACKAGE_DIR.parents[1] / "scripts" / "setup.sh").read_text()
    listed = text.split("COMPILED_SOURCES=(", 1)[1].split(")", 1)[0].split()
    modules = {**native.HOT_MODULES, **native.C_MODULES}
    assert sorted(listed) == sorted(f"src/csbench/{relative}" for relative in modules.values())


# pure Python where Cython is not installed at all (a fresh venv: the build's Cython lives in pip's
# isolated build environment): the hot modules' ``cython.locals`` come from csbench._cython_shim
NO_CYTHON = """
import importlib, json, sys
sys.modules["cython"] = None  # import cython -> ImportError, as without Cython
import pandas as pd
from csbench.attacks import run_attack
from csbench.code import identifiers

codes = ["f <- function(a, `b c`) a + `b c`\\n", "function f(a) { return a; }\\n"]
frame = pd.DataFrame({"language": ["r", "javascript"], "code": codes})
out, _ = run_attack("ordered_id", {"test": frame}, progress=False)
print(json.dumps({"shim": identifiers.cython.__name__, "attacked": out["test"]["code"].tolist()}))
"""


def test_pure_python_without_cython_installed_uses_the_shim() -> None:
    out = run_python(NO_CYTHON, pure=True)
    assert out["shim"] == "csbench._cython_shim"
    assert out["attacked"] == ["id1 <- function(id2, `b c`) id2 + `b c`\n", "function id1(id2) { return id2; }\n"]


def test_the_shim_leaves_functions_as_they_are() -> None:
    from csbench import _cython_shim as shim

    def f(data: bytes, n: int) -> bytes:
        return data[:n]

    assert shim.locals(data=bytes, n=shim.Py_ssize_t)(f) is f
    assert shim.compiled is False and shim.Py_ssize_t is int
