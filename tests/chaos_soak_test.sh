#!/usr/bin/env bash
# Integration (real processes on loopback, a real S3 endpoint): a chaos soak of
# the distributed run. deploy/local's topology at 2 stages x 2 replicas on the
# test model, its results in a moto S3 store (as tests/store_e2e_test.sh), and
# a driver that kills -9 a random process (the learner, the evaluator or one of
# the four actors: the kind first, then the actor; the first three kills take
# the three kinds in a random order, so that a short soak meets each) every
# MIN..MAX-INTERVAL seconds and starts it again at once, for DURATION seconds
# or until the learner's curriculum is done. Victims and intervals come from
# bash's RANDOM seeded with SEED: a seed replays the same schedule. Then the
# run must finish and these invariants hold:
#  1. the run finished: the learner is done and the final result is in the store;
#  2. every PPO update counted once: the learner logged no update number twice
#     over its incarnations, each incarnation resumed at (or one past, when
#     killed between its checkpoint and the log line) the last update the one
#     before it logged, the status ends at curriculum.max_updates, and the last
#     incarnation's windquant_learner_ppo_updates_total is the updates it ran;
#  3. no acknowledged episode lost: every episode an actor logged as accepted
#     by the learner is in plans.jsonl (evaluated and recorded), none twice;
#  4. real evaluations: report.json's rl_real_evaluations (what the final
#     searches are given) is the number of plans.jsonl rows the evaluator
#     measured (cached = false), over every learner incarnation;
#  5. the returned plan (pulled from the store) is within the budget and its
#     packed checkpoint evaluates to report.json's perplexity (1e-6 relative);
#  6. the store: every plan of the run pulls (manifest present, sha256
#     verified), the final one and run.json's best plan among them.
# One line per kill, then a summary table.
#   chaos_soak_test.sh BUILD_DIR [--duration S] [--seed N] [--min-interval S]
#       [--max-interval S] [--updates N]
set -euo pipefail
BUILD="$1"
shift
DURATION=60 SEED=38 MIN_INTERVAL=8 MAX_INTERVAL=15 UPDATES=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) DURATION="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --min-interval) MIN_INTERVAL="$2"; shift 2 ;;
    --max-interval) MAX_INTERVAL="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    *) echo "chaos_soak_test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
((MIN_INTERVAL >= 1 && MAX_INTERVAL >= MIN_INTERVAL)) || { echo "bad intervals" >&2; exit 2; }
# Enough PPO updates that the run outlasts the chaos on this machine (about
# 2 s per update here with the kills; the chaos ends at `done` anyway) and no
# more: the final searches measure as many plans as the run did.
UPDATES="${UPDATES:-$((DURATION / 2 + 6))}"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
T0=$SECONDS
eval "$("$BUILD/common/testing/wq-test-paths")"
MODEL="$WQ_TEST_MODEL_DIR"
[[ -f "$MODEL/config.json" ]] || { echo "FAIL: $MODEL/config.json missing (run the wq_test_model fixture: ctest -R test_model_setup)"; exit 1; }
for tool in moto_server aws; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found on PATH (the machine's Python has it)"; exit 1; }
done
WQ="$BUILD/cli/windquant"
[[ -x "$WQ" ]] || { echo "FAIL: $WQ not built"; exit 1; }
OUT=$(mktemp -d /tmp/wq-chaos.XXXXXX)
export WQ_RUN_LIB=1 WQ_TEST_UPDATES="$UPDATES"
source "$SRC/deploy/local/run.sh"
source "$SRC/tests/distributed_test_config.sh"
fail() { echo "FAIL: $*"; echo "logs: $OUT/logs"; exit 1; }
at() { echo "$((SECONDS - T0))"; }
step() { echo "--- $* (at $(at) s)"; }

step "chaos soak: seed $SEED, ${DURATION} s, a kill every ${MIN_INTERVAL}-${MAX_INTERVAL} s, $UPDATES updates"
MOTO_PID=""
cleanup() { stop_all; [[ -z "$MOTO_PID" ]] || { kill "$MOTO_PID" 2>/dev/null; wait "$MOTO_PID" 2>/dev/null; } || true; }
trap 'cleanup; echo "logs: $OUT/logs"' EXIT
start_moto wq-chaos
STORE=s3://wq-chaos/windquant

# As distributed_faults_test.sh: no error compensation, so that a restarted
# actor reloads its cached fits (with it, it redoes its calibration pass).
# Small selection and held-out slices (the first 256 and 2,048 tokens of the
# config's): the final searches measure as many plans as the whole run did,
# one at a time, so an evaluation must be cheap for the run to end in minutes.
read -r selection heldout < <(python3 - "$WQ_TEST_CONFIG" <<'PY'
import sys, yaml
e = yaml.safe_load(open(sys.argv[1]))["evaluation"]
s, h = e["selection"]["tokens"][0], e["heldout"]["tokens"][0]
print(f"[{s},{s + 256}] [{h},{h + 2048}]")
PY
)
RUN_SETS=("${TEST_SETS[@]}" --set service.evaluation_timeout_ms=20000 --set model.threads=1
          --set "curriculum.min_updates=$UPDATES" --set quant.compensation=none
          --set "evaluation.selection.tokens=$selection" --set "evaluation.heldout.tokens=$heldout")
parse_args --config "$WQ_TEST_CONFIG" --bin "$BUILD" --stages 2 --replicas 2 \
  --out "$OUT" --timeout 600 "${RUN_SETS[@]}" --set "output.store=$STORE"
plan_topology
start_all
wait_for updates '((v >= 1))' || fail "no PPO update"

# Restarts process `name` as run.sh started it.
restart() {
  case "$1" in
    learner) start_learner ;;
    evaluator) start_evaluator ;;
    actor-s*-r*) local s=${1#actor-s}; start_actor "${s%%-r*}" "${1##*-r}" ;;
  esac
}
# Sleeps `seconds`; fails when a process died on its own meanwhile (a crash).
watch_for() {
  local deadline=$((SECONDS + $1)) name
  while ((SECONDS < deadline)); do
    for name in "${!PIDS[@]}"; do
      kill -0 "${PIDS[$name]}" 2>/dev/null || {
        tail -5 "$OUT/logs/$name.log"
        fail "$name (pid ${PIDS[$name]}) exited by itself"
      }
    done
    [[ "$(status_field done)" == true ]] && return 0
    sleep 0.5
  done
}

