"""Where the reference backend's convolution loses on the GPU: the traced convolutions it
runs slowest, timed against eager (cuDNN) under tile shapes, pipeline depths and input
layouts, each result checked against eager first.

The part-2 traces run (``benchmarks/results/triton-part2-h100.md``) found the 3x3
convolution over 18 channels at 0.02x eager and the grouped one (64 groups of 8 channels)
at 0.13x, forward and backward. This script times the forward kernel, the input gradient
(the same kernel, transposed) and the weight gradient (``_wgrad_kernel``) separately, so
the loss can be placed, under each variant of ``conv``'s tile constants (``FORWARD``:
``CONV_BLOCK_M/K``, warps, stages; ``WGRAD``: ``WGRAD_BLOCK_N/K``, warps, stages), every
variant checked against eager first, and prints the fastest five of each; the NCHW
non-depthwise cases also sweep the flattened-reduction kernel's tiles (``SMALLK``, the
default path of cases 0-3 since ``conv_smallk``) against the implicit GEMM's (``FORWARD``,
SMALLK_MAX_K set to 0). The two
default cases run in about two minutes on an H100 (most of it compiling the variants).

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/conv_probe.py --out benchmarks/results/conv-probe-h100

Open finding (a probe: delete it once settled, its finding going to docs/results.md): the
direct depthwise kernel's tiles (``conv.DW_*``) were picked on two held-out trace rows
(cases 4 and 5) before the traces were split, and ``conv.py`` marks them and the
``SMALLK_*`` tiles untimed at the current code: sweep them again on tuning-half rows
(``--cases 4,5 --parts forward``; see docs/results.md, "Pending GPU checks").
Committed results: ``benchmarks/results/conv-probe-h100.md``/``.json`` (2026-11-25, the
command above), ``conv-probe-h100-2026-11-26.md``/``.json`` (the same after the rewrite of
bb50413), ``conv-probe-depthwise-h100-2026-11-26.md``/``.json`` (``--cases 4,5 --parts
forward``) and ``conv-probe-smallk-h100-2026-11-26.md``/``.json`` (``--cases 0,1``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: where the probe runs (a CPU smoke test sets "cpu" under the interpreter)
DEVICE = "cuda"
sys.path.insert(0, str(REPO / "src"))

#: (name, input shape, weight shape, stride, padding, groups[, "channels_last"]): the
#: part-2 run's slowest traced convolutions (float16, NCHW as traced unless marked), the
#: two in the traces suite's 8 most used of each op first; the rest (the next most used
#: 3x3 and depthwise shapes) run with ``--cases``. Depthwise cases (groups == channels)
#: sweep the direct kernel's tiles (``DEPTHWISE``/``DEPTHWISE_CL``) instead of the implicit
#: GEMM's: ``--cases 4,5`` (Xception's 3x3 over 728 channels, NCHW; ConvNeXt's 7x7 over
#: 512, channels-last as traced); ``--parts forward`` leaves out the weight-gradient sweep
#: (the depthwise weight gradient is still the implicit GEMM's).
#: Since 2026-11-27 the traces are split into a tuning and a held-out half
#: (opbench.suites.trace_split); the two depthwise cases below (Xception's 728 channels,
#: ConvNeXt's 512) are held-out rows, and the depthwise tiles were chosen on them before the
#: split existed: held-out depthwise results carry that caveat until the tiles are swept
#: again on tuning rows (tests/suites/test_trace_split.py names the halves).
CASES = [
    ("3x3, 18 channels", (128, 18, 56, 56), (18, 18, 3, 3), 1, 1, 1),
    ("3x3, 64 groups of 8", (32, 512, 14, 14), (1024, 8, 3, 3), 1, 1, 64),
    ("3x3, 36 channels", (128, 36, 28, 28), (36, 36, 3, 3), 1, 1, 1),
    ("3x3, 72 channels", (128, 72, 14, 14), (72, 72, 3, 3), 1, 1, 1),
    ("3x3 depthwise, 728 channels", (32, 728, 19, 19), (728, 1, 3, 3), 1, 1, 728),
    ("7x7 depthwise, 512 channels", (32, 512, 14, 14), (512, 1, 7, 7), 1, 3, 512,
     "channels_last"),
]  # fmt: skip
DEFAULT_CASES = "0,1"

#: Forward (and input-gradient) variants of ``conv_kernels``' implicit GEMM: module
#: constants of ``conv`` set together, (SMALLK_MAX_K, CONV_BLOCK_M, CONV_BLOCK_K,
#: CONV_WARPS, CONV_STAGES); SMALLK_MAX_K 0 keeps the cases off the flattened-reduction
#: kernel. BLOCK_N is the group's channel count rounded up (``conv._blocks``); BLOCK_K is
#: clipped to the group's channels. The three fastest of the H100's last sweep
#: (``conv-probe2-h100``) and the default (128, 32).
FORWARD = [(0, 128, 32, 4, 1), (0, 64, 16, 4, 1), (0, 32, 32, 4, 1), (0, 64, 32, 4, 1)]
#: Variants of the flattened-reduction kernel (``conv_smallk``, where the case's reduction
#: is at most SMALLK_MAX_K pairs): (SMALLK_BLOCK_M, SMALLK_BLOCK_K, SMALLK_WARPS).
SMALLK = [
    (128, 16, 4), (128, 32, 4), (64, 16, 4), (64, 32, 4), (256, 16, 8), (256, 32, 8),
    (128, 64, 4), (32, 16, 4), (128, 16, 8),
]  # fmt: skip
#: Weight-gradient variants: (WGRAD_BLOCK_N, WGRAD_BLOCK_K, WGRAD_WARPS, WGRAD_STAGES);
#: BLOCK_N is clipped to the group's channel count, rows are its output channels.
WGRAD = [
    *((64, bk, 4, st) for bk in (32, 64, 128, 256) for st in (1, 3)),
    (64, 128, 8, 1), (64, 256, 8, 1),
]  # fmt: skip
#: Direct depthwise kernel variants (forward and input gradient), NCHW:
#: (DW_BLOCK_C, DW_BLOCK_P, DW_WARPS); sm_90 SASS of the 3x3 loop: 4x256 7.1 instructions
#: a tap-element, 8x128 8.0, 2x512 7.2.
DEPTHWISE = [
    (4, 256, 4), (8, 128, 4), (2, 512, 4), (1, 1024, 4), (4, 512, 8), (8, 256, 8),
    (16, 64, 4), (4, 128, 4),
]  # fmt: skip
#: Channels-last: (DW_BLOCK_P_CL, DW_BLOCK_C_CL, DW_WARPS_CL); 7x7 loop: 16x128 3.5
#: instructions a tap-element, 32x64 4.2, 64x64 3.6 (198 registers).
DEPTHWISE_CL = [
    (16, 128, 4), (32, 64, 4), (64, 64, 4), (32, 128, 8), (8, 128, 4), (16, 64, 4),
    (64, 128, 8), (32, 32, 4),
]  # fmt: skip
_FWD_NAMES = ("SMALLK_MAX_K", "CONV_BLOCK_M", "CONV_BLOCK_K", "CONV_WARPS", "CONV_STAGES")
_SMALLK_NAMES = ("SMALLK_BLOCK_M", "SMALLK_BLOCK_K", "SMALLK_WARPS")
_SMALLK_PART = "forward+grad_input (flattened reduction)"
_DW_NAMES = ("DW_BLOCK_C", "DW_BLOCK_P", "DW_WARPS")
_DW_CL_NAMES = ("DW_BLOCK_P_CL", "DW_BLOCK_C_CL", "DW_WARPS_CL")
_WGRAD_NAMES = ("WGRAD_BLOCK_N", "WGRAD_BLOCK_K", "WGRAD_WARPS", "WGRAD_STAGES")


def _bench(fn: Any) -> float:
    import triton

    return float(triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median"))


def _close(got: Any, want: Any) -> bool:
    import torch

    scale = max(float(want.abs().max()), 1.0) if want.numel() else 1.0
    return bool(torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2 * scale))


def probe_case(
    case: tuple, channels_last: bool, parts: str = "forward,grad_weight"
) -> list[dict[str, Any]]:
    import torch

    from opbench.kernels._lib import conv, conv_backward

    name, xs, ws, stride, pad, groups = case[:6]
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
    rows.append({**base, "part": "default",
                 "forward": _bench(lambda: conv.convolution(x, w, None, *args)),
                 "grad_input": _bench(lambda: conv_backward.convolution_backward(
                     gy, x, w, None, *args, [True, False, False])),
                 "grad_weight": _bench(lambda: conv_backward.convolution_backward(
                     gy, x, w, None, *args, [False, True, False]))})  # fmt: skip
    fwd: tuple[tuple[str, ...], list] = (_FWD_NAMES, FORWARD)
    if groups == xs[1]:  # depthwise: the direct kernel
        fwd = (_DW_CL_NAMES, DEPTHWISE_CL) if channels_last else (_DW_NAMES, DEPTHWISE)
    sweeps = [("forward+grad_input", *fwd), ("grad_weight", _WGRAD_NAMES, WGRAD)]
    if groups != xs[1] and not channels_last:
        sweeps.insert(1, (_SMALLK_PART, _SMALLK_NAMES, SMALLK))
    sweeps = [sw for sw in sweeps if sw[0].split("+")[0] in parts.split(",")]
    for part, names, variants in sweeps:
        saved = {n: getattr(conv, n) for n in names}
        if part == "grad_weight":  # restored after each variant with the names
            saved["WGRAD_NARROW_ROWS"] = conv_backward.WGRAD_NARROW_ROWS
        for values in variants:
            row = {**base, "part": part, "set": dict(zip(names, values))}
            try:
                for n, v in zip(names, values):
                    setattr(conv, n, v)
                if part == "grad_weight":
                    conv_backward.WGRAD_NARROW_ROWS = (
                        0  # the variant's BLOCK_K for narrow groups too
                    )
                    gw = conv_backward.convolution_backward(
                        gy, x, w, None, *args, [False, True, False]
                    )[1]
                    row["ok"] = _close(gw, want_gw)
                    row["grad_weight"] = _bench(
                        lambda: conv_backward.convolution_backward(
                            gy, x, w, None, *args, [False, True, False]
                        )  # fmt: skip
                    )
                else:
                    got = conv.convolution(x, w, None, *args)
                    gi = conv_backward.convolution_backward(
                        gy, x, w, None, *args, [True, False, False]
                    )[0]
                    row["ok"] = _close(got, want) and _close(gi, want_gi)
                    row["forward"] = _bench(lambda: conv.convolution(x, w, None, *args))
                    row["grad_input"] = _bench(
                        lambda: conv_backward.convolution_backward(
                            gy, x, w, None, *args, [True, False, False]
                        )  # fmt: skip
                    )
            except Exception as e:  # noqa: BLE001 - a variant that does not compile is a row
                row["error"] = f"{type(e).__name__}: {str(e)[:120]}"
            finally:
                for n, v in saved.items():
                    setattr(conv, n, v)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def r_names(part: str, group: list[dict[str, Any]]) -> tuple[str, ...]:
    """The constants a part's variants set (the first variant row of ``part`` says)."""
    row = next((r for r in group if r["part"] == part and "set" in r), None)
    return tuple(row["set"]) if row else ()


