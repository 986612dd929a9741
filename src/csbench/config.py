"""The experiment config: load (with snakemake-style overlays), validate, and type it.

``params.yaml`` is validated against ``workflow/schemas/params.schema.yaml`` and against the
package registries before any job runs; every error names the file and the key.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from csbench import paths
from csbench.attacks import parse_spec
from csbench.datasets import DATASETS, LOCAL_SOURCE_KIND
from csbench.evaluate.protocols import PROTOCOLS, MatchRule
from csbench.models import MODELS, ModelSpec, declared_params, hf_custom_defaults
from csbench.params import ParamProblem, check_params
from csbench.registry import UnknownNameError
from csbench.train.loss_params import LOSS_DEFAULTS, LOSS_PARAMS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = PROJECT_ROOT / "workflow" / "schemas" / "params.schema.yaml"


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


@dataclass(frozen=True)
class Config:
    raw: dict[str, Any]
    sources: tuple[str, ...]

    @property
    def study(self) -> str:
        return self.raw["study"]

    @property
    def datasets(self) -> list[str]:
        return list(self.raw["grid"]["datasets"])

    @property
    def attacks(self) -> list[str]:
        return list(self.raw["grid"]["attacks"])

    @property
    def models(self) -> list[str]:
        return list(self.raw["grid"]["models"])

    @property
    def protocols(self) -> list[str]:
        return list(self.raw["evaluation"]["protocols"])

    @property
    def ranking_protocols(self) -> list[str]:
        """The protocols that rank (a TREC run file each); the others decide pairs (matching)."""
        return [name for name in self.protocols if PROTOCOLS.get(name).kind == "ranking"]

    @property
    def matching_protocols(self) -> list[str]:
        return [name for name in self.protocols if PROTOCOLS.get(name).kind == "matching"]

    def dataset_options(self, name: str) -> dict[str, Any]:
        """Registered defaults overlaid with the options given in the config."""
        given = self.raw.get("datasets", {}).get(name, {})
        defaults = DATASETS.get(name).defaults if name in DATASETS else {}
        return {**defaults, **given}

    def dataset_kind(self, name: str) -> str:
        return DATASETS.get(name).kind if name in DATASETS else self.dataset_options(name)["kind"]

    def has_released_pairs(self, name: str) -> bool:
        """Whether dataset ``name``'s release ships labelled matching pairs (GeCS ``clf`` files) that
        prepare writes for the ``matching`` protocol."""
        return self.dataset_kind(name) != LOCAL_SOURCE_KIND and DATASETS.get(name).released_pairs is not None

    def missing_validation(self, name: str) -> str | None:
        """Why dataset ``name`` has no validation split (a matching protocol chooses a bi-encoder's
        threshold there), or None when it has one: a release without one, a release whose
        ``splits`` option leaves it out, a local corpus with ``extraction.split.valid: 0``."""
        if self.dataset_kind(name) == LOCAL_SOURCE_KIND:
            if self.raw["extraction"]["split"]["valid"] == 0:
                return "extraction.split.valid is 0"
            return None
        spec = DATASETS.get(name)
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
        for run in self.runs():
            if self.model_spec(run.model).family == "cross" or self.missing_validation(run.dataset) is None:
                continue
            models = found.setdefault(run.dataset, [])
            if run.model not in models:
                models.append(run.model)
        return [(name, str(self.missing_validation(name)), models) for name, models in found.items()]

    def attack_params(self, spec: str) -> dict[str, dict[str, Any]]:
        """The parameters of each attack of a spec (``ordered_id+translation``, ``k_shift_snippet-64``):
        registered defaults < ``attack_params`` < the spec's variant suffix."""
        return {c.attack.name: c.params for c in parse_spec(spec, self.raw.get("attack_params") or {})}

    def model_params(self, name: str) -> dict[str, Any]:
        """Registered defaults overlaid with ``models.<name>`` (its ``training`` block excluded)."""
        given = {k: v for k, v in (self.raw["models"].get(name) or {}).items() if k != "training"}
        return {**self.model_spec(name).defaults, **given}

    def model_spec(self, name: str) -> ModelSpec:
        """The registered model, or a Hugging Face model the config defines (``family: hf``)."""
        if name in MODELS:
            return MODELS.get(name)
        given = (self.raw.get("models") or {}).get(name) or {}
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
        """The training regime of ``model``: ``training`` overlaid with ``models.<model>.training``."""
        own = (self.raw["models"].get(model) or {}).get("training") or {}
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
        """Every training the runs need (a not-confused model is trained once, on no_comment)."""
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
        return [run for run in self.runs() if run.dataset in datasets and run.attack in attacks]

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
        """Every run the config asks for, in a stable order: the zero-shot runs of ``grid.models``,
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


def merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict update, as snakemake merges --configfile into the config (lists replace)."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{path}:{where} not valid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return data


def load_config(paths: list[str | Path] | str | Path) -> Config:
    """Read and merge config files (later ones overlay earlier ones), then validate."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise ConfigError("no config file given")
    raw: dict[str, Any] = {}
    for path in paths:
        raw = merge(raw, read_yaml(path))
    return validate_config(raw, sources=tuple(str(p) for p in paths))


