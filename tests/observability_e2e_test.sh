#!/usr/bin/env bash
# Integration (real processes on loopback): a real Prometheus server scrapes the
# /metrics of a real distributed run (learner, evaluator, 2 stages x 1 replica of
# actors on the test model) and answers queries for our metrics through its HTTP
# API; the Grafana dashboard is checked against the live /metrics of those same
# processes (deploy/grafana/check_dashboard.py --urls).
#   observability_e2e_test.sh BUILD_DIR
set -euo pipefail
BUILD="$1"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
# The test model (stories260k from ../shared, else the project's default model that
# the wq_test_model fixture trained): common/testing/test_paths.h decides.
eval "$("$BUILD/common/testing/wq-test-paths")"
MODEL="$WQ_TEST_MODEL_DIR"
[[ -f "$MODEL/config.json" ]] || { echo "FAIL: $MODEL/config.json missing (run the wq_test_model fixture: ctest -R test_model_setup)"; exit 1; }
for tool in prometheus promtool curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (Debian packages prometheus, curl: scripts/install-deps.sh)"; exit 1; }
done
OUT=$(mktemp -d /tmp/wq-obs.XXXXXX)
export WQ_RUN_LIB=1 WQ_TEST_UPDATES=3
# shellcheck source=../deploy/local/run.sh
source "$SRC/deploy/local/run.sh"
source "$SRC/tests/distributed_test_config.sh"
parse_args --config "$WQ_TEST_CONFIG" --bin "$BUILD" --stages 2 --replicas 1 \
  --out "$OUT" --timeout 400 "${TEST_SETS[@]}"
plan_topology
PROM_PID=""
cleanup() {
  [[ -z "$PROM_PID" ]] || { kill -TERM "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null || true; }
  stop_all
  echo "logs: $OUT/logs"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
start_all

# One scrape job per process kind, every second.
target() { echo "'127.0.0.1:${METRICS_PORTS[$1]}'"; }
cat >"$OUT/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: windquant-learner
    static_configs: [{targets: [$(target learner)]}]
  - job_name: windquant-evaluator
    static_configs: [{targets: [$(target evaluator)]}]
  - job_name: windquant-actor
    static_configs: [{targets: [$(target actor-s0-r0), $(target actor-s1-r0)]}]
EOF
promtool check config "$OUT/prometheus.yml" >/dev/null || fail "promtool rejects the scrape config"
PROM="127.0.0.1:$(free_port)"
prometheus --version 2>&1 | sed -n 1p
prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/prometheus-data" \
  --web.listen-address="$PROM" >"$OUT/logs/prometheus.log" 2>&1 &
PROM_PID=$!

# query EXPR -> prints the values of the result vector, one per line, "job value".
query() {
  curl -sf --max-time 5 --data-urlencode "query=$1" "http://$PROM/api/v1/query" 2>/dev/null |
    python3 -c 'import json,sys
r = json.load(sys.stdin)
assert r["status"] == "success", r
for s in r["data"]["result"]:
    print(s["metric"].get("job", "-"), s["value"][1])' 2>/dev/null || true
}
# wait_query EXPR LINES: until the query answers with at least LINES series.
wait_query() {
  local deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    [[ $(query "$1" | grep -c .) -ge $2 ]] && return 0
    sleep 1
  done
  fail "Prometheus never answered '$1' with $2 series (last: $(query "$1" | tr '\n' ' '))"
}

wait_for done '[[ $v == true ]]'
updates=$(status_field updates)
echo "run done: $updates PPO updates"

# Every process is a healthy scrape target of the real server...
wait_query 'up == 1' 4
# ...and the server holds our values: the learner's update counter as the learner
# says it, the evaluator's queue and the actors' episodes.
wait_query "windquant_learner_ppo_updates_total >= $updates" 1
wait_query 'windquant_evaluator_queue_depth' 1
wait_query 'sum(windquant_actor_episodes_total) > 0' 1
query 'windquant_learner_ppo_updates_total'
query 'windquant_learner_best_plan_bitwidth'

# The dashboard against the live endpoints of these processes.
urls=()
for name in learner evaluator actor-s0-r0 actor-s1-r0; do urls+=("$(metrics_url "$name")"); done
python3 "$SRC/deploy/grafana/check_dashboard.py" --urls "${urls[@]}" || fail "dashboard check on the live run"
no_sanitizer_reports "$OUT/logs"
echo "PASS"
