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

if [ -d .snakemake/locks ] && [ -n "$(ls -A .snakemake/locks 2>/dev/null)" ]; then
  if snakemake_running_here; then
    echo "csbench: another snakemake is running in $(pwd); wait for it to finish" >&2
    exit 1
  fi
  echo "csbench: removing the stale lock of a killed snakemake run" >&2
  "$SNAKEMAKE" --unlock --cores 1 >/dev/null
fi

# After a run, the HTML report of what it made (every table and figure, with captions): snakemake's
# --report-after-run, as a user would type it (README). Not with a dry run, a report of its own, or
# the commands that run no job; CSBENCH_REPORT=0 leaves it out.
REPORT=${CSBENCH_REPORT_FILE:-results/report.html}
builds_report() {
  [ "${CSBENCH_REPORT:-1}" = 1 ] || return 1
  local arg
  for arg in "$@"; do
    case "$arg" in
      -n | --dry-run | --dryrun | --report | --report=* | --lint | --lint=* | --unlock | --touch | -t \
        | --list* | -l | --summary | -S | --detailed-summary | -D | --dag | --dag=* | --rulegraph | --rulegraph=* \
        | --filegraph | --cleanup-metadata | --cleanup-shadow | --delete-all-output | --delete-temp-output \
        | --version | -v | --help | -h | --lc | --li | --lp)
        return 1 ;;
    esac
  done
}

if builds_report "$@"; then
  exec "$SNAKEMAKE" "$@" --report "$REPORT" --report-after-run
fi
exec "$SNAKEMAKE" "$@"
