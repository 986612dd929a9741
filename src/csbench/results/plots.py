"""Figures of the report (matplotlib, Agg backend; PNGs without timestamps, so re-runs give the same bytes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from csbench.io import atomic_path


def plot_robustness(record: dict[str, Any], path: Path) -> None:
    """MRR against noise ratio per perturbation (as COBE Fig. 1), the robust MRR, and ratio-free
    perturbations as horizontal lines; IR-AUC in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.tight_layout()
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)


def plot_seed_heatmap(record: dict[str, Any], path: Path) -> None:
    """Mean top-k Spearman correlation between every pair of seeds (as COBE Fig. 5), from a
    ``csbench.evaluate.stability.seed_stability`` record: the full seeds × seeds matrix, diagonal 1,
    each cell annotated, on a fixed -1..1 colour scale so figures of different models compare."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.tight_layout()
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
