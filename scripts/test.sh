#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs dependencies, builds,
# then runs every test that is not labelled `slow`. Nothing is skipped: tests that need
# a real model use ../shared/models/stories260k when it is there, else the project's
# default model, which the ctest fixture test_model_setup trains once per clone.
#   scripts/test.sh                      # unit + integration (build/dev)
#   scripts/test.sh -L slow              # extra ctest arguments are passed through
#   scripts/test.sh --sanitize address   # the same suite built with ASan + UBSan (build/asan)
#   scripts/test.sh --sanitize thread    # ... with ThreadSanitizer (build/tsan)
# A sanitizer's finding fails its test (UBSan halts; TSan exits 66). Suppressions live in
# scripts/sanitizers/, each for a third-party library, with its reason beside it.
# The sanitizer presets compile at -O1 with NDEBUG, as libtorch was built: its headers
# lay out classes by NDEBUG (at::RecordFunction), so a build without it reads torch's
# objects at the wrong offsets (UBSan: "load of value 254 ... for type 'bool'").
set -euo pipefail
cd "$(dirname "$0")/.."
preset=dev
if [[ "${1:-}" == --sanitize ]]; then
  case "${2:-}" in
    address) preset=asan ;;
    thread) preset=tsan ;;
    *) echo "test.sh: --sanitize takes address or thread, not '${2:-}'" >&2; exit 2 ;;
  esac
  shift 2
fi
# ccache hits across clones (CI builds in a fresh folder).
export CCACHE_BASEDIR="$PWD"
# -g puts the build directory into the debug info; without this ccache would hash it.
export CCACHE_NOHASHDIR=true
bash scripts/install-deps.sh
if [[ "$preset" == tsan ]]; then
  # abseil built with TSan, first on the library path (why: scripts/sanitizers/tsan-absl.sh).
  export LD_LIBRARY_PATH="$(bash scripts/sanitizers/tsan-absl.sh | tail -1)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # OpenBLAS's own threads take work through spin-waits TSan cannot see (every GEMM would
  # be reported); matmuls still run in torch's threads.
  export OPENBLAS_NUM_THREADS=1
  # The same for torch's intra-op pool: Debian's libtorch runs at::parallel_for on
  # libgomp, whose fork/join barriers are futexes TSan cannot see (libgomp is not
  # instrumented), so every write of a parallel body was reported against the next
  # region's read. One OpenMP thread runs those bodies inline; every thread of ours
  # (stage workers, gRPC, uploaders) is still checked.
  export OMP_NUM_THREADS=1
fi
# The project's Python tools (tokenizer references, moto, aws, manifest checks).
export PATH="$PWD/.venv/bin:$PATH"
cmake --preset "$preset" >/dev/null
ccache --zero-stats >/dev/null 2>&1 || true
build_start=$SECONDS
cmake --build "build/$preset" -j"$(nproc)"
echo "test.sh: build in $((SECONDS - build_start)) s; ccache: $(ccache --print-stats 2>/dev/null |
  awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" {h += $2}
               $1 == "cache_miss" {m = $2} END {printf "%d hits, %d misses", h, m}')"
supp="$PWD/scripts/sanitizers"
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0"
cd "build/$preset"
if [ $# -eq 0 ]; then set -- -LE slow; fi
ctest --output-on-failure -j"$(nproc)" "$@"
