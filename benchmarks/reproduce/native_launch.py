"""What one elementwise call costs through a backend, as a model calls it: eager, the
reference Triton backend with the C++ gate's native launch, the same backend on its Python
path alone (``native=False``), and a call the gate sends to eager (a serve policy that
declines its shape class).

Host-inclusive µs per call: ``torch.<op>`` called from Python back to back, best of 5 x
2,000 calls with the device synchronised after each batch (``launch_profile.per_call_us``);
a 1,024-element op takes ~2 µs on the device, so the number is the host's. Every side's
result is checked against eager first.

Usage (GPU machine): python3 benchmarks/reproduce/native_launch.py [--out FILE.json]
Writes the JSON (device, versions, command, rows) and the same table as FILE.md, and
prints the table. Committed: ``benchmarks/results/native-launch-<gpu>.json``/``.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_profile import per_call_us  # noqa: E402

from opbench.backends import registry  # noqa: E402
from opbench.backends.loader import load_backend, reference_kernels_folder  # noqa: E402
from opbench.backends.serve_policy import OpPolicy, ServePolicy  # noqa: E402

N = 1024


def _cases() -> list[tuple[str, str, Any, int]]:
    """(label, overload, call, operands)."""
    f = torch.nn.functional
    return [
        ("add (a + b)", "add.Tensor", lambda a, b: a + b, 2),
        ("mul by a number (a * 0.5)", "mul.Tensor", lambda a: a * 0.5, 1),
        ("in-place add (a.add_(b))", "add_.Tensor", lambda a, b: a.add_(b), 2),
        ("relu", "relu.default", lambda a: torch.relu(a), 1),
        ("gelu", "gelu.default", lambda a: f.gelu(a), 1),
        (
            "threshold_backward",
            "threshold_backward.default",
            lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.0),
            2,
        ),  # fmt: skip
    ]


def _declining(op: str) -> ServePolicy:
    """A policy that serves ``op`` for one shape class the benchmark never calls."""
    entry = OpPolicy(serve=True, default=False, classes={"f64:4^0": {"serve": True}})
    return ServePolicy(device="cuda", measure="host", min_speedup=1.0, source="-", ops={op: entry})


def measure(dtype: torch.dtype = torch.float16) -> list[dict[str, Any]]:
    be = load_backend(str(reference_kernels_folder()), "cuda")
    rows = []
    for label, op, call, k in _cases():
        args = [torch.randn(N, device="cuda", dtype=dtype) for _ in range(k)]
        fresh = [a.clone() for a in args]  # an in-place op changes args while it is timed
        expected = call(*[a.clone() for a in fresh])
        row: dict[str, Any] = {"op": label, "overload": op, "dtype": str(dtype), "numel": N}
        row["eager"] = per_call_us(lambda call=call, args=args: call(*args))
        for side, kw in (
            ("native", {"native": True}),
            ("python", {"native": False}),
            ("declined", {"native": True, "policy": _declining(op)}),
        ):
            with registry.backend(be, "cuda", ops=[op], **kw):
                got = call(*[a.clone() for a in fresh])
                torch.testing.assert_close(got, expected, equal_nan=True)
                registry.reset_counts()
                row[side] = per_call_us(lambda call=call, args=args: call(*args))
                counts = registry.call_counts()[op]
            taken = {"native": "native", "python": "served", "declined": "declined"}[side]
            calls = sum(v for key, v in counts.items() if key != "native")
            if side == "native":
                calls = counts["served"]
            row[f"{side} share"] = round(counts.get(taken, 0) / max(1, calls), 3)
        row["native - eager"] = round(row["native"] - row["eager"], 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    head = "| op (f16, 1,024 elements) | eager µs | native µs | native - eager | Python path µs | declined by policy µs |"
    lines = [head, "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(
            f"| {r['op']} | {r['eager']:.2f} | {r['native']:.2f} | {r['native - eager']:+.2f} | "
            f"{r['python']:.2f} | {r['declined']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    t0 = time.time()
    rows = measure()
    result = {
        "what": "host-inclusive us per call from Python, best of 5 x 2,000, device synced per batch",
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python3 benchmarks/reproduce/native_launch.py " + " ".join(sys.argv[1:]),
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }
    table = markdown(rows)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
        head = (
            f"# Launch cost through the backend: the C++ gate ({result['device']})\n\n"
            f"{result['date']}, torch {result['torch']}, triton {result['triton']}, "
            f"`{result['command']}`\n\n{result['what']}. native: the C++ gate launches the "
            "Triton kernel itself; Python path: the same backend with `native=False`; "
            "declined: a serve policy sends the call to eager's kernel from the gate.\n\n"
        )
        a.out.with_suffix(".md").write_text(head + table + "\n")
    print(table)


if __name__ == "__main__":
    main()
