"""A thin OpenAI-compatible server on loopback for the API tests, with fault injection.

Why the standard library's ``ThreadingHTTPServer`` and not uvicorn + fastapi: the faults need byte-level
control of the socket (close it without a response, send a 200 with a broken body, sleep past the
client's timeout), which an ASGI stack hides behind its own error handling; and a plain thread in the
test process starts in milliseconds, shares the loaded model with the test, and needs no event loop.
A maintained embedding server (infinity-emb) does not install here (it pins numpy<2 and
sentence-transformers<4), so this file is the server for the embedding tests.

Endpoints:

* ``POST /v1/embeddings``: ``{"model", "input": str | [str], "encoding_format": "float" | "base64"}``
  answered from a sentence-transformers model (the offline all-MiniLM-L6-v2 folder; its
  ``max_seq_length`` 256). ``usage.prompt_tokens`` / ``total_tokens``: the tokens of each input by the
  model's tokenizer, without special tokens and before the model's truncation (what a provider bills).
* ``GET /v1/models``: the served model.
* ``GET /_stats``: ``{"requests": {path: n}, "answered": {path: n}, "inputs": {path: n}, "faults": n,
  "max_in_flight": n}`` (``requests`` counts every request received, faulted ones included; ``inputs``
  the texts embedded; ``max_in_flight`` the most ``/v1`` requests being handled at once).
* ``POST /_faults``: ``{"faults": [fault, ...]}`` appended to a queue; each request to a ``/v1`` path
  takes the next fault (one fault per request). A fault is a dict, ``kind`` one of:
  ``status`` (``status``: an HTTP code, ``retry_after``: the Retry-After header value, optional),
  ``drop`` (close the socket without any response), ``slow`` (sleep ``seconds``, then answer
  normally: past the client's timeout it reads as a timeout), ``malformed`` (200 with a broken JSON
  body), ``wrong_count`` (a valid body with one vector too few), ``none`` (answer normally: a place
  holder, so a fault can be aimed at the third request). ``path`` restricts a fault to one path.
* ``POST /_reset``: clear the statistics and the fault queue.
* Anything else under ``/v1`` is forwarded to ``upstream`` when one is given (after the faults), so the
  chat tests put this layer in front of ``transformers serve``; without one it is a 404.

With ``api_key`` set, a request without ``Authorization: Bearer <api_key>`` gets a 401 whose message
*echoes the key it received* (a careless server does this): the client must redact it.

Run standalone (the benchmark does): ``python tests/api/openai_test_server.py --model DIR [--port 0]``
prints ``READY <base_url>`` once it listens.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

FAULT_KINDS = ("none", "status", "drop", "slow", "malformed", "wrong_count")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do (the client's pool reuses connections)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the tests read /_stats

    # -- plumbing ------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers)

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        self._json(status, {"error": {"message": message, "type": "invalid_request_error", "code": code}})

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): nothing to answer
            self.close_connection = True

    # -- routes ----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path == "/_stats":
            self._json(200, self.server.stats())
        elif path.startswith("/v1/"):
            self._serve(path, b"")
        else:
            self._error(404, f"no route {path}")

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        body = self._read_body()
        if path == "/_faults":
            faults = json.loads(body or b"{}").get("faults", [])
            self.server.add_faults(faults)
            self._json(200, {"queued": len(self.server.faults)})
        elif path == "/_reset":
            self.server.reset()
            self._json(200, {"reset": True})
        else:
            self._serve(path, body)

    def _serve(self, path: str, body: bytes) -> None:
        self.generation = self.server.generation  # counts of a request that outlives a reset are dropped
        self.server.enter()
        try:
            self._serve_counted(path, body)
        finally:
            self.server.leave()

    def _serve_counted(self, path: str, body: bytes) -> None:
        srv = self.server
        srv.count("requests", path, generation=self.generation)
        fault = srv.next_fault(path)
        if fault is not None:
            kind = fault["kind"]
            if kind == "drop":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)  # no status line, no body
                return
            if kind == "status":
                status = int(fault.get("status", 500))
                headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
                self._json(status, {"error": {"message": f"injected {status}", "type": "server_error"}}, headers)
                return
            if kind == "malformed":
                self._send(200, b'{"object": "list", "data": [{"embedding": [0.1, 0.2')
                return
            if kind == "slow":
                time.sleep(float(fault.get("seconds", 2.0)))
            # "wrong_count" is applied by the embeddings route below
        if srv.api_key is not None and self.headers.get("Authorization") != f"Bearer {srv.api_key}":
            received = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            self._error(401, f"Incorrect API key provided: {received}.", "invalid_api_key")
            return
        if path == "/v1/embeddings" and self.command == "POST" and srv.model is not None:
            self._embeddings(body, drop_one=fault is not None and fault["kind"] == "wrong_count")
        elif path == "/v1/models" and self.command == "GET" and srv.model is not None:
            self._json(200, {"object": "list", "data": [{"id": srv.model_name, "object": "model",
                                                         "created": 0, "owned_by": "csbench-tests"}]})
        elif srv.upstream is not None:
            self._forward(path, body)
        else:
            self._error(404, f"no route {path} (and no upstream to forward it to)")

    def _embeddings(self, body: bytes, drop_one: bool) -> None:
        srv = self.server
        try:
            request = json.loads(body)
        except json.JSONDecodeError:
            self._error(400, "the body is not JSON")
            return
        if request.get("model") != srv.model_name:
            self._error(404, f"The model `{request.get('model')}` does not exist", "model_not_found")
            return
        texts = request.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error(400, "input must be a string or a non-empty list of strings")
            return
        encoding = request.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            self._error(400, f"encoding_format must be float or base64, not {encoding!r}")
            return
        vectors, tokens = srv.embed(texts)
        data = []
        for i, vector in enumerate(vectors):
            if encoding == "base64":
                embedding: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                embedding = vector.tolist()
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        if drop_one:
            data = data[:-1]
        srv.count("answered", "/v1/embeddings", generation=self.generation)
        srv.count("inputs", "/v1/embeddings", len(texts), generation=self.generation)
        self._json(200, {"object": "list", "data": data, "model": srv.model_name,
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _forward(self, path: str, body: bytes) -> None:
        srv = self.server
        target = urllib.parse.urlsplit(srv.upstream)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
        upstream_path = target.path.rstrip("/") + path.removeprefix("/v1") if target.path else path
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        try:
            connection.request(self.command, upstream_path, body=body or None, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        except OSError as exc:  # the upstream is down: a gateway error, as a real proxy answers
            self._error(502, f"upstream {srv.upstream} unreachable: {type(exc).__name__}")
            return
        finally:
            connection.close()
        if 200 <= response.status < 300:
            srv.count("answered", path, generation=self.generation)
        passed = {k: v for k, v in response.getheaders()
                  if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-type", "date",
                                       "server")}
        self._send(response.status, payload, passed, response.getheader("Content-Type") or "application/json")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections a client still holds must not block stop()
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], model: Any, model_name: str, upstream: str | None,
                 api_key: str | None) -> None:
        super().__init__(address, _Handler)
        self.model = model
        self.model_name = model_name
        self.upstream = upstream.rstrip("/") if upstream else None
        self.api_key = api_key
        self.lock = threading.Lock()
        self.model_lock = threading.Lock()  # a fast tokenizer must not be used by two threads at once
        self.faults: deque[dict] = deque()
        self.counters: dict[str, Counter] = {"requests": Counter(), "answered": Counter(), "inputs": Counter()}
        self.faults_applied = 0
        self.in_flight = self.max_in_flight = 0
        self.generation = 0  # bumped by reset()

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def count(self, what: str, path: str, n: int = 1, generation: int | None = None) -> None:
        with self.lock:
            if generation is None or generation == self.generation:
                self.counters[what][path] += n

    def add_faults(self, faults: list[dict]) -> None:
        for fault in faults:
            if fault.get("kind") not in FAULT_KINDS:
                raise ValueError(f"unknown fault {fault!r}; kinds: {', '.join(FAULT_KINDS)}")
        with self.lock:
            self.faults.extend(faults)

    def next_fault(self, path: str) -> dict | None:
        with self.lock:
            for i, fault in enumerate(self.faults):
                if fault.get("path") in (None, path):
                    del self.faults[i]
                    self.faults_applied += 1
                    return fault
        return None

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            for counter in self.counters.values():
                counter.clear()
            self.faults_applied = 0
            self.max_in_flight = self.in_flight
            self.generation += 1

    def stats(self) -> dict:
        with self.lock:
            out: dict[str, Any] = {name: dict(counter) for name, counter in self.counters.items()}
            out["faults"] = self.faults_applied
            out["faults_queued"] = len(self.faults)
            out["max_in_flight"] = self.max_in_flight
            return out

    def embed(self, texts: list[str]) -> tuple[np.ndarray, int]:
        with self.model_lock:
            vectors = self.model.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
            ids = self.model.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        return np.asarray(vectors, dtype=np.float32), sum(len(row) for row in ids)


def load_model(model_dir: str, max_seq_length: int = 256) -> Any:
    """The sentence-transformers model the server answers from (loaded once, shared by servers)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    model.max_seq_length = max_seq_length
    return model


