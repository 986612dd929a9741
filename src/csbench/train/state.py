"""The resumable training state of :mod:`csbench.train.engine`: written atomically, read back, checked.

A state folder holds accelerate's ``save_state`` (the model as safetensors; optimizer, scheduler and
per-process RNG states as torch files), the engine's ``loop.json`` (step counter, early stopping, history,
efficiency counters, config) and one ``rng_<rank>.json`` per process (Python / NumPy / torch RNG
states). It is written into ``.state.tmp/`` and renamed to ``state/``, ``loop.json`` last, so a killed
run never leaves a half-written ``state/``; :func:`latest_state` finds the newest complete one, also
when the kill fell between the two renames.

What accelerate 1.15's ``load_state`` loads, and how: model weights from ``model.safetensors``
(safetensors, no pickle). ``optimizer.bin`` / ``scheduler.bin`` / ``random_states_<rank>.pkl`` are
``torch.save`` files read through ``accelerate.utils.load``, i.e. ``torch.load(weights_only=True)`` with
a temporary allow-list of NumPy reconstruct / ndarray / dtype globals (needed for NumPy's RNG tuple);
:func:`load_state` passes ``load_kwargs={"weights_only": True}`` so this does not depend on the
default. The RNG file restores Python, NumPy, torch CPU (and CUDA) generators and accelerate's
accumulation ``step`` counter, but any failure there is swallowed ("Could not load random states",
logged at INFO only), so the engine restores its own JSON copy of the RNG states afterwards and does
not depend on it. Nothing is loaded with ``weights_only=False``: ``register_for_checkpointing`` (whose
``load_custom_state`` forces it) is not used; the engine's own state is JSON.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch import Tensor

STATE_FORMAT = 1
# Fields that may change between a run and its resumption without changing the result.
RESUME_FREE_FIELDS = frozenset({"log_every", "checkpoint_every", "num_workers"})
# What a fresh (not resumed) run removes from its output folder first.
STALE_OUTPUTS = ("best", ".best.old", "state", ".state.tmp", ".state.old", "train.json")


def write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented, key-sorted JSON, written to a temporary name and renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch RNG states as JSON-serialisable data."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [base64.b64encode(s.numpy().tobytes()).decode() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the RNG states :func:`rng_state` returned."""

    def tensor(text: str) -> Tensor:
        return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(tensor(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensor(s) for s in state["cuda"]])


def latest_state(out_dir: Path) -> Path | None:
    """The complete training state with the most steps: ``state/``, or a ``.state.tmp`` / ``.state.old``
    left by a kill during the rename (complete = its ``loop.json`` exists; it is written last)."""
    best: tuple[int, Path] | None = None
    for candidate in (out_dir / "state", out_dir / ".state.tmp", out_dir / ".state.old"):
        loop_file = candidate / "loop.json"
        if loop_file.is_file():
            step = json.loads(loop_file.read_text())["global_step"]
            if best is None or step > best[0]:
                best = (step, candidate)
    return None if best is None else best[1]


def check_resumable(saved: dict[str, Any], config: dict[str, Any], num_processes: int, steps_per_epoch: int) -> None:
    """Refuse to resume a state (``loop.json``) that another config, process count or data made."""
    if saved.get("format") != STATE_FORMAT:
        raise ValueError(f"training state format {saved.get('format')!r}, expected {STATE_FORMAT}")
    old = saved["config"]
    changed = sorted(k for k in set(old) | set(config) if k not in RESUME_FREE_FIELDS and old.get(k) != config.get(k))
    if changed:
        raise ValueError(f"cannot resume: the config changed in {', '.join(changed)} (start a fresh run instead)")
    if saved["num_processes"] != num_processes:
        raise ValueError(
            f"cannot resume a {saved['num_processes']}-process run with {num_processes} processes "
            "(accelerate's model state is saved per wrapper)"
        )
    if saved["steps_per_epoch"] != steps_per_epoch:
        raise ValueError("cannot resume: the training data changed (steps per epoch differ)")


def save_state(accelerator: Accelerator, out_dir: Path, loop_state: Callable[[], dict[str, Any]]) -> None:
    """Write the training state to ``out_dir/state`` (every process takes part); ``loop_state()`` is
    called on the main process once accelerate's files are written, and its ``loop.json`` goes last."""
    tmp, final, old = out_dir / ".state.tmp", out_dir / "state", out_dir / ".state.old"
    main = accelerator.is_main_process
    if main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=True)
    write_json(tmp / f"rng_{accelerator.process_index}.json", rng_state())
    accelerator.wait_for_everyone()
    if main:
        write_json(tmp / "loop.json", {"format": STATE_FORMAT, **loop_state()})  # last: marks it complete
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def load_state(accelerator: Accelerator, state_dir: Path) -> None:
    """Restore accelerate's objects and this process's RNG states from ``state_dir``."""
    accelerator.load_state(str(state_dir), load_kwargs={"weights_only": True})
    set_rng_state(json.loads((state_dir / f"rng_{accelerator.process_index}.json").read_text()))


def clear_outputs(out_dir: Path) -> None:
    """Remove what an earlier run left in ``out_dir`` (a fresh run starts clean)."""
    for stale in STALE_OUTPUTS:
        path = out_dir / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
