#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs dependencies, builds,
# then runs every test that is not labelled `slow`. Nothing is skipped: tests that need
# a real model use ../shared/models/stories260k when it is there, else the project's
# default model, which the ctest fixture test_model_setup trains once per clone.
#   scripts/test.sh            # unit + integration
#   scripts/test.sh -L slow    # extra ctest arguments are passed through
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across clones (CI builds in a fresh folder).
export CCACHE_BASEDIR="$PWD"
# -g puts the build directory into the debug info; without this ccache would hash it.
export CCACHE_NOHASHDIR=true
bash scripts/install-deps.sh
# The project's Python tools (tokenizer references, moto, aws, manifest checks).
export PATH="$PWD/.venv/bin:$PATH"
cmake --preset dev >/dev/null
ccache --zero-stats >/dev/null 2>&1 || true
build_start=$SECONDS
cmake --build build/dev -j"$(nproc)"
echo "test.sh: build in $((SECONDS - build_start)) s; ccache: $(ccache --print-stats 2>/dev/null |
  awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" {h += $2}
               $1 == "cache_miss" {m = $2} END {printf "%d hits, %d misses", h, m}')"
cd build/dev
if [ $# -eq 0 ]; then set -- -LE slow; fi
ctest --output-on-failure -j"$(nproc)" "$@"
