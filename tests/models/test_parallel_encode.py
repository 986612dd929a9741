"""Encoding over worker processes (csbench.models.parallel): bitwise one process's vectors, rows in input
order, a worker's error or death reaches the caller (issue #28, item 2).

Tiny encoders built from a config (no download) and saved as checkpoints, so the spawned workers
rebuild them as the pipeline does (``functools.partial(load_encoder, checkpoint)``); texts are real:
documented functions of Python's standard library and, from ``../shared/data``, CodeSearchNet Ruby.
"""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import os
import signal
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import byte_level_bpe

from csbench.code.extract import extract_functions
from csbench.models.encoder import DenseRetriever, encode_texts, load_encoder, save_encoder
from csbench.models.parallel import EncoderPool, EncodingWorkerDied, _encode_batch, _init_worker, encode_parallel

STDLIB = Path(sysconfig.get_paths()["stdlib"])
STDLIB_FILES = ("difflib.py", "fractions.py", "inspect.py", "pathlib.py", "statistics.py", "calendar.py", "tarfile.py")
BATCH = 16  # small batches: a few hundred texts make many batches of many lengths
HANG_GUARD_S = 600  # a killed worker must fail the call; this only stops the test from hanging if it does not


@pytest.fixture(scope="module")
def python_functions() -> list[tuple[str, str]]:
    """(docstring, code) of real documented functions of the standard library."""
    rows = []
    for name in STDLIB_FILES:
        path = STDLIB / name
        if path.is_file():
            rows += [(fn.query, fn.code) for fn in extract_functions(path.read_text(encoding="utf-8"), "python")]
    if len(rows) < 150:
        pytest.skip(f"only {len(rows)} documented functions found in the standard library")
    return rows[:240]


@pytest.fixture(scope="module")
def ruby_codes() -> list[str]:
    """Real Ruby functions (CodeSearchNet Ruby test split, ../shared/data)."""
    import json

    from conftest import SHARED_DATA

    path = SHARED_DATA / "codesearchnet" / "ruby" / "test.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found (../shared/data sits beside the project checkout)")
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)["code"] for _, line in zip(range(160), lines, strict=False)]


@pytest.fixture(scope="module")
def hf_checkpoint(python_functions, tmp_path_factory) -> Path:
    """A tiny BERT bi-encoder (MiniLM's architecture) with a byte-level BPE trained on the texts, saved."""
    from transformers import BertConfig

    from csbench.models.hf import HFBiEncoder, hf_params

    texts = [text for pair in python_functions for text in pair]
    bpe = byte_level_bpe(texts, vocab_size=600)
    config = BertConfig(
        vocab_size=len(bpe), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=130, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1,
    )  # fmt: skip
    params = hf_params("minilm", model_id=None, max_query_len=48, max_code_len=128)
    encoder = HFBiEncoder.from_config(config, bpe, params, seed=0)
    return save_encoder(encoder, tmp_path_factory.mktemp("parallel") / "hf")


@pytest.fixture(scope="module")
def hf_encoder(hf_checkpoint):
    return load_encoder(hf_checkpoint)


@pytest.fixture(scope="module")
def hf_pool(hf_checkpoint):
    with EncoderPool(functools.partial(load_encoder, hf_checkpoint), processes=2) as pool:
        yield pool


def _bits(matrix: np.ndarray) -> bytes:
    assert matrix.dtype == np.float32
    return np.ascontiguousarray(matrix).tobytes()


def test_queries_over_two_processes_are_bitwise_one_process(python_functions, hf_encoder, hf_pool):
    queries = [query for query, _ in python_functions]
    one = encode_texts(hf_encoder, queries, "query", batch_size=BATCH)
    two = hf_pool.encode(queries, "query", None, hf_encoder.lengths(queries, "query"), BATCH)
    assert len(set(hf_encoder.lengths(queries, "query"))) > 10  # many lengths: many batches of each size
    assert two.shape == one.shape == (len(queries), 32)
    assert _bits(two) == _bits(one)


