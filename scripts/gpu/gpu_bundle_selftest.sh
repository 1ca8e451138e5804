#!/usr/bin/env bash
# gpu_bundle_selftest.sh: runs the GPU bundle (scripts/gpu/gpu_bundle.sh) here the
# way a GPU machine without meshloom's packages would, before carrying it:
# from a copy in another folder (/tmp/bundle-test), in a private mount
# namespace (unshare -m, root) in which the system's OpenMPI (programs,
# libraries, MCA components, help files, config), PMIx, hwloc plugins and every
# library the bundle carries (less those the shell tools and python3 with h5py
# load themselves) are masked by empty folders and /dev/null bound over them,
# the system install itself untouched; with a clean environment and PATH
# holding only the shell tools run.sh uses (no mpirun, no ssh), and under
# `strace -f`. Fails if a process looked in the system's OpenMPI or PMIx
# folders, if a bundled program loaded a library the bundle carries from
# elsewhere, if a library does not resolve, if an MPI test or the CPU
# reference run failed, or if more than 8 files came out. Without a GPU the
# GPU tests skip and the GPU training cases stop with meshloom's "no GPU"
# error; the summary says so.
#
#   scripts/gpu/gpu_bundle_selftest.sh [PARTS...]      (default: mpi train)
#   KEEP=1 ...    keep /tmp/bundle-test (trace in /tmp/bundle-test/trace.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
test_dir=/tmp/bundle-test
bundle=${BUNDLE_OUT:-build-bundle}  # as scripts/gpu/gpu_bundle.sh
if [[ -z ${SELFTEST_INNER:-} ]]; then
  [[ -f $bundle/bundle.tar.xz && -x $bundle/run.sh ]] ||
    { echo "gpu_bundle_selftest: no $bundle/ (scripts/gpu/gpu_bundle.sh)" >&2; exit 1; }
  [[ $(id -u) == 0 ]] || { echo "gpu_bundle_selftest: needs root (unshare -m, mount --bind)" >&2; exit 1; }
  command -v strace >/dev/null || { echo "gpu_bundle_selftest: needs strace" >&2; exit 1; }
  rm -rf "$test_dir" && mkdir -p "$test_dir/bundle"
  cp "$bundle/run.sh" "$bundle/bundle.tar.xz" "$test_dir/bundle/"
  rc=0
  SELFTEST_INNER=1 unshare -m --propagation private "$0" "$@" || rc=$?
  if [[ ${KEEP:-0} == 1 ]]; then echo "[selftest] kept $test_dir"; else rm -rf "$test_dir"; fi
  exit $rc
fi

# Inside the namespace: mask the system install.
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
empty=$test_dir/empty fake=$test_dir/fake-program
mkdir -p "$empty"
# shellcheck disable=SC2016  # $0 of the fake program
printf '#!/bin/sh\necho "gpu_bundle_selftest: the system program $0 ran" >&2\nexit 99\n' >"$fake"
chmod +x "$fake"
pmix_lib=$(readlink -f "$(ldd "$(ompi_path pkglibdir)/mca_pmix_ext3x.so" | awk '$1 ~ /^libpmix/ { print $3 }')")
pmix_prefix=$(dirname "$(dirname "$pmix_lib")")
system_mpi=("$(ompi_path libdir)" "$(ompi_path pkglibdir)" "$(ompi_path pkgdatadir)" "$(ompi_path sysconfdir)"
            "$pmix_prefix")
masked_dirs=("${system_mpi[@]}")
for d in /usr/lib/x86_64-linux-gnu/hwloc /usr/lib/x86_64-linux-gnu/hdf5; do
  [[ -d $d ]] && masked_dirs+=("$d")
done
programs=()
for p in orterun orted ompi_info mpirun mpiexec ompi-server; do
  f=$(command -v "$p" || true)
  [[ -n $f ]] && programs+=("$(readlink -f "$f")")
done
mapfile -t programs < <(printf '%s\n' "${programs[@]}" | sort -u)

