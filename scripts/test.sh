#!/usr/bin/env bash
# test.sh: install what is missing, build, and run every test with ctest.
#   scripts/test.sh                  all tests
#   scripts/test.sh -L unit          only one label (unit, mpi, cli, slurm, gpu, peer)
#   scripts/test.sh -R config        tests whose name matches
#   scripts/test.sh --sanitize address [CTEST ARGS]   ASan + UBSan build in build-asan
#   scripts/test.sh --sanitize thread  [CTEST ARGS]   TSan build in build-tsan
# A sanitizer run builds its own folder (RelWithDebInfo, CUDA off) and runs the
# unit and mpi labels unless ctest arguments are given; any report of any
# process fails it. See docs/sanitizers.md.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=
case ${1:-} in
  --sanitize) sanitize=${2:?"--sanitize needs address or thread"}; shift 2 ;;
  --sanitize=*) sanitize=${1#--sanitize=}; shift ;;
esac
if [[ -z $sanitize ]]; then
  scripts/setup.sh
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  cd "${BUILD_DIR:-build}"
  ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@"
  exit
fi

case $sanitize in
  address) dir=${BUILD_DIR:-build-asan} ;;
  thread) dir=${BUILD_DIR:-build-tsan} ;;
  *) echo "test.sh: --sanitize takes address or thread, not '$sanitize'" >&2; exit 2 ;;
esac
SETUP_NO_BUILD=1 scripts/setup.sh
WERROR=OFF; [[ ${CI:-} == true || ${MESHLOOM_WERROR:-0} == 1 ]] && WERROR=ON
echo "[test] configuring $dir (sanitizer $sanitize, ${BUILD_TYPE:-RelWithDebInfo}, CUDA off)"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DMESHLOOM_CUDA=OFF -DMESHLOOM_SANITIZE="$sanitize" -DMESHLOOM_WERROR="$WERROR" >/dev/null
# The options are in force while building too: gtest_discover_tests runs the
# test binaries after linking them.
source tests/sanitizers/env.sh "$sanitize" "$dir"
rm -f "$MESHLOOM_SANITIZER_LOGS"/*
cmake --build "$dir" -j "${BUILD_JOBS:-$(nproc)}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
(($#)) || set -- -L '^(unit|mpi)$'
rc=0
(cd "$dir" && ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@") || rc=$?
# Processes whose failure a test expects (or that MPI_Abort ends) can hide a
# report from ctest: every report is in a file, and any file fails the run.
shopt -s nullglob
reports=("$MESHLOOM_SANITIZER_LOGS"/*)
if ((${#reports[@]})); then
  for f in "${reports[@]}"; do
    printf '\n[test] ==== sanitizer report %s\n' "$f"
    head -n 80 "$f"
  done
  echo "[test] ${#reports[@]} sanitizer report(s) in $MESHLOOM_SANITIZER_LOGS" >&2
  ((rc)) || rc=1
else
  echo "[test] no sanitizer report"
fi
exit $rc