def test_codes_of_two_languages_over_two_processes_are_bitwise_one_process(
    python_functions, ruby_codes, hf_encoder, hf_pool
):
    codes = [code for _, code in python_functions] + ruby_codes
    languages = ["python"] * len(python_functions) + ["ruby"] * len(ruby_codes)
    one = encode_texts(hf_encoder, codes, "code", languages, batch_size=BATCH)
    two = hf_pool.encode(codes, "code", languages, hf_encoder.lengths(codes, "code"), BATCH)
    assert _bits(two) == _bits(one)
    # the pool is reused: a second encoding in the same workers gives the same bits again
    assert _bits(hf_pool.encode(codes, "code", languages, hf_encoder.lengths(codes, "code"), BATCH)) == _bits(one)


def test_rows_come_back_in_input_order_when_lengths_are_shuffled(python_functions, hf_encoder, hf_pool):
    codes = [code for _, code in python_functions]
    perm = np.random.default_rng(7).permutation(len(codes))
    shuffled = [codes[i] for i in perm]
    lengths = hf_encoder.lengths(shuffled, "code")
    assert lengths != sorted(lengths) and lengths != sorted(lengths, reverse=True)
    two = hf_pool.encode(shuffled, "code", ["python"] * len(codes), lengths, BATCH)
    assert _bits(two) == _bits(encode_texts(hf_encoder, shuffled, "code", ["python"] * len(codes), batch_size=BATCH))
    # row i is the vector of shuffled[i]: the unshuffled encoding's row perm[i] (equal lengths may be
    # batched with other neighbours after shuffling, so compared to float precision, not bitwise)
    plain = encode_texts(hf_encoder, codes, "code", ["python"] * len(codes), batch_size=BATCH)
    np.testing.assert_allclose(two, plain[perm], rtol=0, atol=1e-5)
    assert not np.allclose(two, plain, atol=1e-3)  # the texts differ, so would a row out of place


def test_dense_retriever_with_processes_uses_the_pool_and_gives_the_same_bits(
    python_functions, hf_checkpoint, hf_encoder, monkeypatch
):
    from csbench.models import parallel

    calls = []
    real = parallel.encode_parallel
    monkeypatch.setattr(parallel, "encode_parallel", lambda *a, **k: calls.append(len(a[1])) or real(*a, **k))
    loader = functools.partial(load_encoder, hf_checkpoint)
    codes = [code for _, code in python_functions]
    languages = ["python"] * len(codes)
    one = DenseRetriever(hf_encoder, batch_size=BATCH, loader=loader).encode(codes, "code", languages)
    two = DenseRetriever(hf_encoder, batch_size=BATCH, loader=loader, processes=2)
    assert _bits(two.encode(codes, "code", languages)) == _bits(one)
    assert calls == [len(codes)]
    few = codes[: 2 * BATCH - 1]  # fewer than two batches: not worth the workers' start, encoded here
    expected = encode_texts(hf_encoder, few, "code", languages[: len(few)], batch_size=BATCH)
    assert _bits(two.encode(few, "code", languages[: len(few)])) == _bits(expected)
    assert calls == [len(codes)]
    with pytest.raises(ValueError, match="processes"):
        DenseRetriever(hf_encoder, loader=loader, processes=0)


def test_csn_nbow_codes_over_two_processes_are_bitwise_one_process(python_functions, ruby_codes, tmp_path):
    from csbench.models.csn import CSNEncoder

    queries = [query for query, _ in python_functions]
    codes = [code for _, code in python_functions] + ruby_codes
    languages = ["python"] * len(python_functions) + ["ruby"] * len(ruby_codes)
    params = {"architecture": "nbow", "dim": 16, "code_min_count": 1, "query_min_count": 1, "max_code_len": 60}
    checkpoint = save_encoder(CSNEncoder.from_training_data(queries, codes, params, seed=0), tmp_path / "nbow")
    encoder = load_encoder(checkpoint)
    loader = functools.partial(load_encoder, checkpoint)
    with EncoderPool(loader, processes=2) as pool:
        for texts, side, langs in ((queries, "query", None), (codes, "code", languages)):
            one = encode_texts(encoder, texts, side, langs, batch_size=BATCH)
            two = pool.encode(texts, side, langs, encoder.lengths(texts, side), BATCH)
            assert _bits(two) == _bits(one), side


# ------------------------------------------------------------------ failures in a worker
def _raise_in_batch(features, side):
    raise ValueError(f"boom while encoding a {side} batch")


