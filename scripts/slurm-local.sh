#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for testing the SLURM profile
# (workflow/profiles/slurm): munged, a private MariaDB, slurmdbd, slurmctld and slurmd, all
# bound to 127.0.0.1, with their configuration, state and logs under one directory.
#
#   scripts/slurm-local.sh start  [DIR]   # start (or restart whatever is not running); idempotent
#   scripts/slurm-local.sh stop   [DIR]   # cancel the jobs, stop every daemon; nothing is left running
#   scripts/slurm-local.sh status [DIR]   # the daemons, sinfo and squeue; exit 0 when all run
#   scripts/slurm-local.sh env    [DIR]   # `export SLURM_CONF=...`: eval it to use sbatch, sacct, ...
#   scripts/slurm-local.sh purge  [DIR]   # stop, then delete DIR
#
# DIR defaults to $SLURM_LOCAL_DIR, else /tmp/csbench-slurm. The ports are $SLURM_LOCAL_PORT
# (slurmctld, default 16817), +1 (slurmd), +2 (slurmdbd), +3 (MariaDB): not the standard ones, so
# a system SLURM or MySQL on the machine is neither used nor disturbed. munge listens on a socket in
# DIR, not the system's. The daemons run as root (as do the jobs they run). Outside DIR there is one
# symlink, /run/slurm/conf -> DIR/etc, while the cluster runs (see link_default_config); the system's
# services, /etc/slurm and /etc/munge are not touched.
#
# The node is this machine (its real CPUs) with two GPUs backed by /dev/null and /dev/zero, so the
# profile's GPU requests (and a 2-GPU training) are scheduled and accounted (sacct shows gres/gpu); a
# job on it finds no CUDA device and runs on the CPU. Its memory is declared as the larger of the real memory and SLURM_LOCAL_MEMORY_MB
# (default 131072): without cgroups SLURM does not enforce it, and the profile's requests (up to
# 96 GB: a training's third attempt) then fit any machine.
# Needs: slurmctld slurmd slurm-client slurmdbd munge mariadb-server (Debian 12: slurm-wlm 22.05).
set -euo pipefail

CMD=${1:-}
DIR=${2:-${SLURM_LOCAL_DIR:-/tmp/csbench-slurm}}
PORT=${SLURM_LOCAL_PORT:-16817}
CLUSTER=csbench
PARTITION=${SLURM_LOCAL_PARTITION:-debug}
ACCOUNT=${SLURM_LOCAL_ACCOUNT:-csbench}
MEMORY_FLOOR=${SLURM_LOCAL_MEMORY_MB:-131072}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-90}  # seconds to wait for a daemon to come up or go down

