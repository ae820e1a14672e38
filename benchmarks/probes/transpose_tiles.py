"""The NCHW -> channels-last transpose (:func:`opbench.kernels._lib.conv_nhwc.channels_last_5d`)
on the traced convolutions' inputs, timed on each of a set of tiles beside PyTorch's
permuted copy: the transpose took 8-133 us of device time a call in front of the
channels-last implicit GEMM on an H200 (2026-11-29, ``conv-heldout-h200-2026-11-29-unrolled``:
13.9 us for ``[64, 256, 14, 14]`` f16, 12.8 MB moved, 0.9 TB/s), a third of some rows.

Each result is checked bit for bit against ``x.contiguous(memory_format=channels_last)``
first. Timing: device time by the judge's protocol (``benchmarks/tune/matmul_timing.py``'s
``device_bench``: L2 overwritten and the GPU kept busy while the host queues each call),
median of 15.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/transpose_tiles.py --out $OUT/transpose.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))

#: Inputs of the traced convolutions the channels-last implicit GEMM serves (both halves:
#: a tile is a kernel setting, timed here on the shapes it will see; the rows' own
#: speed-ups are measured by conv_heldout.py on each half).
SHAPES = [
    (64, 256, 14, 14), (64, 104, 14, 14), (128, 72, 14, 14), (128, 56, 14, 14),
    (128, 144, 7, 7), (32, 2048, 14, 14), (3, 256, 130, 130), (64, 128, 14, 14),
]  # fmt: skip
#: (BLOCK_C, BLOCK_S, warps)
TILES = [
    (64, 64, 4), (32, 64, 4), (64, 32, 4), (32, 32, 4), (128, 32, 4), (32, 128, 4),
    (64, 64, 8), (128, 64, 8), (64, 128, 8), (16, 64, 2), (64, 16, 2),
]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results")
    ap.add_argument("--dtype", default="float16")
    opt = ap.parse_args()
    import torch
    from matmul_timing import device_bench

    from opbench.kernels._lib import conv_nhwc

    dtype = getattr(torch, opt.dtype)
    rows = []
    for shape in SHAPES:
        x = torch.randn(shape, device="cuda").to(dtype)
        want = x.contiguous(memory_format=torch.channels_last)
        x5 = x.unsqueeze(2)
        row = {"shape": list(shape), "bytes": 2 * x.numel() * x.element_size(),
               "torch_us": 1e3 * device_bench(lambda x=x: x.contiguous(memory_format=torch.channels_last)),
               "tiles": {}}  # fmt: skip
        for bc, bs, warps in TILES:
            conv_nhwc.TRANSPOSE_TILE = conv_nhwc.TRANSPOSE_TILE_SMALL_C = (bc, bs, warps)
            name = f"{bc}x{bs}/{warps}w"
            got = conv_nhwc.channels_last_5d(x5).squeeze(2)
            if not torch.equal(got, want):
                row["tiles"][name] = None
                continue
            row["tiles"][name] = 1e3 * device_bench(lambda x5=x5: conv_nhwc.channels_last_5d(x5))
        best = min((t, n) for n, t in row["tiles"].items() if t is not None)
        print(f"{shape}: torch {row['torch_us']:.1f} us, 64x64/4w {row['tiles']['64x64/4w']:.1f}, "
              f"best {best[1]} {best[0]:.1f} ({row['bytes'] / best[0] / 1e3:.0f} GB/s)", flush=True)  # fmt: skip
        rows.append(row)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "command": " ".join(sys.argv)}  # fmt: skip
    Path(opt.out).write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    names = [f"{bc}x{bs}/{w}w" for bc, bs, w in TILES]
    import math

    for n in names:
        ts = [r["tiles"][n] / r["tiles"]["64x64/4w"] for r in rows if r["tiles"].get(n)]
        print(f"{n}: time / 64x64/4w geomean {math.exp(sum(map(math.log, ts)) / len(ts)):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
