#!/usr/bin/env bash
# End to end (real processes on loopback, a real S3 endpoint): the run's
# results reach the artifact store and a learner survives losing its disk.
#  1. moto_server on a free loopback port (as common/store/s3_integration_test
#     starts it), a bucket made with the aws client;
#  2. deploy/local with output.store = s3://...: learner (its own output.dir,
#     as a pod's disk), evaluator, 1 stage x 1 replica, on the test model;
#  3. once a checkpoint is in the store: kill -9 the learner and delete its
#     whole output.dir; start it again: it restores the run's newest
#     checkpoint from the store (same run id, same update and policy
#     version), the actor re-subscribes, and the run completes;
#  4. no plan recorded twice (plans.jsonl episode ids, the store's best plans);
#  5. `windquant plans pull` of the final plan (plan, report, quantized and
#     fake-quant checkpoints); `windquant eval --plan` of the pulled plan with
#     the run's own config is accepted, and `windquant eval` of the pulled
#     model gives the perplexity in the pulled report.json and `eval
#     --quantized` of the pulled packed checkpoint eval --plan's (1e-6 relative).
#   store_e2e_test.sh BUILD_DIR
set -euo pipefail
BUILD="$1"
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
OUT=$(mktemp -d /tmp/wq-store-e2e.XXXXXX)
export WQ_RUN_LIB=1 WQ_TEST_UPDATES=8
source "$SRC/deploy/local/run.sh"
source "$SRC/tests/distributed_test_config.sh"
fail() { echo "FAIL: $*"; echo "logs: $OUT/logs"; exit 1; }
step() { echo "--- $* (at $((SECONDS - T0)) s)"; }

step "1. moto_server"
MOTO_PID=""
cleanup() { stop_all; [[ -z "$MOTO_PID" ]] || { kill "$MOTO_PID" 2>/dev/null; wait "$MOTO_PID" 2>/dev/null; } || true; }
trap 'cleanup; echo "logs: $OUT/logs"' EXIT
start_moto wq-e2e
STORE=s3://wq-e2e/windquant

step "2. deploy/local with output.store=$STORE"
RUN_SETS=("${TEST_SETS[@]}" --set service.evaluation_timeout_ms=20000 --set model.threads=1
          --set "curriculum.min_updates=$WQ_TEST_UPDATES")
parse_args --config "$WQ_TEST_CONFIG" --bin "$BUILD" --stages 1 --replicas 1 \
  --out "$OUT" --timeout 300 "${RUN_SETS[@]}" --set "output.store=$STORE"
plan_topology
LEARNER_DIR="$OUT/learner"
LEARNER_SETS=(--set "output.dir=$LEARNER_DIR")
start_all
store_keys() { aws --endpoint-url "$AWS_ENDPOINT_URL" s3 ls --recursive "$STORE/" 2>/dev/null || true; }
# A checkpoint of update >= 2 is in the store (manifest written last).
eventually '[[ -n "$(store_keys | grep -E "checkpoints/u0*([2-9]|[1-9][0-9]+)-[0-9]+/manifest.json")" ]]' 300 ||
  fail "no checkpoint of update >= 2 reached the store"
RUN_ID=$(cat "$LEARNER_DIR/run_id")
echo "run $RUN_ID"

