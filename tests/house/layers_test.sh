#!/usr/bin/env bash
# The layers of lib/ (README.md, "Where things live"): a folder includes only
# the folders below it, and links only those, so that e.g. train/ builds
# without the roles. The table says what each may use; a new folder must be
# added to it. Each file of lib/FOLDER/ declares its names in
# meshloom::FOLDER (namespace = folder), or in namespaces nested in it. The one
# exception is lib/base/, the project's vocabulary (Error, strf, the checks),
# which declares the root namespace meshloom, as LLVM's Support lives in llvm::;
# a base file may also nest namespaces in it (meshloom::detail), but none that
# a lib/ folder owns (meshloom::plan). Usage: layers_test.sh [REPO_ROOT]
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
  [plan]="base config model"
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
# A folder's namespaces: meshloom::FOLDER[::...] (for base: meshloom and
# meshloom::X[::...] where X is no lib/ folder) and, once a file is inside it,
# any nested one; anonymous namespaces and aliases (namespace fs = ...)
# anywhere. Prints each other one and fails.
check_namespaces() {  # folder, its files...
  local folder=$1
  shift
  awk -v folder="$folder" -v root="$root/" -v folders="${!allowed[*]}" '
    BEGIN { split(folders, list, " "); for (i in list) owned[list[i]] = 1 }
    FNR == 1 { inside = 0 }
    /^[[:space:]]*namespace([[:space:]]|\{|$)/ {
      name = $0
      sub(/^[[:space:]]*namespace[[:space:]]*/, "", name)
      if (name ~ /^[A-Za-z0-9_]+[[:space:]]*=/) next
      match(name, /^[A-Za-z0-9_:]*/)
      name = substr(name, 1, RLENGTH)
      if (name == "") next
      own = folder == "base" ? "meshloom" : "meshloom::" folder
      if (name == own || index(name, own "::") == 1) {
        top = substr(name, length("meshloom::") + 1)
        sub(/::.*/, "", top)
        if (folder != "base" || name == own || !(top in owned)) { inside = 1; next }
      }
      if (inside && name !~ /^meshloom(::|$)/) next
      file = FILENAME
      if (index(file, root) == 1) file = substr(file, length(root) + 1)
      if (folder == "base" && name != own && index(name, own "::") == 1)
        printf "%s:%d: lib/base/ declares namespace %s, which lib/%s/ owns\n", file, FNR, name, top
      else
        printf "%s:%d: lib/%s/ declares namespace %s, not %s\n", file, FNR, folder, name, own
      bad = 1
    }
    END { exit bad }' "$@"
}

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
  mapfile -t files < <(find "$dir" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \
                         -o -name '*.cuh' -o -name '*.cu' \) | sort)
  ((${#files[@]} == 0)) || check_namespaces "$folder" "${files[@]}" || bad=1
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
[[ $bad == 0 ]] &&
  echo "layers: every lib/ folder uses only the folders below it, in its own namespace"
exit $bad
