#!/usr/bin/env bash
# Installs windquant's build and test dependencies on Debian 12, from Debian's packages
# and PyPI only:
#   - Debian: compilers, libtorch (CPU, 1.13), gRPC, protobuf, abseil, yaml-cpp, GTest,
#     curl/OpenSSL (S3), Prometheus, Chromium, and `bible-kjv` (the default model's text);
#   - PyPI, pinned in scripts/requirements.txt, into the project's own environment .venv/
#     (git-ignored): the field's reference libraries (Hugging Face tokenizers,
#     sentencepiece, gguf, numpy), the S3 test server and client (moto, awscli) and the
#     manifest checks (jsonschema, kubernetes-validate). scripts/test.sh and run.sh put
#     .venv/bin first on PATH.
# The CUDA build's libtorch (PyPI torch) is installed by scripts/gpu-build.sh, not here.
# Idempotent: when everything is present it only checks (a second or so).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKGS=(
  build-essential cmake ninja-build ccache pkg-config git clang-format universal-ctags
  libtorch-dev libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libgtest-dev libgmock-dev libabsl-dev nlohmann-json3-dev
  libcurl4-openssl-dev libssl-dev openssl
  libsentencepiece-dev clang libclang-rt-14-dev
  prometheus curl chromium zlib1g-dev
  bible-kjv python3 python3-venv
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} Debian packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: Debian packages done"
fi

# The project's Python environment. The stamp holds the requirements it was made from,
# so a changed pin reinstalls.
VENV="${ROOT}/.venv"
REQ="${ROOT}/scripts/requirements.txt"
if [[ -x "${VENV}/bin/python3" && -f "${VENV}/.requirements" ]] &&
   cmp -s "${REQ}" "${VENV}/.requirements"; then
  echo "install-deps: ${VENV} is up to date ($(grep -c '==' "${REQ}") pinned packages)"
  exit 0
fi
echo "install-deps: installing scripts/requirements.txt into ${VENV}"
[[ -x "${VENV}/bin/python3" ]] || python3 -m venv "${VENV}"
"${VENV}/bin/pip" install -q --disable-pip-version-check -r "${REQ}"
cp "${REQ}" "${VENV}/.requirements"
echo "install-deps: Python packages done"
