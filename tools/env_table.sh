#!/usr/bin/env bash
# Rewrites the README's Environment table (between <!-- env:begin --> and
# <!-- env:end -->) from the one table the library reads its environment
# through (src/util/env.c), as `r1infer --help-env` prints it.
#   tools/env_table.sh [BIN]   (default build/r1infer)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/r1infer}
table=$("$BIN" --help-env)
python3 - "$table" <<'PY'
import sys
table = sys.argv[1].strip() + "\n"
s = open("README.md").read()
a, b = "<!-- env:begin -->\n", "<!-- env:end -->"
i, j = s.index(a) + len(a), s.index(b)
open("README.md", "w").write(s[:i] + "\n" + table + "\n" + s[j:])
PY
