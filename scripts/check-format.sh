#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++ file differs from clang-format's output with the
# repository's .clang-format; lists the files. `scripts/check-format.sh --fix` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format not found (apt-get install clang-format)"; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) differ from clang-format ($(clang-format --version | head -1)):"
  printf '  %s\n' "${bad[@]}"
  echo "check-format: run scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: ${#files[@]} files clean"
