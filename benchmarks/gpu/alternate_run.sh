#!/usr/bin/env bash
# Two backends judged in turns on one lent GPU machine, then who is ahead op by op
# (benchmarks/reproduce/alternate_report.py: a side is ahead where every one of its runs
# is above every run of the other). For the ops heldout_versus.py finds another backend
# ahead on: a comparison of two runs from two lends cannot tell a lead of 1-4% from the
# order the runs came in (2026-11-30).
#
# On a lent GPU machine, from the repository root, carrying .gpu_data (the traces in
# .gpu_data/traces) and, for FlagGems, .whl (its wheels in .whl/fg: benchmarks/common/gpu_env.sh):
#   OPS=hardsigmoid.default,rsqrt.default,bmm.default bash benchmarks/gpu/alternate_run.sh
# Environment: OPS (required), OURS (triton), THEIRS (module:flag_gems:enable), TURNS
# (3 runs a side: a lead then comes by chance alone one time in twenty), SPLIT (heldout),
# LIMIT_PER_OP (2). $OUT gets alternate-<names>.md/.json, device and host.
# The H200 took 15 s a run for 5 ops x 2 rows, FlagGems' first 28 s (2026-11-30).
set -uo pipefail
source benchmarks/common/gpu_env.sh
: "${OPS:?OPS=op,op,... (the ops to compare)}"
OURS=${OURS:-triton}
THEIRS=${THEIRS:-module:flag_gems:enable}
TURNS=${TURNS:-3}
ours_dirs=()
theirs_dirs=()
for turn in $(seq 1 "$TURNS"); do
  for side in ours theirs; do
    backend=$([ "$side" = ours ] && echo "$OURS" || echo "$THEIRS")
    dir=/tmp/alternate-$side-$turn
    rm -rf "$dir"
    start=$(date +%s)
    python3 -m opbench.cli run --suite traces --traces .gpu_data/traces --trace-split "${SPLIT:-heldout}" \
      --backend "$backend" --device cuda --perf --limit-per-op "${LIMIT_PER_OP:-2}" --ops "$OPS" \
      --out "$dir" --quiet > "$dir.log" 2>&1
    rc=$?
    echo "turn $turn $side ($backend): exit $rc, $(( $(date +%s) - start )) s"
    # 0 whole, 3 incomplete (a judge error): the report compares what passed in every run
    if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then tail -20 "$dir.log" >&2; exit "$rc"; fi
    if [ "$side" = ours ]; then ours_dirs+=("$dir"); else theirs_dirs+=("$dir"); fi
  done
done
name=$(echo "$OURS" | cut -d: -f2)-$(echo "$THEIRS" | cut -d: -f2)
for measure in device host; do
  python3 benchmarks/reproduce/alternate_report.py --ours "${ours_dirs[@]}" --theirs "${theirs_dirs[@]}" \
    --names "$(echo "$OURS" | cut -d: -f2),$(echo "$THEIRS" | cut -d: -f2)" --measure "$measure" \
    --out "$OUT/alternate-$name-$measure"
done
