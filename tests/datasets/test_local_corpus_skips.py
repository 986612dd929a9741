"""Issue #22 item 4: the walk of a local corpus never loses a file or a directory silently.

Each case builds a small source tree under tmp_path with one thing the walk cannot read (a
directory that cannot be listed, a file that cannot be read, a dangling symbolic link, a loop of
links, a FIFO where a source file is expected, a link to a directory) and runs `csbench prepare`
on it as a user would, in a subprocess. The corpus is built from everything else (exit 0), and
what was skipped is counted, with its path, in card.json, in card.md and in one line on the console.

Unreadable files and directories: the tests run as root here and in CI, and root reads a mode-000
file (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). `setpriv` (util-linux) runs `csbench prepare` with
those two capabilities dropped from its bounding and inheritable sets, still as uid 0: the process
then obeys the mode bits like any user, so a mode-000 file or directory is a real EACCES from the
kernel, on the path the real walk takes (no patched opener). Dropping capabilities needs
CAP_SETPCAP, which root has in this container; a non-root run needs no setpriv at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from projects import documented_functions, mini_config

# the functions in the corpus: every file holds two documented functions
FUNCTIONS_PER_FILE = 2
TIMEOUT = 120  # a FIFO read by the old code blocks forever: the run must not


def _module(stem: str) -> str:
    return documented_functions(stem, FUNCTIONS_PER_FILE)


def _tree(root: Path, files: list[str]) -> None:
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_module(rel.replace("/", "_").removesuffix(".py")), encoding="utf-8")


def _without_dac_override() -> list[str]:
    """The command prefix that makes the kernel check file modes for this process's children."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): root reads a mode-000 file")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


def prepare(tmp_path: Path, source: Path, unprivileged: bool = False) -> tuple[subprocess.CompletedProcess, Path]:
    """`csbench prepare` of the corpus at ``source``, in a project under tmp_path."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    config = mini_config(tmp_path / "config.yaml", source, "skips")
    command = [sys.executable, "-m", "csbench", "--quiet", "prepare", "--config", str(config), "--dataset", "mini"]
    if unprivileged:
        command = _without_dac_override() + command
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    return result, project / "data" / "prepared" / "mini"


def _summary_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "source files found" in line]


def _pairs(card: dict) -> int:
    return sum(split["pairs"] for split in card["splits"].values())


GOOD = ["pkg/alpha.py", "pkg/beta.py", "top.py"]


def _check(result: subprocess.CompletedProcess, prepared: Path, kind: str, path: str, error: str | None) -> dict:
    """The run succeeded with every readable file, and the skip is counted and named everywhere."""
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    card = json.loads((prepared / "card.json").read_text())
    assert card["skipped_files"][kind] == [path], card["skipped_files"]
    assert card["files"][kind] == 1
    assert _pairs(card) == FUNCTIONS_PER_FILE * len(GOOD)
    if error is not None:
        assert card["skip_errors"][path] == error
    card_md = (prepared / "card.md").read_text()
    assert f"1 skipped as {kind.replace('_', ' ')}" in card_md
    assert f"Skipped ({kind}): `{path}`" in card_md
    lines = _summary_lines(result.stderr)
    assert len(lines) == 1, result.stderr[-3000:]
    assert "WARNING" in lines[0] and f"1 {kind.replace('_', ' ')}: {path}" in lines[0], lines[0]
    return card


def test_unreadable_subdirectory_is_a_counted_skip(tmp_path: Path) -> None:
    """The issue's case: a sub-directory holding most of the corpus cannot be listed; before, its
    files vanished from the corpus without a word (31 -> 12 pairs, exit 0)."""
    source = tmp_path / "src"
    _tree(source, [*GOOD, "locked/one.py", "locked/two.py", "locked/deeper/three.py"])
    (source / "locked").chmod(0)
    try:
        result, prepared = prepare(tmp_path, source, unprivileged=True)
    finally:
        (source / "locked").chmod(0o755)
    _check(result, prepared, "unreadable_directory", "locked", "Permission denied")


def test_unreadable_file_is_a_counted_skip(tmp_path: Path) -> None:
    """One file that cannot be read aborted the whole corpus with a PermissionError traceback."""
    source = tmp_path / "src"
    _tree(source, [*GOOD, "pkg/secret.py"])
    (source / "pkg/secret.py").chmod(0)
    result, prepared = prepare(tmp_path, source, unprivileged=True)
    card = _check(result, prepared, "unreadable_file", "pkg/secret.py", "Permission denied")
    assert card["files"]["found"] == len(GOOD) + 1  # found by the walk, not read


@pytest.mark.parametrize(
    ("link", "target", "reason", "detail"),
    [
        # a link to a file that is gone aborted the corpus with a FileNotFoundError traceback
        ("pkg/gone.py", "removed.py", "dangling_symlink", "-> removed.py"),
        # a link to itself aborted the corpus with an OSError (ELOOP) traceback
        ("pkg/loop.py", "loop.py", "symlink_loop", "Too many levels of symbolic links"),
    ],
    ids=["dangling", "loop"],
)
def test_broken_symlink_is_a_counted_skip(tmp_path: Path, link: str, target: str, reason: str, detail: str) -> None:
    """A dangling link and a link loop are skipped, counted with their path and the reason."""
    source = tmp_path / "src"
    _tree(source, GOOD)
    (source / link).symlink_to(target)
    result, prepared = prepare(tmp_path, source)
    _check(result, prepared, reason, link, detail)


def test_fifo_named_like_a_source_file_is_skipped_not_read(tmp_path: Path) -> None:
    """A FIFO named `*.py` is not read: reading one blocks until some writer opens it (forever)."""
    source = tmp_path / "src"
    _tree(source, GOOD)
    os.mkfifo(source / "pkg/pipe.py")
    try:
        result, prepared = prepare(tmp_path, source)
    except subprocess.TimeoutExpired:
        pytest.fail(f"csbench prepare blocked on a FIFO for {TIMEOUT} s")
    _check(result, prepared, "not_a_file", "pkg/pipe.py", "not a regular file")


def test_symlinked_directory_is_reported_not_followed(tmp_path: Path) -> None:
    """A link to a directory is not walked (no loops, no file twice): the card says so."""
    source = tmp_path / "src"
    _tree(source, GOOD)
    (source / "again").symlink_to("pkg", target_is_directory=True)
    result, prepared = prepare(tmp_path, source)
    _check(result, prepared, "symlinked_directory", "again", "-> pkg")


def test_every_kind_of_skip_in_one_summary_line_and_in_the_report_card(tmp_path: Path) -> None:
    """All the cases at once: one console line names each kind with its path; the audit's card (the
    report's dataset card) lists them too."""
    source = tmp_path / "src"
    _tree(source, [*GOOD, "locked/one.py", "pkg/secret.py"])
    (source / "pkg/gone.py").symlink_to("removed.py")
    (source / "pkg/loop.py").symlink_to("loop.py")
    (source / "locked").chmod(0)
    (source / "pkg/secret.py").chmod(0)
    try:
        result, prepared = prepare(tmp_path, source, unprivileged=True)
    finally:
        (source / "locked").chmod(0o755)
    assert result.returncode == 0, result.stderr[-3000:]
    card = json.loads((prepared / "card.json").read_text())
    assert card["skipped_files"] == {
        "undecodable": [],
        "unparsable": [],
        "unreadable_directory": ["locked"],
        "unreadable_file": ["pkg/secret.py"],
        "dangling_symlink": ["pkg/gone.py"],
        "symlink_loop": ["pkg/loop.py"],
    }
    (line,) = _summary_lines(result.stderr)
    assert "4 skipped" in line
    for path in ("locked", "pkg/secret.py", "pkg/gone.py", "pkg/loop.py"):
        assert path in line
    from csbench.datasets.audit import audit_dataset, card_markdown

    text = card_markdown("mini", card, audit_dataset(prepared, progress=False))
    files = "- files: 6 found, 0 skipped as undecodable, 0 skipped as unparsable, 1 skipped as unreadable directory"
    assert files in text
    assert "Skipped (unreadable_directory): `locked` (Permission denied)" in text
    assert "Skipped (dangling_symlink): `pkg/gone.py` (-> removed.py)" in text