# The tools run.sh uses, alone on PATH; their libraries (and python3's with
# h5py and numpy) stay visible.
tools=$test_dir/tools
mkdir -p "$tools"
for t in bash sh env cat cp rm mkdir mktemp ls du stat split date cksum sha256sum timeout sed awk \
         grep sort uniq tr cut head tail wc tar xz gzip dirname basename ldd uname python3 true false; do
  f=$(command -v "$t") && ln -sf "$f" "$tools/$t"
done
ln -sf /usr/bin/python3 "$tools/python3"  # the system's, with numpy and h5py
keep_libs=$({ for t in "$tools"/*; do ldd "$(readlink -f "$t")" 2>/dev/null; done |
              awk '$3 ~ /^\// { print $3 }'
            /usr/bin/python3 -c 'import h5py, numpy; print(open("/proc/self/maps").read())' 2>/dev/null |
              awk '$6 ~ /\.so/ { print $6 }'; } | xargs -r readlink -f | sort -u)
bundle_libs=$(xz -dc "$test_dir/bundle/bundle.tar.xz" | tar -tf - | sed -n 's|^\./lib/||p' | grep .)
masked_libs=()
for name in $bundle_libs; do
  f=$(readlink -f "/usr/lib/x86_64-linux-gnu/$name" 2>/dev/null || true)
  [[ -f $f ]] || continue
  grep -qxF "$f" <<<"$keep_libs" || masked_libs+=("$f")
done
for d in "${masked_dirs[@]}"; do  # (what lies inside a folder masked already is gone)
  if [[ -d $d ]]; then mount --bind "$empty" "$d"; fi
done
for p in "${programs[@]}"; do mount --bind "$fake" "$p"; done
for f in "${masked_libs[@]}"; do
  if [[ -f $f ]]; then mount --bind /dev/null "$f"; fi
done
echo "[selftest] masked ${#masked_dirs[@]} folders (${masked_dirs[*]}), ${#programs[@]} programs," \
     "${#masked_libs[@]} libraries; PATH holds only $(find "$tools" -mindepth 1 | wc -l) shell tools"

parts=("$@")
((${#parts[@]})) || parts=(mpi train)
mkdir -p "$test_dir/tmp"
set +e
env -i HOME="$test_dir" PATH="$tools" OUT="$test_dir/out" BUNDLE_DIR="$test_dir/unpacked" \
  TMPDIR="$test_dir/tmp" LANG=C.UTF-8 \
  "$(command -v strace)" -f -qq -e trace=execve,openat,open,clone,clone3,fork,vfork -o "$test_dir/trace.txt" \
  "$test_dir/bundle/run.sh" "${parts[@]}" >"$test_dir/run.log" 2>&1 < /dev/null
rc=$?
set -e
echo "[selftest] run.sh ${parts[*]}: exit $rc (output in $test_dir/run.log)"

# The trace: which program each process runs (execve, inherited over clone),
# what it opened.
b=$test_dir/unpacked
system_re=$(printf '%s|' "${system_mpi[@]}")
system_re="^(${system_re%|})"
awk -v b="$b" -v sysre="$system_re" -v libs="$(tr '\n' ' ' <<<"$bundle_libs")" '
  BEGIN { n = split(libs, l, " "); for (i = 1; i <= n; i++) bundled[l[i]] = 1 }
  function path_of(s,   m) { return match(s, /"[^"]*"/) ? substr(s, RSTART + 1, RLENGTH - 2) : "" }
  {
    pid = $1; line = $0
    if (line ~ /<\.\.\. [a-z0-9]+ resumed>/) { line = pending[pid] line; delete pending[pid] }
    else if (line ~ /<unfinished \.\.\.>$/) { pending[pid] = line; next }
    call = line; sub(/^[0-9]+ +/, "", call); sub(/\(.*/, "", call)
    result = line; sub(/.*\) += /, "", result)
    if (call ~ /^(clone|clone3|fork|vfork)$/ && result ~ /^[0-9]+/) { exe[result + 0] = exe[pid]; next }
    if (call == "execve") { if (result ~ /^0/) exe[pid] = path_of(line); next }
    if (call !~ /^open/) next
    p = path_of(line)
    if (p ~ sysre && p !~ /\.so[.0-9]*$/ && p !~ /glibc-hwcaps|\/tls|\/x86_64$/ && p !~ /\/lib$/)
      print "system OpenMPI/PMIx file: " exe[pid] " looked for " p " (" result ")"
    if (index(exe[pid], b) == 1 && result ~ /^[0-9]/ && p ~ /\.so[.0-9]*$/ && index(p, b) != 1) {
      k = split(p, parts, "/")
      if (parts[k] in bundled) print "outside the bundle: " exe[pid] " loaded " p
      else other[p] = 1
    }
  }
  END { for (p in other) print "info: also loaded from the system: " p }
