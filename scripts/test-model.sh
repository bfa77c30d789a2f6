#!/usr/bin/env bash
# ctest fixture `wq_test_model` (tests/CMakeLists.txt): makes sure the real model
# and texts the tests use exist. common/testing/test_paths.h decides which:
# ../shared/models/stories260k when present (nothing to do), else the project's
# small test model, trained here once per source tree by
# scripts/default-model.sh --small (it writes the King James texts first; ~3-4 min on 2 cores).
#
# usage: scripts/test-model.sh PATH/TO/windquant PATH/TO/wq-test-paths
set -euo pipefail
WINDQUANT="$1"
TEST_PATHS="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export WQ_SOURCE_DIR="${WQ_SOURCE_DIR:-${ROOT}}"
eval "$("${TEST_PATHS}")"
if [[ "${WQ_TEST_STORIES260K}" == 1 ]]; then
  echo "test-model: ${WQ_TEST_MODEL_DIR} and ${WQ_TEST_TEXT} (from ${WQ_SHARED_DIR})"
  exit 0
fi
echo "test-model: no stories260k under ../shared; using the test model ${WQ_TEST_MODEL_DIR}"
bash "${ROOT}/scripts/default-model.sh" --small "${WINDQUANT}"
for f in "${WQ_TEST_MODEL_DIR}/config.json" "${WQ_TEST_MODEL_DIR}/model.safetensors" \
         "${WQ_TEST_MODEL_DIR}/tokenizer.json" "${WQ_TEST_TEXT}"; do
  [[ -s "${f}" ]] || { echo "test-model: ${f} missing after training" >&2; exit 1; }
done
echo "test-model: ready: ${WQ_TEST_MODEL_DIR}, text ${WQ_TEST_TEXT}"
