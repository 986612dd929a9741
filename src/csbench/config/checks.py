"""The checks of a config beyond its JSON schema: registered names, composition rules, parameters
against the components' declarations, and the relations between sections. Each error names the
file and line of the key (``csbench.config.locate``)."""

from __future__ import annotations

import difflib
from typing import Any

import jsonschema

from csbench import paths
from csbench.attacks import parse_spec
from csbench.config.files import locate
from csbench.config.model import NOT_CONFUSED_TRAIN_ATTACK, Config, ConfigError
from csbench.config.schema import schema, schema_error_message
from csbench.datasets import DATASETS, LOCAL_SOURCE_KIND
from csbench.datasets.base import BEIR_KIND
from csbench.evaluate.protocols import PROTOCOLS, MatchRule
from csbench.models import API_FAMILIES, MODELS, PYTHON_FAMILY, SUMMARIZATION_FAMILY
from csbench.params import ParamProblem, check_params
from csbench.registry import UnknownNameError
from csbench.train.losses import LOSSES


def _check_dataset_options(config: Config) -> None:
    """Every ``datasets.<name>`` entry: a local corpus's keys against the schema's
    ``$defs/local_source``, a release's options against its declarations (DatasetSpec.options);
    splits a run reads must stay selected. Errors name the file, line and key."""
    local_schema = {"$defs": schema()["$defs"], "$ref": "#/$defs/local_source"}
    for name, given in (config.raw.get("datasets") or {}).items():
        spec = DATASETS.get(name) if name in DATASETS else None
        if spec is None and isinstance(given, dict) and given.get("kind") == BEIR_KIND:
            spec = config.dataset_spec(name)  # a BEIR folder / hub dataset: its declared options
            given = {key: value for key, value in given.items() if key != "kind"}
        if spec is None or spec.kind == LOCAL_SOURCE_KIND:
            validator = jsonschema.Draft202012Validator(local_schema)
            errors = sorted(validator.iter_errors(given), key=lambda e: list(map(str, e.absolute_path)))
            if errors:
                error = errors[0]
                keys = ("datasets", name, *error.absolute_path)
                if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                    extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
                    keys = (*keys, extra[0]) if extra else keys
                raise ConfigError(f"{locate(config, *keys)}: {schema_error_message(error, ('datasets', name))}")
            continue
        for key, value in given.items():
            option = spec.option(key)
            where = f"{locate(config, 'datasets', name, key)}: datasets.{name}.{key}"
            if option is None:
                raise ConfigError(f"{where}: {_unknown_option(spec, key)}")
            problem = option.problem(value)
            if problem:
                raise ConfigError(f"{where}: {problem}")
        if spec.kind == BEIR_KIND:  # what the options say together (exactly one of path / hub, ...)
            from csbench.datasets.beir import beir_options_problem

            found = beir_options_problem(given)
            if found is not None:
                key, why = found
                keys = ("datasets", name, key) if key in given else ("datasets", name)
                raise ConfigError(f"{locate(config, *keys)}: datasets.{name}.{key}: {why}")
            _check_attack_languages(config, name, config.dataset_options(name).get("language"))
        _check_selected_splits(config, spec)


def _check_attack_languages(config: Config, dataset: str, language: str | None) -> None:
    """A BEIR dataset of one declared ``language``: every attack of the grid is implemented for it (an
    attack of another language would stop the study at its attack job). Checked before anything runs."""
    from csbench.attacks import check_languages

    if not language:
        return  # language_field: the languages are known once the corpus is read
    for i, attack in enumerate(config.attacks):
        try:
            check_languages(attack, parse_spec(attack), [str(language).lower()])
        except ValueError as error:
            where = locate(config, "grid", "attacks", i)
            raise ConfigError(f"{where}: grid.attacks[{i}] on dataset {dataset!r} ({language}): {error}") from None


def _unknown_option(spec: Any, key: str) -> str:
    names = [option.name for option in spec.options]
    what = "BEIR dataset" if spec.kind == BEIR_KIND else "release"
    if not names:
        message = f"release {spec.name!r} takes no options (its entry is `{{}}`)"
    else:
        listed = ["kind", *names] if spec.kind == BEIR_KIND else names
        message = f"unknown option of {what} {spec.name!r}; its options: {', '.join(listed)}"
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
        if close:
            message += f". Did you mean {close[0]!r}?"
    local_keys = set(schema()["$defs"]["local_source"]["properties"])
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
        lacking = [name for name in config.datasets if not config.has_released_pairs(name)]
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


