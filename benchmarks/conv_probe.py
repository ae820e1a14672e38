"""Where the reference backend's convolution loses on the GPU: the traced convolutions it
runs slowest, timed against eager (cuDNN) under tile shapes, pipeline depths and input
layouts, each result checked against eager first.

The part-2 traces run (``benchmarks/results/triton-part2-h100.md``) found the 3x3
convolution over 18 channels at 0.02x eager and the grouped one (64 groups of 8 channels)
at 0.13x, forward and backward; the untuned tile choice (``conv._blocks``) and its
default three pipeline stages are the first suspects. This script times the forward
kernel, the input gradient (the same kernel, transposed) and the weight gradient
(``_wgrad_kernel``) separately, so the loss can be placed, and prints one table.

Usage (on the GPU machine, after ``source benchmarks/gpu_env.sh``):
    python3 benchmarks/conv_probe.py --out benchmarks/results/conv-probe-h100
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: where the probe runs (a CPU smoke test sets "cpu" under the interpreter)
DEVICE = "cuda"
sys.path.insert(0, str(REPO / "src"))

#: (name, input shape, weight shape, stride, padding, groups): the part-2 run's slowest
#: traced convolutions (float16, NCHW as traced).
CASES = [
    ("3x3, 18 channels", (128, 18, 56, 56), (18, 18, 3, 3), 1, 1, 1),
    ("3x3, 64 groups of 8", (32, 512, 14, 14), (1024, 8, 3, 3), 1, 1, 64),
]

#: Forward tile variants: (BLOCK_M, BLOCK_K, num_warps, num_stages); BLOCK_N stays the
#: group's channel count rounded up, as ``_blocks`` picks it.
FORWARD = list(itertools.product((32, 64, 128), (16, 32), (4,), (1, 3)))
#: Weight-gradient variants: (one kernel position per program, BLOCK_N, BLOCK_K,
#: num_warps, num_stages). The (channel, position)-column kernel's best tiles of the first
#: probe, then the kernel-position one (``conv.WGRAD_BY_KERNEL_POSITION``) over its tiles.
WGRAD = [(False, 64, 32, 4, 3)] + [
    (True, *t) for t in itertools.product((32, 64), (32, 64, 128), (4,), (1, 3))
]


def _bench(fn: Any) -> float:
    import triton

    return float(triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))


def _close(got: Any, want: Any) -> bool:
    import torch

    scale = max(float(want.abs().max()), 1.0) if want.numel() else 1.0
    return bool(torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2 * scale))


def probe_case(case: tuple, channels_last: bool) -> list[dict[str, Any]]:
    import torch

    from opbench.kernels._lib import conv

    name, xs, ws, stride, pad, groups = case
    g = torch.Generator(device=DEVICE).manual_seed(0)
    x = torch.randn(xs, device=DEVICE, dtype=torch.float16, generator=g)
    w = torch.randn(ws, device=DEVICE, dtype=torch.float16, generator=g) * 0.1
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    args = ([stride] * 2, [pad] * 2, [1, 1], False, [0, 0], groups)
    want = torch.ops.aten.convolution(x, w, None, *args)
    gy = torch.randn_like(want)
    want_gi, want_gw, _ = torch.ops.aten.convolution_backward(
        gy, x, w, None, *args, [True, True, False]
    )
    rows: list[dict[str, Any]] = []
    base = {"case": name, "layout": "channels_last" if channels_last else "NCHW"}
    eager_f = _bench(lambda: torch.ops.aten.convolution(x, w, None, *args))
    eager_gi = _bench(
        lambda: torch.ops.aten.convolution_backward(gy, x, w, None, *args, [True, False, False])
    )
    eager_gw = _bench(
        lambda: torch.ops.aten.convolution_backward(gy, x, w, None, *args, [False, True, False])
    )
    rows.append({**base, "part": "eager", "forward": eager_f, "grad_input": eager_gi,
                 "grad_weight": eager_gw})  # fmt: skip
    cout_g = ws[0] // groups
    rows.append({**base, "part": "default",
                 "forward": _bench(lambda: conv.convolution(x, w, None, *args)),
                 "grad_input": _bench(lambda: conv.convolution_backward(
                     gy, x, w, None, *args, [True, False, False])),
                 "grad_weight": _bench(lambda: conv.convolution_backward(
                     gy, x, w, None, *args, [False, True, False]))})  # fmt: skip
    orig_blocks, orig_launch = conv._blocks, conv._conv
    for bm, bk, warps, stages in FORWARD:
        bn = min(128, max(16, 1 << (cout_g - 1).bit_length()))
        conv._blocks = lambda M, co, ci, t=(bm, bn, bk, warps): t  # noqa: E731
        conv._conv = lambda grid, a, s=stages, **kw: orig_launch(grid, a, num_stages=s, **kw)  # noqa: E731
        row = {**base, "part": "forward+grad_input", "BLOCK_M": bm, "BLOCK_N": bn,
               "BLOCK_K": bk, "warps": warps, "stages": stages}  # fmt: skip
        try:
            got = conv.convolution(x, w, None, *args)
            gi = conv.convolution_backward(gy, x, w, None, *args, [True, False, False])[0]
            row["ok"] = _close(got, want) and _close(gi, want_gi)
            row["forward"] = _bench(lambda: conv.convolution(x, w, None, *args))
            row["grad_input"] = _bench(
                lambda: conv.convolution_backward(gy, x, w, None, *args, [True, False, False])
            )
        except Exception as e:  # noqa: BLE001 - a variant that does not compile is a row
            row["error"] = f"{type(e).__name__}: {str(e)[:120]}"
        finally:
            conv._blocks, conv._conv = orig_blocks, orig_launch
        rows.append(row)
        print(json.dumps(row), flush=True)
    orig = (conv._wgrad, conv._wgrad_kpos, conv._wgrad_blocks, conv.WGRAD_BY_KERNEL_POSITION)
    for by_kpos, bn, bk, warps, stages in WGRAD:
        conv.WGRAD_BY_KERNEL_POSITION = by_kpos
        conv._wgrad_blocks = lambda r, c, k, t=(bn, bk): (orig[2](r, c, k)[0], *t)  # noqa: E731
        conv._wgrad = lambda grid, a, s=stages, **kw: orig[0](grid, a, num_stages=s, **kw)  # noqa: E731
        conv._wgrad_kpos = lambda grid, a, s=stages, **kw: orig[1](grid, a, num_stages=s, **kw)  # noqa: E731
        row = {**base, "part": "grad_weight", "by_kernel_position": by_kpos, "BLOCK_N": bn,
               "BLOCK_K": bk, "warps": warps, "stages": stages}  # fmt: skip
        try:
            gw = conv.convolution_backward(gy, x, w, None, *args, [False, True, False])[1]
            row["ok"] = _close(gw, want_gw)
            row["grad_weight"] = _bench(
                lambda: conv.convolution_backward(gy, x, w, None, *args, [False, True, False])
            )
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:120]}"
        finally:
            conv._wgrad, conv._wgrad_kpos, conv._wgrad_blocks = orig[:3]
            conv.WGRAD_BY_KERNEL_POSITION = orig[3]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def render(rows: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = [
        f"# Convolution probe on {env.get('gpu')}",
        "",
        f"torch {env.get('torch')}, Triton {env.get('triton')}. Median ms by "
        "`triton.testing.do_bench` (L2 cleared); `ok`: agrees with eager (float16). Command: "
        "`python3 benchmarks/conv_probe.py`.",
        "",
    ]
    for (case, layout), group in itertools.groupby(rows, key=lambda r: (r["case"], r["layout"])):
        group = list(group)
        eager = next(r for r in group if r["part"] == "eager")
        dflt = next(r for r in group if r["part"] == "default")
        lines += [f"## {case} ({layout})", "",
                  f"eager: forward {eager['forward']:.4f} ms, input gradient "
                  f"{eager['grad_input']:.4f}, weight gradient {eager['grad_weight']:.4f}; "
                  f"ours with the default tiles: {dflt['forward']:.4f}, "
                  f"{dflt['grad_input']:.4f}, {dflt['grad_weight']:.4f}", ""]  # fmt: skip
        for part, key in (("forward+grad_input", "forward"), ("grad_weight", "grad_weight")):
            ranked = sorted((r for r in group if r["part"] == part and r.get("ok")),
                            key=lambda r: r[key])  # fmt: skip
            bad = [r for r in group if r["part"] == part and not r.get("ok")]
            lines += [f"{part}: {len(ranked)} variants agree, {len(bad)} fail or disagree; "
                      "fastest five:", "",
                      "| tiles (M/N, N, K), warps, stages | " + key + " ms | x eager |"
                      + (" grad_input ms | x eager |" if key == "forward" else ""),
                      "|---|---|---|" + ("---|---|" if key == "forward" else "")]  # fmt: skip
            for r in ranked[:5]:
                kpos = " (by kernel position)" if r.get("by_kernel_position") else ""
                tiles = (f"{r.get('BLOCK_M', '-')}/{r['BLOCK_N']}, {r['BLOCK_K']}, {r['warps']}, "
                         f"{r['stages']}{kpos}")  # fmt: skip
                cell = f"| {tiles} | {r[key]:.4f} | {eager[key] / r[key]:.3f} |"
                if key == "forward":
                    cell += (
                        f" {r['grad_input']:.4f} | {eager['grad_input'] / r['grad_input']:.3f} |"
                    )
                lines.append(cell)
            lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="OUT.json and OUT.md")
    ap.add_argument("--cases", default=None, help="indices into CASES, comma-separated")
    ns = ap.parse_args()
    import torch
    import triton

    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__}  # fmt: skip
    picked = [CASES[int(i)] for i in ns.cases.split(",")] if ns.cases else CASES
    rows: list[dict[str, Any]] = []
    for case in picked:
        rows += probe_case(case, channels_last=False)
    text = render(rows, env)
    print(text)
    if ns.out:
        Path(f"{ns.out}.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
        Path(f"{ns.out}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
