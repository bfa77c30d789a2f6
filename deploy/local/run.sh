#!/usr/bin/env bash
# Starts the distributed topology of DESIGN.md section 5 as local processes on
# 127.0.0.1 from one run config: one learner, one evaluator and
# STAGES x REPLICAS actors; waits for the run to finish (the learner's
# curriculum is done and its final result written), prints the final status
# and the best plan, and stops every process with SIGTERM.
#
#   deploy/local/run.sh --config configs/stories260k.yaml --bin build/ \
#       [--stages 2] [--replicas 2] [--out /tmp/wq-run] [--timeout 600] [--set k=v]...
#
# Ports are picked free by the kernel (never fixed). Every process serves
# Prometheus metrics on http://127.0.0.1:PORT/metrics; the ports are printed
# at start and kept across restarts. Logs: OUT/logs/*.log.
# Tests source this file (WQ_RUN_LIB=1) to use start_*/stop_*/kill_* below.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

# --- state (set by parse_args / start_*) ---
CONFIG="" BIN="" STAGES=2 REPLICAS=1 TIMEOUT=600
# A test that sources this file may have made its OUT already (passed as --out).
if [[ "${WQ_RUN_LIB:-0}" != 1 ]]; then OUT=""; else OUT="${OUT:-}"; fi
SETS=()
# Extra --set flags of the learner alone (e.g. an output.dir of its own, as a
# pod has its own disk); LEARNER_DIR is where its status.txt is.
LEARNER_SETS=("${LEARNER_SETS[@]+"${LEARNER_SETS[@]}"}")
declare -A PIDS=()
declare -A METRICS_PORTS=()  # process name -> its /metrics port
LEARNER_ADDR="" EVALUATOR_ADDR="" ACTOR_ADDRS=()

# A free port of loopback for a server of this run. Not bind(0)'s: that port
# comes from the ephemeral range, where any outgoing connection (or a later
# bind(0)) may take it before our server binds it or while a restarted process
# is down. So a random port below the ephemeral range, free now and not given
# to this run before ($OUT/.ports lists those).
free_port() {
  python3 - "${OUT:?free_port needs OUT}/.ports" <<'PY'
import random, socket, sys
path = sys.argv[1]
try:
    taken = set(open(path).read().split())
except FileNotFoundError:
    taken = set()
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
candidates = [random.randrange(10000, low) for _ in range(1000)] if low > 12000 else [0] * 1000
for port in candidates:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        port = s.getsockname()[1]
    if str(port) not in taken:
        open(path, "a").write(f"{port}\n")
        print(port)
        sys.exit(0)
sys.exit("free_port: no free port of loopback found")
PY
}

parse_args() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --config) CONFIG="$2"; shift 2 ;;
      --bin) BIN="$2"; shift 2 ;;
      --stages) STAGES="$2"; shift 2 ;;
      --replicas) REPLICAS="$2"; shift 2 ;;
      --out) OUT="$2"; shift 2 ;;
      --timeout) TIMEOUT="$2"; shift 2 ;;
      --set) SETS+=("--set" "$2"); shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
  done
  [[ -n "$CONFIG" ]] || { echo "run.sh: --config is required" >&2; exit 2; }
  [[ -n "$BIN" ]] || { echo "run.sh: --bin (build directory) is required" >&2; exit 2; }
  for b in services/windquant-learner services/windquant-evaluator services/windquant-actor; do
    [[ -x "$BIN/$b" ]] || { echo "run.sh: $BIN/$b not built" >&2; exit 2; }
  done
  OUT="${OUT:-$(mktemp -d /tmp/wq-run.XXXXXX)}"
  mkdir -p "$OUT/logs"
}

# Addresses and the --set flags every process gets.
plan_topology() {
  LEARNER_ADDR="127.0.0.1:$(free_port)"
  EVALUATOR_ADDR="127.0.0.1:$(free_port)"
  ACTOR_ADDRS=()
  for ((i = 0; i < STAGES * REPLICAS; i++)); do ACTOR_ADDRS+=("127.0.0.1:$(free_port)"); done
  METRICS_PORTS=([learner]=$(free_port) [evaluator]=$(free_port))
  local s r
  for ((s = 0; s < STAGES; s++)); do
    for ((r = 0; r < REPLICAS; r++)); do METRICS_PORTS[actor-s$s-r$r]=$(free_port); done
  done
  local list
  list=$(IFS=,; echo "${ACTOR_ADDRS[*]}")
  COMMON=(--config "$CONFIG" "${SETS[@]}"
          --set "service.stages=$STAGES" --set "service.replicas=$REPLICAS"
          --set "service.learner_address=$LEARNER_ADDR"
          --set "service.evaluator_address=$EVALUATOR_ADDR"
          --set "service.actor_addresses=[$list]"
          --set "service.metrics_address=127.0.0.1:0"
          --set "output.dir=$OUT/run" --set "quant.cache_dir=$OUT/cache")
}