def test_clean_corpus_card_keeps_its_two_kinds_only(tmp_path: Path) -> None:
    """A corpus with nothing unreadable: the card has the two kinds it always had, and no console
    line (nothing was skipped)."""
    source = tmp_path / "src"
    _tree(source, GOOD)
    result, prepared = prepare(tmp_path, source)
    assert result.returncode == 0, result.stderr[-3000:]
    card = json.loads((prepared / "card.json").read_text())
    assert card["skipped_files"] == {"undecodable": [], "unparsable": []}
    assert "skip_errors" not in card
    assert _summary_lines(result.stderr) == []


def test_damaged_member_of_a_zip_source_is_a_counted_skip(tmp_path: Path) -> None:
    """A source archive (as OpenJDK's src.zip) with one damaged member: the others make the corpus."""
    import zipfile

    from csbench.code.extract import FilterSettings
    from csbench.datasets.local import SplitSettings, build_local_corpus

    archive = tmp_path / "src.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as handle:
        for rel in GOOD:
            handle.writestr(rel, _module(rel.replace("/", "_").removesuffix(".py")))
        handle.writestr("pkg/damaged.py", _module("damaged"))
    data = bytearray(archive.read_bytes())
    at = data.index(b"def damaged_0")  # stored, not compressed: flip a byte of the member's data
    data[at] ^= 0xFF
    archive.write_bytes(bytes(data))
    options = {"language": "python", "source": str(archive), "exclude_dirs": [], "max_files": None}
    frame, card = build_local_corpus("zipped", options, FilterSettings(), SplitSettings(0, 0, 100), progress=False)
    assert card["skipped_files"]["unreadable_file"] == ["pkg/damaged.py"]
    assert card["skip_errors"]["pkg/damaged.py"].startswith("BadZipFile: Bad CRC-32")
    assert len(frame) == FUNCTIONS_PER_FILE * len(GOOD)
