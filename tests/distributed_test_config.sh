# Overrides that keep the distributed tests short on the test model (sourced).
TEST_SETS=(
  --set "calibration.samples=8" --set "calibration.seq_len=128"
  --set "evaluation.context=128" --set "evaluation.batch=8"
  --set "evaluation.calib_slice_tokens=1024"
  --set "curriculum.target_bits=[2.0]" --set "curriculum.min_updates=1"
  --set "curriculum.max_updates=${WQ_TEST_UPDATES:-3}"
  --set "training.episodes_per_update=4" --set "training.checkpoint_every_updates=1"
  --set "training.warm_start=none"
  --set "ppo.hidden=[32,32]" --set "ppo.minibatch_size=64" --set "ppo.epochs=2"
  --set "service.evaluation_timeout_ms=60000" --set "service.rpc_deadline_ms=20000"
)

# Fails (the caller's `fail`) when a process of the run printed a sanitizer report into
# its log under folder $1: under ASan/UBSan or TSan (scripts/test.sh --sanitize) a report
# in a service does not stop it, so a test that passed would otherwise hide it.
no_sanitizer_reports() {
  local found
  found=$(grep -rlE 'WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer|: runtime error: ' \
    "$1" 2>/dev/null || true)
  [[ -z "$found" ]] || fail "sanitizer reports in: $(echo $found)"
}

# Polls `test` (a bash command line, $1) until it succeeds, for at most $2 seconds (120).
eventually() {
  local deadline=$((SECONDS + ${2:-120}))
  until eval "$1"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# Starts moto_server (an S3 endpoint) on a free port of loopback, logging to
# $OUT/logs/moto.log, points the AWS clients at it (AWS_ENDPOINT_URL, test credentials)
# and makes bucket $1. Sets MOTO_PID; the caller stops it. Needs fail and free_port
# (deploy/local/run.sh).
start_moto() {
  local port
  port=$(free_port)
  mkdir -p "$OUT/logs"
  moto_server -H 127.0.0.1 -p "$port" >"$OUT/logs/moto.log" 2>&1 &
  MOTO_PID=$!
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=us-east-1
  export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
  export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
  eventually "curl -s -o /dev/null $AWS_ENDPOINT_URL/" 30 || fail "moto_server did not start"
  aws --endpoint-url "$AWS_ENDPOINT_URL" s3 mb "s3://$1" >/dev/null || fail "cannot make the bucket"
}
