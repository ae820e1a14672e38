"""Where a small elementwise call's time goes, ours against eager's and FlagGems': the
held-out rows FlagGems led on in turns on one H200 (``hardsigmoid`` by 0.1-0.25 µs of a
3.5 µs call, ``rsqrt`` by 0.3-0.8%: ``flag_gems-alternate-h200-2026-11-30.md``), with
``hardswish_`` and ``clamp`` beside them, where the runs overlapped.

Two clocks per callable and row, so a gap can be put on the kernel or on its launch:

- ``kernel_us``: the GPU's own duration of the call's kernels (CUPTI, through
  ``torch.profiler``), mean over 200 calls;
- ``event_us``: the judge's device time (``benchmarks/tune/matmul_timing.py``'s
  ``device_bench``: L2 overwritten, GPU kept busy while the host queues the call, events
  around the call), median of 41. It holds the launch's cost on the GPU beside the kernel.

Ours runs as shipped and in variants that each change one thing: the small-input tile
(``pointwise.MIN_BLOCK``/``SMALL_EPT``: FlagGems' pointwise code takes 512-element tiles
of 4 warps), and for ``hardsigmoid`` the formula (``* (1 / 6)``, CUDA eager's, against
the shipped ``/ 6``, eager's vectorised CPU kernel's). Each variant's result is compared
with eager's before it is timed.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh`` with FlagGems' wheels
carried in .whl/fg):
    python3 benchmarks/probes/small_elementwise.py --out $OUT/small-elementwise.json
then, on any machine, the report of a committed run:
    python benchmarks/probes/small_elementwise.py --report benchmarks/results/small-elementwise-h200-2026-11-30.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from kernel_times import kernel_times_us  # noqa: E402

from opbench.kernels._lib.device_math import libdevice  # noqa: E402

__all__ = ["ROWS", "TILES", "main", "report"]

#: the held-out rows (``src/opbench/suites/trace_split.json``) of the four ops, f16
ROWS: list[tuple[str, tuple[int, ...]]] = [
    ("hardsigmoid", (32, 672, 1, 1)),
    ("hardsigmoid", (32, 120, 1, 1)),
    ("rsqrt", (32, 1, 28, 28)),
    ("rsqrt", (32, 1, 14, 14)),
    ("hardswish_", (32, 672, 1, 1)),
    ("clamp", (32, 1, 28, 28)),
]
#: (MIN_BLOCK, SMALL_EPT) variants of the small-input tile; the first is what ships
TILES = [(128, 1), (512, 4), (1024, 8)]


def _eager(op: str) -> Callable[[Any], Any]:
    import torch

    return {
        "hardsigmoid": torch.nn.functional.hardsigmoid,
        "rsqrt": torch.rsqrt,
        "hardswish_": lambda x: torch.ops.aten.hardswish_(x),
        "clamp": lambda x: torch.clamp(x, -0.5, 0.5),
    }[op]


def _ours(op: str) -> Callable[[Any], Any]:
    """The function the op's kernel folder registers (``src/opbench/kernels/<op>``)."""
    from opbench.kernels._lib import activations, math_ops

    return {
        "hardsigmoid": activations.hardsigmoid,
        "rsqrt": math_ops.rsqrt,
        "hardswish_": activations.hardswish_,
        "clamp": lambda x: math_ops.clamp(x, -0.5, 0.5),
    }[op]


@triton.jit
def _hardsigmoid_mul(a, b, c, p0, p1):
    t = a + 3.0
    t = tl.where(t < 0.0, 0.0, t)
    t = tl.where(t > 6.0, 6.0, t)
    return t * (1.0 / 6.0)


@triton.jit
def _rsqrt_libdevice(a, b, c, p0, p1):
    return libdevice.rsqrt(a)


@triton.jit
def _hardsigmoid_max_nan(a, b, c, p0, p1):
    t = tl.maximum(a + 3.0, 0.0, propagate_nan=tl.PropagateNan.ALL)
    t = tl.minimum(t, 6.0, propagate_nan=tl.PropagateNan.ALL)
    return t * (1.0 / 6.0)


