# The results database, tables and figures of a study (issue #8), and what `snakemake --report` shows,
# all in the study's folder results/studies/<study>/ (STUDY_DIR, common.smk):
#   snakemake --cores N --configfile <study> &&
#   snakemake --configfile <study> --report results/studies/<study>/report.html
# (`make run` does both: scripts/snakemake.sh). Outputs marked with report() go into the HTML report, under a category,
# with the caption in workflow/report/ (jinja: it may read the config and the file's wildcards).
import dataclasses

from csbench.results.figures import FIGURES_DIR, figure_specs
from csbench.results.summarization import figure_specs as summarization_figure_specs
from csbench.results.tables import TABLES_DIR


report: "../report/workflow.rst"


# Named by the config alone, so the figures' captions are known before the job runs; `aggregate`
# draws the same list from the run records (csbench.results.figures.write_figures).
FIGURE_SPECS = figure_specs(CFG.attacks, CFG.ranking_protocols, [t.path for t in SEARCH_TRAININGS])
FIGURE_SPECS += summarization_figure_specs(list(dict.fromkeys(run.attack for run in CFG.summary_runs())))
FIGURE_CATEGORIES = {"severity": "Attack severity (thesis Fig. 5.1)", "training": "Training (COBE Fig. 4)"}


localrules:
    aggregate,


rule aggregate:
    input:
        metrics=[f"{paths.run_dir(run.path)}/metrics.json" for run in RUNS],
        cards=expand(f"{CARDS_DIR}/card.json", dataset=CFG.datasets),
        robustness=[f"{paths.robustness_dir(run.path)}/robustness.json" for run in CFG.robustness_runs()],
        rankings=[
            f"{paths.run_dir(run.path)}/run.{CFG.stability['protocol']}.trec.gz"
            for _, runs in STABILITY_GROUPS
            for run in runs
        ],
        trainings=[f"{paths.checkpoint_dir(t.path)}/train.json" for t in CFG.trainings()],
        summaries=[f"{paths.run_dir(run.path)}/summaries.jsonl" for run in CFG.summary_runs()],
    output:
        summary=STUDY_SUMMARY,
        stability=f"{paths.stability_dir(STUDY).as_posix()}/index.json",
        seed_records=[
            f"{paths.stability_dir(STUDY, group.path).as_posix()}/stability.json" for group, _ in STABILITY_GROUPS
        ],
        heatmaps=[
            report(
                f"{paths.stability_dir(STUDY, group.path).as_posix()}/heatmap.png",
                caption="../report/heatmap.rst",
                category="Seed stability (COBE Fig. 5)",
                labels=dataclasses.asdict(group),
            )
            for group, _ in STABILITY_GROUPS
        ],
        figures=report(
            directory(f"{STUDY_DIR}/{FIGURES_DIR}"),
            patterns=["{name}.png"],
            caption="../report/figure.rst",
            category=lambda w: FIGURE_CATEGORIES[w.name.split("/")[0]],
            labels=lambda w: dict(zip(("figure", "of"), w.name.split("/", 1))),
        ),
        tables=report(
            directory(f"{STUDY_DIR}/{TABLES_DIR}"),
            patterns=["{name}.html"],
            caption="../report/table.rst",
            category="Tables",
            labels=lambda wildcards: {"table": wildcards.name},
        ),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("aggregate"),
        study=tracked("study"),
        stability=tracked("stability"),
        protocols=tracked("evaluation", "protocols"),
        captions={spec.name: spec.caption for spec in FIGURE_SPECS},  # workflow/report/figure.rst
    log:
        f"logs/studies/{STUDY}/aggregate.log",
    conda:
        ENV
    shell:
        csbench_call("aggregate")
