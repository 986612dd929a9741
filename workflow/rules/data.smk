from csbench.datasets.download import config_changes

RAW_ROOT = paths.raw_dir("_").parent  # data/raw


# download fetches files (or lists a local corpus): no CPU to speak of, and on a cluster the login
# node is often the only one with internet, so it runs where snakemake runs (local-cores), not as a job.
localrules:
    download,


# SHA256SUMS (the checksums of every file the reader reads) is written only when they are all present
# and verified. It is the output, not MANIFEST.json: snakemake deletes the output of a failed or re-run
# job, and MANIFEST.json keeps the checksums recorded on first use. raw_changes: how the files the
# reader reads differ from what MANIFEST.json recorded ("" when they do not; a stat per file, a checksum
# only where size or time changed): a file replaced by hand, whatever its modification time, re-runs
# download, which stops until the change is accepted (`csbench download ... --accept-changed`); so it
# is "" whenever download succeeds, and a later run finds nothing to do. (A file found with a new time
# and the recorded content gets the new time noted in MANIFEST.json, so it is not measured again.)
rule download:
    output:
        sums=f"{RAW_DIR}/SHA256SUMS",
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("download"),
        dataset=lambda w: tracked("datasets", w.dataset),
        raw_changes=lambda w: config_changes(CFG, w.dataset, RAW_ROOT),
    log:
        "logs/download/{dataset}.log",
    retries: 2
    conda:
        ENV
    shell:
        csbench_call("download", "--dataset {wildcards.dataset}")


rule prepare:
    input:
        sums=f"{RAW_DIR}/SHA256SUMS",
    output:
        splits=expand(f"{kept(PREPARED_DIR)}/{{split}}.parquet", split=SPLITS),
        card=f"{PREPARED_DIR}/card.json",
        card_md=f"{PREPARED_DIR}/card.md",
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("prepare"),
        dataset=lambda w: tracked("datasets", w.dataset),
        extraction=tracked("extraction"),
    log:
        "logs/prepare/{dataset}.log",
    threads: workflow.cores
    conda:
        ENV
    shell:
        csbench_call("prepare", "--dataset {wildcards.dataset} --jobs {threads}")


rule audit:
    input:
        splits=expand(f"{kept(PREPARED_DIR)}/{{split}}.parquet", split=SPLITS),
        card=f"{PREPARED_DIR}/card.json",
    output:
        card=f"{CARDS_DIR}/card.json",
        card_md=f"{CARDS_DIR}/card.md",
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("audit"),
    log:
        "logs/audit/{dataset}.log",
    threads: workflow.cores
    conda:
        ENV
    shell:
        csbench_call("audit", "--dataset {wildcards.dataset} --jobs {threads}")
