"""One candidate kind against another on the same configuration, over ``matmul_paths.py``
sweeps: how much a change of kernel costs or gains where the tile, warps, stages and
split are held fixed, grouped by tile and split.

Why: a sweep's headline (the best candidate of each product) says whether a kind ever
wins, not why it loses. Timed beside its twin on the same configuration, a kind's cost
shows by split count: the in-launch split-K sum (``ptr1``, timed on an H200 on
2026-11-29 and removed) lost more the more splits a tile had, which placed its cost in
the sum its tile's last program ran alone, not in the main loop.

Usage: ``python benchmarks/tune/matmul_twins.py SWEEP... --kind ptr1 --twin ptr``
(the sweeps merged as ``matmul_rule.py`` merges them).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_rule import merge_sweeps  # noqa: E402

from opbench.report.means import geomean  # noqa: E402

__all__ = ["best_other", "main", "twin_ratios"]


def twin_ratios(rows: list[dict], kind: str, twin: str) -> dict[tuple, list[float]]:
    """``twin time / kind time`` for every configuration timed under both names (above 1:
    ``kind`` is faster), keyed by (tile M, tile N, split count; 1 where unsplit)."""
    out: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        times = r["times"]
        for name, t in times.items():
            if not name.startswith(kind + ":"):
                continue
            other = times.get(twin + name[len(kind) :])
            if other is None or not (math.isfinite(t) and math.isfinite(other)):
                continue
            cfg = json.loads(name[len(kind) + 1 :])
            out[(cfg[0], cfg[1], cfg[6] if len(cfg) > 6 else 1)].append(other / t)
    return out


def best_other(rows: list[dict], kind: str) -> tuple[int, int]:
    """(products where ``kind`` was timed, those where it beat every other candidate)."""
    timed = wins = 0
    for r in rows:
        mine = [t for n, t in r["times"].items() if n.startswith(kind + ":")]
        rest = [t for n, t in r["times"].items()
                if ":" in n and n != "served:" and not n.startswith(kind + ":")]  # fmt: skip
        if mine and rest:
            timed += 1
            wins += min(mine) < min(rest)
    return timed, wins


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--kind", required=True, help="the candidate kind judged (ptr1)")
    ap.add_argument("--twin", required=True, help="the kind it is set against (ptr)")
    opt = ap.parse_args()
    rows = merge_sweeps(opt.sweeps)
    timed, wins = best_other(rows, opt.kind)
    ratios = twin_ratios(rows, opt.kind, opt.twin)
    every = [x for xs in ratios.values() for x in xs]
    if not every:
        print(f"no configuration timed as both {opt.kind} and {opt.twin}")
        return 1
    print(f"{opt.kind}: fastest of all candidates on {wins} of {timed} products")
    print(f"{opt.twin} time / {opt.kind} time, same configuration (above 1: {opt.kind} faster): "
          f"geomean {geomean(every):.3f} over {len(every)}")  # fmt: skip
    print("| tile | splits | configurations | geomean | worst | best |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (bm, bn, s), xs in sorted(ratios.items()):
        print(
            f"| {bm}x{bn} | {s} | {len(xs)} | {geomean(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
