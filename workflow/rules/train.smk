# Training (issue #6): each model of grid.trained on a dataset's attacked train split, per loss and
# seed. A not_confused run evaluates the model trained on no_comment, so that model is trained once
# and shared by every attack. The `index` rule reads the best checkpoint.


rule train:
    input:
        train="data/attacked/{dataset}/{attack}/train.parquet",
        valid="data/attacked/{dataset}/{attack}/valid.parquet",
    output:
        best=directory("checkpoints/{dataset}/{attack}/{model}/{loss}/{seed}/best"),
        record="checkpoints/{dataset}/{attack}/{model}/{loss}/{seed}/train.json",
    params:
        cli=CSBENCH,
        configs=CONFIG_ARGS,
        code=paths.code_digest("train"),
        model=lambda w: tracked("models", w.model),
        training=tracked("training"),
        loss=lambda w: tracked("loss_params", w.loss),
    threads: workflow.cores  # one training at a time uses the whole machine; a profile sets GPUs
    log:
        "logs/train/{dataset}/{attack}/{model}/{loss}/{seed}.log",
    conda:
        ENV
    shell:
        "{params.cli} train {params.configs} --dataset {wildcards.dataset} --attack {wildcards.attack} "
        "--model {wildcards.model} --loss {wildcards.loss} --seed {wildcards.seed} > {log} 2>&1"
