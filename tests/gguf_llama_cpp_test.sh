#!/usr/bin/env bash
# llama.cpp itself on windquant's GGUF export (issue 37 item 4; docs/gguf.md), slow: builds
# llama.cpp's tools once (scripts/build-llama-cpp.sh, ~15 min on 2 cores; $LLAMA_CPP_DIR, else
# .cache/llama.cpp), then for the real test model (stories260k, else the project's test
# model) exports two plans with `export --format gguf` and runs scripts/llama-cpp-check.sh
# on the held-out text:
#   every unit FP16 (F16 tensors)  llama.cpp's tokens equal windquant's, its logits within
#                                  1e-3 relative (issue 37's bound) and its perplexity too;
#   Lagrangian 2.5 bits (Q4_0 ...) the same tokens; logits within 5e-2 and perplexity within
#                                  1e-2 relative: llama.cpp's CPU kernels quantize the
#                                  activations to Q8_0 for Q4_0 / Q8_0 weights (measured
#                                  2e-2 and 6e-4 on stories260k), where windquant computes
#                                  in float32.
# and llama-quantize with the Lagrangian export's llama-quantize-tensor-types.txt on the FP16
# export gives every tensor the Lagrangian export's type.
# Then the 256-value types: a LLaMA with rows of 256 and 512 (pretrained here for a few
# steps on the test text: hidden 256, 2 layers, a 512-token BPE) at chunk 256, every unit
# 3 / 2 / 1.58 bit and a tensor-granular Lagrangian 2.5-bit plan (quant.granularity: tensor):
# every linear is Q3_K / Q2_K / TQ1_0 / its action's own type, llama.cpp's tokens equal
# windquant's, its logits are within 2e-2 relative and its perplexity within 1e-3 (measured
# 5.7e-3 to 7.1e-3 and at most 3.5e-5 on stories260k's text, 2026-12-06: llama.cpp's CPU
# quantizes the activations to Q8_K, 8 bits per 256 values, for these types, as to Q8_0
# for Q4_0, where windquant computes in float32; the file itself decodes bit for bit).
#   gguf_llama_cpp_test.sh BUILD_DIR
set -euo pipefail
BUILD="$(realpath "$1")"
SRC="${WQ_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export WQ_SOURCE_DIR="${SRC}"
eval "$("${BUILD}/common/testing/wq-test-paths")"
WQ="${BUILD}/cli/windquant"
TMP="$(mktemp -d /tmp/wq-gguf-llama.XXXXXX)"
trap 'rm -rf "${TMP}"' EXIT
BIN="$(bash "${SRC}/scripts/build-llama-cpp.sh" "${LLAMA_CPP_DIR:-${SRC}/.cache/llama.cpp}")"
export LLAMA_CPP_BIN="${BIN}"
SETS=(--set "quant.cache_dir=${TMP}/cache")
RANGE="$(python3 - "${WQ_TEST_CONFIG}" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
held = text[text.index("heldout:"):]
m = re.search(r"tokens:\s*\[(\d+),\s*(\d+)\]", held)
print(f"{m.group(1)}:{m.group(2)}" if m else "0:0")
PY
)"
CONTEXT="$(sed -n 's/^  context: *\([0-9]*\).*/\1/p' "${WQ_TEST_CONFIG}" | head -1)"
check() {  # NAME BASELINE-ARGS... -- then llama-cpp-check tolerance in LOGITS_TOL
  local name="$1"; shift
  "${WQ}" baseline --config "${WQ_TEST_CONFIG}" "${SETS[@]}" "$@" --out "${TMP}/${name}" \
    >/dev/null 2>"${TMP}/${name}.log"
  "${WQ}" export --config "${WQ_TEST_CONFIG}" "${SETS[@]}" --plan "${TMP}/${name}/plan.json" \
    --out "${TMP}/${name}-export" --format gguf 2>>"${TMP}/${name}.log"
  bash "${SRC}/scripts/llama-cpp-check.sh" "${WQ}" "${TMP}/${name}-export/gguf/model.gguf" \
    "${WQ_TEST_TEXT}" "${CONTEXT:-256}" 16384 "${RANGE}" | tee "${TMP}/${name}.check"
}
LOGITS_TOL=1e-3 check fp16 --method uniform --action 16
LOGITS_TOL=5e-2 check lagrange --method lagrange --bits 2.5
# llama-quantize-tensor-types.txt: llama-quantize takes the Lagrangian export's arguments
# and writes the FP16 export with every tensor in that export's type.
bash "${SRC}/scripts/llama-quantize-types-check.sh" "${BIN}" "${TMP}/fp16-export/gguf/model.gguf" \
  "${TMP}/lagrange-export/gguf" "${TMP}/requantized.gguf"

