"""Pointwise (1x1) convolutions of the reference backend against eager on the GPU: the
traced timm shapes where the part-2 run found them slowest, forward, input gradient and
weight gradient timed separately with CUDA events (median of ``--reps``, no L2 flush),
each result checked against eager first.

On the H100 before the batch-summing weight gradient and the forward tile rule (f16,
NCHW): forward ``[32, 1024, 14, 14]`` into 512 channels 0.18x eager (0.221 ms against
0.040); weight gradient ``[32, 1024, 14, 14]`` -> 1024 0.24x (0.593 against 0.141),
``[16, 336, 21, 21]`` 0.48x, ``[16, 672, 11, 11]`` 0.80x.

``--sweep`` also times other tiles: the forward's (``conv_pointwise._pointwise_config`` replaced,
so every variant runs whatever the bucket says) and the weight gradient's
(``matmul_batch_sum.BATCH_SUM_CONFIG``, an optional 7th entry fixing the number of image groups).
``--set MODULE.NAME=VALUE`` sets a kernel module's constant first (as
``device_profile.py``), e.g. ``--set matmul_batch_sum.BATCH_SUM_SLOTS=2``.

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/pointwise_conv_probe.py [--channels-last] [--sweep] [--dtype bf16]
A CPU smoke test under Triton's interpreter, shapes shrunk (checks the script, not speed):
    TRITON_INTERPRET=1 python3 benchmarks/probes/pointwise_conv_probe.py --smoke

Open finding (a probe: delete it once settled): ``conv_pointwise.POINTWISE_CONFIG`` and
``matmul_batch_sum.BATCH_SUM_CONFIG`` (and their float32 twins) are marked untimed on a GPU at the
current code; run ``--sweep`` (and ``--dtype f32``) and settle them (docs/results.md,
"Pending GPU checks"). Last run: ``benchmarks/results/pointwise-conv-probe-h100-2026-11-26.md``
(``--sweep`` at 933e00e).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))

#: (name, input shape, weight shape): the traced shapes (float16, NCHW as traced).
CASES = [
    ("1024->512, 14x14", (32, 1024, 14, 14), (512, 1024, 1, 1)),
    ("1024->1024, 14x14", (32, 1024, 14, 14), (1024, 1024, 1, 1)),
    ("336->336, 21x21", (16, 336, 21, 21), (336, 336, 1, 1)),
    ("672->672, 11x11", (16, 672, 11, 11), (672, 672, 1, 1)),
]
#: Forward tiles swept by ``--sweep``: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps,
#: stages); M is the output channels, N an image's positions (196, 441, 121).
FORWARD = [
    (128, 64, 64, 8, 4, 4), (128, 128, 64, 8, 8, 3), (128, 256, 64, 8, 8, 3),
    (128, 64, 32, 8, 4, 5), (256, 64, 64, 8, 8, 3), (64, 64, 64, 8, 4, 4),
    (128, 32, 64, 8, 4, 4), (64, 128, 64, 8, 4, 4),
]  # fmt: skip
#: Weight-gradient tiles swept by ``--sweep`` (BATCH_SUM_CONFIG); K walks an image's
#: positions BLOCK_K at a time.
WGRAD = [
    (128, 128, 32, 8, 8, 4), (128, 128, 32, 8, 4, 4), (128, 128, 64, 8, 8, 3),
    (128, 64, 32, 8, 4, 4), (64, 128, 32, 8, 4, 4), (128, 256, 32, 8, 8, 3),
    (64, 64, 32, 8, 4, 4), (128, 128, 16, 8, 8, 5),
]  # fmt: skip


def _timer(device: str, reps: int):
    import torch

    def run(fn: Any) -> float:
        for _ in range(3):
            fn()
        times = []
        if device == "cpu":
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(times)
        start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for s, e in zip(start, end):
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(start, end))

    return run


def _close(got: Any, want: Any) -> bool:
    """Within 2% of eager's largest magnitude (f16 sums over up to 6,272 products)."""
    import torch

    scale = max(float(want.abs().max()), 1.0) if want.numel() else 1.0
    return bool(torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2 * scale))


