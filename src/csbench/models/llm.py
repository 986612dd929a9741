"""Zero-shot matching by a chat LLM, as GenCodeSearchNet's GPT-3.5 Turbo baseline (GeCS section 5,
Appendix A.3.2; ``family: llm``).

For each (query, code) pair of the ``matching`` protocol the model is sent GeCS's prompt for the dataset
(:mod:`csbench.api.prompts`: ``query [CODESPLIT] code`` after the appendix's instruction, the language
named as GeCS names it), one user message per pair through :meth:`csbench.api.client.ApiClient.chat`
(cached per request body, so a re-run or a second study sends nothing twice), at most ``max_tokens``
output tokens (GeCS: 10) and ``temperature`` left to the server when None (GeCS: "default
parameters"). The answer is parsed by :func:`csbench.api.prompts.parse_answer` into a *score*: +1.0
(``True``: match), -1.0 (``False``: no match) or NaN (unparseable). The matching protocol decides
``score > 0`` (:func:`csbench.evaluate.pair_matching.decide_pairs`, as a cross-encoder's head: NaN is
"no match"), and the outcome counts the NaN pairs as unparseable (``n_unparseable``,
``unparseable_share``), scoring each as a wrong decision in ``accuracy`` (GeCS asked again by hand until
every answer was 'True' or 'False'; here nothing is asked twice) and leaving it out of
``accuracy_parsed`` (:class:`csbench.evaluate.outcomes.MatchingOutcome`).

An LLM ranks nothing: scores of +1 / -1 order 100 candidates by ties, at 100 requests a query, so the
runner evaluates only ``matching`` with it (:attr:`LlmMatcher.matching_only`).

The pool's index keeps the codes and their languages (JSON, like a cross-encoder's), never an answer:
the answers live in the response cache, and the raw answers of a run are in :meth:`LlmMatcher.answers`.
No torch import.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from csbench.api.prompts import load_prompt, parse_answer, prompt_for_dataset, render

if TYPE_CHECKING:
    from csbench.api.client import ApiClient
    from csbench.models.integrity import VerifiedDir

MATCH, NO_MATCH, UNPARSEABLE = 1.0, -1.0, math.nan


@dataclass(frozen=True)
class PairAnswer:
    """One pair's answer: the query (index into the scored query list), the code (index into the indexed
    pool), the model's text and its parse (True / False / None: unparseable)."""

    query: int
    code: int
    answer: str
    parsed: bool | None


def answer_score(parsed: bool | None) -> float:
    """+1.0 for a match, -1.0 for no match, NaN for an unparseable answer."""
    return UNPARSEABLE if parsed is None else (MATCH if parsed else NO_MATCH)


