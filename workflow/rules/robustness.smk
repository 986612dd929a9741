# Query perturbations (COBE; issue #5): the perturbed query sets of each perturbation (every ratio in
# one job: nlpaug's import alone takes seconds), the points of each run's robustness curves (one job
# a run: its pools come encoded from the `index` rule, loaded once for every point), and the curves.

POINTS = CFG.perturbation_points()
PERTURBED = sorted({p for p, _ in POINTS})
# One run's robustness points: a file per (perturbation, ratio), the run's wildcards kept.
ROBUST_POINTS = [f"{ROBUSTNESS_DIR}/points/{p}/{paths.ratio_label(r)}.json" for p, r in POINTS]
# A graded robustness protocol's clean per-query measures (its nDCG@10 curves start there).
_ROBUST_PROTOCOL = CFG.robustness.get("protocol", "full-corpus")
ROBUST_GRADED = [f"{RUN_DIR}/qrels.{_ROBUST_PROTOCOL}.tsv"] if PROTOCOLS.get(_ROBUST_PROTOCOL).graded else []


rule perturb:
    input:
        test=f"{PREPARED_DIR}/test.parquet",
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
        csbench_call("perturb", "--dataset {wildcards.dataset} --perturbation {wildcards.perturbation}")


rule robust:
    input:
        unpack(robust_qrels_inputs),
        test=f"{ATTACKED_DIR}/test.parquet",
        codebase=f"{ATTACKED_DIR}/codebase.parquet",
        index=f"{INDEX_DIR}/index.json",
        queries=expand("data/perturbed/{{dataset}}/{perturbation}", perturbation=PERTURBED),
    output:
        points=ROBUST_POINTS,
    params:
        cli=untracked(CSBENCH),
        configs=untracked(CONFIG_ARGS),
        code=paths.code_digest("robust"),
        protocol=tracked("robustness", "protocol"),
    threads: encoder_threads
    log:
        run_log("robust"),
    conda:
        ENV
    shell:
        csbench_call("robust", RUN_ARGS)


rule robustness:
    input:
        ranks=f"{RUN_DIR}/ranks.tsv",
        graded=ROBUST_GRADED,
        points=ROBUST_POINTS,
    output:
        record=f"{ROBUSTNESS_DIR}/robustness.json",
        plot=report(
            f"{ROBUSTNESS_DIR}/robustness.png",
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
        run_log("robustness"),
    conda:
        ENV
    shell:
        csbench_call("robustness", RUN_ARGS)
