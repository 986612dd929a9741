# Query perturbations (COBE; issue #5): perturbed query sets, one point of a robustness curve per
# run x perturbation x ratio (the run's pools come encoded from the `index` rule), and the curves.

POINTS = CFG.perturbation_points()


rule perturb:
    input:
        test="data/prepared/{dataset}/test.parquet",
    output:
        queries="data/perturbed/{dataset}/{perturbation}/{ratio}/queries.parquet",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("perturb"),
        seed=tracked("robustness", "seed"),
    log:
        "logs/perturb/{dataset}/{perturbation}/{ratio}.log",
    conda:
        ENV
    shell:
        "{params.cli} perturb {params.configs} --dataset {wildcards.dataset} "
        "--perturbation {wildcards.perturbation} --ratio {wildcards.ratio} > {log} 2>&1"


rule robust:
    input:
        test="data/attacked/{dataset}/{attack}/test.parquet",
        codebase="data/attacked/{dataset}/{attack}/codebase.parquet",
        index="results/index/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/index.pkl",
        queries="data/perturbed/{dataset}/{perturbation}/{ratio}/queries.parquet",
    output:
        point="results/robustness/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/points/{perturbation}/{ratio}.json",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("robust"),
        protocol=tracked("robustness", "protocol"),
    log:
        "logs/robust/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/{perturbation}/{ratio}.log",
    conda:
        ENV
    shell:
        "{params.cli} robust {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} "
        "--model {wildcards.model} --loss {wildcards.loss} --seed {wildcards.seed} "
        "--inference {wildcards.inference} --perturbation {wildcards.perturbation} --ratio {wildcards.ratio} "
        "> {log} 2>&1"


rule robustness:
    input:
        ranks="results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/ranks.tsv",
        points=[
            f"results/robustness/{{dataset}}/{{attack}}/{{model}}/{{loss}}/{{seed}}/{{inference}}/points/{p}/{paths.ratio_label(r)}.json"
            for p, r in POINTS
        ],
    output:
        record="results/robustness/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/robustness.json",
        plot="results/robustness/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/robustness.png",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("robustness"),
        robustness=tracked("robustness"),
    log:
        "logs/robustness/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}.log",
    conda:
        ENV
    shell:
        "{params.cli} robustness {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} "
        "--model {wildcards.model} --loss {wildcards.loss} --seed {wildcards.seed} "
        "--inference {wildcards.inference} > {log} 2>&1"
