#!/usr/bin/env bash
# Regenerates the four example pull-request comments in docs/ci.md from the
# project's own ledger (reports/ledger.db), each between its markers:
#   <!-- pr-comment N -->  ...  <!-- /pr-comment -->
# with `verity show N --markdown` (what `verity submit --markdown` writes).
# The suite (report_test ProjectLedger.PrCommentsInDocsCiAreWhatTheLedgerSays)
# fails when docs/ci.md differs from what this writes.
#
#   scripts/ci-comments.sh
set -euo pipefail
cd "$(dirname "$0")/.."
v=${VERITY:-build/cli/verity}
[ -x "$v" ] || { echo "ci-comments: $v is missing: build first (scripts/build.sh)" >&2; exit 1; }
/usr/bin/python3 - "$v" docs/ci.md <<'PY'
import re, subprocess, sys
v, path = sys.argv[1:]
text = open(path).read()
pattern = re.compile(r"(<!-- pr-comment (\d+) -->\n)(.*?)(<!-- /pr-comment -->)", re.S)
count = 0
def render(m):
    global count
    count += 1
    out = subprocess.run([v, "show", m.group(2), "--ledger", "reports/ledger.db", "--markdown"],
                         check=True, capture_output=True, text=True).stdout
    return m.group(1) + out + m.group(4)
new = pattern.sub(render, text)
if count == 0:
    sys.exit("ci-comments: docs/ci.md has no <!-- pr-comment N --> markers")
open(path, "w").write(new)
print(f"ci-comments: wrote {count} comments into {path}")
PY
