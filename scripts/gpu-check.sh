#!/usr/bin/env bash
# The GPU check (run after scripts/gpu-build.sh; issue 35 item 6): one table of what
# windquant does on a device, each row measured in this run:
#  1. accuracy: FP perplexity of the test model (common/testing/test_paths.h) on the
#     device against the CPU, float32 (within 1e-6 relative) and bfloat16 (within 2e-2 of
#     float32 on the CPU), and the same with a plan applied (`baseline --method greedy`
#     at 2.5 bits on the test config's unit table);
#  2. forward: tokens/s through a stack of decoder layers of LLaMA-3.2-1B's shape, FP and
#     with a plan, next to a plain decoder layer of the same shape in bare ATen ops, in
#     the compute dtype, in the same run (bench/stage_bench --plain; goal: at least 0.5);
#  3. quantize: `windquant quantize` on a synthetic checkpoint of the 1B shape on the
#     device: seconds per PPO update and per plan evaluation (the training wall time over
#     the updates and over the plans evaluated), and from them updates per 5 minutes;
#  4. the per-layer figures of 2. at the 8B and 70B shapes (one synthetic layer each) and
#     from them GPU-hours per 8B and 70B plan: seconds per plan evaluation (the configs'
#     49,152 tokens through every layer with a plan) x the plan evaluations of the
#     config (training.episodes_per_update x curriculum.max_updates). Derived, not timed
#     end to end: the table says so.
# Exit status 1 when an accuracy row fails its limit; the speed rows are reported.
#
# --device cpu --small runs the same steps on the CPU at small shapes (a few minutes;
# the test suite runs it as gpu_check_small_test), so the script is known to work
# before a GPU sees it.
#
# usage: scripts/gpu-check.sh [--device D] [--small] [--build DIR] [--out DIR]
#   --device D   cuda (default), cuda:N or cpu
#   --small      small shapes, few updates (CI)
#   --build DIR  the build whose binaries run (default build/cuda)
#   --out DIR    where the runs, rows.jsonl and bench-*.json go (default a new /tmp directory)
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE=cuda SMALL=0 BUILD=build/cuda OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --device) DEVICE="${2:?gpu-check: --device needs a value}"; shift ;;
    --small) SMALL=1 ;;
    --build) BUILD="${2:?gpu-check: --build needs a value}"; shift ;;
    --out) OUT="${2:?gpu-check: --out needs a value}"; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
WQ="$BUILD/cli/windquant" BENCH="$BUILD/bench/stage_bench"
for b in "$WQ" "$BENCH" "$BUILD/common/testing/wq-test-paths"; do
  [[ -x "$b" ]] || { echo "gpu-check: $b missing (build it: scripts/gpu-build.sh)" >&2; exit 1; }
