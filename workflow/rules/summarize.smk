# Code summarization (issue #25): each run of grid.summarization generates a summary of every test
# function of its (attacked) split with its summarizer, trained by the `train` rule (loss xent) or as
# released (zero-shot), and scores them with BLEU into results/runs/<run>/ (summaries.jsonl,
# metrics.json, provenance.json), beside the search runs; `aggregate` puts both in one database.


rule summarize:
    input:
        unpack(checkpoint_input),
        test=f"{ATTACKED_DIR}/test.parquet",
    output:
        summaries=f"{RUN_DIR}/summaries.jsonl",
        metrics=f"{RUN_DIR}/metrics.json",
        provenance=f"{RUN_DIR}/provenance.json",
    wildcard_constraints:
        model=models_of(SUMMARIZERS),
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("summarize"),
        model=lambda w: tracked("models", w.model),
        metrics=tracked("grid", "summarization", "extra_metrics"),
    threads: lambda wildcards: min(workflow.cores, ENCODER_THREADS)
    log:
        run_log("summarize"),
    conda:
        ENV
    shell:
        csbench_call("summarize", RUN_ARGS)
