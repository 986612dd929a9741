"""Any Hugging Face encoder-decoder (``AutoModelForSeq2SeqLM``) by ``model_id``: CodeT5 / CodeT5+ 220m,
T5, BART... as a :class:`~csbench.summarization.models.base.Summarizer` (architecture ``hf-seq2seq``).

* **Inputs** (:meth:`HFSeq2SeqSummarizer.collate`): the model's own tokenizer with its own special-token
  template, ``source_prefix + code`` truncated to ``max_source_len`` tokens, the summary (``text_target``)
  to ``max_target_len``; padding positions of the labels are -100. CodeT5's tokenizer wraps both sides
  in ``<s> ... </s>`` as CodeT5's own fine-tuning (``_utils.py``, ``tokenizer.encode``) does, so a
  fine-tuned CodeT5 emits ``<s>`` first; :meth:`detokenize` drops special tokens.
* **Loss**: token cross-entropy over the non-padding labels (the decoder inputs are the labels shifted
  right, as the model builds them itself), optional label smoothing.
* **Decoding** through :mod:`csbench.summarization.decode` (Hugging Face ``generate`` semantics): the
  encoder runs once per batch, the decoder one token per step with the model's ``past_key_values``
  (reordered in place by ``reorder_cache``). What a checkpoint's ``generation_config`` asks beyond
  ``num_beams`` / ``length_penalty`` / ``max_new_tokens`` (forced BOS / EOS, ``no_repeat_ngram_size``,
  ``min_length``, ...) is not applied: it is logged as a warning when the model is loaded.
* **Checkpoint**: ``save_pretrained`` (safetensors: transformers 5 writes no other format) and the
  tokenizer under ``hf/``, plus ``summarizer.json``; :meth:`load` reads them back, offline.

``build`` loads pretrained weights (``from_pretrained``: the hub, the local cache, or a folder); with no
network and no copy the error says how to supply the model by hand (:func:`csbench.models.hf._not_available`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from csbench.summarization.models.base import Summarizer, read_manifest

log = logging.getLogger(__name__)

HF_DIR = "hf"  # the save_pretrained folder (weights, config, tokenizer) inside a saved summarizer
# generation_config settings that change Hugging Face's search and that csbench's decoder does not apply,
# with the values that leave it unchanged
_IGNORED_GENERATION: dict[str, tuple[Any, ...]] = {
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "no_repeat_ngram_size": (None, 0),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "repetition_penalty": (None, 1.0),
    "bad_words_ids": (None, []),
    "suppress_tokens": (None, []),
    "begin_suppress_tokens": (None, []),
}


@dataclass
class HFDecoderState:
    """What one decoding batch carries between steps: the encoder's output ``(rows, source, d)``, the
    source mask ``(rows, source)`` and the decoder's key/value cache (None before the first step)."""

    hidden: Tensor
    mask: Tensor
    cache: Any | None = None


