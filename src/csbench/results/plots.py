"""Figures of the report (matplotlib, Agg backend; PNGs without timestamps, so re-runs give the same bytes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from csbench.io import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _pyplot():
    """matplotlib.pyplot on the Agg backend (no display; PNG bytes do not depend on the machine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a PNG atomically, without the Software tag (same bytes on every run)."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    _pyplot().close(fig)


def plot_robustness(record: dict[str, Any], path: Path) -> None:
    """MRR against noise ratio per perturbation (as COBE Fig. 1), the robust MRR, and ratio-free
    perturbations as horizontal lines; IR-AUC in the legend."""
    plt = _pyplot()
    per = record["summary"]["per_perturbation"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for name, curve in record["curves"].items():
        ratios, mrrs = [float(r) for r in curve], list(curve.values())
        label = f"{name} (IR-AUC {per[name]['ir_auc']:.3f})"
        if name in record["fixed"]:
            ax.axhline(mrrs[0], linestyle=":", linewidth=1.2, label=f"{name}, no ratio ({mrrs[0]:.3f})")
        else:
            ax.plot(ratios, mrrs, marker="o", markersize=3, linewidth=1.2, label=label)
    if record["robust_mrr"]:
        ratios = [0.0, *map(float, record["robust_mrr"])]
        values = [record["clean_mrr"], *record["robust_mrr"].values()]
        ax.plot(ratios, values, color="black", linestyle="--", linewidth=1.2, label="robust MRR (worst variant)")
    run = record["run"]
    micro = record["summary"]["micro_ir_auc"]
    ax.set_title(
        f"{run['dataset']} / {run['attack']} / {run['model']} ({record['protocol']})\n"
        f"IR-AUC macro {record['summary']['macro_ir_auc']:.3f}" + (f", micro {micro:.3f}" if micro is not None else ""),
        fontsize=9,
    )
    ax.set_xlabel("noise ratio")
    ax.set_ylabel("MRR")
    ax.set_ylim(0, max(1.0, record["clean_mrr"]) * 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    _save(fig, path)


def plot_seed_heatmap(record: dict[str, Any], path: Path) -> None:
    """Mean top-k Spearman correlation between every pair of seeds (as COBE Fig. 5), from a
    ``csbench.evaluate.stability.seed_stability`` record: the full seeds × seeds matrix, diagonal 1,
    each cell annotated, on a fixed -1..1 colour scale so figures of different models compare."""
    plt = _pyplot()
    seeds = record["matrix"]["seeds"]
    values = record["matrix"]["spearman"]
    n = len(seeds)
    fig, ax = plt.subplots(figsize=(6.4, 5.4), dpi=110)
    image = ax.imshow(values, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    fontsize = 8 if n <= 8 else 6  # ten seeds (COBE's count) still fit their two decimals
    for i in range(n):
        for j in range(n):
            value = values[i][j]
            colour = "white" if abs(value) > 0.6 else "black"  # readable on the dark ends of the scale
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=fontsize, color=colour)
    ax.set_xticks(range(n), [str(s) for s in seeds])
    ax.set_yticks(range(n), [str(s) for s in seeds])
    ax.set_xlabel("seed")
    ax.set_ylabel("seed")
    fig.colorbar(image, ax=ax, label=f"mean Spearman of top-{record['k']} rankings")
    run = record.get("run", {})
    overlap = record["summary"]["overlap"]["mean"]
    ax.set_title(
        f"{run.get('model', '?')} on {run.get('dataset', '?')} ({record['protocol']})\n"
        f"{run.get('attack', '?')} / {run.get('loss', '?')} / {run.get('inference', '?')}: "
        f"top-{record['k']} overlap across seeds {overlap:.2f} on average",
        fontsize=9,
    )
    _save(fig, path)


def plot_severity(
    scores: dict[str, dict[str, dict[str, float]]],
    attacks: list[str],
    path: Path,
    title: str,
    titles: Mapping[str, str] | None = None,
    top: float = 1.0,
    ylabel: str = "score (size-weighted mean over datasets)",
) -> None:
    """Score against attack severity (as thesis Fig. 5.1): one panel per metric, the attacks on the
    x axis from least to most severe (``attacks``, already in that order), one line per model.

    ``scores`` is ``{metric: {model label: {attack: value}}}``; a model without a score for an attack
    has a gap there (no line is drawn through a missing point). ``titles``: the panels' titles by
    metric (default ``METRIC_LABELS``); ``top``: the scale's maximum (1 for fractions, 100 for BLEU)."""
    plt = _pyplot()
    metrics = list(scores)
    if not metrics:  # the protocol scored no query (e.g. id-chunks-1000 on a test split under 1,000 pairs)
        fig, ax = plt.subplots(figsize=(6.4, 2.0), dpi=110)
        ax.text(0.5, 0.5, "no query was scored under this protocol (see the notes in summary.md)", ha="center")
        ax.set_axis_off()
        fig.suptitle(title, fontsize=9)
        _save(fig, path)
        return
    size = (3.2 * len(metrics) + 0.6, 4.4)
    fig, axes = plt.subplots(1, len(metrics), figsize=size, dpi=110, squeeze=False, layout="constrained")
    positions = range(len(attacks))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for label, by_attack in scores[metric].items():
            values = [by_attack.get(attack, float("nan")) for attack in attacks]
            ax.plot(positions, values, marker="o", markersize=3, linewidth=1.2, label=label)
        ax.set_xticks(positions, attacks, rotation=60, ha="right", fontsize=7)
        ax.set_title((titles or METRIC_LABELS).get(metric, metric), fontsize=9)
        ax.set_ylim(0, top * 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()  # every panel has the same lines
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 5), fontsize=7)
    fig.suptitle(title, fontsize=9)
    _save(fig, path)


METRIC_LABELS = {"mrr": "MRR", "r@1": "Top-1", "r@5": "Top-5", "r@10": "Top-10"}


def plot_training_curves(histories: dict[int, list[dict[str, float]]], path: Path, title: str) -> None:
    """Validation MRR over training (as COBE Fig. 4): one line per seed, epochs on the x axis (a
    fraction when the loop validates several times an epoch), each seed's best validation marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for seed, history in sorted(histories.items()):
        epochs = [point["epoch"] for point in history]
        mrrs = [point["mrr"] for point in history]
        (line,) = ax.plot(epochs, mrrs, marker="o", markersize=3, linewidth=1.2, label=f"seed {seed}")
        if mrrs:
            best = max(range(len(mrrs)), key=mrrs.__getitem__)
            ax.plot([epochs[best]], [mrrs[best]], marker="*", markersize=10, color=line.get_color())
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation MRR")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=9)
    _save(fig, path)
