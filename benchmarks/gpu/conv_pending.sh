#!/usr/bin/env bash
# GPU checks of batch norm's row kernels and the depthwise row walk: steps 1-2 decided
# batch_norm.BN_ROW_VECTORS and conv_depthwise_rows.DW_ROWS_MIN_PROGRAMS (H200,
# 2026-12-02: both on, bn-row-vectors-h200-2026-12-02 and
# dw-rows-fill-batch1-h200-2026-12-02 in benchmarks/results; run them again after
# changing either kernel); steps 3-4 decided batch_norm.BN_TARGET_PROGRAMS (256) and
# matmul.SPLIT_WHOLE_WAVES (on) the same day (bn-row-settings-h200-2026-12-02,
# split-whole-waves-h200-2026-12-02; the matmuls' own A/B, over every traced product,
# kept it on the same day: split-waves-matmul-h200-2026-12-02.jsonl); steps 5-7 decided NHWC_SHARE_COPIES (on),
# the ALIGN_PARTIAL pair (on) and the channels-last depthwise walks (on; their A/B over
# the channels-last rows themselves is dw-cl-rows-cl-h200-2026-12-02, whose command is in
# docs/results.md) the same day: share-copies*, align-partial*, dw-cl-rows* in
# benchmarks/results (step 5's files read every row "unchanged": conv_heldout.py counted
# no copy launches then). Steps 5-7 now time the settings turned off against the
# defaults; run a step again after changing its kernels. Every step together is longer
# than one call of a lent GPU machine (10 minutes): choose them with STEPS (on the H200,
# 2026-12-02: steps 5 and 6 took 486 s, step 7 116 s, 8 and 9 274 s). From
# the repository root, carrying .gpu_data (the traces copied to .gpu_data/traces):
#   STEPS=89 bash benchmarks/gpu/conv_pending.sh    # only steps 8 and 9
#   STEPS=34 bash benchmarks/gpu/conv_pending.sh    # only steps 3 and 4
# Each step writes its .md and .json into $OUT; a step that runs past its share is cut and
# the next one runs.
#  1. batch norm's row kernels (2-D and channels-last inputs) with their channel vectors
#     (batch_norm.BN_ROW_VECTORS): their GPU tests (with test_norm.py's batch norm ones:
#     80 s), then the A/B against scalar rows on the 8 most used such rows of each half
#     and op, device time, each setting's results checked against eager;
#  2. the depthwise row walk's grid fill (conv_depthwise_rows.DW_ROWS_MIN_PROGRAMS, 264):
#     its GPU tests, and the A/B without it on the 3x3 depthwise rows of each half
#     rewritten to one image (conv_heldout.py --batch 1), where grids are smallest;
#  3. batch norm's row kernels' untimed settings (the merge tile, the programs the
#     statistics pass aims for, the finalize's channels a program) against the defaults
#     on the 8 most used such rows of each half, device time, the tuning half deciding;
#  4. matmul.SPLIT_WHOLE_WAVES (split-K grids kept within two programs an SM) on the 20
#     most used backward rows of each half, device time (--profile), the tuning half
#     deciding; the rows it leaves alone are the noise floor.
#  5. channels_last_copy.NHWC_SHARE_COPIES (a backward copies grad_output to channels-last once for
#     both gradients; on) against copying it twice, on the 25 most used strided
#     backward rows of each half and the 20 most used backward rows, device time.
#  6. conv_nhwc.NHWC_X_ALIGN_PARTIAL and conv_nhwc_wgrad.NHWC_WGRAD_ALIGN_PARTIAL (rows
#     aligned to 4 or 2 channels copied by 8- or 4-byte cp.async; on): the
#     channels-last GEMMs' GPU tests, then the A/B on the 25 most used strided backward
#     rows of each half and the 20 most used rows of each op, device time.
#  7. conv_depthwise_cl_rows.DW_CL_ROWS (channels-last depthwise convolutions of up to 7x7
#     walking their rows) and conv_depthwise_wgrad_cl_walk.DWG_CL_WALK (their weight
#     gradient the same way; both on): their GPU tests, then each off and both, and the
#     forward's 64-channel tile, on the 12 most used channels-last depthwise rows of each
#     half and op, device time, the tuning half deciding; and (unmixed)
#     conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_MIXED off: a channels-last input beside a
#     contiguous grad_output copies grad_output and walks (on since the tuning half's
#     Twins rows read 2.19x faster with it, dw-cl-rows-cl-h200-2026-12-02-mixed).
#  8. the channels-last depthwise walks' GPU tests, then the forward walk's settings turned
#     off against its defaults (channel runs: noruns; 8 warps in place of 4: dw8w) and its
#     loop pipelined 3 rows deep (stages3), on the 12 most used depthwise rows of each half
#     and op made channels-last (conv_heldout.py --channels-last: the tuning half's own
#     channels-last depthwise rows are four 3x3 ones), device time;
#  9. the same for the weight-gradient walk (backward rows): runs off, 4 fixed warps in
#     place of warps by its tile (dwgwarps4), a fill of 1,056 programs, 32 channels, 3
#     stages. Both steps decided the walks' defaults on the H200 (2026-12-02: channel runs
#     on in both, the forward on 4 warps, the weight gradient's warps by its tile; the
#     rest off): the first timing against the old defaults is dw-cl-walk-settings and
#     dwg-cl-walk-settings, the second against the new ones dw-cl-walk-defaults and
#     dwg-cl-walk-defaults (benchmarks/results, -h200-2026-12-02; 274 s for both steps).
#     Why: the weight gradient ran 1,974 us against cuDNN's 38 on the tuning half's
#     [16, 216, 42, 42] 3x3 (every access 2 bytes wide where channels are no multiple of
#     16); with runs, 60.
set -uo pipefail
source benchmarks/common/gpu_env.sh > /dev/null
TRACES=${TRACES:-.gpu_data/traces}
OUT=${OUT:-/tmp/conv-pending}
mkdir -p "$OUT"
STEPS=${STEPS:-123456789}
start=$(date +%s)
step() { [[ "$STEPS" == *"$1"* ]]; }
if step 1; then
OPBENCH_KERNEL_DEVICE=cuda timeout 150 python3 -m pytest -q -p no:cacheprovider -m "" --tb=short \
    tests/kernels/test_batch_norm_rows.py tests/kernels/test_norm.py -k batch_norm 2>&1 | tail -30
