# GeCS Table 1 (issue #23 item 4): pairs, average query / code tokens of each dataset's test split and
# the total variation distance of their token distributions to the reference (fine-tuning) set, for a
# study whose config has a `dataset_table` section (workflow/configs/gecs.yaml); none otherwise. It reads
# the prepared splits only, so it runs beside the trainings, and is the study's own output.
from csbench.results.dataset_table import DIR_NAME as DATASET_TABLE_DIR
from csbench.results.dataset_table import SUFFIXES as DATASET_TABLE_SUFFIXES
from csbench.results.dataset_table import TABLE_NAME as DATASET_TABLE_NAME

DATASET_TABLE = CFG.dataset_table
DATASET_TABLE_FILES = (
    [f"{STUDY_DIR}/{DATASET_TABLE_DIR}/{DATASET_TABLE_NAME}{suffix}" for suffix in DATASET_TABLE_SUFFIXES]
    if DATASET_TABLE is not None
    else []
)


if DATASET_TABLE is not None:

    rule dataset_table:
        input:
            tests=expand(f"{PREPARED_DIR}/test.parquet", dataset=CFG.datasets),
            reference=f"{paths.prepared_dir(DATASET_TABLE['reference']).as_posix()}/{DATASET_TABLE['reference_split']}.parquet",
        output:
            DATASET_TABLE_FILES,
        params:
            cli=untracked(CSBENCH),
            configs=untracked(CONFIG_ARGS),
            code=paths.code_digest("dataset-table"),
            table=tracked("dataset_table"),
            datasets=tracked("grid", "datasets"),
        log:
            f"logs/studies/{STUDY}/dataset_table.log",
        conda:
            ENV
        shell:
            csbench_call("dataset-table")
