"""The depthwise weight-gradient kernel's tile size and warps on the traced depthwise
backward rows: each configuration's time beside eager's whole ``convolution_backward``
(the same output mask) and the weight gradient alone through eager, rows of the tuning
half picked apart from the held-out half's (``opbench.suites.trace_split``), so a choice
made on one half is read on the other.

What it answers: whether :data:`~opbench.kernels._lib.conv_depthwise_wgrad.DWG_TILE` and
``DWG_WARPS`` (picked without a GPU) hold, and which tile wins on the tuning half. Each
configuration's result is checked against eager before it is timed.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/dwg_sweep.py --traces .gpu_data/traces \\
        --tiles 2048,4096,8192 --warps 4,8 --out dwg-sweep-h100.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "probes"))
from opbench.report.means import geomean  # noqa: E402

#: a weight of one channel a group, ``[C, 1, k...]``: the depthwise rows
DEPTHWISE = r"T\(\[\d+, 1, \d+"


def _geo(xs: list[float]) -> float | None:
    """The shared geomean, to three places for the table."""
    return None if (g := geomean(xs)) is None else round(g, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", required=True)
    ap.add_argument("--tiles", default="2048,4096,8192")
    ap.add_argument("--warps", default="4,8")
    ap.add_argument("--limit", type=int, default=30, help="rows a half")
    ap.add_argument("--device", default="cuda", help="cpu: a correctness smoke test, untimed")
    ap.add_argument("--out", default=None)
    ns = ap.parse_args()
    import torch
    import triton.testing
    from conv_heldout import HALVES, _agrees, rows

    from opbench.kernels._lib import conv_backward, conv_depthwise_wgrad
    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    op = "convolution_backward.default"
    eager = torch.ops.aten.convolution_backward.default
    configs = list(itertools.product([int(t) for t in ns.tiles.split(",")],
                                     [int(w) for w in ns.warps.split(",")]))  # fmt: skip
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"),
                           "device": torch.cuda.get_device_name() if ns.device == "cuda" else "cpu",
                           "torch": torch.__version__, "command": "python3 " + " ".join(sys.argv),
                           "rows": []}  # fmt: skip
    for half in HALVES:
        for r in rows(ns.traces, half, ns.limit, (op,), DEPTHWISE):
            call, kw = make_inputs(op, parse_args(r["args"]), ns.device, 0)
            want = eager(*call, **kw)

            def bench(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> float:
                if ns.device != "cuda":
                    return 1.0  # the smoke test: nothing timed
                return float(triton.testing.do_bench(lambda: fn(*args, **kwargs), warmup=10,
                                                     rep=40, return_mode="median"))  # fmt: skip

            row: dict[str, Any] = {"half": half, "args": r["args"], "weight": r["weight"],
                                   "eager_ms": bench(eager, call, kw)}  # fmt: skip
            wmask = list(call[-1])
            wmask[0] = False  # the weight (and bias) gradient alone
            wcall = [*call[:-1], wmask]
            row["eager_wgrad_ms"] = bench(eager, wcall, kw)
            for tile, warps in configs:
                conv_depthwise_wgrad.DWG_TILE, conv_depthwise_wgrad.DWG_WARPS = tile, warps
                key = f"{tile}x{warps}"
                got = conv_backward.convolution_backward(*call, **kw)
                if not _agrees(got, want):
                    row[key] = "wrong"
                    continue
                row[key + "_ms"] = bench(conv_backward.convolution_backward, call, kw)
                row[key + "_wgrad_ms"] = bench(conv_backward.convolution_backward, wcall, kw)
            out["rows"].append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                              for k, v in row.items() if k != "args"}), flush=True)  # fmt: skip
            out["summary"] = summarize(out["rows"], configs)
            if ns.out:  # after every row: a call cut short keeps what it measured
                Path(ns.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["summary"], indent=1))


def summarize(measured: list[dict[str, Any]], configs: list[tuple[int, int]]) -> dict[str, Any]:
    """Per half and configuration: rows, wrong ones, and the geomean speed-ups of the whole
    backward and of the weight gradient alone over eager's."""
    from conv_heldout import HALVES

    summary = {}
    for half in HALVES:
        rs = [r for r in measured if r["half"] == half]
        for tile, warps in configs:
            key = f"{tile}x{warps}"
            ok = [r for r in rs if key + "_ms" in r]
            summary[f"{half} {key}"] = {
                "rows": len(rs), "wrong": sum(r.get(key) == "wrong" for r in rs),
                "backward_vs_eager": _geo([r["eager_ms"] / r[key + "_ms"] for r in ok]),
                "wgrad_vs_eager_wgrad": _geo([r["eager_wgrad_ms"] / r[key + "_wgrad_ms"]
                                              for r in ok]),
            }  # fmt: skip
    return summary


if __name__ == "__main__":
    main()