def probe(case: tuple, opt: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    from opbench.kernels._lib import conv, conv_pointwise, matmul, matmul_batch_sum

    name, xs, ws = case
    if opt.smoke:  # a few programs under the interpreter
        xs = (2, max(1, xs[1] // 32), *xs[2:])
        ws = (max(1, ws[0] // 32), max(1, ws[1] // 32), 1, 1)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[opt.dtype]
    g = torch.Generator(device=opt.device).manual_seed(0)
    x = torch.randn(xs, device=opt.device, dtype=dtype, generator=g)
    w = torch.randn(ws, device=opt.device, dtype=dtype, generator=g) / ws[1] ** 0.5
    if opt.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    args = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    aten = torch.ops.aten
    gy = torch.randn_like(aten.convolution(x, w, None, *args))
    masks = {"forward": None, "grad_input": [True, False, False],
             "grad_weight": [False, True, False]}  # fmt: skip

    def call(impl: Any, part: str) -> Any:
        if part == "forward":
            return impl.convolution(x, w, None, *args)
        return impl.convolution_backward(gy, x, w, None, *args, masks[part])[
            0 if part == "grad_input" else 1
        ]

    bench = _timer(opt.device, opt.reps)
    eager = {p: call(aten, p) for p in masks}
    eager_ms = {p: bench(lambda p=p: call(aten, p)) for p in masks}
    a3 = conv_pointwise.pointwise_operands(x, w, None, eager["forward"], False)
    fwd_cfg = conv_pointwise._pointwise_config(*a3[:3])
    n, cout, cin = xs[0], ws[0], ws[1]
    cfg = (
        matmul_batch_sum.BATCH_SUM_CONFIG_F32
        if dtype == torch.float32
        else matmul_batch_sum.BATCH_SUM_CONFIG
    )
    tiles = -(-cout // cfg[0]) * -(-cin // cfg[1])
    groups = matmul_batch_sum.batch_groups(
        tiles, n, matmul.sm_count(x.device) * matmul_batch_sum.BATCH_SUM_SLOTS
    )
    base = {"case": name, "layout": "channels_last" if opt.channels_last else "NCHW"}
    rows = []
    for part in masks:
        got = call(conv, part)
        used = fwd_cfg if part != "grad_weight" else f"{cfg} x {groups} groups"
        if part == "grad_input":  # W^T @ gy[n]: its own product
            gi_ops = conv_pointwise.pointwise_operands(gy, w, None, eager["grad_input"], True)
            used = conv_pointwise._pointwise_config(*gi_ops[:3])
        if part == "grad_weight" and opt.channels_last:
            used = "merged images: matmul_into"
        rows.append({**base, "part": part, "config": str(used), "ok": _close(got, eager[part]),
                     "eager_ms": eager_ms[part], "ms": bench(lambda p=part: call(conv, p))})  # fmt: skip
    if opt.sweep:
        real = conv_pointwise._pointwise_config
        for c in FORWARD:
            conv_pointwise._pointwise_config = lambda *a, c=c: c
            try:
                rows.append(_variant(base, "forward", c, call, conv, eager, eager_ms, bench))
            finally:
                conv_pointwise._pointwise_config = real
        saved = (matmul_batch_sum.BATCH_SUM_CONFIG, matmul_batch_sum.BATCH_SUM_CONFIG_F32)
        for c in WGRAD:
            matmul_batch_sum.BATCH_SUM_CONFIG = matmul_batch_sum.BATCH_SUM_CONFIG_F32 = c
            try:
                rows.append(_variant(base, "grad_weight", c, call, conv, eager, eager_ms, bench))
            finally:
                matmul_batch_sum.BATCH_SUM_CONFIG, matmul_batch_sum.BATCH_SUM_CONFIG_F32 = saved
    return rows


def _variant(base, part, c, call, conv, eager, eager_ms, bench) -> dict[str, Any]:  # noqa: ANN001
    row = {**base, "part": f"{part} (sweep)", "config": str(c), "eager_ms": eager_ms[part]}
    try:
        row["ok"] = _close(call(conv, part), eager[part])
        row["ms"] = bench(lambda: call(conv, part))
    except Exception as e:  # noqa: BLE001 - a tile that does not compile is a row
        row["ok"], row["ms"], row["error"] = False, float("nan"), f"{type(e).__name__}: {e}"[:100]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(str(i) for i in range(len(CASES))))
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16", "f32"))
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="also time FORWARD and WGRAD tiles")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE")
    ap.add_argument("--smoke", action="store_true", help="CPU, interpreter, shrunk shapes")
    opt = ap.parse_args()
    opt.device = "cpu" if opt.smoke else "cuda"
    if opt.smoke:
        opt.reps = 1
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # opbench's IEEE float32 baseline
    torch.backends.cudnn.allow_tf32 = False
    from kernel_overrides import apply_overrides

    apply_overrides(opt.set)
    rows = []
    for i in opt.cases.split(","):
        rows += probe(CASES[int(i)], opt)
    print("| case | layout | part | config | eager ms | ours ms | x eager | ok |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['layout']} | {r['part']} | {r['config']} | "
              f"{r['eager_ms']:.4f} | {r['ms']:.4f} | {r['eager_ms'] / r['ms']:.2f} | "
              f"{'ok' if r['ok'] else 'WRONG ' + r.get('error', '')} |")  # fmt: skip
    return 0 if all(r["ok"] for r in rows if "sweep" not in r["part"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
