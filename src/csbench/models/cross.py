"""Cross-encoders for GeCS's matching and ranking (SPEC "Models and training"; GeCS sections 4.2 and 5.1).

GeCS fine-tunes "a singular input" per text-code pair: "we concatenate the query and code to a singular
input and train an output layer on binary classification" (5.1), with labels 0 = ``no_match`` and
1 = ``match`` (their ``target_options``). A :class:`CrossEncoder` is that model: a Hugging Face network
with a 2-way head over ``tokenizer(query, code)`` (the tokenizer's own text-pair template, e.g.
``<s> q </s></s> c </s>`` for RoBERTa). Its *match score* is ``logit(match) − logit(no_match)``: it
orders pairs exactly as the softmax probability of ``match`` does, and its sign is the head's decision
(``predict_match``: argmax, a tie going to ``no_match`` as ``torch.argmax`` would).

==========================  ===========================================================================
architecture_kind           network
==========================  ===========================================================================
sequence-classification     ``AutoModelForSequenceClassification`` with 2 labels: RoBERTa / CodeBERT
                            (``RobertaClassificationHead`` on ``<s>``), BERT / MiniLM (pooler + linear),
                            and T5 checkpoints (``T5ForSequenceClassification``, encoder-decoder: the
                            decoder's last ``</s>`` state; what GeCS's script uses for codet5p-220m)
codet5p-embedding           GeCS's ``CodeT5pEmbForSequenceClassification`` (``experiments/models.py``) on
                            ``Salesforce/codet5p-110m-embedding``, the CodeT5+ they report: the embedding
                            model's output ``normalize(proj(h_first))`` (256-d), then dropout → dense
                            (256→256) → tanh → dropout → linear (256→2). The embedding model is the
                            native port :func:`csbench.models.hf.codet5p_embedding_class`, no remote code
==========================  ===========================================================================

Input, as GeCS's ``experiments/utils.py``: the query is cut to ``max_query_len`` tokens ("as was done in
CodeBERT": 50), then the pair to ``max_len`` (512) tokens, the longer side losing tokens first
(``longest_first``). GeCS wrote the template by hand (``cls q sep c sep``: one separator for RoBERTa,
no segment ids for BERT); here the tokenizer's own pair template is used, which is what the pretrained
checkpoints saw in pair tasks. The inputs are those of the tokenizer's pair call, built from each distinct
query and code tokenized once (:class:`_Pairs`: under gecs-100 a code is in 100 pairs), with the layout of
the pair read off the tokenizer and checked against its pair call once per model (:func:`_pair_layout`);
a tokenizer where that does not hold (a slow, Python one) keeps the pair call.

Checkpoint (a directory written atomically by :meth:`CrossEncoder.save`; no pickle anywhere)::

    cross.json          {"kind": "cross", "format": 1, "params": {...}}
    model/              save_pretrained of the network (model.safetensors, config.json) and of the tokenizer
    head.safetensors    the classifier head of ``codet5p-embedding`` (the other kinds keep it in model/)
    SHA256SUMS          the digest of every other file, checked by :meth:`CrossEncoder.load` before it
                        reads anything (byte-reproducible, as an encoder checkpoint: csbench.models.encoder)
"""

from __future__ import annotations

import difflib
import json
import shutil
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from tqdm import tqdm

from csbench.digests import text_ids
from csbench.evaluate.metrics import rank_of_correct
from csbench.models.defaults import CROSS_DEFAULTS, CROSS_MODELS
from csbench.models.encoder import (
    Features,
    check_param_names,
    check_remote_code,
    length_sorted_batches,
    read_checkpoint_meta,
    seal_checkpoint,
    seeded_init,
)
from csbench.models.hf import (
    _not_available,
    codet5p_embedding_class,
    codet5p_embedding_config,
    resolve_model_id,
    warn_remote_code,
)
from csbench.models.integrity import VerifiedDir, new_dir_beside
from csbench.models.threads import run_batches, tokenizer_lock

CROSS_FILE = "cross.json"
MODEL_DIR = "model"
HEAD_FILE = "head.safetensors"
FORMAT_VERSION = 1
LABELS = ("no_match", "match")  # GeCS's target_options: the label index is the class
ARCHITECTURE_KINDS = ("sequence-classification", "codet5p-embedding")
LENGTH_CHUNK = 4096  # pairs tokenized at once to find the batch order (bounds the memory of that pass)


# --------------------------------------------------------------------------------------------- params
def cross_params(name: str, **overrides: Any) -> dict[str, Any]:
    """Model parameters of the registered cross-encoder ``name`` (without its ``training`` regime)."""
    if name not in CROSS_MODELS:
        close = difflib.get_close_matches(name, list(CROSS_MODELS), n=1)
        hint = f". Did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown cross-encoder {name!r}; registered: {', '.join(CROSS_MODELS)}{hint}")
    own = {k: v for k, v in CROSS_MODELS[name].items() if k != "training"}
    return resolve_cross_params({**own, **overrides})