step "chaos"
RANDOM=$SEED
ACTORS=(actor-s0-r0 actor-s0-r1 actor-s1-r0 actor-s1-r1)
KINDS=(learner evaluator actor)
for i in 2 1; do  # Fisher-Yates: the kinds of the first three kills
  j=$((RANDOM % (i + 1)))
  k=${KINDS[i]} KINDS[i]=${KINDS[j]} KINDS[j]=$k
done
declare -A KILLS=([learner]=0 [evaluator]=0 [actor]=0)
chaos_start=$SECONDS kills=0
while ((SECONDS - chaos_start < DURATION)); do
  interval=$((MIN_INTERVAL + RANDOM % (MAX_INTERVAL - MIN_INTERVAL + 1)))
  kind=${KINDS[kills]:-${KINDS[RANDOM % 3]}}
  victim=$kind
  [[ $kind == actor ]] && victim=${ACTORS[RANDOM % 4]}
  watch_for "$interval"
  [[ "$(status_field done)" == true ]] && break
  ((SECONDS - chaos_start < DURATION)) || break
  pid=${PIDS[$victim]}
  updates=$(status_field updates)
  kill9 "$victim"
  restart "$victim"
  kills=$((kills + 1))
  KILLS[${victim%%-*}]=$((${KILLS[${victim%%-*}]} + 1))
  printf 'kill %2d at %4d s: %-11s pid %-7s after %2d s, learner at update %s\n' \
    "$kills" "$(at)" "$victim" "$pid" "$interval" "${updates:-?}"
done
chaos_seconds=$((SECONDS - chaos_start))
step "chaos over after ${chaos_seconds} s, $kills kills; the run goes on to its end"
wait_for done '[[ $v == true ]]' || fail "the run did not complete"
# The final phase: the searches at RL's count of evaluations, the held-out
# passes and the export, then the final plan's upload.
eventually '"$WQ" plans list --store "$STORE" 2>/dev/null | grep "/final " >/dev/null' 600 ||
  fail "the final plan did not reach the store"
status >"$OUT/status.txt"
LAST_UPDATES=$(metric_value learner windquant_learner_ppo_updates_total)
stop_all
RUN_ID=$(cat "$OUT/run/run_id")
"$WQ" plans list --store "$STORE" >"$OUT/plans-list.txt"

step "invariants"
# 6. Every plan of the run pulls (its manifest there, every object's sha256 verified).
mkdir -p "$OUT/pulled"
pulled=0
for p in $(sed -n "s|^  $RUN_ID/\([^ ]*\) .*|\1|p" "$OUT/plans-list.txt"); do
  "$WQ" plans pull --store "$STORE" --plan "$RUN_ID/$p" --out "$OUT/pulled/$p" >/dev/null 2>"$OUT/logs/pull-$p.log" ||
    fail "store: $RUN_ID/$p does not pull: $(tail -1 "$OUT/logs/pull-$p.log")"
  pulled=$((pulled + 1))
done
[[ -f "$OUT/pulled/final/report.json" ]] || fail "store: no final plan of run $RUN_ID"
aws --endpoint-url "$AWS_ENDPOINT_URL" s3 cp "$STORE/runs/$RUN_ID/run.json" "$OUT/run.json" >/dev/null ||
  fail "store: no run.json of $RUN_ID"
# 5. The returned plan's packed checkpoint gives report.json's perplexity on its slice.
read -r text context batch range expected < <(python3 - "$OUT/pulled/final/report.json" <<'PY'
import json, sys
x = json.load(open(sys.argv[1]))["exported"]
print(x["text"], x["context"], x["batch"], "%d:%d" % tuple(x["token_range"]), repr(x["perplexity"]))
PY
)
"$WQ" eval --quantized "$OUT/pulled/final/quantized" --text "$text" --context "$context" \
  --batch "$batch" --tokens "$range" --threads 1 --json >"$OUT/eval-final.json" 2>"$OUT/logs/eval-final.log" ||
  fail "eval of the returned plan: $(tail -1 "$OUT/logs/eval-final.log")"
# 1-5 from the logs, plans.jsonl, status and report.json; prints the summary.
python3 "$SRC/tests/py/chaos_invariants.py" --out "$OUT" --updates "$UPDATES" --target-bits 2.0 \
  --last-updates-metric "${LAST_UPDATES:-}" --eval "$OUT/eval-final.json" --pulled "$pulled" \
  --kills "learner=${KILLS[learner]} evaluator=${KILLS[evaluator]} actor=${KILLS[actor]}" \
  --chaos-seconds "$chaos_seconds" --seed "$SEED" || fail "an invariant does not hold"
cleanup
trap - EXIT
echo "PASS in $(at) s (logs: $OUT/logs)"
