#!/usr/bin/env bash
#===- scripts/fuzz.sh - Coverage-guided fuzzing of one target --------------===#
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#
# TARGET is tensor-proto, onnx-import, checkpoint or model-metadata
# (test/fuzz). Builds the
# target with clang, libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer
# in build-fuzz/ (TFM_FUZZ_BUILD_DIR), installing clang-19, its runtimes
# from Debian when missing, then fuzzes for SECONDS. The corpus grows in
# build-fuzz/corpus/TARGET from the test suite's seeds; a crash is written to
# build-fuzz/crashes/TARGET/ and stops the run (exit 1): fix it, then copy
# the input into test/fuzz/regressions/TARGET/, which the test suite replays.
#===------------------------------------------------------------------------===#
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { echo "usage: $0 tensor-proto|onnx-import|checkpoint|model-metadata SECONDS [libFuzzer flags...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
target=$1 seconds=$2
shift 2
[[ $seconds =~ ^[0-9]+$ ]] || usage
models="$root/test/models"
case $target in
  tensor-proto) seeds=("$models"/*/test_data_set_0) ;;
  onnx-import) seeds=("$models"/*_opset1[37]/model.onnx "$models"/*_opset11/model.onnx
                      "$root"/test/Frontends/ONNX/quantized/*/model.onnx
                      "$root"/test/Frontends/ONNX/quantized/bad) ;;
  checkpoint) seeds=("$root/test/fuzz/corpus/checkpoint") ;;
  model-metadata) seeds=("$root/test/fuzz/corpus/model-metadata") ;;
  *) usage ;;
esac

# shellcheck source=install-clang.sh
source "$root/scripts/install-clang.sh"

build="${TFM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
if [ ! -f "$build/build.ninja" ]; then
  flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DLLVM_USE_SANITIZER="Address;Undefined" -DTFM_FUZZ_LIBFUZZER=ON > /dev/null
fi
ninja -C "$build" -j "${TFM_JOBS:-$(nproc)}" "tfm-fuzz-$target"

if [ "$target" = checkpoint ]; then
  # The model whose session loads the checkpoints, from the main build.
  model="$root/build/test/unittests/tiny_train.so"
  [ -f "$model" ] || ninja -C "$root/build" tiny_train_model
  export TFM_FUZZ_MODEL="$model"
elif [ "$target" = model-metadata ]; then
  # The library whose metadata the inputs patch, from the main build.
  model="$root/build/test/unittests/lengths_encoder.so"
  [ -f "$model" ] || ninja -C "$root/build" lengths_model
  export TFM_FUZZ_MODEL="$model"
fi
corpus="$build/corpus/$target" crashes="$build/crashes/$target"
mkdir -p "$corpus" "$crashes"
# libFuzzer reads seeds from folders: the seed files go into one.
seedDir="$build/seeds/$target"
rm -rf "$seedDir" && mkdir -p "$seedDir"
for s in "${seeds[@]}"; do
  if [ -d "$s" ]; then cp "$s"/* "$seedDir/"; else cp "$s" "$seedDir/$(basename "$(dirname "$s")")-$(basename "$s")"; fi
done
regressions=()
[ -d "$root/test/fuzz/regressions/$target" ] && regressions=("$root/test/fuzz/regressions/$target")
# The MLIR context and the session live for the whole run by design. The
# LLVM headers poison allocator slabs when compiled under ASan, which
# Debian's uninstrumented MLIR libraries then touch: user poisoning off.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allow_user_poisoning=0}"
limits=(-rss_limit_mb=4096)
if [ "$target" = model-metadata ]; then
  # A corrupt arena size may ask for terabytes, which the runtime must
  # refuse when the allocation fails, as it fails outside ASan: failed
  # allocations return null here, and only touching memory counts.
  ASAN_OPTIONS+=":allocator_may_return_null=1"
  limits+=(-malloc_limit_mb=1073741824)
fi
exec "$build/bin/tfm-fuzz-$target" -max_total_time="$seconds" "${limits[@]}" \
  -artifact_prefix="$crashes/" -print_final_stats=1 -print_coverage=0 "$@" \
  "$corpus" "${regressions[@]}" "$seedDir"