step "3. kill -9 the learner, delete its output.dir, start it again"
kill -STOP "${PIDS[learner]}"
newest=$(store_keys | sed -n 's|.*/checkpoints/\(u[0-9]*-[0-9]*\)/manifest.json$|\1|p' | sort | tail -1)
stored_update=$((10#$(echo "$newest" | sed 's/^u\([0-9]*\)-.*/\1/')))
[[ "$(sed -n 's/^done=//p' "$LEARNER_DIR/status.txt")" == false ]] ||
  fail "the run finished before the learner was killed (raise WQ_TEST_UPDATES)"
resubscribed=$(grep -c "re-subscribed at policy version" "$OUT/logs/actor-s0-r0.log" || true)
killed_at=$(sed -n 's/^updates=//p' "$LEARNER_DIR/status.txt")
kill9 learner
rm -rf "$LEARNER_DIR"
echo "killed at update $killed_at; newest checkpoint in the store: $newest"
start_learner
wait_for_log "$OUT/logs/learner.log" "store: restored checkpoint" || fail "learner did not restore from the store"
grep -q "store: restored checkpoint $newest of run $RUN_ID" "$OUT/logs/learner.log" ||
  fail "restored another checkpoint than $newest of $RUN_ID: $(grep 'restored checkpoint' "$OUT/logs/learner.log")"
wait_for_log "$OUT/logs/learner.log" "resumed from checkpoint at update" || fail "learner did not resume"
resumed=$(sed -n 's/.*resumed from checkpoint at update \([0-9]*\),.*/\1/p' "$OUT/logs/learner.log" | tail -1)
[[ "$resumed" == "$stored_update" ]] || fail "resumed at update $resumed, the store's checkpoint is $stored_update"
[[ "$(cat "$LEARNER_DIR/run_id")" == "$RUN_ID" ]] || fail "the restarted learner took another run id"
eventually "(( \$(grep -c 're-subscribed at policy version' '$OUT/logs/actor-s0-r0.log') > $resubscribed ))" ||
  fail "the actor did not re-subscribe to the restarted learner"
wait_for done '[[ $v == true ]]' || fail "the run did not complete after the restart"
# The final phase: both searches at RL's count of evaluations, then each row's held-out
# pass (65,536 tokens on the test model), then the export: minutes on a loaded machine.
eventually '"$WQ" plans list --store "$STORE" 2>/dev/null | grep "^  $RUN_ID/final " >/dev/null' 600 ||
  fail "the final plan did not reach the store"
status
stop_all
"$WQ" plans list --store "$STORE" | tee "$OUT/plans-list.txt"

step "4. no plan recorded twice"
python3 - "$LEARNER_DIR/plans.jsonl" <<'PY' || fail "a plan was recorded twice or broke its budget"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ids = [r["episode_id"] for r in rows]
assert len(ids) == len(set(ids)), "duplicate episode"
assert all(r["effective_bits"] <= 2.0 + 1e-9 for r in rows)
print(f"{len(rows)} plans evaluated (restored from the store and after)")
PY
grep -q "^run $RUN_ID  done " "$OUT/plans-list.txt" || fail "run $RUN_ID not listed as done"
bests=$(grep -c "^  $RUN_ID/best-" "$OUT/plans-list.txt" || true)
((bests >= 1)) || fail "no best plan in the store"
mkdir -p "$OUT/bests"
for p in $(sed -n "s|^  $RUN_ID/\(best-[0-9a-f]*\) .*|\1|p" "$OUT/plans-list.txt"); do
  "$WQ" plans pull --store "$STORE" --plan "$RUN_ID/$p" --out "$OUT/bests/$p" >/dev/null ||
    fail "cannot pull $p"
done
# Best plans are named after their content: distinct names, distinct plans.
[[ $(sha256sum "$OUT"/bests/*/plan.bin | awk '{print $1}' | sort | uniq -d | wc -l) == 0 ]] ||
  fail "a best plan is in the store twice"

step "5. pull the result, eval the pulled plan and model"
"$WQ" plans pull --store "$STORE" --plan "$RUN_ID/final" --out "$OUT/pulled" || fail "plans pull"
for f in plan.json plan.bin report.json report.html quantized/quantized.safetensors \
         fake_quant/model.safetensors fake_quant/config.json; do
  [[ -f "$OUT/pulled/$f" ]] || fail "pulled result lacks $f"
done
CONFIG_SETS=()
for ((i = 0; i < ${#RUN_SETS[@]}; i += 2)); do CONFIG_SETS+=(--set "${RUN_SETS[i + 1]}"); done
"$WQ" eval --config "$WQ_TEST_CONFIG" "${CONFIG_SETS[@]}" --set "quant.cache_dir=$OUT/cache" \
  --plan "$OUT/pulled/plan.json" --max-tokens 512 --batch 8 --threads 1 --json >"$OUT/eval-plan.json" 2>"$OUT/logs/eval-plan.log" ||
  fail "eval --plan refused the pulled plan: $(tail -1 "$OUT/logs/eval-plan.log")"
# report.json's exported perplexity is the evaluator's measurement of the plan (on the
# selection slice, as the actors apply it); the pulled packed checkpoint decodes to
# those weights, so `eval --quantized` on the same slice gives it.
read -r text context batch range expected < <(python3 - "$OUT/pulled/report.json" <<'PY'
import json, sys
x = json.load(open(sys.argv[1]))["exported"]
print(x["text"], x["context"], x["batch"], "%d:%d" % tuple(x["token_range"]), repr(x["perplexity"]))
PY
)
"$WQ" eval --quantized "$OUT/pulled/quantized" --text "$text" --context "$context" --batch "$batch" \
  --tokens "$range" --threads 1 --json >"$OUT/eval-selection.json" 2>"$OUT/logs/eval-selection.log" ||
  fail "eval of the pulled model: $(tail -1 "$OUT/logs/eval-selection.log")"
python3 - "$OUT/eval-selection.json" "$expected" <<'PY' || fail "the pulled model's perplexity is not the report's"
import json, sys
got = json.load(open(sys.argv[1]))["perplexity"]
want = float(sys.argv[2])
print(f"pulled packed checkpoint on the selection slice: perplexity {got:.9g}, report.json {want:.9g}")
assert abs(got - want) <= 1e-6 * want, (got, want)
PY
"$WQ" eval --model "$OUT/pulled/fake_quant" --text "$text" --context "$context" --batch "$batch" \
  --tokens "$range" --threads 1 --json >"$OUT/eval-model.json" 2>"$OUT/logs/eval-model.log" ||
  fail "eval of the pulled fake-quant model: $(tail -1 "$OUT/logs/eval-model.log")"
# The packed checkpoint, decoded, is the model `eval --plan` measured (same settings).
# eval --plan measures the config's held-out range (evaluation.heldout.tokens).
read -r ptext prange pcontext pexpected < <(python3 - "$OUT/eval-plan.json" "$WQ_TEST_CONFIG" <<'PY'
import json, sys, yaml
x = json.load(open(sys.argv[1]))
b, e = yaml.safe_load(open(sys.argv[2]))["evaluation"]["heldout"]["tokens"]
print(x["text"], "%d:%d" % (b, e), x["context"], repr(x["perplexity"]))
PY
)
"$WQ" eval --quantized "$OUT/pulled/quantized" --text "$ptext" --tokens "$prange" \
  --context "$pcontext" --batch 8 --max-tokens 512 --threads 1 --json >"$OUT/eval-quantized.json" 2>"$OUT/logs/eval-quantized.log" ||
  fail "eval --quantized of the pulled checkpoint: $(tail -1 "$OUT/logs/eval-quantized.log")"
python3 - "$OUT/eval-quantized.json" "$pexpected" <<'PY' || fail "the packed checkpoint's perplexity is not eval --plan's"
import json, sys
got = json.load(open(sys.argv[1]))["perplexity"]
want = float(sys.argv[2])
print(f"pulled packed checkpoint: perplexity {got:.9g}, eval --plan {want:.9g}")
assert abs(got - want) <= 1e-6 * want, (got, want)
PY
cleanup
trap - EXIT
no_sanitizer_reports "$OUT/logs"
echo "PASS in $((SECONDS - T0)) s (logs: $OUT/logs)"
