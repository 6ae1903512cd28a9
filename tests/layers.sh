#!/usr/bin/env bash
# layers.sh - the include rules of docs/layers.md: every #include "x/..." in
# src/<folder>/ names a folder that <folder> may include (itself, or one
# below it). Also a planted upward include is caught, so the check itself
# can fail. Last line: "layers: P passed, F failed".
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
# folder: the folders it may include besides itself (docs/layers.md)
declare -A MAY=(
    [util]=""
    [gguf]="util"
    [kernels]="util"
    [model]="util gguf kernels"
    [tokenizer]="util gguf"
    [runtime]="util gguf kernels model tokenizer"
    [grammar]="util tokenizer"
    [eval]="util kernels model tokenizer runtime"
    [synth]="util gguf kernels model tokenizer runtime"
    [server]="util gguf kernels model tokenizer runtime grammar eval"
    [bench]="util gguf kernels model tokenizer runtime grammar eval"
    [cli]="util gguf kernels model tokenizer runtime grammar eval synth server bench"
)
# bad_includes DIR FOLDER: the includes under DIR that FOLDER may not make
bad_includes() {
    local dir=$1 folder=$2 f inc to ok
    while IFS=: read -r f inc; do
        to=$(sed -n 's|.*#include "\([a-z_0-9]*\)/.*|\1|p' <<<"$inc")
        [ -z "$to" ] || [ "$to" = "$folder" ] && continue
        ok=0
        for m in ${MAY[$folder]}; do [ "$m" = "$to" ] && ok=1; done
        [ "$ok" -eq 1 ] || echo "$f: $folder may not include $to/ ($inc)"
    done < <(grep -rn '#include "[a-z_0-9]*/' "$dir" --include='*.c' --include='*.h' --include='*.cu' | sed 's/:[0-9]*:/:/')
}
for d in src/*/; do
    folder=$(basename "$d")
    if [ -z "${MAY[$folder]+set}" ]; then
        fail=$((fail + 1)); echo "FAIL src/$folder/: not in the layer table (tests/layers.sh, docs/layers.md)"
        continue
    fi
    out=$(bad_includes "$d" "$folder")
    if [ -z "$out" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $out"; fi
done
# the check catches an upward include (a copy of kernels/ that includes model/)
tmp=$(mktemp -d)
mkdir -p "$tmp/kernels"
printf '#include "model/model.h"\n' > "$tmp/kernels/x.c"
if [ -n "$(bad_includes "$tmp/kernels" kernels)" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL a planted kernels -> model include is not caught"
fi
rm -rf "$tmp"
echo "layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