def resolve_cross_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` over :data:`CROSS_DEFAULTS`, checked; unknown keys are an error (with a close match)."""
    check_param_names(params, CROSS_DEFAULTS, "cross-encoder")
    p = {**CROSS_DEFAULTS, **params}
    if p["architecture_kind"] not in ARCHITECTURE_KINDS:
        raise ValueError(
            f"architecture_kind must be one of {', '.join(ARCHITECTURE_KINDS)}, not {p['architecture_kind']!r}"
        )
    if not isinstance(p["max_len"], int) or not 4 <= p["max_len"] <= 512:
        raise ValueError(f"max_len must be an integer in [4, 512], not {p['max_len']!r}")
    if p["max_query_len"] is not None and (not isinstance(p["max_query_len"], int) or p["max_query_len"] < 1):
        raise ValueError(f"max_query_len must be None or a positive integer, not {p['max_query_len']!r}")
    if not 0.0 <= p["classifier_dropout"] < 1.0:
        raise ValueError(f"classifier_dropout must be in [0, 1), not {p['classifier_dropout']!r}")
    return p


# --------------------------------------------------------------------------------------------- data
def matching_pairs(
    queries: Sequence[str], codes: Sequence[str], seed: int, negatives_per_positive: int = 1
) -> tuple[list[str], list[str], np.ndarray]:
    """GeCS's matching data: every positive pair ``(queries[i], codes[i])`` followed by
    ``negatives_per_positive`` negatives ``(queries[i], codes[j])``; labels 1 / 0.

    GeCS (``data/clf/*/create_ds_clf_*.py``, ``random.seed(42)``) draws each negative's code uniformly from
    the *other records* of the same split, once, before training ("single negative example for matching").
    Here ``j`` is drawn uniformly from the records whose code text differs from ``codes[i]`` — GeCS only
    excluded the same index, so a duplicated function could become a false negative — and the negatives of
    one query have distinct codes. A pure function of its arguments (NumPy generator seeded by ``seed``).
    """
    if len(queries) != len(codes):
        raise ValueError(f"{len(queries)} queries but {len(codes)} codes")
    negatives = matching_negatives(text_ids(codes), seed, negatives_per_positive)
    out_queries, out_codes, labels = [], [], []
    for i, (query, code) in enumerate(zip(queries, codes, strict=True)):
        out_queries += [query] * (1 + negatives_per_positive)
        out_codes += [code, *(codes[j] for j in negatives[i])]
        labels += [1] + [0] * negatives_per_positive
    return out_queries, out_codes, np.asarray(labels, dtype=np.int64)


def matching_negatives(code_ids: np.ndarray, seed: int, negatives_per_positive: int = 1) -> np.ndarray:
    """The negatives ``matching_pairs`` draws, as an ``(n, negatives_per_positive)`` array of record
    indices, from one id per record (equal ids for equal code texts, whatever the ids: only their
    equality is used), so a split too large to hold draws them from its codes' ids alone."""
    if negatives_per_positive < 0:
        raise ValueError(f"negatives_per_positive must be >= 0, got {negatives_per_positive}")
    distinct = len(np.unique(code_ids))
    if len(code_ids) and distinct - 1 < negatives_per_positive:
        raise ValueError(
            f"{distinct} distinct codes cannot give {negatives_per_positive} negative(s) with another code per query"
        )
    return _draw_negatives(code_ids, negatives_per_positive, np.random.default_rng(seed))


def _draw_negatives(code_ids: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``(n, k)`` record indices: per row, uniform over the other records, redrawn (rejection sampling,
    which keeps the draw uniform over the acceptable records) while the code equals the row's own code or
    one already drawn for the row. Vectorised over rows: a few rounds, even on 250k records."""
    n = len(code_ids)
    out = np.zeros((n, k), dtype=np.int64)
    for column in range(k):
        todo = np.arange(n)
        while todo.size:
            draw = rng.integers(0, n - 1, size=todo.size)
            draw += draw >= todo  # uniform over the n - 1 indices other than the row's own
            ok = code_ids[draw] != code_ids[todo]
            for earlier in range(column):
                ok &= code_ids[draw] != code_ids[out[todo, earlier]]
            out[todo[ok], column] = draw[ok]
            todo = todo[~ok]
    return out


# --------------------------------------------------------------------------------------------- model
class _GeCSHead(nn.Module):
    """GeCS's ``ClassificationHead``: dropout → dense → tanh → dropout → out_proj."""

    def __init__(self, size: int, dropout: float) -> None:
        super().__init__()
        self.dense = nn.Linear(size, size)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(size, len(LABELS))

    def forward(self, x: Tensor) -> Tensor:
        return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(x)))))


def _label_config(config: Any) -> Any:
    """``config`` set up for GeCS's two classes (names kept in the saved config.json)."""
    config.num_labels = len(LABELS)
    config.id2label = dict(enumerate(LABELS))
    config.label2id = {label: i for i, label in enumerate(LABELS)}
    return config


class CrossEncoder(nn.Module):
    """A query-code pair classifier (see the module docstring); ``forward(features)`` gives ``(B, 2)`` logits."""

    kind = "cross"

    def __init__(
        self, network: nn.Module, tokenizer: Any, params: dict[str, Any], head: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.params = resolve_cross_params(params)
        self.arch = self.params["architecture_kind"]
        if (head is None) != (self.arch == "sequence-classification"):
            raise ValueError(f"{self.arch} {'needs' if head is None else 'takes no'} separate head")
        self.network = network
        self.head = head
        self.tokenizer = tokenizer
        self._check_length()

    def _check_length(self) -> None:
        config = self.network.config
        positions = getattr(config, "max_position_embeddings", None)
        if positions is None or config.model_type == "t5":
            return  # relative positions
        offset = (self.tokenizer.pad_token_id + 1) if config.model_type == "roberta" else 0
        if self.params["max_len"] > positions - offset:
            raise ValueError(
                f"max_len {self.params['max_len']} exceeds the {positions - offset} positions of the model"
            )

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, params: dict[str, Any], seed: int | None = None) -> CrossEncoder:
        """Pretrained weights and tokenizer for ``params['model_id']`` (a registered name, hub id or folder;
        a packaged copy is preferred) with a new head, initialised from ``seed`` (global RNG when None)."""
        p = resolve_cross_params(params)
        if not p["model_id"]:
            raise ValueError("from_pretrained needs params['model_id'] (a hub id or a local folder)")
        hub_id = CROSS_MODELS[p["model_id"]]["model_id"] if p["model_id"] in CROSS_MODELS else p["model_id"]
        source = resolve_model_id(hub_id)
        try:
            with seeded_init(seed):
                network, tokenizer, head = _load_network(source, p, fresh_head=True)
                return cls(network, tokenizer, p, head)
        except OSError as error:  # what transformers raises for a repository or folder it cannot find
            raise _not_available(source, error) from error

    @classmethod
    def from_config(cls, config: Any, tokenizer: Any, params: dict[str, Any], seed: int | None = None) -> CrossEncoder:
        """A randomly initialised cross-encoder of ``config`` (tests, or training from scratch)."""
        from transformers import AutoModelForSequenceClassification

        p = resolve_cross_params(params)
        with seeded_init(seed):
            if p["architecture_kind"] == "codet5p-embedding":
                network = codet5p_embedding_class()(config)
                return cls(network, tokenizer, p, _GeCSHead(config.embed_dim, p["classifier_dropout"]))
            network = AutoModelForSequenceClassification.from_config(_label_config(config))
            return cls(network, tokenizer, p)

    # -- features -------------------------------------------------------------------------------
    def _cap_queries(self, queries: Sequence[str]) -> list[str]:
        """Queries cut after their ``max_query_len``-th token (at its end offset, so the text is cut,
        not re-decoded; the cut text tokenizes to those tokens). Each distinct query is tokenized once."""
        cap = self.params["max_query_len"]
        queries = list(queries)
        if cap is None or not queries:
            return queries
        distinct = list(dict.fromkeys(queries))
        encoded = self.tokenizer(
            distinct, add_special_tokens=False, truncation=True, max_length=cap, return_offsets_mapping=True
        )
        cut = {
            query: query[: offsets[-1][1]] if len(offsets) == cap else query
            for query, offsets in zip(distinct, encoded["offset_mapping"], strict=True)
        }
        return [cut[query] for query in queries]

    def _encode(self, queries: Sequence[str], codes: Sequence[str], padding: bool) -> Any:
        """The tokenizer's own pair call on every pair (the reference :class:`_Pairs` reproduces, and
        the path for tokenizers it cannot reproduce)."""
        return self.tokenizer(
            self._cap_queries(queries),
            list(codes),
            padding=padding,
            truncation="longest_first",
            max_length=self.params["max_len"],
            return_tensors="pt" if padding else None,
        )

    def _pairs(self, queries: Sequence[str], codes: Sequence[str]) -> _Pairs | None:
        """The pairs with each distinct (capped) query and code tokenized once, or None where the
        tokenizer's pair inputs cannot be rebuilt exactly (see :func:`_pair_layout`; then :meth:`_encode`)."""
        if not len(queries):
            return None
        layout = self._layout()
        if layout is None:
            return None
        return _Pairs.tokenize(layout, self.tokenizer, self._cap_queries(queries), list(codes))

    def _layout(self) -> _PairLayout | None:
        """:func:`_pair_layout` of the tokenizer at this ``max_len``, found once (and checked) per setting."""
        tok = self.tokenizer
        key = (id(tok), self.params["max_len"], getattr(tok, "truncation_side", None))
        key += (getattr(tok, "padding_side", None), tok.pad_token_id)
        cache = self.__dict__.setdefault("_layouts", {})
        if key not in cache:
            cache[key] = _pair_layout(self)
        return cache[key]

    def _select(self, batch: Any) -> Features:
        keys = ["input_ids", "attention_mask"]
        if "token_type_ids" in batch and self.network.config.model_type not in ("t5", "roberta"):
            keys.append("token_type_ids")
        return {key: batch[key] for key in keys}

    def features(self, queries: Sequence[str], codes: Sequence[str]) -> Features:
        """Tokenized pairs, padded to the batch: ``input_ids``, ``attention_mask`` (and ``token_type_ids``
        where the tokenizer makes them and the network reads them: BERT). Exactly the tokenizer's pair
        call (``tokenizer(queries, codes, truncation="longest_first", ...)``), each distinct text
        tokenized once (:class:`_Pairs`)."""
        if len(queries) != len(codes):
            raise ValueError(f"{len(queries)} queries but {len(codes)} codes")
        pairs = self._pairs(queries, codes)
        batch = pairs.batch(range(len(pairs))) if pairs is not None else self._encode(queries, codes, padding=True)
        return self._select(batch)

    def lengths(self, queries: Sequence[str], codes: Sequence[str]) -> list[int]:
        """Input length of each pair in tokens (specials included), for length-sorted batches."""
        if len(queries) != len(codes):
            raise ValueError(f"{len(queries)} queries but {len(codes)} codes")
        pairs = self._pairs(queries, codes)
        if pairs is not None:
            return pairs.lengths().tolist()
        out: list[int] = []
        for start in range(0, len(queries), LENGTH_CHUNK):
            stop = start + LENGTH_CHUNK
            out += [
                len(ids) for ids in self._encode(queries[start:stop], codes[start:stop], padding=False)["input_ids"]
            ]
        return out

    # -- forward --------------------------------------------------------------------------------
    def forward(self, features: Features) -> Tensor:
        """Logits ``(batch, 2)``: column 0 ``no_match``, column 1 ``match``."""
        if self.head is None:
            return self.network(**features).logits
        hidden = self.network.encoder(
            input_ids=features["input_ids"], attention_mask=features["attention_mask"]
        ).last_hidden_state
        return self.head(nn.functional.normalize(self.network.proj(hidden[:, 0, :]), dim=-1))

    @torch.inference_mode()
    def score_pairs(
        self,
        queries: Sequence[str],
        codes: Sequence[str],
        batch_size: int = 64,
        progress: bool = False,
        device: torch.device | str | None = None,
    ) -> np.ndarray:
        """Match score ``logit(match) − logit(no_match)`` of every pair, in input order (float64).
        Batches are sorted by length (little padding); eval mode for the call, then restored."""
        queries, codes = list(queries), list(codes)
        if len(queries) != len(codes):
            raise ValueError(f"{len(queries)} queries but {len(codes)} codes")
        device = torch.device(device) if device is not None else next(self.parameters()).device
        out = np.empty(len(queries), dtype=np.float64)
        was_training = self.training
        self.eval()
        try:
            pairs = self._pairs(queries, codes)  # each distinct query and code tokenized once for the call
            lengths = pairs.lengths() if pairs is not None else self.lengths(queries, codes)
            batches = length_sorted_batches(lengths, batch_size)
            bar = tqdm(total=len(batches), desc="score pairs", unit="batch", disable=not progress, mininterval=2)

            def compute(k: int) -> np.ndarray:
                batch = batches[k]
                with tokenizer_lock:
                    if pairs is not None:
                        features = self._select(pairs.batch(batch))
                    else:
                        features = self.features([queries[i] for i in batch], [codes[i] for i in batch])
                logits = self({k: v.to(device) for k, v in features.items()}).double().cpu()
                bar.update(1)
                return (logits[:, 1] - logits[:, 0]).numpy()

            def sink(i: int, scores: np.ndarray) -> None:
                out[batches[i]] = scores

            try:  # each batch on one torch thread, several at once: scores independent of the thread count
                run_batches(compute, len(batches), sink, device)
            finally:
                bar.close()
        finally:
            self.train(was_training)
        return out

    def predict_match(self, queries: Sequence[str], codes: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """The head's decision per pair (argmax of the two logits; a tie is ``no_match``)."""
        return self.score_pairs(queries, codes, batch_size) > 0

    # -- checkpoint -----------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The JSON-serialisable parameters :meth:`load` rebuilds the model with."""
        return json.loads(json.dumps(self.params))

    def save(self, directory: str | Path) -> Path:
        """Write the checkpoint to ``directory`` atomically (beside it, sealed with its ``SHA256SUMS``
        and byte-reproducible safetensors by :func:`seal_checkpoint`, then renamed into place)."""
        directory = Path(directory)
        tmp = new_dir_beside(directory)
        try:
            self.network.save_pretrained(tmp / MODEL_DIR)
            self.tokenizer.save_pretrained(tmp / MODEL_DIR)
            if self.head is not None:
                state = {name: t.detach().cpu().contiguous() for name, t in self.head.state_dict().items()}
                save_file(state, str(tmp / HEAD_FILE))
            meta = {"kind": self.kind, "format": FORMAT_VERSION, "params": self.config()}
            (tmp / CROSS_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")  # last: complete
            seal_checkpoint(tmp, directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return directory

    @classmethod
    def load(cls, directory: str | Path, allow_remote_code: bool = False) -> CrossEncoder:
        """The cross-encoder :meth:`save` wrote to ``directory``, its files checked against its
        ``SHA256SUMS`` first; its ``trust_remote_code`` is honoured only with ``allow_remote_code``
        (the config's choice for the model)."""
        directory = Path(directory)
        meta_path, meta = read_checkpoint_meta(directory, CROSS_FILE, "cross-encoder")
        if meta.get("kind") != cls.kind or meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{meta_path}: kind {meta.get('kind')!r} format {meta.get('format')!r}, expected cross 1")
        p = resolve_cross_params(meta["params"])
        check_remote_code(directory, p, allow_remote_code)
        network, tokenizer, head = _load_network(directory / MODEL_DIR, p, fresh_head=False)
        if head is not None:
            head.load_state_dict(load_file(str(directory / HEAD_FILE)))
        return cls(network, tokenizer, p, head)


def _load_network(source: str | Path, p: dict[str, Any], fresh_head: bool) -> tuple[nn.Module, Any, nn.Module | None]:
    """(network, tokenizer, head or None) from a hub id or folder; ``fresh_head``: a new random head."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    warn_remote_code(source, p)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=p["trust_remote_code"])
    if p["architecture_kind"] == "codet5p-embedding":
        config = codet5p_embedding_config(source)
        network = codet5p_embedding_class().from_pretrained(source, config=config, dtype=torch.float32)
        return network, tokenizer, _GeCSHead(config.embed_dim, p["classifier_dropout"])
    kwargs = {"trust_remote_code": p["trust_remote_code"], "dtype": torch.float32}
    if fresh_head:  # the pretrained checkpoint's config, set to GeCS's two labels
        kwargs["config"] = _label_config(AutoConfig.from_pretrained(source, trust_remote_code=p["trust_remote_code"]))
    return AutoModelForSequenceClassification.from_pretrained(source, **kwargs), tokenizer, None


# --------------------------------------------------------------------------------------------- pair inputs
@dataclass(frozen=True)
class _PairLayout:
    """How the tokenizer's pair call lays out one pair: ``head`` A ``middle`` B ``tail``, A the query's
    tokens with type id ``a_type`` and B the code's with ``b_type``, the special tokens' ids and type ids
    read off a pair the tokenizer encoded (:func:`_pair_layout`); with the settings of the pair call in
    :meth:`CrossEncoder._encode` (truncation to ``max_len``, padding to the batch's longest)."""

    head: tuple[int, ...]
    head_types: tuple[int, ...]
    a_type: int
    middle: tuple[int, ...]
    middle_types: tuple[int, ...]
    b_type: int
    tail: tuple[int, ...]
    tail_types: tuple[int, ...]
    room: int  # max_len minus the special tokens: the tokens query and code share
    keep_last: bool  # truncation_side "left": a truncated side keeps its last tokens
    pad_id: int
    pad_type_id: int
    pad_left: bool
    token_type_ids: bool  # the keys the pair call returns
    attention_mask: bool

    @property
    def specials(self) -> int:
        return len(self.head) + len(self.middle) + len(self.tail)

    def truncate(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tokens kept of queries of ``a`` tokens paired with codes of ``b`` (arrays): the ``longest_first``
        strategy of the Rust tokenizers (``truncate_encodings``, ``tokenizers/src/utils/truncation.rs``).
        A pair within ``room`` is kept whole; otherwise, ``s <= l`` the sides' lengths, the longer side is
        cut to ``max(s, room - s)`` (to ``s`` when ``s > room``), and if the two still exceed ``room`` they
        keep ``room // 2`` and ``room // 2 + room % 2`` tokens, the extra one to the longer side (to the
        code when they are as long); no side grows (``min`` with its length)."""
        room = self.room
        short = np.minimum(a, b)
        n_long = np.where(short > room, short, np.maximum(short, room - short))
        both = short + n_long > room
        n_short = np.where(both, room // 2, short)
        n_long = np.where(both, room // 2 + room % 2, n_long)
        swap = a > b
        over = a + b > room
        if room == 0:  # tokenizers cuts both sides to nothing whatever their lengths
            over = np.ones_like(over)
        n1 = np.where(over, np.minimum(a, np.where(swap, n_long, n_short)), a)
        n2 = np.where(over, np.minimum(b, np.where(swap, n_short, n_long)), b)
        return n1, n2


def _pair_layout(model: CrossEncoder) -> _PairLayout | None:
    """The :class:`_PairLayout` of ``model``'s tokenizer, or None (with a warning where the tokenizer
    is a fast one) when its pair call cannot be rebuilt from separately tokenized sides.

    Detected, not assumed: a Rust ("fast") tokenizer encodes the two texts of a pair each on its own and
    then truncates and adds the special tokens (``Tokenizer::encode``: ``encode_single_sequence`` of each
    side, then ``post_process``), so a side's tokens in the pair are its tokens alone. The layout is read
    off one pair the tokenizer encodes (its ``sequence_ids`` mark the query, the code and the special
    tokens), checked to hold the sides' own tokens, then the rebuilt inputs are compared with the
    tokenizer's pair call on 49 pairs of empty, short and long texts (either side, both or none cut,
    equal lengths). Slow (Python) tokenizers are not rebuilt."""
    tok = model.tokenizer
    max_len = model.params["max_len"]
    if not getattr(tok, "is_fast", False) or not hasattr(tok, "backend_tokenizer") or tok.pad_token_id is None:
        return None
    name = type(tok).__name__

    def unusable(why: str) -> None:
        warnings.warn(f"{name}: pair inputs are tokenized pair by pair ({why})", RuntimeWarning, stacklevel=3)

    room = max_len - tok.num_special_tokens_to_add(pair=True)
    if room < 0:
        return None  # the pair call itself fails; let it say so
    query, code = "sum of a list", "def total(xs):\n    return sum(xs)"
    pair = tok([query], [code], truncation=False, padding=False)
    encoding = pair.encodings[0] if pair.encodings else None
    if encoding is None:
        unusable("no encodings")
        return None
    ids, types, sequence = encoding.ids, encoding.type_ids, encoding.sequence_ids
    own = tok([query, code], add_special_tokens=False)["input_ids"]
    runs: list[tuple[int | None, int, int]] = []  # (sequence id, start, stop)
    for i, s in enumerate(sequence):
        if runs and runs[-1][0] == s:
            runs[-1] = (s, runs[-1][1], i + 1)
        else:
            runs.append((s, i, i + 1))
    pieces = [s for s, _, _ in runs]
    if [s for s in pieces if s is not None] != [0, 1]:  # the query's tokens, then the code's, specials around
        unusable(f"pair template {pieces}")
        return None
    ((_, a0, a1),), ((_, b0, b1),) = [r for r in runs if r[0] == 0], [r for r in runs if r[0] == 1]
    if ids[a0:a1] != own[0] or ids[b0:b1] != own[1] or len(set(types[a0:a1])) != 1 or len(set(types[b0:b1])) != 1:
        unusable("the pair does not hold each side's own tokens")
        return None
    layout = _PairLayout(
        head=tuple(ids[:a0]), head_types=tuple(types[:a0]), a_type=types[a0],
        middle=tuple(ids[a1:b0]), middle_types=tuple(types[a1:b0]), b_type=types[b0],
        tail=tuple(ids[b1:]), tail_types=tuple(types[b1:]), room=room,
        keep_last=tok.truncation_side == "left", pad_id=tok.pad_token_id, pad_type_id=tok.pad_token_type_id,
        pad_left=tok.padding_side == "left", token_type_ids="token_type_ids" in pair,
        attention_mask="attention_mask" in pair,
    )  # fmt: skip
    if layout.specials != len(ids) - len(own[0]) - len(own[1]) or layout.specials != max_len - room:
        unusable("the special tokens do not add up")
        return None
    words = [" ".join(f"w{i}" for i in range(n)) for n in (max_len // 3, max_len, max_len + 1, 2 * max_len + 1)]
    texts = ["", query, code, *words]
    queries, codes = [q for q in texts for _ in texts], [c for _ in texts for c in texts]
    rebuilt = _Pairs.tokenize(layout, tok, model._cap_queries(queries), codes).batch(range(len(queries)))
    reference = model._encode(queries, codes, padding=True)
    if list(rebuilt) != list(reference) or not all(torch.equal(rebuilt[k], reference[k]) for k in reference):
        unusable("the rebuilt inputs differ from the pair call's")
        return None
    return layout


class _Pairs:
    """(query, code) pairs whose distinct queries and codes were tokenized once each (no special tokens,
    no truncation), the inputs then put together by :class:`_PairLayout`: what the tokenizer's pair call
    gives, without tokenizing a code again for each query it is paired with (gecs-100: 100 pairs a query)."""

    def __init__(
        self, layout: _PairLayout, query_ids: list[list[int]], code_ids: list[list[int]],
        query_of: np.ndarray, code_of: np.ndarray, n1: np.ndarray, n2: np.ndarray,
    ) -> None:  # fmt: skip
        self.layout = layout
        self.query_ids, self.code_ids = query_ids, code_ids
        self.query_of, self.code_of = query_of, code_of
        self.n1, self.n2 = n1, n2  # tokens kept of each pair's query and code

    @classmethod
    def tokenize(cls, layout: _PairLayout, tokenizer: Any, queries: Sequence[str], codes: Sequence[str]) -> _Pairs:
        """Pairs ``(queries[i], codes[i])`` (queries already capped)."""
        query_of, query_texts = _distinct(queries)
        code_of, code_texts = _distinct(codes)
        query_ids, query_len = _side_tokens(layout, tokenizer, query_texts)
        code_ids, code_len = _side_tokens(layout, tokenizer, code_texts)
        n1, n2 = layout.truncate(query_len[query_of], code_len[code_of])
        return cls(layout, query_ids, code_ids, query_of, code_of, n1, n2)

    def __len__(self) -> int:
        return len(self.query_of)

    def lengths(self) -> np.ndarray:
        """Input length of each pair, special tokens included."""
        return self.n1 + self.n2 + self.layout.specials

    def batch(self, rows: Sequence[int] | np.ndarray) -> dict[str, Tensor]:
        """The pair call's tensors for ``rows``: ``input_ids`` (``token_type_ids``) ``attention_mask``,
        padded to the longest as the tokenizer pads (its pad id and pad type id, on its padding side)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        lay = self.layout
        n1, n2 = self.n1[rows], self.n2[rows]
        sizes = n1 + n2 + lay.specials
        width = int(sizes.max()) if len(rows) else 0
        ids = np.full((len(rows), width), lay.pad_id, dtype=np.int64)
        types = np.full((len(rows), width), lay.pad_type_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        head, middle, tail = list(lay.head), list(lay.middle), list(lay.tail)
        head_t, middle_t, tail_t = list(lay.head_types), list(lay.middle_types), list(lay.tail_types)
        for r, row in enumerate(rows.tolist()):
            k1, k2 = int(n1[r]), int(n2[r])
            query, code = self.query_ids[self.query_of[row]], self.code_ids[self.code_of[row]]
            if lay.keep_last:
                query, code = query[len(query) - k1 :], code[len(code) - k2 :]
            else:
                query, code = query[:k1], code[:k2]
            start = width - int(sizes[r]) if lay.pad_left else 0
            span = slice(start, start + int(sizes[r]))
            ids[r, span] = head + query + middle + code + tail
            types[r, span] = head_t + [lay.a_type] * k1 + middle_t + [lay.b_type] * k2 + tail_t
            mask[r, span] = 1
        out = {"input_ids": torch.from_numpy(ids)}
        if lay.token_type_ids:
            out["token_type_ids"] = torch.from_numpy(types)
        if lay.attention_mask:
            out["attention_mask"] = torch.from_numpy(mask)
        return out


def _distinct(texts: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """(index of each text among the distinct texts, the distinct texts in first-seen order)."""
    seen: dict[str, int] = {}
    index = np.asarray([seen.setdefault(text, len(seen)) for text in texts], dtype=np.int64)
    return index, list(seen)


def _side_tokens(layout: _PairLayout, tokenizer: Any, texts: list[str]) -> tuple[list[list[int]], np.ndarray]:
    """Each text's token ids alone (no special tokens, no truncation), of which only the ``room`` a side
    can keep are stored (its first, or last with left truncation), and its full length in tokens.
    Tokenized ``LENGTH_CHUNK`` texts at a time (bounds the memory of the tokenizer's encodings)."""
    kept: list[list[int]] = []
    lengths: list[int] = []
    room = layout.room
    for start in range(0, len(texts), LENGTH_CHUNK):
        for ids in tokenizer(texts[start : start + LENGTH_CHUNK], add_special_tokens=False, verbose=False)["input_ids"]:
            lengths.append(len(ids))
            kept.append(ids[max(0, len(ids) - room) :] if layout.keep_last else ids[:room])
    return kept, np.asarray(lengths, dtype=np.int64)


# --------------------------------------------------------------------------------------------- evaluation
def matching_accuracy(
    model: CrossEncoder, queries: Sequence[str], codes: Sequence[str], labels: np.ndarray, batch_size: int = 64
) -> float:
    """Share of pairs whose head decision equals the label (the ``matching`` protocol on balanced pairs)."""
    labels = np.asarray(labels)
    if labels.size == 0:
        raise ValueError("no pairs to evaluate")
    return float((model.predict_match(queries, codes, batch_size) == labels.astype(bool)).mean())


def rank_candidates_cross(
    model: CrossEncoder,
    queries: Sequence[str],
    codes: Sequence[str],
    candidates: np.ndarray,
    answer_pos: np.ndarray | int,
    batch_size: int = 64,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """GeCS ranking with a cross-encoder: query ``i`` is paired with each of its ``k`` candidate codes
    ``codes[candidates[i]]`` and the pairs are ordered by match score ("we rank all 100 candidate pairs
    according to the matching score emitted by the model", 5.1).

    ``answer_pos`` is the column of the correct code in each candidates row (or one column for all).
    Returns ``(ranks (n_queries,), scores (n_queries, k))``; a rank is the number of candidates scoring
    >= the correct one (ties against the model; :func:`csbench.evaluate.metrics.rank_of_correct`). All
    pairs are scored in one length-sorted pass.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    if candidates.ndim != 2 or candidates.shape[0] != len(queries):
        raise ValueError(f"candidates must be (n_queries={len(queries)}, k), got shape {candidates.shape}")
    n, k = candidates.shape
    answers = np.broadcast_to(np.asarray(answer_pos, dtype=np.int64), (n,))
    if n and (answers.min() < 0 or answers.max() >= k):
        raise ValueError(f"answer_pos must be in [0, {k})")
    pair_queries = [queries[i] for i in range(n) for _ in range(k)]
    pair_codes = [codes[j] for j in candidates.ravel()]
    scores = model.score_pairs(pair_queries, pair_codes, batch_size, progress).reshape(n, k)
    ranks = np.asarray([rank_of_correct(scores[i], int(answers[i])) for i in range(n)], dtype=np.int64)
    return ranks, scores


class CrossRetriever:
    """A cross-encoder seen by the evaluation runner: it scores (query, code) pairs, never a whole
    pool (that would be one forward pass per query x code), so the runner asks it only for the
    candidate pairs of ``gecs-100`` and the pairs of ``matching``, which its head decides.

    ``loader`` rebuilds the model from its checkpoint: the run's index keeps the pool's codes (JSON,
    :meth:`index_state`), never the weights; a retriever read back from it gets its loader from the
    config (:meth:`from_index_state`)."""

    INDEX_TYPE: ClassVar[str] = "cross"
    decides_matches = True  # matching uses the head (score > 0), not a threshold chosen on validation

    def __init__(self, loader: Callable[[], CrossEncoder], batch_size: int = 64, progress: bool = False) -> None:
        self.loader = loader
        self.batch_size = batch_size
        self.progress = progress
        self._model: CrossEncoder | None = None
        self.codes: list[str] = []

    @property
    def model(self) -> CrossEncoder:
        if self._model is None:
            self._model = self.loader()
        return self._model

    def index(self, codes: pd.DataFrame) -> None:
        self.codes = codes["code"].tolist()

    def score_pairs(self, queries: Sequence[str], query_index: np.ndarray, code_index: np.ndarray) -> np.ndarray:
        """Match scores of the pairs (``queries[query_index[j]]``, indexed code ``code_index[j]``)."""
        pair_queries = [queries[int(q)] for q in query_index]
        pair_codes = [self.codes[int(c)] for c in code_index]
        return self.model.score_pairs(pair_queries, pair_codes, self.batch_size, progress=self.progress)

    def index_state(self, directory: Path, name: str) -> dict[str, Any]:
        """Write the indexed codes to ``directory/<name>.codes.json``; return the rest of the state."""
        file = f"{name}.codes.json"
        (directory / file).write_text(json.dumps(self.codes, ensure_ascii=False), encoding="utf-8")
        return {"type": self.INDEX_TYPE, "codes": file, "batch_size": self.batch_size}

    @classmethod
    def from_index_state(
        cls, state: dict[str, Any], files: VerifiedDir, loader: Callable[[], CrossEncoder] | None
    ) -> CrossRetriever:
        """The retriever :meth:`index_state` saved (its codes from the index's verified ``files``); the
        model is rebuilt by ``loader`` on first use."""
        if loader is None:
            raise ValueError("a cross-encoder index needs the loader of its model")
        retriever = cls(loader, batch_size=int(state["batch_size"]))
        codes = files.json(state["codes"])
        if not isinstance(codes, list) or not all(isinstance(code, str) for code in codes):
            raise ValueError(f"{state['codes']}: expected a list of code strings")
        retriever.codes = codes
        return retriever
