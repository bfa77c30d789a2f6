#!/usr/bin/env bash
# Integration (real processes on loopback): the distributed run on the test model
# with STAGES x REPLICAS actors completes, every plan meets its budget, the
# best plan is written, each replica took part, every actor computed in the run's
# model.compute_dtype (a stage refuses hidden states of another dtype, so the
# evaluator did too), and the evaluator's λ is the learner's at the end (the learner
# owns λ; /metrics of both).
#   distributed_e2e_test.sh BUILD_DIR [STAGES] [REPLICAS] [--set KEY=VALUE ...]
set -euo pipefail
BUILD="$1"; NSTAGES="${2:-2}"; NREPLICAS="${3:-2}"
shift $(( $# < 3 ? $# : 3 ))
EXTRA_SETS=("$@")
DTYPE=float32
for s in "${EXTRA_SETS[@]}"; do [[ "$s" == model.compute_dtype=* ]] && DTYPE="${s#*=}"; done
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
# The test model (stories260k from ../shared, else the project's default model that
# the wq_test_model fixture trained): common/testing/test_paths.h decides.
eval "$("$BUILD/common/testing/wq-test-paths")"
MODEL="$WQ_TEST_MODEL_DIR"
[[ -f "$MODEL/config.json" ]] || { echo "FAIL: $MODEL/config.json missing (run the wq_test_model fixture: ctest -R test_model_setup)"; exit 1; }
OUT=$(mktemp -d /tmp/wq-e2e.XXXXXX)
export WQ_RUN_LIB=1
# shellcheck source=../deploy/local/run.sh
source "$SRC/deploy/local/run.sh"
source "$SRC/tests/distributed_test_config.sh"
parse_args --config "$WQ_TEST_CONFIG" --bin "$BUILD" --stages "$NSTAGES" \
  --replicas "$NREPLICAS" --out "$OUT" --timeout 400 "${TEST_SETS[@]}" \
  --set "curriculum.min_updates=2" "${EXTRA_SETS[@]}"  # two updates whatever the PPL ratio
plan_topology
trap 'stop_all; echo "logs: $OUT/logs"' EXIT
start_all
wait_for done '[[ $v == true ]]'
status | tee "$OUT/status.txt"
updates=$(status_field updates)
# One λ: the evaluator continues from the learner's after every report.
lambda_learner=$(metric_value learner windquant_learner_lambda)
lambda_evaluator=$(metric_value evaluator windquant_evaluator_lambda)
stop_all
trap - EXIT

fail() { echo "FAIL: $*"; echo "logs: $OUT/logs"; exit 1; }
[[ "$updates" -ge 2 ]] || fail "expected >= 2 PPO updates, got $updates"
echo "lambda: learner $lambda_learner, evaluator $lambda_evaluator"
[[ -n "$lambda_learner" && "$lambda_learner" == "$lambda_evaluator" ]] \
  || fail "the evaluator's lambda ($lambda_evaluator) is not the learner's ($lambda_learner)"
[[ -f "$OUT/run/unit_table.pb" ]] || fail "no merged unit table"
[[ -s "$OUT/run/plans.jsonl" ]] || fail "no evaluated plans"
ls "$OUT/run/best" | grep . >/dev/null || fail "no best plan files"
# Every evaluated plan meets the final target (hard budget by masking).
python3 - "$OUT/run/plans.jsonl" <<'PY' || fail "a plan exceeds its budget or has a bad perplexity"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows, "no plans"
for r in rows:
    assert r["effective_bits"] <= 2.0 + 1e-9, r
    assert r["perplexity"] > 1.0, r
ids = [r["episode_id"] for r in rows]
assert len(ids) == len(set(ids)), "an episode was reported twice"
print(f"{len(rows)} plans evaluated, best ppl {min(r['perplexity'] for r in rows):.3f}")
PY
# Each replica of each stage took part (its log shows the unit table).
for ((s = 0; s < STAGES; s++)); do for ((r = 0; r < REPLICAS; r++)); do
  grep -q "unit table of" "$OUT/logs/actor-s$s-r$r.log" || fail "actor s$s r$r never got the table"
  grep -q "computing in $DTYPE" "$OUT/logs/actor-s$s-r$r.log" || fail "actor s$s r$r not in $DTYPE"
done; done
no_sanitizer_reports "$OUT/logs"
echo "PASS (logs: $OUT/logs)"