def _schema() -> dict[str, Any]:
    if not SCHEMA_PATH.is_file():
        raise ConfigError(f"schema {SCHEMA_PATH} is missing: csbench must run from its source checkout")
    try:
        return yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"schema {SCHEMA_PATH} cannot be read: {err}") from None


def _key_path(path: Any) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in path]
    return ".".join(parts).replace(".[", "[") or "(top level)"


def _schema_error_message(error: jsonschema.ValidationError, prefix: tuple[Any, ...] = ()) -> str:
    key = _key_path((*prefix, *error.absolute_path))
    if error.validator == "enum":
        valid = [str(v) for v in error.validator_value]
        return UnknownNameError("value", error.instance, valid, where=key).message
    if error.validator == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        msgs = []
        for name in extra:
            hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
            msgs.append(
                f"{key}: unknown key {name!r}; allowed keys: {', '.join(allowed)}"
                + (f". Did you mean {hint[0]!r}?" if hint else "")
            )
        if msgs:
            return "; ".join(msgs)
    return f"{key}: {error.message}"


def validate_config(raw: dict[str, Any], sources: tuple[str, ...] = ("params.yaml",)) -> Config:
    """Check ``raw`` against the JSON schema and the registries; return the typed config."""
    where = "+".join(sources)
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (len(e.absolute_path), list(map(str, e.path))))
    if errors:
        error = errors[0]
        keys = tuple(error.absolute_path)
        if "propertyNames" in error.absolute_schema_path:  # a bad name: the line of that key, not its parent's
            keys = (*keys, error.instance)
        raise ConfigError(f"{locate(Config(raw=raw, sources=sources), *keys)}: " + _schema_error_message(error))
    config = Config(raw=raw, sources=sources)
    try:
        _check_names(config)
    except ConfigError:
        raise  # already names its file and line
    except UnknownNameError as err:
        raise ConfigError(f"{where}: {err.message}") from None
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
    _check_registry_params(config)
    _check_dataset_options(config)
    _check_match_options(config)
    _check_matching_validation(config)
    _check_dataset_table(config)
    return config


# ------------------------------------------------------------------------------ where a key is set


