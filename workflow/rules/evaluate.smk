rule index:
    input:
        unpack(checkpoint_input),
        test="data/attacked/{dataset}/{attack}/test.parquet",
        codebase="data/attacked/{dataset}/{attack}/codebase.parquet",
        valid="data/attacked/{dataset}/{attack}/valid.parquet",
    output:
        index="results/index/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/index.json",
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("index"),
        model=lambda w: tracked("models", w.model),
        protocols=tracked("evaluation", "protocols"),
    log:
        "logs/index/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}.log",
    conda:
        ENV
    shell:
        "{params.cli} index {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} "
        "--model {wildcards.model} --loss {wildcards.loss} --seed {wildcards.seed} "
        "--inference {wildcards.inference} > {log} 2>&1"


rule evaluate:
    input:
        unpack(matching_inputs),
        test="data/attacked/{dataset}/{attack}/test.parquet",
        codebase="data/attacked/{dataset}/{attack}/codebase.parquet",
        index="results/index/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/index.json",
        valid="data/attacked/{dataset}/{attack}/valid.parquet",
    output:
        metrics="results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/metrics.json",
        provenance="results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/provenance.json",
        ranks="results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/ranks.tsv",
        trec=expand(
            "results/runs/{{dataset}}/{{attack}}/{{model}}/{{loss}}/{{seed}}/{{inference}}/run.{protocol}.trec.gz",
            protocol=CFG.ranking_protocols,
        ),
        matching=expand(
            "results/runs/{{dataset}}/{{attack}}/{{model}}/{{loss}}/{{seed}}/{{inference}}/{protocol}.tsv",
            protocol=CFG.matching_protocols,
        ),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("evaluate"),
        model=lambda w: tracked("models", w.model),
        evaluation=tracked("evaluation"),
    log:
        "logs/evaluate/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}.log",
    conda:
        ENV
    shell:
        "{params.cli} evaluate {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} "
        "--model {wildcards.model} --loss {wildcards.loss} --seed {wildcards.seed} "
        "--inference {wildcards.inference} > {log} 2>&1"
