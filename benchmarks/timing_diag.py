"""Raw device-time samples of aten against itself, for studying the timing estimator.

For a few small real trace cases (where event-timer ticks and jitter matter most), runs
the interleaved device-time protocol of :mod:`opbench.instrument.timing` with PyTorch's own
kernel on both sides and saves every sample, in several variants (the default order
A B A B; alternating order A B B A; no L2 flush), so estimators (median, interpolated
median, trimmed means, paired ratios) can be compared offline on the same data.
Writes ``timing-diag-<gpu>.json`` under ``--out-dir`` (and ``$OUT`` when set).

Usage: python benchmarks/timing_diag.py [--reps 600]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from opbench.instrument import timing as tm  # noqa: E402
from opbench.spec.args import parse_args  # noqa: E402
from opbench.spec.ops import get_overload  # noqa: E402
from opbench.suites.inputs import make_inputs  # noqa: E402

CASES = [
    ("add.Tensor", "((T([8, 128, 1024], f16), T([8, 128, 1024], f16)), {})"),
    ("add.Tensor", "((T([2, 128, 1024], f16), T([2, 128, 1024], f16)), {})"),
    ("relu.default", "((T([16, 128, 512], f16),), {})"),
    ("sum.default", "((T([1, 88, 20, 20], f16),), {})"),
    ("_softmax.default", "((T([32, 128, 128], f16), -1, False), {})"),
    ("mm.default", "((T([2048, 768], f16), T([768, 768], f16)), {})"),
    (
        "native_layer_norm.default",
        "((T([2, 128, 1024], f16), [1024], T([1024], f16), T([1024], f16), 1e-05), {})",
    ),
    ("relu.default", "((T([32, 768, 32, 32], f16),), {})"),
]


def samples(op: str, args_text: str, reps: int, order: str, flush: bool) -> dict:
    dev = torch.device("cuda", 0)
    fn = get_overload(op)
    args, kwargs = make_inputs(op, parse_args(args_text), "cuda", 0)
    opts = tm.TimingOptions(flush_l2=flush)
    timer = tm._Timer(dev, opts)
    inputs = tm._Inputs((list(args), dict(kwargs)), mutating=False)
    a, b = tm._Side("ref", fn), tm._Side("cand", fn)
    timer.batch([a, b], inputs, 20, launch_times=True)
    timer.set_sleep_from_launches([a, b])
    out = {"A": [], "B": [], "sleep_us": timer.sleep_us}
    left = reps
    while left > 0:
        n = min(left, 100)
        if order == "engine":  # the engine's own alternation (A B, B A per repetition)
            got = timer.batch([a, b], inputs, n)
            out["A"] += got[0]
            out["B"] += got[1]
        elif order == "ABBA":  # blocks of A B, then blocks of B A
            got = timer.batch([a, b], inputs, n // 2 or 1)
            out["A"] += got[0]
            out["B"] += got[1]
            got = timer.batch([b, a], inputs, n // 2 or 1)
            out["B"] += got[0]
            out["A"] += got[1]
        else:
            got = timer.batch([a, b], inputs, n)
            out["A"] += got[0]
            out["B"] += got[1]
        left -= n
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=600)
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    ns = p.parse_args()
    t0 = time.perf_counter()
    rows = []
    for op, text in CASES:
        for order, flush in (("engine", True), ("ABBA", True)):
            s = samples(op, text, ns.reps, order, flush)
            rows.append({"op": op, "args": text, "order": order, "flush": flush, **s})
            a, b = sorted(s["A"]), sorted(s["B"])
            print(
                f"{op:28s} {order:4s} flush={flush!s:5s} medA={a[len(a) // 2] * 1e3:7.2f} "
                f"medB={b[len(b) // 2] * 1e3:7.2f} imedratio="
                f"{tm.interpolated_median(a) / tm.interpolated_median(b):.4f}",
                flush=True,
            )
    res = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "rows": rows,
        "seconds": time.perf_counter() - t0,
    }
    for d in [Path(ns.out_dir)] + ([Path(os.environ["OUT"])] if os.environ.get("OUT") else []):
        d.mkdir(parents=True, exist_ok=True)
        (d / "timing-diag.json").write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
