rule attack:
    input:
        splits=expand(f"{kept(PREPARED_DIR)}/{{split}}.parquet", split=SPLITS),
    output:
        splits=expand(f"{kept(ATTACKED_DIR)}/{{split}}.parquet", split=SPLITS),
        report=f"{ATTACKED_DIR}/attack.json",
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
        csbench_call("attack", "--dataset {wildcards.dataset} --attack {wildcards.attack} --jobs {threads}")
