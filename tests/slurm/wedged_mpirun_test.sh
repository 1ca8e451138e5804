#!/usr/bin/env bash
# The fault-tolerant template ends an mpirun that outlives its ranks. A rank
# killed inside MPI_Init can wedge `mpirun --enable-recovery` ("PMIX ERROR:
# UNREACHABLE"): it stays up after every rank has left and ignores SIGTERM.
# That race cannot be provoked on demand, so a stand-in mpirun does exactly
# that: its three ranks append "rank R exit 3" and leave, and it sleeps on
# with SIGTERM ignored. The template must end it within WEDGE_SECONDS and
# take the attempt's code (3) from the ranks' exit file.
# Second case: rank 0 (the lead) leaves with code 3 (its watchdog) while a
# loader rank waits on for requests, as under --enable-recovery nothing ends
# it: the template must end it WEDGE_SECONDS after rank 0 left, code 3.
#   wedged_mpirun_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir/bin/mpirun" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/bin"
cat >"$dir/bin/mpirun" <<'WEDGED'
#!/usr/bin/env bash
trap '' TERM
for r in 0 1 2; do (echo "rank $r exit 3" >>"$MESHLOOM_EXIT_FILE"; exit 3) & done
wait
exec -a "$0" sleep 600  # keeps the name, for the cleanup below
WEDGED
chmod +x "$dir/bin/mpirun"
# template NAME TASKS MESSAGE: runs the template on the stand-in mpirun (3 s
# grace), which must end it with code 3 and MESSAGE within 20 s.
template() {
  start=$SECONDS
  PATH=$dir/bin:$PATH TMPDIR=$dir WEDGE_SECONDS=3 CONFIG=unused.yaml MAX_RESTARTS=0 SLURM_NTASKS=$2 \
    SLURM_JOB_ID=$1 SLURM_SUBMIT_DIR=$dir timeout 60 bash "$here/../../slurm/meshloom-fault-tolerant.sbatch" \
    >"$dir/$1.txt" 2>&1
  local rc=$?
  cat "$dir/$1.txt"
  ((rc != 124)) || fail "$1: the template waited on for ever"
  ((rc == 3)) || fail "$1: exit code $rc, not the ranks' 3"
  grep -q "$3" "$dir/$1.txt" || fail "$1: no message '$3'"
  ((SECONDS - start < 20)) || fail "$1: took $((SECONDS - start)) s"
}
template wedge 3 "mpirun outlived its ranks by 3 s: ending it"
echo "ok: a wedged mpirun was ended after $((SECONDS - start)) s, attempt code 3"

cat >"$dir/bin/mpirun" <<'LEFT'
#!/usr/bin/env bash
(echo "rank 0 exit 3" >>"$MESHLOOM_EXIT_FILE"; exit 3) &
sleep 600 &  # a loader waiting for a lead that is gone
echo $! >"$TMPDIR/loader.pid"
wait
LEFT
template left 2 "ranks still running 3 s after rank 0 left: ending them"
# (a killed rank may stay a zombie a moment, till init reaps it)
alive() { ps -o stat= -p "$(cat "$dir/loader.pid")" 2>/dev/null | grep -qv '^Z'; }
for _ in 1 2 3 4 5; do alive && sleep 1; done
alive && fail "the waiting rank is still alive"
echo "ok: ranks left after rank 0 were ended after $((SECONDS - start)) s, attempt code 3"
