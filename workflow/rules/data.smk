rule prepare:
    output:
        splits=expand("data/prepared/{{dataset}}/{split}.parquet", split=SPLITS),
        card="data/prepared/{dataset}/card.json",
        card_md="data/prepared/{dataset}/card.md",
    params:
        dataset=lambda w: tracked("datasets", w.dataset),
        extraction=tracked("extraction"),
    log:
        "logs/prepare/{dataset}.log",
    shell:
        "{CSBENCH} prepare {CONFIG_ARGS} --dataset {wildcards.dataset} > {log} 2>&1"
