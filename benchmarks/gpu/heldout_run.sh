#!/usr/bin/env bash
# The judged run issue #36's done-when asks for: the reference Triton backend (or, with
# BACKEND=module:flag_gems:enable, FlagGems) on the held-out half of the traces, every
# served op, --limit-per-op 2, then benchmarks/reproduce/heldout_report.py over it.
#
# On a lent GPU machine (the device tool), from the repository root, carrying
# .gpu_data (the traces copied to .gpu_data/traces; FlagGems' wheels in .whl/fg when
# BACKEND names it, see benchmarks/common/gpu_env.sh):
#   bash benchmarks/gpu/heldout_run.sh             # first call: runs until LIMIT seconds
#   RESUME=1 bash benchmarks/gpu/heldout_run.sh    # next calls on the same machine: resumes
# The run directory lives in /tmp (/tmp/<HALF>-run; a carried folder is replaced on every
# call), and is packed into $OUT/heldout-run.tgz after every call, so a machine given back
# loses nothing: the next machine unpacks it with RESTORE=path/to/heldout-run.tgz (carried).
# Once the run is whole, $OUT holds the report (triton-heldout-<GPU>.json and .md); set
# COMMIT=<the commit run> for its command line (the GPU machine's copy has no reliable git).
# The H200 took 335 + 101 s for 124 tests over 63 ops (2026-11-29).
# LIMIT_PER_OP (2) sets the rows an op: `all` judges every held-out row of every served op
# (6,712 distinct rows, 2026-12-01), which the done-when asks for and the two most used
# rows an op hide: no strided convolution is among them, and the strided backward rows
# read 0.35x eager where the 2-row file read 0.86x. That is 4-7 hours of one H200 (SHARD
# below): ask for several (nvidia-h200-x4 or -x8) and set WORKERS to their count (a
# worker a GPU, round-robin), and let RESUME/RESTORE carry it across calls. Its files are
# named triton-heldout-<gpu>-all-rows.
# OPS=a,b judges those ops only; NAME=word puts the word in the files' names
# (triton-heldout-h200-matmul-all-rows-shard-1-of-4 for OPS=mm,bmm,addmm,baddbmm NAME=matmul).
# HALF=tuning judges the tuning half instead (the rows the backend was tuned on; its
# report, triton-tuning-<gpu>..., goes beside the held-out one: issue #36 asks for both).
# SHARD=K/N judges part K of N of those tests (opbench run --shard: a stable split by test
# id, disjoint, together the whole run): a run too long for one lend goes part by part,
# on any machines on any days (parts merged must be judged at one commit), each part's
# report (...-all-rows-shard-K-of-N) committed, then merged:
#   python benchmarks/reproduce/heldout_report.py --merge benchmarks/results/triton-heldout-h200-all-rows-shard-*-of-16*.json --gpu h200 --name all-rows
# Every held-out row is 4-7 hours of one H200: part 1 of 16 judged 76 tests of its first
# 8 ops in 400 s (2026-12-02: 84 s before the first result, then 0.95-2 s a test, a new
# worker an op, matmul rows compiling their kernels), so a part of 16 takes several
# calls (RESUME=1 / RESTORE=) and the whole run many sessions' device time.
set -uo pipefail
source benchmarks/common/gpu_env.sh
HALF=${HALF:-heldout}
RUN=${RUN:-/tmp/$HALF-run}  # one a half: a warm machine keeps both
LIMIT=${LIMIT:-500}
BACKEND=${BACKEND:-triton}
LIMIT_PER_OP=${LIMIT_PER_OP:-2}
GPU=${GPU:-$(python3 -c "import torch; n = torch.cuda.get_device_name(); print(next((g for g in ('h100', 'h200', 'b200', 'a100') if g in n.lower()), 'gpu'))")}
# every op the reference backend serves that the traces use: benchmarks/reproduce/
# triton_backend.py's COVERED (part 1) and PART2 (the matmul family, convolution)
OPS=${OPS:-$(python3 -c "import sys; sys.path.insert(0, 'benchmarks/reproduce'); import triton_backend as t; print(t.COVERED + ',' + t.PART2)")}
if [ -n "${RESTORE:-}" ]; then mkdir -p "$(dirname "$RUN")" && tar xzf "$RESTORE" -C "$(dirname "$RUN")"; fi
# python3 -m opbench.cli, not the opbench() function of gpu_env.sh: timeout runs programs
CMD=(python3 -m opbench.cli run --suite traces --traces .gpu_data/traces --trace-split "$HALF" --backend "$BACKEND"
     --device "${DEVICE:-cuda}" --perf --ops "$OPS" --out "$RUN" --quiet)
[ "$LIMIT_PER_OP" = all ] || CMD+=(--limit-per-op "$LIMIT_PER_OP")
[ -n "${WORKERS:-}" ] && CMD+=(--workers "$WORKERS")
[ -n "${SHARD:-}" ] && CMD+=(--shard "$SHARD")
[ -n "${RESUME:-}${RESTORE:-}" ] && CMD+=(--resume)
echo "${CMD[*]}"
timeout "$LIMIT" "${CMD[@]}"
rc=$?
pack_run "$RUN" "$OUT/heldout-run.tgz"
# opbench run: 0 whole, 3 incomplete (judge errors or tests left unrecorded: --resume
# runs them), anything else an error (a bad --ops, say) with no run worth reporting
partial=()
if [ "$rc" = 124 ] || [ "$rc" = 3 ]; then
  echo "cut at ${LIMIT}s or incomplete (exit $rc): call again with RESUME=1 (same machine) or RESTORE=<the .tgz> (a new one); the report below is what it holds (-partial)"
  partial=(--partial)
elif [ "$rc" != 0 ]; then
  echo "opbench run failed (exit $rc): no report" >&2
  exit "$rc"
fi
# module:flag_gems:enable -> flag_gems beside the GPU's name in the files' names
name=$([ "$BACKEND" = triton ] || echo "$BACKEND" | cut -d: -f2)
[ "$LIMIT_PER_OP" = all ] && name="${name:+$name-}all-rows"
[ -n "${SHARD:-}" ] && name="${name:+$name-}shard-${SHARD%/*}-of-${SHARD#*/}"
# NAME=matmul (say, beside OPS=mm,bmm,addmm,baddbmm) goes first: a subset's files say so
[ -n "${NAME:-}" ] && name="$NAME${name:+-$name}"
label=$([ "$BACKEND" = triton ] && echo "Triton backend" || echo "$BACKEND")
python3 benchmarks/reproduce/heldout_report.py "$RUN" --gpu "$GPU" --name "$name" --label "$label" --out-dir "$OUT" --half "$HALF" \
  --command "${CMD[*]} (benchmarks/gpu/heldout_run.sh${COMMIT:+ at $COMMIT})" ${partial[@]+"${partial[@]}"}