' "$test_dir/trace.txt" | sort -u >"$test_dir/trace_findings.txt"

set +e  # the checks below collect problems rather than stop at the first
problems=()
grep -v '^info:' "$test_dir/trace_findings.txt" | head -20 | sed 's/^/  /'
grep -q -v '^info:' "$test_dir/trace_findings.txt" && problems+=("the trace shows system OpenMPI/PMIx files or libraries looked for (above)")
echo "[selftest] loaded from the system by bundled programs (expected: glibc, the C++ runtime, CUDA):"
grep '^info:' "$test_dir/trace_findings.txt" | sed 's/^info: also loaded from the system: /  /' | sort | head -30
started=$(grep -oE ' execve\("'"$b"'/[^"]*"' "$test_dir/trace.txt" | sed -E 's|^ execve\("'"$b"'/([^"]*)".*|\1|' |
          sort | uniq -c | awk '{ printf " %s x%d", $2, $1 }')
echo "[selftest] programs started from the bundle:$started"
grep -q 'the system program' "$test_dir/run.log" && problems+=("a masked system program ran")
summary=$test_dir/out/summary.md
if [[ -f $summary ]]; then
  echo; cat "$summary"; echo
  grep -q '| libraries | all resolve' "$summary" || problems+=("libraries do not resolve")
  # Without a GPU an MPI test whose every case skipped exits 77 (mpi_gtest_main.cpp).
  awk -F'|' '$2 ~ /mpi/ && $4 !~ /rc (0|77):/ { bad = 1 } END { exit bad }' "$summary" || problems+=("an MPI test failed")
  if [[ " ${parts[*]} " == *" train "* ]]; then
    grep -q '| train | ref: CPU, 1 trainer | rc 0' "$summary" || problems+=("the CPU reference run failed")
    [[ -n $(ls "$test_dir"/out/train_dumps.tar.gz* 2>/dev/null) ]] || problems+=("no train_dumps.tar.gz")
  fi
  # Without a GPU the benchmarks say so and exit 0; the PyTorch peer skips
  # (no torch, or no CUDA) but leaves its line.
  if [[ " ${parts[*]} " == *" bench "* ]]; then
    for t in attention_bench gpu_step_bench; do
      grep -q "| bench | $t | rc 0" "$summary" || problems+=("$t did not exit 0")
    done
    grep -qE '\| bench \| torch_peer.* \| (rc 0|skipped)' "$summary" || problems+=("no torch_peer row, or it failed")
    [[ -s $test_dir/out/step_gpu_torch.txt ]] || problems+=("no step_gpu_torch.txt")
  fi
else
  problems+=("no summary.md")
fi
files=$(find "$test_dir/out" -type f | wc -l)
echo "[selftest] $files files in OUT: $(cd "$test_dir/out" && find . -type f | sort | tr '\n' ' ')"
((files <= 8)) || problems+=("$files files in OUT (the device machine returns 8)")
if ((${#problems[@]})); then
  printf '[selftest] FAIL: %s\n' "${problems[@]}"
  exit 1
fi
echo "[selftest] ok: the bundle ran from $test_dir with the system's OpenMPI hidden"
