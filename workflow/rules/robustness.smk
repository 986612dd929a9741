# Query perturbations (COBE; issue #5): the perturbed query sets of each perturbation (every ratio in
# one job: nlpaug's import alone takes seconds), the points of each run's robustness curves (one job
# a run: its pools come encoded from the `index` rule, loaded once for every point), and the curves.

POINTS = CFG.perturbation_points()
PERTURBED = sorted({p for p, _ in POINTS})


rule perturb:
    input:
        test="data/prepared/{dataset}/test.parquet",
    output:
        queries=directory("data/perturbed/{dataset}/{perturbation}"),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("perturb"),
        seed=tracked("robustness", "seed"),
        ratios=ratios_read,
    log:
        "logs/perturb/{dataset}/{perturbation}.log",
    conda:
        ENV
    shell:
        "{params.cli} perturb {params.configs} --dataset {wildcards.dataset} "
        "--perturbation {wildcards.perturbation} > {log} 2>&1"


rule robust:
    input:
        test="data/attacked/{dataset}/{attack}/test.parquet",
        codebase="data/attacked/{dataset}/{attack}/codebase.parquet",
        index="results/index/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/index.json",
        queries=expand("data/perturbed/{{dataset}}/{perturbation}", perturbation=PERTURBED),
    output:
        points=[
            f"results/robustness/{{dataset}}/{{attack}}/{{model}}/{{loss}}/{{seed}}/{{inference}}/points/{p}/{paths.ratio_label(r)}.json"
            for p, r in POINTS
        ],
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("robust"),
        protocol=tracked("robustness", "protocol"),
    threads: encoder_threads
    log:
        "logs/robust/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}.log",
    conda:
        ENV
    shell:
        "{params.cli} robust {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} "
        "--model {wildcards.model} --loss {wildcards.loss} --seed {wildcards.seed} "
        "--inference {wildcards.inference} > {log} 2>&1"


rule robustness:
    input:
        ranks="results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/ranks.tsv",
        points=[
            f"results/robustness/{{dataset}}/{{attack}}/{{model}}/{{loss}}/{{seed}}/{{inference}}/points/{p}/{paths.ratio_label(r)}.json"
            for p, r in POINTS
        ],
    output:
        record="results/robustness/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/robustness.json",
        plot=report(
            "results/robustness/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}/robustness.png",
            caption="../report/robustness.rst",
            category="Robustness (COBE Fig. 1)",
            subcategory="{dataset} / {attack}",
            labels={"model": "{model}", "loss": "{loss}", "seed": "{seed}", "inference": "{inference}"},
        ),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
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