echo "bn tests: $(( $(date +%s) - start )) s"
timeout 150 python3 benchmarks/probes/bn_plane_runs.py --traces "$TRACES" --limit 8 --rows \
    --out "$OUT/bn-row-vectors" 2>&1 | tail -12
echo "bn rows: $(( $(date +%s) - start )) s"
fi
if step 2; then
OPBENCH_KERNEL_DEVICE=cuda timeout 90 python3 -m pytest -q -p no:cacheprovider -m "" \
    tests/kernels/test_conv_depthwise_rows.py 2>&1 | tail -3
timeout 120 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 12 --batch 1 \
    --match 'T\(\[\d+, 1, 3, 3\]' --variant nofill=conv_depthwise_rows.DW_ROWS_MIN_PROGRAMS=0 \
    --out "$OUT/dw-rows-fill-batch1" 2>&1 | tail -1
grep "^| nofill" "$OUT/dw-rows-fill-batch1.md"
echo "fill: $(( $(date +%s) - start )) s"
fi
if step 3; then
timeout 120 python3 benchmarks/probes/bn_plane_runs.py --traces "$TRACES" --limit 8 --rows \
    --variant target1024=batch_norm.BN_TARGET_PROGRAMS=1024 \
    --variant target4096=batch_norm.BN_TARGET_PROGRAMS=4096 \
    --variant tile1024=batch_norm.BN_MERGE_TILE=1024 \
    --variant final128=batch_norm.BN_FINALIZE_BLOCK=128 \
    --out "$OUT/bn-row-settings" 2>&1 | grep -A20 "Each variant"
echo "bn settings: $(( $(date +%s) - start )) s"
fi
if step 4; then
timeout 150 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 20 --profile \
    --ops convolution_backward.default --variant rounded_up=matmul.SPLIT_WHOLE_WAVES=False \
    --out "$OUT/split-whole-waves" 2>&1 | tail -1
