"""The NCHW -> channels-last transpose (:func:`opbench.kernels._lib.channels_last_copy.channels_last_5d`)
on the traced convolutions' inputs, timed on each of a set of tiles beside PyTorch's
permuted copy: the transpose took 8-133 us of device time a call in front of the
channels-last implicit GEMM on an H200 (2026-11-29, ``conv-heldout-h200-2026-11-29-unrolled``:
13.9 us for ``[64, 256, 14, 14]`` f16, 12.8 MB moved, 0.9 TB/s), a third of some rows.

Each result is checked bit for bit against ``x.contiguous(memory_format=channels_last)``
first. Timing: device time by the judge's protocol (``benchmarks/tune/matmul_timing.py``'s
``device_bench``: L2 overwritten and the GPU kept busy while the host queues each call),
median of 15. The report gives each tile's time against the first tile's, on the tuning
half's inputs and, beside it, the held-out half's, and the fastest tile per channel count
as the tuning half alone picks it (``channels_last_copy.TRANSPOSE_TILE*``).

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/transpose_tiles.py --out $OUT/transpose.json
then, on any machine, the report of a committed run:
    python benchmarks/probes/transpose_tiles.py --report benchmarks/results/transpose-tiles-h200-2026-11-29.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))

from opbench.report.means import geomean  # noqa: E402

__all__ = ["SHAPES", "TILES", "main", "report"]

#: Inputs of the traced convolutions the channels-last implicit GEMM serves, by the half
#: of the traces their rows are in (``conv_heldout.py`` rows of 2026-11-29, split by
#: ``src/opbench/suites/trace_split.json``): picked on ``tuning``, reported on ``heldout``.
SHAPES = {
    (128, 72, 14, 14): "tuning", (128, 56, 14, 14): "tuning", (128, 144, 7, 7): "tuning",
    (32, 2048, 14, 14): "tuning", (3, 256, 130, 130): "tuning",
    (64, 256, 14, 14): "heldout", (64, 104, 14, 14): "heldout", (64, 128, 14, 14): "heldout",
    # 2026-12-01: the strided backward rows' large inputs (positions a multiple of 8, or not)
    (128, 256, 64, 64): "tuning", (128, 288, 35, 35): "tuning",
    (64, 128, 56, 56): "heldout", (8, 128, 96, 128): "heldout",
}  # fmt: skip
#: (BLOCK_C, BLOCK_S, warps); the first is the one before 2026-11-29, the baseline
TILES = [
    (64, 64, 4), (32, 64, 4), (64, 32, 4), (32, 32, 4), (128, 32, 4), (32, 128, 4),
    (64, 64, 8), (128, 64, 8), (64, 128, 8), (16, 64, 2), (64, 16, 2),
]  # fmt: skip


def _name(tile: tuple[int, int, int]) -> str:
    return f"{tile[0]}x{tile[1]}/{tile[2]}w"


def report(result: dict[str, Any], small_c_max: int = 128) -> list[str]:
    """Markdown lines: each tile's time over the baseline's (geomean), on each half, on
    every input and on those of at most / more than ``small_c_max`` channels, and the
    tuning half's pick for each channel class. A row whose tile failed its check counts
    as missing there (and the tile is never picked)."""
    base = _name(TILES[0])
    rows = result["rows"]
    half_of = {tuple(k): v for k, v in ((tuple(r["shape"]), SHAPES.get(tuple(r["shape"])))
                                         for r in rows)}  # fmt: skip
    classes = {"all": lambda c: True, f"<= {small_c_max} channels": lambda c: c <= small_c_max,
               f"> {small_c_max} channels": lambda c: c > small_c_max}  # fmt: skip
    out = [f"Device time over {base}'s (geomean; below 1: faster). {result.get('gpu', '')}, "
           f"torch {result.get('torch', '')}; `{result.get('command', '')}`", "",
           "| tile | " + " | ".join(f"{h}: {c}" for h in ("tuning", "heldout") for c in classes)
           + " |", "| --- |" + " --- |" * (2 * len(classes))]  # fmt: skip
    picks: dict[str, tuple[float, str]] = {}
    for name in [*map(_name, TILES), "torch"]:
        cells = []
        for half in ("tuning", "heldout"):
            for cname, pred in classes.items():
                ratios = [(r["torch_us"] if name == "torch" else r["tiles"].get(name))
                          / r["tiles"][base]
                          for r in rows if half_of[tuple(r["shape"])] == half
                          and pred(r["shape"][1])
                          and (name == "torch" or r["tiles"].get(name))]  # fmt: skip
                g = geomean(ratios)
                cells.append("-" if g is None else f"{g:.3f}")
                if half == "tuning" and g is not None and name != "torch":
                    picks[cname] = min(picks.get(cname, (math.inf, "")), (g, name))
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "Picked on the tuning half: " + "; ".join(
        f"{c}: {n} ({g:.3f})" for c, (g, n) in picks.items())]  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON results (a GPU run)")
    ap.add_argument("--report", help="a committed run's JSON: print its report, time nothing")
    ap.add_argument("--dtype", default="float16")
    opt = ap.parse_args()
    if opt.report:
        print("\n".join(report(json.loads(Path(opt.report).read_text()))))
        return 0
    if not opt.out:
        ap.error("--out (a GPU run) or --report FILE")
    import torch
    from matmul_timing import device_bench

    from opbench.kernels._lib import channels_last_copy

    dtype = getattr(torch, opt.dtype)
    rows = []
    for shape in SHAPES:
        x = torch.randn(shape, device="cuda").to(dtype)
        want = x.contiguous(memory_format=torch.channels_last)
        x5 = x.unsqueeze(2)
        row = {"shape": list(shape), "bytes": 2 * x.numel() * x.element_size(),
               "torch_us": 1e3 * device_bench(lambda x=x: x.contiguous(memory_format=torch.channels_last)),
               "tiles": {}}  # fmt: skip
        for tile in TILES:
            channels_last_copy.TRANSPOSE_TILE = channels_last_copy.TRANSPOSE_TILE_SMALL_C = tile
            got = channels_last_copy.channels_last_5d(x5).squeeze(2)
            if not torch.equal(got, want):
                row["tiles"][_name(tile)] = None
                continue
            row["tiles"][_name(tile)] = 1e3 * device_bench(
                lambda x5=x5: channels_last_copy.channels_last_5d(x5)
            )
        best = min((t, n) for n, t in row["tiles"].items() if t is not None)
        print(f"{shape}: torch {row['torch_us']:.1f} us, {_name(TILES[0])} "
              f"{row['tiles'][_name(TILES[0])]:.1f}, best {best[1]} {best[0]:.1f} "
              f"({row['bytes'] / best[0] / 1e3:.0f} GB/s)", flush=True)  # fmt: skip
        rows.append(row)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "command": " ".join(sys.argv), "rows": rows}  # fmt: skip
    Path(opt.out).write_text(json.dumps(result, indent=1) + "\n")
    print("\n".join(report(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