@triton.jit
def _lean(a_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=1).to(tl.float32)
    y = FN(a, a, a, a, a)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _variants(op: str) -> list[tuple[str, Callable[[Any], Any], tuple[int, int]]]:
    """Ours changed one way each: the formula (``hardsigmoid``'s ``* (1 / 6)``, CUDA
    eager's, and with NaN-propagating ``max``/``min`` in place of the selects; ``rsqrt`` through libdevice's, CUDA eager's ``rsqrtf``), and a lean kernel of
    three parameters (input, output, count: FlagGems' signature) running our scalar
    function in place of the flat kernel's ten (four pointers, the count and five
    float64 numbers) with its uniform branch, at our tile and at FlagGems' 1024."""
    from opbench.kernels._lib import activations, math_ops, pointwise
    from opbench.kernels._lib.pointwise import unary

    scalar = {"hardsigmoid": activations._hardsigmoid, "rsqrt": math_ops._rsqrt,
              "hardswish_": activations._hardswish, "clamp": None}[op]  # fmt: skip
    out: list[tuple[str, Callable[[Any], Any], tuple[int, int]]] = []
    if op == "hardsigmoid":
        out.append(("ours * (1/6)", lambda x: unary(_hardsigmoid_mul, x, None, None), TILES[0]))
        out.append(
            ("ours max.NaN * (1/6)", lambda x: unary(_hardsigmoid_max_nan, x, None, None), TILES[0])
        )
    if op == "rsqrt":
        out.append(
            ("ours libdevice.rsqrt", lambda x: unary(_rsqrt_libdevice, x, None, None), TILES[0])
        )
    if scalar is not None and op != "hardswish_":
        for label, tile in (("our tile", None), ("1024", 1024)):

            def lean(x: Any, tile: Any = tile, fn: Any = scalar) -> Any:
                y = x.new_empty(x.shape)
                n = x.numel()
                grid, block, warps = (
                    pointwise.tile_plan(n) if tile is None else (-(-n // tile), tile, 4)
                )
                _lean[(grid,)](x, y, n, FN=fn, BLOCK=block, num_warps=warps)
                return y

            out.append((f"lean, {label}", lean, TILES[0]))  # fmt: skip
    return out


#: float32 edge values: NaN, infinities, signed zeros, denormals, the clamps' corners
EDGES = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -1e-40, 1e-30, 3.0, -3.0,
         2.5, 0.25, 100.0]  # fmt: skip


def _edges_agree(got: Any, want: Any) -> str:
    """ "yes", or the edge inputs whose result differs from eager's by more than 2 ulp
    (NaN where eager's is NaN, infinities and zeros with their sign)."""
    import torch

    bad = [
        f"{x}: {g} (eager {w})"
        for x, g, w in zip(EDGES, got.tolist(), want.tolist())
        if not (
            (g != g and w != w)
            or (g == w and math.copysign(1, g) == math.copysign(1, w))
            or (
                math.isfinite(w)
                and abs(g - w)
                <= 2 * abs(float(torch.tensor(w).nextafter(torch.tensor(math.inf)) - w))
            )
        )
    ]
    return "yes" if not bad else "; ".join(bad)


def kernel_us(fn: Callable[[], Any], calls: int = 200) -> float:
    """Mean GPU duration of one call's kernels (CUPTI), in µs."""
    return sum(kernel_times_us(fn, calls, warmup=10).values())


def _time(fn: Callable[[], Any], gems: Any) -> dict[str, float]:
    """Both clocks; FlagGems' calls inside one ``use_gems`` (entering it a call costs ms
    of host time, which outlasts the judge's busy wait and lands in the event clock)."""
    from matmul_timing import device_bench

    with gems.use_gems() if gems is not None else contextlib.nullcontext():
        return {"kernel_us": kernel_us(fn), "event_us": 1000.0 * device_bench(fn, reps=101)}


def measure(rounds: int = 3) -> list[dict[str, Any]]:
    """Every callable on every row, ``rounds`` times in turn; per callable the median
    round of each clock: eager, FlagGems, ours per tile, and the variants."""
    import statistics

    import torch

    from opbench.kernels._lib import pointwise

    try:
        import flag_gems
    except ImportError:
        flag_gems = None
    shipped = (pointwise.MIN_BLOCK, pointwise.SMALL_EPT)
    out: list[dict[str, Any]] = []
    for op, shape in ROWS:
        torch.manual_seed(0)
        base = torch.randn(shape, device="cuda", dtype=torch.float16) * 4
        if op == "rsqrt":
            base = base.abs() + 0.1
        eager = _eager(op)
        want = eager(base.clone())
        runs = [("eager", eager, shipped)]
        if flag_gems is not None:
            runs.append(("flag_gems", eager, shipped))
        ours = _ours(op)
        runs += [(f"ours {b}x{e}", ours, (b, e)) for b, e in TILES]
        runs += _variants(op)
        times: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in runs}
        agrees: dict[str, bool] = {}
        edge_ok: dict[str, str] = {}
        edges = torch.tensor(EDGES, device="cuda", dtype=torch.float32)
        edge_want = eager(edges.clone())
        for _ in range(rounds):
            for name, fn, (block, ept) in runs:
                pointwise.MIN_BLOCK, pointwise.SMALL_EPT = block, ept
                pointwise._FLAT_PLANS.clear()
                gems = flag_gems if name == "flag_gems" else None
                x = base.clone()
                if name not in agrees:
                    with gems.use_gems() if gems is not None else contextlib.nullcontext():
                        got = fn(x)
                        edge_got = fn(edges.clone())
                    agrees[name] = bool(torch.allclose(got.float(), want.float(), rtol=1e-3,
                                                       atol=1e-3, equal_nan=True))  # fmt: skip
                    edge_ok[name] = _edges_agree(edge_got, edge_want)
                times[name].append(_time(lambda fn=fn, x=x: fn(x), gems))
        pointwise.MIN_BLOCK, pointwise.SMALL_EPT = shipped
        pointwise._FLAT_PLANS.clear()
        for name, _, _ in runs:
            row = {"op": op, "shape": list(shape), "callable": name, "agrees": agrees[name],
                   "edges": edge_ok[name],
                   "rounds": times[name],
                   **{k: statistics.median(t[k] for t in times[name]) for k in ("kernel_us", "event_us")}}  # fmt: skip
            out.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "rounds"}), flush=True)
    return out


