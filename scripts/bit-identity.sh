#!/usr/bin/env bash
# The bit-identity set: a short, seeded run of every command whose output a refactor must
# not change (quantize with RL and its baselines, baseline lagrange, export, eval of the
# FP model, of a plan and of the packed checkpoint), printed as one sha256 or number per
# line. Run it before and after a change that should not move any value and diff the two:
#   bash scripts/bit-identity.sh build/dev/cli/windquant > before.txt   # (at the old commit)
#   bash scripts/bit-identity.sh build/dev/cli/windquant > after.txt && diff before.txt after.txt
# Model and text: stories260k under ../shared when present, else the test model
# (scripts/test-model.sh). Wall times and paths are left out of the report's digest.
#
# usage: scripts/bit-identity.sh PATH/TO/windquant [WORKDIR]
set -euo pipefail
if [[ "${1:-}" == "--help" || $# -lt 1 ]]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
WQ="$(realpath "$1")"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${2:-$(mktemp -d)}"
mkdir -p "${WORK}"
export PATH="${ROOT}/.venv/bin:${PATH}"
export WQ_SOURCE_DIR="${ROOT}"
WORK="$(realpath "${WORK}")"
rm -rf "${WORK:?}"/*
cd "${ROOT}"
eval "$("$(dirname "${WQ}")/../common/testing/wq-test-paths")"
CONFIG="${WQ_TEST_CONFIG}"
SETS=(--set "quant.cache_dir=${WORK}/cache" --set "output.dir=${WORK}/run"
      --set curriculum.min_updates=3 --set curriculum.max_updates=3
      --set training.episodes_per_update=4 --set evaluation.calib_slice_tokens=1024)
say() { printf '%-28s %s\n' "$1" "$2"; }
digest() { sha256sum "$1" | cut -c1-16; }

"${WQ}" quantize --config "${CONFIG}" "${SETS[@]}" >"${WORK}/quantize.log" 2>&1
for f in plan.json plan.bin unit_table.pb quantized/quantized.safetensors \
         fake_quant/model.safetensors; do
  say "quantize ${f}" "$(digest "${WORK}/run/${f}")"
done
# report.json without wall times, rates, paths, the commit and what hashes paths (the run's config,
# its fingerprint and digest): those differ from run to run.
say "quantize report.json" "$(python3 - "${WORK}/run/report.json" <<'EOF'
import hashlib, json, re, sys
skip = re.compile(r"(wall|_s$|seconds|per_s|time|date|dir|path|host|commit|digest|eta|exported|"
                  r"fingerprint|^config$|^notes$)", re.I)
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in sorted(x.items()) if not skip.search(k)}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
r = clean(json.load(open(sys.argv[1])))
print(hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16])
EOF
)"
"${WQ}" baseline --config "${CONFIG}" "${SETS[@]}" --method lagrange --bits 2.5 \
  --out "${WORK}/lagrange" --json --fp >"${WORK}/lagrange.json" 2>"${WORK}/lagrange.log"
say "baseline lagrange plan.bin" "$(digest "${WORK}/lagrange/plan.bin")"
say "baseline lagrange json" "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("perplexity"), d.get("fp_perplexity"), d.get("effective_bits"))' "${WORK}/lagrange.json")"
"${WQ}" export --config "${CONFIG}" "${SETS[@]}" --plan "${WORK}/lagrange/plan.json" \
  --out "${WORK}/export" >"${WORK}/export.log" 2>&1
for f in "${WORK}"/export/quantized/* "${WORK}"/export/fake_quant/*.safetensors; do
  say "export ${f#"${WORK}/export/"}" "$(digest "${f}")"
done
ppl() { python3 -c 'import json,sys; print(repr(json.load(sys.stdin)["perplexity"]))'; }
say "eval --plan" "$("${WQ}" eval --config "${CONFIG}" "${SETS[@]}" --plan "${WORK}/lagrange/plan.json" \
  --max-tokens 8192 --json 2>/dev/null | ppl)"
say "eval --quantized" "$("${WQ}" eval --quantized "${WORK}/export/quantized" --text "${WQ_TEST_TEXT}" \
  --tokens 0:0 --max-tokens 8192 --context 256 --json 2>/dev/null | ppl)"
say "eval FP" "$("${WQ}" eval --model "${WQ_TEST_MODEL_DIR}" --text "${WQ_TEST_TEXT}" \
  --max-tokens 8192 --context 256 --json 2>/dev/null | ppl)"
