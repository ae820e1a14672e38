#!/usr/bin/env bash
# The checks docs/results.md's "Pending GPU checks" lists (after 2026-12-01's lends), in
# one call of about 560 s on a lent GPU machine (the device tool), from the repository
# root, carrying .gpu_data (the traces copied to .gpu_data/traces):
#   bash benchmarks/gpu/conv_pending.sh
# Each step writes its .md and .json into $OUT; a step that runs past its share is cut and
# the next one runs.
#  1. batch norm's row kernels (2-D and channels-last inputs) with their channel vectors
#     (batch_norm.BN_ROW_VECTORS, built and tested on the CPU, off until this A/B) against
#     without, on the 8 most used such rows of each half and op, device time;
#  2. why the channels-last weight gradient trails cuDNN 3.5x on the held-out
#     [64, 256, 14, 14] 3x3 row (121.7 us against 34.9): Nsight Compute's warp stall
#     reasons for _nhwc_wgrad_kernel on that row, where ncu is on the machine;
#  3. the depthwise weight gradient's row walk (conv_depthwise_wgrad_walk.DWG_WALK, built
#     and tested on the CPU, off until this A/B) against the tensor-core kernel, on the
#     12 most used 3x3 depthwise backward rows of each half, and its GPU tests;
#  4. the depthwise row walk's grid fill (conv_depthwise_rows.DW_ROWS_MIN_PROGRAMS, off)
#     on the 3x3 depthwise rows of one image (the held-out half's 88-channel ones);
#  5. the rest of tests/kernels/test_conv.py on the GPU (not yet run there whole).
set -uo pipefail
source benchmarks/common/gpu_env.sh > /dev/null
TRACES=${TRACES:-.gpu_data/traces}
OUT=${OUT:-/tmp/conv-pending}
mkdir -p "$OUT"
start=$(date +%s)
timeout 150 python3 benchmarks/probes/bn_plane_runs.py --traces "$TRACES" --limit 8 --rows \
    --out "$OUT/bn-row-vectors" 2>&1 | tail -12
echo "bn rows: $(( $(date +%s) - start )) s"
if command -v ncu > /dev/null; then
    timeout 150 ncu --kernel-name regex:_nhwc_wgrad_kernel --launch-count 1 \
        --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
        python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 1 \
        --ops convolution_backward.default --match 'T\(\[64, 256, 14, 14\], f16\), T\(\[64, 256, 14, 14\]' \
        --no-profile > "$OUT/nhwc-wgrad-ncu.txt" 2>&1
    grep -E "Stall|Throughput|Duration|Warp Cycles" "$OUT/nhwc-wgrad-ncu.txt" | head -40
else
    echo "no ncu on this machine: step 2 skipped"
fi
echo "ncu: $(( $(date +%s) - start )) s"
timeout 120 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 12 \
    --ops convolution_backward.default --match 'T\(\[\d+, 1, 3, 3\]' \
    --variant walk=conv_depthwise_wgrad_walk.DWG_WALK=True --out "$OUT/dwg-walk" 2>&1 | tail -1
grep "^| walk" "$OUT/dwg-walk.md"
OPBENCH_KERNEL_DEVICE=cuda timeout 60 python3 -m pytest -q -p no:cacheprovider \
    tests/kernels/test_conv_depthwise_wgrad_walk.py 2>&1 | tail -2
echo "dwg walk: $(( $(date +%s) - start )) s"
timeout 60 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 12 \
    --match 'T\(\[1, \d+, \d+, \d+\], f16\), T\(\[\d+, 1, 3, 3\]' \
    --variant fill=conv_depthwise_rows.DW_ROWS_MIN_PROGRAMS=264 --out "$OUT/dw-rows-fill" 2>&1 | tail -1
grep "^| fill" "$OUT/dw-rows-fill.md"
echo "fill: $(( $(date +%s) - start )) s"
left=$(( 560 - $(date +%s) + start ))
if [ "$left" -gt 30 ]; then
    OPBENCH_KERNEL_DEVICE=cuda timeout "$left" python3 -m pytest -q -p no:cacheprovider \
        tests/kernels/test_conv.py 2>&1 | tail -3
fi
echo "done: $(( $(date +%s) - start )) s"
