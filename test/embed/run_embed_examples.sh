#!/usr/bin/env bash
# Installs the runtime into a scratch prefix, builds examples/embed as a
# separate project with find_package(tfm), and runs both programs on a
# hand-written model library and on the example encoder layer compiled by
# tfmc. Usage: run_embed_examples.sh BUILD_DIR SRC_DIR MODEL.so WORK TFMC
set -euo pipefail
build="$1" src="$2" model="$3" work="$4" tfmc="$5"
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

# A model tfmc compiled: both programs must agree on it.
"$tfmc" compile "$src/examples/models/encoder_layer.mlir" -o "$work/encoder_layer.so"
c_out=$("$work/build/run_model_c" "$work/encoder_layer.so")
cpp_out=$("$work/build/run_model_cpp" "$work/encoder_layer.so")
echo "$c_out"
if [ "$c_out" != "$cpp_out" ] || ! grep -q '^hidden_states: ' <<<"$c_out"; then
  echo "the C and C++ examples disagree on the compiled model:"
  echo "$cpp_out"
  exit 1
fi
echo "compiled model: C and C++ agree"
