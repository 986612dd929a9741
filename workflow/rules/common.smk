# Shared Python for the rules: validate the config before any job, grid, wildcard constraints.
import json
import os
import re
import shlex
import sys

from csbench import launch, paths
from csbench.config import (
    INFERENCE_TYPES,
    SUMMARY_LOSS,
    ConfigError,
    RunKey,
    check_sources,
    keyless_warnings,
    load_config,
)
from csbench.evaluate.protocols import PROTOCOLS
from csbench.models import remote_code_warnings


def _config_files():
    """The config files snakemake merged, in order: params.yaml, then any --configfile."""
    files = ["params.yaml", *map(str, workflow.overwrite_configfiles)]
    return list(dict.fromkeys(files))


CONFIG_FILES = _config_files()
try:
    if workflow.config_settings.config:
        raise ConfigError(
            "command-line --config KEY=VALUE overrides are not supported (the csbench jobs would not "
            "see them); put the change in a config file and pass it with --configfile"
        )
    CFG = load_config(CONFIG_FILES)
    check_sources(CFG)
except ConfigError as err:
    sys.exit(f"csbench: invalid config: {err}")
for _warning in remote_code_warnings(CFG):  # said before any job runs a model's own code (README)
    print(f"csbench: warning: {_warning}", file=sys.stderr)
for _warning in keyless_warnings(CFG):  # api.missing_key: skip (an endpoint model whose key is not set)
    print(f"csbench: warning: {_warning}", file=sys.stderr)
if "--dry-run" in sys.argv or "-n" in sys.argv:  # what the endpoint models would call, before any request
    from csbench.api.study import endpoint_lines

    _configs = " ".join(f"--config {shlex.quote(f)}" for f in CONFIG_FILES)
    for _line in endpoint_lines(CFG, f"csbench api-estimate {_configs}"):
        print(f"csbench: {_line}", file=sys.stderr)
config.clear()
config.update(CFG.raw)

# One driver at a time (csbench.lock): a run holds the project lock (and DVC's repository lock) from
# here to its end, and its jobs join it; a second driver is refused with one line naming this one.
# Then every output of the study whose stamp does not match this config (made by another study or
# driver) or whose files changed since they were made is removed, so this run re-makes it
# (csbench.lineage.repair). Dry runs and the commands that run no job do neither.
try:
    from csbench.lineage import repair
    from csbench.lock import ProjectLockError, hold_for_snakemake

    DRIVER_HOLD = hold_for_snakemake(workflow.remote_exec or workflow.subprocess_exec)
except ProjectLockError as err:
    sys.exit(f"csbench: {err}")
if DRIVER_HOLD is not None:
    for _line in repair(CFG):
        print(f"csbench: {_line}", file=sys.stderr)


def _python():
    """The interpreter jobs run csbench with: this one, or the conda env's python under --sdm conda."""
    methods = getattr(workflow.deployment_settings, "deployment_method", ()) or ()
    if any("conda" in str(m).lower() for m in methods):
        return "python"
    return shlex.quote(sys.executable)


PYTHON = _python()
CSBENCH = f"{PYTHON} -m csbench --quiet"
ENV = "../envs/csbench.yaml"


def _on_command_line(path):
    """A config file as the jobs' command line names it: relative to the project when it is inside
    (snakemake makes every --configfile absolute), else as it is."""
    relative = os.path.relpath(path)
    return path if relative == ".." or relative.startswith("../") else relative


CONFIG_ARGS = " ".join(f"--config {shlex.quote(_on_command_line(f))}" for f in CONFIG_FILES)


