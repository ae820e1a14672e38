"""The Python cost of the pointer matmul kernel's host path, its launch stubbed out: what
the host spends around ``_mm`` (layouts, alignment, split plan, the launch's arguments)
on the CPU machine, no GPU. Best of 5 windows of ``--calls`` calls, in microseconds:
``matmul_into`` with a configuration (what the shape rule and the convolutions call),
and the ``bmm`` entry point (checks, output, the shape rule's ranking, then the same).

Why: on an H200 the matmul's host path read 23-56 us a call around 5-10 us kernels
(``matmul_rule_probe.py``, 2026-11-29), so the 1-4 GFLOP products are host-bound when
called back to back. The entry points' lanes now skip this path on repeat calls that one
TMA launch serves (``matmul_lane.py`` times them); the pointer kernel's calls still take it.

Usage (compare two trees in separate processes, alternating, and take each one's best):
    python benchmarks/probes/matmul_host_path.py --src OLD/src
    python benchmarks/probes/matmul_host_path.py --src src
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def best_us(fn: Any, calls: int) -> float:
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
    return round(best, 1)


class _StubLauncher:
    """The pointer kernel's launcher with the launch left out: it compiles nothing, so a
    matmul lane has no compiled launch to repeat (``compiled_for`` gives None)."""

    def __call__(self, grid: object, args: object, **constexprs: object) -> None:
        return None

    def compiled_for(self, *a: object, **k: object) -> None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="src", help="the source tree to import opbench from")
    ap.add_argument("--calls", type=int, default=5000)
    ns = ap.parse_args()
    sys.path.insert(0, ns.src)
    import torch

    from opbench.kernels._lib import matmul

    matmul._INTERPRETING = False  # the compiled path's Python, not the interpreter's
    matmul.mm_launcher = _StubLauncher()
    matmul.sm_count = lambda device: 132
    h = torch.float16
    a, b = torch.randn(36, 512, 64, dtype=h), torch.randn(36, 64, 512, dtype=h)
    out = torch.empty(36, 512, 512, dtype=h)
    x2, w = torch.randn(2048, 768, dtype=h), torch.randn(768, 768, dtype=h).t()
    out2 = torch.empty(1, 2048, 768, dtype=h)
    bias = torch.randn(768, dtype=h).expand(1, 2048, 768)
    cases = {
        "matmul_into bmm 36x512x512x64": lambda: matmul.matmul_into(
            out, a, b, None, 1.0, 1.0, (64, 64, 64, 8, 4, 4)),
        "matmul_into addmm 2048x768x768, bias": lambda: matmul.matmul_into(
            out2, x2[None], w[None], bias, 1.0, 1.0, (128, 128, 64, 8, 4, 4)),
        "bmm entry 36x512x512x64": lambda: matmul.bmm(a, b),
    }  # fmt: skip
    print({name: best_us(fn, ns.calls) for name, fn in cases.items()})


if __name__ == "__main__":
    main()
