#!/usr/bin/env bash
# Scale (real processes, a real checkpoint with the LLaMA-3.2-1B layer shapes):
# configs/llama3.2-1b-smoke.yaml on a checkpoint `windquant synth` writes into a
# temporary directory, run to the end, with the peak resident memory of every
# process held to <= 2.5 x the BF16 bytes of the decoder layers it owns + 1.5 GiB;
# in cut and smoke mode the plan is then exported again from the cached unit table and
# its packed checkpoint measured with eval --quantized, each held to 1.5 GiB + 3 x one
# layer's float32 weights (they stream a layer at a time), at eval --plan's perplexity.
#   scale_smoke_test.sh BUILD_DIR cut     2 layers, `windquant quantize` (default suite)
#   scale_smoke_test.sh BUILD_DIR smoke   16 layers, `windquant quantize` with export,
#                                         <= 45 min (slow)
#   scale_smoke_test.sh BUILD_DIR local   16 layers, deploy/local with 2 stages x 1
#                                         replica and export on (the learner assembles
#                                         it from the actors): every process within
#                                         the bar for the layers it owns (slow)
# Peak memory: getrusage(RUSAGE_CHILDREN) of the quantize process; VmHWM in
# /proc/PID/status of each deploy/local process before it is stopped.
# WQ_SCALE_COMPENSATION=gptq runs every mode with error compensation
# (--set quant.compensation=gptq); `windquant export` then needs the calibration pass
# and the whole model (a session, not the layer stream), so it is held to the bar of
# the layers it owns instead of the streaming bar.
set -euo pipefail
BUILD="$1"; MODE="$2"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
eval "$("$BUILD/common/testing/wq-test-paths")"
WQ="$BUILD/cli/windquant"
TMP=$(mktemp -d /tmp/wq-scale.XXXXXX)
fail() { echo "FAIL: $*"; echo "files: $TMP"; exit 1; }
case "$MODE" in
  cut) LAYERS=2 ;;
  smoke | local) LAYERS=16 ;;
  *) echo "scale_smoke_test.sh: mode must be cut, smoke or local" >&2; exit 2 ;;
esac

# The tokenizer and text of the test model: present wherever the tests run.
"$WQ" synth --shape llama3.2-1b --layers "$LAYERS" --out "$TMP/model" \
  --tokenizer "$WQ_TEST_MODEL_DIR" || fail "synth"
# One text for the three roles, split into disjoint token ranges.
OVERRIDES=(--set "model.dir=$TMP/model"
  --set "calibration.text=$WQ_TEST_TEXT" --set "calibration.tokens=[0, 4096]"
  --set "evaluation.selection.text=$WQ_TEST_TEXT" --set "evaluation.selection.tokens=[4096, 4608]"
  --set "evaluation.heldout.text=$WQ_TEST_TEXT" --set "evaluation.heldout.tokens=[4608, 5632]"
  --set "output.dir=$TMP/run"
  --set "quant.cache_dir=$TMP/cache")
COMPENSATION="${WQ_SCALE_COMPENSATION:-none}"
if [[ "$COMPENSATION" != none ]]; then
  OVERRIDES+=(--set "quant.compensation=$COMPENSATION")
  echo "error compensation: quant.compensation=$COMPENSATION"
fi
# Not CONFIG: deploy/local/run.sh, sourced below, resets that name.
SMOKE_CONFIG="$SRC/configs/llama3.2-1b-smoke.yaml"

# The bar in bytes for a process owning `layers` decoder layers of the model
# ("stream": 1.5 GiB + 3 x one layer's float32 weights, whatever the layer count).
bar_bytes() {
  python3 - "$TMP/model/config.json" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
h, i = c["hidden_size"], c["intermediate_size"]
hd = c.get("head_dim") or h // c["num_attention_heads"]
q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
per_layer = h * (2 * q + 2 * kv) + 3 * h * i
if sys.argv[2] == "stream":
    print(int(3 * 4 * per_layer + 1.5 * 2**30))
else:
    print(int(2.5 * 2 * per_layer * int(sys.argv[2]) + 1.5 * 2**30))
PY
}
# Runs a command; prints its peak resident bytes (its output goes to stderr).
run_peak() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=sys.stderr)
if r.returncode != 0:
    sys.exit(r.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)  # ru_maxrss: KiB
