# Sourced (bash): exports the runtime options of a sanitizer build, as
# scripts/test.sh --sanitize KIND does; source it yourself to run ctest or a
# binary of build-asan/build-tsan by hand:
#   source tests/sanitizers/env.sh address build-asan
# $1: address or thread; $2: the build folder (reports go to $2/sanitizer-logs).
# The variables are inherited by ctest, mpirun and so by every MPI rank.
# docs/sanitizers.md explains each option and suppression.
san_kind=${1:?address or thread}
san_build=$(cd "${2:?build folder}" && pwd)
san_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Every report of every process (MPI ranks, gtest discovery, the meshloom runs
# of the shell tests, whose expected failures would hide a report's exit code)
# lands in a file here, named after the pid; scripts/test.sh fails when any exists.
export MESHLOOM_SANITIZER_LOGS=$san_build/sanitizer-logs
mkdir -p "$MESHLOOM_SANITIZER_LOGS"
# The CPU model's OpenMP teams and OpenBLAS stay as they are configured
# (tests set their thread counts); OpenBLAS's own pool is one thread anyway
# (model::gemm), so it starts none.
export OPENBLAS_NUM_THREADS=1
case $san_kind in
  address)
    export ASAN_OPTIONS="log_path=$MESHLOOM_SANITIZER_LOGS/asan:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=0:abort_on_error=0:halt_on_error=1"
    export LSAN_OPTIONS="suppressions=$san_dir/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="log_path=$MESHLOOM_SANITIZER_LOGS/ubsan:suppressions=$san_dir/ubsan.supp:halt_on_error=1:print_stacktrace=1:print_suppressions=0"
    ;;
  thread)
    export TSAN_OPTIONS="log_path=$MESHLOOM_SANITIZER_LOGS/tsan:suppressions=$san_dir/tsan.supp:halt_on_error=1:second_deadlock_stack=1:history_size=4:print_suppressions=0"
    ;;
  *)
    echo "tests/sanitizers/env.sh: unknown sanitizer '$san_kind' (address or thread)" >&2
    return 2
    ;;
esac
unset san_kind san_build san_dir
