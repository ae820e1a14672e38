"""Batch norm over NCHW planes whose positions are not a multiple of 16 (14x14: 196),
with the planes kernels' runs (``batch_norm_planes.plane_runs``: ``SV`` of 2-8 restated in
the kernel, so its tiles load and store as vectors) against without (``SV`` 1: 2-byte
accesses, as before 2026-12-01), on the traced rows of each half, by device time.

Each row's forward (``native_batch_norm``) or backward is checked against eager first
(``torch.testing.assert_close`` at the judge's 16-bit bounds); the timing is the judge's
device-time protocol (``benchmarks/tune/matmul_timing.py``'s ``device_bench``: L2
overwritten and the GPU kept busy while the host queues each call), median of 15. A row
whose runs come out 1 either way (7x7 planes) is the noise floor.

``--rows``: the row kernels instead (channels-last and 2-D inputs, whose channels are
adjacent): the traced rows whose first tensor is 2-D or has a channel stride of 1, with
``batch_norm.BN_ROW_VECTORS`` on (a row's channels read and written ``CV`` at a time)
against off; the runs column is then the ``CV`` the launches took.

``--variant NAME=MODULE.NAME=VALUE,...`` (repeatable): the same rows checked and timed
again under those settings of the backend's modules (plans made under them, the
defaults restored after), each against the defaults per half and op, the tuning half
first: how a setting of these kernels (``batch_norm.BN_MERGE_TILE``,
``BN_TARGET_PROGRAMS``, ``BN_FINALIZE_BLOCK``) is picked on one half and read on the
other. ``--device cpu`` (under ``TRITON_INTERPRET=1``): the checks alone, untimed.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/bn_plane_runs.py --traces .gpu_data/traces --limit 8 \\
        --out $OUT/bn-plane-runs [--rows] [--variant t256=batch_norm.BN_TARGET_PROGRAMS=256]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from kernel_overrides import overridden  # noqa: E402 (light: no Triton, no torch)

OPS = ("native_batch_norm.default", "native_batch_norm_backward.default")
#: An NCHW input (no stride given) whose positions are no multiple of 16
_SHAPE = re.compile(r"^\(\(T\(\[([\d, ]+)\], (f16|bf16|f32)\)")


def _positions(args: str) -> int | None:
    """The plane size of a row's first tensor, if it is a dense NCHW one of 3+ dims."""
    m = _SHAPE.match(args)
    if not m:
        return None
    dims = [int(d) for d in m.group(1).split(",")]
    return math.prod(dims[2:]) if len(dims) >= 3 else None


#: A row's first tensor: its sizes and, where given, its strides
_FIRST = re.compile(r"^\(\(T\(\[([\d, ]+)\], (?:f16|bf16|f32)(?:, stride=\(([\d, ]+)\))?\)")


def _row_layout(args: str) -> bool:
    """Whether a row's first tensor reaches the row kernels: 2-D, or a channel stride of
    1 over more than one channel (channels-last)."""
    m = _FIRST.match(args)
    if not m:
        return False
    sizes = [int(d) for d in m.group(1).split(",")]
    strides = [int(d) for d in m.group(2).split(",")] if m.group(2) else None
    return len(sizes) == 2 or (strides is not None and strides[1] == 1 and sizes[1] > 1)


def rows(traces: str, half: str, limit: int, ops: tuple[str, ...] = OPS,
         row_kernels: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """The ``limit`` most used distinct rows of ``half`` per op of ``ops`` whose planes are
    no multiple of 16 positions (``row_kernels``: whose input the row kernels serve)."""
    from opbench.suites.trace_files import load_traces
    from opbench.suites.trace_split import select, without_heldout

    entries = load_traces(traces)
    chosen = without_heldout(entries) if half == "tuning" else select(entries, "heldout")
    weights: dict[tuple[str, str], int] = defaultdict(int)
    for e in chosen:
        if e.op not in ops:
            continue
        s = _positions(e.args)
        if _row_layout(e.args) if row_kernels else (s is not None and s % 16):
            weights[(e.op, e.args)] += max(e.count, 1)
    out = []
    for op in ops:
        mine = sorted(((w, a) for (o, a), w in weights.items() if o == op), reverse=True)
        out += [{"half": half, "op": op, "args": a, "weight": w} for w, a in mine[:limit]]
    return out


def _check(got: Any, want: Any) -> None:
    """Each tensor of ``got`` against eager's ``want``, scaled by the output's magnitude: a
    16-bit grad_weight of 6,272 summed terms is 100-1000 large, a unit of rounding 0.06-0.5
    (conv_heldout's bound)."""
    import torch

    for w, g in zip(want, got):
        if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) and w.numel():
            scale = max(float(w.float().abs().max()), 1.0)
            torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=2e-2 * scale)