class OpenAITestServer:
    """The server in a background thread: ``with OpenAITestServer(model) as server: server.base_url``."""

    def __init__(self, model: Any = None, *, model_name: str = "all-MiniLM-L6-v2", host: str = "127.0.0.1",
                 port: int = 0, upstream: str | None = None, api_key: str | None = None) -> None:
        self._server = _Server((host, port), model, model_name, upstream, api_key)
        self._thread: threading.Thread | None = None

    @property
    def root(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @property
    def model_name(self) -> str:
        return self._server.model_name

    @property
    def api_key(self) -> str | None:
        return self._server.api_key

    @api_key.setter
    def api_key(self, value: str | None) -> None:
        self._server.api_key = value

    @property
    def upstream(self) -> str | None:
        return self._server.upstream

    @upstream.setter
    def upstream(self, value: str | None) -> None:
        self._server.upstream = value.rstrip("/") if value else None

    def start(self) -> OpenAITestServer:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # the same as the HTTP control endpoints, without a round trip
    def stats(self) -> dict:
        return self._server.stats()

    def reset(self) -> None:
        self._server.reset()

    def add_faults(self, *faults: dict) -> None:
        self._server.add_faults(list(faults))

    def embed_direct(self, texts: list[str]) -> np.ndarray:
        """What the server answers for ``texts``, computed without HTTP (the tests' reference)."""
        return self._server.embed(texts)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a sentence-transformers folder")
    parser.add_argument("--model-name", default="all-MiniLM-L6-v2")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    server = OpenAITestServer(load_model(args.model), model_name=args.model_name, port=args.port,
                              upstream=args.upstream)
    print(f"READY {server.base_url}", flush=True)
    try:
        server._server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()


if __name__ == "__main__":
    main()
