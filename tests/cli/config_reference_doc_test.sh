#!/usr/bin/env bash
# The configuration reference in docs/config.md and the config code cannot
# drift:
#  1. the table in docs/config.md equals `meshloom config reference` exactly;
#  2. every key in that table is accepted: `config show --set KEY=DEFAULT` on a
#     minimal config succeeds and prints the value back.
#   config_reference_doc_test.sh MESHLOOM docs/config.md
set -u
meshloom=$1 doc=$2
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed -n '/<!-- config-reference:begin -->/,/<!-- config-reference:end -->/p' "$doc" |
  sed '1d;$d' >"$dir/doc.md"
"$meshloom" config reference >"$dir/code.md" || fail "config reference failed"
diff -u "$dir/code.md" "$dir/doc.md" >"$dir/diff" ||
  { cat "$dir/diff"; fail "$doc: reference differs from the code: run scripts/dev/update_config_reference.sh"; }
printf 'data:\n  sources:\n    - {name: a, path: p}\n  schedule:\n    - {step: 0, weights: {a: 1}}\nfaults:\n  inject: [{kind: slow, rank: 0, step: 0}]\n' >"$dir/min.yaml"
n=0
while IFS='|' read -r _ key type default _; do
  key=$(echo "$key" | tr -d '` ') type=$(echo "$type" | tr -d ' ') default=$(echo "$default" | sed 's/^ *`//; s/` *$//')
  [[ $type == section || $type == list || $type == "mapname:number" ]] && continue
  path=${key//\[\]/.0}
  [[ $default == '""' ]] && default=x
  [[ $key == model.init ]] && default='""'  # names weights that must exist (model_init_test.sh)
  [[ $key == data.sources\[\].name ]] && default=a        # the schedule names source a
  [[ $key == data.sources\[\].path || $key == data.sources\[\].tokenizer ]] && [[ $default == x ]] && default=gpt2
  "$meshloom" config show -c "$dir/min.yaml" --set "$path=$default" >"$dir/out" 2>&1 ||
    { cat "$dir/out"; fail "$doc: key $key is not accepted by the code (--set $path=$default)"; }
  n=$((n + 1))
done < <(grep '^| `' "$dir/doc.md")
((n > 40)) || fail "only $n keys checked"
echo "ok: $doc reference equals the code; all $n keys accepted"