def _key_lines(path: str) -> tuple[dict[tuple[Any, ...], int], Any] | None:
    """The 1-based line of every mapping key and list item of a YAML config file, by key path
    (list items by index), and the file's data; None when the file cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except (OSError, yaml.YAMLError):
        return None
    lines: dict[tuple[Any, ...], int] = {}
    stack: list[tuple[Any, tuple[Any, ...]]] = [(root, ())]
    while stack:
        node, prefix = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines[(*prefix, str(key.value))] = key.start_mark.line + 1
                stack.append((value, (*prefix, str(key.value))))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[(*prefix, i)] = item.start_mark.line + 1
                stack.append((item, (*prefix, i)))
    return lines, data


def _value_at(data: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        found = key in data if isinstance(data, dict) else isinstance(data, list) and isinstance(key, int)
        if not found or (isinstance(data, list) and key >= len(data)):
            return None
        data = data[key]
    return data


def locate(config: Config, *keys: Any) -> str:
    """``file:line`` where the config sets ``keys`` (the last of its files that sets it, as overlays
    override), or the files joined by ``+`` when no file sets it as the config has it."""
    for source in reversed(config.sources):
        found = _key_lines(source)
        if found is None or keys not in found[0]:
            continue
        mine, merged = _value_at(found[1], keys), _value_at(config.raw, keys)
        if isinstance(merged, dict) or mine == merged:  # else the config was changed after reading
            return f"{source}:{found[0][keys]}"
        break
    return "+".join(config.sources)


# ------------------------------------------------------------------------------ dataset entries


def _check_dataset_options(config: Config) -> None:
    """Every ``datasets.<name>`` entry: a local corpus's keys against the schema's
    ``$defs/local_source``, a release's options against its declarations (DatasetSpec.options);
    splits a run reads must stay selected. Errors name the file, line and key."""
    local_schema = {"$defs": _schema()["$defs"], "$ref": "#/$defs/local_source"}
    for name, given in (config.raw.get("datasets") or {}).items():
        spec = DATASETS.get(name) if name in DATASETS else None
        if spec is None or spec.kind == LOCAL_SOURCE_KIND:
            validator = jsonschema.Draft202012Validator(local_schema)
            errors = sorted(validator.iter_errors(given), key=lambda e: list(map(str, e.absolute_path)))
            if errors:
                error = errors[0]
                keys = ("datasets", name, *error.absolute_path)
                if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                    extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
                    keys = (*keys, extra[0]) if extra else keys
                raise ConfigError(f"{locate(config, *keys)}: {_schema_error_message(error, ('datasets', name))}")
            continue
        for key, value in given.items():
            option = spec.option(key)
            where = f"{locate(config, 'datasets', name, key)}: datasets.{name}.{key}"
            if option is None:
                raise ConfigError(f"{where}: {_unknown_option(spec, key)}")
            problem = option.problem(value)
            if problem:
                raise ConfigError(f"{where}: {problem}")
        _check_selected_splits(config, spec)


def _unknown_option(spec: Any, key: str) -> str:
    names = [option.name for option in spec.options]
    if not names:
        message = f"release {spec.name!r} takes no options (its entry is `{{}}`)"
    else:
        message = f"unknown option of release {spec.name!r}; its options: {', '.join(names)}"
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
        if close:
            message += f". Did you mean {close[0]!r}?"
    local_keys = set(_schema()["$defs"]["local_source"]["properties"])
    if key in local_keys:
        message += f" ({key!r} is a key of local corpora, extracted from source code)"
    else:
        elsewhere = [n for n in DATASETS if n != spec.name and DATASETS.get(n).option(key) is not None]
        if elsewhere:
            message += f" ({key!r} is an option of {', '.join(elsewhere[:3])}{', ...' if len(elsewhere) > 3 else ''})"
    return message


def _check_selected_splits(config: Config, spec: Any) -> None:
    """A ``splits`` option may not leave out what the runs read: ``test`` (every run evaluates it)
    and, for a dataset trained on, ``train``."""
    chosen = config.dataset_options(spec.name).get("splits")
    if chosen is None:
        return
    trained = config.trained
    needs = []
    if spec.name in config.datasets and "test" in spec.splits:
        needs.append(("test", "every run evaluates the test split"))
    if trained["models"] and spec.name in trained["datasets"] and "train" in spec.splits:
        needs.append(("train", "grid.trained.datasets trains on the train split"))
    for split, why in needs:
        if split not in chosen:
            where = f"{locate(config, 'datasets', spec.name, 'splits')}: datasets.{spec.name}.splits"
            raise ConfigError(f"{where}: leaves out {split!r}, but {why}; add it or remove the option")


def _check_match_options(config: Config) -> None:
    """``evaluation.match_threshold`` and ``evaluation.match_pairs``: a threshold borrowed from a
    dataset of ``grid.datasets`` that has a validation split; released pairs only on datasets whose
    release has them."""
    evaluation = config.section("evaluation")
    if "match_threshold" in evaluation:
        where = f"{locate(config, 'evaluation', 'match_threshold')}: evaluation.match_threshold"
        try:
            rule = MatchRule.parse(evaluation["match_threshold"], where)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if rule.kind == "borrowed":
            if rule.dataset not in config.datasets:
                raise ConfigError(
                    f"{where}: borrows the threshold of {rule.dataset!r}, which is not in grid.datasets "
                    f"({', '.join(config.datasets)}); its validation split must be prepared and attacked too"
                )
            why = config.missing_validation(str(rule.dataset))
            if why is not None:
                raise ConfigError(f"{where}: {rule.dataset!r} has no validation split to choose a threshold on: {why}")
    if evaluation.get("match_pairs") == "released" and config.matching_protocols:
        where = f"{locate(config, 'evaluation', 'match_pairs')}: evaluation.match_pairs"
        lacking = [
            name
            for name in config.datasets
            if not config.has_released_pairs(name)
        ]
        if lacking:
            raise ConfigError(
                f"{where}: 'released', but these datasets have no released matching pairs: {', '.join(lacking)} "
                "(use 'auto' to draw negatives there)"
            )


def _check_matching_validation(config: Config) -> None:
    """A ``matching`` study on a dataset without a validation split: an error, unless the config
    says ``evaluation.matching_without_validation: skip`` (then ``csbench validate`` lists it)."""
    unmatched = config.unmatched_runs()
    if not unmatched or config.matching_without_validation == "skip":
        return
    index = config.protocols.index(config.matching_protocols[0])
    where = f"{locate(config, 'evaluation', 'protocols', index)}: evaluation.protocols[{index}]"
    cases = "; ".join(f"{name} (grid.datasets[{config.datasets.index(name)}]: {why})" for name, why, _ in unmatched)
    models = list(dict.fromkeys(model for _, _, names in unmatched for model in names))
    raise ConfigError(
        f"{where}: {config.matching_protocols[0]!r} chooses a model's match threshold on the validation split, "
        f"and these datasets have none: {cases}; the matching of {', '.join(models)} there would stay empty. Remove "
        f"{config.matching_protocols[0]!r} from evaluation.protocols, those datasets from grid.datasets, or set "
        "evaluation.matching_without_validation: skip to evaluate the other protocols and record matching there "
        "as not evaluated (a cross-encoder's head needs no threshold)"
    )


def matching_notes(config: Config) -> list[str]:
    """What a config with ``evaluation.matching_without_validation: skip`` decides, one line per
    dataset: whose matching is not evaluated there, and why."""
    if config.matching_without_validation != "skip":
        return []
    where = locate(config, "evaluation", "matching_without_validation")
    return [
        f"{where}: matching on {name} not evaluated for {', '.join(models)}: {why}, so no match threshold can be "
        "chosen (evaluation.matching_without_validation: skip)"
        for name, why, models in config.unmatched_runs()
    ]


def _check_names(config: Config) -> None:
    defined_local = {
        name for name, opts in config.raw.get("datasets", {}).items() if opts.get("kind") == LOCAL_SOURCE_KIND
    }
    valid_datasets = DATASETS.names() + sorted(defined_local - set(DATASETS.names()))
    for i, name in enumerate(config.datasets):
        if name not in valid_datasets:
            raise UnknownNameError("dataset", name, valid_datasets, where=f"grid.datasets[{i}]")
    for name in config.raw.get("datasets", {}):
        if name not in valid_datasets:
            raise UnknownNameError("dataset", name, valid_datasets, where=f"datasets.{name}")
    for i, name in enumerate(config.datasets):
        if name in DATASETS and DATASETS.get(name).kind != LOCAL_SOURCE_KIND and DATASETS.get(name).reader is None:
            raise ValueError(
                f"grid.datasets[{i}]: {name!r} has no query/code pairs to retrieve with (it holds relevance "
                "judgements for another dataset's evaluation)"
            )
    for name in config.datasets:
        if name not in config.raw.get("datasets", {}):
            raise ValueError(
                f"datasets.{name}: missing; every dataset of grid.datasets needs an entry there, `{{}}` for "
                "the defaults (dvc.yaml tracks it as the dataset's parameters)"
            )
    for name in defined_local:
        opts = config.dataset_options(name)
        missing = [k for k in ("language", "source") if k not in opts]
        if missing:
            raise ValueError(f"datasets.{name}: a local-source corpus needs {' and '.join(missing)}")
    for i, name in enumerate(config.attacks):
        _check_attack_spec(config, name, ("grid", "attacks", i))
    _check_models(config)
    for i, name in enumerate(config.protocols):
        PROTOCOLS.check(name, where=f"evaluation.protocols[{i}]")
    _validate_robustness(config)
    _validate_stability(config)
    split = config.raw["extraction"]["split"]
    if split["train"] + split["valid"] + split["test"] != 100:
        raise ValueError(f"extraction.split: train + valid + test must be 100, not {sum(split.values())}")


def _check_attack_spec(config: Config, spec: str, keys: tuple[Any, ...]) -> None:
    """An attack spec of the config (composition, variant, parameters), its error at its file and line."""
    key = keys[0] + "".join(f".{k}" if isinstance(k, str) else f"[{k}]" for k in keys[1:])
    try:
        parse_spec(spec, config.raw.get("attack_params") or {}, where=key)
    except UnknownNameError as err:
        raise ConfigError(f"{locate(config, *keys)}: {err.message}") from None
    except ValueError as err:
        raise ConfigError(f"{locate(config, *keys)}: {err}") from None


def _check_registry_params(config: Config) -> None:
    """``models.<name>`` (its parameters: ``family`` and ``training`` are the schema's) and
    ``loss_params.<loss>``: every parameter against the schema ``csbench.params`` derives from the
    registered defaults and declarations, so a value of the wrong type, out of range or misspelt
    stops here, at its file and line, not in a train job after download, prepare and attack."""
    for name, given in (config.raw.get("models") or {}).items():
        params = {k: v for k, v in (given or {}).items() if k not in ("family", "training")}
        if not params:
            continue
        spec = config.model_spec(name)
        defaults = {k: v for k, v in spec.defaults.items() if k != "family"}
        _raise_param_problem(config, ("models", name), check_params(params, defaults, spec.params))
    for loss, given in (config.raw.get("loss_params") or {}).items():
        _raise_param_problem(config, ("loss_params", loss), check_params(given, LOSS_DEFAULTS[loss], LOSS_PARAMS[loss]))


def _raise_param_problem(config: Config, keys: tuple[str, ...], problem: ParamProblem | None) -> None:
    if problem is not None:
        raise ConfigError(f"{locate(config, *keys, *problem.path)}: {problem.describe('.'.join(keys))}")


def _check_models(config: Config) -> None:
    # Loss names (grid.trained.losses, loss_params) are the schema's enum, which tests/test_config.py
    # keeps equal to csbench.train.losses.LOSSES: importing that registry here would import torch
    # (about 2 s) into every job and every snakemake start.
    defined = {name for name, opts in config.raw["models"].items() if (opts or {}).get("family") == "hf"}
    valid = MODELS.names() + sorted(defined - set(MODELS.names()))
    for name, opts in config.raw["models"].items():
        if name not in valid:
            raise UnknownNameError("model", name, valid, where=f"models.{name}")
        if name in MODELS and "family" in (opts or {}) and opts["family"] != MODELS.get(name).family:
            raise ValueError(f"models.{name}.family: {name!r} is registered as a {MODELS.get(name).family!r} model")
        if name not in MODELS and not (opts or {}).get("model_id"):
            raise ValueError(f"models.{name}: a model defined in the config needs a model_id (a hub id or a folder)")
    for i, name in enumerate(config.models):
        if name not in valid:
            raise UnknownNameError("model", name, valid, where=f"grid.models[{i}]")
        if not config.model_spec(name).zero_shot:
            raise ValueError(
                f"grid.models[{i}]: {name!r} is trained from scratch and has no zero-shot run; "
                "list it under grid.trained.models"
            )
    trained = config.trained
    for i, name in enumerate(trained["models"]):
        if name not in valid:
            raise UnknownNameError("model", name, valid, where=f"grid.trained.models[{i}]")
        if not config.model_spec(name).trainable:
            raise ValueError(f"grid.trained.models[{i}]: {name!r} is not trainable; list it under grid.models")
    cross = [name for name in trained["models"] if config.model_spec(name).family == "cross"]
    if cross and trained["losses"] != ["ce"]:
        raise ValueError(
            f"grid.trained: cross-encoders ({', '.join(cross)}) train with cross-entropy over their match / "
            "no-match head only: set grid.trained.losses to [ce], or study them in a config of their own"
        )
    if cross and not {"gecs-100", "matching"} & set(config.protocols):
        raise ValueError(
            f"evaluation.protocols: cross-encoders ({', '.join(cross)}) score pairs and are evaluated under "
            "gecs-100 and matching only: add one of them"
        )
    for i, dataset in enumerate(trained["datasets"] if trained["models"] else []):
        if dataset not in config.datasets:
            where = f"grid.trained.datasets[{i}]"
            raise UnknownNameError("dataset of grid.datasets", dataset, config.datasets, where=where)
    _check_evaluate_on(config, trained)
    for dataset in trained["seeds_by_dataset"] if trained["models"] else []:
        if dataset not in trained["datasets"]:  # its seeds would train nothing: a misspelt or forgotten name
            raise UnknownNameError(
                "dataset of grid.trained.datasets",
                dataset,
                trained["datasets"],
                where=f"grid.trained.seeds_by_dataset.{dataset}",
            )
    for i, attack in enumerate(trained["attacks"] if trained["models"] else []):
        if attack not in config.attacks:
            raise ValueError(f"grid.trained.attacks[{i}]: {attack!r} is not in grid.attacks")
    # Only not_confused runs read the no_comment model; a confused-only study (GeCS fine-tunes on the code
    # as released) may leave it out, and then runs under snakemake only (see dvc_limitations).
    if (
        trained["models"]
        and "not_confused" in trained["inference"]
        and NOT_CONFUSED_TRAIN_ATTACK not in trained["attacks"]
    ):
        raise ValueError(
            f"grid.trained: trained models need {NOT_CONFUSED_TRAIN_ATTACK!r} in grid.trained.attacks (not_confused "
            "runs use the model trained on it, and dvc.yaml's trained stages depend on it)"
        )
    outside = [  # names outside grid.attacks: skipped and reported (robustness_outside_grid), or misspelled
        a for a in config.robustness.get("attacks", []) if a in config.attacks and a not in trained["attacks"]
    ]
    if trained["models"] and outside:
        raise ValueError(
            f"robustness.attacks: {', '.join(outside)} not in grid.trained.attacks; dvc.yaml evaluates the "
            "trained models on the perturbed queries of every robustness attack, so list them there too"
        )


def _check_dataset_table(config: Config) -> None:
    """``dataset_table.reference``: a dataset of grid.datasets whose ``reference_split`` is read."""
    table = config.dataset_table
    if table is None:
        return
    name, split = table["reference"], table["reference_split"]
    if name not in config.datasets:
        message = UnknownNameError("dataset of grid.datasets", name, config.datasets, where="dataset_table.reference")
        raise ConfigError(f"{locate(config, 'dataset_table', 'reference')}: {message.message}")
    spec = DATASETS.get(name) if name in DATASETS else None
    chosen = config.dataset_options(name).get("splits")
    if (spec is not None and spec.kind != LOCAL_SOURCE_KIND and split not in spec.splits) or (
        chosen is not None and split not in chosen
    ):
        raise ConfigError(
            f"{locate(config, 'dataset_table')}: dataset_table: {name!r} has no {split!r} split to compare the test "
            "sets with (dataset_table.reference_split, default train)"
        )


def _check_evaluate_on(config: Config, trained: dict[str, Any]) -> None:
    """``grid.trained.evaluate_on``: datasets of grid.datasets (the schema keeps them unique and
    non-empty); an error names its file and line."""
    names = trained["evaluate_on"]
    if names is None or not trained["models"]:
        return
    for i, name in enumerate(names):
        if name not in config.datasets:
            where = f"grid.trained.evaluate_on[{i}]"
            message = UnknownNameError("dataset of grid.datasets", name, config.datasets, where=where).message
            raise ConfigError(f"{locate(config, 'grid', 'trained', 'evaluate_on', i)}: {message}")


def _validate_robustness(config: Config) -> None:
    from csbench.perturbations import PERTURBATIONS

    rob = config.robustness
    if not rob:
        return
    for i, spec in enumerate(rob.get("attacks", [])):
        _check_attack_spec(config, spec, ("robustness", "attacks", i))
    for key, takes_ratio in (("perturbations", True), ("fixed", False)):
        for i, name in enumerate(rob.get(key, [])):
            perturbation = PERTURBATIONS.get(name, where=f"robustness.{key}[{i}]")
            if perturbation.has_ratio != takes_ratio:
                where = "robustness.perturbations" if perturbation.has_ratio else "robustness.fixed"
                kind = "takes a" if perturbation.has_ratio else "has no"
                raise ValueError(f"robustness.{key}[{i}]: {name!r} {kind} noise ratio; list it under {where}")
    both = set(rob.get("perturbations", [])) & set(rob.get("fixed", []))
    if both:
        raise ValueError(f"robustness: {', '.join(sorted(both))} listed twice")
    labels = [paths.ratio_label(r) for r in rob.get("ratios", [])]
    if len(set(labels)) != len(labels):
        raise ValueError("robustness.ratios: a ratio is listed twice")
    if rob.get("protocol", "full-corpus") not in config.protocols:
        raise ValueError(
            f"robustness.protocol: {rob.get('protocol')!r} is not in evaluation.protocols "
            f"({', '.join(config.protocols)})"
        )
    if PROTOCOLS.get(rob.get("protocol", "full-corpus")).kind != "ranking":
        raise ValueError(
            f"robustness.protocol: {rob.get('protocol')!r} decides pairs and has no MRR to draw curves from; "
            "choose a ranking protocol (full-corpus, csn-1000, advtest, gecs-100)"
        )
    if PROTOCOLS.get(rob.get("protocol", "full-corpus")).texts != "test":
        raise ValueError(
            f"robustness.protocol: {rob.get('protocol')!r} ranks its own queries (the function names), which "
            "the perturbations never change; choose a protocol of the test queries (full-corpus, csn-1000, ...)"
        )


def _validate_stability(config: Config) -> None:
    stability = config.stability
    if "stability" in config.raw and stability["protocol"] not in config.ranking_protocols:
        raise ValueError(
            f"stability.protocol: {stability['protocol']!r} is not a ranking protocol of evaluation.protocols "
            f"({', '.join(config.ranking_protocols) or 'none'})"
        )
    depth = int(config.section("evaluation").get("run_depth", 0))
    if config.stability_groups() and int(stability["k"]) > depth:
        raise ValueError(
            f"stability.k: {stability['k']} is deeper than evaluation.run_depth ({depth}), the ranks each run keeps"
        )


def check_sources(config: Config) -> None:
    """Fail before any job starts if a local corpus's source directory is missing or unreadable."""
    from csbench.datasets.local import SourceError, resolve_source

    for name in config.datasets:
        opts = config.dataset_options(name)
        if config.dataset_kind(name) == LOCAL_SOURCE_KIND:
            try:
                resolve_source(str(opts["source"]))
            except SourceError as err:
                hint = DATASETS.get(name).setup_hint if name in DATASETS else ""
                message = f"{'+'.join(config.sources)}: datasets.{name}.source: {err}" + (f"; {hint}" if hint else "")
                raise ConfigError(message) from None


# ------------------------------------------------------------------------------ studies under DVC


def merged_yaml(config: Config) -> str:
    """A loaded config (its files merged as snakemake merges ``--configfile`` overlays: later files
    override earlier ones key by key, lists replace; then validated) as one YAML document. DVC has no
    overlays: this is the ``params.yaml`` that runs a study of ``workflow/configs/`` under ``dvc repro``
    (see :func:`dvc_limitations` for what it cannot run)."""
    header = (
        f"# csbench experiment config: {' + '.join(config.sources)}, merged and validated by `csbench merge`.\n"
        "# Edit the source files and merge again; comments live there.\n"
    )
    return header + yaml.safe_dump(config.raw, sort_keys=False, allow_unicode=True, width=110)


def dvc_limitations(config: Config) -> list[str]:
    """What ``dvc repro`` cannot run as snakemake does for this config: dvc.yaml's ``matrix``
    stages are products of the ``grid.*`` and ``robustness.*`` lists as written, so a per-dataset
    narrowing or override of the grid has no DVC equivalent (one message per feature)."""
    notes = []
    trained = config.trained
    if trained["models"] and trained["datasets"] != config.datasets:
        notes.append(
            f"grid.trained.datasets ({', '.join(trained['datasets'])}): dvc.yaml's train / index-trained / "
            f"evaluate-trained stages iterate grid.datasets, so dvc repro would also train on "
            f"{', '.join(d for d in config.datasets if d not in trained['datasets'])}"
        )
    if trained["models"] and trained["evaluate_on"] is not None:
        notes.append(
            f"grid.trained.evaluate_on ({', '.join(trained['evaluate_on'])}): dvc.yaml's evaluate-trained stages "
            "evaluate each model on its training dataset only, not a model trained once on several datasets"
        )
    if trained["models"] and trained["seeds_by_dataset"]:
        given = (config.raw["grid"].get("trained") or {}).get("seeds", TRAINED_DEFAULTS["seeds"])
        notes.append(
            "grid.trained.seeds_by_dataset ("
            + "; ".join(f"{d}: {', '.join(map(str, s))}" for d, s in trained["seeds_by_dataset"].items())
            + f"): dvc.yaml's trained stages iterate grid.trained.seeds ({', '.join(map(str, given))}) on every "
            "dataset, so dvc repro would run other seeds there and aggregate would miss the runs of the others"
        )
    if trained["models"] and NOT_CONFUSED_TRAIN_ATTACK not in trained["attacks"]:
        notes.append(
            f"grid.trained.attacks ({', '.join(trained['attacks'])}) without {NOT_CONFUSED_TRAIN_ATTACK!r}: dvc.yaml's "
            "index-trained and evaluate-trained stages depend on the no_comment checkpoint of every trained run"
        )
    rule = config.match_rule
    if config.matching_protocols and rule.kind == "borrowed":
        notes.append(
            f"evaluation.match_threshold borrows {rule.dataset}'s validation split: dvc.yaml's evaluate stages do "
            f"not depend on it, so run {rule.dataset}'s attack stages first (dvc repro attack) or evaluate says so"
        )
    outside = config.robustness_outside_grid()
    notes += [f"{note} (dvc.yaml's matrices read the robustness lists as they are)" for note in outside]
    return notes
