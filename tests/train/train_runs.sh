# shellcheck shell=bash disable=SC2154  # meshloom, mpiexec, dir: the sourcing test's
# train_runs.sh: what the end-to-end training tests of parallel layouts share
# (tp_train_test.sh, pp_train_test.sh; source it after testlib.sh): the
# quickstart's model shape and optimizer on the Python docs with the byte
# tokenizer, 20 steps, a checkpoint every 10; train() and same_losses().
prepare_docs docs '[a-c]*'
cat >"$dir/c.yaml" <<YAML
run: {timeout: 120, steps: 20}
cluster: {roles: {constructors: 1, loaders: 2}}
model: {vocab_size: 257, d_model: 128, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 352}
optim: {lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 5}
plan: {capacity: 512}
data:
  seq_len: 1024
  tokens_per_step: 2048
  sources: [{name: docs, path: $dir/docs}]
checkpoint: {every: 10, keep: 5}
YAML

# train RUN RANKS ARGS...: trains into $dir/RUN (log $dir/RUN.log); fails the test on error.
train() {
  local run=$1 np=$2
  shift 2
  timeout 300 "$mpiexec" --oversubscribe --bind-to none -np "$np" "$meshloom" train \
    -c "$dir/c.yaml" --set run.dir="$dir/$run" --set checkpoint.dir="$dir/$run/ckpt" "$@" \
    >>"$dir/$run.log" 2>&1 || { cat "$dir/$run.log"; fail "$run: meshloom train failed"; }
}

# same_losses RUN_A RUN_B FROM TOL: steps FROM.. of two runs have the same
# data hashes and losses within TOL relative (same_losses.py).
same_losses() {
  /usr/bin/python3 "$root/tests/train/same_losses.py" "$dir/$1/metrics.jsonl" \
    "$dir/$2/metrics.jsonl" "$3" "$4"
}