def render(rows: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = [
        f"# Convolution probe on {env.get('gpu')}",
        "",
        f"torch {env.get('torch')}, Triton {env.get('triton')}. Median ms by "
        "`triton.testing.do_bench` (L2 cleared); `ok`: agrees with eager (float16). Command: "
        "`python3 benchmarks/probes/conv_probe.py`.",
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
        for part, key in (
            ("forward+grad_input", "forward"),
            (_SMALLK_PART, "forward"),
            ("grad_weight", "grad_weight"),
        ):
            if not any(r["part"] == part for r in group):
                continue
            ranked = sorted((r for r in group if r["part"] == part and r.get("ok")),
                            key=lambda r: r[key])  # fmt: skip
            bad = [r for r in group if r["part"] == part and not r.get("ok")]
            lines += [f"{part}: {len(ranked)} variants agree, {len(bad)} fail or disagree; "
                      "fastest five:", "",
                      "| " + "/".join(n.split("_", 1)[1] for n in r_names(part, group)) + " | " + key + " ms | x eager |"
                      + (" grad_input ms | x eager |" if key == "forward" else ""),
                      "|---|---|---|" + ("---|---|" if key == "forward" else "")]  # fmt: skip
            for r in ranked[:5]:
                tiles = ", ".join(f"{v}" for v in r["set"].values())
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
    ap.add_argument("--cases", default=DEFAULT_CASES, help="indices into CASES, comma-separated")
    ap.add_argument("--parts", default="forward,grad_weight",
                    help="sweeps to run: forward (with the input gradient), grad_weight")  # fmt: skip
    ns = ap.parse_args()
    import torch
    import triton

    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__}  # fmt: skip
    picked = [CASES[int(i)] for i in ns.cases.split(",")]
    rows: list[dict[str, Any]] = []
    for case in picked:
        rows += probe_case(case, channels_last=case[6:] == ("channels_last",), parts=ns.parts)
    text = render(rows, env)
    print(text)
    if ns.out:
        Path(f"{ns.out}.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
        Path(f"{ns.out}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
