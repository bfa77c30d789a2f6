#!/usr/bin/env bash
# The RL-vs-search development runs of docs/results-rl-history.md: a run config (stories260k on the
# TinyStories sample by default; calibration, selection and held-out text disjoint),
# the RL plan next to the search baseline at the RL run's count of real plan evaluations
# and the other baselines, per target and training seed. Sequential (the machine is
# shared); each run holds /tmp/wq-heavy.lock when flock is there.
# usage: scripts/rl-results.sh [PATH/TO/windquant] [OUT_DIR] [--set key=value ...]
# env:   WQ_RL_CONFIG (configs/stories260k.yaml), WQ_RL_TARGETS ("2.0 2.5"),
#        WQ_RL_SEEDS ("0 1 2"), WQ_RL_UPDATES (10), WQ_RL_EPISODES (8 per update)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-${ROOT}/build/dev/cli/windquant}"
OUT="${2:-${ROOT}/runs/rl-results}"
shift 2 || true
EXTRA=("$@")
CONFIG="${WQ_RL_CONFIG:-configs/stories260k.yaml}"
UPDATES="${WQ_RL_UPDATES:-10}"
EPISODES="${WQ_RL_EPISODES:-8}"
LOCK=()
command -v flock >/dev/null && LOCK=(flock /tmp/wq-heavy.lock)
cd "${ROOT}"
mkdir -p "${OUT}"
for target in ${WQ_RL_TARGETS:-2.0 2.5}; do
  for seed in ${WQ_RL_SEEDS:-0 1 2}; do
    dir="${OUT}/${target}-s${seed}"
    echo "=== target ${target} seed ${seed} -> ${dir}"
    "${LOCK[@]}" /usr/bin/time -f "wall %e s" "${BIN}" quantize \
      --config "${CONFIG}" --set "curriculum.target_bits=[${target}]" \
      --set "curriculum.min_updates=${UPDATES}" --set "curriculum.max_updates=${UPDATES}" \
      --set "training.episodes_per_update=${EPISODES}" --set "training.seed=${seed}" \
      --set "output.dir=${dir}" "${EXTRA[@]}" --no-export > "${dir}.log" 2>&1 ||
      echo "failed: see ${dir}.log"
    tail -4 "${dir}.log"
  done
done
