#!/usr/bin/env bash
#===- tfm.sh - Set up, build, and run tfm on Debian 12 ---------------------===#
#
#   ./tfm.sh example   install what is missing, build, then compile the bundled
#                      example model to a library and run it, train the two
#                      training examples (examples/training), and do both
#                      from Python (examples/python)
#   ./tfm.sh test      install what is missing, build, then run every test
#   ./tfm.sh test --sanitize
#                      the same in build-sanitize/, with AddressSanitizer and
#                      UndefinedBehaviorSanitizer in every binary and library
#                      of the project (docs/testing.md)
#   ./tfm.sh bench     also install the peers, build, then benchmark tfm against
#                      ONNX Runtime and PyTorch (options go to bench/run.py)
#   ./tfm.sh build     install what is missing and build, nothing else
#
# Every step is idempotent: a second run installs nothing and rebuilds only
# what changed. Environment: TFM_BUILD_DIR (default ./build), TFM_JOBS
# (default: the number of cores).
#===------------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SANITIZE=0
if [ "${1:-}" = test ] && [ "${2:-}" = --sanitize ]; then
  SANITIZE=1
fi
if [ $SANITIZE = 1 ]; then
  BUILD="${TFM_BUILD_DIR:-$ROOT/build-sanitize}"
else
  BUILD="${TFM_BUILD_DIR:-$ROOT/build}"
fi
JOBS="${TFM_JOBS:-$(nproc)}"

# What the build and the tests need, all from Debian 12's archive.
PACKAGES=(
  cmake ninja-build g++ ccache lld python3 pkgconf
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libdnnl-dev ocl-icd-opencl-dev libfmt-dev libgtest-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  python3-onnx libonnx-testdata graphviz
  python3-dev pybind11-dev libdlpack-dev python3-numpy python3-pytest
  libopenmpi-dev openmpi-bin
  python3-pip python3-venv python3-setuptools python3-wheel
)

# What the benchmark adds: its peers, PyTorch and ONNX Runtime (through
# node; npm installs it into the build folder), and OpenBLAS, without which
# Debian's PyTorch runs its GEMMs on the reference BLAS (about 1% of a core's
# rate; bench/run.py then leaves its column out). A node already on PATH is
# used as it is.
bench_packages() {
  echo python3-torch libopenblas0-openmp
  command -v npm >/dev/null 2>&1 || echo nodejs npm
}

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

install_missing() {
  local missing=() wanted=("${PACKAGES[@]}" "$@")
  for p in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "all ${#wanted[@]} packages are installed"
    return
  fi
  log "installing ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q -o DPkg::Lock::Timeout=1200 \
    --no-install-recommends "${missing[@]}"
}

configure() {
  if [ -f "$BUILD/build.ninja" ]; then
    return
  fi
  log "configuring in $BUILD"
  local linker=() sanitize=()
  command -v ld.lld >/dev/null && linker=(-DLLVM_USE_LINKER=lld)
  if [ $SANITIZE = 1 ]; then
    # Every UB check aborts, so a finding fails its test. vptr needs RTTI,
    # which LLVM's classes lack. -g1: line numbers in the reports.
    local flags="-fsanitize=address,undefined -fno-sanitize=vptr"
    flags+=" -fno-sanitize-recover=all -fno-omit-frame-pointer -g1"
    sanitize=("-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags"
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
              "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined")
  fi
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    "${linker[@]}" "${sanitize[@]}"
}

build() {
  install_missing
  configure
  log "building with $JOBS jobs"
  cmake --build "$BUILD" -j "$JOBS"
}

