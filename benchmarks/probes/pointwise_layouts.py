"""The elementwise kernels on channels-last results: as shipped (the strided kernel in the
result's memory order, ``pointwise._memory_order``; operands laid out as the result on
the flat kernel, ``pointwise.FLAT_DENSE_LAYOUTS``), the strided kernel alone in memory
order, and the logical order it walked before, each checked against eager first, by the
GPU's own kernel time (CUPTI through ``torch.profiler``, mean over 50 calls) beside
eager's. The 2026-12-02 run (``pointwise-layouts-h200-2026-12-02.json``) predates the
flat route: its ``memory`` column is this one's ``strided``.

Why: the held-out half's every-row part 1 of 16 (H200, 2026-12-02,
``triton-heldout-h200-all-rows-shard-1-of-16-partial.md``) read ``add.Tensor`` of a
channels-last ``[32, 512, 14, 14]`` and a ``[512, 1, 1]`` bias at 0.209x eager: in
logical order the kernel's lanes were ``C`` elements apart. The rows: that one, the same
bias on other ConvNeXt/EfficientNet-like shapes, a channels-last pair, and unary ops on
a channels-last tensor (``relu``, ``sigmoid``: every channels-last model's activations
that are not fused into a convolution).

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/pointwise_layouts.py --out $OUT/pointwise-layouts.json
On the CPU (Triton's interpreter, small shapes, no timing): ``--check`` compares every
walk with eager and exits non-zero on a mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))

__all__ = ["ROWS", "main", "orders"]

#: (op, image shape [N, C, H, W] made channels-last, second operand: "bias" ([C, 1, 1]),
#: "same" (another channels-last image) or None (unary))
ROWS: list[tuple[str, tuple[int, int, int, int], str | None]] = [
    ("add", (32, 512, 14, 14), "bias"),
    ("add", (32, 128, 56, 56), "bias"),
    ("mul", (128, 80, 14, 14), "bias"),
    ("add", (32, 256, 28, 28), "same"),
    ("relu", (32, 256, 28, 28), None),
    ("sigmoid", (128, 48, 28, 28), None),
]


def _operands(shape: tuple[int, ...], second: str | None, device: str) -> list[Any]:
    import torch

    g = torch.Generator().manual_seed(0)
    image = torch.randn(*shape, generator=g).half().to(device).to(memory_format=torch.channels_last)
    if second == "bias":
        return [image, torch.randn(shape[1], 1, 1, generator=g).half().to(device)]
    if second == "same":
        return [image, torch.randn(*shape, generator=g).half().to(device)
                .to(memory_format=torch.channels_last)]  # fmt: skip
    return [image]


def _calls(op: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(ours, eager) for ``op``."""
    import torch

    from opbench.kernels._lib import activations as act
    from opbench.kernels._lib import arithmetic as ar

    aten = torch.ops.aten
    return {
        "add": (ar.add, aten.add.Tensor),
        "mul": (ar.mul, aten.mul.Tensor),
        "relu": (act.relu, aten.relu),
        "sigmoid": (act.sigmoid, aten.sigmoid),
    }[op]


def orders() -> dict[str, tuple[Callable[[Any], list[int]], bool]]:
    """The walks compared, (the strided kernel's order, ``FLAT_DENSE_LAYOUTS``): as
    shipped (``memory``); the strided kernel in memory order where operands laid out alike
    now take the flat kernel (``strided``, before the flat route); the logical order
    (``logical``, before 2026-12-02)."""
    from opbench.kernels._lib import pointwise as pw

    memory = pw._memory_order
    return {"memory": (memory, True), "strided": (memory, False),
            "logical": (lambda st: list(range(len(st))), False)}  # fmt: skip


def _set_order(walk: tuple[Callable[[Any], list[int]], bool]) -> None:
    from opbench.kernels._lib import pointwise as pw

    pw._memory_order, pw.FLAT_DENSE_LAYOUTS = walk
    pw._STRIDED_PLANS.clear()  # plans are cached on layouts: a new walk plans anew
    pw._PLANS.clear()


def _kernel_us(fn: Callable[..., Any], xs: list[Any]) -> float:
    """The GPU's kernel time of one call ``fn(*xs)``, µs (mean over 50)."""
    from kernel_times import kernel_times_us

    return round(sum(kernel_times_us(lambda: fn(*xs), calls=50).values()), 2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write the rows as JSON here")
    p.add_argument("--check", action="store_true",
                   help="CPU: compare every walk with eager on small shapes, no timing")  # fmt: skip
    args = p.parse_args(argv)
    import torch

    device = "cpu" if args.check else "cuda"
    walks = orders()
    rows = []
    for op, shape, second in ROWS:
        if args.check:
            shape = (2, shape[1] // 16, 3, 5)
        ours, eager = _calls(op)
        xs = _operands(shape, second, device)
        want = eager(*xs)
        row: dict[str, Any] = {"op": op, "shape": list(shape), "second": second}
        for name, walk in walks.items():
            _set_order(walk)
            got = ours(*xs)
            torch.testing.assert_close(got, want)
            if got.stride() != want.stride():
                raise SystemExit(f"{op} {shape}: strides {got.stride()} != eager's {want.stride()}")
            if not args.check:
                row[f"{name}_us"] = _kernel_us(ours, xs)
        _set_order(walks["memory"])
        if not args.check:
            row["eager_us"] = _kernel_us(eager, xs)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        meta = {"device": torch.cuda.get_device_name() if not args.check else "cpu",
                "torch": torch.__version__, "command": " ".join(sys.argv)}  # fmt: skip
        args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