class LlmMatcher:
    """A chat model seen by the evaluation runner: a pair scorer (like
    :class:`csbench.models.cross.CrossRetriever`) whose scores are its parsed answers.

    ``client_factory`` builds the :class:`~csbench.api.client.ApiClient` on first use (so a run that
    needs no request, every answer cached or no pair to decide, still reads the key only when asked).
    ``prompt``: a shipped prompt's name, overriding the dataset's (``dataset``: the run's dataset name,
    see :func:`csbench.api.prompts.prompt_for_dataset`). ``input_limit``: an object with
    ``apply(texts) -> (texts, n_truncated)`` (:class:`csbench.api.limits.InputLimit`) applied to each
    rendered prompt: every GeCS prompt ends with its input, so a cut prompt loses the end of the code;
    the cuts are counted in :attr:`n_truncated`. ``batch_size``: prompts handed to the client at once
    (it sends them ``concurrency`` at a time and caches each answer as it comes)."""

    INDEX_TYPE: ClassVar[str] = "llm"
    decides_matches = True  # matching decides score > 0 (its answer), not a threshold chosen on validation
    parses_answers = True  # its scores can be NaN (an unparseable answer): the matching outcome counts them
    matching_only = True  # no ranking protocol, not even gecs-100 (the runner's pair path notes why)
    times_queries = False  # no per-query latency sample (it has no whole-pool scores row anyway)
    DECISION_RULE: ClassVar[str] = (
        "the chat model's answer to GeCS's prompt ('True': match; 'False' or unparseable: no match)"
    )

    def __init__(
        self,
        client_factory: Callable[[], ApiClient],
        prompt: str | None = None,
        max_tokens: int | None = 10,
        temperature: float | None = None,
        batch_size: int = 256,
        dataset: str | None = None,
        input_limit: Any = None,
        progress: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size!r}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be None or >= 1, not {max_tokens!r}")
        self.client_factory = client_factory
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.batch_size = batch_size
        self.dataset = dataset
        self.input_limit = input_limit
        self.progress = progress
        self.prompt_name = prompt_for_dataset(dataset, prompt)  # checked now: an unknown name fails early
        if not load_prompt(self.prompt_name).endswith("{input}"):
            raise ValueError(f"prompt {self.prompt_name!r} must end with {{input}}: a cut prompt must lose only code")
        self._client: ApiClient | None = None
        self.codes: list[str] = []
        self.languages: list[str] = []
        self.n_truncated = 0
        self._answers: list[PairAnswer] = []

    # -- the runner's view ----------------------------------------------------------------------
    @property
    def client(self) -> ApiClient:
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    @property
    def model(self) -> None:
        """No local model: no tokenizer whose special tokens released pairs must avoid
        (:func:`csbench.evaluate.pair_matching.gecs_special_tokens` gives ())."""
        return None

    def index(self, codes: pd.DataFrame) -> None:
        """Keep the pool's codes and their languages (a frame without ``language``: the prompt names none
        it knows, so the dataset must use a prompt without ``{language}``)."""
        self.codes = codes["code"].tolist()
        languages = codes["language"].tolist() if "language" in codes.columns else [""] * len(self.codes)
        self.languages = [str(language) for language in languages]

    def prompts(self, queries: Sequence[str], query_index: np.ndarray, code_index: np.ndarray) -> list[str]:
        """The rendered prompt of each pair (``queries[query_index[j]]``, indexed code ``code_index[j]``),
        before any input limit."""
        return [
            render(self.prompt_name, self.languages[int(c)], queries[int(q)], self.codes[int(c)])
            for q, c in zip(query_index, code_index, strict=True)
        ]

    def score_pairs(self, queries: Sequence[str], query_index: np.ndarray, code_index: np.ndarray) -> np.ndarray:
        """+1.0 (match), -1.0 (no match) or NaN (unparseable answer) per pair; the raw answers are kept
        (:meth:`answers`)."""
        query_index = np.asarray(query_index, dtype=np.int64).ravel()
        code_index = np.asarray(code_index, dtype=np.int64).ravel()
        prompts = self.prompts(queries, query_index, code_index)
        if self.input_limit is not None and prompts:
            prompts, cut = self.input_limit.apply(prompts)
            self.n_truncated += int(cut)
        texts: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            batch = prompts[start : start + self.batch_size]
            answered = self.client.chat(batch, max_tokens=self.max_tokens, temperature=self.temperature)
            if len(answered) != len(batch):
                raise RuntimeError(f"the client answered {len(answered)} of {len(batch)} prompts")
            texts += answered
        parsed = [parse_answer(text) for text in texts]
        self._answers += [
            PairAnswer(int(q), int(c), text, p)
            for q, c, text, p in zip(query_index, code_index, texts, parsed, strict=True)
        ]
        return np.asarray([answer_score(p) for p in parsed], dtype=np.float64)

    # -- the run's record -----------------------------------------------------------------------
    def answers(self) -> list[PairAnswer]:
        """Every pair answered since the matcher was built (or :meth:`clear_answers`), in order."""
        return list(self._answers)

    def clear_answers(self) -> None:
        self._answers = []

    def answer_rows(self) -> list[dict[str, Any]]:
        """:meth:`answers` as JSON-ready rows ``{query, code, answer, parsed}``."""
        return [asdict(answer) for answer in self._answers]

    def record(self) -> dict[str, Any]:
        """What the run states of this matcher: the prompt (name and template), the generation
        parameters, the inputs cut by the limit, the parse counts and the client's usage (None when
        no client was needed)."""
        parsed = [answer.parsed for answer in self._answers]
        return {
            "prompt": self.prompt_name,
            "prompt_template": load_prompt(self.prompt_name),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "n_answers": len(parsed),
            "n_unparseable": sum(p is None for p in parsed),
            "n_truncated": self.n_truncated,
            "usage": None if getattr(self._client, "usage", None) is None else self._client.usage.as_dict(),
        }

    def api_usage(self) -> dict[str, Any]:
        """What answering the pairs sent in this process (the client's counts, and the prompts the
        input limit cut), as :meth:`csbench.models.api.ApiRetriever.api_usage` states an embedding
        model's; a matcher indexes nothing remotely."""
        usage = self._client.usage.as_dict() if self._client is not None else {}
        return {"queries": {**usage, "truncated": self.n_truncated}}

    # -- the pool's index -----------------------------------------------------------------------
    def index_state(self, directory: Path, name: str) -> dict[str, Any]:
        """Write the indexed codes (``<name>.codes.json``) and their languages
        (``<name>.languages.json``) to ``directory``; return the rest of the state."""
        codes, languages = f"{name}.codes.json", f"{name}.languages.json"
        (directory / codes).write_text(json.dumps(self.codes, ensure_ascii=False), encoding="utf-8")
        (directory / languages).write_text(json.dumps(self.languages, ensure_ascii=False), encoding="utf-8")
        return {
            "type": self.INDEX_TYPE,
            "codes": codes,
            "languages": languages,
            "prompt": self.prompt,
            "dataset": self.dataset,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "batch_size": self.batch_size,
        }

    @classmethod
    def from_index_state(
        cls,
        state: dict[str, Any],
        files: VerifiedDir,
        loader: Callable[[], ApiClient] | None,
        input_limit: Any = None,
    ) -> LlmMatcher:
        """The matcher :meth:`index_state` saved (codes and languages from the index's verified
        ``files``); ``loader`` builds its client on first use (from the config, never from the index); its
        ``input_limit`` attribute, where it has one, is the matcher's unless ``input_limit`` is given."""
        if loader is None:
            raise ValueError("an LLM matcher's index needs the factory of its API client")
        matcher = cls(
            loader,
            prompt=state.get("prompt"),
            max_tokens=state.get("max_tokens"),
            temperature=state.get("temperature"),
            batch_size=int(state["batch_size"]),
            dataset=state.get("dataset"),
            input_limit=getattr(loader, "input_limit", None) if input_limit is None else input_limit,
        )
        codes, languages = files.json(state["codes"]), files.json(state["languages"])
        for what, values in (("codes", codes), ("languages", languages)):
            if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
                raise ValueError(f"{state[what]}: expected a list of strings")
        if len(codes) != len(languages):
            raise ValueError(f"{state['codes']}: {len(codes)} codes but {len(languages)} languages")
        matcher.codes, matcher.languages = codes, languages
        return matcher
