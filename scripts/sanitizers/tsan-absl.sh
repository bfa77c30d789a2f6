#!/usr/bin/env bash
# Builds the installed Debian abseil (the same version, Debian's patches and options, the
# same sonames) with ThreadSanitizer into .cache/tsan-absl/lib, for `scripts/test.sh
# --sanitize thread`, which puts that folder first on LD_LIBRARY_PATH.
# Why: abseil's Mutex and CondVar synchronise through atomics and futexes in the library;
# TSan sees them only in an instrumented build (their ABSL_TSAN_MUTEX_* annotations). With
# Debian's uninstrumented libabsl every access guarded by an absl::Mutex (ours and gRPC's)
# would be reported as a race. Linked by soname, the instrumented copy replaces the
# installed one for our binaries and for libgrpc alike.
# Needs Debian source packages (adds a deb-src entry when there is none). Idempotent: a
# stamp holds the version it was built from. Prints the lib folder on its last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${ROOT}/.cache/tsan-absl"
version="$(dpkg-query -W -f='${Version}' libabsl-dev)"
if [[ -f "${OUT}/stamp" && "$(cat "${OUT}/stamp")" == "${version}" ]]; then
  echo "${OUT}/lib"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if ! grep -rqs "deb-src\|Types: deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "tsan-absl: adding Debian's source packages (deb-src) to apt" >&2
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
    $SUDO tee /etc/apt/sources.list.d/debian-src.sources >/dev/null
  $SUDO apt-get update -qq
fi
command -v dpkg-source >/dev/null || $SUDO apt-get install -y -qq dpkg-dev >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
(cd "${work}" && apt-get source -qq --download-only "abseil=${version}" >/dev/null 2>&1 &&
  dpkg-source -x ./*.dsc src >/dev/null 2>&1) ||
  { echo "tsan-absl: could not get the source of abseil ${version} (apt-get source)" >&2; exit 1; }
# Debian's own configuration (debian/rules: shared, C++17), plus ThreadSanitizer.
cmake -S "${work}/src" -B "${work}/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -g1" -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_INSTALL_PREFIX="${OUT}" \
  -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "${work}/build" -j"$(nproc)" >/dev/null
rm -rf "${OUT}"
cmake --install "${work}/build" >/dev/null
echo "${version}" > "${OUT}/stamp"
echo "tsan-absl: abseil ${version} with ThreadSanitizer in ${OUT}/lib" >&2
echo "${OUT}/lib"
