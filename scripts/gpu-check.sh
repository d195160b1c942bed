#!/bin/bash
# Builds the GPU check pack: a self-contained folder, compressed into
# .gpu-pack/tfm-gpu-pack.tar.xz, that checks and benchmarks tfm's CUDA target
# on a machine with an NVIDIA GPU and its driver, Python 3 with numpy, and
# PyTorch for the bench; nothing of MLIR, LLVM or a CUDA toolkit. There:
#
#   tar xf tfm-gpu-pack.tar.xz -C /tmp && /tmp/tfm-gpu-pack/run.sh all
#
# usage: scripts/gpu-check.sh [--arch sm_90] [--schedule-on-cpu] [--parts LIST]
#   --schedule-on-cpu  packs the GPU schedule compiled for this CPU instead,
#                      and runs the pack's check here: a dry run of the pack
#                      on a machine without a GPU
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TFM_BUILD_DIR:-$root/build}
out=$root/.gpu-pack
args=()
dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --arch) args+=(--arch "$2"); shift 2 ;;
    --parts) args+=(--parts "$2"); shift 2 ;;
    --schedule-on-cpu) args+=(--schedule-on-cpu); dry=1; shift ;;
    *) echo "usage: $0 [--arch sm_90] [--schedule-on-cpu] [--parts LIST]" >&2; exit 2 ;;
  esac
done
[ -x "$build/bin/tfmc" ] || "$root/tfm.sh" build
pack=$out/tfm-gpu-pack
rm -rf "$pack" && mkdir -p "$pack/lib"
cp "$build/lib/libtfm_runtime.so" "$pack/lib/"
# The runtime's libraries beyond the C and C++ runtimes, which any Linux
# with a GPU driver has.
ldd "$build/lib/libtfm_runtime.so" | awk '$3 ~ /^\// {print $3}' |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$pack/lib/"; done
cp "$root"/scripts/{gpu_check_runner.py,tfm_runtime.py,gpu_workloads.py} \
  "$root"/bench/{w7_model.py,w10_model.py} "$pack/"
mv "$pack/gpu_check_runner.py" "$pack/runner.py"
cat > "$pack/run.sh" <<'RUN'
#!/bin/bash
# Runs the pack: check, train, bench or all (runner.py --help).
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# cuBLASLt and NCCL from the NVIDIA wheels PyTorch installs, where no
# toolkit puts them on the loader's path (TFM_CUBLASLT=off runs the
# generated GEMMs instead).
for package in nvidia.cublas nvidia.nccl; do
  wheel=$(python3 -c 'import importlib.util as u, os, sys
s = u.find_spec(sys.argv[1])
print(next((os.path.join(d, "lib") for d in (s.submodule_search_locations or [])
            if os.path.isdir(os.path.join(d, "lib"))), "") if s else "")' $package 2>/dev/null)
  [ -n "$wheel" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$wheel
done
exec python3 "$here/runner.py" "$@"
RUN
chmod +x "$pack/run.sh"
/usr/bin/python3 "$root/scripts/gpu_pack.py" --tfmc "$build/bin/tfmc" \
  --runtime "$build/lib/libtfm_runtime.so" --out "$pack" "${args[@]}"
tar -C "$out" -cf - tfm-gpu-pack | xz -T2 -3 > "$out/tfm-gpu-pack.tar.xz"
echo "gpu-check: $(du -h "$out/tfm-gpu-pack.tar.xz" | cut -f1) pack at $out/tfm-gpu-pack.tar.xz"
if [ $dry = 1 ]; then
  PYTHON=/usr/bin/python3
  LD_LIBRARY_PATH=$pack/lib $PYTHON "$pack/runner.py" check
  LD_LIBRARY_PATH=$pack/lib $PYTHON "$pack/runner.py" train
fi
