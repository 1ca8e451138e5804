#!/usr/bin/env bash
# test.sh: install what is missing, build, and run every test with ctest.
#   scripts/test.sh                  all tests
#   scripts/test.sh -L unit          only one label (unit, mpi, cli, slurm, gpu)
#   scripts/test.sh -R config        tests whose name matches
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${TEST_JOBS:-2}" "$@"
