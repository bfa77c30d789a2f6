#!/usr/bin/env bash
# Distributed vs one-process equivalence on stories260k (issue 5 item 9).
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
#     (label slow, 7 min measured, up to ~25 on busy 2 cores) The docs/results-rl.md protocol at
#     2.0 bits (10 updates x 8 episodes, selection slice 8160 tokens, loss
#     slice 4096, calibration 32 x 256, training.seed WQ_EQUIV_SEED=0) run by
#     `windquant quantize` and by the distributed job; both best plans are
#     measured by the same evaluator (`windquant eval --plan`, one process,
#     whole evaluation text; the distributed plan is first moved onto the
#     one-process table with `windquant table rebase-plan`, which checks the
#     tables have the same layout). Passes when both meet the budget and
#     |PPL_dist - PPL_one| <= PPL_TOLERANCE (default 5.3 = the seed-to-seed
#     standard deviation of the one-process RL plan, docs/results-rl.md).
#     WQ_EQUIV_WARM_START=none|lagrange (default lagrange, the protocol of
#     the 5.3 figure) is passed to both runs.
#     Measured 2026-11-29, seed 0, warm_start=lagrange, 2 stages x 2 replicas:
#     one process 121.32 (1.9906 bits), distributed 119.01 (1.9995 bits, 91
#     plans evaluated): difference -2.32, PASS (427 s on 2 cores). Before that
#     day's two learner/actor fixes the distributed plan measured 138.83:
#     (1) the learner rewarded each episode with the λ the evaluator reported
#     after evaluating that very plan (λ grew ~1.5 per plan at d ~ 30), so the
#     episodes of one PPO batch got penalties of different scale (mean reward
#     at update 1: -418 vs -42 in one process; now -36); it now uses
#     rl::BatchLambda as rl::Trainer does (one λ per batch, the value at the
#     previous update, checkpointed); (2) every actor sampled the same stream
#     (mt19937 keeps a seed's low 32 bits, the actor index sat in the high 32),
#     so the 8 episodes of a version were 2 distinct plans, 4 times each; now
#     8 distinct. Which fix mattered more is not measured.
#     Seed 1 (WQ_EQUIV_SEED=1, same day, 426 s): one process 124.78 (1.9988
#     bits), distributed 111.61 (1.9997 bits): difference -13.16, FAIL (the
#     distributed plan is better by more than the tolerance). Two runs whose
#     sampling streams differ are two draws of the spread (sd of a difference
#     ~ 5.3 * sqrt(2) = 7.5), so this two-sided check on one seed is noisy.
#     Seed 2: one process 114.38, distributed 129.26: +14.88, FAIL. Over the 3
#     seeds: distributed 119.96 +- 8.86 vs one process 120.16 +- 5.30 (mean +-
#     sd): the means differ by 0.2, well inside the spread.
#
# Environment: WQ_SOURCE_DIR (repo root), WQ_EQUIV_KEEP=1 keeps the work folder (/tmp/wq-equiv.*).
# Exit 77 (skip) when ../shared/models/stories260k is missing.
set -euo pipefail
BUILD="$(cd "$1" && pwd)"; MODE="${2:-table}"; NSTAGES="${3:-2}"; NREPLICAS="${4:-2}"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
MODEL="$SRC/../shared/models/stories260k"
if [[ ! -f "$MODEL/config.json" ]]; then echo "SKIP: $MODEL not found"; exit 77; fi
WQ="$BUILD/cli/windquant"
[[ -x "$WQ" ]] || { echo "FAIL: $WQ not built"; exit 1; }
ERROR_RTOL="${ERROR_RTOL:-1e-6}"
FEATURE_ATOL="${FEATURE_ATOL:-1e-6}"
PPL_TOLERANCE="${PPL_TOLERANCE:-5.3}"
export WQ_RUN_LIB=1
# shellcheck source=../deploy/local/run.sh
source "$SRC/deploy/local/run.sh"  # (sets CONFIG, OUT, BIN, STAGES, ... : ours are named otherwise)
source "$SRC/tests/distributed_test_config.sh"
CFG="$SRC/configs/stories260k.yaml"
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
    n=$(ls "$WORK"/dist/cache-r*/stage-*.table.pb 2>/dev/null | wc -l)
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
  for f in "$WORK"/dist/cache-r*/stage-*.table.pb; do
    echo "--- $(basename "$(dirname "$f")")/$(basename "$f") vs one process"
    "$WQ" table diff "$f" "$WORK/one/unit_table.pb" "${TOL[@]}" \
      | grep -E "max (rel|abs) diff|units within|EQUIVALENT|DIFFERENT|layout" \
      || fail "stage table $f differs from the one-process table"
  done
  [[ "${WQ_EQUIV_KEEP:-0}" == 1 ]] || rm -rf "$WORK"
  echo "PASS"
  exit 0
fi

