#!/usr/bin/env bash
# gpu_bundle.sh: the GPU tests, the benchmarks and meshloom itself, with an
# OpenMPI to launch them, as one self-contained bundle for a GPU machine that
# has the CUDA toolkit but none of the Debian packages meshloom builds against
# (the lent device machines: CUDA 13, cuBLAS, NCCL as a Python wheel; no
# OpenMPI, HDF5, yaml-cpp, OpenBLAS, ICU or libarchive). Builds the targets
# here and packs into build-bundle/bundle.tar.xz (git-ignored; with the repo
# under the device machine's 64 MiB):
#   bin/    the GPU test binaries, device_ring_test, device_ulysses_test,
#           tp_gpu_test and nccl_comm_test (MPI),
#           the benchmarks, meshloom with libmeshloom_cuda.so beside it, and the
#           test-only NCCL over MPI (libmeshloom_nccl_shim.so, preloaded)
#   lib/    every shared library they and OpenMPI need, other than CUDA's and
#           glibc's and the C++ runtime (the GPU machine has newer ones)
#   mpi/    Debian's OpenMPI 4.1 relocated: orterun (mpirun), orted,
#           ompi_info, the MCA components (less UCX, OFI, verbs, PSM and
#           OpenSHMEM ones), PMIx's, help files and config; run.sh points
#           OPAL_* and PMIX_* at it
#   data/   the invariance test's dataset (tests/train/invariance_cases.sh:
#           Python docs, byte tokenizer), made here: the GPU machine has no
#           docs to prepare it from
#   invariance_cases.sh, compare_dumps.py
#   torch_peer.py, torch_peer_model.py  the PyTorch peer of gpu_step_bench
#   make_hf_llama.py, hf_transformers_check.py  transformers against import/export (hf)
#   commit.txt  the commit the bundle was built from (and whether the
#               working tree had uncommitted changes)
# and writes build-bundle/run.sh (scripts/gpu/gpu_bundle_run.sh), which unpacks
# the archive into /tmp once and runs, on the GPU machine:
#
#   build-bundle/run.sh [tests] [mpi] [train] [bench] [sanitize] [cpu] [hf] [eval]
#   runs the parts named, in that order (default: the first five, in order):
#     tests     every single-process GPU test binary
#     mpi       device_ring_test on 1, 2 and 3 ranks, device_ulysses_test on
#               1, 2 and 4, tp_gpu_test on 2,
#               nccl_comm_test on 1 (all on the one GPU), under the bundled
#               mpirun
#     train     the GPU cases of tests/train/invariance_test.sh (meshloom train
#               on 1-4 GPU trainers sharing the GPU, one step dump each) and,
#               where python3 has h5py, their comparison with a CPU reference
#               the bundled meshloom makes there; the dumps and logs come back
#               in train_dumps.tar.gz, which `scripts/gpu/gpu_bundle_check.sh DIR`
#               compares here with a CPU reference made here
#     bench     attention_bench and gpu_step_bench, then the same step in
#               PyTorch (torch_peer.py, PEER_SECONDS, default 90; skipped
#               where python3 has no torch), raw outputs for
#               `RAW=DIR scripts/bench/bench_step_gpu.sh` back here
#     sanitize  compute-sanitizer memcheck, racecheck, synccheck, initcheck on
#               the attention kernels and the offloading model test
#     cpu       (named only) scripts/bench/bench_pp.sh's runs on the machine's
#               CPU cores, when the checkout and data/bench_step's pydocs
#               and fortunes (.bin, .idx) are there
#     hf        (named only) transformers loads an import-hf + export-hf of a
#               tiny random Llama checkpoint without warnings, with the
#               original's logits, and the first step's loss of a run from
#               it (CPU and GPU, fp32) is transformers'; skipped where
#               python3 has no transformers
#     eval      (named only) evaluation while training and meshloom eval
#               --passkey on the GPU against the CPU (fp32): held-out losses
#               and passkey scores within 1e-4
#   Results go to $OUT (or build-bundle/out), at most 8 files (the device
#   machine returns no more), kept up to date as the parts go: summary.md
#   (the table, printed last too), logs.tar.gz (every log and gtest XML),
#   train_dumps.tar.gz (split into .partNN pieces past 15 MiB), gpu.txt and
#   the three bench outputs. summary.md names the bundle's commit.
#
#   scripts/gpu/gpu_bundle.sh            build the bundle (BUILD_DIR, default build)
#   scripts/gpu/gpu_bundle_selftest.sh   run it here first, the system's OpenMPI hidden
#   device tool: run with carry ["build-bundle"] (it must sit in the checkout
#   the session calls from) and command `build-bundle/run.sh [parts]`
#   any other GPU machine: copy build-bundle/ there, run
#   `OUT=DIR build-bundle/run.sh [parts]`, copy DIR back (docs/cuda.md)
#   scripts/gpu/gpu_bundle_check.sh DIR  back here: the returned train dumps
#                                    against a CPU reference made here
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
bundle=${BUNDLE_OUT:-build-bundle}  # another folder for the ctest (tests/kernels)
stage=$BUILD/bundle-stage
tests=(device_info_test gemm_gpu_test attention_gpu_test cudnn_graph_test cudnn_attention_gpu_test
       ops_gpu_test embedding_gpu_test
       gpu_transformer_test train_gpu_test comm_logic_test device_ring_test device_ulysses_test
       tp_gpu_test nccl_comm_test)
