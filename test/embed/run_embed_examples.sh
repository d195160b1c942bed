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

# What the package holds: the C API and nothing else leaves the library,
# under its versioned SONAME, with only the public headers installed.
lib="$work/prefix/lib/libtfm_runtime.so"
if nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^tfm_'; then
  echo "libtfm_runtime.so exports the symbols above beyond the C API"; exit 1
fi
readelf -d "$lib" | grep -q 'SONAME.*libtfm_runtime\.so\.[0-9]' ||
  { echo "libtfm_runtime.so has no versioned SONAME"; exit 1; }
(cd "$work/prefix/include/tfm" && ls) | tr '\n' ' ' |
  grep -qxE 'dtype.h (mpi.h )?runtime.h runtime.hpp version.h ' ||
  { echo "installed headers: $(ls "$work/prefix/include/tfm")"; exit 1; }
# Built without CMake, through pkg-config.
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
[ "$(pkg-config --modversion tfm-runtime)" = "$(sed -n 's/^#define TFM_VERSION_STRING "\(.*\)"/\1/p' "$work/prefix/include/tfm/version.h")" ] ||
  { echo "pkg-config's version is not the headers'"; exit 1; }
# shellcheck disable=SC2046
cc -o "$work/run_model_pc" "$src/examples/embed/run_model.c" \
  $(pkg-config --cflags --libs tfm-runtime)
# Without LD_LIBRARY_PATH: pkg-config's flags carry the installed rpath.
env -u LD_LIBRARY_PATH "$work/run_model_pc" "$model" > "$work/pc.out"
cmp -s "$work/pc.out" <("$work/build/run_model_c" "$model") ||
  { echo "the pkg-config build prints otherwise"; exit 1; }

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