# Plan quality -------------------------------------------------------------
[[ "$MODE" == plan ]] || { echo "usage: $0 BUILD_DIR table|plan [STAGES] [REPLICAS]"; exit 2; }
SEED="${WQ_EQUIV_SEED:-0}"
WARM="${WQ_EQUIV_WARM_START:-lagrange}"
# docs/results-rl.md protocol (2.0 bits); the final evaluation of quantize is
# cut to the selection slice + one window: both plans are measured below by
# the same `windquant eval --plan` on the whole text.
PROTOCOL=(
  --set "curriculum.target_bits=[2.0]" --set "curriculum.min_updates=10"
  --set "curriculum.max_updates=10" --set "training.episodes_per_update=8"
  --set "training.seed=$SEED" --set "training.warm_start=$WARM"
  --set "evaluation.eval_slice_tokens=8160" --set "evaluation.calib_slice_tokens=4096"
)
mkdir -p "$WORK/one" "$WORK/dist"
# `windquant eval --plan` takes a config file only: this one is
# configs/stories260k.yaml with absolute paths and this run's cache.
cat >"$WORK/eval.yaml" <<EOF
model:
  dir: $MODEL
  device: cpu
  threads: 0
calibration:
  text: $SRC/../shared/data/tinystories-valid-sample.txt
  samples: 32
  seq_len: 256
  seed: 0
evaluation:
  text: $SRC/../shared/data/tinystories-valid-sample.txt
  context: 256
  batch: 16
quant:
  chunk_size: $(sed -n 's/^ *chunk_size: *\([0-9]*\).*/\1/p' "$CFG")
  salient_fraction: $(sed -n 's/^ *salient_fraction: *\([0-9.e-]*\).*/\1/p' "$CFG")
  cache_dir: $WORK/one/cache
EOF

t0=$(now)
"$WQ" quantize --config "$CFG" "${PROTOCOL[@]}" --set "evaluation.final_eval_tokens=8415" \
  --set "quant.cache_dir=$WORK/one/cache" --set "output.dir=$WORK/one/run" --no-export --no-baselines \
  >"$WORK/one/quantize.out" 2>"$WORK/one/quantize.log" || { tail -20 "$WORK/one/quantize.log"; fail "quantize"; }
echo "one process: quantize in $(secs "$t0") s"
cat "$WORK/one/quantize.out"
"$WQ" table build --config "$WORK/eval.yaml" --out "$WORK/one/unit_table.pb" >/dev/null 2>&1 \
  || fail "one-process table"

t0=$(now)
parse_args --config "$CFG" --bin "$BUILD" --stages "$NSTAGES" --replicas "$NREPLICAS" \
  --out "$WORK/dist" --timeout 2400 "${PROTOCOL[@]}" \
  --set "service.evaluation_timeout_ms=600000" --set "service.rpc_deadline_ms=60000"
plan_topology
trap 'stop_all' EXIT
start_all
wait_for done '[[ $v == true ]]' || fail "the distributed run did not finish"
status | tee "$WORK/dist/status.txt"
stop_all
trap - EXIT
echo "distributed ($STAGES stages x $REPLICAS replicas): run in $(secs "$t0") s"
"$WQ" table diff "$WORK/dist/run/unit_table.pb" "$WORK/one/unit_table.pb" \
  --error-rtol "$ERROR_RTOL" --feature-atol "$FEATURE_ATOL" | tail -1 \
  || fail "the tables differ (see the table test)"
[[ -f "$WORK/dist/run/best/plan.bin" ]] || fail "no distributed best plan"
"$WQ" table rebase-plan --plan "$WORK/dist/run/best/plan.bin" --from "$WORK/dist/run/unit_table.pb" \
  --to "$WORK/one/unit_table.pb" --out "$WORK/dist/best-on-one" || fail "rebase-plan"

measure() {  # plan.bin -> json line
  "$WQ" eval --plan "$1" --config "$WORK/eval.yaml" --json 2>/dev/null
}
t0=$(now)
measure "$WORK/one/run/plan.bin" >"$WORK/one/eval.json" || fail "eval of the one-process plan"
measure "$WORK/dist/best-on-one/plan.bin" >"$WORK/dist/eval.json" || fail "eval of the distributed plan"
echo "both plans measured on the whole text in $(secs "$t0") s"
python3 - "$WORK" "$PPL_TOLERANCE" <<'PY' || fail "plan quality differs"
import json, sys
out, tol = sys.argv[1], float(sys.argv[2])
one = json.load(open(f"{out}/one/eval.json")); dist = json.load(open(f"{out}/dist/eval.json"))
plan_one = json.load(open(f"{out}/one/run/plan.json")); plan_dist = json.load(open(f"{out}/dist/best-on-one/plan.json"))
def bits(p):
    t = p.get("totals", {})
    return t.get("effective_bits", p.get("effective_bits"))
rows = [json.loads(l) for l in open(f"{out}/dist/run/plans.jsonl")]
print(f"one process : bits {bits(plan_one)}  whole-text PPL {one['perplexity']:.3f}")
print(f"distributed : bits {bits(plan_dist)}  whole-text PPL {dist['perplexity']:.3f}"
      f"  ({len(rows)} plans evaluated, best selection-slice PPL {min(r['perplexity'] for r in rows):.3f})")
d = dist["perplexity"] - one["perplexity"]
print(f"difference  : {d:+.3f} (tolerance {tol})")
for p in (plan_one, plan_dist):
    b = bits(p)
    assert b is not None and b <= 2.0 + 1e-9, f"plan over budget: {b}"
assert abs(d) <= tol, f"|{d:.3f}| > {tol}"
PY
[[ "${WQ_EQUIV_KEEP:-0}" == 1 ]] || rm -rf "$WORK"
echo "PASS"
