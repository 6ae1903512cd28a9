#!/usr/bin/env bash
# gpu-check.sh - everything a GPU machine runs, in one call (40 s on an H200
# with a carried pack): nvidia-smi, the kernel + fixture tests on the
# GPU (build-cuda/tests/test_cuda), then the synthetic 1.5b/7b benchmark in
# bf16 and q8_0 (build-cuda/tools/gpu_bench); the benchmark table prints last.
#
#   bash scripts/gpu-check.sh            on the GPU machine (logs under $OUT or /tmp/gpu-check)
#   bash scripts/gpu-check.sh --ncu      on the GPU machine, instead: each 1.5b bf16 decode kernel's
#                                        time under ncu (tools/ncu_decode.py)
#   bash scripts/gpu-check.sh --pack     on a build machine without a GPU: build build-cuda/ and
#                                        put the three programs and the non-CUDA shared libraries
#                                        they need into build-cuda/pack (carry: ["build-cuda/pack"])
#
# On the GPU machine it runs a carried build-cuda/pack as it is, with its
# libs/ on LD_LIBRARY_PATH (a pack built on Debian 12 ran on the H200's image);
# without one, or with GPU_CHECK_BUILD=1, it builds there first. Exit status:
# non-zero if the build or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${OUT:-/tmp/gpu-check}
mkdir -p "$LOG"
JOBS=$(nproc 2>/dev/null || echo 4)

if [ "${1:-}" = "--pack" ]; then
    make -j"$JOBS" CUDA=1 BUILD=build-cuda tests || exit 1
    P=build-cuda/pack
    rm -rf $P && mkdir -p $P/tests $P/tools $P/libs
    cp build-cuda/r1infer $P/ && cp build-cuda/tests/test_cuda $P/tests/ && cp build-cuda/tools/gpu_bench $P/tools/
    for bin in $P/r1infer $P/tests/test_cuda $P/tools/gpu_bench; do
        ldd "$bin" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so|cuda|cublas|libcudart' |
            xargs -r -I{} cp -L {} $P/libs/
    done
    strip $P/r1infer $P/tests/test_cuda $P/tools/gpu_bench # symbols are most of the size; the fatbins stay
    du -sh $P
    echo "packed: carry [\"$P\"] to the GPU machine"
    exit 0
fi

status=0
step() { echo; echo "=== $*"; }

step "nvidia-smi"
nvidia-smi 2>&1 | tee "$LOG/nvidia-smi.txt" || echo "nvidia-smi failed"
nvcc --version 2>&1 | tail -n 2

step "build (make CUDA=1 BUILD=build-cuda-dev tests, on this machine)"
BUILD=build-cuda-dev
if [ -x build-cuda/pack/tests/test_cuda ] && [ -z "${GPU_CHECK_BUILD:-}" ]; then
    # device time is the scarce thing: a carried pack runs as it is (GPU_CHECK_BUILD=1 builds anyway)
    echo "using the carried build-cuda/pack"
    BUILD=build-cuda/pack
    export LD_LIBRARY_PATH="$PWD/build-cuda/pack/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif timeout 300 make -j"$JOBS" CUDA=1 BUILD=$BUILD tests >"$LOG/build.log" 2>&1; then
    echo "built here: $BUILD"
else
    tail -n 15 "$LOG/build.log"
    if [ -x build-cuda/pack/tests/test_cuda ]; then
        echo "building here failed; using the carried build-cuda/pack"
        BUILD=build-cuda/pack
        export LD_LIBRARY_PATH="$PWD/build-cuda/pack/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
        echo "FAILED: no CUDA build (and no carried build-cuda/pack; run 'scripts/gpu-check.sh --pack' where it builds)"
        exit 1
    fi
fi

if [ "${1:-}" = "--ncu" ]; then
    # each decode kernel's own time (ncu serializes the launches: no graph gaps, caches kept);
    # ~2 minutes for the 1.5b (the 7b did not finish in 4)
    step "ncu: 1.5b bf16 decode kernels"
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    timeout 150 "$NCU" --clock-control none --cache-control none --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum \
        "$BUILD/tools/gpu_bench" --models 1.5b --dtypes bf16 --gen 4 --prompt 16 >"$LOG/ncu.csv" 2>"$LOG/ncu.err"
    echo "ncu: exit $?"
    python3 tools/ncu_decode.py "$LOG/ncu.csv" 3
    exit $?
fi

step "kernel and fixture tests on the GPU ($BUILD/tests/test_cuda)"
timeout 150 "$BUILD/tests/test_cuda" 2>&1 | tee "$LOG/test_cuda.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "!! test_cuda: exit $rc"; status=1; }
grep -q "skipped" "$LOG/test_cuda.log" && { echo "!! test_cuda skipped: no device seen"; status=1; }

step "--backend cuda end to end: r1infer run on a tiny synthetic model, cuda vs cpu (greedy)"
M=/tmp/gpu-check-tiny
if timeout 60 "$BUILD/r1infer" synth --config tiny -o "$M" --tokenizer data/tokenizers/deepseek-r1-distill-qwen \
    --seed 7 >/dev/null 2>&1; then
    for be in cuda cpu; do
        timeout 30 "$BUILD/r1infer" run -m "$M" --backend $be --temp 0 -n 24 -p "Why is the sky blue?" \
            >"$LOG/run_$be.txt" 2>&1
        echo "$be: exit $? | $(tail -n 3 "$LOG/run_$be.txt" | tr '\n' ' ')"
    done
else
    echo "(synth failed; skipped)"
fi

step "benchmark: synthetic 1.5b and 7b, bf16 and q8_0 ($BUILD/tools/gpu_bench)"
timeout 180 "$BUILD/tools/gpu_bench" --models 1.5b,7b --dtypes bf16,q8_0 --gen 128 --prompt 512 --profile 2>&1 | tee "$LOG/gpu_bench.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "!! gpu_bench: exit $rc"; status=1; }

echo
echo "=== summary"
grep -E "^test_cuda: " "$LOG/test_cuda.log" || echo "test_cuda: no result line"
sed -n '/^| model/,$p' "$LOG/gpu_bench.log"
exit $status
