#!/usr/bin/env bash
# Checks a GGUF file of `windquant export --format gguf` with llama.cpp itself
# (scripts/build-llama-cpp.sh builds it; docs/gguf.md):
#   tokens     llama-tokenize gives the ids windquant's tokenizer gives for the whole text;
#   logits     llama.cpp's loader and forward (llama-cpp-logits) on windquant's first window
#              (BOS + CONTEXT-1 ids) against windquant's (`eval --gguf --logits-out`):
#              max |difference| / max |logit| over all positions and the vocabulary, and
#              the argmax agreement;
#   perplexity windquant's `eval --gguf` next to llama.cpp's forward of the same windows
#              (BOS + CONTEXT-1 ids, every id scored: windquant's protocol).
# Prints one line per check; exits 1 when the tokens differ, the relative logit difference
# exceeds $LOGITS_TOL (1e-3, issue 37's bound) or llama.cpp fails. $KEEP_WORK keeps the files.
#
# usage: scripts/llama-cpp-check.sh WINDQUANT GGUF TEXT [CONTEXT] [MAX_TOKENS] [B:E]
#   WINDQUANT  the windquant binary (build/dev/cli/windquant); GGUF its export's model.gguf
#   TEXT       UTF-8 text; CONTEXT the window (256); MAX_TOKENS the ids scored (32640; 0 all);
#   B:E        only the text's ids [B, E) (eval --tokens; a run config's held-out range)
#   $LLAMA_CPP_BIN: llama.cpp's tools (default .cache/llama.cpp/build/bin)
set -euo pipefail
if [[ "${1:-}" == "--help" || $# -lt 3 ]]; then
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WQ="$(realpath "$1")" GGUF="$(realpath "$2")" TEXT="$(realpath "$3")"
CONTEXT="${4:-256}" MAX_TOKENS="${5:-32640}" RANGE="${6:-0:0}"
BIN="${LLAMA_CPP_BIN:-${ROOT}/.cache/llama.cpp/build/bin}"
PY="${ROOT}/.venv/bin/python3"
[[ -x "${PY}" ]] || PY=python3
for tool in llama-tokenize llama-cpp-logits; do
  if [[ ! -x "${BIN}/${tool}" ]]; then
    echo "${BIN}/${tool}: missing (bash scripts/build-llama-cpp.sh)" >&2
    exit 1
  fi
done
WORK="$(mktemp -d)"
[[ -n "${KEEP_WORK:-}" ]] || trap 'rm -rf "${WORK}"' EXIT

# windquant: perplexity, the ids it read and the first window's logits.
"${WQ}" eval --gguf "${GGUF}" --text "${TEXT}" --context "${CONTEXT}" \
  --max-tokens "${MAX_TOKENS}" --tokens "${RANGE}" --logits-out "${WORK}/wq.logits" --json \
  >"${WORK}/wq.json" 2>"${WORK}/wq.log" || { tail -3 "${WORK}/wq.log" >&2; exit 1; }
CONTEXT="$("${PY}" -c 'import json,sys; print(json.load(open(sys.argv[1]))["context"])' \
  "${WORK}/wq.json")"
# llama.cpp: its loader and forward on the same ids and windows.
"${BIN}/llama-cpp-logits" "${GGUF}" "${WORK}/wq.logits.ids" "${CONTEXT}" "${WORK}/ll.logits" \
  >"${WORK}/ll.json" 2>"${WORK}/ll.log" || { tail -5 "${WORK}/ll.log" >&2; exit 1; }
# llama.cpp's tokenizer on the whole text (BOS first).
"${BIN}/llama-tokenize" -m "${GGUF}" -f "${TEXT}" --ids --log-disable 2>/dev/null |
  tail -1 >"${WORK}/ll.ids"

"${PY}" - "${WORK}" "${LOGITS_TOL:-1e-3}" "${RANGE%%:*}" <<'EOF'
import json, sys
import numpy as np
w, tol, begin = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
wq_run, ll_run = json.load(open(f"{w}/wq.json")), json.load(open(f"{w}/ll.json"))
ids = np.fromfile(f"{w}/wq.logits.ids", dtype="<i4")
ll_ids = np.array(json.loads(open(f"{w}/ll.ids").read())[1 + begin:])  # without its BOS
n = min(len(ids), len(ll_ids))
same = int(np.sum(ll_ids[:n] == ids[:n]))
print(f"tokens      llama-tokenize and windquant agree on {same} of {n} ids "
      f"(llama.cpp {len(ll_ids)}, windquant {len(ids)} read)")
wq = np.fromfile(f"{w}/wq.logits", dtype="<f4")
ll = np.fromfile(f"{w}/ll.logits", dtype="<f4")
positions = wq_run["context"]
wq, ll = wq.reshape(positions, -1), ll.reshape(positions, -1)
rel = float(np.max(np.abs(wq - ll)) / np.max(np.abs(wq)))
agree = float(np.mean(np.argmax(wq, 1) == np.argmax(ll, 1)))
print(f"logits      {positions} positions x {wq.shape[1]}: max |llama.cpp - windquant| / "
      f"max |logit| = {rel:.3g} (bound {tol:g}); argmax agrees at {agree:.4f} of positions")
a, b = wq_run["perplexity"], ll_run["perplexity"]
print(f"perplexity  windquant {a:.6f}, llama.cpp {b:.6f} (relative {b / a - 1:+.2e}; "
      f"{ll_run['windows']} windows of {positions}, {ll_run['tokens']} ids scored)")
sys.exit(0 if same == n and rel <= tol else 1)
EOF
