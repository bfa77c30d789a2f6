#!/usr/bin/env bash
# Integration (real processes on loopback), fault tolerance of the distributed
# run on stories260k, 2 stages x 1 replica, checked one after another:
#  1. kill -9 an actor mid-run, restart it: it reloads its cached fits,
#     rejoins (gets the table, streams episodes) and the run goes on;
#  2. kill -9 the evaluator: the plans pending in its queue are evaluated
#     after it returns and reach the learner;
#  3. kill -9 the learner: it restarts from its checkpoint at the
#     checkpointed policy version and the run completes;
# and no evaluated plan is reported twice. Every process serves /metrics; the
# learner's reports its PPO updates and policy version, before and after its
# restart.
#   distributed_faults_test.sh BUILD_DIR
set -euo pipefail
BUILD="$1"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
MODEL="$SRC/../shared/models/stories260k"
if [[ ! -f "$MODEL/config.json" ]]; then echo "SKIP: $MODEL not found"; exit 77; fi
OUT=$(mktemp -d /tmp/wq-faults.XXXXXX)
export WQ_RUN_LIB=1 WQ_TEST_UPDATES=8
source "$SRC/deploy/local/run.sh"
source "$SRC/tests/distributed_test_config.sh"
parse_args --config "$SRC/configs/stories260k.yaml" --bin "$BUILD" --stages 2 --replicas 1 \
  --out "$OUT" --timeout 300 "${TEST_SETS[@]}" --set service.evaluation_timeout_ms=20000
plan_topology
trap 'stop_all; echo "logs: $OUT/logs"' EXIT
fail() { echo "FAIL: $*"; echo "logs: $OUT/logs"; exit 1; }
start_all
wait_for updates '((v >= 1))'

echo "--- 0. /metrics of every process"
for name in "${!METRICS_PORTS[@]}"; do
  curl -sf --max-time 5 "$(metrics_url "$name")" | grep -q '^windquant_net_sent_bytes_total [1-9]' ||
    fail "$name: no windquant_net_sent_bytes_total > 0 at $(metrics_url "$name")"
done
updates=$(metric_value learner windquant_learner_ppo_updates_total)
[[ -n "$updates" ]] && python3 -c "import sys; sys.exit(0 if float('$updates') >= 1 else 1)" ||
  fail "learner /metrics: windquant_learner_ppo_updates_total='$updates', expected >= 1"
[[ -n "$(metric_value evaluator windquant_evaluator_queue_depth)" ]] ||
  fail "evaluator /metrics: no windquant_evaluator_queue_depth"
[[ -n "$(metric_value actor-s0-r0 windquant_actor_episodes_total)" ]] ||
  fail "actor /metrics: no windquant_actor_episodes_total"

echo "--- 1. kill -9 actor-s1-r0"
kill9 actor-s1-r0
start_actor 1 0
before=$(status_field updates)
wait_for updates "((v >= before + 1))"
grep -q "reloaded cached fits" "$OUT/logs/actor-s1-r0.log" || fail "restarted actor did not reload its fits"
[[ $(grep -c "unit table of" "$OUT/logs/actor-s1-r0.log") -ge 2 ]] || fail "restarted actor did not rejoin"

echo "--- 2. kill -9 evaluator"
kill9 evaluator
pending=$(ls "$OUT/run/evaluator-queue" 2>/dev/null | sed -n 's/\.plan\.pb$//p' || true)
echo "pending at kill: $(echo $pending | wc -w) plans"
start_evaluator
before=$(status_field updates)
wait_for updates "((v >= before + 1))"
for id in $pending; do
  # Evaluated after the restart: in the learner's record, or its queue file is gone
  # because the learner had expired it (then the report was refused, not lost).
  if ! grep -q "\"episode_id\":$id," "$OUT/run/plans.jsonl"; then
    [[ ! -e "$OUT/run/evaluator-queue/$id.plan.pb" ]] || fail "pending plan $id never evaluated"
  fi
done

echo "--- 3. kill -9 learner"
# Frozen first, so that no update slips in between reading its version and the
# kill (its status file is rewritten right after each checkpoint).
kill -STOP "${PIDS[learner]}"
version=$(sed -n 's/^policy_version=//p' "$OUT/run/status.txt")
kill9 learner
start_learner
wait_for_log "$OUT/logs/learner.log" "resumed from checkpoint at update" || fail "learner did not resume"
resumed=$(sed -n 's/.*resumed from checkpoint at update [0-9]*, policy version \([0-9]*\).*/\1/p' \
  "$OUT/logs/learner.log" | tail -1)
[[ "$resumed" == "$version" ]] || fail "resumed at version $resumed, checkpointed $version"
deadline=$((SECONDS + 60))
until (($(grep -c "windquant-learner: serving on" "$OUT/logs/learner.log") >= 2)); do
  ((SECONDS < deadline)) || fail "restarted learner not serving"
  sleep 0.5
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
echo "PASS (logs: $OUT/logs)"
