rule prepare:
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
