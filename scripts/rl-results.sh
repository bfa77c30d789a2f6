#!/usr/bin/env bash
# The RL result of docs/results-rl.md: stories260k on the TinyStories sample, RL plan vs
# baselines at 2.0 and 2.5 effective bits, 3 training seeds each. Sequential (the machine
# is shared). Baselines are deterministic given the unit table, so they are measured in the
# seed-0 run only (--no-baselines for the others).
# usage: scripts/rl-results.sh [PATH/TO/windquant] [OUT_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-${ROOT}/build/dev/cli/windquant}"
OUT="${2:-${ROOT}/runs/rl-results}"
UPDATES="${WQ_RL_UPDATES:-10}"
cd "${ROOT}"
for target in 2.0 2.5; do
  for seed in 0 1 2; do
    extra=()
    [[ "${seed}" != 0 ]] && extra+=(--no-baselines)
    dir="${OUT}/${target}-s${seed}"
    echo "=== target ${target} seed ${seed} -> ${dir}"
    /usr/bin/time -f "wall %e s" "${BIN}" quantize --config configs/stories260k.yaml \
      --set "curriculum.target_bits=[${target}]" --set "curriculum.min_updates=${UPDATES}" \
      --set "curriculum.max_updates=${UPDATES}" --set training.episodes_per_update=8 \
      --set "training.seed=${seed}" --set evaluation.eval_slice_tokens=8160 \
      --set evaluation.calib_slice_tokens=4096 --set evaluation.final_eval_tokens=0 \
      --set "output.dir=${dir}" --no-export "${extra[@]}" > "${dir}.log" 2>&1 || { mkdir -p "${OUT}"; echo "failed: see ${dir}.log"; }
    tail -9 "${dir}.log"
  done
done
