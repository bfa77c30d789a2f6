#!/usr/bin/env bash
# Ensures windquant's default model exists: a small LLaMA trained from scratch
# by `windquant pretrain` on the training books of the King James Version (public
# domain, Debian's bible-kjv, split by scripts/fetch-default-data.sh; calibration,
# selection and held-out text are other books), so the README command works on a
# fresh clone without any downloaded model.
#   default:  .cache/default-model   the model `bash scripts/run.sh` quantizes
#             (configs/default.yaml): 5 layers, hidden 64, vocab 512, 45 units
#   --small:  .cache/test-model      the tests' fallback when ../shared is absent
#             (configs/test-model.yaml): 4 layers, hidden 128, 72 units; kept
#             apart so that a fresh clone's test fixture stays quick (~3.5 min, the
#             default model ~9)
#
# Idempotent: when DIR/pretrain.json carries the settings stamp below, nothing
# is done. Expects windquant to be built already.
#
# usage: scripts/default-model.sh [--small] [PATH/TO/windquant]   (default:
#        build/dev/cli/windquant, then build/release/cli/windquant)
# env:   WQ_PRETRAIN_THREADS (default 2) - threads used for training.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SMALL=0
if [[ "${1:-}" == "--small" ]]; then SMALL=1; shift; fi
TEXT="${ROOT}/.cache/default-data/train.txt"
DATA_SOURCE="debian:bible-kjv train.txt (King James Version, public domain)"
if ((SMALL)); then
  OUT="${ROOT}/.cache/test-model"
  # The settings of the first default model (~3.5 min on 2 cores), kept for the tests.
  SETTINGS=(--vocab 2048 --layers 4 --hidden 128 --heads 4 --kv-heads 2 --seq 128 --batch 8
            --steps 180 --warmup 15 --lr 3e-3 --seed 1234 --tokenizer-bytes 2000000
            --eval-windows 64)
  STAMP="test-model-v2 ${SETTINGS[*]} data=${DATA_SOURCE%% *}"
else
  OUT="${ROOT}/.cache/default-model"
  # stories260k's shape (5 layers, hidden 64, 8/4 heads, 45 units at chunk 64) with a
  # 512-token BPE: small enough to be trained well in ~8-10 min on 2 cores (1000 steps
  # of 4,096 tokens, 4.1M tokens, ~3 passes over the training books), and like
  # stories260k it reacts to 2 bits (README: The embedded default model).
  SETTINGS=(--vocab 512 --layers 5 --hidden 64 --heads 8 --kv-heads 4 --seq 128 --batch 32
            --steps 1000 --warmup 30 --lr 3e-3 --seed 1234 --tokenizer-bytes 2000000
            --eval-windows 64)
  STAMP="default-model-v4 ${SETTINGS[*]} data=${DATA_SOURCE%% *}"
fi
THREADS="${WQ_PRETRAIN_THREADS:-2}"

if [[ -f "${OUT}/config.json" && -f "${OUT}/pretrain.json" ]] &&
   grep -qF "\"settings_stamp\": \"${STAMP}\"" "${OUT}/pretrain.json"; then
  echo "default-model: ${OUT} is up to date"
  exit 0
fi

BIN="${1:-}"
if [[ -z "${BIN}" ]]; then
  for candidate in "${ROOT}/build/dev/cli/windquant" "${ROOT}/build/release/cli/windquant"; do
    if [[ -x "${candidate}" ]]; then BIN="${candidate}"; break; fi
  done
fi
if [[ -z "${BIN}" || ! -x "${BIN}" ]]; then
  echo "default-model: windquant binary not found${BIN:+ at ${BIN}}; build it first:" >&2
  echo "  cmake --preset dev && cmake --build --preset dev" >&2
  exit 1
fi

"${ROOT}/scripts/fetch-default-data.sh"

mkdir -p "${ROOT}/.cache"
# One trainer at a time (a second caller waits, then finds the model ready).
exec 9>"${OUT}.lock"
if command -v flock >/dev/null; then flock 9; fi
if [[ -f "${OUT}/pretrain.json" ]] && grep -qF "\"settings_stamp\": \"${STAMP}\"" "${OUT}/pretrain.json"; then
  echo "default-model: ${OUT} is up to date"
  exit 0
fi

echo "default-model: training ${OUT} (${THREADS} threads; a few minutes)"
start=$(date +%s)
"${BIN}" pretrain --text "${TEXT}" --out "${OUT}" "${SETTINGS[@]}" --threads "${THREADS}" \
  --data-source "${DATA_SOURCE}" --stamp "${STAMP}"
echo "default-model: done in $(( $(date +%s) - start )) s: ${OUT}"
