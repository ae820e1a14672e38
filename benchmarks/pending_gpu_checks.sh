#!/usr/bin/env bash
# GPU measurements that CPU-only kernel work waits for, as named sections, so
# one device call runs several:  bash benchmarks/pending_gpu_checks.sh tests reduction
# Run from the repository root on the GPU machine; carry .gpu_data/traces and .whl/ex.
# Each section writes its log and JSON under the work folder (packed into $OUT). Device
# seconds as measured on the H100 on 2026-11-26 (Triton's cache cold):
#   tests      ~310 s  kernel tests with compiled kernels (the CUDA-eager rules of 2f6a5a6
#                      and f807c22, every rewritten kernel compiled on Triton 3.6)
#   part2tests ~120 s  the matmul (TMA included) and convolution kernel tests compiled
#   reduction   ~50 s  sum/mean column and row plans (9cb7997): new against the old plans
#   softmax     ~30 s  softmax backward row plan (0dcfa61) and its sweeps
#   pointwise   ~20 s  tiny-input tiles and unmasked whole programs (cae42f7)
#   layernorm   ~20 s  layer norm backward (517c270) and its sweeps
#   matmul      ~60 s  exact-product configs (tune_matmul.py --shapes --write), then mm/bmm/addmm
#   conv        ~90 s  conv_probe.py over the rewritten kernels (bb50413), then the direct
#                      depthwise kernel's variants (c7acbd8) and its tests compiled
# The results of 2026-11-26 and what each sweep decided:
# benchmarks/results/pending-checks-h100-2026-11-26/README.md.
# Everything goes under a work folder and, at the end, into $OUT/pending.tgz: the device
# tool brings back at most 8 files (the run of 2026-11-26 lost five sections' logs to that limit).
set -u
RESULT_DIR=${OUT:-/tmp/out}
OUT=${PENDING_WORK:-/tmp/pending}
mkdir -p "$OUT" "$RESULT_DIR"
trap 'tar czf "$RESULT_DIR/pending.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"' EXIT
source benchmarks/gpu_env.sh > "$OUT/env.txt" 2>&1
P="python3 benchmarks/device_profile.py --traces .gpu_data/traces"

profile() {  # profile NAME OPS [--set ...]: one device_profile run, its last line shown
    local name=$1 ops=$2
    shift 2
    $P --out "$OUT/$name.json" --ops "$ops" "$@" > "$OUT/$name.txt" 2>&1
    echo "== $name $*"
    tail -n 2 "$OUT/$name.txt"
}

for section in "$@"; do
    echo "#### $section"
    case $section in
    tests)
        OPBENCH_KERNEL_DEVICE=cuda timeout 420 python3 -m pytest -q -p no:cacheprovider -rfxX \
            --junitxml="$OUT/kernel-tests.xml" tests/kernels/test_softmax.py \
            tests/kernels/test_norm.py tests/kernels/test_batch_norm_planes.py \
            tests/kernels/test_pointwise_more.py tests/kernels/test_reduction.py \
            > "$OUT/kernel-tests.txt" 2>&1
        tail -n 30 "$OUT/kernel-tests.txt" ;;
    part2tests)
        OPBENCH_KERNEL_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider -rfxX \
            --junitxml="$OUT/part2-tests.xml" tests/kernels/test_conv_smallk.py \
            tests/kernels/test_pointwise_conv.py tests/kernels/test_matmul_tma.py \
            tests/kernels/test_matmul.py > "$OUT/part2-tests.txt" 2>&1
        tail -n 15 "$OUT/part2-tests.txt" ;;
    reduction)
        profile red_new sum,mean
        profile red_old sum,mean --set reduction.STRAIGHT_ONE_CHUNK=False \
            --set reduction.COL_TALL_MAX_BYTES=0 --set reduction.ROW_BYTES_PER_THREAD=128 \
            --set reduction.COMBINE_TILE=4096 --set reduction.COMBINE_UNROLL=0
        profile red_sweep sum,mean --set reduction.COL_TALL_MIN_PROGRAMS=16 \
            --set reduction.COL_TALL_PER_THREAD=16 --set reduction.ROW_MIN_PROGRAMS=2048
        profile red_tile8k sum.dim_IntList --set reduction.COL_TALL_TILE=8192 ;;
    softmax)
        profile sm_base _softmax,_softmax_backward_data,_log_softmax,_log_softmax_backward_data \
            --kernels
        profile sm_v1 _softmax_backward_data --set softmax.BWD_MAX_VECS=1
        profile sm_v4 _softmax_backward_data --set softmax.BWD_MAX_VECS=4
        profile sm_p4 _softmax_backward_data --set softmax.BWD_PERSIST=4 ;;
    pointwise)
        ops=rsqrt,sqrt,clamp.default,hardsigmoid,reciprocal,add,mul,relu,exp
        profile pw_old "$ops" --set pointwise.SMALL_TILES=False
        profile pw_new "$ops"
        profile pw_fg "$ops" --set pointwise.MIN_BLOCK=512 ;;
    layernorm)
        ops=native_layer_norm_backward,native_layer_norm
        profile ln_new "$ops" --kernels
        profile ln_stages2 "$ops" --set norm.LN_BWD_STAGES=2
        profile ln_p264 "$ops" --set norm.LN_BWD_PROGRAMS=264
        profile ln_tile8k "$ops" --set norm.LN_BWD_TILE=8192 ;;
    matmul)
        python3 benchmarks/tune_matmul.py --shapes --traces .gpu_data/traces --jobs 12 --write \
            --out "$OUT/matmul-shapes-h100" > "$OUT/matmul-shapes.txt" 2>&1
        tail -n 25 "$OUT/matmul-shapes.txt"
        cp src/opbench/kernels/_lib/matmul_configs.py "$OUT/"
        profile mm_after mm,bmm,addmm ;;
    conv)
        python3 benchmarks/conv_probe.py --out "$OUT/conv-probe2-h100" > "$OUT/conv-probe.txt" 2>&1
        tail -n 40 "$OUT/conv-probe.txt"
        python3 benchmarks/conv_probe.py --cases 4,5 --parts forward --out "$OUT/conv-probe-dw-h100" \
            > "$OUT/conv-probe-dw.txt" 2>&1
        tail -n 30 "$OUT/conv-probe-dw.txt"
        OPBENCH_KERNEL_DEVICE=cuda timeout 120 python3 -m pytest -q -p no:cacheprovider -rfxX \
            --junitxml="$OUT/conv-tests.xml" tests/kernels/test_conv.py \
            -k "depthwise_direct and not gpu_tiles" > "$OUT/conv-tests.txt" 2>&1
        tail -n 15 "$OUT/conv-tests.txt" ;;
    *)
        echo "unknown section $section" ;;
    esac
done
