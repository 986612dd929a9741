"""The accelerate training loop: schedules, early stopping, learning, determinism, kill-and-resume, and
2-process data parallelism on CPU (gloo), with a tiny hashed bag-of-words bi-encoder on 400 stdlib
functions (first docstring line → function body; see ``train_loop_worker.py``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch import Tensor
from train_loop_worker import BASE_CONFIG, make_encoder, split_corpus

from csbench.models.encoder import load_encoder
from csbench.train.bi_encoder import TrainConfig, as_triples, train, validation_mrr
from csbench.train.early_stopping import EarlyStopping
from csbench.train.engine import epoch_batches
from csbench.train.schedules import linear_decay_factor, make_schedule, step_decay_factor
from csbench.train.state import rng_state, set_rng_state

DROPOUT = 0.1
TESTS = Path(__file__).resolve().parent
WORKER = TESTS / "train_loop_worker.py"
VENV_BIN = Path(sys.executable).parent


def in_batch_ce(scores: Tensor, *, epoch: int, step: int) -> Tensor:
    """Cross-entropy over each query's row of the (B, B) in-batch scores, positives on the diagonal."""
    return torch.nn.functional.cross_entropy(scores, torch.arange(scores.shape[0], device=scores.device))


def lrs(name: str, steps: list[int], steps_per_epoch: int, total_steps: int, params: dict[str, Any]) -> list[float]:
    """The lr the optimizer uses at each of ``steps`` (0-based optimizer steps)."""
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=2e-5)
    schedule = make_schedule(name, optimizer, steps_per_epoch, total_steps, params)
    seen = {}
    for step in range(max(steps) + 1):
        seen[step] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
    return [seen[s] for s in steps]


def best_weights(out_dir: Path) -> dict[str, Tensor]:
    return load_file(out_dir / "best" / "model.safetensors")


def curve(result: dict[str, Any]) -> list[tuple[int, float]]:
    return [(h["step"], h["mrr"]) for h in result["history"]]


# --------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread, as in the worker subprocesses (torchrun sets OMP_NUM_THREADS=1): the model is
    tiny, and on a loaded 2-core machine two spinning OpenMP threads make it ~20x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    return split_corpus()