# The templates of the rules (each one is inputs -> one CLI call -> outputs); the paths and
# arguments that name a run are written here once, from csbench.paths, which the CLI and
# dvc.yaml use too.
RUN_KEY = paths.RUN_KEY  # {dataset}/{attack}/{model}/{loss}/{seed}/{inference}
TRAIN_KEY = paths.TRAIN_KEY  # {dataset}/{attack}/{model}/{loss}/{seed}
RUN_DIR = paths.RUN  # results/runs/<run>: metrics, ranks, TREC runs, provenance
INDEX_DIR = paths.INDEX.format(run=RUN_KEY)  # results/index/<run>
ENCODED_DIR = paths.ENCODED.format(run=RUN_KEY)  # results/encoded/<run>: encode_shard's records
ROBUSTNESS_DIR = paths.ROBUSTNESS.format(run=RUN_KEY)  # results/robustness/<run>
CHECKPOINT_DIR = paths.CHECKPOINT.format(train=TRAIN_KEY)  # checkpoints/<training>
PREPARED_DIR = paths.PREPARED  # data/prepared/{dataset}
ATTACKED_DIR = paths.ATTACKED  # data/attacked/{dataset}/{attack}
RAW_DIR = paths.RAW  # data/raw/{dataset}
CARDS_DIR = paths.CARDS  # results/datasets/{dataset}
RUN_ARGS = " ".join(f"--{name} {{wildcards.{name}}}" for name in paths.RUN_WILDCARDS)
TRAIN_ARGS = " ".join(f"--{name} {{wildcards.{name}}}" for name in paths.RUN_WILDCARDS[:-1])


def kept(pattern):
    """``pattern`` inside expand() or an f-string list: its wildcards stay the rule's wildcards."""
    return pattern.replace("{", "{{").replace("}", "}}")


def run_log(phase):
    """The log of a per-run job of ``phase``."""
    return f"logs/{phase}/{RUN_KEY}.log"


def csbench_call(command, arguments="", cli="{params.cli}"):
    """A rule's one shell command: ``csbench <command> <config files> <arguments>``, its output
    to the rule's log (``cli``: the param that starts csbench, e.g. train's accelerate launcher)."""
    return " ".join([cli, command, "{params.configs}", *([arguments] if arguments else []), "> {log} 2>&1"])


def untracked(value):
    """``value`` as a param that snakemake does not record (rerun-triggers: params): a param given as
    a function of the job's ``input`` counts as derived from the job's files, and snakemake compares
    only the others. For what says where a file or program is, not what a job computes: the config
    files' paths and the interpreter's. What each job reads of the config is tracked by content
    (``tracked``), so a moved or copied checkout re-runs nothing (issue #22 item 9), while a changed
    setting re-runs exactly the jobs that read it."""

    def value_of(wildcards, input):
        return value

    return value_of


# The study's own folder (results/studies/<study>/, from the config's `study`): its summaries and
# database are the default target, so each study plans its own runs and none replaces another's.
STUDY = CFG.study
STUDY_DIR = paths.study_dir(STUDY).as_posix()
STUDY_SUMMARY = [f"{STUDY_DIR}/{name}" for name in paths.SUMMARY_FILES]
STABILITY_GROUPS = CFG.stability_groups()
SPLITS = paths.ALL_SPLITS
RUNS = CFG.runs()


def _alternatives(names):
    return "|".join(map(re.escape, names))


# The task axis (issue #25): a run of a summarizer (grid.summarization) is written by `summarize`, a
# search run's by `evaluate`; both into results/runs/<run>/. Each rule's model wildcard is limited
# to its task's models, so the two never compete for one run's metrics.json.
SUMMARIZERS = list(dict.fromkeys(CFG.summarization["zero_shot"] + CFG.summarization["models"]))
SEARCH_MODELS = list(dict.fromkeys(CFG.models + CFG.trained["models"]))
NO_MODEL = "(?!)"  # matches nothing: a rule with no model of its task in the study


SEARCH_TRAININGS = [key for key in CFG.trainings() if key.model not in SUMMARIZERS]


def training_read(model):
    """The training regime a train job reads, as JSON: `training` for a retrieval model (its own
    overrides are under its models.<name> param), a summarizer's registered regime overlaid with
    models.<name>.training (csbench.config.Config.training_params)."""
    if model in SUMMARIZERS:
        return json.dumps(CFG.training_params(model), sort_keys=True)
    return tracked("training")


def models_of(names):
    """A model wildcard constraint matching exactly ``names`` (nothing when there are none)."""
    return _alternatives(names) if names else NO_MODEL


def checkpoint_input(w):
    """The trained encoder a run evaluates ({} for zero-shot runs): trained on the run's dataset, or
    once on another (inference confused@<dataset>, grid.trained.evaluate_on) for every dataset it is
    evaluated on, so one train job feeds the index jobs of all of them."""
    run = RunKey.parse(w.dataset, w.attack, w.model, w.loss, int(w.seed), w.inference)
    if run.training is None:
        return {}
    return {"checkpoint": f"{paths.checkpoint_dir(run.training.path)}/best"}


