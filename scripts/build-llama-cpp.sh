#!/usr/bin/env bash
# Builds llama.cpp's command-line tools beside the project (never committed), to check
# windquant's GGUF files with llama.cpp itself (docs/gguf.md): llama-perplexity,
# llama-tokenize, llama-quantize and llama-cpp-logits (scripts/llama-cpp-logits.cc, our
# own, against llama.h) in DIR/build/bin; scripts/llama-cpp-check.sh uses them.
# The source is llama.cpp as PyPI's llama-cpp-python vendors it (pinned below), fetched
# with the project's pip (`pip download`, the sdist only; nothing is installed), so the
# build needs PyPI and no other network. CPU only, portable (GGML_NATIVE off).
#
# usage: scripts/build-llama-cpp.sh [DIR]     (DIR: $LLAMA_CPP_DIR, else .cache/llama.cpp)
# Prints DIR/build/bin at the end. A second run reuses the source and the build.
set -euo pipefail
if [[ "${1:-}" == "--help" ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
VERSION=0.3.36  # llama-cpp-python; its vendor/llama.cpp is what is built
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-${LLAMA_CPP_DIR:-${ROOT}/.cache/llama.cpp}}"
PIP="${ROOT}/.venv/bin/pip"
[[ -x "${PIP}" ]] || PIP="$(command -v pip3 || true)"
if [[ -z "${PIP}" ]]; then
  echo "build-llama-cpp.sh: no pip (run bash scripts/install-deps.sh)" >&2
  exit 1
fi
mkdir -p "${DEST}"
SRC="${DEST}/llama_cpp_python-${VERSION}/vendor/llama.cpp"
if [[ ! -f "${SRC}/CMakeLists.txt" ]]; then
  "${PIP}" download --no-deps --no-binary :all: "llama-cpp-python==${VERSION}" \
    -d "${DEST}/download" >/dev/null
  tar xzf "${DEST}/download/llama_cpp_python-${VERSION}.tar.gz" -C "${DEST}" \
    "llama_cpp_python-${VERSION}/vendor/llama.cpp"
fi
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
cmake -S "${SRC}" -B "${DEST}/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF >/dev/null
cmake --build "${DEST}/build" -j"$(nproc)" \
  --target llama-perplexity llama-tokenize llama-quantize >/dev/null
BIN="${DEST}/build/bin"
"${CXX:-c++}" -O2 -std=c++17 -I"${SRC}/include" -I"${SRC}/ggml/include" \
  "${ROOT}/scripts/llama-cpp-logits.cc" -L"${BIN}" -lllama -lggml -lggml-base \
  -Wl,-rpath,"${BIN}" -o "${BIN}/llama-cpp-logits"
echo "${BIN}"
