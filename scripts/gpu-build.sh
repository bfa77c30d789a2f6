#!/usr/bin/env bash
# The CUDA build: every target against the libtorch of PyPI torch 2.11 (CUDA 13.0, the
# version of the lent GPU machines) with CUDA and NCCL on, in build/cuda (CMake preset
# `cuda`). The same script runs on the project's machine (Debian 12 with the CUDA 13
# toolkit, no GPU: it compiles and links) and on a GPU machine.
#
# libtorch: $WQ_TORCH_PREFIX (a cmake prefix holding TorchConfig.cmake) when set; else the
# python3 torch when it is 2.11.x with CUDA (the GPU machine); else PyPI's torch 2.11.0
# wheel, installed without its Python dependencies into .cache/torch-2.11.0 (git-ignored;
# ~1.7 GB), with the three CUDA libraries it links that the toolkit lacks (cuFile,
# cuSPARSELt, NVSHMEM; torch's RPATH finds them there). The rest (cudart, cuBLAS, cuDNN,
# NCCL, ...) comes from the toolkit in /usr/local/cuda.
#
# --check: then runs the FP perplexity of the test model (common/testing/test_paths.h:
# stories260k from ../shared, else the project's test model) with this build's windquant
# on the CPU and compares it with the CPU build's (build/dev, built by scripts/test.sh):
# they must agree within 1e-6 (relative). On a GPU machine (no CPU build there) it prints
# the CPU and the CUDA device's perplexity of the same build and compares those. Both in
# float32 (--dtype float32: bfloat16 is the default on CUDA); then this build's bfloat16
# perplexity (on the CUDA device where there is one, else the CPU) must be within 2e-2
# (relative) of its float32 one on the CPU.
#
# Build dependencies on a machine without Debian's packages (the GPU machine): unpack the
# .deb files of ../shared/gpu/README.md into a prefix and pass it as WQ_DEPS_PREFIX; the
# script adds the flags that recipe lists.
#
# usage: scripts/gpu-build.sh [--check] [--target T]     env: WQ_TORCH_PREFIX, WQ_DEPS_PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
CHECK=0
TARGETS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --check) CHECK=1 ;;
    --target) TARGETS+=(--target "$2"); shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-build: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true

TORCH_VERSION=2.11.0
TORCH_DIR="${ROOT}/.cache/torch-${TORCH_VERSION}"
# The CUDA libraries torch 2.11.0+cu130 links that the CUDA 13.0 toolkit does not ship.
TORCH_EXTRA_WHEELS=(nvidia-cufile==1.15.1.6 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5)

python_torch_prefix() {
  python3 - "$TORCH_VERSION" <<'EOF' 2>/dev/null
import sys
import torch
if torch.__version__.split("+")[0] == sys.argv[1] and torch.version.cuda:
    print(torch.utils.cmake_prefix_path)
EOF
}

if [[ -z "${WQ_TORCH_PREFIX:-}" ]]; then
  WQ_TORCH_PREFIX="$(python_torch_prefix || true)"
fi
if [[ -z "${WQ_TORCH_PREFIX}" ]]; then
  WQ_TORCH_PREFIX="${TORCH_DIR}/torch/share/cmake"
  stamp="${TORCH_DIR}/.installed"
  want="torch==${TORCH_VERSION} ${TORCH_EXTRA_WHEELS[*]}"
  if [[ ! -f "${stamp}" || "$(cat "${stamp}")" != "${want}" ]]; then
    echo "gpu-build: installing ${want} into ${TORCH_DIR} (PyPI, ~760 MB download)"
    rm -rf "${TORCH_DIR}"
    py=python3
    [[ -x "${ROOT}/.venv/bin/python3" ]] && py="${ROOT}/.venv/bin/python3"  # install-deps.sh's
    "${py}" -m pip install -q --disable-pip-version-check --no-deps --target "${TORCH_DIR}" \
      "torch==${TORCH_VERSION}" "${TORCH_EXTRA_WHEELS[@]}"
    echo "${want}" > "${stamp}"
  fi
fi
[[ -f "${WQ_TORCH_PREFIX}/Torch/TorchConfig.cmake" ]] ||
  { echo "gpu-build: no Torch/TorchConfig.cmake under WQ_TORCH_PREFIX=${WQ_TORCH_PREFIX}" >&2; exit 1; }
export WQ_TORCH_PREFIX
echo "gpu-build: libtorch from ${WQ_TORCH_PREFIX}"

