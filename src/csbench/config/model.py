"""The typed experiment config (:class:`Config`) and the keys of its runs, trainings and groups.

A validated config (``csbench.config.load_config``) answers every question a phase asks: its grid,
the runs and trainings it implies, each component's parameters (registered defaults overlaid with
the config's own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from csbench.attacks import parse_spec
from csbench.datasets import DATASETS, LOCAL_SOURCE_KIND, DatasetSpec
from csbench.datasets.base import BEIR_KIND
from csbench.evaluate.protocols import PROTOCOLS, MatchRule
from csbench.models import (
    API_FAMILIES,
    MODELS,
    PYTHON_FAMILY,
    SUMMARIZATION_FAMILY,
    ModelSpec,
    declared_params,
    endpoint_custom_defaults,
    hf_custom_defaults,
    python_custom_defaults,
    seq2seq_custom_defaults,
)


class ConfigError(ValueError):
    """An invalid experiment config; the message names the file and key."""


@dataclass(frozen=True)
class RunKey:
    """Coordinates of one run: the path below results/runs/."""

    dataset: str
    attack: str
    model: str
    loss: str = "none"
    seed: int = 0
    inference: str = "zero_shot"
    trained_on: str | None = None  # the dataset the model was trained on, when named (grid.trained.evaluate_on)

    def __post_init__(self) -> None:
        if self.trained_on is not None and self.inference == "zero_shot":
            raise ValueError(f"a zero-shot run is trained on nothing, not on {self.trained_on!r}")

    @property
    def label(self) -> str:
        """The run's inference as its path, the ``--inference`` option and the results database name it:
        ``confused``, or ``confused@advtest`` for a model trained on ``advtest`` (GeCS: one model fine-tuned
        on AdvTest, evaluated on every test set), whatever the run's own dataset."""
        return self.inference if self.trained_on is None else f"{self.inference}{TRAINED_ON_SEP}{self.trained_on}"

    @property
    def path(self) -> str:
        return f"{self.dataset}/{self.attack}/{self.model}/{self.loss}/{self.seed}/{self.label}"

    @property
    def training(self) -> TrainKey | None:
        """The training this run's model comes from: on the run's own (attacked) data when
        ``confused``, on the ``no_comment`` data when ``not_confused`` (one model serves every attack),
        none when ``zero_shot``; on the data of ``trained_on`` instead of the run's own dataset when set
        (the same attack: a model trained once serves every dataset it is evaluated on)."""
        if self.inference == "zero_shot":
            return None
        attack = self.attack if self.inference == "confused" else NOT_CONFUSED_TRAIN_ATTACK
        return TrainKey(self.trained_on or self.dataset, attack, self.model, self.loss, self.seed)

    @classmethod
    def parse(cls, dataset: str, attack: str, model: str, loss: str, seed: int, label: str) -> RunKey:
        """The run of a path's (or the command line's) coordinates; ``label`` as :attr:`label` writes it."""
        inference, sep, trained_on = label.partition(TRAINED_ON_SEP)
        if inference not in INFERENCE_TYPES or (sep and not trained_on):
            raise ValueError(
                f"inference {label!r}: expected one of {', '.join(INFERENCE_TYPES)}, optionally followed by "
                f"{TRAINED_ON_SEP}<dataset trained on> (e.g. confused{TRAINED_ON_SEP}advtest)"
            )
        return cls(dataset, attack, model, loss, int(seed), inference, trained_on or None)

    def as_dict(self) -> dict[str, Any]:
        """The run's coordinates as records store them: ``inference`` is the :attr:`label`, and
        ``trained_on`` the dataset of its training (None for a zero-shot run)."""
        training = self.training
        return {
            "dataset": self.dataset,
            "attack": self.attack,
            "model": self.model,
            "loss": self.loss,
            "seed": self.seed,
            "inference": self.label,
            "trained_on": None if training is None else training.dataset,
        }


INFERENCE_TYPES = ("zero_shot", "confused", "not_confused")
TRAINED_ON_SEP = "@"  # confused@advtest: the inference of a run whose model was trained on another dataset
NOT_CONFUSED_TRAIN_ATTACK = "no_comment"  # the thesis trains the not-confused model on comment-free code
TRAINED_DEFAULTS: dict[str, Any] = {"losses": ["ce"], "seeds": [0], "inference": ["confused"]}
SUMMARY_LOSS = "xent"  # the loss coordinate of a trained summarization run: token-level cross-entropy
SUMMARY_PROTOCOL = "summarization"  # the protocol name of a summarization run's scores


