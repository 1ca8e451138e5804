#!/usr/bin/env bash
# A good config passes a dry run at NP ranks: exit 0, the layout printed, no
# file written. The config is copied into a folder of its own and run from
# another: its relative paths resolve against its folder, --set ones against
# the working directory, and a missing source is named with where it was
# looked for. The effective config is a fixed point.
#   dry_run_test.sh MESHLOOM MPIEXEC CONFIG NP
set -u
meshloom=$1 mpiexec=$2 config=$3 np=$4
dir=$(mktemp -d)
out=$dir/out.txt
fail() { echo "FAIL: $*"; cat "$out"; rm -rf "$dir"; exit 1; }
mkdir -p "$dir/configs" "$dir/elsewhere"
cp "$config" "$dir/configs/"
config=$dir/configs/$(basename "$config")
dry_run() {
  (cd "$dir/elsewhere" && timeout 60 "$mpiexec" --oversubscribe --bind-to none -np "$np" \
    "$meshloom" train --config "$config" --dry-run >"$out" 2>&1)
}
# First without the sources: one message naming the path and the rule.
dry_run && fail "a dry run without the sources passed"
grep -q "^meshloom: error: source '[a-z]*': cannot open $dir/" "$out" ||
  fail "no message naming the missing source's resolved path"
grep -q "resolves against the config file's folder" "$out" || fail "the message does not give the path rule"
shown=$( (cd "$dir/elsewhere" && "$meshloom" config show --config "$config") ) || fail "config show"
sources=$(sed -n 's/^ *path: //p' <<<"$shown")
run_dir=$(sed -n '/^run:/,/^[^ ]/s/^  dir: //p' <<<"$shown")
[[ $run_dir == "$dir"/* ]] || fail "run.dir $run_dir not resolved against the config's folder"
for s in $sources; do
  [[ $s == "$dir"/* && $s != "$dir/elsewhere"* ]] || fail "source $s not resolved against $dir/configs"
  mkdir -p "$(dirname "$s")" "$dir/text"
  printf 'A stand-in document for %s.\n' "$s" >"$dir/text/$(basename "$s").txt"
  "$meshloom" prepare --input "$dir/text/$(basename "$s").txt" --format text --tokenizer byte \
    --out "$s" >/dev/null 2>&1 || fail "prepare $s"
done
dry_run
rc=$?
((rc == 0)) || fail "exit code $rc"
grep -q 'dry run OK' "$out" || fail "no 'dry run OK'"
grep -q "# layout: $np ranks" "$out" || fail "layout not printed for $np ranks"
grep -qE '^  trainer +[0-9]+' "$out" || fail "no trainer line in the layout"
[[ ! -e $run_dir/config.yaml ]] || fail "the dry run wrote $run_dir/config.yaml"
# --set paths resolve against the working directory.
set_path=$( (cd "$dir/elsewhere" && "$meshloom" config show --config "$config" \
  --set 'data.sources[0].path=mine/docs') | sed -n 's/^ *path: //p' | head -1)
[[ $set_path == "$dir/elsewhere/mine/docs" ]] || fail "--set path resolved to $set_path"
# The effective config names absolute paths: shown again from anywhere, the same.
printf '%s\n' "$shown" >"$dir/effective.yaml"
"$meshloom" config show --config "$dir/effective.yaml" >"$dir/again.yaml" 2>&1 ||
  fail "the effective config does not load: $(cat "$dir/again.yaml")"
cmp -s "$dir/effective.yaml" "$dir/again.yaml" || fail "the effective config is not a fixed point"
cat "$out"
rm -rf "$dir"