benches=(attention_bench gpu_step_bench)

[[ -f $BUILD/build.ninja ]] || scripts/setup.sh
grep -q '^MESHLOOM_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
  grep -q 'meshloom_kernels' "$BUILD/build.ninja" ||
  { echo "gpu_bundle: $BUILD is a CPU-only build (no nvcc or NCCL found)" >&2; exit 1; }
# cuDNN's tests exist only where CMake found cuDNN (kernels/CMakeLists.txt).
if ! grep -q '^CUDNN_LIBRARY:FILEPATH=/' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  tests=("${tests[@]/cudnn_graph_test}")
  tests=("${tests[@]/cudnn_attention_gpu_test}")
  read -r -a tests <<<"${tests[*]}"
fi
echo "[gpu_bundle] building meshloom meshloom_cuda ${tests[*]} ${benches[*]}"
cmake --build "$BUILD" --target meshloom meshloom_cuda meshloom_nccl_shim "${tests[@]}" "${benches[@]}" >/dev/null

rm -rf "$stage" "$bundle"
mkdir -p "$stage"/{bin,lib,data} "$stage"/mpi/{bin,etc,lib/openmpi,lib/pmix,share/openmpi,share/pmix} "$bundle"
for t in "${tests[@]}" "${benches[@]}" meshloom libmeshloom_cuda.so libmeshloom_nccl_shim.so; do
  # The newest: a long-lived build folder keeps binaries of targets that
  # moved (tests/kernels/ and tests/cuda/ have both held them), and the
  # first found was one of those in the bundles of 2026-11-26.
  path=$(find "$BUILD" -path "$stage" -prune -o -type f -name "$t" -perm -u+x -printf '%T@ %p\n' |
         sort -rn | head -1 | cut -d' ' -f2-)
  [[ -n $path ]] || { echo "gpu_bundle: $t was not built" >&2; exit 1; }
  cp "$path" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$t"
done

# OpenMPI, where `ompi_info --path` says Debian put it; PMIx (external in
# Debian's build) where its own config file points.
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
pkglibdir=$(ompi_path pkglibdir) pkgdatadir=$(ompi_path pkgdatadir) sysconfdir=$(ompi_path sysconfdir)
bindir=$(ompi_path bindir)
for d in "$pkglibdir" "$pkgdatadir" "$sysconfdir"; do
  [[ -d $d ]] || { echo "gpu_bundle: OpenMPI's $d is missing" >&2; exit 1; }
