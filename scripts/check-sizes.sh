#!/usr/bin/env bash
# Fails (exit 1) when a source file outside bench/ has over 600 lines or a C++ or Python
# function outside bench/ has over 80 (STYLE.md: one home per concept, functions that
# read as named steps). Function extents come from universal-ctags (--fields=+ne gives
# each definition's first and last line; a TEST body counts as a function, a lambda as
# part of the function it is in).
#
# scripts/size-allowlist.txt names what was over the limit when the check was
# introduced and is owned by work in progress elsewhere, each with the most lines it may
# have. The check also fails when an allowlisted entry grew past its number or no longer
# needs its entry (remove the line), so the list can only shrink.
#
#   scripts/check-sizes.sh           check
#   scripts/check-sizes.sh --list    also print the N largest files and functions (N=20)
set -euo pipefail
cd "$(dirname "$0")/.."
readonly MAX_FILE_LINES=600 MAX_FUNCTION_LINES=80 ALLOWLIST=scripts/size-allowlist.txt
CTAGS=$(command -v ctags-universal || command -v ctags || true)
if [ -z "$CTAGS" ] || ! "$CTAGS" --version 2>/dev/null | grep "Universal Ctags" >/dev/null; then
  echo "check-sizes: universal-ctags not found (scripts/install-deps.sh installs it)"
  exit 1
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.cc' '*.h' '*.inc' '*.cu' '*.proto' '*.py' '*.sh' '*.js' '*.cmake' 'CMakeLists.txt' '*/CMakeLists.txt' \
  | grep -v '^bench/' | grep -v '^build/' | sort -u)
existing=()
for f in "${files[@]}"; do [ -f "$f" ] && existing+=("$f"); done

# "file <path> <lines>" per file, "function <path> <name> <lines> <first line>" per function.
measure() {
  wc -l "${existing[@]}" | awk '$2 != "total" { print "file", $2, $1 }'
  printf '%s\n' "${existing[@]}" | grep -E '\.(cc|h|inc|cu|py)$' \
    | "$CTAGS" -L - -o - --fields=+neKZ --kinds-C++=f --kinds-Python=fm \
        --langmap=C++:+.cu.inc 2>/dev/null \
    | awk -F'\t' '
      {
        name = $1; file = $2; line = ""; end = ""; scope = "";
        for (i = 4; i <= NF; i++) {
          if ($i ~ /^line:/) line = substr($i, 6);
          else if ($i ~ /^end:/) end = substr($i, 5);
          else if ($i ~ /^scope:/) scope = substr($i, 7);
        }
        gsub(/ /, "", name);
        if (end == "" || name ~ /^__anon/) next;
        if (scope ~ /^function:/) next;          # lambdas, local classes: part of their function
        if (name ~ /^TEST(_F|_P)?$/) {            # name a test by its suite and name
          pat = $3; sub(/^\/\^/, "", pat); sub(/\{.*$/, "", pat); gsub(/ /, "", pat);
          name = pat;
        } else if (scope ~ /^(class|struct):/) {
          n = split(scope, parts, "::"); cls = parts[n]; sub(/^(class|struct):/, "", cls);
          name = cls "::" name;
        }
        print "function", file, name, end - line + 1, line;
      }'
}

measure >"${TMPDIR:-/tmp}/check-sizes.$$"
trap 'rm -f "${TMPDIR:-/tmp}/check-sizes.$$"' EXIT
rc=0
awk -v max_file="$MAX_FILE_LINES" -v max_fn="$MAX_FUNCTION_LINES" '
  FILENAME == ARGV[1] {                        # the allowlist
    sub(/#.*/, ""); if (NF == 0) next;
    key = $1 " " $2 (($1 == "function") ? " " $3 : "");
    allowed[key] = $NF; used[key] = 0; next;
  }
  {
    key = $1 " " $2 (($1 == "function") ? " " $3 : "");
    lines = ($1 == "function") ? $4 : $3;
    limit = ($1 == "function") ? max_fn : max_file;
    where = ($1 == "function") ? $2 ":" $5 ": function " $3 : $2;
    if (lines <= limit) next;
    if (key in allowed) {
      used[key] = 1;
      if (lines > allowed[key]) {
        printf "check-sizes: %s has %d lines, over its allowlisted %d\n", where, lines, allowed[key];
        bad++;
      } else {
        n_allowed++;
      }
      next;
    }
    printf "check-sizes: %s has %d lines (limit %d)\n", where, lines, limit;
    bad++;
  }
  END {
    for (k in used) if (!used[k]) {
      printf "check-sizes: %s: \"%s\" is within the limit now; remove it from the allowlist\n",
             ARGV[1], k;
      bad++;
    }
    if (bad) { print "check-sizes: split the function into named steps or the file by concept"; exit 1 }
    printf "check-sizes: files <= %d lines, functions <= %d lines (%d allowlisted)\n",
           max_file, max_fn, n_allowed + 0;
  }' "$ALLOWLIST" "${TMPDIR:-/tmp}/check-sizes.$$" || rc=$?

if [ "${1:-}" = "--list" ]; then
  n="${2:-20}"
  echo "largest files:"
  awk '$1 == "file" { print $3, $2 }' "${TMPDIR:-/tmp}/check-sizes.$$" | sort -rn | awk -v n="$n" 'NR <= n'
  echo "largest functions:"
  awk '$1 == "function" { print $4, $2 ":" $5, $3 }' "${TMPDIR:-/tmp}/check-sizes.$$" \
    | sort -rn | awk -v n="$n" 'NR <= n'
fi
exit "$rc"
