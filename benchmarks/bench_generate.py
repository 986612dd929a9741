"""Generation throughput: csbench's decoder (:mod:`csbench.summarization.decode`) against Hugging Face's
own ``generate`` on the same model and inputs, greedy and beam search, with identical outputs.

    python benchmarks/bench_generate.py [--size tiny|small|base] [--model-id FOLDER] [--n 32]
        [--beams 1 10] [--max-length 32] [--batch-size 16] [--repeat 3] [--threads N]

The model is an ``hf-seq2seq`` summarizer: ``--model-id`` (a folder or hub id, e.g. a downloaded
``Salesforce/codet5-base-multi-sum``), else a randomly initialised T5 built here from a config (offline):
``small`` has CodeT5-small's shape (d_model 512, 6 + 6 layers, 8 heads, d_ff 2048), ``base`` CodeT5-base's
(768, 12 + 12, 12, 3072), both with CodeT5's 32,100 output rows, ``tiny`` the tests' (32, 2 + 2, 300);
its byte-level BPE tokenizer is trained here on the inputs. A random model rarely emits EOS: most
generations run to ``--max-length``, the same work for both decoders.

Inputs: the first ``--n`` codes of TL-CodeSum's valid split beside the project
(``../shared/data/tl_codesum/valid.token.code``), else documented functions of Python's standard library.
Both decoders see the same batches (csbench sorts codes by length and cuts batches of ``--batch-size``;
``generate`` is given those batches) under one thread count, alternating runs. Printed per decoding:
summaries/s (median of ``--repeat`` runs, wall clock, and its CPU seconds), the ratio csbench / Hugging
Face, the mean generated length and the load average; a token mismatch aborts the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from csbench.summarization.decode import generate_ids
from csbench.summarization.models import build_summarizer
from csbench.summarization.models.base import Decoding

PROJECT = Path(__file__).resolve().parents[1]
TL_CODE = PROJECT.parent / "shared" / "data" / "tl_codesum" / "valid.token.code"
SIZES = {  # T5Config fields: CodeT5-small / CodeT5-base shapes, and the tests' tiny model
    "tiny": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4, "vocab": 300},
    "small": {"d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "vocab": 32100},
    "base": {"d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_heads": 12, "vocab": 32100},
}


def load_codes(n: int) -> tuple[list[str], str]:
    """``n`` code inputs: TL-CodeSum valid lines, else standard-library functions (bench_encode's)."""
    if TL_CODE.is_file():
        with TL_CODE.open() as lines:
            codes = [line.split("\t", 1)[1].strip() for _, line in zip(range(n), lines, strict=False)]
        return codes, str(TL_CODE)
    from bench_encode import load_pairs

    pairs, source = load_pairs(n)
    return pairs["code"].tolist(), source


def random_t5(folder: Path, size: str, texts: list[str]) -> str:
    """A randomly initialised T5 of ``size`` with CodeT5's conventions and a tokenizer trained on ``texts``,
    saved to ``folder`` (its ``model_id``)."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    shape = dict(SIZES[size])
    vocab = shape.pop("vocab")  # the model's output layer: CodeT5's 32,100 rows whatever the tokenizer learns
    trainer = ByteLevelBPETokenizer()
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]  # CodeT5's ids 0..4
    trainer.train_from_iterator(texts, vocab_size=vocab, min_frequency=1, special_tokens=specials)
    trainer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 1))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=trainer._tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", mask_token="<mask>",
    )
    config = T5Config(
        vocab_size=max(vocab, len(tokenizer)), pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=0,
        dropout_rate=0.0, **shape,
    )
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def hf_generate(summarizer, codes: list[str], decoding: Decoding) -> list[list[int]]:
    """``generate`` on the batches csbench forms (length-sorted), cut as csbench cuts; input order."""
    order = sorted(range(len(codes)), key=lambda i: (len(codes[i]), i))
    out: list[list[int]] = [[] for _ in codes]
    for start in range(0, len(order), decoding.batch_size):
        chunk = order[start : start + decoding.batch_size]
        batch = summarizer._sources([codes[i] for i in chunk])
        ids = summarizer.module.generate(
            **batch, num_beams=decoding.beam, length_penalty=decoding.length_penalty,
            max_new_tokens=decoding.max_length + 1, early_stopping=False, do_sample=False,
        )
        for i, row in zip(chunk, ids[:, 1:].tolist(), strict=True):
            out[i] = row[: row.index(summarizer.eos_id)] if summarizer.eos_id in row else row
    return out


def timed(run: Callable[[], list[list[int]]]) -> tuple[float, float, list[list[int]]]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small", help="random T5 shape (no --model-id)")
    parser.add_argument("--model-id", default=None, help="an AutoModelForSeq2SeqLM folder or hub id instead")
    parser.add_argument("--n", type=int, default=32, help="codes summarized per run")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 10], help="beam sizes (1: greedy)")
    parser.add_argument("--max-length", type=int, default=32, help="summary tokens at most (EOS excluded)")
    parser.add_argument("--batch-size", type=int, default=16, help="codes per batch (beam x rows)")
    parser.add_argument("--max-source-len", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs; the median is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    codes, source = load_codes(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        model_id = args.model_id or random_t5(Path(tmp), args.size, codes)
        params = {"architecture": "hf-seq2seq", "model_id": model_id, "max_source_len": args.max_source_len}
        summarizer = build_summarizer(params, [], [], seed=0)
    summarizer.module.eval()
    n_params = sum(p.numel() for p in summarizer.module.parameters())
    print(f"{len(codes)} codes from {source}")
    print(f"model {args.model_id or 'random T5 ' + args.size} ({n_params / 1e6:.1f} M parameters), "
          f"{torch.get_num_threads()} torch threads, batch {args.batch_size}, max_length {args.max_length}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for beam in args.beams:
        decoding = Decoding(beam=beam, max_length=args.max_length, batch_size=args.batch_size)
        runners = {
            "csbench decode": lambda d=decoding: generate_ids(summarizer, codes, d),
            "HF generate": lambda d=decoding: hf_generate(summarizer, codes, d),
        }
        generate_ids(summarizer, codes[: args.batch_size], decoding)  # warm-up
        wall: dict[str, list[float]] = {label: [] for label in runners}
        cpu: dict[str, list[float]] = {label: [] for label in runners}
        outputs: dict[str, list[list[int]]] = {}
        with torch.no_grad():
            for _ in range(args.repeat):
                for label, run in runners.items():
                    seconds, cpu_seconds, outputs[label] = timed(run)
                    wall[label].append(seconds)
                    cpu[label].append(cpu_seconds)
        if outputs["csbench decode"] != outputs["HF generate"]:
            bad = sum(a != b for a, b in zip(outputs["csbench decode"], outputs["HF generate"], strict=True))
            raise SystemExit(f"beam {beam}: {bad} of {len(codes)} generations differ from Hugging Face's")
        mean_len = statistics.mean(len(ids) for ids in outputs["csbench decode"])
        name = "greedy" if beam == 1 else f"beam {beam}"
        print(f"{name}: outputs identical ({len(codes)} summaries, mean {mean_len:.1f} tokens)")
        for label in runners:
            runs = ", ".join(f"{len(codes) / s:.2f}" for s in wall[label])
            print(f"  {label:15}: {len(codes) / statistics.median(wall[label]):8.2f} summaries/s median wall "
                  f"(runs {runs}); {statistics.median(cpu[label]):7.1f} CPU s")
        ratio = statistics.median(wall["HF generate"]) / statistics.median(wall["csbench decode"])
        print(f"  csbench / HF throughput: {ratio:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
