"""The report's figures under results/studies/<study>/figures/: which a study has, their captions, and the data
each is drawn from.

* ``severity/<protocol>.png``: scores against attack severity (thesis Fig. 5.1), one line per model.
* ``training/<dataset>/<attack>/<model>/<loss>.png``: validation MRR over training, one line per
  seed (COBE Fig. 4).

The robustness curves (COBE Fig. 1; results/robustness/<run>/robustness.png) and the seed heatmaps
(COBE Fig. 5; results/studies/<study>/stability/<group>/heatmap.png) are drawn by their own phases. The names and
captions depend on the config alone (``figure_specs``), so the Snakefile knows them before a job runs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from csbench.io import write_json
from csbench.results.plots import METRIC_LABELS, plot_severity, plot_training_curves
from csbench.results.tables import seed_means, size_weighted

FIGURES_DIR = "figures"  # below the study's folder, results/studies/<study>/
INDEX_FILE = "index.json"  # figures/index.json: the specs of the figures written
SEVERITY_METRICS = ("mrr", "r@1", "r@5", "r@10")  # the four metrics of thesis Fig. 5.1

# Severity of an attack (thesis section 5.5: "the degree to which the lexical identifiers have been
# obfuscated"), from its three questions asked by increasing severity: are identifiers moved between
# snippets, how far, are identifiers repeated across the dataset. Levels: 0 the original code;
# 1 comments only, identifiers untouched; 2 identifiers permuted within their snippet; 3 identifiers
# moved between snippets (by k, question 2); 4 identifiers replaced by names repeated across the
# dataset (question 3); 5 every identifier hashed: no lexical resemblance left (thesis 3.3.2 gives
# full_hash as that benchmark, and it scores worst with most_popular in Table 5.16).
SEVERITY_LEVEL = {
    "none": 0,
    "translation": 1,  # comments translated, still there
    "no_comment": 1,  # comments removed
    "k_shift_snippet": 2,
    "random_permutation": 2,
    "k_shift_dataset": 3,
    "ordered_id": 4,
    "advtest_normalize": 4,
    "advtest_normalize_scoped": 4,
    "most_popular": 4,
    "full_hash": 5,
}
# Within a level: by the size of the shift (k; random_permutation shifts by up to 20, its default
# max_k), then by this order (ordered_id and AdvTest's normalisation keep one name per position in
# the snippet; most_popular maps the snippet's ranking onto the dataset's).
_WITHIN_LEVEL = (
    "translation",
    "no_comment",
    "ordered_id",
    "advtest_normalize_scoped",
    "advtest_normalize",  # (also renames globals and call keywords, and rewrites the name inside strings)
    "most_popular",
)
_RANDOM_PERMUTATION_K = 20
_COMPONENT = re.compile(r"^(?P<name>[a-z_]+)(?:-(?P<k>[0-9]+))?$")


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report: results/figures/{name}.png."""

    name: str  # file stem below results/figures/, e.g. severity/full-corpus
    title: str  # one line, e.g. "MRR, Top-1, Top-5, Top-10 against attack severity (full-corpus)"
    caption: str  # what it shows and which protocol produced it


def severity_key(spec: str) -> tuple[int, int, int, str]:
    """Sort key of an attack spec from least to most severe (see ``SEVERITY_LEVEL``). A composed
    spec (``a+b``) is as severe as its most severe part; an unknown attack sorts last."""
    keys = []
    for part in spec.split("+"):
        match = _COMPONENT.match(part)
        name = match["name"] if match else part
        k = int(match["k"]) if match and match["k"] else (_RANDOM_PERMUTATION_K if name == "random_permutation" else 0)
        within = _WITHIN_LEVEL.index(name) if name in _WITHIN_LEVEL else 0
        keys.append((SEVERITY_LEVEL.get(name, max(SEVERITY_LEVEL.values()) + 1), k, within))
    level, k, within = max(keys)
    return level, k, within, spec


def by_severity(attacks: Iterable[str]) -> list[str]:
    """The attacks, least severe first."""
    return sorted(dict.fromkeys(attacks), key=severity_key)


def _configuration(training_path: str) -> tuple[str, int]:
    """``dataset/attack/model/loss/seed`` -> (``dataset/attack/model/loss``, seed)."""
    configuration, seed = training_path.rsplit("/", 1)
    return configuration, int(seed)


def severity_spec(protocol: str, attacks: Sequence[str]) -> FigureSpec:
    """The severity figure (thesis Fig. 5.1) of ``protocol`` over ``attacks``."""
    order = by_severity(attacks)
    metrics = ", ".join(METRIC_LABELS[m] for m in SEVERITY_METRICS)
    return FigureSpec(
        name=f"severity/{protocol}",
        title=f"{metrics} against attack severity ({protocol})",
        caption=(
            f"Scores against attack severity, as thesis Fig. 5.1: one panel per metric ({metrics}), the attacks "
            f"from least to most severe ({' < '.join(order)}), one line per model (a trained model once per "
            "inference type: confused, trained on the attacked data; not confused, trained on no_comment). "
            f"Protocol `{protocol}`. Each point is the model's score averaged over seeds, then over datasets "
            "weighted by their number of test queries (as thesis Table 5.16). Severity follows the thesis's three "
            "questions (section 5.5): identifiers moved between snippets or not, how far, and repeated across "
            "the dataset or not; comment-only attacks come first and full_hash (no lexical resemblance left) last."
        ),
    )


