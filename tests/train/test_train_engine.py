"""The training engine (csbench.train.engine) with a kind of model it has never seen: a toy regression
task written against csbench.train.task only, as a new model kind (e.g. summarization) would be. Also
the step plan's geometry for both batch_size meanings (bi-encoder: a micro-batch; cross-encoder: a step)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from torch.utils.data import TensorDataset, default_collate

from csbench.train import engine
from csbench.train.engine import epoch_batches, micro_batches, plan_steps
from csbench.train.task import ConfigDict, Outcome, check_loop_config


@dataclass(frozen=True)
class ToyConfig(ConfigDict):
    """The engine's knobs, nothing else."""

    optimizer: str = "adam"
    lr: float = 0.05
    weight_decay: float = 0.0
    schedule: str = "constant"
    schedule_params: dict[str, Any] = field(default_factory=dict)
    epochs: int = 6
    batch_size: int = 8
    grad_accum: int = 1
    validations_per_epoch: int = 2
    patience: int | None = None
    max_steps: int | None = None
    checkpoint_every: int | None = None
    mixed_precision: str = "no"
    max_grad_norm: float | None = None
    seed: int = 0
    log_every: int = 1000
    num_workers: int = 0
    cpu: bool = False
    deterministic: bool = False

    def __post_init__(self) -> None:
        check_loop_config(self)

    @property
    def micro_batch(self) -> int:
        return self.batch_size


@dataclass
class ToyResult(Outcome):
    best_neg_mse = property(lambda self: self.best)

    def to_dict(self) -> dict[str, Any]:
        return self.as_record("neg_mse")


class ToyTask:
    """Linear regression with dropout on the input (so a resumed run must restore the RNG too)."""

    name, metric, metric_label, validates, history_loss = "toy", "neg_mse", "-MSE", True, True

    def __init__(self, keep: str = "best") -> None:
        generator = torch.Generator().manual_seed(0)
        weights = torch.randn(4, 1, generator=generator)
        x = torch.randn(120, 4, generator=generator)
        self.valid_x = torch.randn(40, 4, generator=generator)
        self.valid_y = self.valid_x @ weights
        self.dataset = TensorDataset(x, x @ weights + 0.1 * torch.randn(120, 1, generator=generator))
        self.collate = default_collate
        torch.manual_seed(1)
        self.model = nn.Sequential(nn.Dropout(0.1), nn.Linear(4, 1))
        self.keep = keep

    def describe(self) -> str:
        return "toy regression"

    def training_module(self) -> nn.Module:
        return self.model

    def setup(self, accelerator: Any) -> None:
        self.device = accelerator.device

    def batch_loss(self, model: nn.Module, batch: list[Tensor], *, epoch: int, step: int) -> Tensor:
        x, y = (t.to(self.device) for t in batch)
        return F.mse_loss(model(x), y)

    def validate(self, model: nn.Module) -> dict[str, float]:
        model.eval()
        with torch.no_grad():
            mse = float(F.mse_loss(model(self.valid_x), self.valid_y))
        model.train()
        return {"neg_mse": -mse, "mse": mse}

    def save(self, model: nn.Module, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().clone() for k, v in model.state_dict().items()}, directory / "model.safetensors")

    def record(self, outcome: Outcome) -> ToyResult:
        return ToyResult(**vars(outcome))


def without_seconds(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in entry.items() if k != "seconds"} for entry in history]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_new_kind_of_model_trains_through_the_engine(tmp_path):
    task = ToyTask()
    result = engine.train(task, ToyConfig(checkpoint_every=5), tmp_path, progress=False)
    assert isinstance(result, ToyResult) and result.stop_reason == "epochs"
    assert result.steps_per_epoch == 15 and result.steps == 90 and result.samples == 90 * 8
    assert [h["step"] for h in result.history][:2] == [8, 15]  # 2 validations an epoch
    assert result.best_neg_mse > result.history[0]["neg_mse"]  # it learns
    record = json.loads((tmp_path / "train.json").read_text())
    assert record["best_neg_mse"] == result.best and "best" not in record and record["config"]["lr"] == 0.05
    assert set(record["history"][0]) == {"step", "epoch", "neg_mse", "mse", "loss", "seconds"}
    best = load_file(tmp_path / "best" / "model.safetensors")
    assert best.keys() == {"1.weight", "1.bias"}
    assert (tmp_path / "state" / "loop.json").is_file()


