"""Issue #22 item 6: a name in params.yaml never reaches the shell as code under plain `dvc repro`.

DVC pastes `${item.<key>}` into a stage's command as it is, and runs the command through the shell
before csbench has read the config: a dataset named `x;touch f;#` ran `touch`. Every command now takes
the matrix item as `${item}`, which DVC writes as `--<key> <value>` with each string shell-quoted, so a
name is one argument and csbench refuses it (schema pattern, file and line) before doing anything.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from projects import init_git_dvc
from test_drivers import BIN, PROJECT_ROOT, TINY, _copy_project, _run

from csbench.cli import build_parser

# Each would create its marker file if the shell read it as code (`;`, `$(...)`, backquotes, and a
# quote that closes a single-quoted string).
HOSTILE = {
    "semicolon": "x;touch pwned-semicolon;#",
    "substitution": "x$(touch pwned-substitution)",
    "backquote": "x`touch pwned-backquote`",
    "quote": "x'; touch pwned-quote; '",
}
INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


def _stages() -> dict[str, dict]:
    return yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text())["stages"]


def _subcommand_options(parser: argparse.ArgumentParser, command: str) -> set[str]:
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {option for action in subparsers.choices[command]._actions for option in action.option_strings}


def test_every_name_reaches_a_command_through_dvcs_quoted_dict_unpacking() -> None:
    """No `${item.<key>}` (pasted unquoted) in any cmd: only `${item}`, whose keys are options of the
    csbench command the stage runs, each given once."""
    parser = build_parser()
    for name, stage in _stages().items():
        cmd = " ".join(stage["cmd"]) if isinstance(stage["cmd"], list) else stage["cmd"]
        used = INTERPOLATION.findall(cmd)
        if "matrix" not in stage:
            assert used == [], f"{name}: {cmd}"
            continue
        assert used == ["item"], f"{name}: only ${{item}} may be interpolated into a command, not {used}"
        words = shlex.split(cmd.replace("${item}", ""))
        command = words[words.index("--quiet") + 1]
        options = _subcommand_options(parser, command)
        for key in stage["matrix"]:
            assert f"--{key}" in options, f"{name}: matrix key {key!r} is not an option of `csbench {command}`"
            assert f"--{key}" not in words, f"{name}: --{key} given twice"


def _dvc_project(tmp_path: Path, datasets: list[str]) -> Path:
    """The tiny study as params.yaml (DVC has no overlays) with ``datasets`` as grid.datasets and
    robustness.datasets, each defined as a local corpus (a stage that reads params DVC cannot find does
    not start), in a new git + DVC project."""
    from csbench.config import merge

    project = _copy_project(tmp_path / "project")
    params = merge(yaml.safe_load((project / "params.yaml").read_text()), yaml.safe_load((project / TINY).read_text()))
    params["grid"]["datasets"] = params["robustness"]["datasets"] = datasets
    params["grid"]["summarization"]["datasets"] = datasets  # the summarization stages take them too
    for name in datasets:
        params["datasets"][name] = {"kind": "local-source", "language": "python", "source": "stdlib", "max_files": 5}
    init_git_dvc(project, params, "hostile")
    return project


def test_each_name_is_one_argument_of_the_rendered_commands(tmp_path: Path) -> None:
    """DVC's own rendering of every stage (no stage runs): each hostile name is the single word after
    `--dataset`."""
    project = _dvc_project(tmp_path, list(HOSTILE.values()))
    script = (
        "from dvc.repo import Repo\n"
        "for stage in Repo('.').index.stages:\n"
        "    print(stage.cmd.replace('\\n', ' ') if stage.cmd else '')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = set()
    for line in filter(None, done.stdout.splitlines()):
        words = shlex.split(line)
        assert not any(op in words for op in (";", "&&", "||", "|")), line
        if "--dataset" in words:
            seen.add(words[words.index("--dataset") + 1])
    assert seen == set(HOSTILE.values())


@pytest.mark.e2e
def test_dvc_repro_runs_no_name_as_shell_code(tmp_path: Path) -> None:
    """A real `dvc repro --keep-going` (every stage it can start, starts): no marker file appears, and
    csbench refuses the config, naming the key, its file and line."""
    project = _dvc_project(tmp_path, list(HOSTILE.values()))
    result = _run([str(BIN / "dvc"), "repro", "--keep-going"], project, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    created = sorted(p.name for p in project.iterdir() if p.name.startswith("pwned-"))
    assert created == [], f"the shell ran a name from params.yaml: {created}\n{output[-3000:]}"
    assert "Running stage 'download@" in output  # the stages did run (and refused the config)
    # the first of the schema's errors: the name as `datasets:` defines it
    refused = r"csbench download: error: params\.yaml:\d+: datasets: 'x;touch pwned-semicolon;#' does not match"
    assert re.search(refused, output), output[-3000:]
    assert "Traceback" not in output
    assert not (project / "data").exists()
