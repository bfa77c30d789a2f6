#!/usr/bin/env bash
# Writes the default model's text and splits it into four disjoint files:
#   .cache/default-data/train.txt        pretraining only (scripts/default-model.sh)
#   .cache/default-data/calibration.txt  calibration windows and the loss slice
#   .cache/default-data/selection.txt    the slice plans are chosen on
#   .cache/default-data/heldout.txt      final numbers only
# (configs/default.yaml names the last three; the run config loader refuses
# overlapping roles.) The text is the King James Version of the Bible (public
# domain; Debian main's `bible-kjv`, whose `bible -f` prints it one verse a line
# with its reference), 66 books. A document is one book and goes whole to one
# file: book i (0-based, in canonical order) goes to held-out when i % 11 == 9,
# selection when i % 11 == 3, calibration when i % 11 == 6, else to train. Each
# role so holds books of every kind (narrative, law, poetry, prophecy, gospel,
# letter), and no verse of the held-out, selection or calibration text is ever
# trained on:
#   held-out     2 Samuel, Ecclesiastes, Jonah, John, 1 Timothy, Jude
#   selection    Numbers, Ezra, Ezekiel, Haggai, Galatians, James
#   calibration  Judges, Job, Joel, Matthew, Colossians, 1 John
# Verse references are dropped; a chapter is one paragraph (its verses joined by
# spaces), chapters and books are separated by a blank line.
# Needs `bible` (scripts/install-deps.sh installs bible-kjv) and python3.
# Idempotent: does nothing when the files exist with the stamp below.
#
# usage: scripts/fetch-default-data.sh [--force]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${ROOT}/.cache/default-data"
STAMP="${OUT_DIR}/SOURCE"
STAMP_TEXT="debian:bible-kjv split-v3 (book i%11: 9 heldout, 3 selection, 6 calibration, else train)"
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

for tool in bible python3; do
  command -v "${tool}" >/dev/null ||
    { echo "fetch-default-data: '${tool}' not found; run scripts/install-deps.sh" >&2; exit 1; }
done

mkdir -p "${OUT_DIR}"
tmp="${OUT_DIR}/.tmp.$$"
mkdir -p "${tmp}"
trap 'rm -rf "${tmp}"' EXIT
bible -f "Gen1:1-Rev22:21" > "${tmp}/kjv.txt"
python3 - "${tmp}/kjv.txt" "${tmp}" <<'EOF'
import re
import sys

src, out = sys.argv[1], sys.argv[2]
verse = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")
books = []  # [(name, [[verse, ...] per chapter])]
for n, line in enumerate(open(src, encoding="utf-8"), 1):
    m = verse.match(line.rstrip("\n"))
    if not m:
        sys.exit(f"fetch-default-data: {src}:{n}: not a verse line: {line[:60]!r}")
    book, chapter = m.group(1), int(m.group(2))
    if not books or books[-1][0] != book:
        books.append((book, {}))
    books[-1][1].setdefault(chapter, []).append(m.group(4).strip())
if len(books) != 66:
    sys.exit(f"fetch-default-data: expected the 66 books of the KJV, bible printed {len(books)}")
parts = {"train": [], "calibration": [], "selection": [], "heldout": []}
for i, (name, chapters) in enumerate(books):
    r = i % 11
    role = "heldout" if r == 9 else "selection" if r == 3 else "calibration" if r == 6 else "train"
    parts[role].append((name, "\n\n".join(" ".join(v) for v in chapters.values())))
for role, docs in parts.items():
    text = "\n\n".join(d for _, d in docs) + "\n"
    with open(f"{out}/{role}.txt", "w", encoding="utf-8") as f:
        f.write(text)
    print(f"fetch-default-data: {role}.txt: {len(docs)} books "
          f"({', '.join(n for n, _ in docs) if len(docs) < 10 else 'the others'}), "
          f"{len(text.encode())} bytes", file=sys.stderr)
EOF
for f in "${FILES[@]}"; do mv -f "${tmp}/${f}.txt" "${OUT_DIR}/${f}.txt"; done
echo "${STAMP_TEXT}" > "${STAMP}"
echo "fetch-default-data: wrote ${OUT_DIR}/{$(IFS=,; echo "${FILES[*]}")}.txt"