grep "^| rounded_up" "$OUT/split-whole-waves.md"
fi
if step 5; then
for rows in "--limit 25 --strided" "--limit 20"; do
  name=share-copies$([[ "$rows" == *strided* ]] && echo -strided)
  timeout 150 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" $rows --profile \
      --ops convolution_backward.default --variant apart=channels_last_copy.NHWC_SHARE_COPIES=False \
      --out "$OUT/$name" 2>&1 | tail -1
  grep "^| apart" "$OUT/$name.md"
done
fi
if step 6; then
# 300 s: 150 cut it after 188 of its ~245 tests (first calls' compiles; H200, 2026-12-02)
OPBENCH_KERNEL_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider -m "" \
    tests/kernels/test_conv_nhwc.py 2>&1 | tail -3
for rows in "--ops convolution_backward.default --limit 25 --strided" "--limit 20"; do
  name=align-partial$([[ "$rows" == *strided* ]] && echo -strided)
  timeout 200 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" $rows --profile \
      --variant whole=conv_nhwc.NHWC_X_ALIGN_PARTIAL=False,conv_nhwc_wgrad.NHWC_WGRAD_ALIGN_PARTIAL=False \
      --out "$OUT/$name" 2>&1 | tail -1
  grep "^| whole" "$OUT/$name.md"
done
fi
if step 7; then
OPBENCH_KERNEL_DEVICE=cuda timeout 120 python3 -m pytest -q -p no:cacheprovider -m "" \
    tests/kernels/test_conv_depthwise_cl_rows.py tests/kernels/test_conv_depthwise_wgrad_cl_walk.py \
    2>&1 | tail -3
timeout 240 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 12 --profile \
    --match 'stride=\(\d+, 1, \d+, \d+\)\), T\(\[\d+, 1, [3-7], [3-7]\]' \
    --variant gather=conv_depthwise_cl_rows.DW_CL_ROWS=False \
    --variant walk64=conv_depthwise_cl_rows.DW_CL_ROWS_BLOCK_C=64 \
    --variant taprows=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK=False \
    --variant neither=conv_depthwise_cl_rows.DW_CL_ROWS=False,conv_depthwise_wgrad_cl_walk.DWG_CL_WALK=False \
    --variant unmixed=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_MIXED=False \
    --out "$OUT/dw-cl-rows-cl" 2>&1 | tail -1
grep -E "^\| (gather|walk64|taprows|neither|unmixed) " "$OUT/dw-cl-rows-cl.md"
fi
if step 8; then
OPBENCH_KERNEL_DEVICE=cuda timeout 120 python3 -m pytest -q -p no:cacheprovider -m "" \
    tests/kernels/test_conv_depthwise_cl_rows.py tests/kernels/test_conv_depthwise_wgrad_cl_walk.py \
    2>&1 | tail -3
timeout 200 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 12 --profile \
    --channels-last --match 'T\(\[\d+, 1, [3-7], [3-7]\]' \
    --variant noruns=conv_depthwise_cl_rows.DW_CL_ROWS_ALIGN_RUNS=False \
    --variant dw8w=conv_depthwise_cl_rows.DW_CL_ROWS_WARPS=8 \
    --variant stages3=conv_depthwise_cl_rows.DW_CL_ROWS_STAGES=3 \
    --out "$OUT/dw-cl-walk-defaults" 2>&1 | tail -1
grep -E "^\| (noruns|dw8w|stages3) " "$OUT/dw-cl-walk-defaults.md"
echo "walk settings: $(( $(date +%s) - start )) s"
fi
if step 9; then
timeout 250 python3 benchmarks/probes/conv_heldout.py --traces "$TRACES" --limit 12 --profile \
    --channels-last --match 'T\(\[\d+, 1, [3-7], [3-7]\]' --ops convolution_backward.default \
    --variant dwgnoruns=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_ALIGN_RUNS=False \
    --variant dwgfill1k=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_MIN_PROGRAMS=1056 \
    --variant dwgbc32=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_BLOCK_C=32 \
    --variant dwgwarps4=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_THREAD_ELEMS=None \
    --variant dwgstages3=conv_depthwise_wgrad_cl_walk.DWG_CL_WALK_STAGES=3 \
    --out "$OUT/dwg-cl-walk-defaults" 2>&1 | tail -1
grep -E "^\| (dwgnoruns|dwgfill1k|dwgbc32|dwgwarps4|dwgstages3) " "$OUT/dwg-cl-walk-defaults.md"
fi
echo "done: $(( $(date +%s) - start )) s"
