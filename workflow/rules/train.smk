# Training (issue #6): each model of grid.trained on a dataset's attacked train split, per loss and
# seed. A not_confused run evaluates the model trained on no_comment, so that model is trained once
# and shared by every attack. The `index` rule reads the best checkpoint.
#
# Processes (issue #9): one, unless the job has several GPUs (`gpu: N`, or `gres: gpu:N`, as the slurm
# profile sets them) or asks for several CPU processes (`cpu_processes: N`, e.g.
# `--set-resources train:cpu_processes=2`); then `accelerate launch` starts N (train_launch in
# common.smk, csbench.launch).


rule train:
    input:
        train=f"{ATTACKED_DIR}/train.parquet",
        valid=f"{ATTACKED_DIR}/valid.parquet",
    output:
        best=directory(f"{CHECKPOINT_DIR}/best"),
        record=f"{CHECKPOINT_DIR}/train.json",
    params:
        launch=train_launch,
        configs=untracked(CONFIG_ARGS),
        code=lambda w: paths.code_digest("train-summarizer") if w.model in SUMMARIZERS else paths.code_digest("train"),
        model=lambda w: tracked("models", w.model),
        training=lambda w: training_read(w.model),
        loss=lambda w: tracked("loss_params", w.loss),
    threads: workflow.cores  # one training at a time uses the whole machine; a profile sets GPUs
    resources:
        cpu_processes=1,  # training processes when the job has no GPU (`--set-resources train:cpu_processes=N`)
    log:
        f"logs/train/{TRAIN_KEY}.log",
    conda:
        ENV
    shell:
        csbench_call("train", TRAIN_ARGS, cli="{params.launch}")
