#!/usr/bin/env bash
# Distributed vs one-process equivalence on the test model.
#
#   distributed_equivalence_test.sh BUILD_DIR table [STAGES] [REPLICAS]
#     (label integration, ~1 min) With the same config and calibration seed,
#     STAGES x REPLICAS actors (default 2 x 2) started through
#     deploy/local/run.sh build the same unit table as one process
#     (`windquant table build`): the learner's merged table
#     (WORK/dist/run/unit_table.pb) and every actor's own stage table (each
#     replica has its own fit cache, so replica 1's fits are checked too, not
#     only the replica the learner kept) are compared unit by unit with
#     `windquant table diff`: layout and effective bits exactly, the error proxy
#     of every (unit, action) within a relative ERROR_RTOL, every static
#     feature within FEATURE_ATOL. The two paths accumulate activation
#     statistics in different micro-batches (one process: 8 windows per
#     forward; the pipeline: evaluation.batch = 3 windows, through gRPC
#     float32 hidden states). Measured on stories260k: the tables are
#     bit-identical (statistics are summed in float64, then rounded to
#     float32), so the tolerances are tight: ERROR_RTOL = FEATURE_ATOL = 1e-6
#     (room for another BLAS or thread count, not for a real difference: a
#     different calibration seed moves features by 2e-2).
#
#   distributed_equivalence_test.sh BUILD_DIR plan [STAGES] [REPLICAS]
#     (label slow, ~7 min per seed on 2 quiet cores) The docs/results-rl.md
#     protocol at 2.0 bits (10 updates x 8 episodes, selection slice 8160
#     tokens, loss slice 4096, calibration 32 x 256) for every training.seed
#     of WQ_EQUIV_SEEDS (default "0 1 2"), run by `windquant quantize` (the
#     services in one process, in-process channels) and by the distributed job
#     (separate processes over TCP); every best plan is measured by the same
#     evaluator (`windquant eval --plan`, one process, whole evaluation text;
#     a distributed plan is first moved onto the one-process table with
#     `windquant table rebase-plan`, which checks the layouts agree). Passes
#     when every plan meets the budget and the means over the seeds differ by
#     at most PPL_TOLERANCE (default 5.3 = the seed-to-seed standard deviation
#     of the RL plan, docs/results-rl.md). One seed per side is not a test:
#     two runs with different sampling streams are two draws of that spread
#     (their difference has sd ~7.5); measured 2026-11-29 with the one-process
#     rl::Trainer, per-seed differences were -2.3, -13.2 and +14.9 while the
#     means over the 3 seeds differed by 0.2 (distributed 119.96 +- 8.86, one
#     process 120.16 +- 5.30).
#     Measured 2026-11-30 as written (quantize = the services in one process;
#     3 seeds per side, 2 x 2, 2714 s while the machine was also building):
#     one process 113.40 / 115.90 / 112.21, distributed 107.77 / 121.78 /
#     121.93 (whole-text PPL, every plan <= 2.0 bits); means 113.84 +- 1.89
#     vs 117.16 +- 8.13: difference +3.32 <= 5.3, PASS. The distributed
#     spread is the larger one in both measurements (8.9 and 8.1 vs 5.3 and
#     1.9; not investigated: 4 actors of one policy version sample 2
#     episodes each, and plans can arrive after the update they were made for).
#     WQ_EQUIV_WARM_START=none|lagrange (default lagrange, the protocol of
#     the 5.3 figure) is passed to both runs.
#     Fixes this test found (2026-11-29; first distributed result 200.2, then
#     138.8): the learner lacked the reference candidate, warm start and
#     greedy candidate; it rewarded each episode with the λ the evaluator
#     reported after that very plan (penalties of different scale within one
#     batch; now rl::BatchLambda, kept by the evaluator); every actor sampled the same stream (seeds
#     differing only in bits mt19937 drops; now SplitMix64-mixed).
#
# Environment: WQ_SOURCE_DIR (repo root), WQ_EQUIV_KEEP=1 keeps the work folder (/tmp/wq-equiv.*).
set -euo pipefail
BUILD="$(cd "$1" && pwd)"; MODE="${2:-table}"; NSTAGES="${3:-2}"; NREPLICAS="${4:-2}"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
# The test model (stories260k from ../shared, else the project's default model that
# the wq_test_model fixture trained): common/testing/test_paths.h decides.
eval "$("$BUILD/common/testing/wq-test-paths")"
MODEL="$WQ_TEST_MODEL_DIR"
[[ -f "$MODEL/config.json" ]] || { echo "FAIL: $MODEL/config.json missing (run the wq_test_model fixture: ctest -R test_model_setup)"; exit 1; }
WQ="$BUILD/cli/windquant"
[[ -x "$WQ" ]] || { echo "FAIL: $WQ not built"; exit 1; }
ERROR_RTOL="${ERROR_RTOL:-1e-6}"
FEATURE_ATOL="${FEATURE_ATOL:-1e-6}"
PPL_TOLERANCE="${PPL_TOLERANCE:-5.3}"
export WQ_RUN_LIB=1
# shellcheck source=../deploy/local/run.sh
source "$SRC/deploy/local/run.sh"  # (sets CONFIG, OUT, BIN, STAGES, ... : ours are named otherwise)
source "$SRC/tests/distributed_test_config.sh"
CFG="$WQ_TEST_CONFIG"
WORK=$(mktemp -d /tmp/wq-equiv.XXXXXX)

