# objs.sh - sourced by the scripts that compile the library's sources outside
# the Makefile (scripts/fuzz.sh, scripts/test-arm.sh), one object per source.
# plan_objs DIR SRC... sets objs (every source's object in DIR, its path
# flattened: src/a/b.c -> DIR/src_a_b.o) and stale (a source and its object,
# in pairs, for each object that is missing or older than its source or a
# header; those objects are removed). Compile the pairs with
#   printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -n 2 sh -c 'CC FLAGS -c -o "$2" "$1"' _
plan_objs() {
    local dir=$1 src o
    shift
    mkdir -p "$dir"
    objs=() stale=()
    for src in "$@"; do
        o="$dir/$(echo "${src%.c}" | tr / _).o"
        if [ ! -f "$o" ] || [ "$src" -nt "$o" ] || [ -n "$(find src include -name '*.h' -newer "$o" | head -1)" ]; then
            rm -f "$o"
            stale+=("$src" "$o")
        fi
        objs+=("$o")
    done
}