PY
}
# A sanitizer build holds more memory: its bars are scaled (cmake/wq.cmake WQ_TEST_MEMORY_SCALE).
MEMORY_SCALE="${WQ_MEMORY_BAR_SCALE:-1}"
check_peak() {  # name peak_bytes layers
  local bar; bar=$(($(bar_bytes "$3") * MEMORY_SCALE))
  echo "$1: peak resident $(($2 >> 20)) MiB, bar $((bar >> 20)) MiB ($3 layers$(
    ((MEMORY_SCALE == 1)) || echo ", x$MEMORY_SCALE: a sanitizer build"))"
  (($2 <= bar)) || fail "$1 peak resident memory $(($2 >> 20)) MiB over the bar $((bar >> 20)) MiB"
}

if [[ "$MODE" == local ]]; then
  export WQ_RUN_LIB=1
  # shellcheck source=../deploy/local/run.sh
  source "$SRC/deploy/local/run.sh"
  # With the export: the learner, which owns no layers, assembles quantized/ and
  # fake_quant/ from the parts each actor streams (learner/export_assembler.h), so
  # every process stays within the bar of the layers it owns. One update (the fewest
  # the config allows) keeps the run short.
  parse_args --config "$SMOKE_CONFIG" --bin "$BUILD" --stages 2 --replicas 1 --out "$TMP" \
    --timeout 2700 "${OVERRIDES[@]}" --set output.export=true \
    --set curriculum.min_updates=1 --set curriculum.max_updates=1
  plan_topology
  trap 'stop_all; echo "logs: $OUT/logs"' EXIT
  start=$(date +%s)
  start_all
  wait_for done '[[ $v == true ]]'
  status | tee "$OUT/status.txt"
  # After `done` the learner writes the final result: wait for it before reading VmHWM.
  FINAL="$OUT/run/final"
  until [[ -f "$FINAL/report.json" ]]; do
    grep -q "final artifacts not written" "$OUT/logs/learner.log" &&
      fail "learner: $(grep "final artifacts not written" "$OUT/logs/learner.log" | tail -1)"
    kill -0 "${PIDS[learner]}" 2>/dev/null || fail "the learner exited before the export"
    (($(date +%s) - start <= 2700)) || fail "no final result after 45 min"
    sleep 2
  done
  wall=$(($(date +%s) - start))
  declare -A PEAK=()
  for name in "${!PIDS[@]}"; do
    kb=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/${PIDS[$name]}/status")
    PEAK[$name]=$((kb * 1024))
  done
  stop_all
  trap - EXIT
  echo "local: run and export in $wall s"
  [[ "$(status_field updates)" -ge 1 ]] || fail "expected a PPO update"
  ls "$OUT/run/best" | grep . >/dev/null || fail "no best plan files"
  for f in quantized/quantized.safetensors quantized/plan.json quantized/config.json \
           fake_quant/model.safetensors fake_quant/config.json; do
    [[ -f "$FINAL/$f" ]] || fail "the final result lacks $f"
  done
  ls -a "$FINAL" | grep partial >/dev/null && fail "a partial export folder was left in $FINAL"
  python3 - "$FINAL/report.json" <<'PY' || fail "report.json has no exported section"
import json, sys
x = json.load(open(sys.argv[1]))["exported"]
print("exported: evaluator's PPL %.4f on %s; quantized %d bytes, fake_quant %d bytes, "
      "%d bytes pulled from the actors" % (x["perplexity"], x["measured_on"],
      x["quantized_bytes"], x["fake_quant_bytes"], x["bytes_pulled_from_actors"]))