fail() { echo "FAIL: $*"; echo "kept: $WORK"; exit 1; }
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# run.sh's start_all, but every replica gets its own fit cache
# (quant.cache_dir, a later --set wins), so that each actor's stage table
# stays on disk.
start_all_own_caches() {
  start_learner
  local s r saved=("${COMMON[@]}")
  for ((s = 0; s < STAGES; s++)); do
    for ((r = 0; r < REPLICAS; r++)); do
      COMMON=("${saved[@]}" --set "quant.cache_dir=$WORK/dist/cache-r$r")
      start_actor "$s" "$r"
    done
  done
  COMMON=("${saved[@]}")
  start_evaluator
}

# Table equivalence ------------------------------------------------------
if [[ "$MODE" == table ]]; then
  # The overrides every distributed test uses (calibration 8 x 128, seed 0),
  # with evaluation.batch = ${WQ_EQUIV_BATCH:-3}: the pipeline calibrates in
  # micro-batches of that many windows (3, 3, 2), the one process in one
  # forward of 8, so the two really sum in different orders.
  SETS_ONE=("${TEST_SETS[@]}" --set "evaluation.batch=${WQ_EQUIV_BATCH:-3}")
  t0=$(now)
  mkdir -p "$WORK/one"
  "$WQ" table build --config "$CFG" "${SETS_ONE[@]}" --set "quant.cache_dir=$WORK/one/cache" \
    --out "$WORK/one/unit_table.pb" 2>"$WORK/one-build.log" || { cat "$WORK/one-build.log"; fail "one-process table"; }
  echo "one process: table built in $(secs "$t0") s"

  t0=$(now)
  parse_args --config "$CFG" --bin "$BUILD" --stages "$NSTAGES" --replicas "$NREPLICAS" \
    --out "$WORK/dist" --timeout 300 "${SETS_ONE[@]}"
  plan_topology
  trap 'stop_all' EXIT
  start_all_own_caches
  wait_for unit_table_complete '[[ $v == true ]]' || fail "the distributed unit table never completed"
  # Every replica registers after its own calibration: wait for all stage tables.
  deadline=$((SECONDS + 300))
  while :; do
    # Each actor's fit cache entry (quant/unit_table_cache.h): complete once its
    # manifest.json, written last, is there.
    n=$(ls "$WORK"/dist/cache-r*/*/manifest.json 2>/dev/null | wc -l)
    ((n >= STAGES * REPLICAS)) && break
    ((SECONDS < deadline)) || fail "only $n of $((STAGES * REPLICAS)) actors wrote their stage table"
    sleep 0.5
  done
  stop_all
  trap - EXIT
  echo "distributed ($STAGES stages x $REPLICAS replicas): tables complete in $(secs "$t0") s"

  [[ -f "$WORK/dist/run/unit_table.pb" ]] || fail "the learner wrote no $WORK/dist/run/unit_table.pb"
  TOL=(--error-rtol "$ERROR_RTOL" --feature-atol "$FEATURE_ATOL")
  echo "--- merged (learner) vs one process"
  "$WQ" table diff "$WORK/dist/run/unit_table.pb" "$WORK/one/unit_table.pb" "${TOL[@]}" \
    || fail "merged table differs from the one-process table"
  for f in "$WORK"/dist/cache-r*/*/unit_table.pb; do
    echo "--- $(basename "$(dirname "$(dirname "$f")")")/$(basename "$(dirname "$f")") vs one process"
    "$WQ" table diff "$f" "$WORK/one/unit_table.pb" "${TOL[@]}" \
      | grep -E "max (rel|abs) diff|units within|EQUIVALENT|DIFFERENT|layout" \
      || fail "stage table $f differs from the one-process table"
  done
  no_sanitizer_reports "$WORK"
  [[ "${WQ_EQUIV_KEEP:-0}" == 1 ]] || rm -rf "$WORK"
  echo "PASS"
  exit 0
fi

# Plan quality -------------------------------------------------------------
[[ "$MODE" == plan ]] || { echo "usage: $0 BUILD_DIR table|plan [STAGES] [REPLICAS]"; exit 2; }
SEEDS=(${WQ_EQUIV_SEEDS:-0 1 2})
WARM="${WQ_EQUIV_WARM_START:-lagrange}"
# `windquant eval --plan` takes a config file only: this one is
# the test model's config with absolute paths and the one-process cache.
# (relative model/text paths made absolute; its text roles, so plans are
# measured on its held-out text).
CFG_DIR="$(cd "$(dirname "$CFG")" && pwd)"
sed -e "s#^\(\s*\(dir\|text\): \)\([^/]\)#\1$CFG_DIR/\3#" \
  -e "s#^\(\s*cache_dir: \).*#\1$WORK/cache-one#" "$CFG" >"$WORK/eval.yaml"
"$WQ" table build --config "$WORK/eval.yaml" --out "$WORK/one-table.pb" >/dev/null 2>&1 \
  || fail "one-process table"
measure() {  # plan.bin -> json line
  "$WQ" eval --plan "$1" --config "$WORK/eval.yaml" --json 2>/dev/null
}

# One seed: `windquant quantize` and the distributed job; both best plans
# measured on the held-out text into $WORK/s$SEED/{one,dist}/eval.json.
run_seed() {
  local seed=$1 w="$WORK/s$1" t0
  mkdir -p "$w/one" "$w/dist"
  # docs/results-rl.md protocol (2.0 bits); both plans are measured by the
  # same `windquant eval --plan` on the held-out text.
  local protocol=(
    --set "curriculum.target_bits=[2.0]" --set "curriculum.min_updates=10"
    --set "curriculum.max_updates=10" --set "training.episodes_per_update=8"
    --set "training.seed=$seed" --set "training.warm_start=$WARM"
    --set "evaluation.calib_slice_tokens=4096"
  )
  t0=$(now)
  "$WQ" quantize --config "$CFG" "${protocol[@]}" \
    --set "quant.cache_dir=$WORK/cache-one" --set "output.dir=$w/one/run" --no-export --no-baselines \
    >"$w/one/quantize.out" 2>"$w/one/quantize.log" || { tail -20 "$w/one/quantize.log"; fail "quantize (seed $seed)"; }
  echo "seed $seed: one process: quantize in $(secs "$t0") s"

  t0=$(now)
  SETS=()
  parse_args --config "$CFG" --bin "$BUILD" --stages "$NSTAGES" --replicas "$NREPLICAS" \
    --out "$w/dist" --timeout 2400 "${protocol[@]}" \
    --set "service.evaluation_timeout_ms=600000" --set "service.rpc_deadline_ms=60000"
  plan_topology
  trap 'stop_all' EXIT
  start_all
  wait_for done '[[ $v == true ]]' || fail "the distributed run did not finish (seed $seed)"
  status >"$w/dist/status.txt"
  stop_all
  trap - EXIT
  echo "seed $seed: distributed ($STAGES stages x $REPLICAS replicas): run in $(secs "$t0") s"
  "$WQ" table diff "$w/dist/run/unit_table.pb" "$WORK/one-table.pb" \
    --error-rtol "$ERROR_RTOL" --feature-atol "$FEATURE_ATOL" >/dev/null \
    || fail "the tables differ (see the table test)"
  [[ -f "$w/dist/run/best/plan.bin" ]] || fail "no distributed best plan (seed $seed)"
  "$WQ" table rebase-plan --plan "$w/dist/run/best/plan.bin" --from "$w/dist/run/unit_table.pb" \
    --to "$WORK/one-table.pb" --out "$w/dist/best-on-one" >/dev/null || fail "rebase-plan"
  measure "$w/one/run/plan.bin" >"$w/one/eval.json" || fail "eval of the one-process plan"
  measure "$w/dist/best-on-one/plan.bin" >"$w/dist/eval.json" || fail "eval of the distributed plan"
}

for seed in "${SEEDS[@]}"; do run_seed "$seed"; done
python3 - "$WORK" "$PPL_TOLERANCE" "${SEEDS[@]}" <<'PY' || fail "plan quality differs"
import json, statistics, sys
out, tol, seeds = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def bits(p):
    t = p.get("totals", {})
    return t.get("effective_bits", p.get("effective_bits"))
ppl = {"one": [], "dist": []}
for s in seeds:
    for side, plan in (("one", "one/run/plan.json"), ("dist", "dist/best-on-one/plan.json")):
        e = json.load(open(f"{out}/s{s}/{side}/eval.json"))
        b = bits(json.load(open(f"{out}/s{s}/{plan}")))
        assert b is not None and b <= 2.0 + 1e-9, f"seed {s} {side}: plan over budget: {b}"
        ppl[side].append(e["perplexity"])
    print(f"seed {s}: one process {ppl['one'][-1]:.3f}  distributed {ppl['dist'][-1]:.3f}"
          f"  ({ppl['dist'][-1] - ppl['one'][-1]:+.3f})")
def summary(xs):
    return f"{statistics.mean(xs):.3f}" + (f" +- {statistics.stdev(xs):.3f}" if len(xs) > 1 else "")
print(f"one process : whole-text PPL {summary(ppl['one'])} over {len(seeds)} seeds")
print(f"distributed : whole-text PPL {summary(ppl['dist'])} over {len(seeds)} seeds")
d = statistics.mean(ppl["dist"]) - statistics.mean(ppl["one"])
print(f"difference of the means: {d:+.3f} (tolerance {tol})")
assert abs(d) <= tol, f"|{d:.3f}| > {tol}"
PY
no_sanitizer_reports "$WORK"
[[ "${WQ_EQUIV_KEEP:-0}" == 1 ]] || rm -rf "$WORK"
echo "PASS"
