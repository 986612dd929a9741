# Retrieval (issues #3, #23): each run's pools encoded once (`index`), then searched and scored under
# every protocol of evaluation.protocols (`evaluate`).


rule encode_shard:
    input:
        unpack(checkpoint_input),
        test=f"{ATTACKED_DIR}/test.parquet",
        codebase=f"{ATTACKED_DIR}/codebase.parquet",
        valid=f"{ATTACKED_DIR}/valid.parquet",
    output:
        record=f"{ENCODED_DIR}/{{shard}}-of-{{shards}}.json",
    wildcard_constraints:
        model=models_of(SEARCH_MODELS),
        shard=r"\d+",
        shards=r"\d+",
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("index"),
        model=lambda w: tracked("models", w.model),
    log:
        f"logs/encode_shard/{RUN_KEY}/{{shard}}-of-{{shards}}.log",
    conda:
        ENV
    shell:
        csbench_call("encode-shard", f"{RUN_ARGS} --shard {{wildcards.shard}} --shards {{wildcards.shards}}")


rule index:
    input:
        unpack(checkpoint_input),
        unpack(encode_shard_inputs),
        test=f"{ATTACKED_DIR}/test.parquet",
        codebase=f"{ATTACKED_DIR}/codebase.parquet",
        valid=f"{ATTACKED_DIR}/valid.parquet",
    output:
        index=f"{INDEX_DIR}/index.json",
    wildcard_constraints:
        model=models_of(SEARCH_MODELS),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("index"),
        model=lambda w: tracked("models", w.model),
        protocols=tracked("evaluation", "protocols"),
    log:
        run_log("index"),
    conda:
        ENV
    shell:
        csbench_call("index", RUN_ARGS)


rule evaluate:
    input:
        unpack(matching_inputs),
        unpack(qrels_inputs),
        test=f"{ATTACKED_DIR}/test.parquet",
        codebase=f"{ATTACKED_DIR}/codebase.parquet",
        index=f"{INDEX_DIR}/index.json",
        valid=f"{ATTACKED_DIR}/valid.parquet",
    output:
        metrics=f"{RUN_DIR}/metrics.json",
        provenance=f"{RUN_DIR}/provenance.json",
        ranks=f"{RUN_DIR}/ranks.tsv",
        trec=expand(f"{kept(RUN_DIR)}/run.{{protocol}}.trec.gz", protocol=CFG.ranking_protocols),
        graded=expand(f"{kept(RUN_DIR)}/qrels.{{protocol}}.tsv", protocol=CFG.graded_protocols),
        matching=expand(f"{kept(RUN_DIR)}/{{protocol}}.tsv", protocol=CFG.matching_protocols),
    wildcard_constraints:
        model=models_of(SEARCH_MODELS),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("evaluate"),
        model=lambda w: tracked("models", w.model),
        evaluation=tracked("evaluation"),
    log:
        run_log("evaluate"),
    conda:
        ENV
    shell:
        csbench_call("evaluate", RUN_ARGS)
