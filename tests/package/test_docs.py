"""The documentation (issue #24 item 1): README.md and the site in docs/.

- `mkdocs build --strict` builds the site without a warning: no broken link or anchor between
  pages, no page left out of the navigation (mkdocs.yml's `validation`).
- The README stays an entry page (at most 150 lines) and its links into docs/ resolve, anchors
  included (mkdocs does not read the README).
- Every fenced block names its language, and every shell block (`bash`, `sh`, `shell`) of the
  README and of docs/ carries, on the line before it, one of three markers:
    * ``<!-- tested-by: tests/test_x.py::test_y, ... -->``: a test runs what the block shows; each
      test named must exist (found by file name anywhere under tests/, so moving test files into
      sub-folders keeps the mapping);
    * ``<!-- run -->``: cheap commands that this module runs for real, line by line (``csbench``
      lines in this process, others through bash in the project root);
    * ``<!-- illustrative -->``: a command that needs a cluster, a remote, the network or hours.
  Output and transcripts use ``text`` / ``console`` blocks, which are never run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 150
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell"})
MARKER = re.compile(r"^<!--\s*(?P<kind>illustrative|run|tested-by:)\s*(?P<tests>.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    marker: str | None  # "illustrative", "run", "tested-by:" or None
    tests: tuple[str, ...]  # for "tested-by:": the node ids named

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def markdown_files() -> list[Path]:
    """The README and every page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path`` with the marker on the last non-blank line before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        tests = tuple(t.strip() for t in marker.group("tests").split(",") if t.strip()) if marker else ()
        blocks.append(
            Block(
                path=path,
                line=i + 1,
                language=opening.group("info").strip().split(" ")[0],
                text="\n".join(line[len(opening.group("indent")) :] for line in lines[i + 1 : end]),
                marker=marker.group("kind") if marker else None,
                tests=tests,
            )
        )
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in markdown_files() for block in fenced_blocks(path)]


def shell_blocks() -> list[Block]:
    return [block for block in all_blocks() if block.language in SHELL_LANGUAGES]


def commands(text: str) -> list[str]:
    """The command lines of a shell block: comments and blank lines dropped, continuations joined."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def test_the_site_builds_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "extending" / "attack.html").is_file()


def test_the_readme_is_an_entry_page_whose_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines"
    broken = []
    for match in LINK.finditer(text):
        target = match.group("target")
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = (ROOT / path) if path else README
        if not page.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in heading_anchors(page):
            broken.append(f"{target}: {page.relative_to(ROOT)} has no heading #{anchor}")
    assert not broken, broken


def heading_anchors(page: Path) -> set[str]:
    """The ids the site gives the headings of a Markdown page (Python-Markdown's toc slugify)."""
    anchors: set[str] = set()
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside and (heading := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)):
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1)).replace("`", "")
            anchors.add(slugify(title, "-"))
    return anchors


def test_every_fenced_block_names_its_language() -> None:
    unnamed = [block.where for block in all_blocks() if not block.language]
    assert not unnamed, f"fenced blocks without a language (bash, text, console, yaml, ...): {unnamed}"


def test_every_shell_block_is_tested_run_or_illustrative() -> None:
    unmarked = [block.where for block in shell_blocks() if block.marker is None]
    assert not unmarked, (
        "shell blocks with neither <!-- tested-by: tests/...::test_... -->, <!-- run --> nor "
        f"<!-- illustrative --> on the line before: {unmarked}"
    )
    assert any(block.marker == "run" for block in shell_blocks())


def test_every_test_named_beside_a_block_exists() -> None:
    missing = []
    named = [(block, node) for block in shell_blocks() if block.marker == "tested-by:" for node in block.tests]
    assert named
    for block, node in named:
        file, _, function = node.partition("::")
        candidates = [ROOT / file] if (ROOT / file).is_file() else sorted((ROOT / "tests").rglob(Path(file).name))
        if not function or not any(
            re.search(rf"^(async )?def {re.escape(function)}\(", c.read_text(encoding="utf-8"), re.M)
            for c in candidates
        ):
            missing.append(f"{block.where}: {node}")
    assert not missing, f"tests named beside command blocks that do not exist: {missing}"