def check_names(config: Config) -> None:
    """Every name the config uses is registered or defined in it; the grid's sections agree (raises
    ``UnknownNameError`` / ``ValueError``: ``validate_config`` adds the files)."""
    defined_local = {
        name
        for name, opts in config.raw.get("datasets", {}).items()
        if opts.get("kind") in (LOCAL_SOURCE_KIND, BEIR_KIND)
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
        if config.dataset_kind(name) != LOCAL_SOURCE_KIND:
            continue  # a BEIR dataset: its options are checked against its declarations
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
        spec = LOSSES.get(loss)  # (the schema allows registered losses only)
        _raise_param_problem(config, ("loss_params", loss), check_params(given, spec.defaults, spec.params))


def _raise_param_problem(config: Config, keys: tuple[str, ...], problem: ParamProblem | None) -> None:
    if problem is not None:
        raise ConfigError(f"{locate(config, *keys, *problem.path)}: {problem.describe('.'.join(keys))}")


def _check_python_model(config: Config, name: str, opts: dict[str, Any]) -> None:
    """A user's model (``family: python``): what can be checked without running its code (one of
    ``class`` / ``entry_point``, the class path's form, its package or the entry point installed;
    csbench.models.python_spec), at its file and line. Importing it is left to the jobs that encode."""
    from csbench.models.python_spec import static_problem

    problem = static_problem(name, opts)
    if problem is not None:
        key, message = problem
        keys = ("models", name, key) if key in opts else ("models", name)
        raise ConfigError(f"{locate(config, *keys)}: {message}")


def _check_models(config: Config) -> None:
    # Loss names (grid.trained.losses, loss_params) are the schema's enum, filled from
    # csbench.train.losses.LOSSES (which reads the losses' declarations without importing torch).
    defined = {
        name
        for name, opts in config.raw["models"].items()
        if (opts or {}).get("family") in ("hf", SUMMARIZATION_FAMILY, PYTHON_FAMILY, *API_FAMILIES)
    }
    valid = MODELS.names() + sorted(defined - set(MODELS.names()))
    for name, opts in config.raw["models"].items():
        if name not in valid:
            raise UnknownNameError("model", name, valid, where=f"models.{name}")
        if name in MODELS and "family" in (opts or {}) and opts["family"] != MODELS.get(name).family:
            raise ValueError(f"models.{name}.family: {name!r} is registered as a {MODELS.get(name).family!r} model")
        if name not in MODELS and (opts or {}).get("family") == PYTHON_FAMILY:
            _check_python_model(config, name, opts)
        elif name not in MODELS and (opts or {}).get("family") in API_FAMILIES:
            if not (opts or {}).get("model"):
                raise ValueError(
                    f"models.{name}: an endpoint model defined in the config needs `model` (the model's name on "
                    "the server) and usually `base_url` (default: OpenAI's)"
                )
        elif name not in MODELS and not (opts or {}).get("model_id"):
            raise ValueError(f"models.{name}: a model defined in the config needs a model_id (a hub id or a folder)")
    for where, names in (("grid.models", config.models), ("grid.trained.models", config.trained["models"])):
        for i, name in enumerate(names):
            if name in valid and config.summarizes(name):
                raise ValueError(
                    f"{where}[{i}]: {name!r} is a summarizer (family seq2seq), not a retrieval model: list it "
                    "under grid.summarization.models (trained) or grid.summarization.zero_shot (as released)"
                )
    _check_summarization(config, valid)
    for i, name in enumerate(config.models):
        if name not in valid:
            raise UnknownNameError("model", name, valid, where=f"grid.models[{i}]")
        if not config.model_spec(name).zero_shot:
            raise ValueError(
                f"grid.models[{i}]: {name!r} is trained from scratch and has no zero-shot run; "
                "list it under grid.trained.models"
            )
    llms = [name for name in config.models if name in valid and config.model_spec(name).family == "llm"]
    if llms and not config.matching_protocols:
        raise ValueError(
            f"evaluation.protocols: chat models ({', '.join(llms)}) answer GeCS's match / no-match prompt per "
            "pair and are evaluated under matching only: add matching"
        )
    if llms and any(run.model in llms for run in config.robustness_runs()):
        raise ValueError(
            f"robustness: chat models ({', '.join(llms)}) have no ranking to draw robustness curves from, and "
            "dvc.yaml evaluates every model of grid.models on the perturbed queries: study them in a config "
            "whose robustness.datasets are not in the grid (e.g. [])"
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


def _check_summarization(config: Config, valid: list[str]) -> None:
    """``grid.summarization``: summarizers only (trainable ones under ``models``, ones released for
    summarization under ``zero_shot``), and ``no_comment`` among its attacks of the grid when a
    ``not_confused`` run needs the model trained on it."""
    summary = config.summarization
    for key, able, hint in (
        ("models", "trainable", "is not trainable"),
        (
            "zero_shot",
            "zero_shot",
            "has no zero-shot run (trained from scratch or needing fine-tuning): list it under "
            "grid.summarization.models",
        ),
    ):
        for i, name in enumerate(summary[key]):
            where = f"grid.summarization.{key}[{i}]"
            if name not in valid:
                raise UnknownNameError("model", name, valid, where=where)
            if not config.summarizes(name):
                raise ValueError(
                    f"{where}: {name!r} is a {config.model_spec(name).family!r} retrieval model, not a "
                    "summarizer (family seq2seq): list it under grid.models or grid.trained.models"
                )
            if not getattr(config.model_spec(name), able):
                raise ValueError(f"{where}: {name!r} {hint}")
    # names outside the grid are skipped (an overlay may narrow the grid; Config.summarization_outside_grid
    # says which): only the runs that remain must be possible
    attacks = [a for a in summary["attacks"] if a in config.attacks]
    datasets = [d for d in summary["datasets"] if d in config.datasets]
    needs_no_comment = summary["models"] and datasets and attacks and "not_confused" in summary["inference"]
    if needs_no_comment and NOT_CONFUSED_TRAIN_ATTACK not in attacks:
        raise ValueError(
            f"grid.summarization: not_confused runs use the summarizer trained on {NOT_CONFUSED_TRAIN_ATTACK!r}: "
            "add it to grid.summarization.attacks"
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


def _check_encoding(config: Config) -> None:
    """``encoding.shards`` > 1 puts the parts in the embedding cache: refused when the cache is off."""
    if config.encoding["shards"] > 1 and config.embedding_cache["dir"] is None:
        raise ConfigError(
            f"{locate(config, 'encoding', 'shards')}: {config.encoding['shards']} encode_shard jobs write their parts "
            "to the embedding cache, and embedding_cache.dir is null: set a folder (or remove the null) or shards: 1"
        )


def check_sections(config: Config) -> None:
    """The checks that name their own file and line, after :func:`check_names`, in this order."""
    _check_encoding(config)
    _check_registry_params(config)
    _check_dataset_options(config)
    _check_match_options(config)
    _check_matching_validation(config)
    _check_dataset_table(config)