def _load_pretrained(source: str, trust_remote_code: bool) -> tuple[nn.Module, Any]:
    """Model and tokenizer of ``source`` (hub id or folder); a clear error when neither is reachable."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from csbench.models.hf import _not_available, warn_remote_code

    warn_remote_code(source, {"trust_remote_code": trust_remote_code})
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        model = AutoModelForSeq2SeqLM.from_pretrained(source, trust_remote_code=trust_remote_code, dtype=torch.float32)
    except OSError as error:  # what transformers raises for a repository or folder it cannot find
        raise _not_available(source, error) from error
    return model, tokenizer


class HFSeq2SeqSummarizer(Summarizer):
    """A Hugging Face ``AutoModelForSeq2SeqLM`` and its tokenizer (see the module docstring)."""

    architecture: ClassVar[str] = "hf-seq2seq"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "source_prefix": "",  # prepended to every code (e.g. "summarize: " for a multi-task T5)
        "trust_remote_code": False,
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("model_id",)

    def __init__(self, model: nn.Module, tokenizer: Any, params: dict[str, Any]) -> None:
        self.params = self.resolve_params(params)
        self.module = model
        self.tokenizer = tokenizer
        config = model.config
        if not getattr(config, "is_encoder_decoder", False):
            raise ValueError(f"{self.params['model_id']}: not an encoder-decoder model (config.is_encoder_decoder)")
        generation = getattr(model, "generation_config", None)
        start = getattr(generation, "decoder_start_token_id", None)
        start = config.decoder_start_token_id if start is None else start
        eos = getattr(generation, "eos_token_id", None)
        eos = config.eos_token_id if eos is None else eos
        eos = eos[0] if isinstance(eos, list) else eos
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else config.pad_token_id
        if start is None or eos is None or pad is None:
            raise ValueError(
                f"{self.params['model_id']}: need decoder_start_token_id, eos_token_id and a pad token "
                f"(got {start}, {eos}, {pad})"
            )
        self._start, self._eos, self._pad = int(start), int(eos), int(pad)
        ignored = {name: getattr(generation, name, None) for name in _IGNORED_GENERATION}
        ignored = {name: value for name, value in ignored.items() if value not in _IGNORED_GENERATION[name]}
        if ignored:
            log.warning(
                "%s: generation_config sets %s; csbench's decoder does not apply them (its search is "
                "num_beams / length_penalty / max_new_tokens only)",
                self.params["model_id"],
                ", ".join(f"{k}={v}" for k, v in ignored.items()),
            )

    # ----------------------------------------------------------------------------------- construction
    @classmethod
    def build(cls, params: dict[str, Any], codes: Iterable[str], summaries: Iterable[str], seed: int) -> Summarizer:
        """The pretrained ``model_id`` (hub id or folder); ``codes`` / ``summaries`` are not read (the
        tokenizer is the model's) and ``seed`` only matters to a head the checkpoint lacks."""
        p = cls.resolve_params(params)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model, tokenizer = _load_pretrained(p["model_id"], p["trust_remote_code"])
        return cls(model, tokenizer, p)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.module.save_pretrained(directory / HF_DIR)  # safetensors (transformers 5 writes nothing else)
        self.tokenizer.save_pretrained(directory / HF_DIR)
        self.write_manifest(directory, model_class=type(self.module).__name__)

    @classmethod
    def load(cls, directory: Path) -> Summarizer:
        directory = Path(directory)
        manifest = read_manifest(directory)
        source = directory / HF_DIR
        if not (source / "config.json").is_file():
            raise FileNotFoundError(f"{directory} is not a saved hf-seq2seq summarizer (no {HF_DIR}/config.json)")
        params = manifest["params"]
        model, tokenizer = _load_pretrained(str(source), bool(params.get("trust_remote_code", False)))
        return cls(model.eval(), tokenizer, params)

    # ----------------------------------------------------------------------------------- training
    def _sources(self, codes: list[str]) -> dict[str, Tensor]:
        prefix = self.params["source_prefix"]
        batch = self.tokenizer(
            [prefix + code for code in codes],
            max_length=self.params["max_source_len"],
            truncation=True,
            padding=True,
            return_tensors="pt",
        )
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def collate(self, codes: list[str], summaries: list[str]) -> dict[str, Tensor]:
        batch = self._sources(codes)
        target = self.tokenizer(
            text_target=list(summaries),
            max_length=self.params["max_target_len"],
            truncation=True,
            padding=True,
            return_tensors="pt",
        )
        labels = target["input_ids"].masked_fill(target["attention_mask"] == 0, -100)
        return {**batch, "labels": labels}

    def loss(self, module: nn.Module, batch: dict[str, Tensor], label_smoothing: float = 0.0) -> Tensor:
        device = next(module.parameters()).device
        batch = {name: tensor.to(device) for name, tensor in batch.items()}
        inputs = {name: batch[name] for name in ("input_ids", "attention_mask", "labels")}
        logits = module(**inputs).logits
        return nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.size(-1)),
            batch["labels"].reshape(-1),
            ignore_index=-100,
            label_smoothing=label_smoothing,
        )

    # ----------------------------------------------------------------------------------- decoding protocol
    @property
    def decoder_start_id(self) -> int:
        return self._start

    @property
    def eos_id(self) -> int:
        return self._eos

    @property
    def pad_id(self) -> int:
        return self._pad

    def encode(self, codes: list[str]) -> HFDecoderState:
        batch = {name: tensor.to(self.device) for name, tensor in self._sources(codes).items()}
        hidden = self.module.get_encoder()(**batch, return_dict=True).last_hidden_state
        return HFDecoderState(hidden=hidden, mask=batch["attention_mask"])

    def step(self, state: HFDecoderState, prefix: Tensor) -> tuple[Tensor, HFDecoderState]:
        from transformers.modeling_outputs import BaseModelOutput

        out = self.module(
            encoder_outputs=BaseModelOutput(last_hidden_state=state.hidden),
            attention_mask=state.mask,
            decoder_input_ids=prefix[:, -1:].to(state.hidden.device),
            past_key_values=state.cache,
            use_cache=True,
            return_dict=True,
        )
        logits = out.logits[:, -1, :].float()
        return logits, HFDecoderState(hidden=state.hidden, mask=state.mask, cache=out.past_key_values)

    def detokenize(self, ids: list[list[int]]) -> list[str]:
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return [text.strip() for text in texts]


SUMMARIZER = HFSeq2SeqSummarizer