def measure(
    row: dict[str, Any], row_kernels: bool = False, variants: dict[str, list[str]] | None = None,
    device: str = "cuda",
) -> dict[str, Any]:  # fmt: skip
    """The row checked against eager, then timed with and without the runs (the row
    kernels' channel vectors); under each of ``variants`` (name -> ``MODULE.NAME=VALUE``
    settings, the defaults otherwise, restored after) checked and timed again
    (``variants[name]["ms"]``). On the CPU (Triton's interpreter) the checks alone."""
    import torch

    from opbench.kernels._lib import batch_norm, batch_norm_backward, batch_norm_planes
    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    timed = device.startswith("cuda")
    if timed:
        from matmul_timing import device_bench
    args, kw = make_inputs(row["op"], parse_args(row["args"]), device, 0)
    forward = row["op"].startswith("native_batch_norm.")
    ours = batch_norm.batch_norm if forward else batch_norm_backward.batch_norm_backward
    eager = (torch.ops.aten.native_batch_norm if forward
             else torch.ops.aten.native_batch_norm_backward)  # fmt: skip
    plans = (batch_norm._BN_FWD_PLANS, batch_norm_backward._BN_BWD_PLANS)

    def fresh() -> list[Any]:  # running statistics are updated in place: a copy a call
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    want = eager(*fresh(), **kw)
    # both kernels checked, each under its own plans: the row kernels' setting joins their
    # plans' keys (a check with the setting off alone let the vectors go unchecked)
    for on in (True, False) if row_kernels else (batch_norm.BN_ROW_VECTORS,):
        with overridden([f"batch_norm.BN_ROW_VECTORS={on}"], plans):
            _check(ours(*fresh(), **kw), want)
    out = dict(row, runs=None)
    for name, settings in (variants or {}).items():
        with overridden(settings, plans):
            _check(ours(*fresh(), **kw), want)
            call = fresh()
            v = {"settings": settings, "correct": True}
            if timed:
                v["ms"] = device_bench(lambda c=call: ours(*c, **kw))
        out.setdefault("variants", {})[name] = v
    if not timed:
        return out
    # the backward imports row_vector by name: the spy replaces it in the op's own module
    module, name = (
        ((batch_norm if forward else batch_norm_backward), "row_vector") if row_kernels
        else (batch_norm_planes, "plane_runs")
    )  # fmt: skip
    real = getattr(module, name)
    seen: list[int] = []

    def spy(*a: Any) -> int:
        seen.append(real(*a))
        return seen[-1]

    setattr(module, name, spy)
    try:
        call = fresh()
        # the row kernels' setting joins their plans' keys; the planes' runs are read per plan
        with overridden([f"batch_norm.BN_ROW_VECTORS={row_kernels}"] if row_kernels else [], plans):
            out["runs_ms"] = device_bench(lambda: ours(*call, **kw))
        if row_kernels:
            scalar = ["batch_norm.BN_ROW_VECTORS=False"]
        else:
            scalar = []
            setattr(module, name, lambda *a: 1)
        with overridden(scalar, plans):
            out["scalar_ms"] = device_bench(lambda: ours(*call, **kw))
    finally:
        setattr(module, name, real)
    out["runs"] = max(seen) if seen else None
    out["eager_ms"] = device_bench(lambda: eager(*call, **kw))
    return out