# The training examples (examples/training): the paper's encoder-decoder
# Transformer learns to reverse digit sequences until greedy decoding gets
# 99% of held-out ones right, then decodes in a new session from its
# checkpoint; a small GPT learns the bundled text.
train_examples() {
  local ex="$ROOT/examples/training" out="$BUILD/examples"
  log "tfmc compile --train --generate seq2seq.onnx (Adam, the paper's schedule and label smoothing)"
  "$BUILD/bin/tfmc" compile "$ex/seq2seq.onnx" --train --generate --optimizer=adam \
    --beta1=0.9 --beta2=0.98 --eps=1e-9 --label-smoothing=0.1 --lr=1 \
    --lr-schedule=noam:d_model=64,warmup=400 --freeze=pe -o "$out/seq2seq.so"
  log "tfm-seq2seq: train until 99% of held-out sequences decode right"
  "$BUILD/bin/tfm-seq2seq" "$out/seq2seq.so"
  log "tfmc compile --train --generate gpt.onnx"
  "$BUILD/bin/tfmc" compile "$ex/gpt.onnx" --train --generate --optimizer=adam \
    --lr=2e-3 -o "$out/gpt.so"
  log "tfm-gpt: train on corpus.txt, then continue a prompt"
  "$BUILD/bin/tfm-gpt" "$out/gpt.so" "$ex/corpus.txt"
}

case "${1:-}" in
  example)
    build
    model="$ROOT/examples/models/encoder_layer.mlir"
    data="$ROOT/examples/models/encoder_layer_data"
    so="$BUILD/examples/encoder_layer.so"
    mkdir -p "$BUILD/examples"
    log "tfmc compile --emit=fused (weights elided)"
    "$BUILD/bin/tfmc" compile "$model" --emit=fused -o - \
      --mlir-elide-elementsattrs-if-larger=8
    log "tfmc compile -o $so (fusion, memory plan, oneDNN kernels, LLVM)"
    "$BUILD/bin/tfmc" compile "$model" -o "$so" --fusion-report
    log "tfmc run $so against the PyTorch result"
    "$BUILD/bin/tfmc" run "$so" --test-data-dir "$data"
    log "tfmc run --reference (the double-precision interpreter) against it"
    "$BUILD/bin/tfmc" run "$model" --reference --test-data-dir "$data"
    log "tfmc run $so --bench 200"
    "$BUILD/bin/tfmc" run "$so" --test-data-dir "$data" --bench 200
    train_examples
    log "from Python (examples/python): compile and run, then train a GPT and sample"
    PYTHONPATH="$BUILD/python" /usr/bin/python3 "$ROOT/examples/python/run_model.py"
    PYTHONPATH="$BUILD/python" /usr/bin/python3 "$ROOT/examples/python/train_gpt.py"
    ;;
  test)
    case "${2:-}" in
      ""|--sanitize) ;;
      *) echo "usage: $0 test [--sanitize]" >&2; exit 2 ;;
    esac
    if [ $SANITIZE = 1 ]; then
      # Set for the build too, which runs tfmc on the test models. Leaks
      # count as failures; the suppressions name what is not ours.
      # allow_user_poisoning=0: LLVM's allocator poisons its slabs in header
      # code compiled into tfm, and the Debian libraries, built without
      # ASan, then allocate from them without unpoisoning.
      export ASAN_OPTIONS="detect_leaks=1:allow_user_poisoning=0:allocator_may_return_null=1:strict_string_checks=1"
      export LSAN_OPTIONS="suppressions=$ROOT/test/sanitize/lsan.supp:print_suppressions=0"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    fi
    build
    log "running the tests"
    ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
    ;;
  bench)
    # shellcheck disable=SC2046
    install_missing $(bench_packages)
    build
    log "benchmarking tfm, ONNX Runtime and PyTorch (bench/run.py)"
    /usr/bin/python3 "$ROOT/bench/run.py" --tfmc "$BUILD/bin/tfmc" \
      --ceiling "$BUILD/bin/tfm-sgemm-ceiling" \
      --int8-ceiling "$BUILD/bin/tfm-int8-ceiling" \
      --bandwidth "$BUILD/bin/tfm-read-bandwidth" --out "$BUILD/bench" "${@:2}"
    ;;
  build)
    build
    ;;
  *)
    echo "usage: $0 example|test|bench|build" >&2
    exit 2
    ;;
esac
