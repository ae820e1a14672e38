#!/usr/bin/env bash
# The convolution checks docs/results.md's "Pending GPU checks" lists (2026-12-01), in one
# call of about 560 s on a lent GPU machine (the device tool), from the repository root,
# carrying .gpu_data (the traces copied to .gpu_data/traces):
#   bash benchmarks/gpu/conv_pending.sh
# Each step is a benchmarks/probes/conv_heldout.py run with variants beside the defaults,
# by device time; its .md and .json land in $OUT. A step that runs past its share is cut
# and the next one runs.
#  1. the channels-last weight gradient's tile (128x128x32 on 8 warps and 3 stages is an
#     untimed first choice; the held-out [64, 256, 14, 14] 3x3 row's took 148.9 us against
#     cuDNN's 34.9): 64 and 128 positions a step, on the 20 most used backward rows and on
#     the strided ones, only the rows on that path;
#  2. the NCHW weight gradient's A runs (conv_backward.WGRAD_A_RUNS, built off) and the
#     split-K sum's vector line (matmul_shared.SUM_VECTORS_SM_SHARE) on the strided rows
#     that path serves (RGB stems: the tiny sums);
#  3. tests/kernels/test_conv_depthwise.py on the GPU (not yet run there since the
#     depthwise cases moved into it).
set -uo pipefail
source benchmarks/common/gpu_env.sh > /dev/null
TRACES=${TRACES:-.gpu_data/traces}
OUT=${OUT:-/tmp/conv-pending}
mkdir -p "$OUT"
start=$(date +%s)
P=benchmarks/probes/conv_heldout.py
W=conv_nhwc_wgrad
BWD=(--traces "$TRACES" --ops convolution_backward.default)

step() {  # NAME SECONDS ARGS...: one conv_heldout.py run, its summary and variant tables
    local name=$1 seconds=$2
    shift 2
    timeout "$seconds" python3 "$P" "${BWD[@]}" "$@" --out "$OUT/$name" 2>&1 | tail -1
    [ -f "$OUT/$name.md" ] && grep "^|" "$OUT/$name.md" | tail -10
    echo "$name: $(( $(date +%s) - start )) s"
}

step wgrad-tile-top20 170 --limit 20 --paths 'weight grad \(channels-last\)' \
    --variant bk64=$W.NHWC_WGRAD_BLOCK_K=64 \
    --variant bk64st4=$W.NHWC_WGRAD_BLOCK_K=64,$W.NHWC_WGRAD_STAGES=4 \
    --variant bk128st2=$W.NHWC_WGRAD_BLOCK_K=128,$W.NHWC_WGRAD_STAGES=2
step wgrad-tile-strided 150 --limit 25 --strided --paths 'weight grad \(channels-last\)' \
    --variant bk64=$W.NHWC_WGRAD_BLOCK_K=64 \
    --variant bk128st2=$W.NHWC_WGRAD_BLOCK_K=128,$W.NHWC_WGRAD_STAGES=2
step a-runs-strided 130 --limit 25 --strided --paths 'weight grad \(implicit GEMM\)' \
    --variant a_runs=conv_backward.WGRAD_A_RUNS=True \
    --variant sumvec_never=matmul_shared.SUM_VECTORS_SM_SHARE=1e9
left=$(( 550 - $(date +%s) + start ))
if [ "$left" -gt 30 ]; then
    OPBENCH_KERNEL_DEVICE=cuda timeout "$left" python3 -m pytest -q -p no:cacheprovider \
        tests/kernels/test_conv_depthwise.py 2>&1 | tail -2
fi
echo "done: $(( $(date +%s) - start )) s"
