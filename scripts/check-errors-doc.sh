#!/usr/bin/env bash
# Checks docs/errors.md against the tests: every `// error-case: ID` marker in
# a test has a row `| ID |` in the doc, and every row has a test. Prints the
# number of cases per surface (the part of the id before the first dot).
#
#   scripts/check-errors-doc.sh [REPO_ROOT]
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
doc="$root/docs/errors.md"
tests=$(cd "$root" && grep -rhoE '// error-case: [a-z0-9.-]+' --include='*.cc' \
  --exclude-dir=build . | sed 's|// error-case: ||' | sort -u)
rows=$(grep -oE '^\| [a-z0-9-]+\.[a-z0-9.-]+ \|' "$doc" | sed -E 's/^\| ([a-z0-9.-]+) \|/\1/' \
  | grep -v '^case$' | sort -u)
missing=$(comm -23 <(echo "$tests") <(echo "$rows"))
untested=$(comm -13 <(echo "$tests") <(echo "$rows"))
status=0
if [[ -n "$missing" ]]; then
  echo "check-errors-doc: test cases missing from docs/errors.md:" $missing >&2
  status=1
fi
if [[ -n "$untested" ]]; then
  echo "check-errors-doc: docs/errors.md rows without a test (// error-case: ID):" $untested >&2
  status=1
fi
echo "check-errors-doc: $(echo "$tests" | wc -l) cases;" \
  "$(echo "$tests" | cut -d. -f1 | uniq -c | awk '{print $2 " " $1}' | paste -sd, | sed 's/,/, /g')"
exit $status
