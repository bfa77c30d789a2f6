#!/usr/bin/env bash
# Installs windquant's Debian 12 build and test dependencies. Idempotent: when
# every package is already installed it only checks (a second or so).
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config git clang-format universal-ctags
  libtorch-dev libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libgtest-dev libgmock-dev libabsl-dev nlohmann-json3-dev
  libcurl4-openssl-dev libssl-dev openssl
  libsentencepiece-dev clang libclang-rt-14-dev
  prometheus nodejs curl
  chromium zlib1g-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
