rule attack:
    input:
        splits=expand("data/prepared/{{dataset}}/{split}.parquet", split=SPLITS),
    output:
        splits=expand("data/attacked/{{dataset}}/{{attack}}/{split}.parquet", split=SPLITS),
    log:
        "logs/attack/{dataset}/{attack}.log",
    shell:
        "{CSBENCH} attack {CONFIG_ARGS} --dataset {wildcards.dataset} --attack {wildcards.attack} > {log} 2>&1"