def test_resumed_run_equals_the_uninterrupted_one(tmp_path):
    config = ToyConfig(checkpoint_every=5, patience=3)
    expected = engine.train(ToyTask(), config, tmp_path / "a", progress=False)

    def kill_at_step_13(status: dict[str, Any]) -> None:
        if status["step"] == 13:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.train(ToyTask(), config, tmp_path / "b", progress=False, on_step=kill_at_step_13)
    # the state of step 10: two steps after the validation at step 8, whose loss goes into the next entry
    assert json.loads((tmp_path / "b" / "state" / "loop.json").read_text())["valid_steps"] == 2
    resumed = engine.train(ToyTask(), config, tmp_path / "b", progress=False, resume=True)
    assert (resumed.segments, resumed.resumed_from_step) == (2, 10)
    assert without_seconds(resumed.history) == without_seconds(expected.history)
    assert (resumed.best, resumed.best_step, resumed.stop_reason) == (
        expected.best,
        expected.best_step,
        expected.stop_reason,
    )
    a, b = (load_file(tmp_path / run / "best" / "model.safetensors") for run in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_keep_last_saves_the_final_model(tmp_path):
    task = ToyTask(keep="last")
    result = engine.train(task, ToyConfig(max_steps=7), tmp_path, progress=False)
    assert result.stop_reason == "max_steps" and [h["step"] for h in result.history] == [7]
    saved = load_file(tmp_path / "best" / "model.safetensors")
    assert all(torch.equal(saved[k], v) for k, v in task.model.state_dict().items())


@pytest.mark.parametrize("world", [1, 2])
def test_step_plan_for_both_meanings_of_batch_size(world):
    """Bi-encoder (micro-batch of B, G of them a step) and cross-encoder (a step of B, split in G) cut
    the epoch's permutation as their loops always did."""
    n, seed, epoch, batch, accumulate = 103, 3, 1, 8, 2
    for rank in range(world):
        bi = plan_steps(n, ToyConfig(batch_size=batch, grad_accum=accumulate), world, rank)
        old_bi = epoch_batches(n, batch, seed, epoch)[: (n // batch) // accumulate * accumulate]
        local = batch // world
        expected = [b[rank * local : (rank + 1) * local].tolist() for b in old_bi]
        assert bi.steps_per_epoch == (n // batch) // accumulate
        assert bi.local_micro_batches(seed, epoch, 0) == expected
        assert bi.local_micro_batches(seed, epoch, 2) == expected[2 * accumulate :]

        class StepConfig(ToyConfig):
            @property
            def micro_batch(self) -> int:
                return self.batch_size // self.grad_accum

        cross = plan_steps(n, StepConfig(batch_size=batch, grad_accum=accumulate), world, rank)
        old_cross = [
            part.tolist()
            for b in epoch_batches(n, batch, seed, epoch)
            for part in micro_batches(b, accumulate, world, rank)
        ]
        assert cross.steps_per_epoch == n // batch and cross.local_micro_batches(seed, epoch, 0) == old_cross
        assert len(set(np.concatenate(cross.local_micro_batches(seed, epoch, 0)).tolist())) == len(old_cross) * (
            batch // accumulate // world
        )


def test_step_plan_refusals():
    with pytest.raises(ValueError, match="not divisible by 3 processes"):
        plan_steps(100, ToyConfig(batch_size=8), 3, 0)
    with pytest.raises(ValueError, match="make no optimizer step of 2 x 8"):
        plan_steps(15, ToyConfig(batch_size=8, grad_accum=2), 1, 0)
    with pytest.raises(ValueError, match="unknown training option"):
        ToyConfig.from_dict({"epoch": 3})
