#!/usr/bin/env bash
# Run snakemake in the project, recovering from a run that was killed outright.
# Snakemake removes its lock on Ctrl-C / SIGTERM, but a SIGKILL (or a machine reset) leaves
# .snakemake/locks behind and the next run refuses to start. The lock is stale when no live
# snakemake process has this directory as its working directory: then we unlock and go on.
# Incomplete outputs of the killed run are redone (rerun-incomplete in the default profile).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SNAKEMAKE=${SNAKEMAKE:-snakemake}

snakemake_running_here() {
  local here proc cwd
  here=$(pwd -P)
  for proc in /proc/[0-9]*; do
    [ "${proc#/proc/}" = "$$" ] && continue
    cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
    [ "$cwd" = "$here" ] || continue
    if tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -Eq '(^|[/ ])snakemake( |$)'; then
      return 0
    fi
  done
  return 1
}

# Options with which snakemake runs no job (a dry run, a report, a listing, an unlock...).
runs_no_job() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      -n | --dry-run | --dryrun | --report | --report=* | --lint | --lint=* | --unlock | --touch | -t \
        | --list* | -l | --summary | -S | --detailed-summary | -D | --dag | --dag=* | --rulegraph | --rulegraph=* \
        | --filegraph | --cleanup-metadata | --cleanup-shadow | --delete-all-output | --delete-temp-output \
        | --version | -v | --help | -h | --lc | --li | --lp)
        return 0 ;;
    esac
  done
  return 1
}

# An orphaned job (issue #22 item 11): snakemake killed outright (kill -9 of its pid, not of its
# process group) leaves the jobs it started running, and a new snakemake would start the same job
# beside them, two writers of one output. Before any job starts, every csbench phase still running
# in this project (a process whose working directory is this folder and whose arguments are
# `-m csbench <phase>` or the `csbench` script with a phase that writes outputs; under snakemake or
# dvc repro alike) stops the run, naming it. Processes of this machine only: a cluster job of the
# killed run is its scheduler's to list (squeue).
CSBENCH_PHASES=" download prepare audit attack train index evaluate perturb robust robustness aggregate "
csbench_jobs_here() {
  local here pattern pid i arg phase
  local -a args=()
  here=$(pwd -P)
  pattern=$(printf '%s' "$here" | sed 's/[][*?\\]/\\&/g')  # the folder as a find glob, matched literally
  for pid in $(find /proc/[0-9]*/cwd -maxdepth 0 -lname "$pattern" 2>/dev/null | cut -d/ -f3); do
    [ "$pid" = "$$" ] && continue
    mapfile -d '' args 2>/dev/null <"/proc/$pid/cmdline" || continue
    for ((i = 0; i < ${#args[@]}; i++)); do
      arg=${args[i]}
      if [ "${arg##*/}" = csbench ]; then  # `-m csbench`, or the script .venv/bin/csbench
        phase=""
        for arg in "${args[@]:i+1}"; do
          case "$arg" in -*) ;; *) phase=$arg; break ;; esac
        done
        if [[ "$CSBENCH_PHASES" == *" $phase "* ]]; then
          printf '%s\t%s\n' "$pid" "csbench ${args[*]:i+1}"
        fi
        break
      fi
    done
  done
}

if ! runs_no_job "$@"; then
  jobs_here=$(csbench_jobs_here)
  if [ -n "$jobs_here" ]; then
    if snakemake_running_here; then
      echo "csbench: another snakemake is running in $(pwd); wait for it to finish" >&2
      exit 1
    fi
    while IFS=$'\t' read -r pid command; do
      echo "csbench: a job of an earlier run is still running in $(pwd): pid $pid ($command); wait for it to end or stop it (kill $pid), then run again" >&2
    done <<<"$jobs_here"
    exit 1
  fi
fi

if [ -d .snakemake/locks ] && [ -n "$(ls -A .snakemake/locks 2>/dev/null)" ]; then
  if snakemake_running_here; then
    echo "csbench: another snakemake is running in $(pwd); wait for it to finish" >&2
    exit 1
  fi
  echo "csbench: removing the stale lock of a killed snakemake run" >&2
  "$SNAKEMAKE" --unlock --cores 1 >/dev/null
fi

# After a run, the HTML report of what it made (every table and figure, with captions): snakemake's
# --report-after-run, as a user would type it (README), into the study's own folder
# results/studies/<study>/report.html. Not with a dry run, a report of its own, or the commands that
# run no job; CSBENCH_REPORT=0 leaves it out, CSBENCH_REPORT_FILE=path puts it elsewhere.

# The config files snakemake reads: params.yaml, then those of --configfile / --configfiles (each
# takes every argument up to the next option, as snakemake's does).
config_args() {
  local arg taking=0
  printf '%s\0' --config params.yaml
  for arg in "$@"; do
    case "$arg" in
      --configfile=* | --configfiles=*) printf '%s\0' --config "${arg#*=}"; taking=0 ;;
      --configfile | --configfiles) taking=1 ;;
      -*) taking=0 ;;
      *) [ "$taking" = 1 ] && printf '%s\0' --config "$arg" ;;
    esac
  done
}

# The study's report file; nothing when the config does not load (snakemake then says why, alone).
report_file() {
  if [ -n "${CSBENCH_REPORT_FILE:-}" ]; then
    printf '%s' "$CSBENCH_REPORT_FILE"
    return
  fi
  local -a configs=()
  mapfile -d '' configs < <(config_args "$@")
  local dir
  dir=$("${CSBENCH:-csbench}" --quiet study --dir "${configs[@]}" 2>/dev/null) || return 0
  printf '%s/report.html' "$dir"
}

builds_report() {
  [ "${CSBENCH_REPORT:-1}" = 1 ] || return 1
  ! runs_no_job "$@"
}

# Snakemake reads each --configfile itself, before the Snakefile (and csbench in common.smk) runs:
# a YAML error there is reported without its file or line, a missing file as a Python traceback.
# With an overlay, csbench reads the same files first and stops with its one-line error (file, line,
# key) before snakemake starts; without one, common.smk reads params.yaml and says so itself.
check_config_files() {
  local -a configs=()
  mapfile -d '' configs < <(config_args "$@")
  [ "${#configs[@]}" -gt 2 ] || return 0
  local errors
  if ! errors=$("${CSBENCH:-csbench}" --quiet validate "${configs[@]}" 2>&1 >/dev/null); then
    printf '%s\n' "$errors" >&2
    exit 1
  fi
}
check_config_files "$@"

if builds_report "$@"; then
  REPORT=$(report_file "$@")
  if [ -n "$REPORT" ]; then
    exec "$SNAKEMAKE" "$@" --report "$REPORT" --report-after-run
  fi
fi
exec "$SNAKEMAKE" "$@"