def training_spec(configuration: str, seeds: Sequence[int]) -> FigureSpec:
    """The training figure (COBE Fig. 4) of ``dataset/attack/model/loss``, one line per seed."""
    dataset, attack, model, loss = configuration.split("/")
    return FigureSpec(
        name=f"training/{configuration}",
        title=f"validation MRR over training: {model} ({loss}) on {dataset} / {attack}",
        caption=(
            f"Validation MRR over training of {model} with the {loss} loss, trained on {dataset} attacked by "
            f"{attack}, one line per seed ({', '.join(map(str, seeds))}), as COBE Fig. 4; a star marks each "
            "seed's best validation, the checkpoint kept. Validation MRR is the training loop's own protocol: "
            "each validation query's code ranked among every validation code (not a test protocol)."
        ),
    )


def figure_specs(attacks: Sequence[str], protocols: Sequence[str], trainings: Iterable[str]) -> list[FigureSpec]:
    """The figures a study has: a severity figure per ranking protocol when it has two attacks or
    more, and a training figure per trained configuration (``trainings``: the training paths
    ``dataset/attack/model/loss/seed``; one figure holds every seed)."""
    specs = [severity_spec(protocol, attacks) for protocol in protocols] if len(set(attacks)) > 1 else []
    seeds: dict[str, list[int]] = {}
    for path in trainings:
        configuration, seed = _configuration(path)
        seeds.setdefault(configuration, []).append(seed)
    specs += [training_spec(c, sorted(s)) for c, s in sorted(seeds.items())]
    return specs


def model_label(model: str, loss: str, inference: str, several_losses: bool) -> str:
    """The legend entry of a model: ``bm25``, ``nbow (confused)``, ``nbow/ce (not confused)``."""
    name = f"{model}/{loss}" if several_losses and loss != "none" else model
    return name if inference == "zero_shot" else f"{name} ({inference.replace('_', ' ')})"


def severity_scores(scores: pd.DataFrame, protocol: str) -> dict[str, dict[str, dict[str, float]]]:
    """``{metric: {model label: {attack: value}}}`` under ``protocol``, from a long scores frame in the
    shape of ``collect.collect``: each run's score averaged over seeds (``tables.seed_means``), then
    over datasets weighted by the dataset's number of test queries (``tables.size_weighted``: the
    numbers of thesis Table 5.16's ``attacks_weighted``). Runs without a value (a protocol that
    evaluated no query) are left out. Models in the order of (attack, model, loss, inference)."""
    own = scores[scores["protocol"] == protocol]
    several_losses = own.loc[own["loss"] != "none", "loss"].nunique() > 1
    weighted = [r for r in size_weighted(seed_means(own)) if not math.isnan(r["mean"])]
    # the order of the lines (legend, colours): by attack, model, loss, inference
    weighted.sort(key=lambda r: (r["attack"], r["model"], r["loss"], r["inference"]))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for metric in SEVERITY_METRICS:
        for r in (r for r in weighted if r["metric"] == metric):
            label = model_label(r["model"], r["loss"], r["inference"], several_losses)
            out.setdefault(metric, {}).setdefault(label, {})[r["attack"]] = float(r["mean"])
    return out


def training_histories(records: dict[str, dict]) -> dict[str, dict[int, list[dict[str, float]]]]:
    """``{dataset/attack/model/loss: {seed: history}}`` from train.json records by training path."""
    out: dict[str, dict[int, list[dict[str, float]]]] = {}
    for path, record in records.items():
        configuration, seed = _configuration(path)
        out.setdefault(configuration, {})[seed] = list(record.get("history") or [])
    return out


def _load_trainings(trainings: dict[str, Path]) -> dict[str, dict]:
    records = {}
    for path, file in trainings.items():
        if not Path(file).is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench train` for {path} first")
        records[path] = json.loads(Path(file).read_text())
    return records


def write_figures(out_dir: Path, scores: pd.DataFrame, trainings: dict[str, Path] | None = None) -> list[Path]:
    """Draw every figure of ``figure_specs`` into ``out_dir``/figures/{name}.png (each written
    atomically), list them in figures/index.json, and remove PNGs there no spec names (left by an
    earlier study). ``trainings``: train.json files by training path."""
    from csbench.results import summarization  # it builds on this module

    figures = Path(out_dir) / FIGURES_DIR
    histories = training_histories(_load_trainings(trainings or {}))
    search = summarization.search_rows(scores) if len(scores) else scores  # summarization: its own figure
    attacks = sorted(search["attack"].unique()) if len(search) else []
    # the ranking protocols (a matching protocol has accuracy, no MRR): Config.ranking_protocols
    protocols = sorted(search.loc[search["metric"] == "mrr", "protocol"].unique()) if len(search) else []
    specs = figure_specs(attacks, protocols, list(trainings or {}))
    specs += summarization.study_figure_specs(scores)
    written = []
    for spec in specs:
        path = figures / f"{spec.name}.png"
        kind, _, rest = spec.name.partition("/")
        if spec.name == summarization.FIGURE:
            summarization.draw_severity(scores, path, spec.title)
        elif kind == "severity":
            plot_severity(severity_scores(search, rest), by_severity(attacks), path, spec.title)
        else:
            plot_training_curves(histories[rest], path, spec.title)
        written.append(path)
    for stale in set(figures.rglob("*.png")) - set(written):
        stale.unlink()
    write_json(figures / INDEX_FILE, [asdict(spec) | {"file": f"{spec.name}.png"} for spec in specs])
    return written