start_learner() {
  "$BIN/services/windquant-learner" "${COMMON[@]}" "${LEARNER_SETS[@]+"${LEARNER_SETS[@]}"}" \
    --metrics-port "${METRICS_PORTS[learner]}" \
    >>"$OUT/logs/learner.out" 2>>"$OUT/logs/learner.log" &
  PIDS[learner]=$!
}
start_evaluator() {
  "$BIN/services/windquant-evaluator" "${COMMON[@]}" --metrics-port "${METRICS_PORTS[evaluator]}" \
    >>"$OUT/logs/evaluator.out" 2>>"$OUT/logs/evaluator.log" &
  PIDS[evaluator]=$!
}
start_actor() {  # stage replica
  local name="actor-s$1-r$2"
  "$BIN/services/windquant-actor" "${COMMON[@]}" --set "service.stage=$1" --set "service.replica=$2" \
    --metrics-port "${METRICS_PORTS[$name]}" >>"$OUT/logs/$name.out" 2>>"$OUT/logs/$name.log" &
  PIDS[$name]=$!
}
metrics_url() { echo "http://127.0.0.1:${METRICS_PORTS[$1]}/metrics"; }  # name
print_metrics_urls() {
  local name
  for name in $(printf '%s\n' "${!METRICS_PORTS[@]}" | sort); do
    echo "run.sh: metrics of $name: $(metrics_url "$name")"
  done
}
# The value of the first sample of `metric` (a full name, labels included if
# any) in process `name`'s /metrics, or nothing.
metric_value() {  # name metric
  curl -sf --max-time 5 "$(metrics_url "$1")" 2>/dev/null |
    awk -v m="$2" '$1 == m { print $2; exit }' || true
}
start_all() {
  start_learner
  for ((s = 0; s < STAGES; s++)); do
    for ((r = 0; r < REPLICAS; r++)); do start_actor "$s" "$r"; done
  done
  start_evaluator
}

kill9() {  # name: kill -9, as a crash would
  local pid="${PIDS[$1]:-}"
  [[ -n "$pid" ]] || return 0
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "PIDS[$1]"
}
stop_all() {  # SIGTERM every process, then wait for them
  local name
  for name in "${!PIDS[@]}"; do kill -TERM "${PIDS[$name]}" 2>/dev/null || true; done
  for name in "${!PIDS[@]}"; do wait "${PIDS[$name]}" 2>/dev/null || true; done
  PIDS=()
}

# `windquant status` when the CLI is built and the learner answers (a few
# tries: the machine may be busy), else the learner's status file (the same
# key=value lines, rewritten after every update). Never fails.
status() {
  local try
  if [[ -x "$BIN/cli/windquant" ]]; then
    for try in 1 2 3; do
      "$BIN/cli/windquant" status --learner "$LEARNER_ADDR" --timeout-ms 3000 2>/dev/null && return 0
    done
  fi
  cat "${LEARNER_DIR:-$OUT/run}/status.txt" 2>/dev/null || true
}
status_field() { status | sed -n "s/^$1=//p"; }

# Polls the learner until `field` satisfies the test ($2 is a bash arithmetic
# or string test on $v), or TIMEOUT seconds pass. Every process must stay up.
wait_for() {  # field predicate
  local deadline=$((SECONDS + TIMEOUT)) v name
  while ((SECONDS < deadline)); do
    v=$(status_field "$1" || true)
    if [[ -n "$v" ]] && eval "$2"; then return 0; fi
    for name in "${!PIDS[@]}"; do
      if ! kill -0 "${PIDS[$name]}" 2>/dev/null; then
        echo "run.sh: $name exited; see $OUT/logs/$name.log" >&2
        tail -5 "$OUT/logs/$name.log" >&2 || true
        return 1
      fi
    done
    sleep 0.5
  done
  echo "run.sh: timed out after ${TIMEOUT}s waiting for $1 ($2)" >&2
  return 1
}

wait_for_log() {  # file pattern
  local deadline=$((SECONDS + TIMEOUT))
  while ((SECONDS < deadline)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "run.sh: timed out waiting for '$2' in $1" >&2
  return 1
}

# After `done` the learner writes the run's result (output.dir/final), whose
# search rows and held-out numbers the evaluator measures: every process serves
# until report.json is there, the learner gave up on it (its log says why) or
# the store had it already, or TIMEOUT seconds pass.
wait_for_final() {
  local deadline=$((SECONDS + TIMEOUT)) final="${LEARNER_DIR:-$OUT/run}/final/report.json"
  while ((SECONDS < deadline)); do
    [[ -f "$final" ]] && return 0
    grep -qE "final artifacts not written|result is in the store already" \
      "$OUT/logs/learner.log" 2>/dev/null && return 1
    kill -0 "${PIDS[learner]}" 2>/dev/null || return 1
    sleep 0.5
  done
  echo "run.sh: timed out after ${TIMEOUT}s waiting for $final" >&2
  return 1
}

main() {
  parse_args "$@"
  plan_topology
  trap stop_all EXIT
  start_all
  echo "run.sh: learner $LEARNER_ADDR, evaluator $EVALUATOR_ADDR, $STAGES stages x $REPLICAS replicas; logs in $OUT/logs"
  print_metrics_urls
  wait_for done '[[ $v == true ]]'
  if wait_for_final; then
    echo "final result: ${LEARNER_DIR:-$OUT/run}/final"
  else
    echo "run.sh: no final result written here (see $OUT/logs/learner.log)" >&2
  fi
  status
  if [[ -f "$OUT/run/best/best.json" || -d "$OUT/run/best" ]]; then
    echo "best plan: $OUT/run/best"; ls "$OUT/run/best"
  fi
  stop_all
  trap - EXIT
}

if [[ "${WQ_RUN_LIB:-0}" != 1 ]]; then main "$@"; fi
