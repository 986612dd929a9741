rule attack:
    input:
        splits=expand("data/prepared/{{dataset}}/{split}.parquet", split=SPLITS),
    output:
        splits=expand("data/attacked/{{dataset}}/{{attack}}/{split}.parquet", split=SPLITS),
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("attack"),
        attack=lambda w: tracked("attack_params", w.attack),
    log:
        "logs/attack/{dataset}/{attack}.log",
    conda:
        ENV
    shell:
        "{params.cli} attack {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} > {log} 2>&1"