@pytest.fixture(scope="module")
def corpus_file(corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.json"
    path.write_text(json.dumps({"train": corpus[0], "valid": corpus[1]}))
    return path


def reference_run(corpus, out: Path, dropout: float) -> tuple[dict[str, Any], Path]:
    train(make_encoder(dropout), corpus[0], corpus[1], TrainConfig.from_dict(BASE_CONFIG), out, progress=False)
    return json.loads((out / "train.json").read_text()), out


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    """Run A: BASE_CONFIG, 1 process, uninterrupted, with dropout (so a resumed run must also restore the
    RNG exactly); ``(train.json, out_dir)``."""
    return reference_run(corpus, tmp_path_factory.mktemp("reference"), DROPOUT)


@pytest.fixture(scope="module")
def reference_no_dropout(corpus, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    """As ``reference`` without dropout: dropout masks are drawn per process, so only a model without
    randomness can be compared across process counts."""
    return reference_run(corpus, tmp_path_factory.mktemp("reference_no_dropout"), 0.0)


def worker_command(out: Path, corpus_file: Path, *extra: str) -> list[str]:
    return [sys.executable, str(WORKER), "--out", str(out), "--corpus", str(corpus_file), *extra]


def run_worker(out: Path, corpus_file: Path, *extra: str, timeout: float = 120) -> None:
    subprocess.run(
        worker_command(out, corpus_file, *extra),
        check=True,
        timeout=timeout,
        capture_output=True,
    )


# --------------------------------------------------------------------------------------------- schedules
def test_step_decay_divides_lr_by_ten_every_three_epochs():
    steps = [0, 29, 30, 59, 60, 89, 90]
    expected = [2e-5, 2e-5, 2e-6, 2e-6, 2e-7, 2e-7, 2e-8]
    assert lrs("step_decay", steps, steps_per_epoch=10, total_steps=200, params={}) == pytest.approx(expected)
    assert step_decay_factor(19, steps_per_epoch=10, every_epochs=2, gamma=0.5) == 1.0
    assert step_decay_factor(20, steps_per_epoch=10, every_epochs=2, gamma=0.5) == 0.5


def test_linear_decay_endpoints():
    assert lrs("linear_decay", [0, 50, 100], 10, 100, {}) == pytest.approx([2e-5, 1e-5, 0.0])
    assert lrs("linear_decay", [0, 5, 10, 55, 100], 10, 100, {"warmup_steps": 10}) == pytest.approx(
        [0.0, 1e-5, 2e-5, 1e-5, 0.0]
    )
    assert linear_decay_factor(150, total_steps=100) == 0.0
    assert lrs("constant", [0, 99], 10, 100, {}) == [2e-5, 2e-5]


def test_unknown_schedule_parameter_is_an_error():
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(ValueError, match="every_epochs"):
        make_schedule("step_decay", optimizer, 10, 100, {"every_epoch": 3})
    with pytest.raises(ValueError, match="step_decay"):
        TrainConfig(schedule="step_decay", schedule_params={"warmup_steps": 1})


# --------------------------------------------------------------------------------------------- early stopping
def test_early_stopping_after_patience_validations_without_gain():
    early = EarlyStopping(patience=3)
    stops = []
    for step, mrr in enumerate([0.1, 0.2, 0.2, 0.15, 0.25, 0.24, 0.25, 0.1], start=1):
        early.update(mrr, step)
        stops.append(early.should_stop)
    # gains at 1, 2, 5; a tie (0.2 at 3, 0.25 at 7) is no gain; the 3rd validation after 5 stops
    assert stops == [False] * 7 + [True]
    assert (early.best, early.best_step) == (0.25, 5)

    resumed = EarlyStopping(patience=3)
    resumed.load_state_dict(json.loads(json.dumps(early.state_dict())))
    assert resumed.state_dict() == early.state_dict() and resumed.should_stop
    assert not EarlyStopping(patience=None).should_stop


# --------------------------------------------------------------------------------------------- config and data
def test_config_presets_and_unknown_keys():
    cobe = TrainConfig.cobe()
    assert (cobe.optimizer, cobe.lr, cobe.schedule, cobe.epochs) == ("adam", 2e-5, "step_decay", 20)
    assert (cobe.validations_per_epoch, cobe.patience, cobe.batch_size) == (3, 6, 85)
    codebert = TrainConfig.codebert(epochs=2)
    assert (codebert.lr, codebert.schedule, codebert.batch_size, codebert.epochs) == (1e-5, "linear_decay", 32, 2)
    with pytest.raises(ValueError, match="unknown training option"):
        TrainConfig.from_dict({"learning_rate": 1e-5})
    with pytest.raises(KeyError, match="Did you mean"):
        TrainConfig(optimizer="adamv")
    with pytest.raises(ValueError, match="mixed_precision"):
        TrainConfig(mixed_precision="fp8")


def test_batch_order_is_a_pure_function_of_seed_and_epoch():
    a = epoch_batches(103, 10, seed=3, epoch=2)
    assert len(a) == 10 and all(len(b) == 10 for b in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, epoch_batches(103, 10, seed=3, epoch=2), strict=True))
    assert not np.array_equal(np.concatenate(a), np.concatenate(epoch_batches(103, 10, seed=3, epoch=3)))
    assert len(set(np.concatenate(a).tolist())) == 100


def test_rng_states_round_trip_through_json():
    import random

    state = json.loads(json.dumps(rng_state()))
    draws = (random.random(), np.random.rand(), torch.rand(3))
    set_rng_state(state)
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert draws[:2] == again[:2] and torch.equal(draws[2], again[2])


def test_pairs_from_dataframe_or_tuples(corpus):
    import pandas as pd

    frame = pd.DataFrame(corpus[1], columns=["query", "code", "language"])
    assert as_triples(frame) == as_triples(corpus[1])


# --------------------------------------------------------------------------------------------- training
def test_training_improves_validation_mrr_and_records_efficiency(reference, corpus):
    result, out = reference
    queries, codes, languages = as_triples(corpus[1])
    untrained = validation_mrr(make_encoder(DROPOUT), queries, codes, languages)
    assert result["best_mrr"] > untrained + 0.05, (untrained, result["best_mrr"])
    # best/ is a loadable encoder whose validation MRR is the recorded best
    assert validation_mrr(load_encoder(out / "best"), queries, codes, languages) == pytest.approx(result["best_mrr"])
    assert result["steps_per_epoch"] == 300 // 20
    assert [h["step"] for h in result["history"]][:3] == [5, 10, 15]  # 3 validations an epoch
    assert result["stop_reason"] in ("early_stopping", "epochs")
    if result["stop_reason"] == "early_stopping":  # the last `patience` validations brought no gain
        assert result["history"][-1]["step"] - result["best_step"] == BASE_CONFIG["patience"] * 5
    assert result["samples"] == result["steps"] * 20
    assert result["train_seconds"] > result["validation_seconds"] > 0
    assert result["samples_per_second"] > 0 and result["segments"] == 1
    assert (out / "state" / "loop.json").is_file() and not (out / ".state.tmp").exists()


def test_same_seed_same_history_and_best_weights(reference, corpus, tmp_path):
    expected, expected_dir = reference
    train(make_encoder(DROPOUT), corpus[0], corpus[1], TrainConfig.from_dict(BASE_CONFIG), tmp_path, progress=False)
    result = json.loads((tmp_path / "train.json").read_text())
    assert curve(result) == curve(expected)
    a, b = best_weights(expected_dir), best_weights(tmp_path)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_given_loss_fn_equals_registered_ce_and_max_steps_validates_at_the_end(corpus, tmp_path):
    """A loss passed in (the (B, B) signature) and ``make_loss('ce', {})`` train identically; a run cut
    by ``max_steps`` between validation points validates at its last step."""
    config = TrainConfig.from_dict(BASE_CONFIG | {"max_steps": 7, "checkpoint_every": None})
    mine = train(make_encoder(), corpus[0], corpus[1], config, tmp_path / "a", loss_fn=in_batch_ce, progress=False)
    registered = train(make_encoder(), corpus[0], corpus[1], config, tmp_path / "b", progress=False)
    assert [h["step"] for h in mine.history] == [5, 7]
    assert mine.stop_reason == "max_steps" and mine.steps == 7
    assert [h["mrr"] for h in mine.history] == pytest.approx([h["mrr"] for h in registered.history], abs=1e-6)
    assert not (tmp_path / "a" / "state").exists()


def test_gradient_accumulation(corpus, tmp_path):
    config = TrainConfig.from_dict(BASE_CONFIG | {"grad_accum": 2, "max_steps": 4, "checkpoint_every": None})
    result = train(make_encoder(), corpus[0], corpus[1], config, tmp_path, progress=False)
    assert result.steps_per_epoch == 300 // 20 // 2 and result.steps == 4 and result.samples == 4 * 40


def test_resume_refuses_a_changed_config(corpus, tmp_path):
    config = TrainConfig.from_dict(BASE_CONFIG | {"max_steps": 2, "checkpoint_every": 2})
    train(make_encoder(), corpus[0], corpus[1], config, tmp_path, progress=False)
    changed = TrainConfig.from_dict(BASE_CONFIG | {"max_steps": 2, "checkpoint_every": 2, "lr": 1e-3})
    with pytest.raises(ValueError, match="config changed in lr"):
        train(make_encoder(), corpus[0], corpus[1], changed, tmp_path, progress=False, resume=True)


def test_killed_run_resumes_to_the_same_result(reference, corpus_file, tmp_path):
    """Run B is SIGKILLed while hanging after step 17 (state checkpoint at step 10; a newer best/ from the
    validation at step 15 is on disk), then resumed: same history, best MRR and best weights as run A."""
    expected, expected_dir = reference
    out, marker = tmp_path / "run", tmp_path / "blocked.json"
    process = subprocess.Popen(
        [*worker_command(out, corpus_file, "--dropout", str(DROPOUT)), "--block-at", "17", "--marker", str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if process.poll() is not None:
                pytest.fail(f"worker exited early: {process.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("worker did not reach step 17")
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert json.loads((out / "state" / "loop.json").read_text())["global_step"] == 10
    assert not (out / "train.json").exists()

    run_worker(out, corpus_file, "--dropout", str(DROPOUT), "--resume")
    result = json.loads((out / "train.json").read_text())
    assert (result["segments"], result["resumed_from_step"]) == (2, 10)
    assert curve(result) == curve(expected)
    assert (result["best_mrr"], result["best_step"], result["stop_reason"]) == (
        expected["best_mrr"],
        expected["best_step"],
        expected["stop_reason"],
    )
    a, b = best_weights(expected_dir), best_weights(out)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_after_a_kill_during_the_state_rename(reference, corpus, tmp_path):
    """A kill between moving ``state/`` aside and renaming the new one in leaves a complete
    ``.state.tmp`` beside an older ``.state.old``: resume takes the newest complete state."""
    expected, expected_dir = reference
    shutil.copytree(expected_dir / "state", tmp_path / ".state.tmp")
    older = json.loads((tmp_path / ".state.tmp" / "loop.json").read_text())
    shutil.copytree(tmp_path / ".state.tmp", tmp_path / ".state.old")
    older["global_step"] = 10  # (its content is not used: only the step decides which is newer)
    (tmp_path / ".state.old" / "loop.json").write_text(json.dumps(older))
    config = TrainConfig.from_dict(BASE_CONFIG)
    result = train(make_encoder(DROPOUT), corpus[0], corpus[1], config, tmp_path, progress=False, resume=True)
    assert result.segments == 2 and result.resumed_from_step > 10
    assert [(h["step"], h["mrr"]) for h in result.history] == curve(expected)


@pytest.mark.skipif(not (VENV_BIN / "torchrun").exists(), reason="torchrun not installed")
def test_two_processes_equal_one_process_with_the_same_global_batch(reference_no_dropout, corpus_file, tmp_path):
    """torchrun --nproc_per_node 2 (gloo on CPU): each process encodes 10 of the 20 pairs of a global
    batch; vectors are all-gathered with gradient, so the loss and gradient are the global ones.

    Tolerance 2e-3 on every validation MRR: the runs differ only in float summation order (DDP sums two
    half-batch gradients; one process sums the whole batch in one matmul; 1 vs 2 threads per process),
    ~1e-7 relative per step, which can move a near-tied rank among 100 codes (MRR steps of ~1e-4)."""
    expected, expected_dir = reference_no_dropout
    out = tmp_path / "ddp"
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    command = [str(VENV_BIN / "torchrun"), "--nproc_per_node", "2", "--standalone", str(WORKER)]
    completed = subprocess.run(
        [*command, "--out", str(out), "--corpus", str(corpus_file)], env=env, capture_output=True, timeout=180
    )
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    result = json.loads((out / "train.json").read_text())
    assert result["num_processes"] == 2
    ours, theirs = curve(result), curve(expected)
    assert [s for s, _ in ours] == [s for s, _ in theirs]
    differences = [abs(a - b) for (_, a), (_, b) in zip(ours, theirs, strict=True)]
    a, b = best_weights(expected_dir), best_weights(out)
    weight_difference = max(float((a[k] - b[k]).abs().max()) for k in a)
    print(f"1 vs 2 processes: max |ΔMRR| = {max(differences):.1e} over {len(differences)} validations, ", end="")
    print(f"max |Δweight| of the best checkpoints = {weight_difference:.1e}")
    assert max(differences) < 2e-3
    assert weight_difference < 1e-4  # weights are ~0.1-1; Adam at lr 3e-3 turns summation-order noise into ~1e-5
