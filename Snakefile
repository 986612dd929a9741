# csbench: the Snakemake driver. Thin rules, each calling one `csbench` command.
#   snakemake --cores all                                          # the default study (params.yaml)
#   snakemake --cores 2 --configfile workflow/configs/tiny.yaml    # another study, as an overlay
from snakemake.utils import min_version

min_version("9.0")


# params.yaml (+ any --configfile overlays) is read and validated by csbench in common.smk, so a
# malformed file or an unknown name stops here, with the file, line and key, before any job.
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/attacks.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/summarize.smk"
include: "workflow/rules/robustness.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/dataset_table.smk"


# Each study's default target is its own folder, results/studies/<study>/ (STUDY_DIR), which its
# `aggregate` writes from its runs: a study whose runs have not run plans them all, whatever another
# study left in results/, and the results of several studies coexist.
rule all:
    input:
        summary=STUDY_SUMMARY,
        dataset_table=DATASET_TABLE_FILES,
    default_target: True
