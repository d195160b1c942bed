#!/usr/bin/env bash
#===- scripts/tsan.sh - The runtime's thread tests under ThreadSanitizer ---===#
#
#   scripts/tsan.sh [gtest flags...]
#
# Builds the runtime and its tests with clang and -fsanitize=thread in
# build-tsan/ (TFM_TSAN_BUILD_DIR), installing clang-19, its runtimes and
# LLVM's OpenMP from Debian when missing, then runs the concurrency suite
# (many sessions of one module on many threads, one session shared by many)
# and the runtime's other tests. The runtime's OpenMP regions run on LLVM's
# libomp with its Archer tool, which tells ThreadSanitizer about OpenMP's
# barriers; without it every parallel loop would be reported. The models
# are compiled by the main build's tfmc (built first if missing): generated
# code is not instrumented either way, and the compiler is not under test.
#===------------------------------------------------------------------------===#
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=install-clang.sh
source "$root/scripts/install-clang.sh"

main="${TFM_BUILD_DIR:-$root/build}"
if [ ! -x "$main/bin/tfmc" ]; then
  "$root/tfm.sh" build
fi

build="${TFM_TSAN_BUILD_DIR:-$root/build-tsan}"
if [ ! -f "$build/build.ninja" ]; then
  # LLVM_USE_SANITIZER adds -fsanitize=thread and drops LLVM's -z defs,
  # which a shared library without the sanitizer's runtime cannot pass.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DLLVM_USE_SANITIZER=Thread \
    -DTFM_TEST_TFMC="$main/bin/tfmc" > /dev/null
fi
ninja -C "$build" -j "${TFM_JOBS:-$(nproc)}" tfm-concurrency-tests tfm-runtime-tests

archer=/usr/lib/llvm-19/lib/libarcher.so
export OMP_TOOL_LIBRARIES="$archer"
# ignore_noninstrumented_modules: the OpenMP runtime clears and frees its
# own dispatch buffers across threads it orders internally, which Archer
# (it annotates the program's barriers and tasks) does not cover.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$root/test/sanitize/tsan.supp"
status=0
for t in tfm-concurrency-tests tfm-runtime-tests; do
  echo "==> $t under ThreadSanitizer"
  "$build/test/unittests/$t" "$@" || status=1
done
exit $status
