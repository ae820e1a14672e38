"""Tiles of the channels-last depthwise kernels on an H200, timed one by one, with what
Triton made of each (registers, spills): the forward (``conv.DW_*_CL``) and the tap-row
weight gradient (``conv_depthwise_wgrad_rows.DWG_ROWS_*``) on three traced shapes, and the
forward's two weight reads (``conv.DW_WEIGHT_TILE_CL``) at the committed tile, beside
eager (cuDNN) in both layouts and the NCHW kernel. ``triton.testing.do_bench`` medians of
whole calls (host gaps included: small beside these kernels' 50-1500 us).

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/conv_cl_tiles.py --out tiles.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

SHAPES = (((32, 128, 56, 56), 7), ((32, 512, 14, 14), 7), ((32, 64, 56, 56), 3))
#: (positions, channels, warps, pipeline stages) of the forward kernel
FORWARD_TILES = ((4, 64, 2, 3), (4, 64, 2, 1), (8, 64, 2, 1), (8, 128, 4, 1), (16, 128, 4, 1),
                 (4, 128, 2, 1), (2, 256, 4, 1), (8, 256, 8, 1), (16, 64, 4, 1), (4, 256, 4, 1),
                 (8, 64, 2, 2))  # fmt: skip
#: (tile, channels, warps, pipeline stages) of the tap-row weight gradient
WGRAD_TILES = ((1024, 64, 4, 3), (1024, 64, 4, 1), (2048, 64, 4, 1), (4096, 64, 8, 1),
               (2048, 128, 4, 1), (1024, 64, 2, 1), (2048, 64, 8, 1))  # fmt: skip


def compiled_stats(launcher: Any) -> list[dict[str, Any]]:
    """Registers, spills, warps and shared memory of each kernel ``launcher`` compiled
    since the last call (then forgotten, so the next setting compiles its own)."""
    out = []
    for compiled, *_ in launcher._compiled.values():
        compiled._init_handles()
        out.append({"regs": compiled.n_regs, "spills": compiled.n_spills,
                    "warps": compiled.metadata.num_warps, "shared": compiled.metadata.shared})  # fmt: skip
    launcher._compiled.clear()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ns = ap.parse_args()
    import torch
    from triton.testing import do_bench

    from opbench.kernels._lib import conv, conv_backward, conv_depthwise
    from opbench.kernels._lib import conv_depthwise_wgrad_rows as rows

    aten = torch.ops.aten
    res: list[dict[str, Any]] = []
    defaults = (conv.DW_BLOCK_P_CL, conv.DW_BLOCK_C_CL, conv.DW_WARPS_CL, conv.DW_STAGES_CL)
    weight_read = conv.DW_WEIGHT_TILE_CL
    for shape, k in SHAPES:
        xc = torch.randn(shape, device="cuda", dtype=torch.float16)
        x = xc.to(memory_format=torch.channels_last)
        w = torch.randn(shape[1], 1, k, k, device="cuda", dtype=torch.float16)
        b = torch.randn(shape[1], device="cuda", dtype=torch.float16)
        rest = ([1, 1], [k // 2, k // 2], [1, 1], False, [0, 0], shape[1])
        eager = do_bench(functools.partial(aten.convolution, x, w, b, *rest))
        res.append({"shape": shape, "k": k, "eager_cl": eager,
                    "eager_nchw": do_bench(functools.partial(aten.convolution, xc, w, b, *rest)),
                    "ours_nchw": do_bench(functools.partial(conv.convolution, xc, w, b, *rest))})  # fmt: skip
        print(res[-1], flush=True)
        for p, c, warps, stages in FORWARD_TILES:
            conv.DW_BLOCK_P_CL, conv.DW_BLOCK_C_CL, conv.DW_WARPS_CL = p, c, warps
            conv.DW_STAGES_CL = stages
            y = conv.convolution(x, w, b, *rest)
            ok = torch.allclose(
                y.float(), aten.convolution(x, w, b, *rest).float(), atol=5e-2, rtol=1e-2
            )
            t = do_bench(functools.partial(conv.convolution, x, w, b, *rest))
            res.append({"shape": shape, "k": k, "P": p, "C": c, "warps": warps,
                        "stages": stages, "ms": t,
                        "vs_eager": eager / t, "ok": ok, "stats": compiled_stats(conv_depthwise._depthwise)})  # fmt: skip
            print(res[-1], flush=True)
        conv.DW_BLOCK_P_CL, conv.DW_BLOCK_C_CL, conv.DW_WARPS_CL, conv.DW_STAGES_CL = defaults
        for weight_tile in (True, False):  # a tap's weights as a tile or as a vector
            conv.DW_WEIGHT_TILE_CL = weight_tile
            t = do_bench(functools.partial(conv.convolution, x, w, b, *rest))
            res.append({"shape": shape, "k": k, "weight_tile": weight_tile, "ms": t,
                        "vs_eager": eager / t})  # fmt: skip
            print(res[-1], flush=True)
        conv.DW_WEIGHT_TILE_CL = weight_read
        gy = torch.randn_like(x)
        mask = [False, True, False]
        ours = functools.partial(conv_backward.convolution_backward, gy, x, w, None, *rest, mask)
        theirs = functools.partial(aten.convolution_backward, gy, x, w, None, *rest, mask)
        for tile, c, warps, stages in WGRAD_TILES:
            rows.DWG_ROWS_TILE, rows.DWG_ROWS_BLOCK_C, rows.DWG_ROWS_WARPS = tile, c, warps
            rows.DWG_ROWS_STAGES = stages
            ours()
            t, te = do_bench(ours), do_bench(theirs)
            res.append({"shape": shape, "k": k, "wgrad_tile": tile, "bc": c, "warps": warps,
                        "stages": stages,
                        "ms": t, "eager_ms": te, "vs_eager": te / t,
                        "stats": compiled_stats(rows._dwg_rows)})  # fmt: skip
            print(res[-1], flush=True)
    Path(ns.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
