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
# OpenBLAS runs single-threaded in meshloom (model::gemm); with this its
# pool starts no thread at load time either.
export OPENBLAS_NUM_THREADS=1
case $san_kind in
  address)
    export ASAN_OPTIONS="log_path=$MESHLOOM_SANITIZER_LOGS/asan:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=0:abort_on_error=0:halt_on_error=1"
    export LSAN_OPTIONS="suppressions=$san_dir/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="log_path=$MESHLOOM_SANITIZER_LOGS/ubsan:suppressions=$san_dir/ubsan.supp:halt_on_error=1:print_stacktrace=1:print_suppressions=0"
    ;;
  thread)
    # libgomp is not built with TSan: its barriers are invisible to TSan, so
    # every parallel region would report races that are none. OMP_THREAD_LIMIT
    # (unlike OMP_NUM_THREADS) caps num_threads() clauses too: every region runs
    # on its calling thread. The OpenMP code's thread-count invariance is
    # tested by the ordinary build.
    export OMP_THREAD_LIMIT=1
    export TSAN_OPTIONS="log_path=$MESHLOOM_SANITIZER_LOGS/tsan:suppressions=$san_dir/tsan.supp:halt_on_error=1:second_deadlock_stack=1:history_size=7:print_suppressions=0"
    ;;
  *)
    echo "tests/sanitizers/env.sh: unknown sanitizer '$san_kind' (address or thread)" >&2
    return 2
    ;;
esac
unset san_kind san_build san_dir
