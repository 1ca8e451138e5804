#!/usr/bin/env bash
# local-cluster.sh: a real Slurm on this machine (munge, slurmctld, slurmd; no
# systemd, no cgroups) for development and the `slurm` tests. One node on
# localhost by default; with --nodes N, N nodes, each a Linux network
# namespace with its own address, host name and slurmd (needs root).
#
#   slurm/local-cluster.sh start [--nodes N] [--bandwidth RATE]
#                                    start (idempotent); prints the SLURM_CONF export
#   slurm/local-cluster.sh status    exit 0 only when every node is ready (idle/mix/alloc)
#   slurm/local-cluster.sh stop      stop what this script started, and remove
#                                    the namespaces, links and bridge it made
#   slurm/local-cluster.sh clean     stop and remove the state folder
#   slurm/local-cluster.sh kill-node mlnodeI
#                                    a power loss: its link down, all its processes killed
#   slurm/local-cluster.sh revive mlnodeI   its link up and its slurmd again
#
# Several nodes (--nodes N): node i is namespace meshloom-mlnodeI with one
# link, eth0 at 10.231.0.(10+i)/24, the other end on bridge mlbr0, which
# holds 10.231.0.1 for slurmctld (and this shell's sbatch/squeue). Nothing
# routes beyond that /24: traffic stays between these namespaces. Each
# node's processes run in their own UTS and mount namespaces: `hostname`
# says mlnodeI, /etc/hosts names every node and /dev/shm is the node's own
# (MPI's shared memory stays inside a node). --bandwidth shapes each
# node's outgoing link with a token bucket (tc tbf, e.g. 1gbit, 200mbit), so
# that messages between nodes cost what a network costs; traffic inside a
# node (shared memory) is not shaped. This kernel has no netem: latency
# cannot be added. `status` and `stop` read the node count from the state
# folder; `start` with another count than the running cluster's refuses.
#
# MESHLOOM_SLURM_DIR   state, logs, pids (default /tmp/meshloom-slurm)
# MESHLOOM_SLURM_CPUS  CPUs each node advertises (default 16, 8 with --nodes:
#                      more than the cores, so the ranks fit;
#                      SlurmdParameters=config_overrides)
# MESHLOOM_SLURM_MEM   RealMemory in MB per node (default 16000)
# Jobs launch OpenMPI programs with `srun --mpi=pmix` (MpiDefault=pmix; Debian's
# OpenMPI has no PMI2 client) or mpirun inside the allocation. EnforcePartLimits=ALL
# rejects a job that asks for more than the nodes have at once, instead of
# leaving it pending forever.
set -euo pipefail

BASE=${MESHLOOM_SLURM_DIR:-/tmp/meshloom-slurm}
MEM=${MESHLOOM_SLURM_MEM:-16000}
CONF=$BASE/etc/slurm.conf
RUN=$BASE/run
MUNGE_PID=/run/munge/munged.pid
NET=10.231.0  # the nodes' /24; .1 is the bridge (slurmctld), node i is .(10+i)
BRIDGE=mlbr0
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

# Nodes of the running (or last) cluster: 0 means the one-node localhost mode.
recorded_nodes() { cat "$BASE/nodes" 2>/dev/null || echo 0; }
node_names() { (($1 == 0)) && echo localhost || seq -f "mlnode%g" 1 "$1"; }
netns_of() { echo "meshloom-$1"; }

# The node states, one "name state" line each.
node_states() { sinfo -h -N -o '%N %t' 2>/dev/null || true; }
all_ready() {
  local states
  states=$(node_states)
  [[ -n $states ]] && ! grep -qv ' \(idle\|mix\|alloc\)' <<<"$states"
}

