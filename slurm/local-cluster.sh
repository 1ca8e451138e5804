#!/usr/bin/env bash
# local-cluster.sh: a real single-node Slurm (munge, slurmctld, slurmd on
# localhost, no systemd, no cgroups) for development and the `slurm` tests.
#
#   slurm/local-cluster.sh start     start (idempotent); prints the SLURM_CONF export
#   slurm/local-cluster.sh status    exit 0 only when the node is ready (idle/mix/alloc)
#   slurm/local-cluster.sh stop      stop what this script started
#   slurm/local-cluster.sh clean     stop and remove the state folder
#
# MESHLOOM_SLURM_DIR   state, logs, pids (default /tmp/meshloom-slurm)
# MESHLOOM_SLURM_CPUS  CPUs the node advertises (default 16: more than the
#                      cores, so 8-16 ranks fit; SlurmdParameters=config_overrides)
# MESHLOOM_SLURM_MEM   RealMemory in MB (default 16000)
# Jobs launch OpenMPI programs with `srun --mpi=pmix` (MpiDefault=pmix; Debian's
# OpenMPI has no PMI2 client). EnforcePartLimits=ALL rejects a job that asks
# for more than the node has at once, instead of leaving it pending forever.
set -euo pipefail

BASE=${MESHLOOM_SLURM_DIR:-/tmp/meshloom-slurm}
CPUS=${MESHLOOM_SLURM_CPUS:-16}
MEM=${MESHLOOM_SLURM_MEM:-16000}
CONF=$BASE/etc/slurm.conf
RUN=$BASE/run
MUNGE_PID=/run/munge/munged.pid
export SLURM_CONF=$CONF

say() { echo "[local-cluster] $*" >&2; }

# The pid in a pid file, if that process lives and has the expected name.
live_pid() {
  local file=$1 name=$2 pid
  [[ -s $file ]] || return 1
  pid=$(<"$file")
  [[ -r /proc/$pid/comm && $(</proc/$pid/comm) == "$name" ]] || return 1
  echo "$pid"
}

node_state() { sinfo -h -n localhost -o %t 2>/dev/null || true; }

write_conf() {
  mkdir -p "$BASE"/{etc,state,spool,log,run}
  cat >"$CONF" <<CONF
# written by meshloom slurm/local-cluster.sh
ClusterName=meshloom-local
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
EnforcePartLimits=ALL
JobRequeue=1
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=600
KillWait=5
Waittime=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_ok; then return 0; fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    say "creating /etc/munge/munge.key"
    runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  touch "$RUN/munged.ours"
  for _ in $(seq 50); do munge_ok && return 0; sleep 0.1; done
  say "munged did not start: see /var/log/munge/munged.log"
  exit 1
}

start() {
  for c in slurmctld slurmd munged sinfo sbatch; do
    command -v "$c" >/dev/null || { say "$c is missing: run scripts/setup.sh (slurm-wlm, munge)"; exit 1; }
  done
  write_conf
  start_munge
  live_pid "$RUN/slurmctld.pid" slurmctld >/dev/null || slurmctld -f "$CONF"
  for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done
  scontrol ping 2>/dev/null | grep -q 'is UP' || { say "slurmctld is not up: see $BASE/log/slurmctld.log"; exit 1; }
  live_pid "$RUN/slurmd.pid" slurmd >/dev/null || slurmd -f "$CONF" -N localhost
  local st=""
  for _ in $(seq 100); do
    st=$(node_state)
    [[ $st == idle* || $st == mix* || $st == alloc* ]] && break
    [[ $st == drain* || $st == down* ]] && scontrol update nodename=localhost state=resume 2>/dev/null || true
    sleep 0.2
  done
  [[ $st == idle* || $st == mix* || $st == alloc* ]] || { say "node is '$st': see $BASE/log/slurmd.log"; exit 1; }
  say "up: slurmctld $(<"$RUN/slurmctld.pid"), slurmd $(<"$RUN/slurmd.pid"), localhost with $CPUS CPUs"
  echo "export SLURM_CONF=$CONF"
}

stop_one() {
  local name=$1 file=$2 pid
  pid=$(live_pid "$file" "$name") || { rm -f "$file"; return 0; }
  kill -TERM "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$file"
  say "stopped $name ($pid)"
}

stop() {
  if live_pid "$RUN/slurmctld.pid" slurmctld >/dev/null; then
    local ids
    ids=$(squeue -h -o %i 2>/dev/null || true)
    if [[ -n $ids ]]; then scancel $ids || true; sleep 1; fi
  fi
  stop_one slurmd "$RUN/slurmd.pid"
  stop_one slurmctld "$RUN/slurmctld.pid"
  if [[ -f $RUN/munged.ours ]]; then
    stop_one munged "$MUNGE_PID"
    rm -f "$RUN/munged.ours"
  fi
}

status() {
  local d pid
  for d in slurmctld slurmd; do
    if pid=$(live_pid "$RUN/$d.pid" "$d"); then echo "$d: running ($pid)"; else echo "$d: stopped"; fi
  done
  local st
  st=$(node_state)
  echo "node localhost: ${st:-unknown}"
  [[ $st == idle* || $st == mix* || $st == alloc* ]]
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  clean) stop; rm -rf "$BASE"; say "removed $BASE" ;;
  *) echo "usage: $0 start|stop|status|clean" >&2; exit 2 ;;
esac
