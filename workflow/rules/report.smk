localrules:
    aggregate,


rule aggregate:
    input:
        metrics=[f"{paths.run_dir(run.path)}/metrics.json" for run in RUNS],
        cards=expand("results/datasets/{dataset}/card.json", dataset=CFG.datasets),
        robustness=[f"{paths.robustness_dir(run.path)}/robustness.json" for run in CFG.robustness_runs()],
    output:
        summary=expand("results/{name}", name=SUMMARY_FILES),
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("aggregate"),
        study=tracked("study"),
    log:
        "logs/aggregate.log",
    conda:
        ENV
    shell:
        "{params.cli} aggregate {params.configs} > {log} 2>&1"