def variant_lines(measured: list[dict[str, Any]]) -> list[str]:
    """Per variant, half and op: the geomean of the defaults' time over the variant's
    (> 1: the variant faster), the tuning half first to decide on, the held-out beside."""
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in measured:
        for name, v in r.get("variants", {}).items():
            if v.get("ms") and r.get("runs_ms"):
                groups[(name, r["half"], r["op"])].append(r["runs_ms"] / v["ms"])
    if not groups:
        return []
    lines = ["", "Each variant against the defaults (geomean of defaults' ms over the variant's; "
             "> 1: the variant faster; decide on the tuning half):", "",
             "| variant | half | op | rows | geomean speed-up |", "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for (name, half, op), xs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "tuning", kv[0][2])
    ):
        g = math.exp(sum(map(math.log, xs)) / len(xs))
        lines.append(f"| {name} | {half} | {op} | {len(xs)} | {g:.3f} |")
    return lines


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name() if device.startswith("cuda") else "CPU (checks only)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", required=True)
    ap.add_argument("--limit", type=int, default=8, help="rows a half and op")
    ap.add_argument("--out", required=True, help="path prefix: .json and .md are written")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated, of " + ", ".join(OPS))
    ap.add_argument(
        "--rows",
        action="store_true",
        help="the row kernels' channel vectors (2-D and channels-last inputs)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=MODULE.NAME=VALUE,...",
        help="settings to time against the defaults on every row (repeatable)",
    )
    ap.add_argument("--device", default="cuda", help="cuda (timed) or cpu (checks alone)")
    ns = ap.parse_args()
    ops = tuple(ns.ops.split(","))
    variants = {}
    for item in ns.variant:
        name, _, settings = item.partition("=")
        variants[name] = [x for x in settings.split(",") if x]
    import torch

    measured = []
    for half in ("tuning", "heldout"):
        for row in rows(ns.traces, half, ns.limit, ops, ns.rows):
            try:
                measured.append(measure(row, ns.rows, variants, ns.device))
            except Exception as e:  # recorded, the run goes on
                measured.append(dict(row, error=f"{type(e).__name__}: {str(e)[:200]}"))
            r = measured[-1]
            print(r["half"], r["op"], r["args"][:60], r.get("runs"),
                  r.get("scalar_ms"), r.get("runs_ms"), r.get("error", ""), flush=True)  # fmt: skip
    lines = [
        "# Batch norm rows (channels-last, 2-D): channel vectors against 2-byte"
        if ns.rows
        else "# Batch norm planes of no multiple of 16 positions: vector runs against 2-byte",
        "",
        f"{_device_name(ns.device)}, torch {torch.__version__}. `{' '.join(sys.argv)}`",
        "",
        "Device time (ms, median of 15, L2 overwritten); speed-up: without runs over with.",
        "",
        "| half | op | runs | rows | geomean speed-up | geomean eager / ours (runs) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in measured:
        if "error" not in r:
            groups[(r["half"], r["op"], r["runs"])].append(r)
    for (half, op, runs), rs in (
        sorted(groups.items(), key=str) if ns.device.startswith("cuda") else ()
    ):
        gain = math.exp(sum(math.log(r["scalar_ms"] / r["runs_ms"]) for r in rs) / len(rs))
        vs = math.exp(sum(math.log(r["eager_ms"] / r["runs_ms"]) for r in rs) / len(rs))
        lines.append(f"| {half} | {op} | {runs} | {len(rs)} | {gain:.3f} | {vs:.3f} |")
    lines += variant_lines(measured)
    errors = [r for r in measured if "error" in r]
    lines += ["", f"Errors: {len(errors)}"] + [f"- {r['args'][:80]}: {r['error']}" for r in errors]
    Path(ns.out + ".md").write_text("\n".join(lines) + "\n")
    Path(ns.out + ".json").write_text(json.dumps(
        {"device": _device_name(ns.device), "torch": torch.__version__,
         "command": " ".join(sys.argv), "rows": measured}, indent=1) + "\n")  # fmt: skip
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
