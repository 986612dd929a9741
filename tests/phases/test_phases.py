"""The CLI is argparse + dispatch: each phase command makes one call to its function in
``csbench.phases`` (a Context and a key), and the digests the drivers track (``paths.PHASE_CODE``)
list the phase modules each phase runs. Fast: no phase does any work here."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from csbench import paths
from csbench.cli import main
from csbench.config import RunKey, TrainKey, load_config
from csbench.phases import Context
from csbench.phases.challenge import Submission
from csbench.phases.inputs import configs, run_key, train_command

PARAMS, TINY = str(PROJECT_ROOT / "params.yaml"), str(PROJECT_ROOT / "workflow/configs/tiny.yaml")
CONFIG = ["--config", PARAMS, "--config", TINY]
DATASET = ["--dataset", "python-stdlib"]
RUN = [*DATASET, "--attack", "no_comment", "--model", "nbow", "--loss", "ce", "--seed", "0"]
NOT_CONFUSED = RunKey.parse("python-stdlib", "no_comment", "nbow", "ce", 0, "not_confused")

# command line -> (phase module, function, the key arguments it is called with)
CALLS = [
    (["download", *DATASET, "--rehash"], "download", "download", ("python-stdlib", False, True)),
    (["prepare", *DATASET, "--jobs", "3"], "prepare", "prepare", ("python-stdlib",)),
    (["audit", *DATASET], "audit", "audit", ("python-stdlib",)),
    (["attack", *DATASET, "--attack", "no_comment"], "attack", "attack", ("python-stdlib", "no_comment", None)),
    (["train", *RUN], "train", "train", (TrainKey("python-stdlib", "no_comment", "nbow", "ce", 0),)),
    (["index", *RUN, "--inference", "not_confused"], "index", "index", (NOT_CONFUSED,)),
    (["evaluate", *RUN, "--inference", "not_confused"], "evaluate", "evaluate", (NOT_CONFUSED,)),
    (["perturb", *DATASET, "--perturbation", "case"], "perturb", "perturb", ("python-stdlib", "case", None)),
    (
        ["robust", *RUN, "--inference", "not_confused", "--ratio", "0.3"],
        "robust",
        "robust",
        (NOT_CONFUSED, None, "0.3"),
    ),
    (["robustness", *RUN, "--inference", "not_confused"], "robustness", "robustness", (NOT_CONFUSED,)),
    (["aggregate"], "aggregate", "aggregate", ()),
    (["dataset-table"], "dataset_table", "dataset_table", ()),
    (
        ["challenge-predict", "--model", "bm25", "--output", "p.csv", "--languages", "go, ruby", "--pin", "go=ab"],
        "challenge",
        "challenge_predict",
        (
            Submission(
                "bm25", Path("p.csv"), Path("data/raw/csn-challenge/queries.csv"), ("go", "ruby"), (), ("go=ab",)
            ),
        ),
    ),
]


@pytest.mark.parametrize(("argv", "module", "function", "key"), CALLS, ids=[c[0][0] for c in CALLS])
def test_each_phase_command_makes_one_call_to_its_phase(
    argv: list[str], module: str, function: str, key: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the project lock is taken here
    calls = []
    target = importlib.import_module(f"csbench.phases.{module}")
    monkeypatch.setattr(target, function, lambda ctx, *args, **options: calls.append((ctx, args, options)))
    assert main(["-q", argv[0], *CONFIG, *argv[1:]]) == 0
    assert len(calls) == 1
    ctx, args, options = calls[0]
    assert isinstance(ctx, Context) and ctx.config_files == (PARAMS, TINY) and not ctx.progress
    assert ctx.config.study == "tiny"
    assert args == key
    if argv[0] == "prepare":
        assert ctx.jobs == 3
    assert options == {}


def test_a_run_outside_the_grid_is_refused_before_its_phase_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("csbench.phases.evaluate.evaluate", lambda *a: pytest.fail("the phase ran"))
    assert main(["-q", "evaluate", *CONFIG, *DATASET, "--attack", "no_comment", "--model", "bm25", "--seed", "1"]) == 2
    assert "is not a run of the config" in capsys.readouterr().err
    assert main(["-q", "evaluate", *CONFIG, *DATASET, "--attack", "no_comment", "--model", "bm2"]) == 2
    assert "--model (not in grid.models, grid.trained.models or grid.summarization)" in capsys.readouterr().err


def test_the_remake_commands_repeat_the_config_files_as_given() -> None:
    config = load_config([PARAMS, TINY])
    given = Context(config, (PARAMS, TINY))
    default = Context(config)  # no --config: params.yaml
    assert configs(given) == f"--config {PARAMS} --config {TINY}"
    assert configs(default) == "--config params.yaml"
    assert given.download_command("x") == f"csbench download --config {PARAMS} --config {TINY} --dataset x"
    assert default.download_command("x") == "csbench download --dataset x"
    key = TrainKey("python-stdlib", "none", "nbow", "ce", 0)
    assert train_command(default, key) == (
        "csbench train --config params.yaml --dataset python-stdlib --attack none --model nbow --loss ce --seed 0"
    )
    assert run_key(config, "python-stdlib", "none", "bm25", "none", 0, "zero_shot").path == (
        "python-stdlib/none/bm25/none/0/zero_shot"
    )


def _phase_imports(module: Path) -> set[str]:
    """The modules of csbench.phases a phase module imports (at any depth of its code)."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("csbench.phases")):
            continue
        if node.module == "csbench.phases":  # the package's Context, or `from csbench.phases import index`
            found |= {a.name if (module.parent / f"{a.name}.py").is_file() else "__init__" for a in node.names}
        else:
            found.add(node.module.removeprefix("csbench.phases."))
    return found


PHASE_MODULES = {"train-summarizer": "train"}


@pytest.mark.parametrize("phase", sorted(paths.PHASE_CODE))
def test_each_phase_digest_covers_its_module_and_the_phase_modules_it_imports(phase: str) -> None:
    listed = set(paths.PHASE_CODE[phase])
    folder = paths.PACKAGE_DIR / "phases"
    # train-summarizer is the train phase's module running a summarizer (its own digest: issue #25)
    module = folder / f"{PHASE_MODULES.get(phase, phase).replace('-', '_')}.py"
    assert f"phases/{module.name}" in listed and "phases/__init__.py" in listed
    pending, seen = [module.stem], set()
    while pending:  # the phase modules it runs, and theirs
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending += sorted(_phase_imports(folder / f"{name}.py") - seen)
    assert {f"phases/{name}.py" for name in seen} <= listed
    # and no other phase's module: a change to it must not re-run this phase
    assert {p for p in listed if p.startswith("phases/")} == {f"phases/{name}.py" for name in seen}


def test_each_phase_lists_a_package_file_once_and_every_listed_file_exists() -> None:
    """A PHASE_CODE entry names each file or folder once (a repeat would hash it twice, and hide a
    careless edit), and every name is a file or folder of the package."""
    from csbench import paths

    for phase, parts in paths.PHASE_CODE.items():
        assert len(set(parts)) == len(parts), (phase, sorted(p for p in parts if parts.count(p) > 1))
        assert all((paths.PACKAGE_DIR / part).exists() for part in parts), phase
