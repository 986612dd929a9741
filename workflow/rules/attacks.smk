rule attack:
    input:
        splits=expand("data/prepared/{{dataset}}/{split}.parquet", split=SPLITS),
    output:
        splits=expand("data/attacked/{{dataset}}/{{attack}}/{split}.parquet", split=SPLITS),
        report="data/attacked/{dataset}/{attack}/attack.json",
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("attack"),
        attack=lambda w: json.dumps(CFG.attack_params(w.attack), sort_keys=True),
    log:
        "logs/attack/{dataset}/{attack}.log",
    threads: workflow.cores
    conda:
        ENV
    shell:
        "{params.cli} attack {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} --jobs {threads} > {log} 2>&1"