write_conf() {
  local nodes=$1 cpus=$2 ctl=localhost
  mkdir -p "$BASE"/{etc,state,spool,log,run}
  ((nodes > 0)) && ctl="$(hostname -s)($NET.1)"
  cat >"$CONF" <<CONF
# written by meshloom slurm/local-cluster.sh
ClusterName=meshloom-local
SlurmctldHost=$ctl
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
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=600
KillWait=5
Waittime=0
CONF
  local names name
  names=$(node_names "$nodes" | paste -sd, -)
  for name in $(node_names "$nodes"); do mkdir -p "$BASE/spool/$name" "$BASE/tmp/$name"; done
  # PMIx's per-step folders are named by job and step only: each node needs
  # its own (a node-local /tmp on a real cluster). on_node binds
  # $BASE/tmp/NAME over $BASE/node-tmp.
  mkdir -p "$BASE/node-tmp"
  echo "PMIxCliTmpDirBase=$BASE/node-tmp" >"$BASE/etc/mpi.conf"
  if ((nodes == 0)); then
    echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN" >>"$CONF"
  else
    for i in $(seq "$nodes"); do
      echo "NodeName=mlnode$i NodeAddr=$NET.$((10 + i)) CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN" >>"$CONF"
    done
    { echo "127.0.0.1 localhost"; echo "$NET.1 $(hostname -s)"
      for i in $(seq "$nodes"); do echo "$NET.$((10 + i)) mlnode$i"; done; } >"$BASE/etc/hosts"
  fi
  echo "PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
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

# The bridge and, per node, a namespace with eth0 on it (and lo up).
make_network() {
  local nodes=$1 rate=$2 i ns
  ip link show "$BRIDGE" >/dev/null 2>&1 || {
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.1/24" dev "$BRIDGE"
  }
  ip link set "$BRIDGE" up
  for i in $(seq "$nodes"); do
    ns=$(netns_of "mlnode$i")
    ip netns list | grep -qw "$ns" || ip netns add "$ns"
    if ! ip link show "mlv$i" >/dev/null 2>&1; then
      ip link add "mlv$i" type veth peer name eth0 netns "$ns"
      ip netns exec "$ns" ip addr add "$NET.$((10 + i))/24" dev eth0
    fi
    ip link set "mlv$i" master "$BRIDGE" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip link set eth0 up
    if [[ -n $rate ]]; then
      # A bucket of about 10 ms of traffic at the rate, as a NIC queue would hold.
      ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$rate" burst 256kb latency 50ms ||
        { say "tc tbf refused rate '$rate' (examples: 1gbit, 200mbit)"; exit 2; }
    else
      ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
    fi
  done
}

# Runs a command as node NAME runs it: in its network namespace, with its own
# host name, /etc/hosts and /dev/shm (UTS and mount namespaces). A node's own
# /dev/shm matters: MPI's shared-memory segments are named by host and job,
# and a lost node's would otherwise outlive it and meet the next job's.
on_node() {
  local name=$1
  shift
  # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup
  # mount slurmd needs.
  nsenter --net="/run/netns/$(netns_of "$name")" unshare --uts --mount --propagation private \
    bash -c 'mount --bind "$1/etc/hosts" /etc/hosts && mount --bind "$1/tmp/$2" "$1/node-tmp" &&
             mount -t tmpfs -o mode=1777 "shm-$2" /dev/shm && hostname "$2" && shift 2 && exec "$@"' \
    on_node "$BASE" "$name" "$@"
}

start() {
  local nodes=0 rate="" cpus
  while (($#)); do
    case $1 in
      --nodes) nodes=${2:?--nodes needs a count}; shift 2 ;;
      --bandwidth) rate=${2:?--bandwidth needs a rate, e.g. 1gbit}; shift 2 ;;
      *) say "unknown option '$1' (start [--nodes N] [--bandwidth RATE])"; exit 2 ;;
    esac
  done
  [[ $nodes =~ ^[0-9]+$ ]] && ((nodes <= 64)) || { say "--nodes '$nodes': a count from 1 to 64"; exit 2; }
  ((nodes == 1)) && nodes=0  # one node is the localhost mode
  [[ -z $rate || $nodes -gt 0 ]] || { say "--bandwidth shapes links between nodes: it needs --nodes 2 or more"; exit 2; }
  ((nodes == 0)) || [[ $(id -u) == 0 ]] || { say "--nodes needs root (network namespaces)"; exit 1; }
  for c in slurmctld slurmd munged sinfo sbatch; do
    command -v "$c" >/dev/null || { say "$c is missing: run scripts/setup.sh (slurm-wlm, munge)"; exit 1; }
  done
  if live_pid "$RUN/slurmctld.pid" slurmctld >/dev/null && (($(recorded_nodes) != nodes)); then
    say "a cluster of $(recorded_nodes) nodes (0: localhost) runs from $BASE: stop it first"
    exit 1
  fi
  cpus=${MESHLOOM_SLURM_CPUS:-$( ((nodes > 0)) && echo 8 || echo 16)}
  write_conf "$nodes" "$cpus"
  echo "$nodes" >"$BASE/nodes"
  start_munge
  ((nodes > 0)) && make_network "$nodes" "$rate"
  live_pid "$RUN/slurmctld.pid" slurmctld >/dev/null || slurmctld -f "$CONF"
  for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.2; done
  scontrol ping 2>/dev/null | grep -q 'is UP' || { say "slurmctld is not up: see $BASE/log/slurmctld.log"; exit 1; }
  local name
  for name in $(node_names "$nodes"); do
    live_pid "$RUN/slurmd-$name.pid" slurmd >/dev/null && continue
    if ((nodes == 0)); then slurmd -f "$CONF" -N "$name"; else on_node "$name" slurmd -f "$CONF" -N "$name"; fi
  done
  for _ in $(seq 150); do
    all_ready && break
    node_states | awk '$2 ~ /^(drain|down)/ { print $1 }' | while read -r n; do
      scontrol update nodename="$n" state=resume 2>/dev/null || true
    done
    sleep 0.2
  done
  all_ready || { say "nodes not ready: $(node_states | paste -sd' ' -); see $BASE/log/slurmd-*.log"; exit 1; }
  if ((nodes == 0)); then
    say "up: slurmctld $(<"$RUN/slurmctld.pid"), slurmd on localhost with $cpus CPUs"
  else
    say "up: $nodes nodes mlnode1-$nodes ($NET.11-$((10 + nodes)) on $BRIDGE${rate:+, links shaped to $rate}), $cpus CPUs each"
  fi
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

# Every process left in the nodes' namespaces, then the namespaces, the
# links and the bridge.
remove_network() {
  local ns pids link
  for ns in $(ip netns list | awk '$1 ~ /^meshloom-mlnode[0-9]+$/ { print $1 }'); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns"
  done
  for link in $(ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | grep -E '^mlv[0-9]+$' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  say "removed the nodes' namespaces, links and $BRIDGE"
}

stop() {
  local nodes name
  nodes=$(recorded_nodes)
  if live_pid "$RUN/slurmctld.pid" slurmctld >/dev/null; then
    local ids
    ids=$(squeue -h -o %i 2>/dev/null || true)
    if [[ -n $ids ]]; then scancel $ids || true; sleep 1; fi
  fi
  for name in $(node_names "$nodes"); do stop_one slurmd "$RUN/slurmd-$name.pid"; done
  stop_one slurmctld "$RUN/slurmctld.pid"
  if [[ -f $RUN/munged.ours ]]; then
    stop_one munged "$MUNGE_PID"
    rm -f "$RUN/munged.ours"
  fi
  if ((nodes > 0)) || ip link show "$BRIDGE" >/dev/null 2>&1; then remove_network; fi
  rm -f "$BASE/nodes"
}

# A power loss: node NAME's link goes down and every process in its
# namespace (slurmd, the job's ranks) is killed at once, its /dev/shm with them. Slurm finds out as
# it would on a real cluster (no answer from slurmd); `revive` brings it back.
kill_node() {
  local name=${1:?kill-node needs a node name} i ns pids
  i=${name#mlnode}
  ns=$(netns_of "$name")
  ip netns list | grep -qw "$ns" || { say "no node '$name' (nodes: $(node_names "$(recorded_nodes)" | paste -sd' '))"; exit 2; }
  ip link set "mlv$i" down
  pids=$(ip netns pids "$ns")
  [[ -n $pids ]] && kill -KILL $pids
  say "$name lost: link mlv$i down, $(wc -w <<<"$pids") processes killed"
}

revive_node() {
  local name=${1:?revive needs a node name}
  ip link set "mlv${name#mlnode}" up
  live_pid "$RUN/slurmd-$name.pid" slurmd >/dev/null || on_node "$name" slurmd -f "$CONF" -N "$name"
  scontrol update nodename="$name" state=resume 2>/dev/null || true
  say "$name back: link up, slurmd started"
}

status() {
  local pid name nodes
  nodes=$(recorded_nodes)
  if pid=$(live_pid "$RUN/slurmctld.pid" slurmctld); then echo "slurmctld: running ($pid)"; else echo "slurmctld: stopped"; fi
  for name in $(node_names "$nodes"); do
    if pid=$(live_pid "$RUN/slurmd-$name.pid" slurmd); then echo "slurmd $name: running ($pid)"; else echo "slurmd $name: stopped"; fi
  done
  node_states | sed 's/^/node /'
  all_ready
}

case ${1:-} in
  start) shift; start "$@" ;;
  stop) stop ;;
  status) status ;;
  clean) stop; rm -rf "$BASE"; say "removed $BASE" ;;
  kill-node) kill_node "${2:-}" ;;
  revive) revive_node "${2:-}" ;;
  *) echo "usage: $0 start [--nodes N] [--bandwidth RATE] | status | stop | clean | kill-node NODE | revive NODE" >&2; exit 2 ;;
esac
