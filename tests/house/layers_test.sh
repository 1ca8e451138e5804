#!/usr/bin/env bash
# The layers of lib/ (README.md, "Where things live"): a folder includes only
# the folders below it, and links only those, so that e.g. train/ builds
# without the roles. The table says what each may use; a new folder must be
# added to it. Usage: layers_test.sh [REPO_ROOT]
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}

# data uses config for one header, config/source_format.hpp (the source
# formats, free of YAML), so that its readers and the config share one enum.
declare -A allowed=(
  [base]=""
  [config]="base"
  [tokenizer]="base"
  [image]="base"
  [comm]="base"
  [data]="base config tokenizer image"
  [dataplane]="base config"
  [plan]="base config"
  [parallel]="base config comm"
  [model]="base config"
  [ckpt]="base config"
  [wire]="base image model"
  [train]="base config comm parallel model plan ckpt"
  [sources]="base config tokenizer image data model"
  [roles]="base config tokenizer image comm data dataplane plan parallel model ckpt wire sources"
  [runtime]="base config tokenizer image comm data dataplane plan parallel model ckpt wire sources
             roles train"
)

bad=0
may_use() {  # folder, dependency
  [[ " ${allowed[$1]//$'\n'/ } " == *" $2 "* ]]
}
for dir in "$root"/lib/*/; do
  folder=$(basename "$dir")
  if [[ -z ${allowed[$folder]+set} ]]; then
    echo "lib/$folder: not in the table of tests/house/layers_test.sh"
    bad=1
    continue
  fi
  # Quoted includes name a folder from the root: "plan/planner.hpp".
  while IFS=: read -r file line text; do
    dep=${text#'#include "'}
    dep=${dep%%/*}
    [[ $dep == "$folder" ]] && continue
    if ! may_use "$folder" "$dep"; then
      echo "${file#"$root"/}:$line: $folder/ may not include $dep/ ($text)"
      bad=1
    fi
  done < <(grep -rnE '^#include "[^/"]+/' "$dir" --include='*.hpp' --include='*.cpp' \
             --include='*.h' --include='*.cuh' --include='*.cu')
  # Link dependencies: every meshloom_<folder> the library names.
  cmake="$dir/CMakeLists.txt"
  [[ -f $cmake ]] || continue
  for dep in $(grep -v '^\s*#' "$cmake" | grep -oE 'meshloom_[a-z_]+' | sed 's/^meshloom_//' | sort -u); do
    [[ $dep == "$folder" || $dep == options ]] && continue
    if ! may_use "$folder" "$dep"; then
      echo "lib/$folder/CMakeLists.txt: meshloom_$folder may not link meshloom_$dep"
      bad=1
    fi
  done
done
[[ $bad == 0 ]] && echo "layers: every lib/ folder uses only the folders below it"
exit $bad
