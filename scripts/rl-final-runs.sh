#!/usr/bin/env bash
# The final measurements of docs/results-rl.md (the protocol there): per model,
# target and training seed, two `windquant quantize` runs with the FROZEN config
# configs/final/<model>.yaml, "rl" (as the config says) and "rl-screened"
# (+ training.screen_samples=128). Each report.json carries, besides the RL
# plan, the search with restarts and the screened search at that run's count of
# real evaluations, and the Lagrangian plan, all on the held-out range no
# variant was compared on. Each report is copied to
# docs/rl-runs/<model>/<target>-s<seed>-<variant>/report.json (commit it as it
# lands); a run whose report is already there is skipped, so the campaign
# continues over sessions. Sequential; each run holds /tmp/wq-heavy.lock.
# usage: scripts/rl-final-runs.sh [PATH/TO/windquant]
# env:   WQ_FINAL_MODEL (stories260k | default), WQ_FINAL_TARGETS ("2.0 2.5"),
#        WQ_FINAL_SEEDS ("0 1 2 3 4 5 6 7 8 9"), WQ_FINAL_VARIANTS ("rl rl-screened")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-${ROOT}/build/dev/cli/windquant}"
MODEL="${WQ_FINAL_MODEL:-stories260k}"
CONFIG="configs/final/${MODEL}.yaml"
LOCK=()
command -v flock >/dev/null && LOCK=(flock /tmp/wq-heavy.lock)
cd "${ROOT}"
[[ -f "${CONFIG}" ]] || { echo "no frozen config ${CONFIG}" >&2; exit 2; }
for target in ${WQ_FINAL_TARGETS:-2.0 2.5}; do
  for seed in ${WQ_FINAL_SEEDS:-0 1 2 3 4 5 6 7 8 9}; do
    for variant in ${WQ_FINAL_VARIANTS:-rl rl-screened}; do
      name="${target}-s${seed}-${variant}"
      keep="docs/rl-runs/${MODEL}/${name}"
      if [[ -f "${keep}/report.json" ]]; then
        echo "=== ${MODEL} ${name}: already in ${keep}"
        continue
      fi
      out="runs/final/${MODEL}/${name}"
      extra=()
      [[ "${variant}" == rl-screened ]] && extra=(--set training.screen_samples=128)
      mkdir -p "$(dirname "${out}")"
      echo "=== ${MODEL} ${name} -> ${out} ($(date -u +%H:%M:%S) UTC)"
      if "${LOCK[@]}" /usr/bin/time -f "wall %e s" "${BIN}" quantize --config "${CONFIG}" \
        --set "curriculum.target_bits=[${target}]" --set "training.seed=${seed}" \
        --set "output.dir=${out}" "${extra[@]}" --no-export > "${out}.log" 2>&1; then
        mkdir -p "${keep}"
        cp "${out}/report.json" "${keep}/report.json"
        tail -1 "${out}.log" > "${keep}/wall.txt"
      else
        echo "failed: see ${out}.log"
      fi
      tail -3 "${out}.log"
    done
  done
done
