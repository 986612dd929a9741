#!/usr/bin/env bash
# Fetch a study's outputs from the DVC remote instead of recomputing them (`make pull`; README,
# "Sharing results through a DVC remote"). Afterwards neither `dvc repro` nor `snakemake` runs a job.
#   scripts/pull.sh                 # from the default remote
#   scripts/pull.sh --remote s3     # any other `dvc pull` option
# dvc.lock records one study, the one params.yaml names (`study:`): its summaries, database, tables
# and figures are in results/studies/<study>/. Other studies' folders there are left as they are.
# 1. `dvc pull`: every cached output dvc.lock records (data, checkpoints, run records, summaries).
# 2. `dvc status` must be clean: every output then provably matches the code, params and inputs of
#    this checkout, as recorded in dvc.lock. If not, stop: marking a stale output as up to date
#    would hide it from both drivers (run `dvc repro` instead).
# 2b. Every pulled file re-hashed against dvc.lock (python -m csbench.dvc_verify): `dvc pull` does not
#    re-hash what a remote serves and `dvc status` trusts the hashes it recorded at checkout, so a
#    corrupt or tampered object would pass both. A mismatch stops here, naming the file.
# 3. `snakemake --touch --forceall`: every job "runs" without running, in DAG order. DVC writes files
#    in no particular order, so Snakemake would see outputs older than their inputs; and a fresh
#    clone has no .snakemake/metadata, without which Snakemake cannot tell a later params or code
#    change. Touching sets the mtimes in DAG order and records the metadata of this checkout, so a
#    later change re-runs exactly the jobs it invalidates, as after a real run. Snakemake reads
#    params.yaml alone here, as DVC did: no --configfile overlay.
# 4. `snakemake --dry-run` must then plan nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'pull: %s\n' "$*" >&2; }

# 0. The project lock (csbench.lock): the pull replaces outputs, so no driver may work here meanwhile,
#    and none starts until it is done (a keeper holds the lock until this script exits, kill -9
#    included); the snakemake calls below join this session through CSBENCH_SESSION.
session=$("${PYTHON:-python}" -m csbench.lock hold --kind pull --pid $$ --what "make pull") || exit 1
export CSBENCH_SESSION=$session

dvc pull "$@"
if ! dvc status --quiet; then
  dvc status >&2 || true
  say "the pulled outputs do not match dvc.lock and this checkout (above): nothing marked up to date; run dvc repro"
  exit 1
fi
"${PYTHON:-python}" -m csbench.dvc_verify
touched=$(bash scripts/snakemake.sh --cores 1 --touch --forceall 2>&1) || {
  printf '%s\n' "$touched" >&2
  say "snakemake --touch failed (above)"
  exit 1
}
plan=$(bash scripts/snakemake.sh --cores 1 --dry-run 2>&1) || { printf '%s\n' "$plan" >&2; exit 1; }
if ! grep -q "Nothing to be done" <<<"$plan"; then
  printf '%s\n' "$plan" >&2
  say "snakemake still plans jobs after the pull (above): the pulled study is not the one params.yaml describes"
  exit 1
fi
study_dir=$("${CSBENCH:-csbench}" --quiet study --dir --config params.yaml)
say "done: dvc repro and snakemake have nothing to run; the study's results are in $study_dir/"
