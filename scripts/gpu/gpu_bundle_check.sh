#!/usr/bin/env bash
# gpu_bundle_check.sh: checks the training dumps that `build-bundle/run.sh
# train` (scripts/gpu/gpu_bundle.sh) brought back from a GPU machine: the GPU
# cases of tests/train/invariance_test.sh against the one-trainer CPU
# reference, made here with this build, the same data (prepared here as the
# bundle's was; checksums compared) and the same config and cases (the copy of
# invariance_cases.sh that came back), at the cases' tolerances
# (scripts/data/compare_dumps.py). Prints a table; exits 1 if a case failed.
#
#   scripts/gpu/gpu_bundle_check.sh DIR     DIR holds train_dumps.tar.gz (or its
#                                       .partNN pieces), e.g. the device
#                                       tool's files_at folder
#   KEEP=1 ...                          keep the work folder (printed)
set -uo pipefail
[[ $# == 1 ]] || { sed -n '2,13p' "$0"; exit 2; }
src=$(cd "$1" && pwd) || exit 2
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD_DIR:-build}
meshloom=$PWD/$BUILD/app/meshloom
[[ -x $meshloom ]] || { echo "gpu_bundle_check: no $meshloom (scripts/setup.sh)" >&2; exit 2; }
mpiexec=$(command -v mpirun) || { echo "gpu_bundle_check: no mpirun" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
# shellcheck source=tests/common/testlib.sh
source tests/common/testlib.sh
[[ ${KEEP:-0} == 1 ]] && { trap - EXIT; echo "work folder: $dir"; }

pieces=("$src"/train_dumps.tar.gz*)
[[ -f ${pieces[0]} ]] || fail "no train_dumps.tar.gz in $src"
cat "${pieces[@]}" | tar -xzf - -C "$dir" || fail "cannot unpack ${pieces[*]}"
[[ -f $dir/invariance_cases.sh ]] || fail "no invariance_cases.sh in the dumps"
# The definition the GPU machine ran (the checkout's may have moved on since).
# shellcheck source=tests/train/invariance_cases.sh
source "$dir/invariance_cases.sh"
cmp -s "$dir/invariance_cases.sh" tests/train/invariance_cases.sh ||
  echo "note: the bundle's invariance_cases.sh differs from tests/train/'s; checking with the bundle's"
mv "$dir/c.yaml" "$dir/c.gpu.yaml"
invariance_config cuda >"$dir/c.yaml"
# The same config but for the folders: run.dir and the data's path.
same() { sed -E 's#(dir|path): [^,}]*#\1: X#g' "$1"; }
diff <(same "$dir/c.gpu.yaml") <(same "$dir/c.yaml") >/dev/null ||
  fail "the GPU machine's config differs from the one made here: $(diff <(same "$dir/c.gpu.yaml") <(same "$dir/c.yaml"))"
prepare_docs docs "$invariance_docs"
(cd "$dir" && sha256sum --quiet -c data.sha256) || fail "the data prepared here differ from the bundle's"

echo "[check] the CPU reference, one trainer, here"
invariance_run ref "${invariance_ref[@]}" || { cat "$dir/ref.txt"; fail "the reference run failed"; }
[[ -f $dir/gpu.txt ]] && gpu=$(head -1 "$dir/gpu.txt")
echo "GPU cases of invariance_cases.sh, run on ${gpu:-the GPU machine}, against the CPU reference made here:"
echo
echo "| case | trainers | exit | on the GPU | tolerance | comparison |"
echo "| --- | ---: | ---: | --- | ---: | --- |"
failed=0
for case in "${invariance_gpu_cases[@]}"; do
  invariance_case "$case"
  rc=$(awk -v n="$case_name" '$1 == n { print $2 }' "$dir/exit_codes.txt" 2>/dev/null)
  on_gpu=no
  [[ -f $dir/$case_name.txt ]] && invariance_on_gpu "$case_name" && on_gpu=yes
  there=$(awk -v n="$case_name" '$1 == n { $1 = ""; print substr($0, 2) }' "$dir/compared_there.txt" 2>/dev/null)
  if [[ ! -f $dir/$case_name.txt ]]; then
    result="not run"
  elif [[ ! -f $dir/$case_name.h5 && -n $there ]]; then
    result="$there (compared on the GPU machine, dump left there)"
  elif [[ ! -f $dir/$case_name.h5 ]]; then
    result="no dump: $(grep -m1 -E 'meshloom: error|FATAL' "$dir/$case_name.txt" | cut -c1-160)"
  else
    result=$(invariance_compare /usr/bin/python3 "$root/scripts/data/compare_dumps.py" "$case_name" "$case_tol" "${case_args[@]}" 2>&1 | tail -1)
  fi
  [[ ${rc:-?} == 0 && $on_gpu == yes && $result == ok:* ]] || failed=$((failed + 1))
  echo "| $case_name | $case_trainers | ${rc:-?} | $on_gpu | $case_tol | ${result//|//} |"
done
echo
if ((failed)); then
  echo "FAIL: $failed of ${#invariance_gpu_cases[@]} GPU cases"
  exit 1
fi
echo "ok: all ${#invariance_gpu_cases[@]} GPU cases match the CPU reference"
