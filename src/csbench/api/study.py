"""What a study would send to its endpoint models, before anything is sent: the lines the dry run
prints (:func:`endpoint_lines`: which models, where, whether their key is set) and the estimate
``csbench api-estimate`` prints (:func:`study_estimates`: requests, tokens and cost per model, from
the attacked splits, with what the cache already holds).

The estimate counts exactly the texts the runs send: for an embedding model, every distinct code of
the pools its index encodes and every distinct query (the clean ones, and each perturbed query set
already made); for a chat model, the prompt of every pair of its matching protocols (the release's
pairs, or those drawn). Datasets not attacked yet are named, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from csbench import paths
from csbench.config import Config, RunKey
from csbench.models import API_FAMILIES


def endpoint_models(config: Config) -> list[str]:
    """The endpoint models of the study's grid, and those left out for want of a key (they are
    estimated too: what they would send once the key is set)."""
    listed = [name for name in config.models if config.model_spec(name).family in API_FAMILIES]
    return listed + [name for name, _ in config.keyless if name not in listed]


def endpoint_lines(config: Config, command: str = "csbench api-estimate") -> list[str]:
    """One line per endpoint model of the study: what it calls, for how many runs, whether its key
    is set; and how to see the requests, tokens and cost before running."""
    lines = []
    for name in endpoint_models(config):
        params = config.model_params(name)
        family = config.model_spec(name).family
        path = "embeddings" if family == "api" else "chat/completions"
        variable = params.get("api_key_env")
        state = "set" if config.api_key_missing(name) is None else "NOT set"
        key = f"key ${variable} {state}" if variable else "no key"
        skipped = " (left out: no key)" if name in dict(config.keyless) else ""
        n_runs = len(config.datasets) * len(config.attacks)
        lines.append(
            f"endpoint model {name}{skipped}: POST {str(params['base_url']).rstrip('/')}/{path} "
            f"(model {params['model']}, {key}) for {n_runs} run(s)"
        )
    if lines:
        lines.append(f"what they would send (requests, tokens, cost; nothing is sent): {command}")
    return lines


@dataclass
class ModelEstimate:
    model: str
    estimate: Any = None  # csbench.api.estimate.Estimate, None when nothing could be counted
    not_ready: list[str] = field(default_factory=list)  # datasets / attacks not attacked yet
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        lines = [f"{self.model}: " + (self.estimate.describe() if self.estimate is not None else "nothing to count")]
        if self.not_ready:
            missing = ", ".join(self.not_ready)
            lines.append(f"  not counted (not attacked yet; `snakemake --until attack` sends nothing): {missing}")
        lines += [f"  {note}" for note in self.notes]
        return lines


def study_estimates(config: Config) -> list[ModelEstimate]:
    """The estimate of every endpoint model of the study (:func:`endpoint_models`)."""
    return [_estimate(config, name) for name in endpoint_models(config)]


def _frame(dataset: str, attack: str, name: str) -> pd.DataFrame | None:
    """An attacked split's columns that indexing and searching read (``runner.POOL_COLUMNS``; those it has)."""
    from csbench.evaluate.runner import POOL_COLUMNS
    from csbench.io import present_columns

    file = paths.attacked_dir(dataset, attack) / name
    return pd.read_parquet(file, columns=present_columns(file, POOL_COLUMNS)) if file.is_file() else None


def _pools(config: Config, dataset: str, attack: str) -> dict[str, pd.DataFrame] | None:
    """The attacked splits a run reads (test, the codebase, valid), or None when not attacked yet."""
    from csbench.evaluate.runner import matching_protocols

    test = _frame(dataset, attack, "test.parquet")
    if test is None:
        return None
    found = {"test": test}
    codebase = _frame(dataset, attack, f"{paths.POOL_SPLIT}.parquet")
    if codebase is not None:
        found["codebase"] = codebase
    if matching_protocols(config.protocols):
        valid = _frame(dataset, attack, "valid.parquet")
        if valid is not None:
            found["valid"] = valid
    return found


