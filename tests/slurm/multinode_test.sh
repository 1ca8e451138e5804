#!/usr/bin/env bash
# A real 3-node Slurm on this machine (slurm/local-cluster.sh --nodes 3: a
# network namespace, address, host name and slurmd per node): the multi-node
# template trains the quickstart's model on 3 nodes x 3 ranks, MPI over TCP
# between the namespaces. Checks that the nodes route nothing beyond their
# own /24, the per-node layout in the log, that the
# traffic crossed the nodes' links, that batches and losses equal the same
# run on one host (mpirun), that the lead counts its rings by node, and
# that `stop` leaves no namespace, link or
# daemon behind. Skips (77) where namespaces cannot be made (no root).
#   multinode_test.sh MESHLOOM MPIEXEC
set -u
meshloom=$(realpath "$1")
mpiexec=$2
source "$(dirname "$0")/../common/testlib.sh"
source "$(dirname "$0")/nodes_cluster.sh"
[[ $(sinfo -h -N -o '%N %t' | paste -sd' ') == "mlnode1 idle mlnode2 idle mlnode3 idle" ]] ||
  fail "nodes: $(sinfo -h -N -o '%N %t' | paste -sd' ')"
echo "ok: 3 nodes up: $(sinfo -h -N -o '%N' | paste -sd' ')"
# Traffic stays on the script's own links: each node routes only its /24,
# on the one link the script made, and the bridge holds only 10.231.0.1.
for i in 1 2 3; do
  routes=$(ip netns exec "meshloom-mlnode$i" ip -4 route | sed 's/ *$//' | paste -sd';')
  [[ $routes == "10.231.0.0/24 dev eth0 proto kernel scope link src 10.231.0.1$i" ]] ||
    fail "mlnode$i routes '$routes'"
done
[[ $(ip -4 -o addr show mlbr0 | awk '{ print $4 }') == 10.231.0.1/24 ]] || fail "mlbr0: $(ip -4 -o addr show mlbr0)"

source "$root/tests/train/train_runs.sh"  # $dir/c.yaml: the quickstart's model on real text
crossed() { echo $(($(cat /sys/class/net/mlv{1,2,3}/statistics/rx_bytes | paste -sd+))); }
before=$(crossed)
out=$dir/job.out
(cd "$dir" && CONFIG=$dir/c.yaml MESHLOOM=$meshloom MPI_NET=10.231.0.0/24 EXTRA="--set run.dir=$dir/nodes --set run.steps=8" \
  timeout 300 sbatch --wait --nodes=3 --ntasks-per-node=3 --output="$out" \
  "$root/slurm/meshloom-multinode.sbatch" >/dev/null) || { cat "$out"; fail "the 3-node job failed"; }
cat "$out"
grep -q "layout: 3 nodes, 3 ranks each" "$out" || fail "no per-node layout in the log"
grep -q "layout: mlnode1: ranks 0-2: constructor 0 (lead), loaders 0-1" "$out" || fail "mlnode1's ranks"
grep -q "layout: mlnode3: ranks 6-8: trainers 3-5 (HDP ranks 3-5)" "$out" || fail "mlnode3's ranks"
grep -q "trained steps 0-7" "$out" || fail "the job did not train steps 0-7"
grep -qE "rings: [0-9]+ inside one node, [0-9]+ across nodes" "$out" || fail "no count of rings by node"
mib=$((($(crossed) - before) >> 20))
((mib >= 10)) || fail "only $mib MiB crossed the nodes' links: was the run on one node?"
echo "ok: 3 nodes x 3 ranks trained 8 steps; $mib MiB crossed the nodes' links"

train host 9 --set run.steps=8
same_losses nodes host 0 1e-6 || fail "3 nodes and one host differ"
echo "ok: 3 nodes over TCP and one host over shared memory: the same batches and losses"

"$cluster" stop >/dev/null 2>&1 || fail "stop failed"
left=$(ip netns list | grep -c '^meshloom-')
((left == 0)) || fail "$left namespaces left: $(ip netns list)"
ip -o link show | grep -qE ': (mlv[0-9]+|mlbr0)[@:]' && fail "links left: $(ip -o link show | grep -E 'mlv|mlbr0')"
pgrep -f "slurmd -f $dir/slurm" >/dev/null && fail "a slurmd is left"
pgrep -f "slurmctld -f $dir/slurm" >/dev/null && fail "slurmctld is left"
echo "ok: stop removed every namespace, link and daemon"
