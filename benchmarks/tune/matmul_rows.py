"""The traced matmul-family rows the matmul tuner times, and how it calls them: which
traced calls land in which of the kernel's shape buckets (:func:`shapes_from_traces`), the
judged products of at least a GFLOP (:func:`judged_products`), each row's operands as the
backend's entry points pass them to ``matmul_into`` (:func:`operands`) and PyTorch's
answer for the same call (:func:`reference`). Both halves of the traces go through here
(:mod:`opbench.suites.trace_split`): the tuning half picks, the held-out half only reports.

Apart from ``tune_matmul.py`` so the tuner reads as what it times and keeps; imported by
it (``benchmarks/tune`` is on ``sys.path`` when the tuner runs) and by its tests through it.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OPS = ("mm.default", "addmm.default", "bmm.default", "baddbmm.default")
#: Convolutions whose pointwise cases the backend runs on the matmul kernel.
CONV_OPS = ("convolution.default", "convolution_backward.default")


def shapes_from_traces(traces: str, heldout: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Bucket -> distinct traced calls (op, args text, weight, M, N, K), most used first,
    leaving out the traces' held-out rows (:mod:`opbench.suites.trace_split`); with
    ``heldout``, only those (to report on, never to pick with).

    Besides the matmul family, the traced pointwise convolutions (1x1, stride 1, no
    padding, one group), which the backend runs as per-image matrix products
    (:func:`opbench.kernels._lib.conv_pointwise.pointwise_operands`): a forward as ``W @ x[n]``, a
    backward's input gradient as ``W^T @ grad_output[n]``."""
    from opbench.kernels._lib import matmul
    from opbench.spec.args import parse_args
    from opbench.suites.trace_split import select, without_heldout
    from opbench.suites.traces import load_traces

    # never the held-out half (opbench.suites.trace_split): results are reported on it
    weights: dict[tuple[str, str], int] = defaultdict(int)
    entries = load_traces(traces)
    for e in select(entries, "heldout") if heldout else without_heldout(entries):
        if e.op in OPS or e.op in CONV_OPS:
            weights[(e.op, e.args)] += max(e.count, 1)
    buckets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (op, text), w in weights.items():
        dims = product_dims(op, parse_args(text).args)
        if dims is None:
            continue
        itemsize, batch, M, N, K = dims
        key = matmul.bucket(itemsize, M, N, K)
        buckets[key].append({"op": op, "args": text, "weight": w, "M": M, "N": N, "K": K,
                             "batch": batch})  # fmt: skip
    for rows in buckets.values():
        rows.sort(key=lambda r: -r["weight"])
    return dict(buckets)


def product_dims(op: str, args: list[Any]) -> tuple[int, int, int, int, int] | None:
    """(element size, batch, M, N, K) of the matrix product a traced call runs on the
    matmul kernel, or None (a convolution that is not pointwise)."""
    from opbench.kernels._lib import conv_pointwise
    from opbench.spec.args import TensorSpec

    specs = [a for a in args if isinstance(a, TensorSpec)]
    if op in OPS:
        a, b = specs[-2], specs[-1]
        return a.dtype.itemsize, math.prod(a.shape[:-2]), a.shape[-2], b.shape[-1], a.shape[-1]
    forward = as_forward(op, args)
    if forward is None:
        return None
    x, w, _, stride, padding, _, transposed, output_padding, groups = forward
    ksize = w.shape[2:]
    if not conv_pointwise._pointwise(ksize, stride, padding, output_padding, groups):
        return None
    c_out, c_in = (w.shape[1], w.shape[0]) if transposed else (w.shape[0], w.shape[1])
    return x.dtype.itemsize, x.shape[0], c_out, math.prod(x.shape[2:]), c_in


def as_forward(op: str, args: list[Any]) -> list[Any] | None:
    """The ``aten.convolution`` arguments of the convolution a traced call runs, or None:
    a forward's own; for a backward, its input gradient, ``grad_output`` through the
    transposed convolution (None for a transposed convolution's backward, or one that
    asks no input gradient)."""
    if op == "convolution.default":
        return list(args[:9])
    gy, w = args[0], args[2]
    stride, padding, dilation, transposed, output_padding, groups = args[4:10]
    if transposed or not args[10][0]:
        return None
    return [gy, w, None, stride, padding, dilation, True, output_padding, groups]