PY
  for name in "${!PEAK[@]}"; do
    layers=0
    [[ "$name" == actor-* ]] && layers=8
    check_peak "$name" "${PEAK[$name]}" "$layers"
  done
  # The assembled packed checkpoint is the plan the evaluator measured: decoded a
  # layer at a time on the selection slice, it gives the evaluator's perplexity.
  "$WQ" eval --quantized "$FINAL/quantized" --text "$WQ_TEST_TEXT" --tokens 4096:4608 \
    --context 128 --batch 8 --json >"$TMP/evalq.json" 2>"$OUT/logs/evalq.log" ||
    fail "eval --quantized of the assembled checkpoint: $(tail -1 "$OUT/logs/evalq.log")"
  python3 - "$TMP/evalq.json" "$FINAL/report.json" <<'PY' || fail "assembled checkpoint != evaluator"
import json, sys
q = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])["perplexity"]
p = json.load(open(sys.argv[2]))["exported"]["perplexity"]
print(f"eval --quantized of the assembled checkpoint {q:.6f}, the evaluator's {p:.6f}")
sys.exit(0 if abs(q - p) <= 1e-3 * p else 1)
PY
  echo "PASS (logs: $OUT/logs)"
  rm -rf "$TMP/model"
  exit 0
fi

EXTRA=()
if [[ "$MODE" == cut ]]; then  # the default suite: one update, no baselines
  EXTRA=(--set "curriculum.min_updates=1" --set "curriculum.max_updates=1" --no-baselines)
fi
start=$(date +%s)
peak=$(run_peak "$WQ" quantize --config "$SMOKE_CONFIG" "${OVERRIDES[@]}" "${EXTRA[@]}") ||
  fail "windquant quantize failed"
wall=$(($(date +%s) - start))
echo "quantize: $LAYERS layers in $wall s"
for f in plan.json plan.bin report.json report.html quantized fake_quant; do
  [[ -e "$TMP/run/$f" ]] || fail "no $f in output.dir"
done
check_peak quantize "$peak" "$LAYERS"
python3 - "$TMP/run/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w, n = r.get("wall_time_s", {}), r.get("plan_evaluations", 0)
print("quantize: prepare %.0f s, train %.0f s, %d plan evaluations (%.1f s of training each)"
      % (w.get("prepare", 0), w.get("train", 0), n, w.get("train", 0) / max(n, 1)))
PY
# The run's plan exported again from the cached unit table (the checkpoint streamed a
# layer at a time) and its packed checkpoint measured (decoded a layer at a time): both
# within 1.5 GiB + 3 x one layer's float32 weights, and eval --quantized = eval --plan.
peak=$(run_peak "$WQ" export --config "$SMOKE_CONFIG" "${OVERRIDES[@]}" \
  --plan "$TMP/run/plan.json" --out "$TMP/export") || fail "windquant export failed"
if [[ "$COMPENSATION" == none ]]; then
  check_peak export "$peak" stream
else
  check_peak export "$peak" "$LAYERS"
fi
peak=$(run_peak "$WQ" eval --quantized "$TMP/export/quantized" --text "$WQ_TEST_TEXT" \
  --tokens 4608:5632 --context 128 --json 2>"$TMP/evalq.json") || fail "eval --quantized failed"
check_peak "eval --quantized" "$peak" stream
"$WQ" eval --config "$SMOKE_CONFIG" "${OVERRIDES[@]}" --plan "$TMP/run/plan.json" --json \
  >"$TMP/evalp.json" || fail "eval --plan failed"
python3 - "$TMP/evalq.json" "$TMP/evalp.json" <<'PY' || fail "eval --quantized is not eval --plan"
import json, sys
# The JSON line (run_peak sends the command's stdout to stderr, with its progress).
q, p = (json.loads([l for l in open(f) if l.startswith("{")][-1])["perplexity"]
        for f in sys.argv[1:])
print(f"eval --quantized {q:.6f}, eval --plan {p:.6f}")
sys.exit(0 if abs(q - p) <= 1e-6 * p else 1)
PY
[[ "$MODE" != smoke ]] || ((wall <= 2700)) || fail "the smoke run took $wall s (> 45 min)"
rm -rf "$TMP"
echo PASS
