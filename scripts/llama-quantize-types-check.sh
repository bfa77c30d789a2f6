#!/usr/bin/env bash
# Checks DIR/llama-quantize-tensor-types.txt of `windquant export --format gguf` with
# llama.cpp's llama-quantize (docs/gguf.md): quantizes an FP16 GGUF of the same model with
# the file's arguments (`llama-quantize $(grep -v '^#' FILE) F16.gguf OUT.gguf Q8_0`) and
# compares every tensor's type in OUT with DIR/model.gguf's (llama.cpp's `gguf` package).
#
# usage: scripts/llama-quantize-types-check.sh LLAMA_CPP_BIN F16_GGUF EXPORT_GGUF_DIR OUT
set -euo pipefail
if [[ $# -ne 4 ]]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
BIN="$1" F16="$2" DIR="$3" OUT="$4"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${ROOT}/.venv/bin/python3"
[[ -x "${PY}" ]] || PY=python3
mapfile -t ARGS < <(grep -v '^#' "${DIR}/llama-quantize-tensor-types.txt" | tr ' ' '\n')
if ! "${BIN}/llama-quantize" "${ARGS[@]}" "${F16}" "${OUT}" Q8_0 >"${OUT}.log" 2>&1; then
  tail -5 "${OUT}.log" >&2
  echo "llama-quantize-types-check: llama-quantize refused the arguments (${OUT}.log)" >&2
  exit 1
fi
"${PY}" - "${DIR}/model.gguf" "${OUT}" <<'PY'
import sys
from gguf import GGUFReader
want = {t.name: t.tensor_type.name for t in GGUFReader(sys.argv[1]).tensors}
got = {t.name: t.tensor_type.name for t in GGUFReader(sys.argv[2]).tensors}
diff = [f"{n}: {got.get(n)} (want {want[n]})" for n in want if got.get(n) != want[n]]
if set(want) != set(got) or diff:
    sys.exit("llama-quantize-types-check: FAIL: " + "; ".join(diff or ["tensor names differ"]))
print(f"llama-quantize-types-check: ok, {len(want)} tensors in the export's types")
PY