# The 256-value types on a model whose rows and chunks are multiples of 256.
K_LOGITS_TOL=2e-2 K_PPL_TOL=1e-3
"${WQ}" pretrain --text "${WQ_TEST_TEXT}" --out "${TMP}/m256" --vocab 512 \
  --tokenizer-bytes 300000 --layers 2 --hidden 256 --intermediate 512 --heads 4 --kv-heads 2 \
  --seq 128 --batch 8 --steps 60 --warmup 6 --lr 3e-3 --seed 7 --threads 2 --eval-windows 4 \
  >"${TMP}/m256.log" 2>&1 || { tail -3 "${TMP}/m256.log" >&2; exit 1; }
T="${WQ_TEST_TEXT}"
SETS=(--set "quant.cache_dir=${TMP}/cache" --set "model.dir=${TMP}/m256"
      --set quant.chunk_size=256 --set quant.compensation=none
      --set "calibration.text=${T}" --set "calibration.tokens=[0, 16384]"
      --set calibration.samples=16 --set calibration.seq_len=128
      --set "evaluation.selection.text=${T}" --set "evaluation.selection.tokens=[16384, 20448]"
      --set "evaluation.heldout.text=${T}" --set "evaluation.heldout.tokens=[20480, 36864]"
      --set evaluation.context=128 --set evaluation.calib_slice_tokens=2048)
CONTEXT=128 RANGE="20480:36864"
for a in 3 2 1.58; do
  LOGITS_TOL="${K_LOGITS_TOL}" check "k${a}" --method uniform --action "${a}"
done
SETS+=(--set quant.granularity=tensor)
LOGITS_TOL="${K_LOGITS_TOL}" check ktensor --method lagrange --bits 2.5
python3 - "${TMP}" <<'PY'
import json, sys
# Each linear in its action's own type (docs/gguf.md).
own = {"3": {"Q3_K"}, "2": {"Q2_K"}, "1.58": {"TQ1_0"}, "4": {"Q4_0"}, "8": {"Q8_0"},
       "16": {"F16"}, "1": {"Q2_K", "Q4_1", "F16", "F32"}}  # 1 bit: where its levels fit
for name in ("k3", "k2", "k1.58", "ktensor"):
    j = json.load(open(f"{sys.argv[1]}/{name}-export/gguf/gguf_export.json"))
    linears = [t for t in j["tensors"] if "actions" in t]
    bad = []
    for t in linears:
        action, _, units = t["actions"].partition(" x")
        one_unit = units == "1" or name != "ktensor"  # tensor-granular: one unit per linear
        if "," in t["actions"] or t["type"] not in own.get(action, ()) or not one_unit:
            bad.append(f"{t['name']}: {t['type']} for {t['actions']}")
    if len(linears) != 14 or bad:
        sys.exit(f"FAIL: {name}: {len(linears)} linears; not in their action's type: {bad}")
    types = {t["type"] for t in linears}
    print(f"{name}: {sorted(types)}, GGUF bits {j['linear_bits_per_weight']:.4f} "
          f"(linears), the plan's {j['plan_bits_per_weight']:.4f}")
PY
python3 - "${TMP}" "${K_PPL_TOL}" <<'PY'
import re, sys
bounds = [("fp16", 1e-3), ("lagrange", 1e-2)]
bounds += [(n, float(sys.argv[2])) for n in ("k3", "k2", "k1.58", "ktensor")]
for name, bound in bounds:
    rel = float(re.search(r"relative ([-+0-9.e]+);", open(f"{sys.argv[1]}/{name}.check").read()).group(1))
    if abs(rel) > bound:
        sys.exit(f"FAIL: {name}: llama.cpp's perplexity differs by {rel:+.2e} (bound {bound:g})")
print("gguf_llama_cpp_test: ok")
PY
