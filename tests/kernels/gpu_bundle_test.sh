#!/usr/bin/env bash
# The GPU bundle, packed and run here as on a GPU machine without meshloom's
# packages (scripts/gpu/gpu_bundle.sh, then scripts/gpu/gpu_bundle_selftest.sh with the
# system's OpenMPI hidden), so that a bundle broken by a change is found here
# and not in a scarce GPU session. Without a GPU its GPU tests skip, its
# training cases stop with meshloom's "no GPU" error, its benchmarks say
# there is no GPU and the PyTorch peer skips, which the selftest expects.
# Skipped (77) where a private mount namespace cannot be made (not root, or
# a sandbox without CAP_SYS_ADMIN).
#   gpu_bundle_test.sh BUILD_DIR
set -euo pipefail
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! unshare -m true 2>/dev/null; then
  echo "skipped: cannot make a private mount namespace here (unshare -m; root needed)"
  exit 77
fi
export BUILD_DIR=$build BUNDLE_OUT=$build/gpu-bundle
"$root/scripts/gpu/gpu_bundle.sh"
"$root/scripts/gpu/gpu_bundle_selftest.sh" tests mpi train bench
