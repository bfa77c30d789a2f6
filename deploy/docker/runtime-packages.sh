#!/usr/bin/env bash
# Prints the Debian packages that own the shared libraries the executables in DIR link,
# one per line, for the runtime stage of deploy/docker/Dockerfile*. Libraries no package
# owns (e.g. a downloaded libtorch copied next to the binaries) are reported on stderr.
# usage: runtime-packages.sh DIR
set -euo pipefail
dir="${1:?usage: runtime-packages.sh DIR}"
for bin in "${dir}"/*; do ldd "${bin}"; done |
  awk '/=> \// {print $3}' | sort -u |
  while read -r lib; do
    real="$(realpath "${lib}")"
    # usrmerge: a package may own the /lib or the /usr/lib spelling of the path.
    owner="$(dpkg -S "${lib}" "${real}" "${lib#/usr}" "${real#/usr}" 2>/dev/null | head -n 1 | cut -d: -f1 || true)"
    if [[ -n "${owner}" ]]; then echo "${owner}"; else echo "runtime-packages: no package owns ${lib}" >&2; fi
  done | sort -u
