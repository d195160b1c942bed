#!/usr/bin/env bash
# Regenerates the ONNX node conformance table in docs/conformance.md from a
# fresh run of the suite. Usage: scripts/update_conformance_table.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
table="$(mktemp)"
summary="$(/usr/bin/python3 "$root/test/conformance/run_node_suite.py" \
  --tfmc "$build/bin/tfmc" \
  --expected "$root/test/conformance/node-expected-failures.txt" \
  --table "$table" -j "$(nproc)" | grep '^node suite')"
{
  sed -n '1,/^<!-- table -->$/p' "$root/docs/conformance.md"
  echo
  echo "Generated $(date -u +%Y-%m-%d) by scripts/update_conformance_table.sh."
  echo
  echo "$summary"
  echo
  cat "$table"
} > "$root/docs/conformance.md.new"
mv "$root/docs/conformance.md.new" "$root/docs/conformance.md"
rm -f "$table"
