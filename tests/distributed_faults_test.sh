#!/usr/bin/env bash
# Integration (real processes on loopback), fault tolerance of the distributed
# run on the test model, 2 stages x 1 replica, checked one after another:
#  1. kill -9 an actor mid-run, restart it: it reloads its cached fits,
#     rejoins (gets the table, streams episodes) and the run goes on;
#  2. kill -9 the evaluator: the plans pending in its queue are evaluated
#     after it returns and reach the learner, also when it returns on an
#     empty queue directory (the learner sends them again);
#  3. kill -9 the learner while episodes it acknowledged wait for their
#     evaluation (the evaluator frozen): it restarts from its checkpoint at the
#     checkpointed policy version, holds those episodes again (its journal),
#     their plans are evaluated and recorded, and the run completes;
# and no evaluated plan is reported twice. Every process serves /metrics; the
# learner's reports its PPO updates and policy version, before and after its
# restart.
#   distributed_faults_test.sh BUILD_DIR
set -euo pipefail
BUILD="$1"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
# The test model (stories260k from ../shared, else the project's default model that
# the wq_test_model fixture trained): common/testing/test_paths.h decides.
eval "$("$BUILD/common/testing/wq-test-paths")"
MODEL="$WQ_TEST_MODEL_DIR"
[[ -f "$MODEL/config.json" ]] || { echo "FAIL: $MODEL/config.json missing (run the wq_test_model fixture: ctest -R test_model_setup)"; exit 1; }
OUT=$(mktemp -d /tmp/wq-faults.XXXXXX)
# Enough updates that the run is still going when the learner is killed, and
# no early end of the stage (min_updates = max_updates below): a best plan
# that beats the reference early ended the run before the learner's kill.
export WQ_RUN_LIB=1 WQ_TEST_UPDATES=16
source "$SRC/deploy/local/run.sh"
source "$SRC/tests/distributed_test_config.sh"
parse_args --config "$WQ_TEST_CONFIG" --bin "$BUILD" --stages 2 --replicas 1 \
  --out "$OUT" --timeout 300 "${TEST_SETS[@]}" --set service.evaluation_timeout_ms=20000 \
  --set model.threads=1 --set "curriculum.min_updates=$WQ_TEST_UPDATES" \
  --set quant.compensation=none  # a restarted actor reloads cached fits only without
# error compensation (with it, it redoes its calibration pass: StageWorker::LoadCachedFits)
plan_topology
trap 'stop_all; echo "logs: $OUT/logs"' EXIT
fail() { echo "FAIL: $*"; echo "logs: $OUT/logs"; exit 1; }
step() { echo "--- $* (at ${SECONDS} s)"; }
start_all
wait_for updates '((v >= 1))'

step "0. /metrics of every process"
# grep without -q reads to the end: with pipefail, grep -q's early exit could
# kill curl with SIGPIPE and fail the check on a match (as it did here).
for name in "${!METRICS_PORTS[@]}"; do
  curl -sf --max-time 5 "$(metrics_url "$name")" | grep '^windquant_net_sent_bytes_total [1-9]' >/dev/null ||
    fail "$name: no windquant_net_sent_bytes_total > 0 at $(metrics_url "$name")"
done
updates=$(metric_value learner windquant_learner_ppo_updates_total)
[[ -n "$updates" ]] && python3 -c "import sys; sys.exit(0 if float('$updates') >= 1 else 1)" ||
  fail "learner /metrics: windquant_learner_ppo_updates_total='$updates', expected >= 1"
[[ -n "$(metric_value evaluator windquant_evaluator_queue_depth)" ]] ||
  fail "evaluator /metrics: no windquant_evaluator_queue_depth"
[[ -n "$(metric_value actor-s0-r0 windquant_actor_episodes_total)" ]] ||
  fail "actor /metrics: no windquant_actor_episodes_total"

# The incarnations (bits 32..47 of the episode ids) of actor-s1-r0's plans
# recorded by the learner so far.
incarnations() {
  python3 - "$OUT/run/plans.jsonl" <<'PY'
import json, sys
ids = [json.loads(l)["episode_id"] for l in open(sys.argv[1]) if '"actor-s1-r0"' in l]
print(" ".join(sorted({str((i >> 32) & 0xffff) for i in ids})))
PY
}

step "1. kill -9 actor-s1-r0"
old=$(incarnations)
kill9 actor-s1-r0
start_actor 1 0
before=$(status_field updates)
wait_for updates "((v >= before + 1))"
# Rejoined: it got the table again and its episodes reach the learner.
eventually '(($(grep -c "unit table of" "$OUT/logs/actor-s1-r0.log") >= 2))' ||
  fail "restarted actor did not get the table"
eventually '[[ "$(incarnations)" != "$old" ]]' ||
  fail "no plan of the restarted actor reached the learner (incarnations: $old)"
grep -q "reloaded cached fits" "$OUT/logs/actor-s1-r0.log" || fail "restarted actor did not reload its fits"

