#!/usr/bin/env bash
# layers_test.sh must fail, naming the line, on a copy of lib/ where train/
# includes and links roles/, where a plan/ file declares its names in bare
# meshloom and where a base/ file declares them in a folder's namespace,
# meshloom::plan (a check that cannot fail checks nothing). A namespace nested
# in meshloom::plan, an alias and an anonymous namespace stay allowed, and so
# do base/'s root namespace meshloom and one nested in it, meshloom::detail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/lib" "$tmp/lib"
echo '#include "roles/lead.hpp"' >>"$tmp/lib/train/trainer.cpp"
echo 'target_link_libraries(meshloom_train PUBLIC meshloom_roles)' >>"$tmp/lib/train/CMakeLists.txt"
cat >"$tmp/lib/plan/stray.hpp" <<'EOF'
namespace meshloom::plan {
namespace detail {
namespace fs = std::filesystem;
namespace {}
}  // namespace detail
}  // namespace meshloom::plan
namespace meshloom {
}  // namespace meshloom
EOF
cat >"$tmp/lib/base/stray.hpp" <<'EOF'
namespace meshloom {
namespace detail {}
}  // namespace meshloom
namespace meshloom::detail {
}  // namespace meshloom::detail
namespace meshloom::plan {
}  // namespace meshloom::plan
EOF
out=$("$here/layers_test.sh" "$tmp")
rc=$?
echo "$out"
[[ $rc == 1 ]] || { echo "FAIL: exit code $rc, expected 1"; exit 1; }
grep -q 'lib/train/trainer.cpp:[0-9]*: train/ may not include roles/' <<<"$out" ||
  { echo "FAIL: the wrong include was not named"; exit 1; }
grep -q 'meshloom_train may not link meshloom_roles' <<<"$out" ||
  { echo "FAIL: the wrong link was not named"; exit 1; }
grep -q 'lib/plan/stray.hpp:7: lib/plan/ declares namespace meshloom, not meshloom::plan' <<<"$out" ||
  { echo "FAIL: the bare namespace was not named"; exit 1; }
grep -q 'lib/base/stray.hpp:6: lib/base/ declares namespace meshloom::plan, which lib/plan/ owns' <<<"$out" ||
  { echo "FAIL: a folder's namespace in base/ was not named"; exit 1; }
[[ $(grep -c 'stray.hpp' <<<"$out") == 2 ]] ||
  { echo "FAIL: an allowed namespace was named"; exit 1; }
echo "layers_test.sh fails as it should"