def _die_in_batch(features, side):
    os.kill(os.getpid(), signal.SIGKILL)


def broken_encoder_loader(checkpoint: Path, how: str):
    """Runs in a worker: the tiny encoder, whose forward raises (``raise``) or kills its process (``die``)."""
    encoder = load_encoder(checkpoint)
    encoder.encode = {"raise": _raise_in_batch, "die": _die_in_batch}[how]
    return encoder


def test_an_error_in_a_worker_surfaces_with_its_traceback(python_functions, hf_checkpoint, hf_encoder):
    codes = [code for _, code in python_functions]
    lengths = hf_encoder.lengths(codes, "code")
    loader = functools.partial(broken_encoder_loader, hf_checkpoint, "raise")
    with pytest.raises(ValueError, match="boom while encoding a code batch") as info:
        encode_parallel(loader, codes, "code", ["python"] * len(codes), lengths, BATCH, processes=2)
    remote = str(info.value.__cause__)  # concurrent.futures' _RemoteTraceback: the worker's traceback
    assert "_raise_in_batch" in remote and "encode_batch" in remote


def test_an_error_in_the_workers_loader_surfaces_too(python_functions, hf_encoder, tmp_path):
    queries = [query for query, _ in python_functions]
    loader = functools.partial(load_encoder, tmp_path / "no-such-checkpoint")
    with pytest.raises(FileNotFoundError, match="not a csbench encoder checkpoint") as info:
        encode_parallel(loader, queries, "query", None, hf_encoder.lengths(queries, "query"), BATCH, processes=1)
    assert "read_checkpoint_meta" in str(info.value.__cause__)


def test_every_batch_after_a_loader_error_carries_the_loaders_traceback(tmp_path):
    """A worker whose encoder failed to load raises that error for each batch it is given; the caller
    reports whichever failed batch it collects first, so every one must carry the loader's frames
    (concurrent.futures clears a sent exception's traceback: the second batch used to send only
    ``_encode_batch``'s frame, and CI saw that one when the futures completed in another order)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    queue.put("cpu")
    loader = functools.partial(load_encoder, tmp_path / "no-such-checkpoint")
    executor = concurrent.futures.ProcessPoolExecutor(1, context, initializer=_init_worker, initargs=(loader, queue))
    with executor as pool:
        futures = [pool.submit(_encode_batch, ["a query"], "query", None) for _ in range(4)]
        errors = [future.exception(timeout=HANG_GUARD_S) for future in futures]
    assert all(isinstance(error, FileNotFoundError) for error in errors)
    remotes = [str(error.__cause__) for error in errors]
    assert all("read_checkpoint_meta" in remote for remote in remotes), remotes


def test_a_killed_worker_fails_the_call_instead_of_hanging(python_functions, hf_checkpoint, hf_encoder):
    codes = [code for _, code in python_functions]
    lengths = hf_encoder.lengths(codes, "code")
    loader = functools.partial(broken_encoder_loader, hf_checkpoint, "die")
    with concurrent.futures.ThreadPoolExecutor(1) as guard:
        call = guard.submit(encode_parallel, loader, codes, "code", ["python"] * len(codes), lengths, BATCH, 2)
        with pytest.raises(EncodingWorkerDied, match="died"):
            call.result(timeout=HANG_GUARD_S)


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA, the workers are one per GPU")
def test_cpu_workers_run_one_torch_thread_each(hf_checkpoint):
    """A batch's bits can depend on the thread count (single-text batches of MiniLM did): every CPU batch
    is computed on one torch thread, in the caller (encode_chunks) as in each worker, so a worker runs
    one torch thread whatever the caller's (tests/models/test_encode_threads.py: the caller's side)."""
    loader = functools.partial(load_encoder, hf_checkpoint)
    with EncoderPool(loader, processes=2) as pool:
        assert pool.devices == ["cpu", "cpu"]
        assert _bits(pool.encode([], "query", None, [], BATCH)) == b""
        threads = {pool._executor.submit(torch.get_num_threads).result() for _ in range(8)}
        assert threads == {1}
    with pytest.raises(RuntimeError, match="closed"):
        pool.encode(["x"], "query", None, [1], BATCH)
