#!/usr/bin/env bash
# Integration (real processes on loopback, a real S3 endpoint): a chaos soak of
# the distributed run. deploy/local's topology at 2 stages x 2 replicas on the
# test model, its results in a moto S3 store (as tests/store_e2e_test.sh), and
# a driver that kills -9 a random process (the learner, the evaluator or one of
# the four actors: the kind first, then the actor; the first three kills take
# the three kinds in a random order, so that a short soak meets each) and starts
# it again at once. Two schedules:
#  - by the run's progress (the default): KILLS kills, the next one when the
#    learner's completed PPO updates (its status file) reach MIN..MAX-GAP
#    updates past the previous kill's mark, or MAX-WAIT seconds after the
#    previous kill if the run has not got there (a stalled run still meets
#    its kills). The number of kills and the updates they fall on (or just
#    past, between two polls) do not depend on the machine's speed; the run
#    has KILLS x MAX-GAP + 4 updates, so each kill comes before its end (else
#    the test fails) and the run recovers from the last one;
#  - by the clock (--duration): a kill every MIN..MAX-INTERVAL seconds for
#    DURATION seconds or until the learner's curriculum is done (the long soak).
# Gaps, intervals and victims come from bash's RANDOM seeded with SEED: a seed
# replays the same schedule. Then the run must finish and these invariants hold:
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
#   chaos_soak_test.sh BUILD_DIR [--seed N] [--updates N]
#       [--kills N] [--min-gap U] [--max-gap U] [--max-wait S]       (by progress)
#       [--duration S] [--min-interval S] [--max-interval S]         (by the clock)
set -euo pipefail
BUILD="$1"
shift
SEED=38 UPDATES="" DURATION="" MIN_INTERVAL=20 MAX_INTERVAL=60
KILL_COUNT=3 MIN_GAP=2 MAX_GAP=4 MAX_WAIT=120
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seed) SEED="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --kills) KILL_COUNT="$2"; shift 2 ;;
    --min-gap) MIN_GAP="$2"; shift 2 ;;
    --max-gap) MAX_GAP="$2"; shift 2 ;;
    --max-wait) MAX_WAIT="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --min-interval) MIN_INTERVAL="$2"; shift 2 ;;
    --max-interval) MAX_INTERVAL="$2"; shift 2 ;;
    *) echo "chaos_soak_test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -n "$DURATION" ]]; then
  ((MIN_INTERVAL >= 1 && MAX_INTERVAL >= MIN_INTERVAL)) || { echo "bad intervals" >&2; exit 2; }
  # Enough PPO updates that the run outlasts the chaos on this machine (about
  # 2 s per update here with the kills; the chaos ends at `done` anyway) and no
  # more: the final searches measure as many plans as the run did.
  UPDATES="${UPDATES:-$((DURATION / 2 + 6))}"
  SCHEDULE="${DURATION} s, a kill every ${MIN_INTERVAL}-${MAX_INTERVAL} s"
else
  ((KILL_COUNT >= 1 && MIN_GAP >= 1 && MAX_GAP >= MIN_GAP && MAX_WAIT >= 1)) || { echo "bad gaps" >&2; exit 2; }
  # The last kill falls on update KILL_COUNT x MAX_GAP at the latest; the run
  # goes TAIL_UPDATES past it (it recovers, and its end cannot overtake a
  # kill between two polls of the status), and no further: the final searches
  # measure as many plans as the run did.
  TAIL_UPDATES=4
  UPDATES="${UPDATES:-$((KILL_COUNT * MAX_GAP + TAIL_UPDATES))}"
  ((UPDATES >= KILL_COUNT * MAX_GAP + 1)) || { echo "--updates: under kills x max-gap + 1" >&2; exit 2; }
  SCHEDULE="$KILL_COUNT kills, one every ${MIN_GAP}-${MAX_GAP} updates (or ${MAX_WAIT} s)"
fi
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

step "chaos soak: seed $SEED, $SCHEDULE, $UPDATES updates"
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
# The learner's status file (rewritten atomically after every update; there
# while the learner is down, unlike `windquant status`): field $1, or nothing.
file_field() { sed -n "s/^$1=//p" "$OUT/run/status.txt" 2>/dev/null || true; }
updates_done() { local u; u=$(file_field updates); echo "${u:-0}"; }
# Waits until the run is done (returns 1) or `due` (a bash test) holds (returns
# 0); fails when a process died on its own meanwhile (a crash).
wait_due() {
  local name
  while :; do
    for name in "${!PIDS[@]}"; do
      kill -0 "${PIDS[$name]}" 2>/dev/null || {
        tail -5 "$OUT/logs/$name.log"
        fail "$name (pid ${PIDS[$name]}) exited by itself"
      }
    done
    [[ "$(file_field done)" == true ]] && return 1
    eval "$1" && return 0
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
chaos_start=$SECONDS last_kill=$SECONDS kills=0 mark=0
while :; do
  if [[ -n "$DURATION" ]]; then
    ((SECONDS - chaos_start < DURATION)) || break
    interval=$((MIN_INTERVAL + RANDOM % (MAX_INTERVAL - MIN_INTERVAL + 1)))
    due="((SECONDS - last_kill >= interval))" when="after $interval s"
  else
    ((kills < KILL_COUNT)) || break
    mark=$((mark + MIN_GAP + RANDOM % (MAX_GAP - MIN_GAP + 1)))
    due='(($(updates_done) >= mark || SECONDS - last_kill >= MAX_WAIT))' when="at update $mark"
  fi
  kind=${KINDS[kills]:-${KINDS[RANDOM % 3]}}
  victim=$kind
  [[ $kind == actor ]] && victim=${ACTORS[RANDOM % 4]}
  if ! wait_due "$due"; then
    # The run is done: in progress mode a kill it should have met is missing.
    [[ -n "$DURATION" ]] || fail "the run ended before kill $((kills + 1)) (due $when; learner at update $(updates_done))"
    break
  fi
  [[ -z "$DURATION" ]] || ((SECONDS - chaos_start < DURATION)) || break
  pid=${PIDS[$victim]}
  updates=$(updates_done)
  [[ -n "$DURATION" ]] || ((updates >= mark)) || when="after $MAX_WAIT s (due at update $mark)"
  kill9 "$victim"
  restart "$victim"
  kills=$((kills + 1)) last_kill=$SECONDS
  KILLS[${victim%%-*}]=$((${KILLS[${victim%%-*}]} + 1))
  printf 'kill %2d at %4d s: %-11s pid %-7s %s, learner at update %s\n' \
    "$kills" "$(at)" "$victim" "$pid" "$when" "$updates"
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
no_sanitizer_reports "$OUT/logs"
echo "PASS in $(at) s (logs: $OUT/logs)"
