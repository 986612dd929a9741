"""tests/projects.py, the shared test-project helpers: what a copy keeps, and the git + DVC project."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from projects import bm25_study, copy_paths, documented_functions, init_git_dvc, mini_config, unreadable_directory


def _source(root: Path) -> Path:
    (root / "pkg/__pycache__").mkdir(parents=True)
    (root / "pkg/mod.py").write_text("x = 1\n")
    (root / "pkg/__pycache__/mod.cpython.pyc").write_bytes(b"\0")
    (root / "top.txt").write_text("top\n")
    (root / "deep/er").mkdir(parents=True)
    (root / "deep/er/file.md").write_text("deep\n")
    (root / "link").symlink_to("pkg")
    return root


def test_copy_keeps_links_as_links_folders_without_caches_and_nested_files(tmp_path: Path) -> None:
    source = _source(tmp_path / "source")
    dest = copy_paths(source, tmp_path / "dest", ["pkg", "top.txt", "deep/er/file.md", "link"])
    assert dest == tmp_path / "dest"
    assert (dest / "pkg/mod.py").read_text() == "x = 1\n"
    assert not (dest / "pkg/__pycache__").exists()
    assert (dest / "top.txt").read_text() == "top\n"
    assert (dest / "deep/er/file.md").read_text() == "deep\n"
    assert (dest / "link").is_symlink() and str((dest / "link").readlink()) == "pkg"


def test_copy_raises_on_a_missing_name_unless_told_to_skip_it(tmp_path: Path) -> None:
    source = _source(tmp_path / "source")
    with pytest.raises(FileNotFoundError):
        copy_paths(source, tmp_path / "strict", ["top.txt", "absent"])
    dest = copy_paths(source, tmp_path / "lenient", ["absent", "top.txt"], skip_missing=True)
    assert sorted(p.name for p in dest.iterdir()) == ["top.txt"]


@pytest.mark.parametrize("analytics_off", [True, False])
def test_init_git_dvc_commits_the_params_and_initialises_dvc(tmp_path: Path, analytics_off: bool) -> None:
    (tmp_path / "Snakefile").write_text("# empty\n")
    init_git_dvc(tmp_path, {"study": "s", "grid": {"datasets": ["b", "a"]}}, "a message", analytics_off=analytics_off)
    assert yaml.safe_load((tmp_path / "params.yaml").read_text()) == {"study": "s", "grid": {"datasets": ["b", "a"]}}
    assert (tmp_path / "params.yaml").read_text().startswith("study: s\n")  # keys in the order given
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert log.stdout == "a message\n"
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert files.stdout.split() == ["Snakefile", "params.yaml"]
    assert (tmp_path / ".dvc").is_dir()
    assert ("analytics = false" in (tmp_path / ".dvc/config").read_text()) is analytics_off


def test_init_git_dvc_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("not a repository\n")  # git init refuses a file named .git
    with pytest.raises(AssertionError, match="git init"):
        init_git_dvc(tmp_path, {}, "m")


def test_mini_study_config_and_corpus(tmp_path: Path) -> None:
    config = yaml.safe_load(mini_config(tmp_path / "c.yaml", tmp_path / "src", "s").read_text())
    assert config["study"] == "s" and config["datasets"]["mini"]["source"] == str(tmp_path / "src")
    assert config["grid"] == {"datasets": ["mini"], "attacks": ["none"], "models": ["bm25"]}
    code = documented_functions("m", 2, doc_end=", and offset it.")
    assert code.count("def m_") == 2 and "def m_1(values, factor):" in code and "factor + 1)" in code
    assert '"""Scale every value of the list by the factor given, and offset it."""' in code
    compile(code, "m.py", "exec")


def test_bm25_study_is_one_dataset_ranked_by_bm25_alone() -> None:
    study = bm25_study("s", "d", {"kind": "local-source"}, run_depth=7)
    assert list(study) == ["study", "grid", "datasets", "evaluation", "robustness"]  # as the tests wrote it
    assert study["grid"] == {"datasets": ["d"], "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}}
    assert study["datasets"] == {"d": {"kind": "local-source"}}
    assert study["evaluation"] == {"protocols": ["full-corpus"], "run_depth": 7}
    assert study["robustness"] == {"datasets": [], "attacks": []}


def test_unreadable_directory_is_mode_000_inside_and_restored_after(tmp_path: Path) -> None:
    seen = []
    try:
        with unreadable_directory(tmp_path / "locked") as locked:
            seen.append(locked.stat().st_mode & 0o777)
    finally:  # a skip (root reads a mode-000 directory) leaves through here too
        assert (tmp_path / "locked").stat().st_mode & 0o777 == 0o755
    assert seen == [0]