def encode_shard_inputs(w):
    """The encode_shard jobs a run's index job waits for (encoding.shards > 1, a bi-encoder, the embedding
    cache on): each encodes a part of its pools into the cache, and index reads them from there."""
    shards = CFG.encoding["shards"]
    if shards < 2 or CFG.embedding_cache["dir"] is None or CFG.model_spec(w.model).family not in ("csn", "hf"):
        return {}
    run = paths.ENCODED.format(run="/".join(getattr(w, name) for name in paths.RUN_WILDCARDS))
    return {"shards": [f"{run}/{shard}-of-{shards}.json" for shard in range(shards)]}


def matching_inputs(w):
    """What a run's matching protocol reads besides the run's own attacked split: the release's
    labelled pairs (prepare writes them beside card.json) and, for a threshold borrowed from another
    dataset (evaluation.match_threshold: {dataset: X}), X's attacked validation split."""
    if not CFG.matching_protocols:
        return {}
    inputs = {}
    if CFG.has_released_pairs(w.dataset):
        inputs["released_pairs_card"] = f"{paths.prepared_dir(w.dataset).as_posix()}/card.json"
    rule_ = CFG.match_rule
    if rule_.kind == "borrowed" and CFG.model_spec(w.model).family != "cross":
        inputs["borrowed_valid"] = f"{paths.attacked_dir(rule_.dataset, w.attack).as_posix()}/valid.parquet"
    return inputs


def qrels_inputs(w, protocols=None):
    """The dataset's relevance judgements, which a graded protocol (``qrels``) scores against:
    prepare writes qrels.parquet beside card.json (card.json holds its sha256)."""
    graded = [p for p in (protocols or CFG.ranking_protocols) if PROTOCOLS.get(p).graded]
    if not graded or not CFG.has_qrels(w.dataset):
        return {}
    return {"qrels_card": f"{paths.prepared_dir(w.dataset).as_posix()}/card.json"}


def robust_qrels_inputs(w):
    """``qrels_inputs`` of the robustness protocol."""
    return qrels_inputs(w, [CFG.robustness.get("protocol", "full-corpus")])


def train_launch(wildcards, threads, resources):
    """The command that starts csbench for a training: one process, or one per GPU / CPU process
    through accelerate launch (csbench.launch). It reads resources, so snakemake counts the param as
    derived: changing the process count does not re-run finished trainings."""
    gpus = launch.gpu_count(resources.get("gpu"), resources.get("gres"))
    return launch.train_command(PYTHON, gpus, int(resources.get("cpu_processes", 1)), threads)


ENCODER_THREADS = 4  # torch gains little beyond this on batches of short queries


def encoder_threads(wildcards):
    """Threads of a job that encodes many queries (robust): up to ENCODER_THREADS for a transformer,
    one for the others. A transformer's robust job is the longest of the default study; torch runs
    it 1.6x faster on 2 threads than on 1, and one core left idle beside it could not run the
    attack / train jobs, which take the whole machine. Under SLURM (cores: 512) it asks 4 CPUs."""
    family = CFG.model_spec(wildcards.model).family
    return min(workflow.cores, ENCODER_THREADS) if family in ("hf", "cross", "python") else 1


wildcard_constraints:
    dataset=_alternatives(CFG.datasets),
    attack=_alternatives(CFG.attacks),
    model=_alternatives(dict.fromkeys(CFG.models + CFG.trained["models"] + SUMMARIZERS)),
    loss=_alternatives(["none", *CFG.trained["losses"], *([SUMMARY_LOSS] if CFG.summarization["models"] else [])]),
    seed="[0-9]+",
    inference=_alternatives(dict.fromkeys([*INFERENCE_TYPES, *(run.label for run in RUNS)])),
    split=_alternatives(SPLITS),
    perturbation="[a-z_]+",


def tracked(*keys):
    """The config sub-tree a job reads, as JSON: a change to it (and only to it) reruns the job."""
    return json.dumps(CFG.section(*keys), sort_keys=True)


def ratios_read(wildcards):
    """The ratios a perturb job applies its perturbation at: a fixed one (question) ignores
    robustness.ratios, so adding a ratio does not re-run it."""
    fixed = wildcards.perturbation in CFG.robustness.get("fixed", [])
    return "" if fixed else tracked("robustness", "ratios")