done
cp "$bindir/orterun" "$bindir/orted" "$bindir/ompi_info" "$stage/mpi/bin/"
ln -s orterun "$stage/mpi/bin/mpirun"
ln -s orterun "$stage/mpi/bin/mpiexec"
cp -r "$pkgdatadir/." "$stage/mpi/share/openmpi/"
cp "$sysconfdir"/openmpi-mca-params.conf "$sysconfdir"/openmpi-default-hostfile "$stage/mpi/etc/"
# MCA components, less those for fabrics and OpenSHMEM, which would need
# libraries (UCX, libfabric, verbs, PSM) that a one-node run never uses.
fabric='^(liboshmem|libuc[pstm]|libmca_common_(ucx|ofi|verbs)|libfabric|libibverbs|librdmacm|libpsm|libinfinipath)'
for c in "$pkglibdir"/*.so; do
  ldd "$c" | awk '{ print $1 }' | grep -qE "$fabric" && continue
  cp "$c" "$stage/mpi/lib/openmpi/"
done
pmix=$(ldd "$pkglibdir/mca_pmix_ext3x.so" 2>/dev/null | awk '$1 ~ /^libpmix/ { print $3 }')
if [[ -n $pmix ]]; then
  pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix")")")  # PREFIX/lib/libpmix.so.N
  [[ -d $pmix_prefix/lib/pmix ]] && cp "$pmix_prefix"/lib/pmix/*.so "$stage/mpi/lib/pmix/"
  [[ -d $pmix_prefix/share/pmix ]] && cp -r "$pmix_prefix/share/pmix/." "$stage/mpi/share/pmix/"
fi

# Libraries: what ldd resolves outside CUDA, glibc and the C++ runtime (the GPU
# machine has newer ones of those), for the programs and the MCA components.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libutil\.|libanl\.|libnss_|libthread_db\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcudnn|libnccl|libnvidia)'
for b in "$stage"/bin/* "$stage"/mpi/bin/orterun "$stage"/mpi/bin/orted "$stage"/mpi/bin/ompi_info \
         "$stage"/mpi/lib/openmpi/*.so "$stage"/mpi/lib/pmix/*.so; do
  ldd "$b" | awk '$3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$stage/lib/$name"
done

# The invariance test's data, config and cases, the dump comparison, the
# PyTorch peer, and the commit all of it comes from.
cp tests/train/invariance_cases.sh scripts/data/compare_dumps.py scripts/gpu/torch_peer.py \
  scripts/gpu/torch_peer_model.py tests/data/make_hf_llama.py scripts/gpu/hf_transformers_check.py \
  "$stage/"
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit+=" with uncommitted changes"
echo "$commit" >"$stage/commit.txt"
(
  set +e  # testlib.sh's exit trap is not written for errexit
  # shellcheck disable=SC2034  # read by testlib.sh
  meshloom=$(cd "$BUILD" && pwd)/app/meshloom
  # shellcheck source=tests/common/testlib.sh
  source tests/common/testlib.sh
  # shellcheck source=tests/train/invariance_cases.sh
  source tests/train/invariance_cases.sh
  # shellcheck disable=SC2154  # invariance_docs: invariance_cases.sh
  prepare_docs docs "$invariance_docs" && cp "$dir/docs.bin" "$dir/docs.idx" "$stage/data/"
)

echo "[gpu_bundle] packing $(du -sm "$stage" | cut -f1) MiB into $bundle/bundle.tar.xz"
tar -C "$stage" -cf - . | xz -T0 -9 >"$bundle/bundle.tar.xz"
cp scripts/gpu/gpu_bundle_run.sh "$bundle/run.sh"
chmod +x "$bundle/run.sh"
size=$(du -sm "$bundle" | cut -f1)
repo=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
count() { find "$1" -mindepth 1 -maxdepth 1 | wc -l; }
echo "[gpu_bundle] $bundle: $(count "$stage/bin") programs, $(count "$stage/lib") libraries," \
     "$(count "$stage/mpi/lib/openmpi") MCA components; ${size} MiB to carry" \
     "(unpacked $(du -sm "$stage" | cut -f1) MiB), the repo's tracked files $((repo / 1048576)) MiB"
((size + repo / 1048576 < 63)) || echo "[gpu_bundle] warning: bundle and repo over 64 MiB, too large to carry to the device machine" >&2
echo "[gpu_bundle] on the GPU machine: $bundle/run.sh [parts]  (results in \$OUT or $bundle/out)"