# Kills the evaluator while plans are pending in its queue (frozen first, so that
# the list is exact) and starts it again, on its queue directory or, with
# "lose", on an empty one (a lost volume). Either way every pending plan is then
# evaluated and its report reaches the learner (recorded in plans.jsonl): kept,
# the restarted evaluator reloads it; lost, the learner's sender sees the new
# evaluator_id and sends the plan again.
kill_evaluator_with_plans_pending() {  # keep|lose
  local queue="$OUT/run/evaluator-queue" pending="" deadline=$((SECONDS + 120))
  queued() { ls "$queue" 2>/dev/null | sed -n 's/^[a-z]*-\([0-9]*\)\.plan\.pb$/\1/p' || true; }
  while [[ -z "$pending" ]]; do
    ((SECONDS < deadline)) || fail "no plan ever pending in the evaluator's queue"
    if [[ -n "$(queued)" ]]; then
      kill -STOP "${PIDS[evaluator]}"
      pending=$(queued)
      [[ -n "$pending" ]] || kill -CONT "${PIDS[evaluator]}"
    else
      sleep 0.1
    fi
  done
  kill9 evaluator
  echo "pending at kill: $(echo $pending | wc -w) plans ($1 the queue)"
  [[ "$1" == keep ]] || rm -rf "$queue"
  start_evaluator
  local before
  before=$(status_field updates)
  for id in $pending; do
    eventually "grep -q '\"episode_id\":$id,' '$OUT/run/plans.jsonl'" ||
      fail "pending plan $id never evaluated and reported ($1 the queue)"
  done
  echo "pending plans after the restart: all recorded by the learner"
  if [[ "$1" == lose ]]; then
    grep -q "the evaluator's queue is new" "$OUT/logs/learner.log" ||
      fail "the learner did not notice the evaluator's new queue"
  fi
  wait_for updates "((v >= before + 1))"
}

step "2. kill -9 evaluator, its queue kept"
kill_evaluator_with_plans_pending keep
step "2b. kill -9 evaluator, its queue lost"
kill_evaluator_with_plans_pending lose

step "3. kill -9 learner"
# The episodes the actors logged as acknowledged by the learner and that
# plans.jsonl does not have (yet).
unrecorded() {
  python3 - "$OUT" <<'PY'
import glob, json, re, sys
out = sys.argv[1]
ids = {json.loads(l)["episode_id"] for l in open(out + "/run/plans.jsonl")}
acked = {int(m.group(1)) for p in glob.glob(out + "/logs/actor-*.log") for l in open(p)
         for m in [re.search(r": episode (\d+) accepted by the learner", l)] if m}
print(" ".join(str(i) for i in sorted(acked - ids)))
PY
}
# The evaluator frozen until the learner holds acknowledged episodes, then
# the learner (so that no update slips in between reading its version and the
# kill: its status file is rewritten right after each checkpoint).
declare -A resubscribed=()
for name in actor-s0-r0 actor-s1-r0; do
  resubscribed[$name]=$(grep -c "re-subscribed at policy version" "$OUT/logs/$name.log" || true)
done
kill -STOP "${PIDS[evaluator]}"
eventually '[[ -n "$(unrecorded)" ]]' || fail "no acknowledged episode waiting for its evaluation"
kill -STOP "${PIDS[learner]}"
acknowledged=$(unrecorded)
version=$(sed -n 's/^policy_version=//p' "$OUT/run/status.txt")
[[ "$(sed -n 's/^done=//p' "$OUT/run/status.txt")" == false ]] ||
  fail "the run finished before the learner was killed (raise WQ_TEST_UPDATES)"
kill9 learner
start_learner
kill -CONT "${PIDS[evaluator]}"
echo "acknowledged, not recorded at the kill: $(echo $acknowledged | wc -w) episodes"
wait_for_log "$OUT/logs/learner.log" "resumed from checkpoint at update" || fail "learner did not resume"
wait_for_log "$OUT/logs/learner.log" "episodes held again" ||
  fail "the restarted learner did not hold its acknowledged episodes again"
for id in $acknowledged; do
  eventually "grep -q '\"episode_id\":$id,' '$OUT/run/plans.jsonl'" ||
    fail "acknowledged episode $id lost with the learner"
done
resumed=$(sed -n 's/.*resumed from checkpoint at update [0-9]*, policy version \([0-9]*\).*/\1/p' \
  "$OUT/logs/learner.log" | tail -1)
[[ "$resumed" == "$version" ]] || fail "resumed at version $resumed, checkpointed $version"
eventually '(($(grep -c "windquant-learner: serving on" "$OUT/logs/learner.log") >= 2))' ||
  fail "restarted learner not serving"
for name in actor-s0-r0 actor-s1-r0; do
  eventually "(( \$(grep -c 're-subscribed at policy version' '$OUT/logs/$name.log') > ${resubscribed[$name]} ))" ||
    fail "$name did not re-subscribe to the restarted learner"
done
served=$(metric_value learner windquant_learner_policy_version)
[[ "$served" =~ ^[0-9]+$ ]] && ((served >= version)) ||
  fail "restarted learner's /metrics: windquant_learner_policy_version='$served', expected >= $version"
wait_for done '[[ $v == true ]]'
status
stop_all
trap - EXIT
python3 - "$OUT/run/plans.jsonl" <<'PY' || fail "a plan was reported twice or broke its budget"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ids = [r["episode_id"] for r in rows]
assert len(ids) == len(set(ids)), "duplicate episode"
assert all(r["effective_bits"] <= 2.0 + 1e-9 for r in rows)
print(f"{len(rows)} plans evaluated")
PY
no_sanitizer_reports "$OUT/logs"
echo "PASS (logs: $OUT/logs)"
