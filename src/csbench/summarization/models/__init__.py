"""Summarization architectures (family ``seq2seq``), registered by name, imported on first use.

:data:`ARCHITECTURES` maps an architecture name (a model's ``architecture`` param, summarizer.json's
``"architecture"``) to the module that implements it; the module defines ``SUMMARIZER``, its
:class:`~csbench.summarization.models.base.Summarizer` subclass. Importing this package imports no
torch: a module is imported when a model of its architecture is first built or loaded.

- ``transformer``: a from-scratch Transformer encoder-decoder, code subtokens in, BPE summary pieces
  out, vocabularies learnt on the train split (:mod:`.transformer`);
- ``hf-seq2seq``: any Hugging Face ``AutoModelForSeq2SeqLM`` by ``model_id`` (CodeT5) (:mod:`.hf_seq2seq`);
- ``roberta-decoder``: CodeXGLUE code-to-text's Seq2Seq, a RoBERTa / CodeBERT encoder and a 6-layer
  Transformer decoder (:mod:`.roberta_decoder`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from csbench.registry import Registry

if TYPE_CHECKING:
    from csbench.summarization.models.base import Summarizer

ARCHITECTURES: Registry[str] = Registry("summarization architecture")
ARCHITECTURES.register("transformer", "csbench.summarization.models.transformer")
ARCHITECTURES.register("hf-seq2seq", "csbench.summarization.models.hf_seq2seq")
ARCHITECTURES.register("roberta-decoder", "csbench.summarization.models.roberta_decoder")


def summarizer_class(architecture: str) -> type[Summarizer]:
    """The :class:`Summarizer` subclass of a registered architecture (its module imported now)."""
    module = importlib.import_module(ARCHITECTURES.get(architecture, where="architecture"))
    cls = getattr(module, "SUMMARIZER", None)
    if cls is None:
        raise AttributeError(f"{module.__name__} defines no SUMMARIZER (the {architecture!r} architecture's class)")
    return cls


def build_summarizer(params: dict[str, Any], codes: Iterable[str], summaries: Iterable[str], seed: int) -> Summarizer:
    """A new summarizer of ``params["architecture"]``: a from-scratch one learns its vocabularies on the
    ``codes`` / ``summaries`` of the train split (each iterated once or more) and seeds its weights with
    ``seed``; a pretrained one loads ``model_id``. ``params`` may carry the registry's ``family`` and
    ``training`` keys (ignored); any other unknown key is an error."""
    if "architecture" not in params:
        raise ValueError("summarizer params need an 'architecture' (one of " + ", ".join(ARCHITECTURES.names()) + ")")
    cls = summarizer_class(params["architecture"])
    return cls.build(params, codes, summaries, seed)


def load_summarizer(directory: str | Path) -> Summarizer:
    """The summarizer saved in ``directory`` (its ``summarizer.json`` names the architecture)."""
    from csbench.summarization.models.base import read_manifest

    directory = Path(directory)
    return summarizer_class(read_manifest(directory)["architecture"]).load(directory)