def report(data: dict[str, Any]) -> str:
    """Markdown: per row, each callable's two clocks and their difference from eager's."""
    lines = [
        f"# Small elementwise calls: kernel and launch ({data['device']})", "",
        f"torch {data['torch']}, Triton {data['triton']}, FlagGems {data['flag_gems']}; "
        f"made with `{data['command']}`.", "",
        "kernel: the kernels' own GPU duration (CUPTI), mean of 200 calls. event: the "
        "judge's device time (events around the call, GPU kept busy), median of 101. "
        "Each the median of three rounds, every callable timed once a round in turn. "
        "The event clock minus the kernel clock is the launch's cost on the GPU.", "",
        "agrees: the row's result against eager's; edges: float32 NaN, infinities, signed "
        "zeros, denormals and the clamps' corners against eager's (2 ulp).", "",
        "| op | shape | callable | agrees | edges | kernel µs | event µs | event - kernel |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for r in data["rows"]:
        lines.append(
            f"| {r['op']} | {tuple(r['shape'])} | {r['callable']} | {'yes' if r['agrees'] else 'NO'} "
            f"| {r.get('edges', '-')} "
            f"| {r['kernel_us']:.2f} | {r['event_us']:.2f} | {r['event_us'] - r['kernel_us']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="JSON to write (and .md beside it)")
    parser.add_argument("--report", type=Path, help="print the report of a committed JSON")
    args = parser.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text())), end="")
        return 0
    import torch

    try:
        import flag_gems

        gems_version = getattr(flag_gems, "__version__", "?")
    except ImportError:
        gems_version = "absent"
    data = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": triton.__version__, "flag_gems": gems_version,
        "command": "python3 benchmarks/probes/small_elementwise.py --out ...",
        "rows": measure(),
    }  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(data, indent=1))
        args.out.with_suffix(".md").write_text(report(data))
    print(report(data), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