case "$DIR" in /*) ;; *) DIR="$(pwd)/$DIR" ;; esac
CONF_DIR=$DIR/etc
export SLURM_CONF=$CONF_DIR/slurm.conf
# Marks every daemon of this cluster, so `stop` finds them (and their jobs) by this value.
export CSBENCH_SLURM_LOCAL=$DIR

say() { printf 'slurm-local: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

need() {
  local missing=() bin
  for bin in "$@"; do command -v "$bin" >/dev/null 2>&1 || missing+=("$bin"); done
  [ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]}: apt-get install slurm-wlm slurmdbd munge mariadb-server"
}

# --- processes --------------------------------------------------------------------------------

stat_field() {  # stat_field PID N: field N of /proc/PID/stat after the command name (1: state, 2: ppid)
  { sed -E 's/^.*\) //' "/proc/$1/stat" | cut -d' ' -f"$2"; } 2>/dev/null
}

alive() { [ -d "/proc/$1" ] && [ "$(stat_field "$1" 1)" != Z ]; }

pid_of() {  # the live pid recorded in a pid file, or nothing
  local file=$1 pid
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && alive "$pid" || return 1
  # only ours: the process carries this cluster's marker (pid files outlive reboots and pids are reused)
  { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF "CSBENCH_SLURM_LOCAL=$DIR" || return 1
  echo "$pid"
}

running() { pid_of "$DIR/run/$1.pid" >/dev/null; }

ours() {  # ours PID: a daemon of this cluster (the marker), or a slurmstepd of its slurmd (which
  # rewrites its environment for its process title, but runs in DIR/log)
  { tr '\0' '\n' <"/proc/$1/environ"; } 2>/dev/null | grep -qxF "CSBENCH_SLURM_LOCAL=$DIR" && return 0
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = slurmstepd ] || return 1
  case "$(readlink "/proc/$1/cwd" 2>/dev/null)" in "$DIR"/*) return 0 ;; esac
  return 1
}

marked_pids() {  # every process of this cluster (see ours), and all their descendants: the jobs
  local proc pid marked=() all
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    # not this script, nor the subshell running this function (both carry the marker)
    [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ] && continue
    ours "$pid" && marked+=("$pid")
  done
  [ ${#marked[@]} -eq 0 ] && return 0
  # descendants: the job processes (their environment is the submitter's)
  all=" ${marked[*]} "
  local changed=1 ppid
  while [ $changed -eq 1 ]; do
    changed=0
    for proc in /proc/[0-9]*; do
      pid=${proc#/proc/}
      case "$all" in *" $pid "*) continue ;; esac
      ppid=$(stat_field "$pid" 2) || continue
      case "$all" in *" $ppid "*) all="$all$pid "; changed=1 ;; esac
    done
  done
  for pid in $all; do
    [ "$pid" != "$$" ] && [ "$pid" != "$BASHPID" ] && alive "$pid" && echo "$pid"
  done
  return 0
}

wait_gone() {  # wait until none of the given pids lives
  local deadline=$((SECONDS + $1)) pid alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do
      alive "$pid" && alive=1
    done
    [ $alive -eq 0 ] && return 0
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}

stop_daemon() {  # SIGTERM, then SIGKILL after a while
  local name=$1 pid
  pid=$(pid_of "$DIR/run/$name.pid") || { rm -f "$DIR/run/$name.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone 30 "$pid"; then
    say "$name ($pid) ignored SIGTERM: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone 10 "$pid" || true
  fi
  rm -f "$DIR/run/$name.pid"
}

wait_for() {  # wait_for DESCRIPTION LOG COMMAND...: until COMMAND succeeds
  local what=$1 log=$2 deadline=$((SECONDS + TIMEOUT))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      say "$what did not come up within ${TIMEOUT}s; the end of $log:"
      tail -n 30 "$log" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.3
  done
}

# --- configuration ----------------------------------------------------------------------------

HOST=$(hostname -s)

write_config() {
  mkdir -p "$CONF_DIR" "$DIR/run" "$DIR/log" "$DIR/spool/ctld" "$DIR/spool/d" "$DIR/munge" "$DIR/mysql"
  chmod 700 "$DIR/munge"
  local topology mem
  # the real CPU topology (CPUs=, Boards=, SocketsPerBoard=, CoresPerSocket=, ThreadsPerCore=)
  topology=$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
  [ -n "$topology" ] || topology="CPUs=$(nproc) "
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
  [ "$mem" -lt "$MEMORY_FLOOR" ] && mem=$MEMORY_FLOOR
  cat >"$SLURM_CONF" <<EOF
# Written by scripts/slurm-local.sh: a single-node test cluster on 127.0.0.1.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups: processes are tracked by parent pid, memory is not enforced
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((PORT + 2))
# for slurmdbd connections this names the munge socket (AuthInfo is for the controller's)
AccountingStoragePass=$DIR/munge/munge.socket
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations
# sacct shows the plugin's --comment (rule and wildcards of each job)
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
# a finished job stays visible to squeue for 5 minutes (sacct keeps it for good)
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
# the job processes get the nice value of the sbatch call (snakemake's)
PropagatePrioProcess=1
NodeName=$HOST NodeAddr=127.0.0.1 NodeHostname=$HOST ${topology}RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  # SLURM drops a GPU without a device file; a character device that is not a GPU will do (slurmd
  # logs that it is not one, and schedules it anyway). Nothing opens it: without cgroups SLURM only
  # sets CUDA_VISIBLE_DEVICES in the job, and the job finds no CUDA driver.
  cat >"$CONF_DIR/gres.conf" <<EOF
# two fake GPUs: schedulable and accounted, not usable
NodeName=$HOST Name=gpu File=/dev/null
NodeName=$HOST Name=gpu File=/dev/zero
EOF
  if [ ! -s "$DIR/mysql/password" ]; then
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/mysql/password")
  fi
  (umask 077 && cat >"$CONF_DIR/slurmdbd.conf" <<EOF
# Written by scripts/slurm-local.sh
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$((PORT + 2))
CommunicationParameters=NoInAddrAny
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$((PORT + 3))
StorageUser=slurm
StoragePass=$(cat "$DIR/mysql/password")
StorageLoc=slurm_acct_db
EOF
  )
  chmod 600 "$CONF_DIR/slurmdbd.conf"
}

# --- daemons ----------------------------------------------------------------------------------

start_munge() {
  running munged && return 0
  if [ ! -s "$DIR/munge/munge.key" ]; then
    (umask 077 && dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none)
  fi
  rm -f "$DIR/munge/munge.socket" "$DIR/munge/munge.socket.lock"
  munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
    >>"$DIR/log/munged.log" 2>&1 || { tail -n 20 "$DIR/log/munged.log" >&2; die "munged did not start"; }
  wait_for munged "$DIR/log/munged.log" munge -n --socket="$DIR/munge/munge.socket"
}

# shellcheck disable=SC2120  # called with arguments through wait_for
mysql_client() { mariadb --no-defaults --protocol=socket --socket="$DIR/mysql/mysqld.sock" -uroot "$@"; }

start_mariadb() {
  running mariadbd && return 0
  if [ ! -d "$DIR/mysql/data/mysql" ]; then
    say "initialising the accounting database in $DIR/mysql/data"
    mariadb-install-db --no-defaults --datadir="$DIR/mysql/data" --user=root --skip-test-db \
      --auth-root-authentication-method=socket --innodb-log-file-size=8M >"$DIR/log/mariadb-install.log" 2>&1 ||
      { tail -n 20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  # setsid + nohup: the server outlives this script; bound to 127.0.0.1 only
  setsid nohup mariadbd --no-defaults --datadir="$DIR/mysql/data" --user=root \
    --bind-address=127.0.0.1 --port=$((PORT + 3)) --socket="$DIR/mysql/mysqld.sock" \
    --pid-file="$DIR/run/mariadbd.pid" --log-error="$DIR/log/mariadb.log" --skip-name-resolve \
    --innodb-log-file-size=8M --innodb-lock-wait-timeout=900 --skip-log-bin --max-connections=50 \
    </dev/null >>"$DIR/log/mariadb.log" 2>&1 &
  wait_for MariaDB "$DIR/log/mariadb.log" mysql_client -e "SELECT 1"
  wait_for "MariaDB's pid file" "$DIR/log/mariadb.log" running mariadbd
  # shellcheck disable=SC2119
  mysql_client <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$DIR/mysql/password")';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
}

start_slurmdbd() {
  running slurmdbd && return 0
  slurmdbd >>"$DIR/log/slurmdbd.log" 2>&1 || { tail -n 20 "$DIR/log/slurmdbd.log" >&2; die "slurmdbd did not start"; }
  wait_for slurmdbd "$DIR/log/slurmdbd.log" sacctmgr -n list cluster
  wait_for "slurmdbd's pid file" "$DIR/log/slurmdbd.log" running slurmdbd
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
}

start_slurmctld() {
  running slurmctld && return 0
  # without -c: a restarted controller recovers its jobs from StateSaveLocation
  slurmctld >>"$DIR/log/slurmctld.log" 2>&1 || { tail -n 20 "$DIR/log/slurmctld.log" >&2; die "slurmctld did not start"; }
  wait_for slurmctld "$DIR/log/slurmctld.log" scontrol ping
  wait_for "slurmctld's pid file" "$DIR/log/slurmctld.log" running slurmctld
}

# Inside a job, snakemake-executor-plugin-slurm-jobstep (0.6.1) runs the rule through `srun` with every
# SLURM_* variable but the job's ids removed from its environment, SLURM_CONF included, so srun finds
# no slurm.conf at a custom path. Client commands then look in /etc/slurm/slurm.conf and, when that
# does not exist, in /run/slurm/conf/slurm.conf (where a "configless" slurmd links its copy of the
# configuration). So /run/slurm/conf links to DIR/etc while the cluster runs: the one thing this
# script puts outside DIR. stop removes it.
RUN_CONF=/run/slurm/conf

check_default_config() {
  if [ -e /etc/slurm/slurm.conf ]; then
    die "/etc/slurm/slurm.conf exists (a system SLURM): srun inside the test jobs would use it instead of this cluster's configuration"
  fi
  if [ -e "$RUN_CONF" ] || [ -L "$RUN_CONF" ]; then
    [ "$(readlink "$RUN_CONF")" = "$CONF_DIR" ] ||
      die "$RUN_CONF exists and is not this cluster's (-> $(readlink "$RUN_CONF")): another SLURM uses it"
  fi
}

link_default_config() {
  [ "$(readlink "$RUN_CONF" 2>/dev/null)" = "$CONF_DIR" ] && return 0
  mkdir -p "$(dirname "$RUN_CONF")"
  ln -sfn "$CONF_DIR" "$RUN_CONF"
}

unlink_default_config() {
  if [ -L "$RUN_CONF" ] && [ "$(readlink "$RUN_CONF")" = "$CONF_DIR" ]; then
    rm -f "$RUN_CONF"
    rmdir "$(dirname "$RUN_CONF")" 2>/dev/null || true
  fi
}

start_slurmd() {
  running slurmd && return 0
  slurmd -N "$HOST" >>"$DIR/log/slurmd.log" 2>&1 || { tail -n 20 "$DIR/log/slurmd.log" >&2; die "slurmd did not start"; }
  wait_for "slurmd's pid file" "$DIR/log/slurmd.log" running slurmd
}

node_ready() { sinfo -h -n "$HOST" -o %t | grep -Eq '^(idle|mix|alloc)'; }

add_account() {
  if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
    sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="csbench tests" Organization=csbench >/dev/null
  fi
  local user
  user=$(id -un)
  if ! sacctmgr -n -P list assoc format=user,account | grep -qx "$user|$ACCOUNT"; then
    sacctmgr -i add user "$user" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
  fi
}

cmd_start() {
  need munged munge mariadbd mariadb-install-db mariadb slurmdbd slurmctld slurmd sbatch sacct sacctmgr sinfo scontrol
  [ "$(id -u)" -eq 0 ] || die "the daemons run as root here (SlurmUser=root): run as root"
  check_default_config
  write_config
  link_default_config
  start_munge
  start_mariadb
  start_slurmdbd
  start_slurmctld
  start_slurmd
  add_account
  # a node that was DOWN (controller or slurmd killed) comes back by itself (ReturnToService=2)
  scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
  wait_for "node $HOST" "$DIR/log/slurmd.log" node_ready
  say "up: cluster $CLUSTER, partition $PARTITION, account $ACCOUNT; export SLURM_CONF=$SLURM_CONF"
}

cmd_stop() {
  [ -d "$DIR" ] || return 0
  if running slurmctld && command -v scancel >/dev/null 2>&1; then
    scancel --full -u "$(id -un)" >/dev/null 2>&1 || true
    local deadline=$((SECONDS + 30))
    while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon slurmdbd
  stop_daemon mariadbd
  stop_daemon munged
  unlink_default_config
  # whatever is left: slurmstepd processes and the job processes under them
  local left
  left=$(marked_pids)
  if [ -n "$left" ]; then
    say "killing leftover processes: $(echo "$left" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    # shellcheck disable=SC2086
    wait_gone 10 $left || say "some processes did not die: $(echo "$left" | tr '\n' ' ')"
  fi
  say "stopped ($DIR)"
}

cmd_status() {
  local name ok=0 pid
  for name in munged mariadbd slurmdbd slurmctld slurmd; do
    if pid=$(pid_of "$DIR/run/$name.pid"); then
      printf '%-10s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-10s not running\n' "$name"
      ok=3
    fi
  done
  if running slurmctld; then
    sinfo || true
    squeue || true
  fi
  return $ok
}

case "$CMD" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  purge)
    cmd_stop
    rm -rf "$DIR"
    ;;
  *)
    sed -n '2,10p' "$0" >&2
    exit 2
    ;;
esac
