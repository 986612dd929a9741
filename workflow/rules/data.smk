# download fetches files (or lists a local corpus): no CPU to speak of, and on a cluster the login
# node is often the only one with internet, so it runs where snakemake runs (local-cores), not as a job.
localrules:
    download,


rule download:
    output:
        manifest="data/raw/{dataset}/MANIFEST.json",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("download"),
        dataset=lambda w: tracked("datasets", w.dataset),
    log:
        "logs/download/{dataset}.log",
    retries: 2
    conda:
        ENV
    shell:
        "{params.cli} download {params.configs} --dataset {wildcards.dataset} > {log} 2>&1"


rule prepare:
    input:
        manifest="data/raw/{dataset}/MANIFEST.json",
    output:
        splits=expand("data/prepared/{{dataset}}/{split}.parquet", split=SPLITS),
        card="data/prepared/{dataset}/card.json",
        card_md="data/prepared/{dataset}/card.md",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("prepare"),
        dataset=lambda w: tracked("datasets", w.dataset),
        extraction=tracked("extraction"),
    log:
        "logs/prepare/{dataset}.log",
    threads: workflow.cores
    conda:
        ENV
    shell:
        "{params.cli} prepare {params.configs} --dataset {wildcards.dataset} --jobs {threads} > {log} 2>&1"


rule audit:
    input:
        splits=expand("data/prepared/{{dataset}}/{split}.parquet", split=SPLITS),
        card="data/prepared/{dataset}/card.json",
    output:
        card="results/datasets/{dataset}/card.json",
        card_md="results/datasets/{dataset}/card.md",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("audit"),
    log:
        "logs/audit/{dataset}.log",
    threads: workflow.cores
    conda:
        ENV
    shell:
        "{params.cli} audit {params.configs} --dataset {wildcards.dataset} --jobs {threads} > {log} 2>&1"
