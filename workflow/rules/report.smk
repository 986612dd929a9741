localrules:
    aggregate,


rule aggregate:
    input:
        metrics=[f"{paths.run_dir(run.path)}/metrics.json" for run in RUNS],
        cards=expand("results/datasets/{dataset}/card.json", dataset=CFG.datasets),
        robustness=[f"{paths.robustness_dir(run.path)}/robustness.json" for run in CFG.robustness_runs()],
        rankings=[
            f"{paths.run_dir(run.path)}/run.{CFG.stability['protocol']}.trec.gz"
            for _, runs in STABILITY_GROUPS
            for run in runs
        ],
    output:
        summary=expand("results/{name}", name=SUMMARY_FILES),
        stability=f"{paths.STABILITY}/index.json",
        seed_records=[f"{paths.stability_dir(group.path)}/{name}" for group, _ in STABILITY_GROUPS for name in ("stability.json", "heatmap.png")],
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("aggregate"),
        study=tracked("study"),
        stability=tracked("stability"),
        protocols=tracked("evaluation", "protocols"),
    log:
        "logs/aggregate.log",
    conda:
        ENV
    shell:
        "{params.cli} aggregate {params.configs} > {log} 2>&1"
