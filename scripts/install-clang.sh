#!/usr/bin/env bash
#===- scripts/install-clang.sh - clang-19 and its runtimes, when missing ---===#
#
# Installs from Debian what the sanitized builds need beyond ./tfm.sh's
# packages: clang-19, its sanitizer and libFuzzer runtimes, and LLVM's
# OpenMP (with its Archer tool for ThreadSanitizer). Sourced by
# scripts/fuzz.sh and scripts/tsan.sh.
#===------------------------------------------------------------------------===#
missing=()
for p in clang-19 libclang-rt-19-dev libomp-19-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}"
fi