@dataclass(frozen=True)
class TrainKey:
    """Coordinates of one training: the path below checkpoints/."""

    dataset: str
    attack: str
    model: str
    loss: str
    seed: int

    @property
    def path(self) -> str:
        return f"{self.dataset}/{self.attack}/{self.model}/{self.loss}/{self.seed}"


@dataclass(frozen=True)
class StabilityKey:
    """A trained configuration whose runs differ only in seed: the path below results/stability/."""

    dataset: str
    attack: str
    model: str
    loss: str
    inference: str

    @property
    def path(self) -> str:
        return f"{self.dataset}/{self.attack}/{self.model}/{self.loss}/{self.inference}"


STABILITY_DEFAULTS: dict[str, Any] = {"k": 20}  # COBE V-E compares the top-20 lists
DATASET_TABLE_TOKENIZER = "roberta-base"  # GeCS Table 1: "the pretrained RoBERTa tokenizer"


def _listed(section: str, key: str) -> property:
    """A property of :class:`Config`: the list of names the config sets at ``section.key``, copied."""

    def names(self: Config) -> list[str]:
        return list(self.raw[section][key])

    return property(names, doc=f"``{section}.{key}``")


@dataclass(frozen=True)
class Config:
    raw: dict[str, Any]
    sources: tuple[str, ...]
    # endpoint models of grid.models left out because their key is not set (api.missing_key: skip):
    # (model, the variable's name); csbench.config.load.drop_keyless
    keyless: tuple[tuple[str, str], ...] = ()

    @property
    def study(self) -> str:
        return self.raw["study"]

    # the lists of names the config sets (copies)
    datasets = _listed("grid", "datasets")
    attacks = _listed("grid", "attacks")
    models = _listed("grid", "models")
    protocols = _listed("evaluation", "protocols")

    @property
    def ranking_protocols(self) -> list[str]:
        """The protocols that rank (a TREC run file each); the others decide pairs (matching)."""
        return [name for name in self.protocols if PROTOCOLS.get(name).kind == "ranking"]

    @property
    def graded_protocols(self) -> list[str]:
        """The ranking protocols scored against relevance judgements (``qrels``)."""
        return [name for name in self.ranking_protocols if PROTOCOLS.get(name).graded]

    @property
    def matching_protocols(self) -> list[str]:
        return [name for name in self.protocols if PROTOCOLS.get(name).kind == "matching"]

    def dataset_options(self, name: str) -> dict[str, Any]:
        """Registered defaults overlaid with the options given in the config (a BEIR folder's: its
        declared defaults overlaid with the entry's keys, ``kind`` left out)."""
        given = self.raw.get("datasets", {}).get(name, {})
        if name not in DATASETS and given.get("kind") == BEIR_KIND:
            return {**self.dataset_spec(name).defaults, **{k: v for k, v in given.items() if k != "kind"}}
        defaults = DATASETS.get(name).defaults if name in DATASETS else {}
        return {**defaults, **given}

    def dataset_kind(self, name: str) -> str:
        return DATASETS.get(name).kind if name in DATASETS else self.raw.get("datasets", {}).get(name, {})["kind"]

    def dataset_spec(self, name: str) -> DatasetSpec:
        """What dataset ``name`` is: a registered release or corpus, or a config-defined BEIR folder /
        hub dataset (``datasets.<name>.kind: beir``, :func:`csbench.datasets.beir.beir_spec`)."""
        if name in DATASETS:
            return DATASETS.get(name)
        given = self.raw.get("datasets", {}).get(name, {})
        if given.get("kind") == BEIR_KIND:
            from csbench.datasets.beir import beir_spec

            return beir_spec(name, {k: v for k, v in given.items() if k != "kind"})
        raise KeyError(f"dataset {name!r}: not registered and not a config-defined BEIR dataset")

    def has_qrels(self, name: str) -> bool:
        """Whether dataset ``name`` has graded relevance judgements (a BEIR dataset) that prepare
        writes for the ``qrels`` protocol (others: each query's own code is relevant)."""
        return self.dataset_kind(name) != LOCAL_SOURCE_KIND and self.dataset_spec(name).qrels is not None

    def has_released_pairs(self, name: str) -> bool:
        """Whether dataset ``name``'s release ships labelled matching pairs (GeCS ``clf`` files) that
        prepare writes for the ``matching`` protocol."""
        return self.dataset_kind(name) != LOCAL_SOURCE_KIND and self.dataset_spec(name).released_pairs is not None

    def missing_validation(self, name: str) -> str | None:
        """Why dataset ``name`` has no validation split (a matching protocol chooses a bi-encoder's
        threshold there), or None when it has one: a release without one, a release whose
        ``splits`` option leaves it out, a local corpus with ``extraction.split.valid: 0``."""
        if self.dataset_kind(name) == LOCAL_SOURCE_KIND:
            if self.raw["extraction"]["split"]["valid"] == 0:
                return "extraction.split.valid is 0"
            return None
        spec = self.dataset_spec(name)
        if "valid" not in spec.splits:
            return f"the release has no validation split, only {', '.join(spec.splits)}"
        chosen = self.dataset_options(name).get("splits")
        if chosen is not None and "valid" not in chosen:
            return f"datasets.{name}.splits leaves it out"
        return None

    @property
    def matching_without_validation(self) -> str:
        """``evaluation.matching_without_validation``: ``error`` (default) or ``skip``."""
        return str(self.section("evaluation").get("matching_without_validation", "error"))

    @property
    def match_rule(self) -> MatchRule:
        """``evaluation.match_threshold`` as a :class:`MatchRule` (default: chosen on the dataset's
        validation split)."""
        return MatchRule.parse(self.section("evaluation").get("match_threshold"))

    def unmatched_runs(self) -> list[tuple[str, str, list[str]]]:
        """(dataset, why it has no validation split, models) of every dataset whose ``matching``
        runs cannot be evaluated: a model that needs a match threshold (all but cross-encoders)
        finds no validation split to choose it on, so its matching would stay empty. Only where the
        threshold is chosen on the dataset's own validation split (``evaluation.match_threshold:
        validation``, the default)."""
        if not self.matching_protocols or self.match_rule.kind != "validation":
            return []
        found: dict[str, list[str]] = {}
        for run in self.search_runs():
            if self.model_spec(run.model).family in ("cross", "llm") or self.missing_validation(run.dataset) is None:
                continue
            models = found.setdefault(run.dataset, [])
            if run.model not in models:
                models.append(run.model)
        return [(name, str(self.missing_validation(name)), models) for name, models in found.items()]

    def attack_params(self, spec: str) -> dict[str, dict[str, Any]]:
        """The parameters of each attack of a spec (``ordered_id+translation``, ``k_shift_snippet-64``):
        registered defaults < ``attack_params`` < the spec's variant suffix."""
        return {c.attack.name: c.params for c in parse_spec(spec, self.raw.get("attack_params") or {})}

    @property
    def api(self) -> dict[str, Any]:
        """``api`` with its defaults: ``missing_key`` (error / skip) and ``cache_dir`` (the response cache;
        :func:`csbench.api.cache.default_cache_dir` when absent, None when set to null)."""
        given = dict(self.raw.get("api") or {})
        return {"missing_key": given.get("missing_key", "error"), "cache_dir": given.get("cache_dir", "default")}

    @property
    def encoding(self) -> dict[str, int]:
        """``encoding`` with its defaults: ``processes`` (1) and ``shards`` (1)."""
        given = dict(self.raw.get("encoding") or {})
        return {"processes": int(given.get("processes", 1)), "shards": int(given.get("shards", 1))}

    @property
    def embedding_cache(self) -> dict[str, Any]:
        """``embedding_cache`` with its defaults: ``dir`` ("default": $CSBENCH_EMBEDDING_CACHE, else
        cache/embeddings under the project; None: off) and ``max_gb`` (None: no bound)."""
        given = dict(self.raw.get("embedding_cache") or {})
        return {"dir": given.get("dir", "default"), "max_gb": given.get("max_gb")}

    def api_key_missing(self, name: str) -> str | None:
        """The name of the variable that should hold model ``name``'s key when it is not set, else None
        (a model of another family, or an endpoint that needs no key)."""
        import os

        if self.model_spec(name).family not in API_FAMILIES:
            return None
        variable = self.model_params(name).get("api_key_env")
        return variable if variable and not os.environ.get(variable) else None

    def model_params(self, name: str) -> dict[str, Any]:
        """Registered defaults overlaid with ``models.<name>`` (its ``training`` block excluded)."""
        given = {k: v for k, v in (self.raw["models"].get(name) or {}).items() if k != "training"}
        return {**self.model_spec(name).defaults, **given}

    def model_spec(self, name: str) -> ModelSpec:
        """The registered model, or a Hugging Face model the config defines (``family: hf``)."""
        if name in MODELS:
            return MODELS.get(name)
        given = (self.raw.get("models") or {}).get(name) or {}
        if given.get("family") == SUMMARIZATION_FAMILY:
            return ModelSpec(
                name,
                f"Hugging Face seq2seq summarizer {given.get('model_id')!r} (defined in the config)",
                family=SUMMARIZATION_FAMILY,
                zero_shot=True,
                trainable=True,
                defaults_fn=seq2seq_custom_defaults,
                params_fn=declared_params(SUMMARIZATION_FAMILY),
            )
        if given.get("family") in API_FAMILIES:
            family = given["family"]
            what = "embedding" if family == "api" else "chat"
            return ModelSpec(
                name,
                f"{what} endpoint {given.get('model')!r} at {given.get('base_url', 'OpenAI')} (defined in the config)",
                family=family,
                zero_shot=True,
                trainable=False,
                defaults_fn=endpoint_custom_defaults(family),
                params_fn=declared_params(family),
            )
        if given.get("family") == PYTHON_FAMILY:
            from csbench.models.python_spec import described

            return ModelSpec(
                name,
                f"user model, {described(given)} (defined in the config)",
                family=PYTHON_FAMILY,
                zero_shot=True,
                trainable=False,
                defaults_fn=python_custom_defaults,
                params_fn=declared_params(PYTHON_FAMILY),
            )
        if given.get("family") == "hf":
            return ModelSpec(
                name,
                f"Hugging Face bi-encoder {given.get('model_id')!r} (defined in the config)",
                family="hf",
                zero_shot=True,
                trainable=True,
                defaults_fn=hf_custom_defaults,
                params_fn=declared_params("hf"),
            )
        return MODELS.get(name)  # raises, listing the registered names

    @property
    def trained(self) -> dict[str, Any]:
        """``grid.trained`` with its defaults: models trained or fine-tuned, the datasets and attacks
        they are trained and evaluated on (default: every dataset and attack of the grid), losses,
        seeds, inference, and ``seeds_by_dataset`` (a dataset's own seeds instead of ``seeds``).

        ``evaluate_on`` (None unless given): the datasets every model trained on a dataset of ``datasets``
        is evaluated on, each trained once (GeCS: fine-tuned on AdvTest, tested on eight test sets); its
        runs name their training dataset (:attr:`RunKey.trained_on`, inference ``confused@advtest``).
        Without it, a model trained on a dataset is evaluated on that dataset only.

        ``seeds`` is every seed some dataset trains with: ``grid.trained.seeds`` followed by the
        others of ``seeds_by_dataset`` (what ``csbench train --seed`` accepts); one dataset's seeds
        are :meth:`seeds_for`."""
        given = self.raw["grid"].get("trained") or {}
        trained = {
            "models": list(given.get("models", [])),
            "datasets": list(given.get("datasets", self.datasets)),
            "attacks": list(given.get("attacks", self.attacks)),
            "evaluate_on": None if given.get("evaluate_on") is None else list(given["evaluate_on"]),
            **{k: list(given.get(k, v)) for k, v in TRAINED_DEFAULTS.items()},
            "seeds_by_dataset": {d: list(s) for d, s in (given.get("seeds_by_dataset") or {}).items()},
        }
        for seeds in trained["seeds_by_dataset"].values():
            trained["seeds"] += [s for s in seeds if s not in trained["seeds"]]
        return trained

    def seeds_for(self, dataset: str) -> list[int]:
        """The seeds trained models use on ``dataset``: ``grid.trained.seeds_by_dataset.<dataset>``
        where given (COBE V-E: ten seeds on Ruby only), else ``grid.trained.seeds``."""
        given = self.raw["grid"].get("trained") or {}
        by_dataset = given.get("seeds_by_dataset") or {}
        seeds = by_dataset[dataset] if dataset in by_dataset else given.get("seeds", TRAINED_DEFAULTS["seeds"])
        return [int(s) for s in seeds]

    def training_params(self, model: str) -> dict[str, Any]:
        """The training regime of ``model``: ``training`` overlaid with ``models.<model>.training``; a
        summarizer's is its registered regime (:data:`SEQ2SEQ_TRAINING` and its own) overlaid with
        ``models.<model>.training`` only."""
        own = (self.raw["models"].get(model) or {}).get("training") or {}
        if self.summarizes(model):
            from csbench.summarization.models.defaults import SEQ2SEQ_MODELS, SEQ2SEQ_TRAINING

            registered = SEQ2SEQ_MODELS.get(model, {}).get("training", {})
            return {**SEQ2SEQ_TRAINING, **registered, **own}
        regime = {**(self.raw.get("training") or {}), **own}
        if (
            "schedule" in own
            and "schedule_params" not in own
            and own["schedule"] != (self.raw.get("training") or {}).get("schedule")
        ):
            regime.pop("schedule_params", None)  # another schedule's parameters do not carry over
        return regime

    def loss_params(self, loss: str) -> dict[str, Any]:
        return dict((self.raw.get("loss_params") or {}).get(loss) or {})

    def trainings(self) -> list[TrainKey]:
        """Every training the runs need, search and summarization (a not-confused model is trained
        once, on no_comment)."""
        keys = [run.training for run in self.runs() if run.training is not None]
        return list(dict.fromkeys(keys))

    @property
    def robustness(self) -> dict[str, Any]:
        """The ``robustness`` section ({} when the study evaluates no perturbed queries)."""
        return dict(self.raw.get("robustness") or {})

    def robustness_runs(self) -> list[RunKey]:
        """Runs whose model is also evaluated on every perturbed query set: the grid's runs of the
        datasets and attacks ``robustness`` names (names outside the grid are skipped, so an overlay
        may change the grid without touching ``robustness``; see ``robustness_outside_grid``)."""
        rob = self.robustness
        datasets = [d for d in rob.get("datasets", []) if d in self.datasets]
        attacks = [a for a in rob.get("attacks", []) if a in self.attacks]
        return [run for run in self.search_runs() if run.dataset in datasets and run.attack in attacks]

    def robustness_outside_grid(self) -> list[str]:
        """``robustness`` entries that are not in the grid (skipped by snakemake; dvc.yaml's matrices
        read the lists as they are, so `dvc repro` needs them in the grid)."""
        rob = self.robustness
        return [
            f"robustness.{key}: {name!r} is not in grid.{key}"
            for key, grid in (("datasets", self.datasets), ("attacks", self.attacks))
            for name in rob.get(key, [])
            if name not in grid
        ]

    def perturbation_points(self) -> list[tuple[str, float]]:
        """(perturbation, ratio) of every perturbed query set: the ratio-taking perturbations at each
        ratio of ``robustness.ratios`` (0.0, the clean queries, is the clean run), the fixed ones
        (``question``) once, at ratio 1."""
        from csbench.perturbations import QUESTION_RATIO

        rob = self.robustness
        points = [(p, float(r)) for p in rob.get("perturbations", []) for r in rob.get("ratios", [])]
        return points + [(p, QUESTION_RATIO) for p in rob.get("fixed", [])]

    def runs(self) -> list[RunKey]:
        """Every run the config asks for: the search runs (:meth:`search_runs`), then the
        summarization runs (:meth:`summary_runs`)."""
        return self.search_runs() + self.summary_runs()

    def summarizes(self, model: str) -> bool:
        """Whether ``model`` is a summarizer (family ``seq2seq``): its runs generate summaries."""
        return self.model_spec(model).family == SUMMARIZATION_FAMILY

    @property
    def summarization(self) -> dict[str, Any]:
        """``grid.summarization`` with its defaults: the summarizers trained per dataset x attack x seed
        (``models``, loss :data:`SUMMARY_LOSS`) and evaluated as released (``zero_shot``), on
        ``datasets`` / ``attacks`` of the grid (default: all), with ``seeds`` and ``inference``, and the
        optional metrics scored beside BLEU (``extra_metrics``: rouge_l, meteor)."""
        given = self.raw["grid"].get("summarization") or {}
        return {
            "models": list(given.get("models", [])),
            "zero_shot": list(given.get("zero_shot", [])),
            "datasets": list(given.get("datasets", self.datasets)),
            "attacks": list(given.get("attacks", self.attacks)),
            "seeds": [int(s) for s in given.get("seeds", TRAINED_DEFAULTS["seeds"])],
            "inference": list(given.get("inference", TRAINED_DEFAULTS["inference"])),
            "extra_metrics": list(given.get("extra_metrics", [])),
        }

    def summary_runs(self) -> list[RunKey]:
        """Every summarization run, in a stable order: the zero-shot ones, then each trained
        summarizer's (seed x inference) per dataset x attack of ``grid.summarization`` that is in the
        grid (names outside it are skipped, so an overlay may change the grid without touching
        ``grid.summarization``; see :meth:`summarization_outside_grid`)."""
        s = self.summarization
        datasets = [d for d in s["datasets"] if d in self.datasets]
        attacks = [a for a in s["attacks"] if a in self.attacks]
        runs = [RunKey(d, a, m) for d in datasets for a in attacks for m in s["zero_shot"]]
        for d in datasets:
            for a in attacks:
                for m in s["models"]:
                    runs += [RunKey(d, a, m, SUMMARY_LOSS, seed, i) for seed in s["seeds"] for i in s["inference"]]
        return runs

    def summarization_outside_grid(self) -> list[str]:
        """``grid.summarization`` entries that are not in the grid (skipped by snakemake; dvc.yaml's
        matrices read the lists as they are, so `dvc repro` needs them in the grid)."""
        s = self.summarization
        if not s["models"] and not s["zero_shot"]:
            return []  # no summarizer: nothing is skipped
        return [
            f"grid.summarization.{key}: {name!r} is not in grid.{key}"
            for key, grid in (("datasets", self.datasets), ("attacks", self.attacks))
            for name in s[key]
            if name not in grid
        ]

    def search_runs(self) -> list[RunKey]:
        """Every search run the config asks for, in a stable order: the zero-shot runs of ``grid.models``,
        then the runs of each trained model (loss x seed x inference), on its training dataset or, with
        ``grid.trained.evaluate_on``, on each dataset listed there (:meth:`_trained_targets`)."""
        runs = [RunKey(d, a, m) for d in self.datasets for a in self.attacks for m in self.models]
        trained = self.trained
        for d, target, trained_on in self._trained_targets():
            seeds = self.seeds_for(d)
            for a in trained["attacks"]:
                for m in trained["models"]:
                    for loss in trained["losses"]:
                        for seed in seeds:
                            runs += [RunKey(target, a, m, loss, seed, i, trained_on) for i in trained["inference"]]
        return runs

    def _trained_targets(self) -> list[tuple[str, str, str | None]]:
        """(training dataset, evaluation dataset, ``trained_on`` of its runs) of the trained runs: a
        model is evaluated on its own training dataset (trained_on None), or, with
        ``grid.trained.evaluate_on``, on each dataset listed there (trained_on: the training dataset)."""
        trained = self.trained
        if not trained["models"]:
            return []
        if trained["evaluate_on"] is None:
            return [(d, d, None) for d in trained["datasets"]]
        return [(d, e, d) for d in trained["datasets"] for e in trained["evaluate_on"]]

    @property
    def dataset_table(self) -> dict[str, str] | None:
        """``dataset_table`` (GeCS Table 1) with its defaults, or None when the study has none."""
        given = self.raw.get("dataset_table")
        if given is None:
            return None
        return {"reference_split": "train", "tokenizer": DATASET_TABLE_TOKENIZER, **given}

    @property
    def stability(self) -> dict[str, Any]:
        """``stability`` with its defaults: the protocol whose rankings are compared (default: the
        robustness protocol if it is evaluated, else the first ranking protocol) and ``k``."""
        given = dict(self.raw.get("stability") or {})
        rob = self.robustness.get("protocol")
        default = rob if rob in self.ranking_protocols else (self.ranking_protocols or [None])[0]
        return {**STABILITY_DEFAULTS, "protocol": default, **given}

    def stability_groups(self) -> list[tuple[StabilityKey, list[RunKey]]]:
        """Seed stability (COBE V-E): every trained configuration of the grid with its runs, one per
        seed; none on a dataset trained with fewer than two seeds (:meth:`seeds_for`)."""
        trained = self.trained
        groups = []
        for d, target, trained_on in self._trained_targets():
            seeds = self.seeds_for(d)
            if len(seeds) < 2:
                continue
            for a in trained["attacks"]:
                for m in trained["models"]:
                    for loss in trained["losses"]:
                        for inference in trained["inference"]:
                            runs = [RunKey(target, a, m, loss, seed, inference, trained_on) for seed in seeds]
                            groups.append((StabilityKey(target, a, m, loss, runs[0].label), runs))
        return groups

    def section(self, *keys: str) -> Any:
        """A sub-tree of the config, e.g. ``section("models", "bm25")``."""
        node: Any = self.raw
        for key in keys:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        return node
