#!/usr/bin/env bash
# Installs the runtime into a scratch prefix, builds examples/embed as a
# separate project with find_package(tfm), and runs both programs on a
# hand-written model library. Usage: run_embed_examples.sh BUILD_DIR SRC_DIR MODEL.so WORK
set -euo pipefail
build="$1" src="$2" model="$3" work="$4"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --component Unspecified --prefix "$work/prefix" > /dev/null
cmake -S "$src/examples/embed" -B "$work/build" -G Ninja \
  -Dtfm_DIR="$work/prefix/lib/cmake/tfm" > /dev/null
cmake --build "$work/build" > /dev/null
# The examples must not need anything of the compiler.
if ldd "$work/build/run_model_c" | grep -qiE 'llvm|mlir'; then
  echo "run_model_c links LLVM or MLIR"; exit 1
fi
"$work/build/run_model_c" "$model"
"$work/build/run_model_cpp" "$model"