def _estimate(config: Config, name: str) -> ModelEstimate:
    from csbench.api.limits import LimitError
    from csbench.models.api import endpoint_settings, input_limit, response_cache

    params = config.model_params(name)
    family = config.model_spec(name).family
    settings, limit = endpoint_settings(params), input_limit(params)
    cache_dir = config.api["cache_dir"]
    cache = response_cache(cache_dir)
    result = ModelEstimate(name)
    texts: list[str] = []
    for dataset in config.datasets:
        for attack in config.attacks:
            pools = _pools(config, dataset, attack)
            if pools is None:
                result.not_ready.append(f"{dataset}/{attack}")
                continue
            run = RunKey(dataset, attack, name)
            texts += _chat_prompts(config, run, pools, params) if family == "llm" else _embed_texts(config, run, pools)
    if texts or not result.not_ready:
        try:
            result.estimate = _count(family, texts, limit, cache, settings, params)
        except LimitError as err:  # e.g. tiktoken's encoding file, offline: estimate without the tokenizer
            result.notes.append(f"its tokenizer is not available here ({err}): tokens ~chars/4, truncation not counted")
            result.estimate = _count(family, texts, None, cache, settings, params)
    return result


def _count(family: str, texts: list[str], limit: Any, cache: Any, settings: Any, params: dict[str, Any]) -> Any:
    from csbench.api.estimate import estimate_chat, estimate_embed

    if family == "api":
        return estimate_embed(texts, limit, int(params["batch_size"]), cache, settings, params.get("price_per_mtok"))
    return estimate_chat(
        texts,
        limit,
        params.get("max_tokens"),
        cache,
        settings,
        params.get("price_in_per_mtok"),
        params.get("price_out_per_mtok"),
        params.get("temperature"),
    )


def _embed_texts(config: Config, run: RunKey, pools: dict[str, pd.DataFrame]) -> list[str]:
    """The codes of the pools the run's index encodes, its clean queries (test, and valid where a
    matching threshold is chosen there) and the queries of every perturbed query set already made."""
    from csbench.evaluate.runner import pool_kinds

    kinds = pool_kinds(pools["test"], config.protocols, pools.get("codebase"), pools.get("valid"))
    texts = [code for kind in kinds if kind in pools for code in pools[kind]["code"].tolist()]
    texts += pools["test"]["query"].tolist()
    if "valid" in kinds and "valid" in pools:
        texts += pools["valid"]["query"].tolist()
    if run in config.robustness_runs():
        for perturbation, ratio in config.perturbation_points():
            file = paths.perturbed_file(run.dataset, perturbation, ratio)
            if file.is_file():
                texts += pd.read_parquet(file)["query"].astype(str).tolist()
    return texts


def _chat_prompts(config: Config, run: RunKey, pools: dict[str, pd.DataFrame], params: dict[str, Any]) -> list[str]:
    """The prompt of every pair the run's matching protocols decide (the release's pairs where the
    prepared folder has them, else the drawn ones), as the matcher renders them."""
    from csbench.api.prompts import prompt_for_dataset, render
    from csbench.datasets.released_pairs import RELEASED_PAIRS_FILE
    from csbench.evaluate.protocols import PROTOCOLS
    from csbench.evaluate.runner import MatchingSetup, matching_protocols

    test = pools["test"]
    released_file = paths.prepared_dir(run.dataset) / RELEASED_PAIRS_FILE
    has_released = config.has_released_pairs(run.dataset) and released_file.is_file()
    released = pd.read_parquet(released_file) if has_released else None
    setup = MatchingSetup(released, str(config.section("evaluation").get("match_pairs", "auto")))
    prompt = prompt_for_dataset(run.dataset, params.get("prompt"))
    ids, queries = test["id"].tolist(), test["query"].tolist()
    codes, languages = test["code"].tolist(), test["language"].astype(str).tolist()
    prompts = []
    for name in matching_protocols(config.protocols):
        pairs = setup.pairs_of(PROTOCOLS.get(name), ids)
        prompts += [
            render(prompt, languages[int(c)], queries[int(q)], codes[int(c)])
            for q, c in zip(pairs.queries, pairs.codes, strict=True)
        ]
    return prompts