done
eval "$(WQ_SOURCE_DIR="$PWD" "$BUILD/common/testing/wq-test-paths")"
[[ -s "$WQ_TEST_MODEL_DIR/model.safetensors" ]] || {
  echo "gpu-check: test model $WQ_TEST_MODEL_DIR missing (scripts/test.sh trains it; on a" \
    "lent machine without ../shared carry .cache/test-model and .cache/default-data)" >&2
  exit 1
}
OUT="${OUT:-$(mktemp -d /tmp/wq-gpu-check.XXXXXX)}"
mkdir -p "$OUT"
ROWS="$OUT/rows.jsonl"
: > "$ROWS"
start=$SECONDS
log() { echo "gpu-check: $* ($((SECONDS - start)) s)" >&2; }
# row KEY VALUE [FIELD=VALUE ...]: one figure of the table, as JSON.
row() {
  python3 - "$@" >> "$ROWS" <<'EOF'
import json, sys
key, value, *rest = sys.argv[1:]
r = {"key": key, "value": value}
r.update(kv.split("=", 1) for kv in rest)
print(json.dumps(r))
EOF
}
json_get() {  # FILE EXPR: a Python expression over the JSON object `j`
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
# The shapes of steps 2 and 4: at --small the small shape stands in for each.
if ((SMALL)); then
  BENCH_1B=(--shape=small --layers=2 --batch=1 --seq=256 --iters=2)
  BENCH_BIG=(--shape=small --layers=1 --batch=1 --seq=256 --iters=1)
  BIG=(8b:small 70b:small) UPDATES=2 EVAL_TOKENS=4096
else
  BENCH_1B=(--shape=1b --layers=16 --batch=4 --seq=2048 --iters=3)
  BENCH_BIG=(--layers=1 --batch=4 --seq=2048 --iters=3)
  BIG=(8b:8b 70b:70b) UPDATES=4 EVAL_TOKENS=16384
fi
CPU_ENV=(env CUDA_VISIBLE_DEVICES=)  # the CPU rows hide every GPU

# --- 1. accuracy -------------------------------------------------------------------
CONFIG_SETS=(--set "quant.cache_dir=$OUT/cache")
log "plan: greedy at 2.5 bits on the test model's unit table"
"$WQ" baseline --config "$WQ_TEST_CONFIG" "${CONFIG_SETS[@]}" --method greedy --bits 2.5 \
  --out "$OUT/plan" --force --no-eval > "$OUT/baseline.log" 2>&1 ||
  { tail -5 "$OUT/baseline.log" >&2; exit 1; }
ppl() {  # DEVICE DTYPE [plan] -> perplexity of the test model's text
  local device="$1" dtype="$2" args
  if [[ "${3:-}" == plan ]]; then
    args=(--plan "$OUT/plan/plan.json" --config "$WQ_TEST_CONFIG" "${CONFIG_SETS[@]}"
          --set "model.device=$device" --set "model.compute_dtype=$dtype")
  else
    args=(--model "$WQ_TEST_MODEL_DIR" --device "$device" --dtype "$dtype")
  fi
  local pre=()
  [[ "$device" == cpu ]] && pre=("${CPU_ENV[@]}")
  "${pre[@]}" "$WQ" eval "${args[@]}" --text "$WQ_TEST_TEXT" --max-tokens "$EVAL_TOKENS" --json \
    2>> "$OUT/eval.log" | python3 -c 'import json, sys; print(repr(json.load(sys.stdin)["perplexity"]))'
}
for what in fp plan; do
  mode=""
  [[ "$what" == plan ]] && mode=plan
  log "perplexity ($what): cpu float32, $DEVICE float32, $DEVICE bfloat16"
  cpu=$(ppl cpu float32 $mode)
  dev=$(ppl "$DEVICE" float32 $mode)
  bf16=$(ppl "$DEVICE" bfloat16 $mode)
  row "ppl_${what}_cpu_float32" "$cpu"
  row "ppl_${what}_${DEVICE}_float32" "$dev" ref="$cpu" limit=1e-6
  row "ppl_${what}_${DEVICE}_bfloat16" "$bf16" ref="$cpu" limit=2e-2
done

# --- 2. and 4. forward at the 1B shape, then one layer of 8B and 70B ------------------
bench() {  # NAME ARGS... -> the bench's JSON in $OUT/bench-NAME.json
  local name="$1"; shift
  log "stage_bench $name: $*"
  # The bench's own ATen threads (2) unless OMP_NUM_THREADS says fewer (test.sh under
  # ThreadSanitizer runs torch's OpenMP pool at one thread: scripts/test.sh).
  "$BENCH" "$@" --threads="$(( ${OMP_NUM_THREADS:-2} < 2 ? ${OMP_NUM_THREADS:-2} : 2 ))" \
    --device="$DEVICE" --dtype=bfloat16 --plain --json="$OUT/bench-$name.json" \
    > "$OUT/bench-$name.log" 2>&1 || { tail -5 "$OUT/bench-$name.log" >&2; exit 1; }
}
bench 1b "${BENCH_1B[@]}"
for big in "${BIG[@]}"; do
  bench "${big%%:*}" "${BENCH_BIG[@]}" --shape="${big#*:}"
done

# --- 3. quantize at the 1B shape -----------------------------------------------------
if ((SMALL)); then
  log "quantize: the test model, $UPDATES updates"
  QCONFIG="$WQ_TEST_CONFIG"
  QSETS=(--set "training.episodes_per_update=4" --set "ppo.hidden=[32,32]"
    --set "training.warm_start=none" --set "curriculum.target_bits=[2.0]")
else
  log "quantize: synthetic LLaMA-3.2-1B shape, 16 layers, $UPDATES updates"
  "$WQ" synth --shape llama3.2-1b --out "$OUT/synth-1b" \
    --tokenizer "$WQ_TEST_MODEL_DIR" > "$OUT/synth.log" 2>&1 ||
    { tail -5 "$OUT/synth.log" >&2; exit 1; }
  QCONFIG=configs/llama3.2-1b-smoke.yaml
  QSETS=(--set "model.dir=$OUT/synth-1b"
    --set "calibration.text=$WQ_TEST_TEXT" --set "calibration.tokens=[0, 16384]"
    --set "evaluation.selection.text=$WQ_TEST_TEXT" --set "evaluation.selection.tokens=[16384, 24576]"
    --set "evaluation.heldout.text=$WQ_TEST_TEXT" --set "evaluation.heldout.tokens=[24576, 32768]")
fi
"$WQ" quantize --config "$QCONFIG" "${QSETS[@]}" "${CONFIG_SETS[@]}" \
  --set "output.dir=$OUT/quantize" --set "model.device=$DEVICE" \
  --set "curriculum.max_updates=$UPDATES" --set "curriculum.min_updates=$UPDATES" \
  --no-export --no-baselines > "$OUT/quantize.log" 2>&1 ||
  { tail -5 "$OUT/quantize.log" >&2; exit 1; }
row quantize_updates "$(json_get "$OUT/quantize/report.json" 'j["updates"]')"
row quantize_train_s "$(json_get "$OUT/quantize/report.json" 'j["wall_time_s"]["train"]')"
row quantize_plan_evaluations "$(json_get "$OUT/quantize/report.json" 'j["plan_evaluations"]')"

# --- the table ----------------------------------------------------------------------
python3 - "$OUT" "$DEVICE" "$SMALL" <<'EOF'
import json, sys
import yaml
out, device, small = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rows = {r["key"]: r for r in map(json.loads, open(f"{out}/rows.jsonl"))}
bench = {n: json.load(open(f"{out}/bench-{n}.json")) for n in ("1b", "8b", "70b")}
ok = True
print(f"gpu-check on {device}{' (--small: small shapes)' if small else ''}; files in {out}")
print(f"{'figure':66} {'value':>12} {'against':>16}  check")
def line(name, value, against="", check=""):
    print(f"{name:66} {value:>12} {against:>16}  {check}")
for what in ("fp", "plan"):
    label = "FP" if what == "fp" else "greedy 2.5-bit plan"
    cpu = float(rows[f"ppl_{what}_cpu_float32"]["value"])
    line(f"test model perplexity, {label}, cpu float32 (reference)", f"{cpu:.8f}")
    for dtype in ("float32", "bfloat16"):
        r = rows[f"ppl_{what}_{device}_{dtype}"]
        v, limit = float(r["value"]), float(r["limit"])
        rel = abs(v - cpu) / cpu
        ok &= rel <= limit
        line(f"test model perplexity, {label}, {device} {dtype}", f"{v:.8f}", f"{rel:.2e} rel",
             f"{'PASS' if rel <= limit else 'FAIL'} (<= {limit:g})")
b = bench["1b"]
line(f"forward tokens/s, plain layers ({b['layers']} x {b['shape']}, {b['tokens']} tokens)",
     f"{b['plain_tokens_s']:.1f}")
for key, label in (("fp", "FP"), ("plan_mixed", "mixed plan")):
    ratio = b[f"{key}_tokens_s"] / b["plain_tokens_s"]
    line(f"forward tokens/s, windquant {label}", f"{b[f'{key}_tokens_s']:.1f}",
         f"{ratio:.3f} x plain", "goal met (>= 0.5)" if ratio >= 0.5 else "below goal 0.5")
line("first forward's plan application (codes made), s", f"{b['plan_mixed_first_linears_s']:.3f}")
updates = float(rows["quantize_updates"]["value"])
train = float(rows["quantize_train_s"]["value"])
evals = float(rows["quantize_plan_evaluations"]["value"])
what = "test model" if small else "1B shape, 16 layers"
line(f"quantize ({what}): PPO updates, training s", f"{updates:.0f}", f"{train:.1f} s")
line("quantize: s per PPO update", f"{train / max(updates, 1):.2f}")
line("quantize: s per plan evaluation (training s / plans)", f"{train / max(evals, 1):.2f}",
     f"{evals:.0f} plans")
line("quantize: PPO updates per 5 minutes", f"{300 * updates / max(train, 1e-9):.1f}", "derived")
for name, layers in (("8b", 32), ("70b", 80)):
    c = yaml.safe_load(open(f"configs/llama3-{name}.yaml"))
    sel = c["evaluation"]["selection"]["tokens"]
    tokens = (sel[1] - sel[0]) + c["evaluation"]["calib_slice_tokens"]
    plans = c["training"]["episodes_per_update"] * c["curriculum"]["max_updates"]
    b = bench[name]
    layer_tokens_s = b["plan_mixed_tokens_s"] * b["layers"]
    eval_s = layers * tokens / layer_tokens_s
    tag = name.upper() + (" (small shape stands in)" if b["shape"] != name else "")
    line(f"{tag}: a layer with a plan, tokens/s", f"{layer_tokens_s:.1f}",
         f"{b['plain_tokens_s'] * b['layers']:.1f} plain")
    line(f"{tag}: s per plan evaluation ({layers} x {tokens} tokens)", f"{eval_s:.1f}", "derived")
    hours, goal = plans * eval_s / 3600, 1 if name == "8b" else 8
    check = "n/a (small shape)" if b["shape"] != name else (
        f"goal met (<= {goal})" if hours <= goal else f"above goal {goal}")
    line(f"{tag}: GPU-hours per plan ({plans} evaluations)", f"{hours:.2f}", "derived", check)
sys.exit(0 if ok else 1)
EOF