@pytest.mark.parametrize("block", [b for b in shell_blocks() if b.marker == "run"], ids=lambda b: b.where)
def test_the_run_blocks_run(block: Block, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from csbench.cli import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    for command in commands(block.text):
        words = shlex.split(command, comments=True)
        if words[0] == "csbench":
            try:
                code = main(words[1:])
            except SystemExit as done:  # --help
                code = done.code
            output = capsys.readouterr()
            assert code in (0, None), f"{block.where}: `{command}` exited {code}: {output.out}{output.err}"
        else:
            proc = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=60,
                                  check=False)
            assert proc.returncode == 0, f"{block.where}: `{command}`: {proc.stdout}{proc.stderr}"


# Paths named in the docs that are not this repository's: other repositories' files, and an example
# file name inside a quoted error message.
FOREIGN_PATHS = frozenset({"workflow/configs/x.yaml"})
REPO_PATH = re.compile(r"(?<![\w/.-])((?:src/csbench|csbench|tests|workflow|scripts|benchmarks)/[\w./-]*[\w])")
NODE = re.compile(r"(tests/[\w/]+\.py)(?:::(test_\w+))?|`::(test_\w+)`")
MODULE = re.compile(r"`(csbench(?:\.[A-Za-z_]\w*)+)`")


def _test_files(path: str) -> list[Path]:
    """``path`` under the project, or, once the tests are moved into sub-folders, its namesakes."""
    return [ROOT / path] if (ROOT / path).is_file() else sorted((ROOT / "tests").rglob(Path(path).name))


def test_every_path_test_and_module_named_in_the_docs_exists() -> None:
    """What the docs name exists: repository paths (a test file also where it has moved under tests/),
    test functions (``tests/x.py::test_y`` and the ``::test_z`` that follow it) and ``csbench.*`` names."""
    import importlib

    missing: list[str] = []
    for page in markdown_files():
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(ROOT)
        for match in REPO_PATH.finditer(text):
            path = match.group(1)
            if text[match.end() : match.end() + 1] in ("<", "{", "*"):
                continue  # a template: tests/test_<x>.py, data/raw/{name}
            if path.startswith("csbench/"):
                path = f"src/{path}"  # the package's files, named without src/
            found = (ROOT / path).exists() or (path.startswith("tests/") and _test_files(path))
            if path not in FOREIGN_PATHS and not found:
                missing.append(f"{where}: {path}")
        current = None
        for match in NODE.finditer(text):
            current = match.group(1) or current
            function = match.group(2) or match.group(3)
            if current and function and not any(
                re.search(rf"^(async )?def {function}\(", f.read_text(encoding="utf-8"), re.M)
                for f in _test_files(current)
            ):
                missing.append(f"{where}: {current}::{function}")
        for match in MODULE.finditer(text):
            parts = match.group(1).split(".")
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for attribute in parts[i:]:
                    obj = getattr(obj, attribute, None)
                if obj is None:
                    missing.append(f"{where}: {match.group(1)}")
                break
    assert not missing, missing


def test_the_make_targets_exist() -> None:
    """`make run` and `make test`, the two commands of the README: set-up, then the study or the tests."""
    proc = subprocess.run(["make", "-n", "run", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scripts/setup.sh" in proc.stdout
    assert "scripts/snakemake.sh" in proc.stdout
    assert "pytest" in proc.stdout


def test_the_parser_sees_markers_languages_and_commands(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n<!-- tested-by: tests/a.py::test_b, tests/c.py::test_d -->\n```bash\nmake run  # x\n```\n\n"
        "```\nplain\n```\n\n<!-- illustrative -->\n\n```sh\ndvc push\n```\n"
        "- item\n\n  ```bash\n  csbench a \\\n    --b\n  # comment\n  ```\n",
        encoding="utf-8",
    )
    blocks = fenced_blocks(page)
    assert [(b.line, b.language, b.marker) for b in blocks] == [
        (4, "bash", "tested-by:"), (8, "", None), (14, "sh", "illustrative"), (19, "bash", None),
    ]
    assert blocks[0].tests == ("tests/a.py::test_b", "tests/c.py::test_d")
    assert commands(blocks[3].text) == ["csbench a --b"]
