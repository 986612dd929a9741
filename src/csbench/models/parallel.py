"""Encoding over worker processes: one per GPU, or several CPU processes (issue #28, item 2).

A pool's texts are cut into exactly the batches :func:`csbench.models.encoder.encode_texts` forms
(:func:`~csbench.models.encoder.length_sorted_batches` over the encoder's ``lengths``), and whole batches
are handed to worker processes, each of which rebuilds the encoder once from the retriever's ``loader``
(a picklable callable: ``functools.partial(load_encoder, checkpoint)``, ``functools.partial(
pretrained_encoder, params)``) and computes a batch with the same function as one process
(:func:`~csbench.models.encoder.encode_batch`). Every batch is therefore computed exactly as one process
computes it, and the rows are written back in input order: on CPU the matrix is bitwise the one of
:func:`encode_texts` (tests/models/test_parallel_encode.py). Across devices (``cuda:i`` workers against a
CPU run) vectors agree to the devices' float tolerance only.

Scheduling is dynamic: the batches, longest first, are queued and each worker takes the next one when
it is free, so a worker slowed down by other jobs on a shared machine does not hold the others up; which
worker computes a batch does not change its bits.

Threads: a batch's vectors can depend on torch's thread count (all-MiniLM-L6-v2: a batch of one 9-token
text was 1.1e-7 apart on 1 and 2 threads), so every CPU batch, in one process as in a worker, is computed
on one torch thread (:func:`csbench.models.encoder.one_torch_thread`): a worker computes one batch at a
time on one core, N workers use N cores, and the matrix is bitwise the one-process one whatever the
threads of either. (One process computes as many batches at once as it has torch threads.)

Workers are started with ``spawn`` (never ``fork``: torch's thread pools and a CUDA context do not
survive a fork), so a worker costs an interpreter start, the imports and one load of the encoder:
worth it for a pool, not for a few hundred texts. An error in a worker (in the loader or in a batch) is
raised again here, with the worker's traceback as its ``__cause__``; a worker that dies (killed, out of
memory) fails the call with :class:`EncodingWorkerDied` instead of hanging it.

GPUs: with ``devices=None`` and CUDA available, worker ``i`` encodes on ``cuda:i`` (at most one worker
per GPU); this path is written for such machines but was only tested on CPU processes here.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np
from tqdm import tqdm

from csbench.models.encoder import length_sorted_batches

IN_FLIGHT_PER_WORKER = 4  # batches submitted ahead per worker


class EncodingWorkerDied(RuntimeError):
    """A worker process ended abruptly (a signal, the out-of-memory killer) while encoding."""


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system reports one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_devices(processes: int, devices: Sequence[str] | None = None) -> list[str]:
    """The device of each worker: ``devices`` as given; else one ``cuda:i`` per GPU (at most
    ``processes``) when CUDA is available; else ``processes`` times ``cpu``."""
    if devices is not None:
        if not devices:
            raise ValueError("devices must name at least one device")
        return [str(device) for device in devices]
    if processes < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    import torch

    if torch.cuda.is_available():
        return [f"cuda:{i}" for i in range(min(processes, torch.cuda.device_count()))]
    return ["cpu"] * processes


# ------------------------------------------------------------------------------- in the worker
_worker: dict[str, Any] = {}


def _init_worker(loader: Callable[[], Any], device_queue: Any) -> None:
    """Worker start: one torch thread (one batch at a time, on one core), its device, its encoder. A
    failure is kept and raised by the first batch, so it reaches the caller with its traceback (an
    initializer that raises only breaks the pool, and the caller learns nothing but that)."""
    try:
        os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the fast tokenizers' thread pool
        import torch

        torch.set_num_threads(1)  # a batch is computed on one thread anyway (encode_chunks)
        device = torch.device(device_queue.get(timeout=60))
        if device.type == "cuda":
            torch.cuda.set_device(device)
        encoder = loader()
        encoder.to(device)
        encoder.eval()
        _worker.update(encoder=encoder, device=device)
    except BaseException as exc:  # kept, and raised again by every batch (_encode_batch)
        # with its traceback kept apart: concurrent.futures clears an exception's __traceback__ once it has
        # sent it back (_ExceptionWithTraceback), so the second batch to raise the same object would send
        # a traceback without the loader's frames, and which batch's error the caller sees first varies
        _worker["error"] = (exc, exc.__traceback__)


def _encode_batch(texts: list[str], side: str, languages: list[str] | None) -> np.ndarray:
    import torch

    from csbench.models.encoder import encode_batch

    if "error" in _worker:
        error, traceback = _worker["error"]
        raise error.with_traceback(traceback)
    with torch.inference_mode():
        return encode_batch(_worker["encoder"], texts, side, languages, _worker["device"])


# ------------------------------------------------------------------------------- in the caller
class EncoderPool:
    """Worker processes holding one encoder each (built by ``loader``); :meth:`encode` spreads a list
    of texts over them. A context manager: the workers stop on exit (or :meth:`close`). Reuse one pool
    for several encodings to pay the workers' start once.

    ``processes``: CPU workers, one core each (ignored where CUDA gives one worker per GPU, see
    :func:`worker_devices`); ``devices``: the workers' devices, explicitly (e.g. ``["cuda:0", "cuda:1"]``)."""

    def __init__(
        self,
        loader: Callable[[], Any],
        processes: int = 2,
        devices: Sequence[str] | None = None,
    ) -> None:
        self.devices = worker_devices(processes, devices)
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        for device in self.devices:
            queue.put(device)
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=len(self.devices),
            mp_context=context,
            initializer=_init_worker,
            initargs=(loader, queue),
        )

    def __enter__(self) -> EncoderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (pending batches are cancelled; running ones finish first)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def encode(
        self,
        texts: Sequence[str],
        side: str,
        languages: Sequence[str] | None,
        lengths: Sequence[int],
        batch_size: int = 128,
        progress: bool = False,
    ) -> np.ndarray:
        """float32 vectors of ``texts``, rows in input order, bitwise those of ``encode_texts`` on the
        same device. ``lengths``: the encoder's ``lengths(texts, side)`` (the batches' sort key)."""
        if side not in ("query", "code"):
            raise ValueError(f"side must be 'query' or 'code', not {side!r}")
        if side == "code" and languages is None:
            raise ValueError("code needs its languages")
        if len(lengths) != len(texts) or (languages is not None and len(languages) != len(texts)):
            raise ValueError("texts, lengths and languages must have the same length")
        if self._executor is None:
            raise RuntimeError("this EncoderPool is closed")
        batches = length_sorted_batches(lengths, batch_size)
        if not batches:
            return np.empty((0, 0), dtype=np.float32)
        todo = iter(batches)  # longest first: the long batches start early, the short ones fill in
        running: dict[Future, np.ndarray] = {}

        def submit(count: int) -> None:
            # a few batches per worker in flight: the workers never wait, and neither the texts' copies nor
            # the results of a large pool pile up here
            for batch in itertools.islice(todo, count):
                chunk = [texts[i] for i in batch]
                chunk_languages = None if side == "query" else [languages[i] for i in batch]
                running[self._executor.submit(_encode_batch, chunk, side, chunk_languages)] = batch

        out: np.ndarray | None = None
        bar = tqdm(
            total=len(batches),
            desc=f"encode {side}s ({len(self.devices)} processes)",
            unit="batch",
            disable=not progress,
            mininterval=2,
        )
        try:
            submit(IN_FLIGHT_PER_WORKER * len(self.devices))
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    batch = running.pop(future)
                    vectors = future.result()  # a worker's error is raised here, its traceback as __cause__
                    if out is None:
                        out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
                    out[batch] = vectors
                submit(len(done))
                bar.update(len(done))
        except BrokenProcessPool as exc:
            self.close()
            raise EncodingWorkerDied(
                f"an encoding worker process died while encoding {len(texts)} {side}s (killed by a signal, or out "
                f"of memory?); {len(self.devices)} workers on {', '.join(sorted(set(self.devices)))}"
            ) from exc
        except BaseException:
            self.close()  # cancel what is queued; the caller's error goes on
            raise
        finally:
            bar.close()
        return out


def encode_parallel(
    loader: Callable[[], Any],
    texts: Sequence[str],
    side: str,
    languages: Sequence[str] | None,
    lengths: Sequence[int],
    batch_size: int = 128,
    processes: int = 2,
    progress: bool = False,
    devices: Sequence[str] | None = None,
) -> np.ndarray:
    """:meth:`EncoderPool.encode` in a pool started for this call (what ``DenseRetriever.model_vectors``
    does when its ``processes`` is above 1 and the texts are many)."""
    if len(texts) == 0:
        return np.empty((0, 0), dtype=np.float32)
    with EncoderPool(loader, processes, devices) as pool:
        return pool.encode(texts, side, languages, lengths, batch_size, progress)