extra=()
if [[ -n "${WQ_DEPS_PREFIX:-}" ]]; then
  P="${WQ_DEPS_PREFIX}"
  export LD_LIBRARY_PATH="${P}/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}" PATH="${P}/usr/bin:${PATH}"
  extra=(-DCMAKE_PREFIX_PATH="${WQ_TORCH_PREFIX};${P}/usr" -DPKG_CONFIG_EXECUTABLE="${P}/usr/bin/pkgconf"
         -DOPENSSL_ROOT_DIR="${P}/usr" -DProtobuf_PROTOC_EXECUTABLE="${P}/usr/bin/protoc"
         -DCMAKE_EXE_LINKER_FLAGS="-L${P}/usr/lib/x86_64-linux-gnu"
         -DCURL_LIBRARY=/usr/lib/x86_64-linux-gnu/libcurl.so -DCMAKE_CXX_STANDARD_LIBRARIES=-lprotobuf
         -DBUILD_TESTING=OFF)
fi

mkdir -p build/cuda
start=$SECONDS
# torch's own libgomp beside its libraries makes CMake warn for every target: in the log.
cmake --preset cuda "${extra[@]}" > build/cuda/configure.log 2>&1 ||
  { tail -30 build/cuda/configure.log >&2; echo "gpu-build: configure failed (build/cuda/configure.log)" >&2; exit 1; }
grep -E "PyTorch: CUDA detected|NCCL pipe for hidden states" build/cuda/configure.log | sed 's/^-- /gpu-build: /'
grep -q "NCCL pipe for hidden states enabled" build/cuda/configure.log ||
  { echo "gpu-build: NCCL was not found (build/cuda/configure.log)" >&2; exit 1; }
cmake --build build/cuda -j"$(nproc)" "${TARGETS[@]}"
echo "gpu-build: built in $((SECONDS - start)) s: build/cuda"
((CHECK)) || exit 0

# --- The check: FP perplexity of the test model, this build against the CPU build. ---
paths_bin=build/cuda/common/testing/wq-test-paths
[[ -x "${paths_bin}" ]] || paths_bin=build/dev/common/testing/wq-test-paths
eval "$(WQ_SOURCE_DIR="${ROOT}" "${paths_bin}")"
[[ -s "${WQ_TEST_MODEL_DIR}/model.safetensors" ]] ||
  { echo "gpu-build: test model ${WQ_TEST_MODEL_DIR} missing (scripts/test.sh trains it)" >&2; exit 1; }
ppl() {  # BINARY [cpu|cuda] [float32|bfloat16] -> perplexity; `cpu` also hides every GPU
  local hide=() device="${2:-cpu}"
  [[ "${device}" == cpu ]] && hide=(CUDA_VISIBLE_DEVICES=)
  env "${hide[@]}" "$1" eval --device "${device}" --dtype "${3:-float32}" \
    --model "${WQ_TEST_MODEL_DIR}" \
    --text "${WQ_TEST_TEXT}" --max-tokens 16384 --json |
    python3 -c 'import json, sys; print(repr(json.load(sys.stdin)["perplexity"]))'
}
cuda_cpu="$(ppl build/cuda/cli/windquant cpu)"
if [[ -x build/dev/cli/windquant ]]; then
  ref="$(ppl build/dev/cli/windquant)" ref_name="the CPU build (build/dev)" bf16_device=cpu
else
  ref="$(ppl build/cuda/cli/windquant cuda)" ref_name="this build on the CUDA device"
  bf16_device=cuda
fi
bf16="$(ppl build/cuda/cli/windquant "${bf16_device}" bfloat16)"
python3 - "${cuda_cpu}" "${ref}" "${ref_name}" "${WQ_TEST_MODEL_NAME}" "${bf16}" \
  "${bf16_device}" <<'EOF'
import sys
got, ref, name, model = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
bf16, bf16_device = float(sys.argv[5]), sys.argv[6]
rel = abs(got - ref) / ref
print(f"gpu-build: {model} FP perplexity: build/cuda on the CPU {got:.8f}, {name} {ref:.8f}, "
      f"relative difference {rel:.2e} (limit 1e-6)")
rel16 = abs(bf16 - got) / got
print(f"gpu-build: {model} bfloat16 perplexity on the {bf16_device} {bf16:.8f} vs float32 on the "
      f"CPU {got:.8f}, relative difference {rel16:.2e} (limit 2e-2)")
sys.exit(0 if rel <= 1e-6 and rel16 <= 2e-2 else 1)
EOF
