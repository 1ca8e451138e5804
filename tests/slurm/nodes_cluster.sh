# shellcheck shell=bash disable=SC2154  # dir, root, fail: testlib.sh's
# nodes_cluster.sh: what the multi-node Slurm tests share (source it after
# testlib.sh): skip (77) where network namespaces cannot be made, refuse to
# run beside a multi-node cluster that runs already, start a 3-node cluster
# of their own (state in $dir/slurm) and stop it on exit, whatever happens.
cluster=$root/slurm/local-cluster.sh
export MESHLOOM_SLURM_DIR=$dir/slurm SLURM_CONF=$dir/slurm/etc/slurm.conf
if [[ $(id -u) != 0 ]] || ! ip netns add meshloom-probe 2>/dev/null; then
  echo "SKIP: network namespaces need root (ip netns add)"
  exit 77
fi
ip netns del meshloom-probe
ip link show mlbr0 >/dev/null 2>&1 && fail "a local multi-node cluster runs already: slurm/local-cluster.sh stop"
# keep_logs: a failed run's job logs, metrics and Slurm daemons' logs, copied
# beside where ctest runs the test before the work folder goes.
keep_logs() {
  local kept
  kept=$PWD/$(basename "$0" .sh)-failed-$(date -u +%Y%m%dT%H%M%SZ)
  mkdir -p "$kept" && cp "$dir"/*.out "$kept"/ 2>/dev/null
  for run in "$dir"/*/metrics.jsonl; do
    [[ -f $run ]] && cp "$run" "$kept/$(basename "$(dirname "$run")").metrics.jsonl"
  done
  cp -r "$dir/slurm/log" "$kept/slurm-log" 2>/dev/null
  echo "the failed run's logs: $kept"
}
trap 'rc=$?; ((rc != 0 && rc != 77)) && keep_logs
      "$cluster" stop >/dev/null 2>&1; kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
"$cluster" start --nodes 3 >/dev/null || fail "the 3-node cluster did not start ($(tail -3 "$dir"/slurm/log/*.log))"
