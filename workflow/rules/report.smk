localrules:
    aggregate,


rule aggregate:
    input:
        metrics=[f"{paths.run_dir(run.path)}/metrics.json" for run in RUNS],
    output:
        summary=expand("results/{name}", name=SUMMARY_FILES),
    params:
        study=tracked("study"),
    log:
        "logs/aggregate.log",
    shell:
        "{CSBENCH} aggregate {CONFIG_ARGS} > {log} 2>&1"
