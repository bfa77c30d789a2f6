#!/usr/bin/env bash
# Fuzzes the safetensors header parser (common/model/safetensors.cc, no torch)
# with libFuzzer + AddressSanitizer for a bounded time.
#
#   scripts/fuzz-safetensors.sh [--time SECONDS] [--out DIR]
#
# --time  fuzzing time (default 20 s, libFuzzer -max_total_time)
# --out   work directory for the binary, corpus and crash files
#         (default /tmp/windquant-fuzz-safetensors)
# Prints the number of executions. Fails when clang++ is missing (scripts/install-deps.sh
# installs clang and libclang-rt-14-dev) or when the fuzzer finds a crash (the
# reproducer is left in --out).
set -euo pipefail

time_s=20
out=/tmp/windquant-fuzz-safetensors
while [[ $# -gt 0 ]]; do
  case "$1" in
    --time) time_s="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz-safetensors.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cxx="${CXX_FUZZ:-clang++}"
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz-safetensors.sh: $cxx not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
mkdir -p "$out/corpus" "$out/artifacts"
bin="$out/safetensors_fuzz"
srcs=("$root/common/model/safetensors_fuzz.cc" "$root/common/model/safetensors.cc")

# Rebuild only when a source is newer than the binary.
rebuild=0
[[ -x "$bin" ]] || rebuild=1
for s in "${srcs[@]}" "$root/common/model/safetensors.h"; do
  [[ "$s" -nt "$bin" ]] && rebuild=1
done
if [[ $rebuild == 1 ]]; then
  echo "building $bin" >&2
  # shellcheck disable=SC2046
  "$cxx" -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address \
    -I"$root" "${srcs[@]}" -o "$bin.tmp" \
    $(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
  mv "$bin.tmp" "$bin"
fi

# Seed corpus: a few valid files (8-byte little-endian header length + JSON + data).
seed() {  # name header data
  local name="$1" header="$2" data="$3" n
  n=${#header}
  {
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' \
      $((n & 255)) $(((n >> 8) & 255)) $(((n >> 16) & 255)) $(((n >> 24) & 255)))"
    printf '%s' "$header"
    printf '%s' "$data"
  } > "$out/corpus/$name"
}
seed empty '{}' ''
seed meta '{"__metadata__":{"format":"pt"}}' ''
seed f32 '{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}' 'aaaabbbbccccdddd'
seed two '{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},"b":{"dtype":"F16","shape":[1,1],"data_offsets":[6,8]}}' 'abcdefgh'
seed zero '{"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"i":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}' '12345678'
cat > "$out/dict" <<'DICT'
"dtype"
"shape"
"data_offsets"
"__metadata__"
"F32"
"F16"
"BF16"
"I8"
"U8"
"F64"
"BOOL"
"F8_E4M3"
DICT

log="$out/fuzz.log"
set +e
# The fuzzer is its own ASan build against the system abseil: a sanitizer suite's library
# path (scripts/test.sh --sanitize thread puts a TSan abseil first) must not reach it.
env -u LD_LIBRARY_PATH "$bin" -max_total_time="$time_s" -print_final_stats=1 -rss_limit_mb=2048 -max_len=4096 \
  -dict="$out/dict" -artifact_prefix="$out/artifacts/" "$out/corpus" >"$log" 2>&1
rc=$?
set -e
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
echo "fuzz-safetensors: ${execs:-?} executions in ${time_s} s, corpus $(ls "$out/corpus" | wc -l) files, exit $rc"
if [[ $rc != 0 ]]; then
  tail -40 "$log" >&2
  echo "fuzz-safetensors: FAILED; reproducers in $out/artifacts" >&2
fi
exit $rc