def picked(rows: list[dict[str, Any]], per_bucket: int) -> list[dict[str, Any]]:
    """The shapes of a bucket that get timed: its ``per_bucket`` most used, and the one
    with the most traced GPU time when that is another (with one shape per bucket, a
    2048x1024x1024 product was left to a tile tuned on a smaller shape of its bucket,
    at 0.59x eager)."""
    out = rows[:per_bucket]
    heaviest = max(rows, key=traced_time)
    return out if any(r is heaviest for r in out) else [*out, heaviest]


def traced_time(row: dict[str, Any]) -> float:
    """A traced call's share of GPU time, roughly: its count times the larger of a launch
    floor (5 us) and its FLOPs at 400 TFLOP/s (a well-fed H100 on 16-bit operands). Ordering
    by count alone put hundreds of 10-us products ahead of the 1-GFLOP ones."""
    flops = 2 * row.get("batch", 1) * row["M"] * row["N"] * row["K"]
    return row["weight"] * max(5e-6, flops / 4e14)


def operands(op: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """(out, a, b, bias, alpha, beta) as the entry points pass them to ``matmul_into``."""
    import torch

    alpha, beta = kwargs.get("alpha", 1), kwargs.get("beta", 1)
    if op in CONV_OPS:
        return _conv_operands(op, args)
    if op.startswith("addmm"):
        x, a, b = args[:3]
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        bias = x.expand(out.shape).unsqueeze(0)
        return out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), bias, alpha, beta
    a, b = args[:2]
    if op.startswith("mm"):
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        return out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), None, 1, 1
    out = torch.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype, device=a.device)
    return out, a, b, None, 1, 1


def _conv_operands(op: str, args: list[Any]) -> tuple[Any, ...]:
    """A pointwise convolution's product, as the backend's convolution hands it over:
    the output allocated by the backend itself (eager's memory format), then
    :func:`~opbench.kernels._lib.conv_pointwise.pointwise_operands`."""
    from opbench.kernels._lib import conv, conv_pointwise

    forward = as_forward(op, args)
    assert forward is not None, f"{op}: no product to tune"
    x, w, bias, transposed = forward[0], forward[1], forward[2], forward[6]
    out = conv.convolution(*forward)
    y3, a, b, b3 = conv_pointwise.pointwise_operands(x, w, bias, out, transposed)
    return y3, a, b, b3, 1, 1


def reference(op: str, call: list[Any], kw: dict[str, Any]) -> Any:
    """What eager computes for a traced call, as the product's output holds it (a
    convolution's input gradient: grad_output through eager's transposed convolution)."""
    import torch

    aten = torch.ops.aten
    if op in CONV_OPS:
        return aten.convolution(*as_forward(op, call))
    return getattr(aten, op.split(".")[0])(*call, **kw)


def judged_products(
    traces: str, min_gflop: float, limit: int, split: str = "tuning"
) -> list[dict[str, Any]]:
    """The matmul-family cases the judge times (each op's ``limit`` most used traced
    cases, as ``host_profile.traced_cases`` and the traces suite pick them) of at least
    ``min_gflop``, with their product's sizes; with them the judged pointwise
    convolutions' products (a forward, a backward's input gradient), which run on the
    same kernel and were left to buckets tuned on other shapes ([32, 1024, 14, 14] to 512
    channels: bucket 2:2:2:3's 16x64 tiles, 0.18x eager on the H100). ``split``: the half
    of the traces (:mod:`opbench.suites.trace_split`): ``tuning`` picks configurations,
    ``heldout`` only ever reports how they do."""
    sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
    from host_profile import traced_cases

    from opbench.spec.args import parse_args

    rows = []
    half = traced_cases(traces, ",".join(OPS + CONV_OPS), limit, "cuda", split=split)
    for op, cases in sorted(half.items()):
        for c in cases:
            dims = product_dims(op, parse_args(c.args).args)
            if dims is None:  # not a pointwise convolution: not on the matmul kernel
                continue
            itemsize, batch, M, N, K = dims
            gflop = 2 * batch * M * N * K / 1e9
            if gflop >= min_gflop:
                rows.append({"op": op, "args": c.args, "itemsize": itemsize, "batch": batch,
                             "M": M, "N": N, "K": K, "gflop": gflop})  # fmt: skip
    return rows
